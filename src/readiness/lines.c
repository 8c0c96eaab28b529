/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef TRE_MUSL
#include <tre.h> /* Debian's, copied beside musl's headers (meson.build) */
#else
#include <tre/tre.h>
#endif
#ifdef TRE_SONAME
#include <dlfcn.h>

/* TRE is opened with the first --ready-log pattern, not linked: a run
 * without one maps and relocates no regex engine (about 120 kB of memory
 * and a part of every launch, as libsystemd in sd.c). The static builds
 * link it. */
static struct {
        int (*regcomp)(regex_t *preg, const char *regex, int cflags);
        size_t (*regerror)(int errcode, const regex_t *preg, char *errbuf, size_t errbuf_size);
        void (*regfree)(regex_t *preg);
        int (*regnexec)(const regex_t *preg, const char *string, size_t len, size_t nmatch, regmatch_t pmatch[],
                        int eflags);
} tre;

static int tre_open(char *error, size_t size) {
        void *h;

        if (tre.regnexec)
                return 0;
        h = dlopen(TRE_SONAME, RTLD_NOW | RTLD_LOCAL);
        if (h) {
                tre.regcomp = (int (*)(regex_t *, const char *, int)) dlsym(h, "tre_regcomp");
                tre.regerror = (size_t(*)(int, const regex_t *, char *, size_t)) dlsym(h, "tre_regerror");
                tre.regfree = (void (*)(regex_t *)) dlsym(h, "tre_regfree");
                tre.regnexec = (int (*)(const regex_t *, const char *, size_t, size_t, regmatch_t *, int)) dlsym(
                        h, "tre_regnexec");
        }
        if (h && tre.regcomp && tre.regerror && tre.regfree && tre.regnexec)
                return 0;
        if (error && size > 0)
                snprintf(error, size, "cannot load the regex library %s (Debian: libtre5): %s", TRE_SONAME,
                         dlerror() ?: "a function is missing");
        tre.regnexec = NULL;
        return -ENOENT;
}
#define tre_regcomp tre.regcomp
#define tre_regerror tre.regerror
#define tre_regfree tre.regfree
#define tre_regnexec tre.regnexec
#else
static int tre_open(char *error, size_t size) {
        return 0;
}
#endif

#include "lines.h"
#include "macro.h"

struct line_regex {
        regex_t re;
        unsigned long long cost;
        size_t prefix;
};

/* ---- the pattern: dialect and bounds --------------------------------------- */

/* The automaton of a sub-expression as TRE builds it (Glushkov's: one
 * state per position, a transition for each pair of a last position of
 * one part and a first position of the next), in sizes only: positions,
 * the entries of its first and last sets (one per range of a bracket
 * expression), its transitions, and whether it matches the empty
 * string. Sizes saturate at NFA_CLAMP, far above every bound. */
struct nfa {
        unsigned long long positions, first, last, transitions;
        unsigned long long nodes; /* of the syntax tree, assertions and empty parts too */
        bool nullable;
};

#define NFA_CLAMP (1ULL << 31)
#define NFA_EMPTY ((struct nfa) { .nullable = true })
/* An assertion (^, $, \b...) or an empty part ("()", "(|a)"): no
 * position, but a node that counted repeats copy as any other. */
#define NFA_ASSERTION ((struct nfa) { .nodes = 1, .nullable = true })
/* Ranges of a class in the C locale: [:punct:] has the most, four. */
#define CLASS_RANGES 4
/* Parentheses nest this deep at most (the scanner recurses). */
#define NESTING_MAX 64

static unsigned long long clamp(unsigned long long v) {
        return v > NFA_CLAMP ? NFA_CLAMP : v;
}

static struct nfa nfa_one(unsigned long long ranges) {
        return (struct nfa) { .positions = 1, .first = ranges, .last = ranges, .nodes = 1 };
}

static struct nfa nfa_concat(struct nfa a, struct nfa b) {
        return (struct nfa) {
                .positions = clamp(a.positions + b.positions),
                .first = clamp(a.first + (a.nullable ? b.first : 0)),
                .last = clamp(b.last + (b.nullable ? a.last : 0)),
                .transitions = clamp(a.transitions + b.transitions + a.last * b.first),
                .nodes = clamp(a.nodes + b.nodes),
                .nullable = a.nullable && b.nullable,
        };
}

