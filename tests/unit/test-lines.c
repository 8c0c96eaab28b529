/* SPDX-License-Identifier: MIT */
/* --ready-log's lines (lines.c): the ERE matcher over lines that span
 * reads, the last-lines tail, every way of cutting the same output. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lines.h"
#include "unit.h"


static regex_t re;
static struct line_tail tail;
static struct line_matcher m;

static void use(const char *pattern) {
        char error[128];

        ck_assert_int_eq(line_regex_compile(&re, pattern, error, sizeof error), 0);
        ck_assert_int_eq(line_matcher_init(&m, &re, &tail), 0);
        line_tail_clear(&tail);
}

static void done(void) {
        line_matcher_done(&m);
        regfree(&re);
}

/* Output fed in every pair of cuts, and byte by byte: the first line
 * that matches is the same, and it matches when its newline arrives. */
static const struct {
        const char *pattern;
        const char *output;
        size_t len;             /* 0: strlen */
        const char *matched;    /* NULL: no line matches (before flush) */
        const char *flushed;    /* what matches at flush, if not before */
} cases[] = {
        { "ready", "starting\nready to accept\n", 0, "ready to accept", NULL },
        { "^ready$", "ready\n", 0, "ready", NULL },
        { "^ready$", "not ready\nready\n", 0, "ready", NULL },
        { "ready$", "ready\r\n", 0, "ready", NULL },            /* CRLF */
        { "^ready$", "ready\r\r\n", 0, NULL, NULL },            /* one \r only */
        { "database system is ready to accept connections",
          "LOG:  database system was shut down\nLOG:  database system is ready to accept connections\n", 0,
          "LOG:  database system is ready to accept connections", NULL },
        { "\\* Ready to accept connections", "1:M * Server initialized\n1:M * Ready to accept connections tcp\n", 0,
          "1:M * Ready to accept connections tcp", NULL },
        { "port [0-9]+", "listening on port 5432\n", 0, "listening on port 5432", NULL },
        { "^$", "\n", 0, "", NULL },                            /* an empty line */
        { "a|b", "xyz\nb\n", 0, "b", NULL },
        { "ready", "ready", 0, NULL, "ready" },                 /* no newline: only at EOF */
        { "ready", "abc\nrea", 0, NULL, NULL },
        { "ready", "rea\ndy\n", 0, NULL, NULL },                /* a newline splits it */
        { "ready", "a\0ready\n", 8, "a", NULL },                /* a NUL is a character */
        { "^ready", "a\0ready\n", 8, NULL, NULL },
        { "x\\.y", "xzy\nx.y\n", 0, "x.y", NULL },
        { "[[:digit:]]{3}", "12\n123\n", 0, "123", NULL },
        { "first|second", "first\nsecond\n", 0, "first", NULL }, /* the first match is kept */
};

/* Feed case i's output to the matcher (use()d with its pattern), cut at
 * cuts; the matcher is reset first, so one compiled pattern serves every
 * way of cutting (regcomp() and the 64 KiB line buffer per cut made the
 * every-cut case run past check's 4 s under ASan on a busy machine). */
static void check_feed(size_t i, const size_t *cuts, size_t n_cuts) {
        const char *out = cases[i].output;
        size_t len = cases[i].len ? cases[i].len : strlen(out), at = 0;
        const char *nl_after_match = NULL;

        line_matcher_reset(&m);
        line_tail_clear(&tail);
        for (size_t c = 0; c <= n_cuts; c++) {
                size_t end = c < n_cuts ? cuts[c] : len;
                bool hit;

                if (end < at)
                        end = at;
                if (end > len)
                        end = len;
                hit = line_matcher_feed(&m, out + at, end - at);
                /* A hit is reported in the call that completed the line. */
                if (hit && !nl_after_match)
                        nl_after_match = out + end;
                at = end;
        }
        if (cases[i].matched) {
                ck_assert_msg(m.matched, "case %zu: '%s' did not match", i, cases[i].pattern);
                ck_assert_str_eq(m.matched_line, cases[i].matched);
                ck_assert_ptr_nonnull(nl_after_match);
        } else {
                ck_assert_msg(!m.matched, "case %zu: matched '%s' too early", i, m.matched_line);
                ck_assert_int_eq(line_matcher_flush(&m), cases[i].flushed != NULL);
                if (cases[i].flushed)
                        ck_assert_str_eq(m.matched_line, cases[i].flushed);
        }
        /* A second flush has nothing left. */
        ck_assert(!line_matcher_flush(&m));
}

