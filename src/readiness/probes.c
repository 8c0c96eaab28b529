/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "lines.h"
#include "clock.h"
#include "log.h"
#include "probe-exec.h"
#include "probe-http.h"
#include "probes.h"
#include "relay.h"
#include "env.h"
#include "template.h"

/* One probe's attempts: a timer that either starts the next attempt or
 * ends the one under way. */
struct attempts {
        int timer_fd;
        bool running;
        uint64_t started;
        unsigned count;
        uint64_t bound;      /* how long the next attempt may take */
        uint64_t last_bound; /* …and the last one that ran out of time */
};

/* --ready-log: one COMMAND's stdout and stderr. Under --reload=overlap
 * each generation writes to pipes of its own, so that a line of the
 * serving one never counts for the one starting (issue 24); at most
 * OUTPUTS_MAX at once (generations draining after SIGTERM keep theirs
 * until they exit), beyond which the newest are shared. */
#define OUTPUTS_MAX 8
struct output {
        pid_t pid; /* the COMMAND writing to it; 0: none yet, or gone */
        struct relay out, err;
};

struct probes {
        struct readiness_options options;
        struct loop *loop;
        probe_met_callback on_met;
        void *userdata;
        bool waiting; /* between probes_start() and probes_stop() */

        /* --ready-log */
        bool log;
        bool log_met;
        struct line_regex *re;
        struct line_tail tail;
        struct line_matcher out_lines, err_lines;
        struct output *outputs[OUTPUTS_MAX];
        size_t n_outputs;
        struct output *current; /* the next COMMAND's, or the one waited for */

        /* --ready-exec */
        bool exec;
        bool exec_met;
        char *exec_command;
        struct child_env env;
        struct exec_probe ep;
        struct attempts exec_attempts;

        /* --ready-http */
        bool http;
        bool http_met;
        struct http_probe hp;
        struct http_probe_result { /* the last attempt that is over */
                int status, error;
                bool garbage, over;
        } http_last;
        struct attempts http_attempts;
        int http_fd; /* hp.fd as watched on the loop, or -1 */
};

uint64_t probe_attempt_timeout(uint64_t interval_usec) {
        return interval_usec > USEC_PER_SEC ? interval_usec : USEC_PER_SEC;
}

uint64_t probe_next_bound(uint64_t bound_usec) {
        uint64_t next = bound_usec * 2;

        if (bound_usec >= PROBE_BOUND_MAX)
                return bound_usec;
        return next < PROBE_BOUND_MAX ? next : PROBE_BOUND_MAX;
}

uint64_t probe_next_start(uint64_t started_usec, uint64_t ended_usec, uint64_t interval_usec) {
        uint64_t next = started_usec + interval_usec;

        return next > ended_usec ? next : ended_usec;
}

static void met(struct probes *p, bool *flag, enum probe_condition condition, const char *what) {
        if (*flag)
                return;
        *flag = true;
        log_debug("ready: %s", what);
        if (p->on_met)
                p->on_met(condition, p->userdata);
}

/* ---- attempts ------------------------------------------------------------ */

/* The attempt is over and not ready: the next one is due. */
static void attempt_failed(struct probes *p, struct attempts *a) {
        uint64_t now = now_usec(), next = probe_next_start(a->started, now, p->options.interval_usec);
        int r;

        a->running = false;
        if (p->waiting && (r = timer_start(&a->timer_fd, next > now ? next - now : 0)) < 0)
                log_error_errno(r, "cannot arm the probe timer: %m");
}

static void attempt_started(struct attempts *a) {
        int r;

        a->running = true;
        a->started = now_usec();
        a->count++;
        if ((r = timer_start(&a->timer_fd, a->bound)) < 0)
                log_error_errno(r, "cannot arm the probe timer: %m");
}

/* The attempt ran out of time: the next may take longer (see probes.h). */
static void attempt_timed_out(struct probes *p, struct attempts *a) {
        a->last_bound = a->bound;
        a->bound = probe_next_bound(a->bound);
        attempt_failed(p, a);
}

static void attempts_stop(struct probes *p, struct attempts *a) {
        loop_timer_disarm(p->loop, &a->timer_fd);
        a->running = false;
}

