/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "address.h"
#include "clock.h"

/* How prebind's own sockets are set up (systemd.socket(5) options). */
struct socket_options {
        int backlog;        /* Backlog= */
        bool reuseport;     /* ReusePort= */
        bool v6only;        /* BindIPv6Only=ipv6-only */
        mode_t socket_mode; /* SocketMode= of unix socket files */
};

/* A socket prebind listens on, with the address the kernel gave it. */
struct bound_socket {
        int fd;                  /* O_CLOEXEC in prebind */
        const char *name;        /* "unknown" when unnamed */
        char *name_owned;        /* name, when inherited */
        int type;                /* SOCK_STREAM or SOCK_DGRAM */
        union sockaddr_any addr; /* from getsockname(): the real port */
        socklen_t addr_len;
        bool inherited; /* passed to prebind (LISTEN_FDS), not bound by it */
        /* A unix socket file prebind created, and removes on exit only if
         * it is still the same inode. */
        char *created_path;
        dev_t created_dev;
        ino_t created_ino;
};

/* Create, configure, bind and listen on one socket. Does not log: returns
 * a negative errno, and -EEXIST for a unix path that exists and is not a
 * stale socket, -EADDRINUSE for a live one. */
int socket_bind(const struct listen_spec *spec, const struct socket_options *options, struct bound_socket *ret);

/* Take the sockets prebind itself was passed (its own LISTEN_PID), with
 * their names, as sd_listen_fds_with_names(3) reads them. Returns the
 * number taken (0 if none) and a new array in *ret, or -errno. */
int sockets_inherit(struct bound_socket **ret);

/* prebind gives the socket up for good: make sure that no copy of it
 * left in another process (a daemonized server, a wrapper's background
 * child) keeps accepting into a backlog nobody serves. A listening stream
 * socket prebind bound itself is shut down, which stops it in every
 * process that shares it: new clients are refused, TCP clients queued in
 * the backlog are reset, unix ones are accepted and closed here. Sockets
 * prebind was passed are its activator's (systemd keeps listening on
 * them) and are left alone, as are datagram sockets. */
void socket_give_up(struct bound_socket *s);

/* Close the socket and remove the socket file it created, if any. */
void socket_release(struct bound_socket *s);

/* What to do after accept(2) failed with err: the one policy of every
 * socket prebind accepts on (--accept, the --netns forwarder, the
 * --intercept broker, the --share server), applied by accept_each() and
 * acted on by the listener (listener.h). */
enum accept_failure {
        /* This connection, or none (EAGAIN, and the pending network
         * errors accept(2) says to treat like it): accept the next. */
        ACCEPT_FAILURE_NEXT,
        /* Out of fds or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM): the
         * connection stays in the backlog and epoll reports it again at
         * once, so stop accepting until a connection ends or the back-off
         * passed (listener.h), then try again. The service goes on. */
        ACCEPT_FAILURE_BACK_OFF,
        /* The socket itself is broken (EBADF, EINVAL, ENOTSOCK…): trying
         * again fails again. Accepting on it stops, said once as an
         * error; --accept, for which that is everything, stops. */
        ACCEPT_FAILURE_FATAL,
};
enum accept_failure accept_failure_of(int err);

/* Called with each connection accept_each() takes (conn is the caller's
 * to close); returns whether there is room for another. */
typedef bool (*accept_fn)(int conn, const union sockaddr_any *peer, socklen_t peer_len, void *userdata);

/* Accept on the non-blocking listen_fd (accept4() with flags) and hand
 * each connection to fn, until the backlog is empty, fn has no room for
 * more, or budget_usec passed (0: no budget; a flood from anyone allowed
 * to connect must not hold the loop, see LOOP_WAKE_BUDGET_USEC). Failures
 * that leave the next connection to take (ACCEPT_FAILURE_NEXT) are
 * skipped. Returns 0 then, or -errno of a failure to act on: back off or
 * stop, as accept_failure_of(-r) says. Does not log. */
int accept_each(int listen_fd, int flags, uint64_t budget_usec, accept_fn fn, void *userdata);