START_TEST(test_match_whole) {
        size_t none[1] = { 0 };

        use(cases[_i].pattern);
        check_feed((size_t) _i, none, 0);
        done();
}
END_TEST

START_TEST(test_match_every_cut) {
        size_t len = cases[_i].len ? cases[_i].len : strlen(cases[_i].output);

        use(cases[_i].pattern);
        for (size_t a = 0; a <= len; a++)
                for (size_t b = a; b <= len; b++) {
                        size_t cuts[] = { a, b };
                        check_feed((size_t) _i, cuts, 2);
                }
        done();
}
END_TEST

START_TEST(test_match_byte_by_byte) {
        size_t len = cases[_i].len ? cases[_i].len : strlen(cases[_i].output);
        size_t *cuts = calloc(len + 1, sizeof *cuts);

        for (size_t k = 0; k < len; k++)
                cuts[k] = k + 1;
        use(cases[_i].pattern);
        check_feed((size_t) _i, cuts, len);
        done();
        free(cuts);
}
END_TEST

START_TEST(test_long_line) {
        size_t len = LINE_MATCH_MAX + 1000;
        char *big = malloc(len + 1);

        /* Matched on its first LINE_MATCH_MAX bytes. */
        use("^x+$");
        memset(big, 'x', len);
        big[len] = '\n';
        ck_assert(line_matcher_feed(&m, big, len + 1));
        ck_assert_uint_eq(strlen(m.matched_line), LINE_TAIL_WIDTH);
        done();

        use("READY");
        memcpy(big + LINE_MATCH_MAX + 10, "READY", 5);
        ck_assert(!line_matcher_feed(&m, big, len + 1));
        /* The next line is a line of its own again. */
        ck_assert(line_matcher_feed(&m, "READY\n", 6));
        ck_assert_str_eq(m.matched_line, "READY");
        done();
        free(big);
}
END_TEST

START_TEST(test_reset) {
        use("ready");
        ck_assert(line_matcher_feed(&m, "ready\nrea", 9));
        ck_assert(m.matched);
        line_matcher_reset(&m);
        ck_assert(!m.matched);
        ck_assert_str_eq(m.matched_line, "");
        /* The partial "rea" is forgotten with the old COMMAND. */
        ck_assert(!line_matcher_feed(&m, "dy\n", 3));
        ck_assert(line_matcher_feed(&m, "ready\n", 6));
        done();
}
END_TEST

static const char *const bad_patterns[] = { "(", "a{1", "[", "a{2,1}", "\\", "[[:nope:]]" };

START_TEST(test_bad_pattern) {
        char error[128] = "";
        regex_t bad;

        ck_assert_int_eq(line_regex_compile(&bad, bad_patterns[_i], error, sizeof error), -EINVAL);
        ck_assert_msg(strlen(error) > 0, "'%s': no message", bad_patterns[_i]);
}
END_TEST

static const struct {
        const char *pattern;
        bool back_reference;
} back_references[] = {
        { "(a)\\1", true },
        { "\\9", true },
        { "x(.*)y\\1$", true },
        { "\\\\1", false },           /* an escaped backslash, then '1' */
        { "\\\\\\1", true },
        { "\\0", false },
        { "a\\.b", false },
        { "[\\1]", false },           /* a bracket: backslash and '1' */
        { "[]\\1]", false },          /* ']' first is a member */
        { "[^]\\1]x", false },
        { "[]\\1]\\1", true },
        { "[[:digit:]\\1]", false },
        { "[[:digit:]]\\1", true },
        { "[[.].]\\1]", false },       /* a collating element holds a ']' */
        { "[[=a=]]\\2", true },
        { "[a\\1", false },           /* unclosed: regcomp()'s to refuse */
        { "ready", false },
        { "", false },
        { "\\", false },
};

START_TEST(test_back_reference) {
        char error[128] = "";
        regex_t refused;

        ck_assert_msg(line_regex_has_back_reference(back_references[_i].pattern) == back_references[_i].back_reference,
                      "'%s'", back_references[_i].pattern);
        if (back_references[_i].back_reference) {
                ck_assert_int_eq(line_regex_compile(&refused, back_references[_i].pattern, error, sizeof error), -EINVAL);
                ck_assert_str_eq(error, "back-references (\\1 to \\9) are not supported");
        }
}
END_TEST