/* ---- --ready-log ---------------------------------------------------------- */

static void lines_fed(void *userdata) {
        struct probes *p = userdata;
        const struct line_matcher *m = p->out_lines.matched ? &p->out_lines : &p->err_lines;
        char what[LINE_TAIL_WIDTH + 64];

        if (!p->waiting || p->log_met || !m->matched)
                return;
        snprintf(what, sizeof what, "--ready-log matched '%s'", m->matched_line);
        met(p, &p->log_met, PROBE_LOG, what);
}

static void output_close(struct output *o) {
        relay_close(&o->out);
        relay_close(&o->err);
        free(o);
}

/* A new pair of pipes, on the loop if the probes are. */
static int output_open(struct probes *p) {
        struct output *o;
        int r;

        if (p->n_outputs == OUTPUTS_MAX)
                return 0;
        o = calloc(1, sizeof *o);
        if (!o)
                return -ENOMEM;
        o->out = o->err = (struct relay) RELAY_UNOPENED;
        r = relay_open(&o->out, STDOUT_FILENO, &p->out_lines);
        if (r >= 0)
                r = relay_open(&o->err, STDERR_FILENO, &p->err_lines);
        if (r >= 0 && p->loop && (r = relay_attach(&o->out, p->loop, lines_fed, p)) >= 0)
                r = relay_attach(&o->err, p->loop, lines_fed, p);
        if (r < 0) {
                output_close(o);
                return r;
        }
        p->outputs[p->n_outputs++] = o;
        p->current = o;
        return 0;
}

/* Everything o's COMMAND wrote, passed on (logs what it had to drop). */
static void output_drain(struct output *o) {
        struct relay *relays[] = { &o->out, &o->err };

        for (size_t i = 0; i < 2; i++) {
                uint64_t before = relays[i]->dropped;

                relay_drain(relays[i]);
                if (relays[i]->dropped > before)
                        log_error("dropped %llu bytes of COMMAND's %s: nobody read prebind's for %.1fs",
                                  (unsigned long long) (relays[i]->dropped - before), i ? "stderr" : "stdout",
                                  RELAY_STALL_MS / 1000.0);
        }
}

static void outputs_want_lines(struct probes *p, bool want) {
        for (size_t i = 0; i < p->n_outputs; i++) {
                bool w = want && p->outputs[i] == p->current;

                relay_want_lines(&p->outputs[i]->out, w);
                relay_want_lines(&p->outputs[i]->err, w);
        }
}

/* ---- --ready-exec --------------------------------------------------------- */

static void exec_begin(struct probes *p);

/* Before the attempt's fds are closed: the loop indexes sources by fd. */
static void exec_unwatch(struct probes *p) {
        if (p->ep.done_fd >= 0)
                loop_remove(p->loop, p->ep.done_fd);
        if (p->ep.output_fd >= 0)
                loop_remove(p->loop, p->ep.output_fd);
}

static void exec_over(struct probes *p, int r) {
        char what[128];

        if (r > 0) {
                attempts_stop(p, &p->exec_attempts);
                snprintf(what, sizeof what, "--ready-exec exited 0 (attempt %u)", p->exec_attempts.count);
                met(p, &p->exec_met, PROBE_EXEC, what);
                return;
        }
        attempt_failed(p, &p->exec_attempts);
}

static int exec_event(struct loop *l, int fd, uint32_t revents, void *userdata) {
        struct probes *p = userdata;

        if (fd == p->ep.output_fd) {
                /* At EOF the pipe is closed: stop watching it first. */
                loop_remove(l, fd);
                exec_probe_read(&p->ep);
                if (p->ep.output_fd >= 0)
                        (void) loop_add(l, fd, EPOLLIN, exec_event, p);
                return 0;
        }
        if (fd != p->ep.done_fd || p->ep.pid <= 0)
                return 0;
        exec_unwatch(p);
        exec_over(p, exec_probe_finish(&p->ep));
        return 0;
}

