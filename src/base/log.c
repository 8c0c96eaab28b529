/* SPDX-License-Identifier: MIT */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat.h"
#include "log.h"

static enum log_level current_level = LOG_LEVEL_INFO;

void log_set_level(enum log_level level) {
        current_level = level;
}

enum log_level log_get_level(void) {
        return current_level;
}

/* Messages quote what users, activators and COMMAND said ('%s'): a
 * newline there would split the one line of an error, and an escape
 * sequence would reach the terminal. Control characters are written as
 * C escapes instead (\n, \t, \r, \xHH); other bytes are kept. */
static void escape_controls(const char *in, char *out, size_t size) {
        static const char hex[] = "0123456789abcdef";
        size_t o = 0;

        for (const unsigned char *p = (const unsigned char *) in; *p && o + 5 < size; p++) {
                if (*p >= ' ' && *p != 0x7f) {
                        out[o++] = (char) *p;
                        continue;
                }
                out[o++] = '\\';
                if (*p == '\n')
                        out[o++] = 'n';
                else if (*p == '\t')
                        out[o++] = 't';
                else if (*p == '\r')
                        out[o++] = 'r';
                else {
                        out[o++] = 'x';
                        out[o++] = hex[*p >> 4];
                        out[o++] = hex[*p & 0xf];
                }
        }
        out[o] = '\0';
}

__attribute__((format(printf, 3, 0)))
static void log_va(enum log_level level, int err, const char *format, va_list ap) {
        int saved_errno = errno;
        char line[1024], escaped[sizeof line * 4];

        if (level > current_level)
                return;
        if (err != 0)
                errno = abs(err);
#ifdef PREBIND_EXPAND_ERRNO
        char expanded[sizeof line];

        /* The C library's %m would say it in its own words. */
        format = prebind_expand_errno(format, errno, expanded, sizeof expanded);
#endif
        /* One write(2)-sized line, so concurrent writers on a shared stderr
         * never interleave within a message. */
        vsnprintf(line, sizeof line, format, ap);
        escape_controls(line, escaped, sizeof escaped);
        fprintf(stderr, "prebind: %s\n", escaped);
        fflush(stderr);
        errno = saved_errno;
}

const char *log_shorten(const char *s, char *buf) {
        if (strnlen(s, LOG_QUOTE_MAX + 1) <= LOG_QUOTE_MAX)
                return s;
        memcpy(buf, s, LOG_QUOTE_MAX);
        memcpy(buf + LOG_QUOTE_MAX, "...", 4);
        return buf;
}

void log_full(enum log_level level, int err, const char *format, ...) {
        va_list ap;

        va_start(ap, format);
        log_va(level, err, format, ap);
        va_end(ap);
}

int log_error_errno(int err, const char *format, ...) {
        va_list ap;

        va_start(ap, format);
        log_va(LOG_LEVEL_ERROR, err, format, ap);
        va_end(ap);
        return -abs(err);
}
