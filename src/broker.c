/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "address.h"
#include "broker.h"
#include "claims.h"
#include "intercept/match.h"
#include "intercept/protocol.h"
#include "log.h"
#include "process.h"

_Static_assert(INTERCEPT_TARGETS_MAX == INTERCEPT_PORTS_MAX, "one limit for both ends");

/* Connections accepted and not yet answered. */
#define PENDING_MAX 64

struct target_state {
        struct broker_target target;
        bool claimed;
};

struct broker {
        int epoll_fd;           /* the listening socket and pending connections */
        int listen_fd;
        pid_t command;
        struct target_state targets[INTERCEPT_PORTS_MAX];
        size_t n_targets;
        int pending[PENDING_MAX];
        size_t n_pending;
        struct claims_notes notes; /* binds COMMAND reported, for the message on a timeout */
        size_t n_reports;       /* total since broker_set_command(), decoys too */
        unsigned refused;       /* claims refused since then */
        pid_t refused_pid;
        char env_address[sizeof "PREBIND_BROKER=" + sizeof(struct sockaddr_un)];
        char env_ports[sizeof "PREBIND_INTERCEPT=" + INTERCEPT_PORTS_MAX * 12];
};

static int open_listener(struct broker *b) {
        union {
                struct sockaddr sa;
                struct sockaddr_un un;
        } addr = { .un = { .sun_family = AF_UNIX } };
        char name[sizeof addr.un.sun_path];
        int n;

        /* Claims are answered only for COMMAND and its descendants
         * (SO_PEERCRED), whoever finds the name. */
        n = abstract_socket_name(name, sizeof name, "broker");
        if (n < 0)
                return n;
        memcpy(addr.un.sun_path, name, (size_t) n);
        addr.un.sun_path[0] = '\0';    /* the '@' */
        b->listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (b->listen_fd < 0)
                return -errno;
        if (bind(b->listen_fd, &addr.sa, (socklen_t) (offsetof(struct sockaddr_un, sun_path) + (size_t) n)) < 0 ||
            listen(b->listen_fd, SOMAXCONN) < 0)
                return -errno;
        snprintf(b->env_address, sizeof b->env_address, "%s=%s", INTERCEPT_ENV_BROKER, name);
        return 0;
}

int broker_open(const struct broker_target *targets, size_t n, struct broker **ret) {
        struct intercept_port ports[INTERCEPT_PORTS_MAX];
        struct epoll_event ev = { .events = EPOLLIN };
        struct broker *b;
        size_t len;
        int r;

        if (n == 0 || n > INTERCEPT_PORTS_MAX)
                return -EINVAL;
        b = calloc(1, sizeof *b);
        if (!b)
                return -ENOMEM;
        b->epoll_fd = b->listen_fd = -1;
        for (size_t i = 0; i < n; i++) {
                b->targets[i].target = targets[i];
                ports[i] = (struct intercept_port) { .port = targets[i].port, .type = targets[i].type };
        }
        b->n_targets = n;
        len = (size_t) snprintf(b->env_ports, sizeof b->env_ports, "%s=", INTERCEPT_ENV_PORTS);
        r = intercept_ports_format(ports, n, b->env_ports + len, sizeof b->env_ports - len);
        if (r < 0)
                goto fail;
        r = open_listener(b);
        if (r < 0)
                goto fail;
        b->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
        ev.data.fd = b->listen_fd;
        if (b->epoll_fd < 0 || epoll_ctl(b->epoll_fd, EPOLL_CTL_ADD, b->listen_fd, &ev) < 0) {
                r = -errno;
                goto fail;
        }
        *ret = b;
        return 0;
fail:
        broker_free(b);
        return r;
}

void broker_free(struct broker *b) {
        if (!b)
                return;
        for (size_t i = 0; i < b->n_pending; i++)
                close(b->pending[i]);
        if (b->listen_fd >= 0)
                close(b->listen_fd);
        if (b->epoll_fd >= 0)
                close(b->epoll_fd);
        free(b);
}

const char *broker_env_address(const struct broker *b) {
        return b->env_address;
}

const char *broker_env_ports(const struct broker *b) {
        return b->env_ports;
}

int broker_fd(const struct broker *b) {
        return b->epoll_fd;
}

void broker_set_command(struct broker *b, pid_t pid) {
        b->command = pid;
        for (size_t i = 0; i < b->n_targets; i++)
                b->targets[i].claimed = false;
        b->n_reports = 0;
        b->notes.n = 0;
        b->refused = 0;
}

bool broker_all_claimed(const struct broker *b) {
        for (size_t i = 0; i < b->n_targets; i++)
                if (!b->targets[i].claimed)
                        return false;
        return true;
}

static void forget_pending(struct broker *b, int fd) {
        (void) epoll_ctl(b->epoll_fd, EPOLL_CTL_DEL, fd, NULL);
        close(fd);
        for (size_t i = 0; i < b->n_pending; i++)
                if (b->pending[i] == fd) {
                        b->pending[i] = b->pending[--b->n_pending];
                        break;
                }
}