static int exec_timer(struct loop *l, int fd, uint32_t revents, void *userdata) {
        struct probes *p = userdata;

        if (!timer_expired(fd) || !p->waiting)
                return 0;
        if (!p->exec_attempts.running) {
                exec_begin(p);
                return 0;
        }
        /* Its time is up. */
        exec_unwatch(p);
        exec_probe_kill(&p->ep);
        attempt_timed_out(p, &p->exec_attempts);
        return 0;
}

static void exec_begin(struct probes *p) {
        int r = exec_probe_begin(&p->ep);

        if (r < 0) {
                log_error_errno(r, "cannot run the --ready-exec probe: %m");
                p->exec_attempts.count++;
                p->exec_attempts.started = now_usec();
                attempt_failed(p, &p->exec_attempts);
                return;
        }
        attempt_started(&p->exec_attempts);
        if ((r = loop_add(p->loop, p->ep.done_fd, EPOLLIN, exec_event, p)) < 0 ||
            (r = loop_add(p->loop, p->ep.output_fd, EPOLLIN, exec_event, p)) < 0)
                log_error_errno(r, "cannot watch the --ready-exec probe: %m");
}

/* ---- --ready-http --------------------------------------------------------- */

static void http_begin(struct probes *p);

/* The attempt is over, not ready: what it got, for the message (the next
 * attempt starts afresh in p->hp). */
static void http_failed(struct probes *p, bool timed_out) {
        p->http_last = (struct http_probe_result) { p->hp.status, p->hp.error, p->hp.garbage, true };
        if (timed_out)
                attempt_timed_out(p, &p->http_attempts);
        else
                attempt_failed(p, &p->http_attempts);
}

static void http_unwatch(struct probes *p) {
        if (p->http_fd >= 0)
                loop_remove(p->loop, p->http_fd);
        p->http_fd = -1;
}

static int http_event(struct loop *l, int fd, uint32_t revents, void *userdata) {
        struct probes *p = userdata;
        char what[64];
        int r;

        if (fd != p->http_fd || fd != p->hp.fd)
                return 0;
        r = http_probe_continue(&p->hp);
        if (r == 0) {
                (void) loop_modify(l, fd, http_probe_events(&p->hp));
                return 0;
        }
        loop_remove(l, fd);
        p->http_fd = -1;
        if (r > 0) {
                attempts_stop(p, &p->http_attempts);
                snprintf(what, sizeof what, "--ready-http answered %d (attempt %u)", p->hp.status,
                         p->http_attempts.count);
                met(p, &p->http_met, PROBE_HTTP, what);
                return 0;
        }
        http_failed(p, false);
        return 0;
}

static int http_timer(struct loop *l, int fd, uint32_t revents, void *userdata) {
        struct probes *p = userdata;

        if (!timer_expired(fd) || !p->waiting)
                return 0;
        if (!p->http_attempts.running) {
                http_begin(p);
                return 0;
        }
        /* Not accepted yet: wait on; the --ready timeout bounds it. */
        if (http_probe_queued(&p->hp)) {
                int r = timer_start(&p->http_attempts.timer_fd, p->http_attempts.bound);

                if (r < 0)
                        log_error_errno(r, "cannot arm the probe timer: %m");
                return 0;
        }
        /* No answer in time: COMMAND is busy, or does not answer. */
        http_unwatch(p);
        http_probe_abort(&p->hp);
        p->hp.error = ETIMEDOUT;
        http_failed(p, true);
        return 0;
}

static void http_begin(struct probes *p) {
        int r = http_probe_begin(&p->hp);

        attempt_started(&p->http_attempts);
        if (r < 0) {
                http_failed(p, false);
                return;
        }
        if ((r = loop_add(p->loop, p->hp.fd, http_probe_events(&p->hp), http_event, p)) < 0) {
                log_error_errno(r, "cannot watch the --ready-http probe: %m");
                http_probe_abort(&p->hp);
                http_failed(p, false);
                return;
        }
        p->http_fd = p->hp.fd;
}

/* ---- the set --------------------------------------------------------------- */

