/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "claim_source.h"
#include "connect.h"
#include "loop.h"
#include "socket.h"

/* Readiness is a list of checks (ready_check.h), each of one kind: READY=1
 * (--ready), a line of output (--ready-log), a command (--ready-exec), an
 * HTTP answer (--ready-http), every intercepted socket claimed
 * (--intercept), every port accepting inside the namespace (--netns
 * forwarding). COMMAND is ready once all of them hold (READY_ALL, what
 * the command line asks) or any one (READY_ANY). Each COMMAND started is
 * checked anew, within the timeout. */
enum ready_mode {
        READY_ALL,
        READY_ANY,
};

enum ready_event {
        READY_MET, /* the checks hold */
        READY_TIMED_OUT,
};

typedef void (*ready_callback)(enum ready_event event, void *userdata);

/* A check an option of the command line asks for (--ready-log,
 * --ready-exec, --ready-http): the kind its row of the option table names
 * (supervisor/options.c), and the option's argument. */
struct ready_check_kind;
struct ready_check_spec {
        const struct ready_check_kind *kind;
        const char *arg; /* the kind's default when an optional argument is left out */
};
#define READY_SPECS_MAX 8

/* What the command line asks readiness for. */
struct ready_options {
        bool notify;           /* --ready: READY=1 */
        uint64_t timeout_usec; /* --ready=, --ready-timeout= (and --intercept's); 0: wait forever */
        struct ready_check_spec checks[READY_SPECS_MAX]; /* one per kind, in the order given */
        size_t n_checks;
        uint64_t interval_usec; /* between two attempts of a check that tries again */
};

/* The kinds an option asks for, each in its own file (check_*.c). A
 * build tool that reads the option table alone (the bash completion's)
 * links no check: for it they are weak, and its rows point nowhere. */
#ifdef READY_CHECKS_UNLINKED
#define READY_CHECK_KIND extern const struct ready_check_kind __attribute__((weak))
#else
#define READY_CHECK_KIND extern const struct ready_check_kind
#endif
READY_CHECK_KIND ready_check_log, ready_check_exec, ready_check_http;

/* An option asks for a check of kind with arg (NULL: an optional argument
 * left out); asked again, the last one wins. Returns NULL, or why arg is
 * refused (bad usage: the caller says so). */
const char *ready_options_add(struct ready_options *o, const struct ready_check_kind *kind, const char *arg);
/* The argument of the check of kind asked for, or NULL if none is. */
const char *ready_options_arg(const struct ready_options *o, const struct ready_check_kind *kind);
/* Does a check asked for try again every interval_usec? */
bool ready_options_retry(const struct ready_options *o);

/* Does COMMAND wait for any of the options' checks before it is ready? */
static inline bool ready_options_wait(const struct ready_options *o) {
        return o->notify || o->n_checks > 0;
}

struct ready;

/* What the options ask for (copied; the strings must outlive the
 * readiness), for COMMAND (its name, for messages); opens COMMAND's
 * notification socket for --ready. Returns 0 or -errno (nothing logged). */
int ready_new(const struct ready_options *options, const char *command, struct ready **ret);
void ready_free(struct ready *r);

/* --intercept: COMMAND must claim its sockets, as the claim source of
 * intercept/ says (claim_source.h). The check takes the object over
 * (ops->free frees it, also on failure), puts it on the loop, tells it
 * each new COMMAND, and asks it what is missing. Returns 0 or -ENOMEM. */
int ready_add_claims(struct ready *r, const struct claim_source_ops *ops, void *object);

/* --netns forwarding (netns_job.h): each of n ports accepts a connection
 * inside the namespace, on sockets make_socket(userdata, …) makes there;
 * accepted(userdata, index, family) as each one first does. Returns 0
 * or -ENOMEM. */
int ready_add_ports(struct ready *r, const uint16_t *ports, size_t n, connect_socket_fn make_socket,
                    void (*accepted)(void *userdata, size_t index, int family), void *userdata);

/* The checks the options ask for (options->checks), once the sockets and
 * the -E entries are known. Logs its errors (bad options too); returns
 * 0 or -errno. */
int ready_add_checks(struct ready *r, const struct bound_socket *sockets, size_t n, char *const *setenv,
                     size_t n_setenv);

/* All checks must hold (the default), or any one of them. */
void ready_set_mode(struct ready *r, enum ready_mode mode);

/* --ready-log: the pipes COMMAND gets as stdout and stderr (0: prebind's
 * own). */
void ready_child_output(const struct ready *r, int *ret_stdout, int *ret_stderr);

/* Before a COMMAND starts (before ready_child_output()): with
 * --ready-log, pipes of its own when the current ones belong to a
 * COMMAND that still runs (--reload=overlap). Returns 0 or -errno. */
int ready_prepare_output(struct ready *r);

/* A COMMAND (child: the current one, or one replaced by a reload) has
 * exited: pass on the rest of what it wrote (--ready-log), before its
 * exit is reported; its --intercept binds claim nothing from then on. */
void ready_command_exited(struct ready *r, pid_t child);

/* After a message that COMMAND was not ready: the last lines it wrote
 * (--ready-log), as log lines. */
void ready_log_details(struct ready *r);

/* "NOTIFY_SOCKET=@…" for COMMAND's environment, or NULL without --ready. */
const char *ready_notify_entry(const struct ready *r);

/* Does a new COMMAND wait for any check? If not, it is ready at once. */
bool ready_needed(const struct ready *r);

/* Sources on the loop: the notification socket (kept for the whole run:
 * STATUS= and ERRNO= are relayed while COMMAND runs). */
int ready_attach(struct ready *r, struct loop *loop, ready_callback callback, void *userdata);

/* Leave the loop (before it is freed): every source is removed. */
void ready_detach(struct ready *r);

/* A new COMMAND (pid) runs: every check is pending again, the timeout
 * starts. Returns 0 or -errno. */
int ready_start(struct ready *r, pid_t child);
/* Stop waiting (ready, timed out, or COMMAND exited): the checks stop
 * (timers, attempts), the notification socket and the relay stay. */
void ready_stop(struct ready *r);
/* COMMAND is reaped: nothing it or its descendants send counts any more,
 * and nobody may claim a socket (its number is free for any process now:
 * a new process could claim with it). Call it at once. */
void ready_forget_child(struct ready *r);
/* --reload=overlap: whose notifications count (child: READY=1 and the
 * rest), and whose are only relayed (also: STATUS=, ERRNO= of the
 * generation that serves while the new one starts; 0: nobody's). */
void ready_set_command(struct ready *r, pid_t child, pid_t also);

/* Hear what COMMAND sent before it exited (a last STATUS=, STOPPING=1,
 * a report of what it bound), before it is reaped: a zombie's pidfd
 * still has its number, which is how the sender checks know it. */
void ready_hear(struct ready *r);

/* --netns: COMMAND's notification socket, made anew in its namespace
 * (fd, an AF_UNIX datagram socket made there): abstract unix names are
 * per network namespace, so the same name is bound there and the old
 * socket closed. NOTIFY_SOCKET stays as it was. Returns 0 or -errno. */
int ready_move_notify(struct ready *r, int fd);

/* Is COMMAND still waited for? */
bool ready_waiting(const struct ready *r);

/* For the messages: what is still missing, e.g. "did not send READY=1;
 * --ready-http GET / answered 503 (12 attempts)", into buf. */
const char *ready_describe_unmet(const struct ready *r, char *buf, size_t size);
