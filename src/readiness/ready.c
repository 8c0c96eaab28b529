/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "compat.h"
#include "log.h"
#include "loop.h"
#include "notify.h"
#include "parse.h"
#include "probes.h"
#include "process.h"
#include "ready.h"

struct readiness {
        struct readiness_options options;
        const char *command;                   /* COMMAND's name, for messages */
        unsigned conditions;                   /* enum ready_condition bits asked for */
        unsigned pending;                      /* …of which these do not hold yet */
        pid_t child;                           /* COMMAND; 0 between COMMANDs */
        pid_t also;                            /* --reload=overlap: the serving one, heard but not counted; 0 */
        struct notify_socket notify;           /* --ready: COMMAND's NOTIFY_SOCKET */
        char *notify_entry;                    /* "NOTIFY_SOCKET=…" */
        int timer_fd;                          /* the timeout; -1 when not waiting */
        const struct claim_source_ops *claims; /* --intercept; NULL without */
        void *claims_object;
        struct loop *loop;
        readiness_callback callback;
        void *userdata;
        struct probes *probes; /* --ready-log, --ready-exec, --ready-http */
};

/* probes.c's conditions, as ours. */
static const struct {
        enum probe_condition probe;
        enum ready_condition ready;
} probe_conditions[] = {
        { PROBE_LOG, READY_LOG },
        { PROBE_EXEC, READY_EXEC },
        { PROBE_HTTP, READY_HTTP },
};

int readiness_new(const struct readiness_options *options, const char *command, struct readiness **ret) {
        struct readiness *r = calloc(1, sizeof *r);
        int k;

        if (!r)
                return -ENOMEM;
        *r = (struct readiness) { .options = *options, .command = command, .notify = { .fd = -1 }, .timer_fd = -1 };
        if (options->notify) {
                r->conditions |= READY_NOTIFY;
                k = notify_socket_open(&r->notify);
                if (k < 0 || asprintf(&r->notify_entry, "NOTIFY_SOCKET=%s", r->notify.address) < 0) {
                        readiness_free(r);
                        return k < 0 ? k : -ENOMEM;
                }
        }
        *ret = r;
        return 0;
}

static int on_notify(struct loop *l, int fd, uint32_t revents, void *userdata);

int readiness_move_notify(struct readiness *r, int fd) {
        int old = r->notify.fd, k;

        if (old < 0) {
                close(fd);
                return 0;
        }
        if (r->loop)
                loop_remove(r->loop, old);
        k = notify_socket_move(&r->notify, fd);
        /* On failure the old socket stays, and is watched again. */
        if (r->loop && r->notify.fd >= 0) {
                int w = loop_add(r->loop, r->notify.fd, EPOLLIN, on_notify, r);
                if (k == 0)
                        k = w;
        }
        return k;
}

void readiness_detach(struct readiness *r) {
        readiness_stop(r);
        probes_detach(r->probes);
        if (r->loop && r->notify.fd >= 0)
                loop_remove(r->loop, r->notify.fd);
        if (r->claims)
                r->claims->detach(r->claims_object);
        r->loop = NULL;
}

void readiness_free(struct readiness *r) {
        if (!r)
                return;
        readiness_detach(r);
        if (r->claims)
                r->claims->free(r->claims_object);
        probes_free(r->probes);
        notify_socket_close(&r->notify);
        free(r->notify_entry);
        free(r);
}

void readiness_add_claims(struct readiness *r, const struct claim_source_ops *ops, void *object) {
        r->claims = ops;
        r->claims_object = object;
        r->conditions |= READY_CLAIMED;
}

void readiness_add_ports(struct readiness *r) {
        r->conditions |= READY_PORTS;
}

int readiness_add_probes(struct readiness *r, const struct bound_socket *sockets, size_t n, char *const *setenv,
                         size_t n_setenv) {
        int k = probes_new(&r->options, sockets, n, setenv, n_setenv, &r->probes);
        unsigned bits = probes_conditions(r->probes);

        for (size_t i = 0; i < sizeof probe_conditions / sizeof probe_conditions[0]; i++)
                if (bits & probe_conditions[i].probe)
                        r->conditions |= probe_conditions[i].ready;
        return k;
}

void readiness_child_output(const struct readiness *r, int *ret_stdout, int *ret_stderr) {
        probes_child_output(r ? r->probes : NULL, ret_stdout, ret_stderr);
}

int readiness_prepare_output(struct readiness *r) {
        return probes_prepare_output(r->probes);
}

void readiness_command_exited(struct readiness *r, pid_t child) {
        probes_command_exited(r->probes, child);
        if (r->claims && r->claims->command_exited)
                r->claims->command_exited(r->claims_object, child);
}