static struct nfa nfa_union(struct nfa a, struct nfa b) {
        return (struct nfa) {
                .positions = clamp(a.positions + b.positions),
                .first = clamp(a.first + b.first),
                .last = clamp(a.last + b.last),
                .transitions = clamp(a.transitions + b.transitions),
                .nodes = clamp(a.nodes + b.nodes),
                .nullable = a.nullable || b.nullable,
        };
}

/* a+ (or a* when may_skip): a loop from its last positions to its first. */
static struct nfa nfa_loop(struct nfa a, bool may_skip) {
        a.transitions = clamp(a.transitions + a.last * a.first);
        a.nullable = a.nullable || may_skip;
        return a;
}

static struct nfa nfa_optional(struct nfa a) {
        a.nullable = true;
        return a;
}

/* a{min,max} (max < 0: no bound), written out as TRE does
 * (tre_expand_ast()): min copies, then a* or (a(a(a)?)?)? for the rest. */
static struct nfa nfa_repeat(struct nfa a, int min, int max) {
        struct nfa r = NFA_EMPTY, rest = NFA_EMPTY;

        if (max == 0)
                return NFA_ASSERTION;
        if (min <= 1 && (max == 1 || max < 0))
                return max < 0 ? nfa_loop(a, min == 0) : min == 0 ? nfa_optional(a) : a;
        for (int i = 0; i < min; i++)
                r = nfa_concat(r, a);
        if (max < 0)
                return nfa_concat(r, nfa_loop(a, true));
        for (int i = min; i < max; i++)
                rest = nfa_optional(nfa_concat(a, rest));
        return nfa_concat(r, rest);
}

struct scanner {
        const char *p;
        unsigned depth;
        char *error;
        size_t size;
};

__attribute__((format(printf, 2, 3))) static int refuse(struct scanner *s, const char *format, ...) {
        va_list ap;

        if (s->error && s->size > 0) {
                va_start(ap, format);
                vsnprintf(s->error, s->size, format, ap);
                va_end(ap);
        }
        return -EINVAL;
}

static bool is_class_name(const char *name, size_t len) {
        static const char *const names[] = { "alnum", "alpha", "blank", "cntrl", "digit", "graph",
                                             "lower", "print", "punct", "space", "upper", "xdigit" };

        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                if (strlen(names[i]) == len && memcmp(names[i], name, len) == 0)
                        return true;
        return false;
}

/* A bracket expression, s->p at its '['. A ']' first (after an optional
 * '^') is a member; [:class:] holds brackets of its own. */
static int scan_bracket(struct scanner *s, struct nfa *ret) {
        const char *p = s->p + 1;
        unsigned long long ranges = 0;
        bool negated = *p == '^';

        if (negated)
                p++;
        if (*p == ']') {
                p++;
                ranges++;
        }
        while (*p != ']') {
                if (!*p)
                        return refuse(s, "unmatched '['");
                if (p[0] == '[' && (p[1] == '.' || p[1] == '='))
                        return refuse(s, "collating elements [.x.] and equivalence classes [=x=] are not supported");
                if (p[0] == '[' && p[1] == ':') {
                        const char *end = strstr(p + 2, ":]");

                        if (!end || !is_class_name(p + 2, (size_t) (end - p - 2)))
                                return refuse(s, "unknown character class '%.*s'",
                                              end ? (int) (end - p + 2) : (int) strlen(p), p);
                        p = end + 2;
                        ranges += CLASS_RANGES;
                        continue;
                }
                p++;
                if (p[0] == '-' && p[1] && p[1] != ']') {
                        if (p[1] == '[' && (p[2] == '.' || p[2] == '=' || p[2] == ':'))
                                return refuse(s, "a range must end with a character");
                        p += 2;
                }
                ranges++;
        }
        s->p = p + 1;
        /* A negated set is the ranges between its members: one more. */
        *ret = nfa_one(ranges + negated);
        return 0;
}

static int hex_digit(char c) {
        return c >= '0' && c <= '9'   ? c - '0'
               : c >= 'a' && c <= 'f' ? c - 'a' + 10
               : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                      : -1;
}

