/* SPDX-License-Identifier: MIT */
/* --ready-log=REGEX: a line of COMMAND's stdout or stderr matches
 * (lines.c), read from pipes of its own and relayed to prebind's, byte
 * for byte (relay.c). The relay runs for the whole run; lines are
 * matched only while the check waits. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ready_check.h"
#include "lines.h"
#include "log.h"
#include "relay.h"

/* One COMMAND's stdout and stderr. Under --reload=overlap each
 * generation writes to pipes of its own, so that a line of the serving
 * one never counts for the one starting; at most OUTPUTS_MAX at once
 * (generations draining after SIGTERM keep theirs until they exit),
 * beyond which the newest are shared. */
#define OUTPUTS_MAX 8
struct output {
        pid_t pid; /* the COMMAND writing to it; 0: none yet, or gone */
        struct relay out, err;
};

struct log_check {
        struct ready_check check;
        const char *pattern;
        struct line_regex *re;
        struct line_tail tail;
        struct line_matcher out_lines, err_lines;
        struct output *outputs[OUTPUTS_MAX];
        size_t n_outputs;
        struct output *current; /* the next COMMAND's, or the one checked */
};

#define LOG_OF(c) ((struct log_check *) (c))

static void lines_fed(void *userdata) {
        struct log_check *g = userdata;
        const struct line_matcher *m = g->out_lines.matched ? &g->out_lines : &g->err_lines;
        char what[LINE_TAIL_WIDTH + 64];

        if (!g->check.waiting || !m->matched)
                return;
        snprintf(what, sizeof what, "--ready-log matched '%s'", m->matched_line);
        ready_check_met(&g->check, what);
}

static void output_close(struct output *o) {
        relay_close(&o->out);
        relay_close(&o->err);
        free(o);
}

/* A new pair of pipes, on the loop if the check is. */
static int output_open(struct log_check *g) {
        struct loop *l = g->check.loop;
        struct output *o;
        int r;

        if (g->n_outputs == OUTPUTS_MAX)
                return 0;
        o = calloc(1, sizeof *o);
        if (!o)
                return -ENOMEM;
        o->out = o->err = (struct relay) RELAY_UNOPENED;
        r = relay_open(&o->out, STDOUT_FILENO, &g->out_lines);
        if (r >= 0)
                r = relay_open(&o->err, STDERR_FILENO, &g->err_lines);
        if (r >= 0 && l && (r = relay_attach(&o->out, l, lines_fed, g)) >= 0)
                r = relay_attach(&o->err, l, lines_fed, g);
        if (r < 0) {
                output_close(o);
                return r;
        }
        g->outputs[g->n_outputs++] = o;
        g->current = o;
        return 0;
}

/* Everything o's COMMAND wrote, passed on (logs what it had to drop). */
static void output_drain(struct output *o) {
        struct relay *relays[] = { &o->out, &o->err };

        for (size_t i = 0; i < 2; i++) {
                uint64_t before = relays[i]->dropped;

                relay_drain(relays[i]);
                if (relays[i]->dropped == before)
                        continue;
                /* Its reader stalled; stdout's may be stderr's too (2>&1):
                 * this line does not wait either (a stderr that takes it
                 * ends that). */
                log_stderr_stalled();
                log_error("dropped %llu bytes of COMMAND's %s: nobody read prebind's for %.1fs",
                          (unsigned long long) (relays[i]->dropped - before), i ? "stderr" : "stdout",
                          RELAY_STALL_MS / 1000.0);
        }
}

static void outputs_want_lines(struct log_check *g, bool want) {
        for (size_t i = 0; i < g->n_outputs; i++) {
                bool w = want && g->outputs[i] == g->current;

                relay_want_lines(&g->outputs[i]->out, w);
                relay_want_lines(&g->outputs[i]->err, w);
        }
}

static int log_attach(struct ready_check *c) {
        struct log_check *g = LOG_OF(c);
        int r;

        for (size_t i = 0; i < g->n_outputs; i++)
                if ((r = relay_attach(&g->outputs[i]->out, c->loop, lines_fed, g)) < 0 ||
                    (r = relay_attach(&g->outputs[i]->err, c->loop, lines_fed, g)) < 0)
                        return r;
        return 0;
}

static void log_detach(struct ready_check *c) {
        struct log_check *g = LOG_OF(c);

        for (size_t i = 0; i < g->n_outputs; i++) {
                relay_detach(&g->outputs[i]->out);
                relay_detach(&g->outputs[i]->err);
        }
}

/* What the last COMMAND wrote is passed on already; this one starts with
 * no line and no match. */
static int log_start(struct ready_check *c) {
        struct log_check *g = LOG_OF(c);

        if (g->current)
                g->current->pid = c->child;
        line_matcher_reset(&g->out_lines);
        line_matcher_reset(&g->err_lines);
        line_tail_clear(&g->tail);
        outputs_want_lines(g, true);
        return 0;
}

