/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* COMMAND's output as lines, for --ready-log: a POSIX extended regular
 * expression matched against each line of stdout and of stderr, and the
 * last lines kept for the message when COMMAND is not ready in time.
 * Pure logic on bytes: the pipes are relay.c's.
 *
 * The engine is TRE, in every build (dlopen()ed by the dynamic one,
 * linked into the static ones; the line is matched by its length, NUL
 * bytes and all): it matches without backtracking, in time linear in the line's
 * length times the size of the pattern's automaton. glibc's regexec() is
 * not linear even without back-references ("([a-z]+ )+ready" took 2.6 s
 * on one 16 KB line, "(.*a){20}x" 43 s), and that stopped prebind's
 * loop: no SIGTERM, no --ready-timeout. So that one line can
 * never hold the loop, the work per line is bounded too: see
 * line_regex_compile(). */

/* A line is matched on its first LINE_MATCH_MAX bytes (without the
 * newline and a '\r' before it), or fewer for a complex pattern
 * (line_regex_prefix()); longer lines are matched on that part. */
#define LINE_MATCH_MAX (64 * 1024)
/* The tail: the last LINE_TAIL_LINES lines, each cut to LINE_TAIL_WIDTH
 * bytes. */
#define LINE_TAIL_LINES 10
#define LINE_TAIL_WIDTH 240

/* The bounds on a pattern. Counted repeats are written out by the
 * compiler ("a{3}" is "aaa"): written out, a pattern may hold at most
 * LINE_REGEX_SIZE_MAX parts (characters, '.', bracket expressions,
 * assertions such as '^', empty groups; "a{1,255}{1,255}" would hold
 * 65025; glibc's regcomp() took 40 s and 7.8 GB on a{1,32767}{1,32767}).
 * Counts are at most LINE_REGEX_DUP_MAX (TRE's and musl's RE_DUP_MAX).
 * The cost of a pattern bounds the work of matching one byte of a line:
 * the positions, the transitions between them and the start positions
 * of its automaton, each range of a bracket expression counted apart
 * (measured: 0.01 to 3.4 ns per unit of cost and byte). A line is
 * matched on its first LINE_MATCH_WORK / cost bytes when that is less
 * than LINE_MATCH_MAX, so one line takes at most about 15 ms, and a
 * pattern that would be matched on less than LINE_MATCH_MIN bytes is
 * refused. */
#define LINE_REGEX_SIZE_MAX 1000
#define LINE_REGEX_DUP_MAX 255
#define LINE_MATCH_WORK (4ULL * 1024 * 1024)
#define LINE_MATCH_MIN 2048
#define LINE_REGEX_COST_MAX (LINE_MATCH_WORK / LINE_MATCH_MIN)

struct line_tail {
        char lines[LINE_TAIL_LINES][LINE_TAIL_WIDTH + 1];
        size_t next;  /* where the next line goes */
        size_t count; /* lines held, at most LINE_TAIL_LINES */
};

/* The size and cost of a pattern (see above), as line_regex_scan()
 * finds them. */
struct line_regex_cost {
        unsigned long long size; /* parts, counted repeats written out */
        unsigned long long cost; /* work per byte matched */
};

struct line_regex;

/* Check a pattern against the dialect and the bounds, without compiling
 * it: 0 and its cost, or -EINVAL with why in error (size bytes). The
 * dialect is POSIX's ERE as TRE and other POSIX engines (musl's) read it
 * alike, so that a pattern means what it says: back-references,
 * TRE's own extensions ("(?i)", "\Q", approximate "{~1}") and escapes
 * that are not one of \w \W \s \S \d \D \b \B \< \> \t \n \r \f \a \e
 * \xHH are refused, as is a repeat with nothing to repeat. */
int line_regex_scan(const char *pattern, struct line_regex_cost *ret, char *error, size_t size);
/* Scan and compile (REG_EXTENDED | REG_NOSUB). Returns 0, -EINVAL with
 * the reason in error, -ENOENT when the regex library cannot be loaded
 * (the reason in error), or -ENOMEM. */
int line_regex_compile(const char *pattern, struct line_regex **ret, char *error, size_t size);
void line_regex_free(struct line_regex *re);
/* Whether [line, line + len) matches (line[len] must be a NUL). */
bool line_regex_match(const struct line_regex *re, const char *line, size_t len);
/* How many bytes of a line are matched: LINE_MATCH_MAX, or fewer for a
 * costly pattern; LINE_MATCH_MAX for NULL. */
size_t line_regex_prefix(const struct line_regex *re);
unsigned long long line_regex_cost_of(const struct line_regex *re);

/* One stream's partial line, matched against a shared regex and kept in
 * a shared tail (stdout and stderr each have a matcher; lines do not mix
 * across streams). */
struct line_matcher {
        const struct line_regex *re; /* NULL: keep the tail only */
        struct line_tail *tail;      /* NULL: no tail */
        char *line;                  /* LINE_MATCH_MAX + 1 bytes (a NUL after the line) */
        size_t len;                  /* bytes of the current line held */
        size_t limit;                /* …at most: line_regex_prefix() */
        bool matched;                /* a line has matched since the last reset */
        char matched_line[LINE_TAIL_WIDTH + 1];
};

int line_matcher_init(struct line_matcher *m, const struct line_regex *re, struct line_tail *tail);
void line_matcher_done(struct line_matcher *m);
/* Forget the partial line and the match (a new COMMAND). */
void line_matcher_reset(struct line_matcher *m);

/* Feed bytes as they were read; lines may span calls. Returns true if a
 * line completed here matched (m->matched stays true after that). The
 * work of one call is bounded by the bytes fed and one line held before:
 * feed at most line_matcher_feed_max() bytes at a time, and a call takes
 * at most about twice LINE_MATCH_WORK. */
bool line_matcher_feed(struct line_matcher *m, const char *data, size_t len);
size_t line_matcher_feed_max(const struct line_matcher *m);
/* The stream ended, or COMMAND exited: a last line without a newline
 * counts as a line. Returns true if it matched. */
bool line_matcher_flush(struct line_matcher *m);

/* Lines of the tail, oldest first: i from 0 to tail->count - 1. */
const char *line_tail_get(const struct line_tail *tail, size_t i);
void line_tail_add(struct line_tail *tail, const char *line, size_t len);
void line_tail_clear(struct line_tail *tail);
