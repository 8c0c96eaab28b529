/* SPDX-License-Identifier: MIT */
/* The number parsers (parse.c): parse_uint(), the one strict integer
 * parser, parse_leading_uint() for numbers inside a text, and
 * parse_duration(), timeout(1)-style durations. */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"
#include "unit.h"

/* ---- parse_uint ---------------------------------------------------------- */

START_TEST(test_parse_uint_valid) {
        unsigned long v;

        ck_assert_int_eq(parse_uint("0", 0, 10, &v), 0);
        ck_assert_uint_eq(v, 0);
        ck_assert_int_eq(parse_uint("10", 0, 10, &v), 0);
        ck_assert_uint_eq(v, 10);
        ck_assert_int_eq(parse_uint("6", 6, 6, &v), 0);
        ck_assert_uint_eq(v, 6);
        ck_assert_int_eq(parse_uint("007", 0, 10, &v), 0);
        ck_assert_uint_eq(v, 7);
        ck_assert_int_eq(parse_uint("0", 0, 0, &v), 0);
        ck_assert_uint_eq(v, 0);
        ck_assert_int_eq(parse_uint("65535", 0, 65535, &v), 0);
        ck_assert_uint_eq(v, 65535);
        ck_assert_int_eq(parse_uint("2147483647", 1, INT32_MAX, &v), 0);
        ck_assert_uint_eq(v, 2147483647UL);
        ck_assert_int_eq(parse_uint("4294967295", 1, UINT32_MAX, &v), 0);
        ck_assert_uint_eq(v, 4294967295UL);
        ck_assert_int_eq(parse_uint("18446744073709551615", 0, ULONG_MAX, &v), 0);
        ck_assert_uint_eq(v, ULONG_MAX);
        ck_assert_int_eq(parse_uint("18446744073709551614", 0, ULONG_MAX - 1, &v), 0);
        ck_assert_uint_eq(v, ULONG_MAX - 1);
}
END_TEST

static const struct {
        const char *text;
        unsigned long min, max;
        int error;
} parse_uint_errors[] = {
        { NULL, 0, 10, -EINVAL },
        { "", 0, 10, -EINVAL },
        { "-1", 0, 10, -EINVAL },
        { "-0", 0, 10, -EINVAL },
        { "+1", 0, 10, -EINVAL },
        { " 1", 0, 10, -EINVAL },
        { "1 ", 0, 10, -EINVAL },
        { "1a", 0, 10, -EINVAL },
        { "a1", 0, 10, -EINVAL },
        { "0x10", 0, 100, -EINVAL },
        { "1.0", 0, 10, -EINVAL },
        { "1e3", 0, 10000, -EINVAL },
        { "11", 0, 10, -ERANGE },
        { "5", 6, 10, -ERANGE },
        { "0", 1, 10, -ERANGE },
        { "1", 0, 0, -ERANGE },
        { "65536", 0, 65535, -ERANGE },
        { "2147483648", 1, INT32_MAX, -ERANGE },
        { "4294967296", 1, UINT32_MAX, -ERANGE },
        { "18446744073709551615", 0, ULONG_MAX - 1, -ERANGE },
        { "18446744073709551616", 0, ULONG_MAX, -ERANGE },
        { "18446744073709551620", 0, ULONG_MAX, -ERANGE },
        { "99999999999999999999999999999", 0, ULONG_MAX, -ERANGE },
};

START_TEST(test_parse_uint_errors) {
        unsigned long v = 4242;
        int r = parse_uint(parse_uint_errors[_i].text, parse_uint_errors[_i].min, parse_uint_errors[_i].max, &v);

        ck_assert_msg(r == parse_uint_errors[_i].error, "'%s' in [%lu, %lu]: expected %d, got %d",
                      parse_uint_errors[_i].text ? parse_uint_errors[_i].text : "(null)", parse_uint_errors[_i].min,
                      parse_uint_errors[_i].max, parse_uint_errors[_i].error, r);
        ck_assert_uint_eq(v, 4242); /* untouched */
}
END_TEST

