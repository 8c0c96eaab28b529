/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "clock.h"
#include "loop.h"
#include "socket.h"

/* A listening socket on the loop: the one machine behind every socket
 * prebind accepts on (the --intercept broker, the --share server, the
 * --netns forwarder, --accept), embedded in its owner. Its state is one
 * value:
 *
 *   paused      off the loop because the owner said so: before it first
 *               watches, at its cap, not wanted (listener_pause()).
 *   watching    LOOP_IN on the loop. Each wake-up accepts a batch
 *               (accept_each(), at most LOOP_WAKE_BUDGET_USEC: anyone
 *               allowed to connect can queue faster than the owner
 *               serves) and hands each connection to accepted(), which
 *               returns false to end the batch (at its cap).
 *   backing off out of fds or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM):
 *               the connection stays in the backlog, and level-triggered
 *               epoll would report it again at once, for ever. The socket
 *               leaves the loop for LISTENER_BACK_OFF_USEC (a struct
 *               loop_timer: arming it needs no fd), or until the owner
 *               says an fd was freed (listener_watch()), then watches
 *               again. Said once per episode, which ends with the next
 *               connection accepted, in one message rate-limited with
 *               every listener's: a peer can start episodes at will.
 *   broken      accept(2) cannot work on the socket again (EBADF, EINVAL,
 *               ENOTSOCK…): off the loop for good; broken() is told once,
 *               and says what that means for its owner.
 *
 * One back-off for all: 100 ms. Short enough that a client waiting in
 * the backlog barely notices when fds come back (and an owner that frees
 * one ends the wait at once), long enough that a socket short of fds for
 * good costs ten wake-ups a second, not a core. (The broker used to wait
 * for its 1 s connection tick, the others 100 ms.) */
#define LISTENER_BACK_OFF_USEC (100 * USEC_PER_MSEC)

enum listener_state {
        LISTENER_PAUSED,
        LISTENER_WATCHING,
        LISTENER_BACKING_OFF,
        LISTENER_BROKEN,
};

struct listener;
/* accept(2) failed for good with error (-errno): the listener is off the
 * loop already. May pause or watch (no-ops now), not free it. */
typedef void (*listener_broken_fn)(struct listener *lst, int error, void *userdata);
/* After the batch of each wake-up, last: may free the listener. */
typedef void (*listener_woke_fn)(void *userdata);

struct listener_params {
        int fd;           /* a listening socket, non-blocking; the owner's */
        int flags;        /* accept4()'s: SOCK_CLOEXEC, SOCK_NONBLOCK */
        const char *name; /* what messages say first: "--share", "forwarding" */
        accept_fn accepted;
        listener_broken_fn broken;
        listener_woke_fn woke; /* NULL: none */
        void *userdata;
};

struct listener {
        struct listener_params p;
        enum listener_state state;
        struct loop *loop; /* watching or backing off on it; NULL: paused or broken */
        struct loop_timer back_off;
        bool short_of_fds; /* an episode: from a failure to the next connection */
};

/* Paused, on no loop. */
void listener_init(struct listener *lst, const struct listener_params *params);

/* Watch on l: from paused, or from backing off (an fd was freed: the
 * back-off ends now). Watching or broken: nothing to do. Returns 0, or
 * -errno if the loop refused the socket (then it stays paused, or backs
 * off again). */
int listener_watch(struct listener *lst, struct loop *l);
/* Off the loop, the back-off forgotten (broken stays broken). Before the
 * owner closes the socket, and in its free. */
void listener_pause(struct listener *lst);

/* Accept one batch now, on the loop or not (paused: the owner serves
 * what waits before it ends, or before COMMAND is reaped): a failure is
 * handled as on a wake-up, except that a paused listener stays paused.
 * Broken: nothing. Calls neither woke() nor, after broken(), anything. */
void listener_accept_now(struct listener *lst);

static inline enum listener_state listener_state(const struct listener *lst) {
        return lst->state;
}
