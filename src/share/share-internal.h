/* SPDX-License-Identifier: MIT */
#pragma once

/* What share.c (the name, the claim, the end), serve.c (the supervisor's
 * side) and hold.c (the holders, --status, --stop) share. */

#include <stdbool.h>
#include <sys/types.h>

#include "listener.h"
#include "loop.h"
#include "share.h"
#include "wire.h"

struct share_paths {
        char *dir;  /* PARENT/prebind, 0700: share_paths() says which PARENT */
        char *sock; /* DIR/NAME.sock */
        char *lock; /* DIR/NAME.lock */
        char *log;  /* DIR/NAME.log */
};

/* One connection to the supervisor, by what it said. */
enum share_conn_kind {
        SHARE_CONN_NEW,    /* nothing yet: may be a holder attaching */
        SHARE_CONN_HOLDER, /* said SHARE_HOLD with our description */
        SHARE_CONN_QUERY,  /* --status or --stop: keeps nothing running */
};

struct share_conn {
        int fd;
        enum share_conn_kind kind;
};

struct share {
        struct share_options options;
        struct share_paths paths;
        char *description; /* what the server runs: config_describe() */
        int lock_fd;       /* the supervisor's open of NAME.lock */
        int listen_fd;     /* NAME.sock, while it leads to this supervisor */
        dev_t sock_dev;    /* …and the file bind() made, removed only if it is still that */
        ino_t sock_ino;
        int log_fd; /* NAME.log, the supervisor's output */
        dev_t log_dev;
        ino_t log_ino;
        int conn_fd; /* a holder's connection */
        pid_t supervisor_pid;

        /* The supervisor, while it serves. */
        struct loop *loop;
        share_stop_fn stop;
        void *userdata;
        struct share_conn *conns;
        size_t n_conns;
        struct loop_timer linger;
        struct listener listener; /* of listen_fd; zeroed: paused */
        bool stopping;            /* stop() was called: no linger, no new holder */
        bool ready;
        pid_t child_pid;
        struct share_wire_socket *sockets;
        size_t n_sockets;
};

/* NAME's paths; with create, the directory is made (and kept). */
int share_paths(const char *name, bool create, struct share_paths *ret);
void share_paths_done(struct share_paths *p);
/* Connect to NAME.sock and check that the supervisor is this user. */
int share_connect(const char *path, int *ret);

/* serve.c's, for share.c (which serve.c does not call): */
/* The supervisor: accept the connections waiting in the backlog. */
void share_accept_pending(struct share *s);
/* Under the lock: NAME.sock stops leading to this supervisor. */
void share_give_up_name(struct share *s);
/* The supervisor's hold of NAME.lock, around anything that changes
 * where NAME.sock leads: callers connect under it. */
void share_lock(const struct share *s);
void share_unlock(const struct share *s);
