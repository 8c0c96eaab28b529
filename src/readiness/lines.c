/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat.h"
#include "lines.h"

/* The end of the bracket expression that starts at p ('['): the ']' that
 * closes it, or NULL. A ']' first (after an optional '^') is a member,
 * and [:class:], [=equiv=] and [.coll.] hold brackets of their own. */
static const char *bracket_end(const char *p) {
        p++;
        if (*p == '^')
                p++;
        if (*p == ']')
                p++;
        for (; *p && *p != ']'; p++)
                if (p[0] == '[' && (p[1] == ':' || p[1] == '=' || p[1] == '.')) {
                        const char *close = p + 2;

                        while (*close && !(close[0] == p[1] && close[1] == ']'))
                                close++;
                        if (!*close)
                                return NULL;
                        p = close + 1;
                }
        return *p ? p : NULL;
}

/* Whether the pattern holds a back-reference (\1 to \9) outside a bracket
 * expression. glibc takes them in an ERE (POSIX does not define them) and
 * matches them by backtracking, in time exponential in the line's length:
 * one long line would stop prebind, and with it the supervision. */
bool line_regex_has_back_reference(const char *pattern) {
        for (const char *p = pattern; *p; p++) {
                if (*p == '\\') {
                        if (p[1] >= '1' && p[1] <= '9')
                                return true;
                        if (!p[1])
                                break;
                        p++;
                } else if (*p == '[') {
                        const char *end = bracket_end(p);

                        if (!end)
                                break;  /* regcomp() says what is wrong */
                        p = end;
                }
        }
        return false;
}

int line_regex_compile(regex_t *re, const char *pattern, char *error, size_t size) {
        int r;

        if (line_regex_has_back_reference(pattern)) {
                if (error && size > 0)
                        snprintf(error, size, "back-references (\\1 to \\9) are not supported");
                return -EINVAL;
        }
        r = regcomp(re, pattern, REG_EXTENDED | REG_NOSUB);
        if (r == 0)
                return 0;
        if (error && size > 0)
                regerror(r, re, error, size);
        return r == REG_ESPACE ? -ENOMEM : -EINVAL;
}

void line_tail_add(struct line_tail *tail, const char *line, size_t len) {
        char *slot = tail->lines[tail->next];

        if (len > LINE_TAIL_WIDTH)
                len = LINE_TAIL_WIDTH;
        memcpy(slot, line, len);
        slot[len] = '\0';
        tail->next = (tail->next + 1) % LINE_TAIL_LINES;
        if (tail->count < LINE_TAIL_LINES)
                tail->count++;
}

const char *line_tail_get(const struct line_tail *tail, size_t i) {
        if (i >= tail->count)
                return NULL;
        return tail->lines[(tail->next + LINE_TAIL_LINES - tail->count + i) % LINE_TAIL_LINES];
}

void line_tail_clear(struct line_tail *tail) {
        tail->next = tail->count = 0;
}

int line_matcher_init(struct line_matcher *m, const regex_t *re, struct line_tail *tail) {
        *m = (struct line_matcher) { .re = re, .tail = tail };
        m->line = malloc(LINE_MATCH_MAX + 1);
        return m->line ? 0 : -ENOMEM;
}

void line_matcher_done(struct line_matcher *m) {
        free(m->line);
        m->line = NULL;
}

void line_matcher_reset(struct line_matcher *m) {
        m->len = 0;
        m->matched = false;
        m->matched_line[0] = '\0';
}

/* The line held is complete: match it (REG_STARTEND, so a NUL byte in
 * COMMAND's output is a character like any other) and keep it. */
static bool end_line(struct line_matcher *m) {
        size_t len = m->len;
        bool hit = false;

        if (len > 0 && m->line[len - 1] == '\r')
                len--;
        /* REG_STARTEND gives the length, but a string is still a string:
         * sanitizers' regexec() interceptors read it up to a NUL. */
        m->line[len] = '\0';
        if (m->re) {
                regmatch_t range = { .rm_so = 0, .rm_eo = (regoff_t) len };

                hit = regexec(m->re, m->line, 1, &range, REG_STARTEND) == 0;
        }
        if (m->tail)
                line_tail_add(m->tail, m->line, len);
        if (hit && !m->matched) {
                size_t n = len < LINE_TAIL_WIDTH ? len : LINE_TAIL_WIDTH;

                memcpy(m->matched_line, m->line, n);
                m->matched_line[n] = '\0';
                m->matched = true;
        }
        m->len = 0;
        return hit;
}

bool line_matcher_feed(struct line_matcher *m, const char *data, size_t len) {
        bool hit = false;

        while (len > 0) {
                const char *nl = memchr(data, '\n', len);
                size_t take = nl ? (size_t) (nl - data) : len;
                size_t room = LINE_MATCH_MAX - m->len;

                /* Beyond LINE_MATCH_MAX a line is skipped to its end. */
                memcpy(m->line + m->len, data, take < room ? take : room);
                m->len += take < room ? take : room;
                if (!nl)
                        break;
                hit = end_line(m) || hit;
                data = nl + 1;
                len -= take + 1;
        }
        return hit;
}

bool line_matcher_flush(struct line_matcher *m) {
        if (m->len == 0)
                return false;
        return end_line(m);
}
