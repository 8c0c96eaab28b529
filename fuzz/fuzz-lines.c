/* SPDX-License-Identifier: MIT */
/* libFuzzer target: --ready-log's line matcher (lines.c). The input is a
 * POSIX ERE (up to the first newline) and then COMMAND's output, any
 * bytes. The output is fed whole, and again cut into pieces chosen by the
 * input itself: the matcher must give the same verdict, the same first
 * matching line and the same tail either way, and the verdict must be
 * what a straightforward reading says (split on newlines, one '\r'
 * dropped, each line matched on its first LINE_MATCH_MAX bytes).
 * Patterns are kept short; counts and stacked repeats are fuzzed too:
 * line_regex_compile() refuses what would explode (issue 19), and TRE
 * matches in time linear in the line. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "lines.h"

#define PATTERN_MAX 32
#define OUTPUT_MAX 8192

static char line[OUTPUT_MAX + 1];

static bool reference(const struct line_regex *re, const char *out, size_t len, bool with_last) {
        size_t start = 0;

        for (size_t i = 0; i <= len; i++) {
                size_t end, n;

                if (i < len && out[i] != '\n')
                        continue;
                if (i == len && (!with_last || i == start))
                        break;
                end = i;
                n = end - start;
                if (n > line_regex_prefix(re))
                        n = line_regex_prefix(re);
                if (n > 0 && out[start + n - 1] == '\r')
                        n--;
                /* NUL-terminated, as the matcher's own line. */
                memcpy(line, out + start, n);
                line[n] = '\0';
                if (line_regex_match(re, line, n))
                        return true;
                start = i + 1;
        }
        return false;
}

static void run(const struct line_regex *re, const char *out, size_t len, const uint8_t *cuts, size_t n_cuts,
                struct line_matcher *m, struct line_tail *tail, bool *ret_before_flush) {
        size_t at = 0;

        line_tail_clear(tail);
        if (line_matcher_init(m, re, tail) < 0)
                abort();
        for (size_t k = 0; k < n_cuts && at < len; k++) {
                size_t piece = cuts[k] % 64 + 1;

                if (piece > len - at)
                        piece = len - at;
                line_matcher_feed(m, out + at, piece);
                at += piece;
        }
        line_matcher_feed(m, out + at, len - at);
        *ret_before_flush = m->matched;
        line_matcher_flush(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const uint8_t *nl = memchr(data, '\n', size);
        size_t pattern_len = nl ? (size_t) (nl - data) : size;
        char pattern[PATTERN_MAX + 1], error[128];
        const char *out;
        size_t len;
        struct line_matcher whole, cut;
        struct line_tail tail_whole, tail_cut;
        bool whole_before, cut_before;
        struct line_regex *re;

        if (!nl || pattern_len > PATTERN_MAX || memchr(data, '\0', pattern_len))
                return 0;
        memcpy(pattern, data, pattern_len);
        pattern[pattern_len] = '\0';
        if (line_regex_compile(pattern, &re, error, sizeof error) < 0)
                return 0;
        out = (const char *) nl + 1;
        len = size - pattern_len - 1;
        if (len > OUTPUT_MAX)
                len = OUTPUT_MAX;

        run(re, out, len, NULL, 0, &whole, &tail_whole, &whole_before);
        /* Cut where the output's own bytes say: any cut is a read(). */
        run(re, out, len, (const uint8_t *) out, len, &cut, &tail_cut, &cut_before);

        if (whole_before != cut_before || whole.matched != cut.matched)
                FUZZ_FAIL("'%s': the verdict depends on how the output was cut", pattern);
        if (strcmp(whole.matched_line, cut.matched_line) != 0)
                FUZZ_FAIL("'%s': first match '%s' whole, '%s' cut", pattern, whole.matched_line, cut.matched_line);
        if (tail_whole.count != tail_cut.count)
                FUZZ_FAIL("'%s': tails of %zu and %zu lines", pattern, tail_whole.count, tail_cut.count);
        for (size_t i = 0; i < tail_whole.count; i++)
                if (strcmp(line_tail_get(&tail_whole, i), line_tail_get(&tail_cut, i)) != 0)
                        FUZZ_FAIL("'%s': tail line %zu differs", pattern, i);
        if (whole_before != reference(re, out, len, false))
                FUZZ_FAIL("'%s': complete lines: matcher %d, reference %d", pattern, whole_before, !whole_before);
        if (whole.matched != reference(re, out, len, true))
                FUZZ_FAIL("'%s': with the last line: matcher %d, reference %d", pattern, whole.matched,
                          !whole.matched);
        line_matcher_done(&whole);
        line_matcher_done(&cut);
        line_regex_free(re);
        return 0;
}