/* ---- the tail -------------------------------------------------------------- */

START_TEST(test_tail) {
        char line[32];

        line_tail_clear(&tail);
        ck_assert_uint_eq(tail.count, 0);
        ck_assert_ptr_null(line_tail_get(&tail, 0));
        for (int i = 0; i < 3; i++) {
                snprintf(line, sizeof line, "line %d", i);
                line_tail_add(&tail, line, strlen(line));
        }
        ck_assert_uint_eq(tail.count, 3);
        ck_assert_str_eq(line_tail_get(&tail, 0), "line 0");
        ck_assert_str_eq(line_tail_get(&tail, 2), "line 2");
        ck_assert_ptr_null(line_tail_get(&tail, 3));
        for (int i = 3; i < 25; i++) {
                snprintf(line, sizeof line, "line %d", i);
                line_tail_add(&tail, line, strlen(line));
        }
        ck_assert_uint_eq(tail.count, LINE_TAIL_LINES);
        for (size_t i = 0; i < LINE_TAIL_LINES; i++) {
                snprintf(line, sizeof line, "line %zu", 25 - LINE_TAIL_LINES + i);
                ck_assert_str_eq(line_tail_get(&tail, i), line);
        }
        line_tail_clear(&tail);
        ck_assert_uint_eq(tail.count, 0);
}
END_TEST

START_TEST(test_tail_from_two_streams) {
        struct line_matcher out, err;

        line_tail_clear(&tail);
        ck_assert_int_eq(line_matcher_init(&out, NULL, &tail), 0);
        ck_assert_int_eq(line_matcher_init(&err, NULL, &tail), 0);
        /* Lines do not mix across streams, and enter the tail as they end. */
        ck_assert(!line_matcher_feed(&err, "warn", 4));
        ck_assert(!line_matcher_feed(&out, "one\ntw", 6));
        ck_assert(!line_matcher_feed(&err, "ing\n", 4));
        ck_assert(!line_matcher_feed(&out, "o\n", 2));
        ck_assert(!line_matcher_feed(&out, "three", 5));
        ck_assert(!line_matcher_flush(&out));   /* no regex: never a match */
        ck_assert_uint_eq(tail.count, 4);
        ck_assert_str_eq(line_tail_get(&tail, 0), "one");
        ck_assert_str_eq(line_tail_get(&tail, 1), "warning");
        ck_assert_str_eq(line_tail_get(&tail, 2), "two");
        ck_assert_str_eq(line_tail_get(&tail, 3), "three");
        line_matcher_done(&out);
        line_matcher_done(&err);
}
END_TEST

START_TEST(test_tail_cuts_long_lines) {
        char big[LINE_TAIL_WIDTH * 2];

        line_tail_clear(&tail);
        memset(big, 'y', sizeof big);
        line_tail_add(&tail, big, sizeof big);
        ck_assert_uint_eq(strlen(line_tail_get(&tail, 0)), LINE_TAIL_WIDTH);
        line_tail_add(&tail, "", 0);
        ck_assert_str_eq(line_tail_get(&tail, 1), "");
}
END_TEST

static Suite *lines_suite(void) {
        Suite *s = suite_create("lines");
        TCase *tc = tcase_create("match");

        tcase_add_loop_test(tc, test_match_whole, 0, ARRAY_SIZE(cases));
        tcase_add_loop_test(tc, test_match_every_cut, 0, ARRAY_SIZE(cases));
        tcase_add_loop_test(tc, test_match_byte_by_byte, 0, ARRAY_SIZE(cases));
        tcase_add_test(tc, test_long_line);
        tcase_add_test(tc, test_reset);
        tcase_add_loop_test(tc, test_bad_pattern, 0, ARRAY_SIZE(bad_patterns));
        tcase_add_loop_test(tc, test_back_reference, 0, ARRAY_SIZE(back_references));
        suite_add_tcase(s, tc);

        tc = tcase_create("tail");
        tcase_add_test(tc, test_tail);
        tcase_add_test(tc, test_tail_from_two_streams);
        tcase_add_test(tc, test_tail_cuts_long_lines);
        suite_add_tcase(s, tc);
        return s;
}

int main(void) {
        return unit_run(lines_suite());
}
