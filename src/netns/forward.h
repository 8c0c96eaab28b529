/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "loop.h"

/* Forwarding for --netns --intercept: every connection accepted on a
 * listening socket is connected to 127.0.0.1:PORT (or [::1]:PORT, which
 * ever the server listens on) through sockets made by a factory (in
 * COMMAND's network namespace), and the bytes are moved with splice()
 * through a pipe per direction, in both directions, on prebind's event
 * loop. Half-closes are passed on as shutdown(SHUT_WR), resets as resets
 * (SO_LINGER 0). Memory per connection is bounded by the two pipes. */

/* Make a socket (family, type | SOCK_NONBLOCK) where the server is.
 * Returns 0 or -errno. */
typedef int (*forward_socket_fn)(void *userdata, int family, int type, int *ret_fd);

struct forward_params {
        int listen_fd;            /* listening stream socket; not owned, made non-blocking */
        uint16_t port;            /* the server's port, on loopback */
        unsigned max_connections; /* at most this many at once; then stop accepting */
        size_t pipe_size;         /* bytes per direction; 0: the kernel's default */
        /* A connection refused inside (COMMAND not listening yet, or
         * restarting) waits and is tried again, backing off from 10 ms to
         * 100 ms, for at most this long (0: for ever), then is reset;
         * FORWARD_NO_WAIT resets it at once. */
        uint64_t wait_usec;
        forward_socket_fn make_socket;
        void *userdata;
};

#define FORWARD_NO_WAIT UINT64_MAX

struct forwarder;

int forwarder_new(struct loop *l, const struct forward_params *params, struct forwarder **ret);
/* Close every connection and leave the loop. */
void forwarder_free(struct forwarder *f);

/* Accept (again), or stop accepting: connections then wait in the
 * backlog; those being forwarded go on. */
int forwarder_start(struct forwarder *f);
void forwarder_stop(struct forwarder *f);
/* The family that answered last (AF_INET or AF_INET6) is tried first. */
void forwarder_prefer_family(struct forwarder *f, int family);

size_t forwarder_connections(const struct forwarder *f);

/* Counters, for tests and -v. */
struct forward_stats {
        uint64_t accepted;
        uint64_t refused;  /* nobody listened inside: the client was reset */
        uint64_t resets;   /* resets passed on */
        uint64_t bytes[2]; /* [0] client to server, [1] server to client */
};
void forwarder_get_stats(const struct forwarder *f, struct forward_stats *ret);

/* The pure part of the per-connection state machine, exposed for the unit
 * tests: what the loop must watch on each side of a connection. */
struct forward_flow {
        size_t pending;  /* bytes in the pipe, read but not yet written on */
        size_t capacity; /* the pipe's size */
        int read_eof;    /* the reading side said EOF */
        int pipe_full;   /* the pipe took no more although pending < capacity */
        int shut;        /* EOF passed on: the writing side is shut down */
};
/* Events (LOOP_IN, LOOP_OUT) to watch on side x (0 client, 1 server):
 * flows[d] moves bytes from side d to side 1-d. */
uint32_t forward_interest(const struct forward_flow flows[2], int x);
/* A connection is over once both directions have passed their EOF on. */
int forward_finished(const struct forward_flow flows[2]);
