/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "claim_source.h"
#include "connect.h"
#include "loop.h"
#include "ready.h"
#include "socket.h"

/* One readiness check, as ready.c holds them in its list: a kind (what
 * it checks, through one interface) and the state ready.c keeps for
 * every check. Each kind's own state embeds struct ready_check first,
 * and its file is the only place that knows it. ready.c starts every
 * check for a new COMMAND, stops them, asks what is unmet, and decides
 * "ready" from what each one reports with ready_check_met(). */
struct ready_check;

/* What a check an option asks for is made with. */
struct ready_check_env {
        const struct bound_socket *sockets;
        size_t n_sockets;
        char *const *setenv; /* the -E entries, expanded */
        size_t n_setenv;
        uint64_t interval_usec; /* --ready-interval */
};

struct ready_check_kind {
        const char *name; /* "notify", "claims", "tcp", "log", "exec", "http" */
        /* A new COMMAND (c->child) runs: the check is pending, its
         * attempts start. Logs its error; returns 0 or -errno. */
        int (*start)(struct ready_check *c);
        /* Stop checking (met elsewhere, timed out, or COMMAND exited). */
        void (*stop)(struct ready_check *c);
        /* What is not met, one phrase into buf (cut to size). Returns its
         * length, as snprintf(). */
        size_t (*describe)(const struct ready_check *c, char *buf, size_t size);
        void (*free)(struct ready_check *c);

        /* Optional (NULL: nothing to do). Sources kept for the whole run
         * (the notification socket, the output relay), put on c->loop and
         * taken off it: */
        int (*attach)(struct ready_check *c);
        void (*detach)(struct ready_check *c);
        /* Read what waits now, before COMMAND is reaped (READY=1, claims). */
        void (*hear)(struct ready_check *c);
        /* A COMMAND of any generation (pid) has exited. */
        void (*command_exited)(struct ready_check *c, pid_t pid);
        /* The current COMMAND is reaped: nothing it sends counts. */
        void (*forget_command)(struct ready_check *c);
        /* After a message that COMMAND was not ready: more detail, as log
         * lines (the last lines it wrote). */
        void (*log_details)(struct ready_check *c);
        /* A check that reads COMMAND's output: the fds the next COMMAND
         * gets as stdout and stderr (0: prebind's own). */
        void (*child_output)(const struct ready_check *c, int *ret_stdout, int *ret_stderr);
        /* …and before a COMMAND starts: new ones if the current ones
         * belong to a COMMAND that still runs (--reload=overlap). Returns 0
         * or -errno. */
        int (*prepare_output)(struct ready_check *c);

        /* The kinds an option asks for (ready_options_add()); NULL for
         * the others. */
        /* NULL if arg (the option's argument) is fine, else why not. */
        const char *(*refuse)(const char *arg);
        /* Make the check. Logs what is wrong; returns 0 or -errno. */
        int (*create)(const char *arg, const struct ready_check_env *env, struct ready_check **ret);
        const char *default_arg; /* an optional argument left out */
        bool retries;            /* tried every --ready-interval */
};

struct ready;

struct ready_check {
        const struct ready_check_kind *kind;
        struct ready *owner;
        struct loop *loop;   /* while attached */
        const char *command; /* COMMAND's name, for messages */
        pid_t child;         /* the COMMAND checked; 0 between COMMANDs */
        pid_t also;          /* --reload=overlap: the serving one, heard but not counted; 0 */
        bool waiting;        /* between start and stop */
        bool met;            /* since the last start */
};

/* Put c on r's list (and on its loop, if r is attached): ready.c's
 * constructors do, and a test with a kind of its own. Takes c over (frees
 * it if the list is full: -E2BIG). Returns 0 or -errno. */
int ready_add_check(struct ready *r, struct ready_check *c);

/* For each kind: the check holds (what: for the debug log). Once per
 * start; ready.c then decides. */
void ready_check_met(struct ready_check *c, const char *what);
/* EXTEND_TIMEOUT_USEC=: the timeout becomes at least usec from now. */
void ready_check_extend(struct ready_check *c, uint64_t usec);

/* The kinds that no option asks for: the supervisor adds them through
 * ready.h. Each constructor returns 0 or -errno. (The kinds an option
 * asks for are ready.h's ready_check_*, made with their create().) */

/* --ready: READY=1 on a NOTIFY_SOCKET of COMMAND's own (check_notify.c). */
int check_notify_new(struct ready_check **ret);
const char *check_notify_entry(const struct ready_check *c);
int check_notify_move(struct ready_check *c, int fd);

/* --intercept: every intercepted socket claimed, as the claim source
 * says (check_claims.c); the check owns object from then on. */
int check_claims_new(const struct claim_source_ops *ops, void *object, struct ready_check **ret);

/* --netns forwarding: every port accepts a connection (check_tcp.c), on
 * sockets that make_socket makes; accepted(userdata, index, family) as
 * each one first does. where says where, for messages ("inside its
 * namespace"). */
typedef void (*check_tcp_accepted_fn)(void *userdata, size_t index, int family);
struct check_tcp_params {
        const uint16_t *ports;
        size_t n_ports;
        connect_socket_fn make_socket;
        check_tcp_accepted_fn accepted;
        void *userdata;
        const char *where;
};
int check_tcp_new(const struct check_tcp_params *p, struct ready_check **ret);