/* BUG (reported): text that is not a number at all is bad syntax (-EINVAL,
 * as strtonum(3) says "invalid"), even when its leading digits already
 * exceed max. parse_uint() checks the range digit by digit and returns
 * -ERANGE before it sees the bad character. */
START_TEST(test_bug_parse_uint_syntax_before_range) {
        unsigned long v;

        ck_assert_int_eq(parse_uint("99a", 0, 10, &v), -EINVAL);
        ck_assert_int_eq(parse_uint("99999999999999999999999x", 0, ULONG_MAX, &v), -EINVAL);
        ck_assert_int_eq(parse_uint("70000 ", 0, 65535, &v), -EINVAL);
        ck_assert_int_eq(parse_uint("2147483648-", 1, INT32_MAX, &v), -EINVAL);
}
END_TEST

/* ---- parse_duration ------------------------------------------------------ */

#define MS 1000ULL
#define S USEC_PER_SEC
#define DAY (86400ULL * USEC_PER_SEC)

static const struct {
        const char *text;
        uint64_t usec;
} durations[] = {
        { "10", 10 * S },
        { "0", 0 },
        { "0s", 0 },
        { "1s", 1 * S },
        { "1.5", 1500 * MS },
        { "1.5s", 1500 * MS },
        { "500ms", 500 * MS },
        { "0.5ms", 500 },
        { "0.001ms", 1 },
        { "2m", 120 * S },
        { "1.5m", 90 * S },
        { "1h", 3600 * S },
        { "0.5h", 1800 * S },
        { "1d", DAY },
        { "0.25d", DAY / 4 },
        { "1.999999999h", 7199999996ULL }, /* nine fraction digits, truncated to the µs */
        { ".5", 500 * MS },
        { "5.", 5 * S },
        { "007", 7 * S },
        { "0.0000001", 0 },  /* below a µs */
        { "30d", 30 * DAY }, /* the longest */
        { "720h", 30 * DAY },
        { "2592000", 30 * DAY },
        { "2592000000ms", 30 * DAY },
};

START_TEST(test_duration_valid) {
        uint64_t usec = 4242;
        int r = parse_duration(durations[_i].text, &usec);

        ck_assert_msg(r == 0, "'%s': expected success, got %d", durations[_i].text, r);
        ck_assert_msg(usec == durations[_i].usec, "'%s': expected %llu µs, got %llu", durations[_i].text,
                      (unsigned long long) durations[_i].usec, (unsigned long long) usec);
}
END_TEST

static const struct {
        const char *text;
        int error;
} duration_errors[] = {
        { NULL, -EINVAL },
        { "", -EINVAL },
        { ".", -EINVAL },
        { "s", -EINVAL },
        { "ms", -EINVAL },
        { ".s", -EINVAL },
        { "-1", -EINVAL },
        { "+1", -EINVAL },
        { " 1", -EINVAL },
        { "1 ", -EINVAL },
        { "1 s", -EINVAL },
        { "1S", -EINVAL },
        { "1sec", -EINVAL },
        { "1us", -EINVAL },
        { "1w", -EINVAL },
        { "1e3", -EINVAL },
        { "1.5.2", -EINVAL },
        { "1,5", -EINVAL },
        { "1ms5", -EINVAL },
        { "1h30m", -EINVAL },
        { "0x10", -EINVAL },
        { "inf", -EINVAL },
        { "31d", -ERANGE },
        { "30.5d", -ERANGE },
        { "721h", -ERANGE },
        { "2592001", -ERANGE },
        { "2592000.000001", -ERANGE },
        { "99999999999999999999", -ERANGE },
        { "18446744073709551616ms", -ERANGE },
};

START_TEST(test_duration_errors) {
        uint64_t usec = 4242;
        int r = parse_duration(duration_errors[_i].text, &usec);

        ck_assert_msg(r == duration_errors[_i].error, "'%s': expected %d, got %d",
                      duration_errors[_i].text ? duration_errors[_i].text : "(null)", duration_errors[_i].error, r);
        ck_assert_uint_eq(usec, 4242); /* untouched */
}
END_TEST

/* BUG (reported): the fraction is scaled as frac * unit / frac_scale in
 * 64 bits; with nine fraction digits and the unit "d" (86400e6 µs) the
 * product exceeds 2^64: "0.999999999d" gives 12613 s instead of 86400 s,
 * "0.213503983d" 57 µs. */
