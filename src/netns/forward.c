/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "forward.h"
#include "address.h"
#include "clock.h"
#include "connect.h"
#include "listener.h"
#include "log.h"
#include "socket.h"

/* Where the server may listen, in the order tried. */
static const int families[2] = { AF_INET, AF_INET6 };

/* Rounds of splice per event and direction: enough to move a burst, few
 * enough that one busy connection does not starve the others. */
#define PUMP_ROUNDS 8

uint32_t forward_interest(const struct forward_flow flows[2], int x) {
        const struct forward_flow *in = &flows[x], *out = &flows[1 - x];
        uint32_t events = 0;

        /* Read from x while its pipe has room; write to x what the other
         * side's pipe holds. Nothing else: an fd with nothing to do is not
         * watched at all, or a half-closed socket (LOOP_HUP, reported
         * whatever is asked) would wake the loop for ever. */
        if (!in->read_eof && !in->pipe_full && in->pending < in->capacity)
                events |= LOOP_IN;
        if (out->pending > 0)
                events |= LOOP_OUT;
        return events;
}

int forward_finished(const struct forward_flow flows[2]) {
        return flows[0].shut && flows[1].shut;
}

enum conn_state {
        CONN_CONNECTING,
        CONN_WAITING, /* nothing listens inside (yet, or again): try later */
        CONN_OPEN,
};

struct conn {
        struct forwarder *f;
        struct conn *prev, *next;
        enum conn_state state;
        int fd[2];      /* [0] the client, outside; [1] the server, inside */
        int pipe[2][2]; /* [d]: from fd[d] to fd[1-d]; [0] read end, [1] write end */
        struct forward_flow flow[2];
        uint32_t watched[2];    /* events in the loop for fd[x]; 0: not in the loop */
        int attempt;            /* connections tried so far (one per family) */
        int family_index;       /* of the one being tried */
        uint64_t waiting_since; /* CONN_WAITING: when it began, CLOCK_MONOTONIC usec */
};

struct forwarder {
        struct loop *loop;
        struct forward_params p;
        struct conn *conns;
        size_t n_conns;
        bool wanted;                  /* forwarder_start() was called, and not _stop() */
        struct listener listener;     /* of p.listen_fd */
        int preferred;                /* index into families[] */
        struct loop_timer wait_timer; /* armed while connections wait for the server */
        uint64_t wait_delay_usec;
        size_t n_waiting;
        struct forward_stats stats;
};

#define WAIT_DELAY_FIRST_USEC (10 * USEC_PER_MSEC)
#define WAIT_DELAY_MAX_USEC (100 * USEC_PER_MSEC)

static int update_listening(struct forwarder *f);

/* Any client can make these happen, as often as it likes. */
static struct log_ratelimit resets = LOG_RATELIMIT_INIT("forwarding resets");

static void conn_close_fds(struct conn *c) {
        for (int x = 0; x < 2; x++) {
                if (c->fd[x] >= 0) {
                        if (c->watched[x])
                                loop_remove(c->f->loop, c->fd[x]);
                        close(c->fd[x]);
                }
                c->fd[x] = -1;
                c->watched[x] = 0;
                for (int e = 0; e < 2; e++)
                        if (c->pipe[x][e] >= 0)
                                close(c->pipe[x][e]);
                c->pipe[x][0] = c->pipe[x][1] = -1;
        }
}

static void conn_unlink(struct conn *c) {
        struct forwarder *f = c->f;

        if (c->prev)
                c->prev->next = c->next;
        else
                f->conns = c->next;
        if (c->next)
                c->next->prev = c->prev;
        c->prev = c->next = NULL;
}

static void conn_destroy(struct conn *c) {
        struct forwarder *f = c->f;

        conn_close_fds(c);
        if (c->state == CONN_WAITING)
                f->n_waiting--;
        f->n_conns--;
        free(c);
}

static void conn_free(struct conn *c) {
        struct forwarder *f = c->f;

        conn_unlink(c);
        conn_destroy(c);
        update_listening(f);
}

/* Close side x with a reset (RST, not FIN): SO_LINGER with a zero
 * timeout, then close. */
static void reset_fd(int fd) {
        struct linger l = { .l_onoff = 1, .l_linger = 0 };

        if (fd >= 0)
                (void) setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
}

/* Side x failed (a reset from its peer, or an error): the other side is
 * reset, so that its peer learns the connection broke and does not take
 * a truncated stream for a complete one. */