void readiness_log_details(struct readiness *r) {
        probes_log_tail(r->probes, r->command);
}

const char *readiness_notify_entry(const struct readiness *r) {
        return r->notify_entry;
}

bool readiness_needed(const struct readiness *r) {
        return r->conditions != 0;
}

bool readiness_waiting(const struct readiness *r) {
        return r->pending != 0;
}

static const char *command_name(const struct readiness *r) {
        return r->command;
}

void readiness_condition_met(struct readiness *r, enum ready_condition condition) {
        if (!(r->pending & condition))
                return;
        r->pending &= ~condition;
        if (r->pending)
                return;
        readiness_stop(r);
        r->callback(READINESS_MET, r->userdata);
}

/* What is left of the timeout: 0 when it ran out (or cannot be read). */
static uint64_t timeout_left_usec(const struct readiness *r) {
        struct itimerspec left;

        if (r->timer_fd < 0 || timerfd_gettime(r->timer_fd, &left) < 0)
                return 0;
        return (uint64_t) left.it_value.tv_sec * USEC_PER_SEC + (uint64_t) left.it_value.tv_nsec / 1000;
}

static void extend_timeout(struct readiness *r, uint64_t usec) {
        /* As systemd: the timeout becomes at least usec from now. */
        if (r->timer_fd >= 0 && usec > timeout_left_usec(r))
                (void) timer_start(&r->timer_fd, usec);
}

/* A notification counts if it comes from COMMAND, or from a process
 * descended from it at the time it is read (a server whose worker reports
 * for it). Anyone else, even with a guessed socket name, is ignored. */
static void hear_one(struct readiness *r, const struct peer *from, const struct notify_message *m) {
        /* Anyone may send them, as fast as they like (issue 19). */
        static struct log_ratelimit ignored = LOG_RATELIMIT_INIT("ignored notifications");
        pid_t sender = from->pid;
        /* The sender's pidfd, not its pid (issue 19): by the time the
         * message is read, its number may be another process's. During an
         * overlapping reload the serving generation (also) may still
         * report its status; only the new one's READY=1 counts. */
        bool counts = peer_descends_from(from, r->child);

        if (!counts && !(r->also > 0 && peer_descends_from(from, r->also))) {
                log_ratelimited(&ignored, LOG_LEVEL_INFO,
                                "ignoring a notification from pid %d, which is not '%s' (pid %d)", (int) sender,
                                command_name(r), (int) r->child);
                return;
        }
        if (m->status)
                log_info("%s: %.*s", command_name(r), (int) m->status_len, m->status);
        if (m->errno_value >= 0)
                log_info("%s: reports error %d (%s)", command_name(r), m->errno_value, strerror(m->errno_value));
        if (m->stopping)
                log_debug("%s is stopping", command_name(r));
        if (m->reloading)
                log_debug("%s is reloading", command_name(r));
        /* The generation being replaced: its READY=1 says nothing of the new one. */
        if (!counts)
                return;
        if (m->extend_usec && (r->pending & READY_NOTIFY))
                extend_timeout(r, m->extend_usec);
        if (m->ready) {
                log_debug("READY=1 from pid %d", (int) sender);
                readiness_condition_met(r, READY_NOTIFY);
        }
}

/* --intercept: serve the claims (the broker's, or COMMAND's bind()
 * calls through seccomp), hear the reports. */
static void claims_served(void *userdata) {
        struct readiness *r = userdata;

        if (r->child > 0 && (r->pending & READY_CLAIMED) && r->claims->all_claimed(r->claims_object)) {
                log_debug("'%s' took every intercepted socket", command_name(r));
                readiness_condition_met(r, READY_CLAIMED);
        }
}

static void hear_claims(struct readiness *r) {
        if (r->claims->dispatch(r->claims_object) >= 0)
                claims_served(r);
}

/* Anyone may send to the notification socket: at most
 * LOOP_WAKE_BUDGET_USEC of messages per wake-up (issue 19). */
void readiness_hear(struct readiness *r) {
        char buf[NOTIFY_MESSAGE_MAX + 1];
        struct notify_message m;
        struct peer sender;
        uint64_t deadline = now_usec() + LOOP_WAKE_BUDGET_USEC;
        int k = 0;

        /* A claim or a report sent just before COMMAND exited, too. */
        if (r->claims)
                hear_claims(r);
        if (r->notify.fd < 0)
                return;
        while (now_usec() < deadline && (k = notify_socket_receive(&r->notify, buf, sizeof buf, &sender, &m)) >= 0)
                if (k > 0) {
                        hear_one(r, &sender, &m);
                        peer_done(&sender);
                }
        if (k < 0 && k != -EAGAIN && k != -EWOULDBLOCK)
                log_error_errno(k, "cannot read a notification: %m");
}