static int setup_log(struct probes *p, const char *pattern) {
        char error[256], quoted[LOG_QUOTE_SIZE];
        int r;

        r = line_regex_compile(pattern, &p->re, error, sizeof error);
        if (r == -EINVAL) {
                log_error("--ready-log: '%s': %s (see --help)", log_shorten(pattern, quoted), error);
                return -EINVAL;
        }
        if (r == -ENOENT) {
                log_error("--ready-log: %s", error);
                return r;
        }
        if (r < 0)
                return log_oom();
        p->log = true;
        log_debug("--ready-log: cost %llu per byte; lines matched on their first %zu bytes", line_regex_cost_of(p->re),
                  line_regex_prefix(p->re));
        if (line_matcher_init(&p->out_lines, p->re, &p->tail) < 0 ||
            line_matcher_init(&p->err_lines, p->re, &p->tail) < 0)
                return log_oom();
        r = output_open(p);
        if (r < 0)
                return log_error_errno(r, "cannot create the pipes for --ready-log: %m");
        return 0;
}

static int setup_exec(struct probes *p, const struct bound_socket *sockets, size_t n, char *const *setenv,
                      size_t n_setenv) {
        const char *command = p->options.exec;
        char quoted[LOG_QUOTE_SIZE], **kept;
        size_t offset = 0, n_kept = 0;
        int r;

        /* sh -c reads the command: each value is quoted as one word, so a
         * path with a space or "$(…)" in it is a path, never shell code. */
        r = template_expand(command, sockets, n, TEMPLATE_SHELL, &p->exec_command, &offset);
        if (r == -ENOMEM)
                return log_oom();
        if (r < 0) {
                log_error("--ready-exec: '%s': %s at '%s'", log_shorten(command, quoted),
                          r == -ENOENT  ? "no socket of that name or index"
                          : r == -EBADR ? "unknown field (port, host, addr, url, fd, name)"
                                        : "bad template (write {{ and }} for braces)",
                          command + offset);
                return -EINVAL;
        }
        /* The probe's environment: COMMAND's, less what is COMMAND's
         * alone (LISTEN_*, its NOTIFY_SOCKET). */
        kept = calloc(n_setenv + 1, sizeof *kept);
        if (!kept)
                return log_oom();
        for (size_t i = 0; i < n_setenv; i++)
                if (strncmp(setenv[i], "NOTIFY_SOCKET=", strlen("NOTIFY_SOCKET=")) != 0)
                        kept[n_kept++] = setenv[i];
        r = child_env_build(environ, kept, n_kept, NULL, 0, &p->env);
        free(kept);
        if (r < 0)
                return log_oom();
        p->exec = true;
        exec_probe_init(&p->ep, p->exec_command, p->env.envp);
        return 0;
}

static int setup_http(struct probes *p, const struct bound_socket *sockets, size_t n) {
        const struct bound_socket *s = http_probe_socket(sockets, n);
        char quoted[LOG_QUOTE_SIZE];
        int r;

        if (!s) {
                log_error("--ready-http needs a TCP socket (-l PORT or -l HOST:PORT) (see --help)");
                return -EINVAL;
        }
        r = http_probe_init(&p->hp, s, p->options.http_path);
        if (r == -EINVAL) {
                log_error("--ready-http: '%s': expected a path from '/', without spaces (see --help)",
                          log_shorten(p->options.http_path, quoted));
                return r;
        }
        if (r < 0)
                return log_oom();
        p->http = true;
        return 0;
}

int probes_new(const struct readiness_options *o, const struct bound_socket *sockets, size_t n, char *const *setenv,
               size_t n_setenv, struct probes **ret) {
        struct probes *p;
        int r = 0;

        *ret = NULL;
        if (!o->log && !o->exec && !o->http)
                return 0;
        p = calloc(1, sizeof *p);
        if (!p)
                return log_oom();
        *p = (struct probes) {
                .options = *o,
                .ep = { .done_fd = -1, .output_fd = -1 },
                .exec_attempts = { .timer_fd = -1 },
                .http_attempts = { .timer_fd = -1 },
                .http_fd = -1,
                .hp = { .fd = -1 },
        };
        if (o->log)
                r = setup_log(p, o->log);
        if (r >= 0 && o->exec)
                r = setup_exec(p, sockets, n, setenv, n_setenv);
        if (r >= 0 && o->http)
                r = setup_http(p, sockets, n);
        if (r < 0) {
                probes_free(p);
                return r;
        }
        *ret = p;
        return 0;
}

