/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ready_check.h"
#include "log.h"
#include "loop.h"
#include "macro.h"
#include "ready.h"

/* One of each kind at most: notify, claims, tcp, log, exec, http. */
#define READY_CHECKS_MAX 8

struct ready {
        struct ready_options options;
        const char *command; /* COMMAND's name, for messages */
        enum ready_mode mode;
        struct ready_check *checks[READY_CHECKS_MAX]; /* in the order added, which messages keep */
        size_t n_checks;
        struct ready_check *notify; /* --ready's check (in checks[] too): its socket and entry */
        struct ready_check *output; /* the check that reads COMMAND's output, if any */
        bool waiting;               /* between ready_start() and met, timed out or ready_stop() */
        struct loop_timer timeout;
        struct loop *loop;
        ready_callback callback;
        void *userdata;
};

/* Put c on the list (and on the loop, if the list is). Takes c over. */
int ready_add_check(struct ready *r, struct ready_check *c) {
        int k;

        if (r->n_checks == READY_CHECKS_MAX) {
                c->kind->free(c);
                return -E2BIG;
        }
        c->owner = r;
        c->command = r->command;
        r->checks[r->n_checks++] = c;
        c->loop = r->loop;
        if (r->loop && c->kind->attach && (k = c->kind->attach(c)) < 0)
                return k;
        return 0;
}

int ready_new(const struct ready_options *options, const char *command, struct ready **ret) {
        struct ready *r = calloc(1, sizeof *r);
        struct ready_check *notify;
        int k;

        if (!r)
                return -ENOMEM;
        *r = (struct ready) { .options = *options, .command = command };
        if (options->notify) {
                k = check_notify_new(&notify);
                if (k >= 0)
                        k = ready_add_check(r, notify);
                if (k < 0) {
                        ready_free(r);
                        return k;
                }
                r->notify = notify;
        }
        *ret = r;
        return 0;
}

void ready_free(struct ready *r) {
        if (!r)
                return;
        ready_detach(r);
        for (size_t i = 0; i < r->n_checks; i++)
                r->checks[i]->kind->free(r->checks[i]);
        free(r);
}

int ready_add_claims(struct ready *r, const struct claim_source_ops *ops, void *object) {
        struct ready_check *c;
        int k = check_claims_new(ops, object, &c);

        return k < 0 ? k : ready_add_check(r, c);
}

int ready_add_ports(struct ready *r, const uint16_t *ports, size_t n, connect_socket_fn make_socket,
                    void (*accepted)(void *userdata, size_t index, int family), void *userdata) {
        struct check_tcp_params p = {
                .ports = ports,
                .n_ports = n,
                .make_socket = make_socket,
                .accepted = accepted,
                .userdata = userdata,
                .where = "inside its namespace",
        };
        struct ready_check *c;
        int k = check_tcp_new(&p, &c);

        return k < 0 ? k : ready_add_check(r, c);
}

int ready_add_checks(struct ready *r, const struct bound_socket *sockets, size_t n, char *const *setenv,
                     size_t n_setenv) {
        const struct ready_check_env env = {
                .sockets = sockets,
                .n_sockets = n,
                .setenv = setenv,
                .n_setenv = n_setenv,
                .interval_usec = r->options.interval_usec,
        };
        struct ready_check *c;
        int k;

        for (size_t i = 0; i < r->options.n_checks; i++) {
                const struct ready_check_spec *spec = &r->options.checks[i];

                if ((k = spec->kind->create(spec->arg, &env, &c)) < 0 || (k = ready_add_check(r, c)) < 0)
                        return k;
                if (c->kind->child_output && !r->output)
                        r->output = c;
        }
        return 0;
}

const char *ready_options_add(struct ready_options *o, const struct ready_check_kind *kind, const char *arg) {
        const char *why = kind->refuse ? kind->refuse(arg) : NULL;
        size_t i;

        if (why)
                return why;
        for (i = 0; i < o->n_checks && o->checks[i].kind != kind; i++)
                ;
        if (i == READY_SPECS_MAX)
                return "too many kinds of check";
        o->checks[i] = (struct ready_check_spec) { .kind = kind, .arg = arg ?: kind->default_arg };
        if (i == o->n_checks)
                o->n_checks++;
        return NULL;
}

const char *ready_options_arg(const struct ready_options *o, const struct ready_check_kind *kind) {
        for (size_t i = 0; i < o->n_checks; i++)
                if (o->checks[i].kind == kind)
                        return o->checks[i].arg;
        return NULL;
}

bool ready_options_retry(const struct ready_options *o) {
        for (size_t i = 0; i < o->n_checks; i++)
                if (o->checks[i].kind->retries)
                        return true;
        return false;
}

void ready_set_mode(struct ready *r, enum ready_mode mode) {
        r->mode = mode;
}

void ready_child_output(const struct ready *r, int *ret_stdout, int *ret_stderr) {
        *ret_stdout = *ret_stderr = 0;
        if (r && r->output)
                r->output->kind->child_output(r->output, ret_stdout, ret_stderr);
}

int ready_prepare_output(struct ready *r) {
        return r->output && r->output->kind->prepare_output ? r->output->kind->prepare_output(r->output) : 0;
}

int ready_move_notify(struct ready *r, int fd) {
        if (!r->notify) {
                close(fd);
                return 0;
        }
        return check_notify_move(r->notify, fd);
}

const char *ready_notify_entry(const struct ready *r) {
        return r->notify ? check_notify_entry(r->notify) : NULL;
}

bool ready_needed(const struct ready *r) {
        return r->n_checks > 0;
}

