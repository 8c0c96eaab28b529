/* SPDX-License-Identifier: MIT */
#pragma once

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>

/* COMMAND's output as lines, for --ready-log: a POSIX extended regular
 * expression matched against each line of stdout and of stderr, and the
 * last lines kept for the message when COMMAND is not ready in time.
 * Pure logic on bytes: the pipes are relay.c's. */

/* A line is matched on its first LINE_MATCH_MAX bytes (without the
 * newline and a '\r' before it); longer lines are matched on that part. */
#define LINE_MATCH_MAX (64 * 1024)
/* The tail: the last LINE_TAIL_LINES lines, each cut to LINE_TAIL_WIDTH
 * bytes. */
#define LINE_TAIL_LINES 10
#define LINE_TAIL_WIDTH 240

struct line_tail {
        char lines[LINE_TAIL_LINES][LINE_TAIL_WIDTH + 1];
        size_t next;            /* where the next line goes */
        size_t count;           /* lines held, at most LINE_TAIL_LINES */
};

/* Compile an ERE (REG_EXTENDED | REG_NOSUB). Returns 0, or -EINVAL with
 * regerror()'s text in error (size bytes). Back-references are refused
 * (-EINVAL): they are glibc's, not POSIX's, and take exponential time. */
int line_regex_compile(regex_t *re, const char *pattern, char *error, size_t size);
bool line_regex_has_back_reference(const char *pattern);

/* One stream's partial line, matched against a shared regex and kept in
 * a shared tail (stdout and stderr each have a matcher; lines do not mix
 * across streams). */
struct line_matcher {
        const regex_t *re;      /* NULL: keep the tail only */
        struct line_tail *tail; /* NULL: no tail */
        char *line;             /* LINE_MATCH_MAX + 1 bytes (a NUL after the line) */
        size_t len;             /* bytes of the current line held */
        bool matched;           /* a line has matched since the last reset */
        char matched_line[LINE_TAIL_WIDTH + 1];
};

int line_matcher_init(struct line_matcher *m, const regex_t *re, struct line_tail *tail);
void line_matcher_done(struct line_matcher *m);
/* Forget the partial line and the match (a new COMMAND). */
void line_matcher_reset(struct line_matcher *m);

/* Feed bytes as they were read; lines may span calls. Returns true if a
 * line completed here matched (m->matched stays true after that). */
bool line_matcher_feed(struct line_matcher *m, const char *data, size_t len);
/* The stream ended, or COMMAND exited: a last line without a newline
 * counts as a line. Returns true if it matched. */
bool line_matcher_flush(struct line_matcher *m);

/* Lines of the tail, oldest first: i from 0 to tail->count - 1. */
const char *line_tail_get(const struct line_tail *tail, size_t i);
void line_tail_add(struct line_tail *tail, const char *line, size_t len);
void line_tail_clear(struct line_tail *tail);
