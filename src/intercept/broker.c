/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "address.h"
#include "broker.h"
#include "claims.h"
#include "clock.h"
#include "compat.h"
#include "fd.h"
#include "intercept/match.h"
#include "intercept/protocol.h"
#include "log.h"
#include "listener.h"
#include "loop.h"
#include "notify.h"
#include "process.h"

_Static_assert(INTERCEPT_TARGETS_MAX == INTERCEPT_PORTS_MAX, "one limit for both ends");

/* Connections accepted and not yet answered. */
#define PENDING_MAX 64
/* A connection that has sent no request after two ticks of this timer
 * (1 to 2 s) is closed: the interposer sends its request right after
 * connect(), and a connection kept open for ever would let another user
 * claim from it later, once its process is gone. */
#define PENDING_TICK_USEC USEC_PER_SEC
#define PENDING_TICKS_MAX 2

struct pending {
        int fd;
        struct peer peer; /* who connected, pinned when accepted */
        unsigned ticks;   /* timer ticks seen while pending */
};

struct broker {
        struct loop *loop; /* watches the listening socket, pending connections, the tick; NULL: not attached */
        broker_callback callback;
        void *userdata;
        int listen_fd;
        struct listener listener; /* of listen_fd */
        struct loop_timer tick;   /* armed while connections are pending */
        pid_t command;
        struct intercept_target targets[INTERCEPT_PORTS_MAX];
        size_t n_targets;
        struct pending pending[PENDING_MAX];
        size_t n_pending;
        struct claims claims; /* of targets[], and the binds COMMAND reported */
        size_t n_reports;     /* total since broker_set_command(), decoys too */
        char env_address[sizeof "PREBIND_BROKER=" + sizeof(struct sockaddr_un)];
        char env_ports[sizeof "PREBIND_INTERCEPT=" + INTERCEPT_PORTS_MAX * 12];
};

static bool take_connection(int conn, const union sockaddr_any *addr, socklen_t addr_len, void *userdata);
static void broker_broken(struct listener *lst, int error, void *userdata);
static void served(void *userdata);

static int open_listener(struct broker *b) {
        union sockaddr_any addr;
        char name[sizeof addr.un.sun_path];
        socklen_t len;
        int n;

        /* Claims are answered only for COMMAND and its descendants
         * (the peer's pidfd, see claims_refusal()), whoever finds the
         * name: abstract names are listed in /proc/net/unix. */
        n = abstract_socket_name(name, sizeof name, "broker");
        if (n < 0)
                return n;
        len = unix_address(&addr.un, name, true);
        b->listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (b->listen_fd < 0)
                return -errno;
        if (bind(b->listen_fd, &addr.sa, len) < 0 || listen(b->listen_fd, SOMAXCONN) < 0)
                return -errno;
        snprintf(b->env_address, sizeof b->env_address, "%s=%s", INTERCEPT_ENV_BROKER, name);
        listener_init(&b->listener, &(struct listener_params) {
                                            .fd = b->listen_fd,
                                            .flags = SOCK_CLOEXEC | SOCK_NONBLOCK,
                                            .name = "the broker",
                                            .accepted = take_connection,
                                            .broken = broker_broken,
                                            .woke = served,
                                            .userdata = b,
                                    });
        return 0;
}

int broker_open(const struct intercept_target *targets, size_t n, struct broker **ret) {
        struct broker *b;
        size_t len;
        int r;

        if (n == 0 || n > INTERCEPT_PORTS_MAX)
                return -EINVAL;
        b = calloc(1, sizeof *b);
        if (!b)
                return -ENOMEM;
        b->listen_fd = -1;
        memcpy(b->targets, targets, n * sizeof *targets);
        b->n_targets = n;
        claims_init(&b->claims, targets, n);
        len = (size_t) snprintf(b->env_ports, sizeof b->env_ports, "%s=", INTERCEPT_ENV_PORTS);
        r = intercept_ports_format(b->claims.port, n, b->env_ports + len, sizeof b->env_ports - len);
        if (r < 0)
                goto fail;
        r = open_listener(b);
        if (r < 0)
                goto fail;
        *ret = b;
        return 0;
fail:
        broker_free(b);
        return r;
}

void broker_free(struct broker *b) {
        if (!b)
                return;
        broker_detach(b);
        for (size_t i = 0; i < b->n_pending; i++) {
                close(b->pending[i].fd);
                peer_done(&b->pending[i].peer);
        }
        if (b->listen_fd >= 0)
                close(b->listen_fd);
        free(b);
}

const char *broker_env_address(const struct broker *b) {
        return b->env_address;
}

const char *broker_env_ports(const struct broker *b) {
        return b->env_ports;
}

void broker_set_command(struct broker *b, pid_t pid) {
        b->command = pid;
        claims_restart(&b->claims);
        b->n_reports = 0;
}

void broker_forget_command(struct broker *b) {
        /* Once reaped, COMMAND's number is the next process's: with
         * --restart the broker would go on honouring claims from
         * whatever lands on it, as if it were COMMAND. */
        b->command = 0;
}

