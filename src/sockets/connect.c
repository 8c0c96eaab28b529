/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "address.h"
#include "connect.h"

#define DELAY_FIRST_USEC (10 * 1000)
#define DELAY_MAX_USEC (100 * 1000)

/* Where the server may listen, in the order tried. */
static const int families[2] = { AF_INET, AF_INET6 };

struct connect_backoff {
        struct loop *loop;
        uint16_t port;
        connect_socket_fn make_socket;
        void *userdata;
        connect_done_fn done;
        void *done_userdata;
        int fd; /* a connection being tried; -1 */
        int family_index;
        struct loop_timer pause; /* between rounds */
        uint64_t delay_usec;
};

socklen_t connect_loopback(int family, uint16_t port, union sockaddr_any *ret) {
        if (family == AF_INET) {
                ret->in = (struct sockaddr_in) { .sin_family = AF_INET,
                                                 .sin_port = htons(port),
                                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
                return sizeof ret->in;
        }
        ret->in6 = (struct sockaddr_in6) { .sin6_family = AF_INET6,
                                           .sin6_port = htons(port),
                                           .sin6_addr = in6addr_loopback };
        return sizeof ret->in6;
}

static void attempt(struct connect_backoff *c);

static void drop_fd(struct connect_backoff *c) {
        if (c->fd >= 0) {
                loop_remove(c->loop, c->fd);
                close(c->fd);
        }
        c->fd = -1;
}

static int on_pause_over(struct loop *l, struct loop_timer *t, void *userdata) {
        attempt(userdata);
        return 0;
}

/* Nobody answered on either family: again after a growing pause. */
static void round_failed(struct connect_backoff *c) {
        drop_fd(c);
        c->family_index = 0;
        loop_timer_start(c->loop, &c->pause, c->delay_usec, on_pause_over, c);
        c->delay_usec = c->delay_usec * 2 > DELAY_MAX_USEC ? DELAY_MAX_USEC : c->delay_usec * 2;
}

static void succeeded(struct connect_backoff *c) {
        drop_fd(c);
        c->done(c->done_userdata, families[c->family_index]);
}

static int socket_error(int fd) {
        int err = 0;
        socklen_t len = sizeof err;

        return getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 ? errno : err;
}

static int on_connected(struct loop *l, int fd, uint32_t revents, void *userdata) {
        struct connect_backoff *c = userdata;
        union sockaddr_any peer;
        socklen_t len = sizeof peer;
        int err = socket_error(fd);

        /* Writable but not connected yet (a spurious wake-up): wait on. */
        if (err == 0 && getpeername(fd, &peer.sa, &len) < 0)
                return 0;
        if (err == 0) {
                succeeded(c);
                return 0;
        }
        drop_fd(c);
        c->family_index++;
        attempt(c);
        return 0;
}

/* Connect on each family left in this round; the last one tried may
 * still be in progress (then on_connected() goes on). */
static void attempt(struct connect_backoff *c) {
        for (; c->family_index < 2; c->family_index++) {
                int family = families[c->family_index], r;
                union sockaddr_any addr;
                socklen_t len = connect_loopback(family, c->port, &addr);

                r = c->make_socket(c->userdata, family, SOCK_STREAM | SOCK_NONBLOCK, &c->fd);
                if (r < 0) {
                        c->fd = -1;
                        if (r == -EAFNOSUPPORT)
                                continue;
                        c->done(c->done_userdata, r);
                        return;
                }
                if (connect(c->fd, &addr.sa, len) == 0) {
                        succeeded(c);
                        return;
                }
                if (errno == EINPROGRESS && loop_add(c->loop, c->fd, LOOP_OUT, on_connected, c) == 0)
                        return;
                close(c->fd);
                c->fd = -1;
        }
        round_failed(c);
}

int connect_backoff_start(struct loop *l, uint16_t port, connect_socket_fn make_socket, void *userdata,
                          connect_done_fn done, void *done_userdata, struct connect_backoff **ret) {
        struct connect_backoff *c = calloc(1, sizeof *c);

        if (!c)
                return -ENOMEM;
        *c = (struct connect_backoff) {
                .loop = l,
                .port = port,
                .make_socket = make_socket,
                .userdata = userdata,
                .done = done,
                .done_userdata = done_userdata,
                .fd = -1,
                .delay_usec = DELAY_FIRST_USEC,
        };
        /* The first attempt at once, but from the loop: done() may free
         * the object, which the caller must have in hand by then. */
        loop_timer_start(l, &c->pause, 0, on_pause_over, c);
        *ret = c;
        return 0;
}

void connect_backoff_free(struct connect_backoff *c) {
        if (!c)
                return;
        drop_fd(c);
        loop_timer_stop(c->loop, &c->pause);
        free(c);
}
