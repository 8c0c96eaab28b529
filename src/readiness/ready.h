/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "claim_source.h"
#include "loop.h"
#include "socket.h"

/* Readiness: the conditions that must all hold before prebind publishes
 * (and, after a restart, tells its manager READY=1 again). Each COMMAND
 * started is waited for anew, within --ready's timeout. A new kind of
 * readiness check is one more condition bit here, with its sources added
 * to the loop in readiness_start() and removed in readiness_stop(). */
enum ready_condition {
        READY_NOTIFY = 1u << 0,  /* --ready: READY=1 from COMMAND or a descendant */
        READY_CLAIMED = 1u << 1, /* --intercept: every intercepted socket claimed */
        READY_LOG = 1u << 2,     /* --ready-log: a line of its output matches (probes.c) */
        READY_EXEC = 1u << 3,    /* --ready-exec: a probe command exits 0 */
        READY_HTTP = 1u << 4,    /* --ready-http: GET answers 2xx/3xx */
        READY_PORTS = 1u << 5,   /* --netns --intercept: every port accepts inside */
};

enum readiness_event {
        READINESS_MET, /* every condition holds */
        READINESS_TIMED_OUT,
};

typedef void (*readiness_callback)(enum readiness_event event, void *userdata);

/* What the command line asks readiness for. */
struct readiness_options {
        bool notify;           /* --ready: READY=1 */
        uint64_t timeout_usec; /* --ready=, --ready-timeout= (and --intercept's); 0: wait forever */
        const char *log;       /* --ready-log=REGEX */
        const char *exec;      /* --ready-exec=COMMAND, templates unexpanded */
        bool http;             /* --ready-http[=PATH] */
        const char *http_path;
        uint64_t interval_usec; /* between two probes */
};

/* Does COMMAND wait for any of the options' conditions before it is ready? */
static inline bool readiness_options_wait(const struct readiness_options *o) {
        return o->notify || o->log || o->exec || o->http;
}

struct readiness;

/* What the options ask for (copied; the strings must outlive the
 * readiness), for COMMAND (its name, for messages); opens COMMAND's
 * notification socket for --ready. Returns 0 or -errno (nothing logged). */
int readiness_new(const struct readiness_options *options, const char *command, struct readiness **ret);
void readiness_free(struct readiness *r);

/* --intercept: COMMAND must claim its sockets (READY_CLAIMED), as the
 * claim source of intercept/ says (claim_source.h). The
 * readiness takes the object over (ops->free frees it), puts it on the
 * loop, tells it each new COMMAND, and asks it what is missing. */
void readiness_add_claims(struct readiness *r, const struct claim_source_ops *ops, void *object);

/* --netns forwarding (netns_job.h): the intercepted ports accept inside
 * the namespace, as the supervisor reports with READY_PORTS. */
void readiness_add_ports(struct readiness *r);

/* --ready-log, --ready-exec, --ready-http (probes.c), once the sockets
 * and the -E entries are known. Logs its errors (bad options too);
 * returns 0 or -errno. */
int readiness_add_probes(struct readiness *r, const struct bound_socket *sockets, size_t n, char *const *setenv,
                         size_t n_setenv);

/* --ready-log: the pipes COMMAND gets as stdout and stderr (0: prebind's
 * own). */
void readiness_child_output(const struct readiness *r, int *ret_stdout, int *ret_stderr);

/* Before a COMMAND starts (before readiness_child_output()): with
 * --ready-log, pipes of its own when the current ones belong to a
 * COMMAND that still runs (--reload=overlap). Returns 0 or -errno. */
int readiness_prepare_output(struct readiness *r);

/* A COMMAND (child: the current one, or one replaced by a reload) has
 * exited: pass on the rest of what it wrote (--ready-log), before its
 * exit is reported; its --intercept binds claim nothing from then on. */
void readiness_command_exited(struct readiness *r, pid_t child);

/* After a message that COMMAND was not ready: the last lines it wrote
 * (--ready-log), as log lines. */
void readiness_log_details(struct readiness *r);

/* "NOTIFY_SOCKET=@…" for COMMAND's environment, or NULL without --ready. */
const char *readiness_notify_entry(const struct readiness *r);

/* Does a new COMMAND wait for any condition? If not, it is ready at once. */
bool readiness_needed(const struct readiness *r);

/* Sources on the loop: the notification socket (kept for the whole run:
 * STATUS= and ERRNO= are relayed while COMMAND runs). */
int readiness_attach(struct readiness *r, struct loop *loop, readiness_callback callback, void *userdata);

/* Leave the loop (before it is freed): every source is removed. */
void readiness_detach(struct readiness *r);

/* A new COMMAND (pid) runs: every condition is pending again, the timeout
 * starts. Returns 0 or -errno. */
int readiness_start(struct readiness *r, pid_t child);
/* Stop waiting (ready, timed out, or COMMAND exited): timers and probes
 * go, the notification socket stays. */
void readiness_stop(struct readiness *r);
/* COMMAND is reaped: nothing it or its descendants send counts any more,
 * and nobody may claim a socket (its number is free for any process now,
 * issue 19). Call it at once. */
void readiness_forget_child(struct readiness *r);
/* --reload=overlap: whose notifications count (child: READY=1 and the
 * rest), and whose are only relayed (also: STATUS=, ERRNO= of the
 * generation that serves while the new one starts; 0: nobody's). */
void readiness_set_command(struct readiness *r, pid_t child, pid_t also);

/* Hear what COMMAND sent before it exited (a last STATUS=, STOPPING=1,
 * a report of what it bound), before it is reaped: a zombie's pidfd
 * still has its number, which is how the sender checks know it. */
void readiness_hear(struct readiness *r);

/* --netns: COMMAND's notification socket, made anew in its namespace
 * (fd, an AF_UNIX datagram socket made there): abstract unix names are
 * per network namespace, so the same name is bound there and the old
 * socket closed. NOTIFY_SOCKET stays as it was. Returns 0 or -errno. */
int readiness_move_notify(struct readiness *r, int fd);

/* A condition holds (for the checks that join later: each calls this). */
void readiness_condition_met(struct readiness *r, enum ready_condition condition);

/* Are any conditions pending? */
bool readiness_waiting(const struct readiness *r);

/* For the messages: what is still missing, e.g. "did not send READY=1;
 * --ready-http GET / answered 503 (12 attempts)", into buf. */
const char *readiness_describe_unmet(const struct readiness *r, char *buf, size_t size);