/* The relay goes on, bytes only. (A message about a COMMAND that was not
 * ready comes before this, with the lines kept so far.) */
static void log_stop(struct ready_check *c) {
        outputs_want_lines(LOG_OF(c), false);
}

/* A COMMAND (pid) has exited: pass on all it wrote; pipes of its own
 * that no new COMMAND will get are closed. */
static void log_command_exited(struct ready_check *c, pid_t pid) {
        struct log_check *g = LOG_OF(c);
        size_t i;

        for (i = 0; i < g->n_outputs && g->outputs[i]->pid != pid; i++)
                ;
        if (i == g->n_outputs) {
                /* Not its own (OUTPUTS_MAX were in use): the shared one. */
                output_drain(g->current);
                return;
        }
        output_drain(g->outputs[i]);
        g->outputs[i]->pid = 0;
        /* The pipes of the next COMMAND stay; a replaced one's go. */
        if (g->outputs[i] == g->current)
                return;
        output_close(g->outputs[i]);
        g->outputs[i] = g->outputs[--g->n_outputs];
}

static size_t log_describe(const struct ready_check *c, char *buf, size_t size) {
        char quoted[LOG_QUOTE_SIZE];

        return (size_t) snprintf(buf, size, "wrote no line that matches --ready-log '%s'",
                                 log_shorten(LOG_OF(c)->pattern, quoted));
}

/* The last lines COMMAND wrote, one log line each. */
static void log_details(struct ready_check *c) {
        struct log_check *g = LOG_OF(c);

        /* A last line without a newline is a line too. */
        (void) line_matcher_flush(&g->out_lines);
        (void) line_matcher_flush(&g->err_lines);
        if (g->tail.count == 0) {
                log_error("'%s' wrote nothing", c->command);
                return;
        }
        log_error("last lines of '%s':", c->command);
        for (size_t i = 0; i < g->tail.count; i++)
                log_error("> %s", line_tail_get(&g->tail, i));
}

static void log_free(struct ready_check *c) {
        struct log_check *g = LOG_OF(c);

        for (size_t i = 0; i < g->n_outputs; i++)
                output_close(g->outputs[i]);
        line_matcher_done(&g->out_lines);
        line_matcher_done(&g->err_lines);
        line_regex_free(g->re);
        free(g);
}

static const char *log_refuse(const char *arg) {
        return *arg ? NULL : "empty regular expression (it would match any line)";
}

static int compile(struct log_check *g) {
        char error[256], quoted[LOG_QUOTE_SIZE];
        int r = line_regex_compile(g->pattern, &g->re, error, sizeof error);

        if (r == -EINVAL) {
                log_error("--ready-log: '%s': %s (see --help)", log_shorten(g->pattern, quoted), error);
                return -EINVAL;
        }
        if (r == -ENOENT) {
                log_error("--ready-log: %s", error);
                return r;
        }
        if (r < 0)
                return log_oom();
        log_debug("--ready-log: cost %llu per byte; lines matched on their first %zu bytes", line_regex_cost_of(g->re),
                  line_regex_prefix(g->re));
        return 0;
}

static int log_create(const char *pattern, const struct ready_check_env *env, struct ready_check **ret) {
        struct log_check *g = calloc(1, sizeof *g);
        int r;

        if (!g)
                return log_oom();
        *g = (struct log_check) { .check.kind = &ready_check_log, .pattern = pattern };
        r = compile(g);
        if (r >= 0 && (line_matcher_init(&g->out_lines, g->re, &g->tail) < 0 ||
                       line_matcher_init(&g->err_lines, g->re, &g->tail) < 0))
                r = log_oom();
        if (r >= 0 && (r = output_open(g)) < 0)
                log_error_errno(r, "cannot create the pipes for --ready-log: %m");
        if (r < 0) {
                log_free(&g->check);
                return r;
        }
        *ret = &g->check;
        return 0;
}

static void log_child_output(const struct ready_check *c, int *ret_stdout, int *ret_stderr) {
        const struct log_check *g = LOG_OF(c);

        *ret_stdout = g->current ? g->current->out.child_fd : 0;
        *ret_stderr = g->current ? g->current->err.child_fd : 0;
}

static int log_prepare_output(struct ready_check *c) {
        struct log_check *g = LOG_OF(c);

        if (!g->current || g->current->pid == 0)
                return 0;
        return output_open(g);
}

const struct ready_check_kind ready_check_log = {
        .name = "log",
        .start = log_start,
        .stop = log_stop,
        .describe = log_describe,
        .free = log_free,
        .attach = log_attach,
        .detach = log_detach,
        .command_exited = log_command_exited,
        .log_details = log_details,
        .child_output = log_child_output,
        .prepare_output = log_prepare_output,
        .refuse = log_refuse,
        .create = log_create,
};