/* An escape, s->p at its '\'. */
static int scan_escape(struct scanner *s, struct nfa *ret) {
        char c = s->p[1];

        if (!c)
                return refuse(s, "a '\\' ends the pattern");
        if (c >= '1' && c <= '9')
                return refuse(s, "back-references (\\1 to \\9) are not supported");
        s->p += 2;
        if (strchr("wWsSdD", c))
                *ret = nfa_one(CLASS_RANGES + 2); /* [[:alnum:]_] and their complements */
        else if (strchr("bB<>", c))
                *ret = NFA_ASSERTION;
        else if (((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '0') && !strchr("tnrfaex", c))
                /* \0 is a back-reference for TRE, '0' for musl; \Q, \A, \z,
                 * \p... mean something else elsewhere, or nothing. */
                return refuse(s, "'\\%c' is not supported (write [%c] for the character)", c, c);
        else {
                if (c == 'x') {
                        if (hex_digit(s->p[0]) < 0 || hex_digit(s->p[1]) < 0)
                                return refuse(s, "'\\x' takes two hexadecimal digits");
                        s->p += 2;
                }
                *ret = nfa_one(1); /* one character: \t, \xHH, an escaped '.' */
        }
        return 0;
}

static int scan_alternatives(struct scanner *s, struct nfa *ret);

/* NOLINTNEXTLINE(misc-no-recursion): into parentheses, NESTING_MAX deep at most */
static int scan_atom(struct scanner *s, struct nfa *ret) {
        int r;

        switch (*s->p) {
        case '(':
                if (s->p[1] == '?')
                        return refuse(s, "'(?' extensions are not supported");
                if (++s->depth > NESTING_MAX)
                        return refuse(s, "parentheses nest deeper than %d", NESTING_MAX);
                s->p++;
                r = scan_alternatives(s, ret);
                if (r < 0)
                        return r;
                if (*s->p != ')')
                        return refuse(s, "unmatched '('");
                s->p++;
                s->depth--;
                return 0;
        case '[':
                return scan_bracket(s, ret);
        case '\\':
                return scan_escape(s, ret);
        case '^':
        case '$':
                s->p++;
                *ret = NFA_ASSERTION;
                return 0;
        case '*':
        case '+':
        case '?':
        case '{':
                return refuse(s, "'%c' repeats nothing", *s->p);
        case ')':
                /* A ')' that closes nothing: a character for musl, and for
                 * TRE too, but TRE 0.8 loops allocating until it runs out
                 * of memory when the character before it is a backslash,
                 * even an escaped one (the pattern \\), found by the lines fuzzer). */
                return refuse(s, "unmatched ')' (write \\) for the character)");
        default:
                /* '.', a character. */
                s->p++;
                *ret = nfa_one(1);
                return 0;
        }
}

/* {min}, {min,} or {min,max}, s->p after the '{'. */
static int scan_count(struct scanner *s, int *ret_min, int *ret_max) {
        long min, max;
        char *end;

        if (*s->p < '0' || *s->p > '9')
                return refuse(s, "'{' must start a count: {n}, {n,} or {n,m} (write \\{ for the character)");
        min = strtol(s->p, &end, 10);
        max = min;
        if (*end == ',') {
                end++;
                max = *end >= '0' && *end <= '9' ? strtol(end, &end, 10) : -1;
        }
        if (*end != '}')
                return refuse(s, "'{' must start a count: {n}, {n,} or {n,m} (write \\{ for the character)");
        if (min > LINE_REGEX_DUP_MAX || max > LINE_REGEX_DUP_MAX)
                return refuse(s, "counts go up to %d", LINE_REGEX_DUP_MAX);
        if (max >= 0 && max < min)
                return refuse(s, "{%ld,%ld}: the second count is less than the first", min, max);
        s->p = end + 1;
        *ret_min = (int) min;
        *ret_max = (int) max;
        return 0;
}

/* NOLINTNEXTLINE(misc-no-recursion): see scan_atom() */
static int scan_piece(struct scanner *s, struct nfa *ret) {
        struct nfa a = NFA_EMPTY;
        int r = scan_atom(s, &a);

        while (r == 0) {
                char c = *s->p;
                int min = 0, max = 0;

                if (c == '*' || c == '+' || c == '?') {
                        s->p++;
                        /* TRE reads "+?" as a lazy repeat, musl as "(a+)?":
                         * they match different lines; "**" and "*+" TRE refuses. */
                        if (*s->p == '*' || *s->p == '+' || *s->p == '?')
                                return refuse(s, "'%c%c': a repeat right after '%c' is not supported", c, *s->p, c);
                        min = c == '+';
                        max = c == '?' ? 1 : -1;
                } else if (c == '{') {
                        s->p++;
                        r = scan_count(s, &min, &max);
                        if (r < 0)
                                return r;
                        /* "a{2}*": TRE refuses it, musl takes it. */
                        if (*s->p == '*' || *s->p == '+')
                                return refuse(s, "'}%c': a repeat right after '}' is not supported", *s->p);
                } else
                        break;
                a = nfa_repeat(a, min, max);
        }
        *ret = a;
        return r;
}

/* NOLINTNEXTLINE(misc-no-recursion): see scan_atom() */
static int scan_alternatives(struct scanner *s, struct nfa *ret) {
        struct nfa all = NFA_EMPTY;

        for (bool first = true;; first = false) {
                struct nfa branch = NFA_EMPTY;

                while (*s->p && *s->p != '|' && !(*s->p == ')' && s->depth > 0)) {
                        struct nfa piece = NFA_EMPTY;
                        int r = scan_piece(s, &piece);

                        if (r < 0)
                                return r;
                        branch = nfa_concat(branch, piece);
                }
                if (branch.nodes == 0)
                        branch = NFA_ASSERTION; /* an empty branch */
                all = first ? branch : nfa_union(all, branch);
                if (*s->p != '|')
                        break;
                s->p++;
        }
        *ret = all;
        return 0;
}

int line_regex_scan(const char *pattern, struct line_regex_cost *ret, char *error, size_t size) {
        struct scanner s = { .p = pattern, .error = error, .size = size };
        struct nfa a = NFA_EMPTY;
        int r = scan_alternatives(&s, &a);

        if (r < 0)
                return r;
        /* Per byte: each position may be live, with its transitions; and
         * a match may start at every byte (the first positions). */
        *ret = (struct line_regex_cost) { .size = a.nodes, .cost = clamp(a.positions + a.transitions + a.first) };
        if (ret->size > LINE_REGEX_SIZE_MAX)
                return refuse(&s, "too big: %llu parts with its counts written out (at most %d)", ret->size,
                              LINE_REGEX_SIZE_MAX);
        if (ret->cost > LINE_REGEX_COST_MAX)
                return refuse(&s, "too complex: matching would cost %llu per byte (at most %llu)", ret->cost,
                              LINE_REGEX_COST_MAX);
        return 0;
}

int line_regex_compile(const char *pattern, struct line_regex **ret, char *error, size_t size) {
        struct line_regex_cost c;
        struct line_regex *re;
        int r;

        r = line_regex_scan(pattern, &c, error, size);
        if (r < 0)
                return r;
        r = tre_open(error, size);
        if (r < 0)
                return r;
        re = calloc(1, sizeof *re);
        if (!re)
                return -ENOMEM;
        r = tre_regcomp(&re->re, pattern, REG_EXTENDED | REG_NOSUB);
        if (r != 0) {
                if (error && size > 0)
                        tre_regerror(r, &re->re, error, size);
                free(re);
                return r == REG_ESPACE ? -ENOMEM : -EINVAL;
        }
        re->cost = c.cost ?: 1;
        re->prefix =
                LINE_MATCH_WORK / re->cost < LINE_MATCH_MAX ? (size_t) (LINE_MATCH_WORK / re->cost) : LINE_MATCH_MAX;
        *ret = re;
        return 0;
}

void line_regex_free(struct line_regex *re) {
        if (!re)
                return;
        tre_regfree(&re->re);
        free(re);
}

bool line_regex_match(const struct line_regex *re, const char *line, size_t len) {
        return tre_regnexec(&re->re, line, len, 0, NULL, 0) == 0;
}

size_t line_regex_prefix(const struct line_regex *re) {
        return re ? re->prefix : LINE_MATCH_MAX;
}

unsigned long long line_regex_cost_of(const struct line_regex *re) {
        return re ? re->cost : 0;
}

/* ---- lines ------------------------------------------------------------------ */

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

int line_matcher_init(struct line_matcher *m, const struct line_regex *re, struct line_tail *tail) {
        *m = (struct line_matcher) { .re = re, .tail = tail, .limit = line_regex_prefix(re) };
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

size_t line_matcher_feed_max(const struct line_matcher *m) {
        return m->limit;
}

/* The line held is complete: match it (by length, so a NUL byte in
 * COMMAND's output is a character like any other) and keep it. */
static bool end_line(struct line_matcher *m) {
        size_t len = m->len;
        bool hit = false;

        if (len > 0 && m->line[len - 1] == '\r')
                len--;
        /* The length says where the line ends, but a string is still a
         * string: sanitizers' regexec() interceptors read it up to a NUL. */
        m->line[len] = '\0';
        if (m->re)
                hit = line_regex_match(m->re, m->line, len);
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
                size_t room = m->limit - m->len;

                /* Beyond the limit a line is skipped to its end. */
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