unsigned probes_conditions(const struct probes *p) {
        return !p ? 0 : (p->log ? PROBE_LOG : 0) | (p->exec ? PROBE_EXEC : 0) | (p->http ? PROBE_HTTP : 0);
}

int probes_attach(struct probes *p, struct loop *l, probe_met_callback callback, void *userdata) {
        int r;

        p->loop = l;
        p->on_met = callback;
        p->userdata = userdata;
        for (size_t i = 0; i < p->n_outputs; i++)
                if ((r = relay_attach(&p->outputs[i]->out, l, lines_fed, p)) < 0 ||
                    (r = relay_attach(&p->outputs[i]->err, l, lines_fed, p)) < 0)
                        return r;
        return 0;
}

void probes_detach(struct probes *p) {
        if (!p || !p->loop)
                return;
        probes_stop(p);
        for (size_t i = 0; i < p->n_outputs; i++) {
                relay_detach(&p->outputs[i]->out);
                relay_detach(&p->outputs[i]->err);
        }
        p->loop = NULL;
}

void probes_free(struct probes *p) {
        if (!p)
                return;
        probes_detach(p);
        for (size_t i = 0; i < p->n_outputs; i++)
                output_close(p->outputs[i]);
        line_matcher_done(&p->out_lines);
        line_matcher_done(&p->err_lines);
        line_regex_free(p->re);
        if (p->exec) {
                free(p->exec_command);
                child_env_done(&p->env);
        }
        if (p->http)
                http_probe_done(&p->hp);
        free(p);
}

void probes_child_output(const struct probes *p, int *ret_stdout, int *ret_stderr) {
        *ret_stdout = p && p->current ? p->current->out.child_fd : 0;
        *ret_stderr = p && p->current ? p->current->err.child_fd : 0;
}

int probes_prepare_output(struct probes *p) {
        if (!p || !p->current || p->current->pid == 0)
                return 0;
        return output_open(p);
}

static int start_timer(struct probes *p, struct attempts *a, loop_handler handler) {
        return loop_timer_arm(p->loop, &a->timer_fd, 0, handler, p);
}

void probes_start(struct probes *p, pid_t child) {
        int r;

        if (!p || !p->loop)
                return;
        if (p->current)
                p->current->pid = child;
        probes_stop(p);
        p->waiting = true;
        p->log_met = !p->log;
        p->exec_met = !p->exec;
        p->http_met = !p->http;
        if (p->log) {
                /* What the last COMMAND wrote is passed on already; this
                 * one starts with no line and no match. */
                line_matcher_reset(&p->out_lines);
                line_matcher_reset(&p->err_lines);
                line_tail_clear(&p->tail);
                outputs_want_lines(p, true);
        }
        /* The first attempts at once: the timer fires now. */
        p->exec_attempts.count = p->http_attempts.count = 0;
        p->http_last = (struct http_probe_result) { 0 };
        p->ep.status = -1;
        p->ep.timed_out = false;
        p->ep.last_output[0] = '\0';
        p->exec_attempts.bound = p->http_attempts.bound = probe_attempt_timeout(p->options.interval_usec);
        if (p->exec && (r = start_timer(p, &p->exec_attempts, exec_timer)) < 0)
                log_error_errno(r, "cannot arm the --ready-exec timer: %m");
        if (p->http && (r = start_timer(p, &p->http_attempts, http_timer)) < 0)
                log_error_errno(r, "cannot arm the --ready-http timer: %m");
}

void probes_stop(struct probes *p) {
        if (!p || !p->loop)
                return;
        p->waiting = false;
        /* The relay goes on, bytes only. (A message about a COMMAND that
         * was not ready comes before this, with the lines kept so far.) */
        if (p->log)
                outputs_want_lines(p, false);
        if (p->exec) {
                attempts_stop(p, &p->exec_attempts);
                if (p->ep.pid > 0) {
                        exec_unwatch(p);
                        exec_probe_kill(&p->ep);
                }
        }
        if (p->http) {
                attempts_stop(p, &p->http_attempts);
                http_unwatch(p);
                http_probe_abort(&p->hp);
        }
}