static void on_probe_met(enum probe_condition condition, void *userdata) {
        for (size_t i = 0; i < sizeof probe_conditions / sizeof probe_conditions[0]; i++)
                if (probe_conditions[i].probe == condition)
                        readiness_condition_met(userdata, probe_conditions[i].ready);
}

static int on_notify(struct loop *l, int fd, uint32_t revents, void *userdata) {
        readiness_hear(userdata);
        return 0;
}

static int on_timeout(struct loop *l, int fd, uint32_t revents, void *userdata) {
        struct readiness *r = userdata;

        if (!timer_expired(fd))
                return 0;
        /* What COMMAND sent before the clock ran out counts, even if the
         * loop reads it only now (a loaded machine runs the loop late, and
         * the socket and the timer can then be ready in one wake-up): a
         * READY=1 queued in time meets the condition, an
         * EXTEND_TIMEOUT_USEC= re-arms the clock. */
        readiness_hear(r);
        /* The callback may still ask what was missing: readiness_stop()
         * is the owner's call. */
        if (r->pending && !timeout_left_usec(r))
                r->callback(READINESS_TIMED_OUT, r->userdata);
        return 0;
}

int readiness_attach(struct readiness *r, struct loop *loop, readiness_callback callback, void *userdata) {
        int k;

        r->loop = loop;
        r->callback = callback;
        r->userdata = userdata;
        if (r->claims && (k = r->claims->attach(r->claims_object, loop, claims_served, r)) < 0)
                return k;
        if (r->probes && (k = probes_attach(r->probes, loop, on_probe_met, r)) < 0)
                return k;
        return r->notify.fd >= 0 ? loop_add(loop, r->notify.fd, EPOLLIN, on_notify, r) : 0;
}

int readiness_start(struct readiness *r, pid_t child) {
        bool fresh;
        int k;

        r->child = child;
        r->pending = r->conditions;
        /* Only this COMMAND and its descendants may claim, and must again. */
        if (r->claims)
                r->claims->set_command(r->claims_object, child, command_name(r));
        probes_start(r->probes, child);
        if (!r->pending || !r->options.timeout_usec)
                return 0;
        fresh = r->timer_fd < 0;
        k = timer_start(&r->timer_fd, r->options.timeout_usec);
        if (k == 0 && fresh)
                k = loop_add(r->loop, r->timer_fd, EPOLLIN, on_timeout, r);
        /* Without the clock the wait is unbounded: say so, go on. */
        if (k < 0)
                log_error_errno(k, "cannot arm the readiness timeout: %m");
        return 0;
}

void readiness_stop(struct readiness *r) {
        r->pending = 0;
        probes_stop(r->probes);
        if (r->timer_fd >= 0 && r->loop)
                loop_remove(r->loop, r->timer_fd);
        timer_stop(&r->timer_fd);
}

void readiness_forget_child(struct readiness *r) {
        r->child = 0;
        if (r->claims && r->claims->forget_command)
                r->claims->forget_command(r->claims_object);
}

void readiness_set_command(struct readiness *r, pid_t child, pid_t also) {
        r->child = child;
        r->also = also;
}

const char *readiness_describe_unmet(const struct readiness *r, char *buf, size_t size) {
        static const struct {
                enum ready_condition condition;
                const char *text;
        } phrases[] = {
                { READY_NOTIFY, "did not send READY=1" },
                { READY_CLAIMED, NULL }, /* the claims say what is missing */
                { READY_PORTS, "did not accept a connection on its --intercept port inside its namespace" },
        };
        char claims[512];
        size_t len = 0;

        buf[0] = '\0';
        for (size_t i = 0; i < sizeof phrases / sizeof phrases[0]; i++) {
                const char *text = phrases[i].text;

                if (!(r->pending & phrases[i].condition))
                        continue;
                if (phrases[i].condition == READY_CLAIMED) {
                        r->claims->describe_unmet(r->claims_object, claims, sizeof claims);
                        text = claims;
                }
                len += (size_t) snprintf(buf + len, len < size ? size - len : 0, "%s%s", len ? " and " : "", text);
        }
        for (size_t i = 0; i < sizeof probe_conditions / sizeof probe_conditions[0]; i++)
                if (r->pending & probe_conditions[i].ready)
                        len += probes_describe_unmet(r->probes, probe_conditions[i].probe, len ? " and " : "",
                                                     len < size ? buf + len : buf, len < size ? size - len : 0);
        return buf;
}