bool ready_waiting(const struct ready *r) {
        return r->waiting;
}

/* ---- what every check gets -------------------------------------------------- */

void ready_command_exited(struct ready *r, pid_t child) {
        for (size_t i = 0; i < r->n_checks; i++)
                if (r->checks[i]->kind->command_exited)
                        r->checks[i]->kind->command_exited(r->checks[i], child);
}

void ready_log_details(struct ready *r) {
        for (size_t i = 0; i < r->n_checks; i++)
                if (r->checks[i]->kind->log_details && !r->checks[i]->met)
                        r->checks[i]->kind->log_details(r->checks[i]);
}

/* Anyone may send to the notification socket, or claim: each check
 * bounds its own work per wake-up. */
void ready_hear(struct ready *r) {
        for (size_t i = 0; i < r->n_checks; i++)
                if (r->checks[i]->kind->hear)
                        r->checks[i]->kind->hear(r->checks[i]);
}

void ready_forget_child(struct ready *r) {
        for (size_t i = 0; i < r->n_checks; i++) {
                r->checks[i]->child = 0;
                if (r->checks[i]->kind->forget_command)
                        r->checks[i]->kind->forget_command(r->checks[i]);
        }
}

void ready_set_command(struct ready *r, pid_t child, pid_t also) {
        for (size_t i = 0; i < r->n_checks; i++) {
                r->checks[i]->child = child;
                r->checks[i]->also = also;
        }
}

/* ---- the decision ------------------------------------------------------------ */

static bool decided(const struct ready *r) {
        size_t met = 0;

        for (size_t i = 0; i < r->n_checks; i++)
                met += r->checks[i]->met;
        return r->mode == READY_ANY ? met > 0 : met == r->n_checks;
}

void ready_check_met(struct ready_check *c, const char *what) {
        struct ready *r = c->owner;

        if (!c->waiting || c->met)
                return;
        c->met = true;
        log_debug("ready: %s", what);
        /* A check that holds stops its attempts; the others wait on. */
        c->kind->stop(c);
        c->waiting = false;
        if (!r->waiting || !decided(r))
                return;
        ready_stop(r);
        r->callback(READY_MET, r->userdata);
}

static int on_timeout(struct loop *l, struct loop_timer *t, void *userdata);

void ready_check_extend(struct ready_check *c, uint64_t usec) {
        struct ready *r = c->owner;

        /* As systemd: the timeout becomes at least usec from now. */
        if (r->waiting && r->options.timeout_usec && usec > loop_timer_left(&r->timeout))
                loop_timer_start(r->loop, &r->timeout, usec, on_timeout, r);
}

static int on_timeout(struct loop *l, struct loop_timer *t, void *userdata) {
        struct ready *r = userdata;

        /* What COMMAND sent before the clock ran out counts, even if the
         * loop reads it only now (a loaded machine runs the loop late, and
         * the socket and the timer can then be due in one turn): a READY=1
         * queued in time meets its check, an EXTEND_TIMEOUT_USEC= re-arms
         * the clock. */
        ready_hear(r);
        /* The callback may still ask what was missing: ready_stop() is
         * the owner's call. */
        if (r->waiting && !t->armed)
                r->callback(READY_TIMED_OUT, r->userdata);
        return 0;
}

int ready_attach(struct ready *r, struct loop *loop, ready_callback callback, void *userdata) {
        int k;

        r->loop = loop;
        r->callback = callback;
        r->userdata = userdata;
        for (size_t i = 0; i < r->n_checks; i++) {
                r->checks[i]->loop = loop;
                if (r->checks[i]->kind->attach && (k = r->checks[i]->kind->attach(r->checks[i])) < 0)
                        return k;
        }
        return 0;
}

void ready_detach(struct ready *r) {
        if (!r->loop)
                return;
        ready_stop(r);
        for (size_t i = 0; i < r->n_checks; i++) {
                if (r->checks[i]->kind->detach)
                        r->checks[i]->kind->detach(r->checks[i]);
                r->checks[i]->loop = NULL;
        }
        r->loop = NULL;
}

int ready_start(struct ready *r, pid_t child) {
        int k;

        ready_stop(r);
        if (r->n_checks == 0)
                return 0;
        r->waiting = true;
        for (size_t i = 0; i < r->n_checks; i++) {
                struct ready_check *c = r->checks[i];

                c->child = child;
                c->met = false;
                c->waiting = true;
                if ((k = c->kind->start(c)) < 0) {
                        ready_stop(r);
                        return k;
                }
        }
        if (r->options.timeout_usec)
                loop_timer_start(r->loop, &r->timeout, r->options.timeout_usec, on_timeout, r);
        return 0;
}

void ready_stop(struct ready *r) {
        r->waiting = false;
        for (size_t i = 0; i < r->n_checks; i++)
                if (r->checks[i]->waiting) {
                        r->checks[i]->waiting = false;
                        r->checks[i]->kind->stop(r->checks[i]);
                }
        if (r->loop)
                loop_timer_stop(r->loop, &r->timeout);
}

const char *ready_describe_unmet(const struct ready *r, char *buf, size_t size) {
        size_t len = 0;

        if (size > 0)
                buf[0] = '\0';
        if (!r->waiting)
                return buf;
        for (size_t i = 0; i < r->n_checks; i++) {
                const struct ready_check *c = r->checks[i];

                if (c->met)
                        continue;
                if (len > 0)
                        len += (size_t) snprintf(len < size ? buf + len : NULL, len < size ? size - len : 0, " and ");
                len += c->kind->describe(c, len < size ? buf + len : NULL, len < size ? size - len : 0);
        }
        return buf;
}