START_TEST(test_bug_duration_fraction_overflow) {
        uint64_t usec = 0;

        ck_assert_int_eq(parse_duration("0.999999999d", &usec), 0);
        ck_assert_uint_eq(usec, 86399999913ULL);
        ck_assert_int_eq(parse_duration("0.213503983d", &usec), 0);
        ck_assert_uint_eq(usec, 18446744131ULL);
        ck_assert_int_eq(parse_duration("29.999999999d", &usec), 0);
        ck_assert_uint_eq(usec, 29 * DAY + 86399999913ULL);
}
END_TEST

START_TEST(test_format_uint) {
        static const struct {
                uint64_t v;
                const char *text;
        } cases[] = {
                { 0, "0" }, { 7, "7" }, { 10, "10" }, { 4194304, "4194304" }, { UINT64_MAX, "18446744073709551615" }
        };
        char buf[32];

        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                char *end = format_uint(buf, cases[i].v);

                ck_assert_str_eq(buf, cases[i].text);
                ck_assert_ptr_eq(end, buf + strlen(cases[i].text));
        }
}
END_TEST

/* Kernel releases, as uname(2) gives them (guard.c reads two numbers). */
START_TEST(test_parse_leading_uint) {
        static const struct {
                const char *text;
                unsigned long value;
                size_t digits;
        } cases[] = {
                { "6.1.0-13-amd64", 6, 1 },
                { "5.16", 5, 1 },
                { "16", 16, 2 },
                { "007x", 7, 3 },
                { "", 0, 0 },
                { "-1", 0, 0 },
                { ".4", 0, 0 },
                { "18446744073709551615.", ULONG_MAX, 20 },
                { "18446744073709551616", ULONG_MAX, 20 },
                { "99999999999999999999999", ULONG_MAX, 23 },
        };

        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                const char *end = NULL;

                ck_assert_uint_eq(parse_leading_uint(cases[i].text, &end), cases[i].value);
                ck_assert_ptr_eq(end, cases[i].text + cases[i].digits);
                ck_assert_uint_eq(parse_leading_uint(cases[i].text, NULL), cases[i].value);
        }
}
END_TEST

START_TEST(test_text_piece) {
        char buf[6] = "xxxxx";

        ck_assert(text_piece(buf, sizeof buf, "[::1]:80", 1) && strcmp(buf, "[") == 0);
        ck_assert(text_piece(buf, sizeof buf, "hostname", 5) && strcmp(buf, "hostn") == 0);
        /* No room for the NUL, or nothing to copy: buf untouched. */
        strcpy(buf, "xxxxx");
        ck_assert(!text_piece(buf, sizeof buf, "hostname", 6));
        ck_assert(!text_piece(buf, sizeof buf, "hostname", 0));
        ck_assert_str_eq(buf, "xxxxx");
}
END_TEST

static Suite *parse_suite(void) {
        Suite *s = suite_create("parse");
        TCase *tc;

        tc = tcase_create("parse_uint");
        tcase_add_test(tc, test_parse_uint_valid);
        tcase_add_loop_test(tc, test_parse_uint_errors, 0, ARRAY_SIZE(parse_uint_errors));
        tcase_add_test(tc, test_bug_parse_uint_syntax_before_range);
        suite_add_tcase(s, tc);

        tc = tcase_create("format_uint");
        tcase_add_test(tc, test_format_uint);
        suite_add_tcase(s, tc);

        tc = tcase_create("parse_leading_uint");
        tcase_add_test(tc, test_parse_leading_uint);
        tcase_add_test(tc, test_text_piece);
        suite_add_tcase(s, tc);

        tc = tcase_create("parse_duration");
        tcase_add_loop_test(tc, test_duration_valid, 0, ARRAY_SIZE(durations));
        tcase_add_loop_test(tc, test_duration_errors, 0, ARRAY_SIZE(duration_errors));
        tcase_add_test(tc, test_bug_duration_fraction_overflow);
        suite_add_tcase(s, tc);

        return s;
}

int main(void) {
        return unit_run(parse_suite());
}
