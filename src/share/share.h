/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "loop.h"
#include "publish.h"
#include "socket.h"

/* --share=NAME: one server for every caller with the same NAME.
 *
 * The name is a SOCK_SEQPACKET unix socket NAME.sock in a directory only
 * its user can enter (PARENT/prebind, 0700, kept once made, in a PARENT
 * nobody else can write: $XDG_RUNTIME_DIR, /run/user/UID, /run for root,
 * $HOME/.cache; never /tmp, where anyone could make it first), beside
 * NAME.lock (the claim: flock(2), so callers that arrive together start
 * one server) and NAME.log (the server's output). The
 * first caller forks a detached supervisor (its own session, stdio on
 * NAME.log) that runs the job as prebind always does and serves the
 * socket; every caller, the first too, is then a holder: one connection
 * to that supervisor, held until the holder's lifetime ends. The last
 * connection gone, the supervisor waits --share-linger, stops COMMAND and
 * removes the three files (its guard does, if it is killed); a COMMAND
 * that ends is reported to every holder, which exits with its status. */
struct share;

/* --share=NAME: what this call does with the shared server. */
enum share_action {
        SHARE_ACTION_HOLD,   /* start it or attach to it, then hold it */
        SHARE_ACTION_STATUS, /* --status */
        SHARE_ACTION_STOP,   /* --stop */
};

struct share_options {
        const char *name; /* --share=NAME; NULL without */
        enum share_action action;
        uint64_t linger_usec; /* --share-linger: after the last holder; UINT64_MAX: until --stop */
};

/* 1-64 letters, digits, '.', '_', '-', not starting with '.'. */
bool share_name_is_valid(const char *name);

enum share_role {
        SHARE_ROLE_HOLDER,     /* this process holds the share: share_hold() */
        SHARE_ROLE_SUPERVISOR, /* this process is the new detached supervisor: run the job */
};

/* Claim NAME or attach to the server that holds it. description (copied)
 * is what two callers must agree on, as one canonical text (the
 * supervisor's config_describe()): a holder whose text is not the
 * server's is refused. The first caller forks the supervisor:
 * share_enter() returns in both, with the role of each. Logs its errors;
 * returns the role or -errno. */
int share_enter(const struct share_options *options, const char *description, struct share **ret);

/* The holder: publish the server's addresses with this caller's publish
 * options once it is ready, then hold it until the caller's parent dies,
 * stdin (a pipe or socket) hangs up, or SIGTERM/SIGINT/SIGHUP: then 0.
 * A server that ends first is this call's end too: its exit status.
 * Returns prebind's exit status. */
int share_hold(struct share *share, const struct publish_options *publish);

/* --share=NAME --status and --stop. Returns prebind's exit status. */
int share_query(const struct share_options *options);

/* The supervisor's guard (guard.h; NULL: none) takes back NAME.sock,
 * NAME.log and NAME.lock if the supervisor is killed, under the lock as
 * the supervisor would. */
void share_guard(const struct share *share, struct guard *guard);

/* The supervisor's side, for the supervisor: serve the socket on the
 * loop; stop() is called once no holder is left after --share-linger, or
 * on --stop. */
typedef void (*share_stop_fn)(void *userdata);
int share_serve(struct share *share, struct loop *loop, share_stop_fn stop, void *userdata);
void share_serve_end(struct share *share);
/* The addresses are published: tell every holder, now and later. */
void share_ready(struct share *share, const struct bound_socket *sockets, size_t n, pid_t child_pid);
/* The job ended with prebind's exit status: tell every holder (with the
 * last lines of output), give up the name, remove the files. */
void share_finish(struct share *share, int status);
void share_free(struct share *share);
void share_freep(struct share **share);