bool broker_all_claimed(const struct broker *b) {
        return claims_all_claimed(&b->claims);
}

static struct pending *find_pending(struct broker *b, int fd) {
        for (size_t i = 0; i < b->n_pending; i++)
                if (b->pending[i].fd == fd)
                        return &b->pending[i];
        return NULL;
}

static void forget_pending(struct broker *b, struct pending *p) {
        if (b->loop)
                loop_remove(b->loop, p->fd);
        close(p->fd);
        peer_done(&p->peer);
        *p = b->pending[--b->n_pending];
        /* An fd is free: a back-off ends (idle connections of another
         * user's can use them all up). */
        if (b->loop)
                (void) listener_watch(&b->listener, b->loop);
}

static void remember(struct broker *b, pid_t pid, const struct intercept_request *req) {
        if (req->kind == INTERCEPT_REPORT)
                claims_note(&b->claims.notes, req->family, req->type, req->port, req->address);
        b->n_reports++;
}

static void reply(int conn, int error, uint32_t port, int fd) {
        struct intercept_reply rep = { .error = error, .port = port };
        union {
                char buf[CMSG_SPACE(sizeof(int))];
                struct cmsghdr align;
        } control = { 0 };
        struct iovec iov = { .iov_base = &rep, .iov_len = sizeof rep };
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };

        if (fd >= 0) {
                struct cmsghdr *c;

                msg.msg_control = control.buf;
                msg.msg_controllen = sizeof control.buf;
                c = CMSG_FIRSTHDR(&msg);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int));
                memcpy(CMSG_DATA(c), &fd, sizeof fd);
        }
        (void) sendmsg(conn, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
}

static const struct intercept_target *find_target(const struct broker *b, uint32_t port, int type) {
        for (size_t i = 0; i < b->n_targets; i++)
                if (b->targets[i].port == port && b->targets[i].type == type)
                        return &b->targets[i];
        return NULL;
}

/* Anyone may connect to the broker and ask, as often as they like: what
 * they make prebind say is rate-limited. */
static struct log_ratelimit unknown_claims = LOG_RATELIMIT_INIT("claims of ports not intercepted");
static struct log_ratelimit reports = LOG_RATELIMIT_INIT("bind reports");

static void handle_claim(struct broker *b, int conn, const struct peer *peer, const struct intercept_request *req) {
        const struct intercept_target *t = find_target(b, req->port, req->type);
        union sockaddr_any addr;
        socklen_t len = sizeof addr;
        uint16_t port = 0;
        const char *why;

        if (!t) {
                log_ratelimited(&unknown_claims, LOG_LEVEL_DEBUG,
                                "pid %d asked for port %u/%s, which is not intercepted", (int) peer->pid, req->port,
                                claims_type_name(req->type));
                remember(b, peer->pid, req);
                reply(conn, ENOENT, 0, -1);
                return;
        }
        why = claims_refusal(b->command, peer);
        if (why) {
                claims_refuse(&b->claims, req->port, peer->pid, why);
                reply(conn, EPERM, 0, -1);
                return;
        }
        if (getsockname(t->fd, &addr.sa, &len) == 0)
                (void) intercept_sockaddr_port(&addr.sa, len, &port);
        reply(conn, 0, port, t->fd);
        log_debug("handed socket '%s' (port %u) to pid %d for its bind of %s port %u/%s", t->name, port,
                  (int) peer->pid, req->address, req->port, claims_type_name(req->type));
        b->claims.claimed[t - b->targets] = true;
}

/* One request on an accepted connection: the interposer sends it right
 * after connect(), so it is usually there at once. */
static void handle_connection(struct broker *b, struct pending *p) {
        struct intercept_request req;
        ssize_t n = recv(p->fd, &req, sizeof req, MSG_DONTWAIT);

        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        if (n == (ssize_t) sizeof req && req.version == INTERCEPT_PROTOCOL_VERSION) {
                pid_t pid = p->peer.pid;

                req.address[sizeof req.address - 1] = '\0';
                if (req.kind == INTERCEPT_CLAIM)
                        handle_claim(b, p->fd, &p->peer, &req);
                else if (req.kind == INTERCEPT_REPORT || req.kind == INTERCEPT_DECOY) {
                        /* For the messages only; a zombie COMMAND still
                         * counts (prebind hears it before reaping it). */
                        if (peer_descends_from(&p->peer, b->command))
                                remember(b, pid, &req);
                        if (req.kind == INTERCEPT_DECOY)
                                log_ratelimited(&reports, LOG_LEVEL_DEBUG,
                                                "pid %d bound %s port %u/%s again: given a private port of its own",
                                                (int) pid, req.address, req.port, claims_type_name(req.type));
                        else
                                log_ratelimited(&reports, LOG_LEVEL_DEBUG, "pid %d bound %s%s%u/%s (not intercepted)",
                                                (int) pid, req.address, req.port ? " port " : "", req.port,
                                                claims_type_name(req.type));
                }
        }
        forget_pending(b, p);
}

/* Who connected: the process itself, as a pidfd (SO_PEERPIDFD, Linux
 * 6.5), taken as the connection is accepted; where the kernel has no
 * SO_PEERPIDFD, the pid SO_PEERCRED reports, pinned now (peer_init()). */
