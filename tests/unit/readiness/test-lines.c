/* SPDX-License-Identifier: MIT */
/* --ready-log's lines (lines.c): the ERE matcher over lines that span
 * reads, the last-lines tail, every way of cutting the same output. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lines.h"
#include "unit.h"

static struct line_regex *re;
static struct line_tail tail;
static struct line_matcher m;

static void use(const char *pattern) {
        char error[128];

        ck_assert_msg(line_regex_compile(pattern, &re, error, sizeof error) == 0, "'%s': %s", pattern, error);
        ck_assert_int_eq(line_matcher_init(&m, re, &tail), 0);
        line_tail_clear(&tail);
}

static void done(void) {
        line_matcher_done(&m);
        line_regex_free(re);
        re = NULL;
}

/* Output fed in every pair of cuts, and byte by byte: the first line
 * that matches is the same, and it matches when its newline arrives. */
static const struct {
        const char *pattern;
        const char *output;
        size_t len;          /* 0: strlen */
        const char *matched; /* NULL: no line matches (before flush) */
        const char *flushed; /* what matches at flush, if not before */
} cases[] = {
        { "ready", "starting\nready to accept\n", 0, "ready to accept", NULL },
        { "^ready$", "ready\n", 0, "ready", NULL },
        { "^ready$", "not ready\nready\n", 0, "ready", NULL },
        { "ready$", "ready\r\n", 0, "ready", NULL }, /* CRLF */
        { "^ready$", "ready\r\r\n", 0, NULL, NULL }, /* one \r only */
        { "database system is ready to accept connections",
          "LOG:  database system was shut down\nLOG:  database system is ready to accept connections\n", 0,
          "LOG:  database system is ready to accept connections", NULL },
        { "\\* Ready to accept connections", "1:M * Server initialized\n1:M * Ready to accept connections tcp\n", 0,
          "1:M * Ready to accept connections tcp", NULL },
        { "port [0-9]+", "listening on port 5432\n", 0, "listening on port 5432", NULL },
        { "^$", "\n", 0, "", NULL }, /* an empty line */
        { "a|b", "xyz\nb\n", 0, "b", NULL },
        { "ready", "ready", 0, NULL, "ready" }, /* no newline: only at EOF */
        { "ready", "abc\nrea", 0, NULL, NULL },
        { "ready", "rea\ndy\n", 0, NULL, NULL }, /* a newline splits it */
        { "ready", "a\0ready\n", 8, "a", NULL }, /* a NUL is a character */
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

static const char *const bad_patterns[] = { "(", "a{1", "[", "a{2,1}", "\\", "[[:nope:]]", "[z-a]" };

START_TEST(test_bad_pattern) {
        char error[128] = "";
        struct line_regex *bad = NULL;

        ck_assert_int_eq(line_regex_compile(bad_patterns[_i], &bad, error, sizeof error), -EINVAL);
        ck_assert_ptr_null(bad);
        ck_assert_msg(strlen(error) > 0, "'%s': no message", bad_patterns[_i]);
}
END_TEST

/* The scanner (line_regex_scan()): what it refuses, with which words,
 * before the compiler sees the pattern. NULL: accepted. */
static const struct {
        const char *pattern;
        const char *refused; /* a part of the message */
} dialect[] = {
        { "(a)\\1", "back-references" },
        { "\\9", "back-references" },
        { "x(.*)y\\1$", "back-references" },
        { "\\\\1", NULL }, /* an escaped backslash, then '1' */
        { "\\\\\\1", "back-references" },
        { "\\0", "'\\0' is not supported" }, /* TRE: a back-reference; musl: '0' */
        { "a\\.b", NULL },
        { "[\\1]", NULL },  /* a bracket: backslash and '1' */
        { "[]\\1]", NULL }, /* ']' first is a member */
        { "[^]\\1]x", NULL },
        { "[]\\1]\\1", "back-references" },
        { "[[:digit:]\\1]", NULL },
        { "[[:digit:]]\\1", "back-references" },
        { "[[.].]\\1]", "collating elements" },
        { "[[=a=]]", "equivalence classes" },
        { "[a\\1", "unmatched '['" },
        { "ready", NULL },
        { "", NULL },
        { "\\", "ends the pattern" },
        { "\\w+\\s\\d\\D\\S\\W\\b\\B\\<\\>\\t\\x41", NULL },
        { "\\Qa\\E", "'\\Q' is not supported" },
        { "\\x4", "two hexadecimal digits" },
        { "(?i)ready", "'(?' extensions" },
        { "a{~1}", "must start a count" },
        { "a{,3}", "must start a count" },
        { "a{256}", "counts go up to 255" },
        { "a{1,32767}{1,32767}", "counts go up to 255" },
        { "a{255}", NULL },
        { "a{3,1}", "less than the first" },
        { "*a", "repeats nothing" },
        { "(+a)", "repeats nothing" },
        { "a|{2}", "repeats nothing" },
        { "a**", "a repeat right after" },
        { "a+?", "a repeat right after" },
        { "a{2}*", "right after '}'" },
        { "a{2}?", NULL },
        { "a{2}{3}", NULL },
        { "a{1,255}{1,255}", "too big: 65025 parts" },
        { "(a{1,255}){1,255}{1,4}", "too big" },
        { "^{28}{110}{1,110}{7}", "too big" }, /* no position, but 2.4 million parts (fuzzer) */
        { "(){255}{255}", "too big" },
        { "(|a){255}{255}", "too big" },
        { "(.*a){255}x", NULL },
        { "(.*a.*a.*a.*a){100}x", "too complex" },
        { "((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((a))))))))))))))))))))))))))))))))))))))))"
          "))))))))))))))))))))))))))",
          "nest deeper" },
        { "a)", "unmatched ')'" },
        { "\\\\)", "unmatched ')'" }, /* TRE 0.8 ran out of memory on it */
        { "a\\)", NULL },
        { "(\\\\)", NULL },
        { "(a|)()", NULL },
};

START_TEST(test_dialect) {
        char error[256] = "";
        struct line_regex *compiled = NULL;
        int r = line_regex_compile(dialect[_i].pattern, &compiled, error, sizeof error);

        if (!dialect[_i].refused) {
                ck_assert_msg(r == 0, "'%s' refused: %s", dialect[_i].pattern, error);
                line_regex_free(compiled);
                return;
        }
        ck_assert_msg(r == -EINVAL, "'%s' accepted", dialect[_i].pattern);
        ck_assert_ptr_null(compiled);
        ck_assert_msg(strstr(error, dialect[_i].refused), "'%s': '%s' does not say '%s'", dialect[_i].pattern, error,
                      dialect[_i].refused);
}
END_TEST

/* Sizes and costs, worked by hand from the automaton TRE builds. */
static const struct {
        const char *pattern;
        unsigned long long size, cost;
} costs[] = {
        { "ready", 5, 5 + 4 + 1 },
        { "a|b", 2, 2 + 0 + 2 },
        { "a*", 1, 1 + 1 + 1 },
        { "(.*a){2}", 4, 4 + (2 + 2 + 2) + 2 }, /* .*a.*a: . loops twice, .→a, a→. a→a, .→a */
        { "a{3}", 3, 3 + 2 + 1 },
        { "[a-z0-9_]x", 1 + 1, 2 + 3 + 3 }, /* three ranges into x, and to start */
        { "[^a]", 1, 1 + 0 + 2 },           /* a negated set: one range more */
        { "^$", 2, 1 },                     /* assertions: parts, but no position (cost at least 1) */
};

START_TEST(test_cost) {
        char error[256] = "";
        struct line_regex_cost c;

        ck_assert_msg(line_regex_scan(costs[_i].pattern, &c, error, sizeof error) == 0, "%s", error);
        ck_assert_msg(c.size == costs[_i].size, "'%s': size %llu", costs[_i].pattern, c.size);
        ck_assert_msg(c.cost == costs[_i].cost || (costs[_i].cost == 1 && c.cost == 0), "'%s': cost %llu",
                      costs[_i].pattern, c.cost);
}
END_TEST

/* The slow patterns of issue 19 on long lines: linear, in milliseconds
 * (glibc's regexec() took seconds to minutes on each), and a line that
 * comes after them is still seen. */
static const struct {
        const char *pattern;
        const char *fill;
        const char *ready;
} slow[] = {
        { "([a-z]+ )+ready", "abc ", "abc ready" },
        { "(.*a){20}x", "a", "aaaaaaaaaaaaaaaaaaaaaaaaax" },
        { "(a|aa)*c", "a", "aac" },
};

static double seconds(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

START_TEST(test_slow_patterns_are_linear) {
        size_t len = LINE_MATCH_MAX, fill = strlen(slow[_i].fill);
        char *big = malloc(len + 1);
        double start;

        for (size_t k = 0; k < len; k++)
                big[k] = slow[_i].fill[k % fill];
        big[len] = '\n';
        use(slow[_i].pattern);
        start = seconds();
        for (int k = 0; k < 10; k++)
                ck_assert(!line_matcher_feed(&m, big, len + 1));
        ck_assert(!line_matcher_feed(&m, slow[_i].ready, strlen(slow[_i].ready)));
        ck_assert(line_matcher_feed(&m, "\n", 1));
        ck_assert_str_eq(m.matched_line, slow[_i].ready);
        /* Ten long lines: 2 to 130 ms with TRE, natively; seconds under
         * valgrind. glibc took minutes. */
        ck_assert_msg(seconds() - start < 30.0, "'%s': %.1fs", slow[_i].pattern, seconds() - start);
        done();
        free(big);
}
END_TEST

/* A costly pattern is matched on a shorter prefix, never on less than
 * LINE_MATCH_MIN bytes; the matcher never holds more than that. */
START_TEST(test_prefix) {
        size_t len = LINE_MATCH_MAX + 10;
        char *big = malloc(len + 1);

        use("ready");
        ck_assert_uint_eq(line_regex_prefix(re), LINE_MATCH_MAX);
        done();
        use("(.*a){100}x");
        ck_assert_uint_lt(line_regex_prefix(re), LINE_MATCH_MAX);
        ck_assert_uint_ge(line_regex_prefix(re), LINE_MATCH_MIN);
        ck_assert_uint_eq(line_regex_prefix(re), LINE_MATCH_WORK / line_regex_cost_of(re));
        ck_assert_uint_eq(line_matcher_feed_max(&m), line_regex_prefix(re));
        memset(big, 'a', len);
        big[len] = '\n';
        big[line_regex_prefix(re) + 1] = 'x'; /* beyond the prefix: not seen */
        ck_assert(!line_matcher_feed(&m, big, len + 1));
        big[line_regex_prefix(re) + 1] = 'a';
        big[line_regex_prefix(re) - 1] = 'x'; /* the prefix's last byte: seen */
        ck_assert(line_matcher_feed(&m, big, len + 1));
        done();
        ck_assert_uint_eq(line_regex_prefix(NULL), LINE_MATCH_MAX);
        free(big);
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
        ck_assert(!line_matcher_flush(&out)); /* no regex: never a match */
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
        tcase_add_loop_test(tc, test_dialect, 0, ARRAY_SIZE(dialect));
        tcase_add_loop_test(tc, test_cost, 0, ARRAY_SIZE(costs));
        tcase_add_loop_test(tc, test_slow_patterns_are_linear, 0, ARRAY_SIZE(slow));
        tcase_add_test(tc, test_prefix);
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