static void remember(struct broker *b, pid_t pid, const struct intercept_request *req) {
        if (req->kind == INTERCEPT_REPORT)
                claims_note(&b->notes, req->family, req->type, req->port, req->address);
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

static struct target_state *find_target(struct broker *b, uint32_t port, int type) {
        for (size_t i = 0; i < b->n_targets; i++)
                if (b->targets[i].target.port == port && b->targets[i].target.type == type)
                        return &b->targets[i];
        return NULL;
}

static void handle_claim(struct broker *b, int conn, pid_t pid, const struct intercept_request *req) {
        struct target_state *t = find_target(b, req->port, req->type);
        union {
                struct sockaddr sa;
                struct sockaddr_storage ss;
        } addr;
        socklen_t len = sizeof addr;
        uint16_t port = 0;

        if (!t) {
                log_debug("pid %d asked for port %u/%s, which is not intercepted", (int) pid, req->port,
                          claims_type_name(req->type));
                remember(b, pid, req);
                reply(conn, ENOENT, 0, -1);
                return;
        }
        if (!process_descends_from(pid, b->command)) {
                log_info("refused port %u to pid %d, which does not descend from COMMAND (pid %d)", req->port,
                         (int) pid, (int) b->command);
                b->refused++;
                b->refused_pid = pid;
                reply(conn, EPERM, 0, -1);
                return;
        }
        if (getsockname(t->target.fd, &addr.sa, &len) == 0)
                (void) intercept_sockaddr_port(&addr.sa, len, &port);
        reply(conn, 0, port, t->target.fd);
        log_debug("handed socket '%s' (port %u) to pid %d for its bind of %s port %u/%s", t->target.name, port,
                  (int) pid, req->address, req->port, claims_type_name(req->type));
        t->claimed = true;
}

/* One request on an accepted connection: the interposer sends it right
 * after connect(), so it is usually there at once. */
static void handle_connection(struct broker *b, int conn) {
        struct intercept_request req;
        struct ucred cred;
        socklen_t len = sizeof cred;
        ssize_t n = recv(conn, &req, sizeof req, MSG_DONTWAIT);

        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        if (n == (ssize_t) sizeof req && req.version == INTERCEPT_PROTOCOL_VERSION &&
            getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
                req.address[sizeof req.address - 1] = '\0';
                if (req.kind == INTERCEPT_CLAIM)
                        handle_claim(b, conn, cred.pid, &req);
                else if (req.kind == INTERCEPT_REPORT || req.kind == INTERCEPT_DECOY) {
                        if (process_descends_from(cred.pid, b->command))
                                remember(b, cred.pid, &req);
                        if (req.kind == INTERCEPT_DECOY)
                                log_debug("pid %d bound %s port %u/%s again: given a private port of its own",
                                          (int) cred.pid, req.address, req.port, claims_type_name(req.type));
                        else
                                log_debug("pid %d bound %s%s%u/%s (not intercepted)", (int) cred.pid, req.address,
                                          req.port ? " port " : "", req.port, claims_type_name(req.type));
                }
        }
        forget_pending(b, conn);
}

static void accept_all(struct broker *b) {
        for (;;) {
                struct epoll_event ev = { .events = EPOLLIN };
                int conn = accept4(b->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

                if (conn < 0)
                        return;
                if (b->n_pending == PENDING_MAX) {
                        /* Someone connects and never asks: drop the oldest. */
                        forget_pending(b, b->pending[0]);
                }
                ev.data.fd = conn;
                if (epoll_ctl(b->epoll_fd, EPOLL_CTL_ADD, conn, &ev) < 0) {
                        close(conn);
                        continue;
                }
                b->pending[b->n_pending++] = conn;
                handle_connection(b, conn);
        }
}

int broker_dispatch(struct broker *b) {
        struct epoll_event events[16];
        int n = epoll_wait(b->epoll_fd, events, 16, 0);

        if (n < 0)
                return errno == EINTR ? 0 : -errno;
        for (int i = 0; i < n; i++) {
                if (events[i].data.fd == b->listen_fd)
                        accept_all(b);
                else
                        handle_connection(b, events[i].data.fd);
        }
        return 0;
}

void broker_describe_unmet(const struct broker *b, char *buf, size_t size) {
        struct intercept_port unclaimed[INTERCEPT_PORTS_MAX];
        size_t n = 0, len;

        if (size == 0)
                return;
        buf[0] = '\0';
        if (broker_all_claimed(b))
                return;
        for (size_t i = 0; i < b->n_targets; i++)
                if (!b->targets[i].claimed)
                        unclaimed[n++] = (struct intercept_port) { b->targets[i].target.port,
                                                                   b->targets[i].target.type };
        len = claims_describe(&b->notes, unclaimed, n, buf, size);
        if (b->refused)
                (void) claims_append(buf, size, len, " (%u claim%s refused to pid %d, which does not descend from it)",
                                     b->refused, b->refused == 1 ? "" : "s", (int) b->refused_pid);
        else if (b->n_reports == 0)
                (void) claims_append(buf, size, len, " (it never called bind() through the C library: a static or "
                                     "Go program makes raw system calls, see --netns)");
}