static void peer_of_connection(int conn, struct peer *ret) {
        struct ucred cred;
        socklen_t len = sizeof cred, pidfd_len = sizeof(int);
        int pidfd;

        if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
                *ret = PEER_NONE;
                return;
        }
        if (getsockopt(conn, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &pidfd_len) < 0)
                pidfd = -errno;
        peer_init(ret, cred.pid, cred.uid, cred.gid, pidfd);
}

static int on_tick(struct loop *l, struct loop_timer *t, void *userdata);

static void start_ticking(struct broker *b) {
        if (b->loop && !b->tick.armed)
                loop_timer_start(b->loop, &b->tick, PENDING_TICK_USEC, on_tick, b);
}

static int on_connection(struct loop *l, int fd, uint32_t revents, void *userdata);

/* A tick: connections that have waited PENDING_TICKS_MAX ticks without
 * a request are closed. */
static int on_tick(struct loop *l, struct loop_timer *t, void *userdata) {
        struct broker *b = userdata;

        for (size_t i = 0; i < b->n_pending;) {
                struct pending *p = &b->pending[i];

                if (++p->ticks < PENDING_TICKS_MAX) {
                        i++;
                        continue;
                }
                log_debug("closing a connection to the broker from pid %d: no request within %llus", (int) p->peer.pid,
                          PENDING_TICKS_MAX * PENDING_TICK_USEC / USEC_PER_SEC);
                forget_pending(b, p); /* the last one moves to i */
        }
        if (b->n_pending > 0)
                start_ticking(b);
        return 0;
}

/* Anyone may connect: at most LOOP_WAKE_BUDGET_USEC of connections per
 * wake-up; the backlog waits for the next turn. */
static bool take_connection(int conn, const union sockaddr_any *addr, socklen_t addr_len, void *userdata) {
        struct broker *b = userdata;
        struct pending *p;

        if (b->n_pending == PENDING_MAX) {
                /* Someone connects and never asks: drop the oldest. */
                struct pending *oldest = &b->pending[0];

                for (size_t i = 1; i < b->n_pending; i++)
                        if (b->pending[i].ticks > oldest->ticks)
                                oldest = &b->pending[i];
                forget_pending(b, oldest);
        }
        if (b->loop && loop_add(b->loop, conn, LOOP_IN, on_connection, b) < 0) {
                close(conn);
                return true;
        }
        p = &b->pending[b->n_pending++];
        *p = (struct pending) { .fd = conn };
        peer_of_connection(conn, &p->peer);
        handle_connection(b, p);
        if (find_pending(b, conn))
                start_ticking(b);
        return true;
}

static void broker_broken(struct listener *lst, int error, void *userdata) {
        log_error_errno(error, "the broker cannot accept: %m; no more claims are answered");
}

static void served(void *userdata) {
        struct broker *b = userdata;

        if (b->callback)
                b->callback(b->userdata);
}

static int on_connection(struct loop *l, int fd, uint32_t revents, void *userdata) {
        struct broker *b = userdata;
        struct pending *p = find_pending(b, fd);

        if (p) {
                handle_connection(b, p);
                served(b);
        }
        return 0;
}

int broker_attach(struct broker *b, struct loop *l, broker_callback callback, void *userdata) {
        int r;

        b->loop = l;
        b->callback = callback;
        b->userdata = userdata;
        if ((r = listener_watch(&b->listener, l)) < 0)
                return r;
        for (size_t i = 0; i < b->n_pending; i++)
                if ((r = loop_add(l, b->pending[i].fd, LOOP_IN, on_connection, b)) < 0)
                        return r;
        if (b->n_pending > 0)
                start_ticking(b);
        return 0;
}

void broker_detach(struct broker *b) {
        if (!b->loop)
                return;
        listener_pause(&b->listener);
        loop_timer_stop(b->loop, &b->tick);
        for (size_t i = 0; i < b->n_pending; i++)
                loop_remove(b->loop, b->pending[i].fd);
        b->loop = NULL;
}

void broker_dispatch(struct broker *b) {
        /* Not while backing off: out of fds, trying again now fails too. */
        if (listener_state(&b->listener) != LISTENER_BACKING_OFF)
                listener_accept_now(&b->listener);
        /* handle_connection() forgets a connection it is done with, and
         * the last one moves to i. */
        for (size_t i = 0; i < b->n_pending;) {
                size_t n = b->n_pending;

                handle_connection(b, &b->pending[i]);
                if (b->n_pending == n)
                        i++;
        }
}

void broker_describe_unmet(const struct broker *b, char *buf, size_t size) {
        size_t len = claims_describe(&b->claims, buf, size);

        if (len == 0)
                return; /* all claimed */
        if (!b->claims.refused && b->n_reports == 0)
                (void) claims_append(buf, size, len,
                                     " (no bind() of a port reached the interposer; static and Go "
                                     "programs bypass it with raw system calls, which --intercept-via=seccomp "
                                     "catches where the kernel allows it)");
}
