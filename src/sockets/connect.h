/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdint.h>

#include "address.h"
#include "loop.h"

/* Connect with back-off: does a server accept on loopback PORT yet?
 * Connects (127.0.0.1, then [::1]) until one connection is accepted,
 * backing off from 10 ms to 100 ms between rounds; then calls
 * done(done_userdata, family) once, or done(…, -errno) if sockets cannot
 * be made. The sockets come from a factory, so that the server may be
 * elsewhere (another network namespace). The caller bounds the wait and
 * frees the object (also from done()). */

/* Make a socket (family, type | SOCK_NONBLOCK) where the server is.
 * Returns 0 or -errno; -EAFNOSUPPORT skips the family. */
typedef int (*connect_socket_fn)(void *userdata, int family, int type, int *ret_fd);
typedef void (*connect_done_fn)(void *userdata, int result);

struct connect_backoff;

/* 127.0.0.1:port (AF_INET) or [::1]:port (AF_INET6) into ret; returns its
 * length. */
socklen_t connect_loopback(int family, uint16_t port, union sockaddr_any *ret);

/* The first attempt is made from the loop, never from this call. Returns
 * 0 or -ENOMEM. */
int connect_backoff_start(struct loop *l, uint16_t port, connect_socket_fn make_socket, void *userdata,
                          connect_done_fn done, void *done_userdata, struct connect_backoff **ret);
void connect_backoff_free(struct connect_backoff *c);