static void conn_broken(struct conn *c, int x, int err) {
        log_ratelimited(&resets, LOG_LEVEL_DEBUG, "forwarding: %s side: %s; resetting the %s",
                        x == 0 ? "client" : "server", strerror(err), x == 0 ? "server" : "client");
        c->f->stats.resets++;
        reset_fd(c->fd[1 - x]);
        conn_free(c);
}

static int conn_watch(struct conn *c, int x);

static int conn_handler(struct loop *l, int fd, uint32_t revents, void *userdata);

static int conn_watch(struct conn *c, int x) {
        uint32_t want = c->state == CONN_CONNECTING ? (x == 1 ? LOOP_OUT : 0) : forward_interest(c->flow, x);
        int r = 0;

        if (want == c->watched[x])
                return 0;
        if (want == 0)
                loop_remove(c->f->loop, c->fd[x]);
        else if (c->watched[x] == 0)
                r = loop_add(c->f->loop, c->fd[x], want, conn_handler, c);
        else
                r = loop_modify(c->f->loop, c->fd[x], want);
        c->watched[x] = r < 0 ? c->watched[x] : want;
        return r;
}

/* Move what can be moved from fd[d] to fd[1-d] now. Returns 0, or -1
 * when the connection was freed. */
static int pump(struct conn *c, int d) {
        struct forward_flow *fl = &c->flow[d];
        int in = c->fd[d], out = c->fd[1 - d];

        for (int round = 0; round < PUMP_ROUNDS; round++) {
                bool progress = false;
                ssize_t k;

                if (!fl->read_eof && !fl->pipe_full && fl->pending < fl->capacity) {
                        k = splice(in, NULL, c->pipe[d][1], NULL, fl->capacity - fl->pending,
                                   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
                        if (k > 0) {
                                fl->pending += (size_t) k;
                                progress = true;
                        } else if (k == 0) {
                                fl->read_eof = 1;
                                progress = true;
                        } else if (errno == EAGAIN) {
                                /* The socket is empty, or the pipe has no
                                 * slot left (a slot per page or packet,
                                 * whatever its fill): with bytes pending,
                                 * assume the latter, and read again once
                                 * some were written. */
                                if (fl->pending > 0)
                                        fl->pipe_full = 1;
                        } else if (errno != EINTR) {
                                conn_broken(c, d, errno);
                                return -1;
                        }
                }
                if (fl->pending > 0) {
                        k = splice(c->pipe[d][0], NULL, out, NULL, fl->pending, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
                        if (k > 0) {
                                fl->pending -= (size_t) k;
                                c->f->stats.bytes[d] += (uint64_t) k;
                                fl->pipe_full = 0;
                                progress = true;
                        } else if (k < 0 && errno != EAGAIN && errno != EINTR) {
                                /* EPIPE, ECONNRESET: the receiving side is gone. */
                                conn_broken(c, 1 - d, errno);
                                return -1;
                        }
                }
                if (fl->read_eof && fl->pending == 0 && !fl->shut) {
                        /* Half-close: the reader gets EOF, and may still
                         * answer in the other direction. */
                        if (shutdown(out, SHUT_WR) < 0 && errno != ENOTCONN) {
                                conn_broken(c, 1 - d, errno);
                                return -1;
                        }
                        fl->shut = 1;
                }
                if (!progress)
                        break;
        }
        return 0;
}

static int sock_error(int fd) {
        int err = 0;
        socklen_t len = sizeof err;

        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
                return errno;
        return err;
}

static int conn_update(struct conn *c) {
        if (forward_finished(c->flow)) {
                conn_free(c);
                return 0;
        }
        for (int x = 0; x < 2; x++)
                if (conn_watch(c, x) < 0) {
                        conn_broken(c, x, ENOMEM);
                        return 0;
                }
        return 0;
}

static int conn_open(struct conn *c) {
        size_t size = c->f->p.pipe_size;

        c->state = CONN_OPEN;
        c->f->wait_delay_usec = WAIT_DELAY_FIRST_USEC; /* the server listens: waiting starts over */
        for (int d = 0; d < 2; d++) {
                int sz;

                if (pipe2(c->pipe[d], O_CLOEXEC | O_NONBLOCK) < 0) {
                        conn_broken(c, 1, errno);
                        return 0;
                }
                if (size > 0)
                        (void) fcntl(c->pipe[d][0], F_SETPIPE_SZ, (int) size);
                sz = fcntl(c->pipe[d][0], F_GETPIPE_SZ);
                c->flow[d].capacity = sz > 0 ? (size_t) sz : 65536;
        }
        /* Bytes may be waiting on either side already. */
        for (int d = 0; d < 2; d++)
                if (pump(c, d) < 0)
                        return 0;
        return conn_update(c);
}

static void conn_connect_next(struct conn *c);

static int wait_timer_handler(struct loop *l, struct loop_timer *t, void *userdata) {
        struct forwarder *f = userdata;
        uint64_t now = now_usec();
        struct conn *next;

        for (struct conn *c = f->conns; c; c = next) {
                next = c->next;
                if (c->state != CONN_WAITING)
                        continue;
                f->n_waiting--;
                if (f->p.wait_usec && now - c->waiting_since >= f->p.wait_usec) {
                        log_ratelimited(
                                &resets, LOG_LEVEL_DEBUG,
                                "forwarding: nothing listened on port %u inside for %.1fs; resetting the client",
                                (unsigned) f->p.port, (double) f->p.wait_usec / USEC_PER_SEC);
                        f->stats.refused++;
                        reset_fd(c->fd[0]);
                        c->state = CONN_CONNECTING;
                        conn_free(c);
                        continue;
                }
                c->state = CONN_CONNECTING;
                c->attempt = 0;
                conn_connect_next(c);
        }
        /* The delay grows until a connection inside succeeds (conn_open),
         * not until this round's tries end: a refusal may come after the
         * round (connect() in progress), and must not start over at the
         * first delay. */
        f->wait_delay_usec =
                f->wait_delay_usec * 2 > WAIT_DELAY_MAX_USEC ? WAIT_DELAY_MAX_USEC : f->wait_delay_usec * 2;
        if (f->n_waiting > 0)
                loop_timer_start(l, &f->wait_timer, f->wait_delay_usec, wait_timer_handler, f);
        return 0;
}

/* Refused inside: the server is not listening (yet, or again: COMMAND
 * exits or restarts). The client waits, as it would in the backlog. */
static void conn_wait(struct conn *c) {
        struct forwarder *f = c->f;

        c->state = CONN_WAITING;
        if (!c->waiting_since)
                c->waiting_since = now_usec();
        f->n_waiting++;
        if (!f->wait_timer.armed)
                loop_timer_start(f->loop, &f->wait_timer, f->wait_delay_usec, wait_timer_handler, f);
}

static int conn_handler(struct loop *l, int fd, uint32_t revents, void *userdata) {
        struct conn *c = userdata;
        int x = fd == c->fd[0] ? 0 : 1, err;

        if (c->state == CONN_CONNECTING) {
                union sockaddr_any peer;
                socklen_t len = sizeof peer;

                if (x != 1)
                        return 0;
                err = sock_error(fd);
                if (err == 0 && getpeername(fd, &peer.sa, &len) < 0)
                        return 0; /* still connecting: a spurious call */
                if (err == ECONNREFUSED || err == EADDRNOTAVAIL || err == ENETUNREACH) {
                        conn_connect_next(c);
                        return 0;
                }
                if (err != 0) {
                        /* Accepted, then broken before we knew (the server
                         * reset it, or died): passed on as a reset. */
                        conn_broken(c, 1, err);
                        return 0;
                }
                c->f->preferred = c->family_index;
                loop_remove(l, fd);
                c->watched[1] = 0;
                return conn_open(c);
        }
        if (revents & LOOP_ERR) {
                err = sock_error(fd);
                if (err != 0) {
                        conn_broken(c, x, err);
                        return 0;
                }
        }
        /* Both directions: what was read on x may be written on, and what
         * x can take now may be written to it. */
        if (pump(c, x) < 0 || pump(c, 1 - x) < 0)
                return 0;
        return conn_update(c);
}

/* Try the next family: 127.0.0.1, then ::1 (first the one that answered
 * last). When none answers, the client is reset: nobody listens inside. */
static void conn_connect_next(struct conn *c) {
        struct forwarder *f = c->f;

        if (c->fd[1] >= 0) {
                if (c->watched[1])
                        loop_remove(f->loop, c->fd[1]);
                c->watched[1] = 0;
                close(c->fd[1]);
                c->fd[1] = -1;
        }
        while (c->attempt < 2) {
                union sockaddr_any addr;
                socklen_t len;
                int family, r;

                c->family_index = (f->preferred + c->attempt++) % 2;
                family = families[c->family_index];
                len = connect_loopback(family, f->p.port, &addr);
                r = f->p.make_socket(f->p.userdata, family, SOCK_STREAM | SOCK_NONBLOCK, &c->fd[1]);
                if (r < 0) {
                        c->fd[1] = -1;
                        if (r == -EAFNOSUPPORT)
                                continue; /* no IPv6 in the kernel */
                        log_ratelimited(&resets, LOG_LEVEL_DEBUG, "forwarding: cannot make a socket inside: %s",
                                        strerror(-r));
                        break;
                }
                if (connect(c->fd[1], &addr.sa, len) == 0) {
                        f->preferred = c->family_index;
                        (void) conn_open(c);
                        return;
                }
                if (errno == EINPROGRESS) {
                        if (conn_watch(c, 1) < 0)
                                break;
                        return;
                }
                close(c->fd[1]);
                c->fd[1] = -1;
        }
        /* Refused on every address: the server does not listen (yet, or
         * any more). */
        if (f->p.wait_usec != FORWARD_NO_WAIT) {
                conn_wait(c);
                return;
        }
        log_ratelimited(&resets, LOG_LEVEL_DEBUG,
                        "forwarding: nothing listens on port %u inside; resetting the client", (unsigned) f->p.port);
        f->stats.refused++;
        reset_fd(c->fd[0]);
        conn_free(c);
}

static int conn_new(struct forwarder *f, int client_fd) {
        struct conn *c = calloc(1, sizeof *c);

        if (!c) {
                reset_fd(client_fd);
                close(client_fd);
                return -ENOMEM;
        }
        *c = (struct conn) {
                .f = f,
                .state = CONN_CONNECTING,
                .fd = { client_fd, -1 },
                .pipe = { { -1, -1 }, { -1, -1 } },
                .next = f->conns,
        };
        if (f->conns)
                f->conns->prev = c;
        f->conns = c;
        f->n_conns++;
        f->stats.accepted++;
        conn_connect_next(c);
        return 0;
}

static bool forward_accepted(int client, const union sockaddr_any *peer, socklen_t peer_len, void *userdata) {
        struct forwarder *f = userdata;

        (void) conn_new(f, client);
        /* At max_connections: paused, the rest waits in the backlog. */
        (void) update_listening(f);
        return f->n_conns < f->p.max_connections;
}

static void forward_broken(struct listener *lst, int error, void *userdata) {
        struct forwarder *f = userdata;

        /* Forwarding stops for good, as forwarder_stop() stops it; the
         * connections being forwarded go on. */
        log_error_errno(error, "forwarding: cannot accept: %m; no more connections are forwarded");
        f->wanted = false;
}

/* Watch the listening socket while forwarding is wanted and there is
 * room for one more connection: then also when a connection ended (an
 * fd is free: a back-off ends). */
static int update_listening(struct forwarder *f) {
        if (!f->wanted || f->n_conns >= f->p.max_connections) {
                listener_pause(&f->listener);
                return 0;
        }
        return listener_watch(&f->listener, f->loop);
}

int forwarder_new(struct loop *l, const struct forward_params *params, struct forwarder **ret) {
        struct forwarder *f;
        int flags;

        if (!params->make_socket || params->max_connections == 0)
                return -EINVAL;
        flags = fcntl(params->listen_fd, F_GETFL);
        if (flags < 0 || fcntl(params->listen_fd, F_SETFL, flags | O_NONBLOCK) < 0)
                return -errno;
        f = calloc(1, sizeof *f);
        if (!f)
                return -ENOMEM;
        *f = (struct forwarder) { .loop = l, .p = *params, .wait_delay_usec = WAIT_DELAY_FIRST_USEC };
        listener_init(&f->listener, &(struct listener_params) {
                                            .fd = params->listen_fd,
                                            .flags = SOCK_NONBLOCK | SOCK_CLOEXEC,
                                            .name = "forwarding",
                                            .accepted = forward_accepted,
                                            .broken = forward_broken,
                                            .userdata = f,
                                    });
        *ret = f;
        return 0;
}

void forwarder_free(struct forwarder *f) {
        if (!f)
                return;
        f->wanted = false;
        while (f->conns) {
                struct conn *c = f->conns;

                f->conns = c->next;
                if (f->conns)
                        f->conns->prev = NULL;
                conn_destroy(c);
        }
        listener_pause(&f->listener);
        loop_timer_stop(f->loop, &f->wait_timer);
        free(f);
}

int forwarder_start(struct forwarder *f) {
        /* Broken: said once already, and stays off. */
        f->wanted = listener_state(&f->listener) != LISTENER_BROKEN;
        return update_listening(f);
}

void forwarder_stop(struct forwarder *f) {
        f->wanted = false;
        update_listening(f);
}

void forwarder_prefer_family(struct forwarder *f, int family) {
        f->preferred = family == AF_INET6 ? 1 : 0;
}

size_t forwarder_connections(const struct forwarder *f) {
        return f->n_conns;
}

void forwarder_get_stats(const struct forwarder *f, struct forward_stats *ret) {
        *ret = f->stats;
}