void probes_command_exited(struct probes *p, pid_t child) {
        size_t i;

        if (!p || !p->log)
                return;
        for (i = 0; i < p->n_outputs && p->outputs[i]->pid != child; i++)
                ;
        if (i == p->n_outputs) {
                /* Not its own (OUTPUTS_MAX were in use): the shared one. */
                output_drain(p->current);
                return;
        }
        output_drain(p->outputs[i]);
        p->outputs[i]->pid = 0;
        /* The pipes of the next COMMAND stay; a replaced one's go. */
        if (p->outputs[i] == p->current)
                return;
        output_close(p->outputs[i]);
        p->outputs[i] = p->outputs[--p->n_outputs];
}

static const char *last_line(const char *text, char *buf, size_t size) {
        const char *end = text + strlen(text);

        /* The last non-empty line says most: "no response", an error. */
        while (end > text && (end[-1] == '\n' || end[-1] == '\r' || end[-1] == ' '))
                end--;
        for (const char *s = end; s > text; s--)
                if (s[-1] == '\n') {
                        text = s;
                        break;
                }
        snprintf(buf, size, "%.*s", (int) (end - text), text);
        return buf;
}

size_t probes_describe_unmet(const struct probes *p, unsigned which, const char *sep, char *buf, size_t size) {
        char quoted[LOG_QUOTE_SIZE], line[256];
        size_t len = 0;

        if (!p)
                return 0;
#define APPEND(...) (len += (size_t) snprintf(len < size ? buf + len : buf, len < size ? size - len : 0, __VA_ARGS__))
        if ((which & PROBE_LOG) && !p->log_met)
                APPEND("%swrote no line that matches --ready-log '%s'", sep, log_shorten(p->options.log, quoted));
        if ((which & PROBE_EXEC) && !p->exec_met) {
                APPEND("%sdid not pass --ready-exec '%s' (", sep, log_shorten(p->exec_command, quoted));
                if (p->ep.status < 0)
                        APPEND("has not finished yet");
                else if (p->ep.timed_out)
                        APPEND("did not finish within %.1fs", (double) p->exec_attempts.last_bound / USEC_PER_SEC);
                else
                        APPEND("exited with status %d", p->ep.status);
                APPEND(", %u attempt%s", p->exec_attempts.count, p->exec_attempts.count == 1 ? "" : "s");
                if (p->ep.status >= 0 && p->ep.last_output[0])
                        APPEND(": '%s'", last_line(p->ep.last_output, line, sizeof line));
                APPEND(")");
        }
        if ((which & PROBE_HTTP) && !p->http_met) {
                const struct http_probe_result *last = &p->http_last;

                APPEND("%sdid not pass --ready-http (GET %s ", sep, p->options.http_path);
                if (!last->over)
                        APPEND("got no answer yet");
                else if (last->status)
                        APPEND("answered %d", last->status);
                else if (last->garbage)
                        APPEND("got an answer that is not HTTP/1.x");
                else if (last->error == ETIMEDOUT)
                        APPEND("got no answer within %.1fs", (double) p->http_attempts.last_bound / USEC_PER_SEC);
                else if (last->error)
                        APPEND("failed: %s", strerror(last->error));
                else
                        APPEND("got no answer");
                APPEND(", %u attempt%s)", p->http_attempts.count, p->http_attempts.count == 1 ? "" : "s");
        }
#undef APPEND
        return len;
}

void probes_log_tail(struct probes *p, const char *command) {
        if (!p || !p->log || p->log_met)
                return;
        /* A last line without a newline is a line too. */
        (void) line_matcher_flush(&p->out_lines);
        (void) line_matcher_flush(&p->err_lines);
        if (p->tail.count == 0) {
                log_error("'%s' wrote nothing", command);
                return;
        }
        log_error("last lines of '%s':", command);
        for (size_t i = 0; i < p->tail.count; i++)
                log_error("> %s", line_tail_get(&p->tail, i));
}
