/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "parse.h"

char *format_uint(char *p, uint64_t v) {
        char digits[20];
        size_t n = 0;

        do
                digits[n++] = (char) ('0' + v % 10);
        while ((v /= 10) > 0);
        while (n > 0)
                *p++ = digits[--n];
        *p = '\0';
        return p;
}

int parse_uint(const char *text, unsigned long min, unsigned long max, unsigned long *ret) {
        unsigned long value = 0;

        /* Syntax first: "99a" is not a number, whatever its digits. */
        if (!text || !*text)
                return -EINVAL;
        for (const char *p = text; *p; p++)
                if (*p < '0' || *p > '9')
                        return -EINVAL;
        for (const char *p = text; *p; p++) {
                unsigned long digit;

                digit = (unsigned long) (*p - '0');
                if (digit > max || value > (max - digit) / 10)
                        return -ERANGE;
                value = value * 10 + digit;
        }
        if (value < min)
                return -ERANGE;
        *ret = value;
        return 0;
}

bool text_piece(char *buf, size_t size, const char *text, size_t len) {
        if (len == 0 || len >= size)
                return false;
        memcpy(buf, text, len);
        buf[len] = '\0';
        return true;
}

unsigned long parse_leading_uint(const char *text, const char **ret_end) {
        unsigned long value = 0;
        const char *p = text;

        for (; *p >= '0' && *p <= '9'; p++) {
                unsigned long digit = (unsigned long) (*p - '0');

                value = value > (ULONG_MAX - digit) / 10 ? ULONG_MAX : value * 10 + digit;
        }
        if (ret_end)
                *ret_end = p;
        return value;
}

int parse_duration(const char *text, uint64_t *ret_usec) {
        static const struct {
                char suffix[3]; /* not a pointer: nothing to relocate */
                uint64_t usec;
        } units[] = {
                { "ms", 1000 },
                { "s", USEC_PER_SEC },
                { "m", 60 * USEC_PER_SEC },
                { "h", 3600 * USEC_PER_SEC },
                { "d", 86400 * USEC_PER_SEC },
                { "", USEC_PER_SEC },
        };
        const uint64_t max = 30 * 86400 * USEC_PER_SEC;
        uint64_t whole = 0, frac = 0, frac_scale = 1, unit = 0;
        const char *p = text;
        size_t digits = 0;

        if (!text)
                return -EINVAL;
        for (; *p >= '0' && *p <= '9'; p++, digits++) {
                whole = whole * 10 + (uint64_t) (*p - '0');
                if (whole > max)
                        return -ERANGE;
        }
        if (*p == '.') {
                p++;
                for (; *p >= '0' && *p <= '9'; p++, digits++)
                        if (frac_scale < USEC_PER_SEC * 1000) {
                                frac = frac * 10 + (uint64_t) (*p - '0');
                                frac_scale *= 10;
                        }
        }
        if (digits == 0)
                return -EINVAL;
        for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
                if (strcmp(p, units[i].suffix) == 0) {
                        unit = units[i].usec;
                        break;
                }
        if (unit == 0)
                return -EINVAL;
        if (whole > max / unit)
                return -ERANGE;
        whole = whole * unit + (uint64_t) ((unsigned __int128) frac * unit / frac_scale);
        if (whole > max)
                return -ERANGE;
        *ret_usec = whole;
        return 0;
}
