/* SPDX-License-Identifier: MIT */
/* The attempts' scheduling of --ready-exec and --ready-http (attempts.c)
 * and the tail of an --ready-exec attempt's output (exec_attempt.c):
 * attempts never overlap, start an interval apart, and are each bounded
 * by max(interval, 1s). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"
#include "attempts.h"
#include "exec_attempt.h"
#include "unit.h"

#define MS 1000ULL

START_TEST(test_attempt_timeout) {
        ck_assert_uint_eq(attempt_timeout(100 * MS), USEC_PER_SEC);
        ck_assert_uint_eq(attempt_timeout(1), USEC_PER_SEC);
        ck_assert_uint_eq(attempt_timeout(999 * MS), USEC_PER_SEC);
        ck_assert_uint_eq(attempt_timeout(USEC_PER_SEC), USEC_PER_SEC);
        ck_assert_uint_eq(attempt_timeout(USEC_PER_SEC + 1), USEC_PER_SEC + 1);
        ck_assert_uint_eq(attempt_timeout(30 * USEC_PER_SEC), 30 * USEC_PER_SEC);
}
END_TEST

START_TEST(test_next_bound) {
        /* Doubled after each attempt that ran out of time, up to the cap. */
        ck_assert_uint_eq(attempt_next_bound(USEC_PER_SEC), 2 * USEC_PER_SEC);
        ck_assert_uint_eq(attempt_next_bound(2 * USEC_PER_SEC), 4 * USEC_PER_SEC);
        ck_assert_uint_eq(attempt_next_bound(4 * USEC_PER_SEC), ATTEMPT_BOUND_MAX);
        ck_assert_uint_eq(attempt_next_bound(5 * USEC_PER_SEC), ATTEMPT_BOUND_MAX);
        ck_assert_uint_eq(attempt_next_bound(ATTEMPT_BOUND_MAX), ATTEMPT_BOUND_MAX);
        /* An interval longer than the cap stays the bound. */
        ck_assert_uint_eq(attempt_next_bound(30 * USEC_PER_SEC), 30 * USEC_PER_SEC);
        ck_assert_uint_eq(attempt_next_bound(attempt_timeout(100 * MS)), 2 * USEC_PER_SEC);
}
END_TEST

START_TEST(test_next_start) {
        /* A quick attempt: the next one an interval after this one began. */
        ck_assert_uint_eq(attempt_next_start(0, 20 * MS, 100 * MS), 100 * MS);
        ck_assert_uint_eq(attempt_next_start(5000 * MS, 5001 * MS, 100 * MS), 5100 * MS);
        /* A slow one: the next right after it, never during it. */
        ck_assert_uint_eq(attempt_next_start(0, 300 * MS, 100 * MS), 300 * MS);
        ck_assert_uint_eq(attempt_next_start(0, 100 * MS, 100 * MS), 100 * MS);
        ck_assert_uint_eq(attempt_next_start(7, 7, 1), 8);
}
END_TEST

/* A run of attempts that take durations[k] each (cut at the attempt
 * timeout, as the timer does): every start is at least an interval after
 * the last start, never before the last end, and as early as allowed. */
static const uint64_t intervals[] = { 1 * MS, 100 * MS, 250 * MS, 1000 * MS, 1500 * MS, 5000 * MS };

START_TEST(test_schedule_never_overlaps) {
        uint64_t interval = intervals[_i], timeout = attempt_timeout(interval), start = 0;
        uint64_t durations[] = { 0, 5 * MS, 99 * MS, 100 * MS, 101 * MS, 999 * MS, 1000 * MS, 3000 * MS, 7000 * MS };

        for (size_t round = 0; round < 3; round++)
                for (size_t k = 0; k < ARRAY_SIZE(durations); k++) {
                        uint64_t took = durations[k] < timeout ? durations[k] : timeout;
                        uint64_t end = start + took, next = attempt_next_start(start, end, interval);

                        ck_assert_uint_ge(next, end);
                        ck_assert_uint_ge(next - start, interval);
                        ck_assert_uint_eq(next, end > start + interval ? end : start + interval);
                        ck_assert_uint_le(took, timeout);
                        start = next;
                }
}
END_TEST

/* ---- the tail of an attempt's output --------------------------------------- */

START_TEST(test_keep_tail) {
        char buf[8];
        size_t len = 0;

        keep_tail(buf, &len, sizeof buf, "abc", 3);
        ck_assert_uint_eq(len, 3);
        ck_assert(memcmp(buf, "abc", 3) == 0);
        keep_tail(buf, &len, sizeof buf, "defgh", 5);
        ck_assert_uint_eq(len, 8);
        ck_assert(memcmp(buf, "abcdefgh", 8) == 0);
        keep_tail(buf, &len, sizeof buf, "ij", 2);
        ck_assert_uint_eq(len, 8);
        ck_assert(memcmp(buf, "cdefghij", 8) == 0);
        keep_tail(buf, &len, sizeof buf, "0123456789", 10);
        ck_assert_uint_eq(len, 8);
        ck_assert(memcmp(buf, "23456789", 8) == 0);
        keep_tail(buf, &len, sizeof buf, "", 0);
        ck_assert_uint_eq(len, 8);
        len = 0;
        keep_tail(buf, &len, sizeof buf, "12345678", 8);
        ck_assert_uint_eq(len, 8);
        ck_assert(memcmp(buf, "12345678", 8) == 0);
}
END_TEST

/* Whatever the cuts, the tail is the last bytes of the whole. */
START_TEST(test_keep_tail_any_cut) {
        const char *text = "the quick brown fox jumps over the lazy dog";
        size_t n = strlen(text);

        for (size_t a = 0; a <= n; a++)
                for (size_t b = a; b <= n; b++) {
                        char buf[16];
                        size_t len = 0;

                        keep_tail(buf, &len, sizeof buf, text, a);
                        keep_tail(buf, &len, sizeof buf, text + a, b - a);
                        keep_tail(buf, &len, sizeof buf, text + b, n - b);
                        ck_assert_uint_eq(len, sizeof buf);
                        ck_assert(memcmp(buf, text + n - sizeof buf, sizeof buf) == 0);
                }
}
END_TEST

static Suite *attempts_suite(void) {
        Suite *s = suite_create("attempts");
        TCase *tc = tcase_create("schedule");

        tcase_add_test(tc, test_attempt_timeout);
        tcase_add_test(tc, test_next_start);
        tcase_add_test(tc, test_next_bound);
        tcase_add_loop_test(tc, test_schedule_never_overlaps, 0, ARRAY_SIZE(intervals));
        suite_add_tcase(s, tc);

        tc = tcase_create("output");
        tcase_add_test(tc, test_keep_tail);
        tcase_add_test(tc, test_keep_tail_any_cut);
        suite_add_tcase(s, tc);
        return s;
}

int main(void) {
        return unit_run(attempts_suite());
}
