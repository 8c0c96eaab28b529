/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "clock.h"

/* The supervisor's event loop: a table of event sources, each an fd that
 * epoll watches and a handler called when it is ready. A new kind of event
 * (a bind broker, a readiness probe, an output relay, a forwarded
 * connection) is one more source: loop_add() it, nothing else changes.
 *
 * Handlers return 0, or -errno to end loop_dispatch_once() with that
 * error. A handler may add and remove sources, its own included; an event
 * of a source removed (or removed and its fd reused) earlier in the same
 * batch is not delivered. */
struct loop;

/* The most time a handler spends per wake-up on work that others can
 * queue faster than it is done: connections to the broker, messages to
 * the notification socket, from anyone allowed to send, each judged by
 * walking its sender's parent chain in /proc (a read and a pidfd_open()
 * per level: ms for a sender deep in a chain of forks, µs to send).
 * Without a bound a flood, from another user too, kept the queue from
 * ever emptying and the loop from its timers and signals. The
 * handler stops when it is spent and returns; level-triggered epoll
 * brings what is left back on the next turn. */
#define LOOP_WAKE_BUDGET_USEC (20 * USEC_PER_MSEC)

/* What a source waits for, and what its handler is told happened. The
 * loop's own names: no file outside event/ needs epoll's. ERR and HUP are
 * always reported, whether asked for or not. */
enum {
        LOOP_IN = 1u << 0,
        LOOP_OUT = 1u << 2,
        LOOP_ERR = 1u << 3,
        LOOP_HUP = 1u << 4,
};

typedef int (*loop_handler)(struct loop *l, int fd, uint32_t revents, void *userdata);

/* A deadline the loop keeps: no fd, so arming one never fails, even short
 * of descriptors. Embed it in its owner, zeroed (not armed); the loop
 * calls handler once when it is due, after the fd events of that turn,
 * and the timer is no longer armed when it runs (the handler may arm it
 * again). Due times are CLOCK_MONOTONIC; a timer is never early, and late
 * by at most the loop's resolution (1 ms) plus the handlers before it. */
struct loop_timer;
typedef int (*loop_timer_handler)(struct loop *l, struct loop_timer *t, void *userdata);
struct loop_timer {
        uint64_t due;
        loop_timer_handler handler;
        void *userdata;
        struct loop_timer *prev, *next;
        bool armed;
        bool running; /* due in the turn being dispatched */
};

/* (Re)arm t to run handler in usec (0: at the next turn). */
void loop_timer_start(struct loop *l, struct loop_timer *t, uint64_t usec, loop_timer_handler handler, void *userdata);
/* Disarm t (one not armed is fine). */
void loop_timer_stop(struct loop *l, struct loop_timer *t);
/* Microseconds until t is due (0 if due or not armed). */
uint64_t loop_timer_left(const struct loop_timer *t);

int loop_new(struct loop **ret);
void loop_free(struct loop *l);

/* Watch fd for events (LOOP_IN, LOOP_OUT). One source per fd. Returns
 * 0 or -errno. */
int loop_add(struct loop *l, int fd, uint32_t events, loop_handler handler, void *userdata);
/* Change the events watched on fd. */
int loop_modify(struct loop *l, int fd, uint32_t events);
/* Stop watching fd (before closing it). Unknown fds are ignored. */
void loop_remove(struct loop *l, int fd);

/* Dispatch the events of one wait (timeout_ms: -1 waits for ever, or
 * until the first armed timer is due), then the timers due. Returns the
 * number of sources and timers dispatched, or -errno (a handler's, or
 * epoll's). EINTR is not an error: 0 sources. */
int loop_dispatch_once(struct loop *l, int timeout_ms);
