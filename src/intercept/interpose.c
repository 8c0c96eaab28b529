/* SPDX-License-Identifier: MIT */
/* libprebind-intercept.so: prebind puts it in COMMAND's LD_PRELOAD with
 * --intercept. COMMAND's own bind() of an intercepted port then gets
 * prebind's socket, which already listens on a port the kernel chose.
 *
 * The socket is asked for, never assumed at an fd number: wrappers close
 * and reuse inherited fds, and dup3() of "fd 3" would then hand the server
 * whatever file sits there. The interposer connects to prebind's broker
 * (PREBIND_BROKER), which checks that the asker descends from COMMAND and
 * replies with the socket (SCM_RIGHTS); the interposer checks what it got
 * and only then puts it in place of the server's own socket.
 *
 * bind() is async-signal-safe, so this one is too: the environment is read
 * once when the library is loaded, and bind() makes system calls only (no
 * malloc, no stdio, no locks). Without PREBIND_BROKER it is bind(). */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "match.h"
#include "protocol.h"

#define EXPORT __attribute__((visibility("default")))

typedef int (*bind_fn)(int, const struct sockaddr *, socklen_t);

static bind_fn real_bind;
static bool active;
static struct sockaddr_un broker_addr;
static socklen_t broker_addr_len;
static struct intercept_port ports[INTERCEPT_PORTS_MAX];
static size_t n_ports;

/* The sockets this process was handed, to tell a second bind of the same
 * port (0.0.0.0 then ::) from a retry after the first was closed. Copied
 * by fork() together with the fds it describes. Not locked: servers bind
 * their listening sockets from one thread, at start; two threads binding
 * the same intercepted port at once could both claim (both then work,
 * sharing one socket). */
static struct claim {
        uint16_t port; /* 0: a free slot */
        int type;
        struct intercept_held held;
} claims[INTERCEPT_PORTS_MAX];

__attribute__((constructor)) static void intercept_init(void) {
        const char *broker = getenv(INTERCEPT_ENV_BROKER);
        const char *list = getenv(INTERCEPT_ENV_PORTS);
        size_t len;

        real_bind = (bind_fn) dlsym(RTLD_NEXT, "bind");
        if (!broker || broker[0] != '@' || !list)
                return;
        len = strlen(broker);
        if (len > sizeof broker_addr.sun_path)
                return;
        if (intercept_ports_parse(list, ports, INTERCEPT_PORTS_MAX, &n_ports) < 0)
                return;
        broker_addr.sun_family = AF_UNIX;
        memcpy(broker_addr.sun_path + 1, broker + 1, len - 1);
        broker_addr_len = (socklen_t) (offsetof(struct sockaddr_un, sun_path) + len);
        active = true;
}

static int next_bind(int fd, const struct sockaddr *addr, socklen_t len) {
        if (real_bind)
                return real_bind(fd, addr, len);
        return (int) syscall(SYS_bind, fd, addr, len);
}

/* One connection to the broker per request. Bounded: a stopped prebind
 * must not hang the server for ever (it then binds by itself). */
static int broker_connect(void) {
        struct timeval tv = { .tv_sec = 30 };
        int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

        if (s < 0)
                return -1;
        (void) setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        (void) setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        if (connect(s, (const struct sockaddr *) &broker_addr, broker_addr_len) < 0) {
                close(s);
                return -1;
        }
        return s;
}

static void fill_request(struct intercept_request *req, enum intercept_kind kind, const struct sockaddr *addr,
                         socklen_t len, uint16_t port, int type) {
        memset(req, 0, sizeof *req);
        req->version = INTERCEPT_PROTOCOL_VERSION;
        req->kind = kind;
        req->family = addr->sa_family;
        req->type = type;
        req->port = port;
        intercept_address_text(addr, len, req->address, sizeof req->address);
}

static void report(enum intercept_kind kind, const struct sockaddr *addr, socklen_t len, uint16_t port, int type) {
        struct intercept_request req;
        int s = broker_connect();

        if (s < 0)
                return;
        fill_request(&req, kind, addr, len, port, type);
        (void) send(s, &req, sizeof req, MSG_NOSIGNAL);
        close(s);
}

/* Ask for the socket. Returns its fd, or -1 (refused, or no broker). */
static int claim(const struct sockaddr *addr, socklen_t len, uint16_t port, int type, uint32_t *ret_port) {
        struct intercept_request req;
        struct intercept_reply reply;
        union {
                char buf[CMSG_SPACE(sizeof(int))];
                struct cmsghdr align;
        } control;
        struct iovec iov = { .iov_base = &reply, .iov_len = sizeof reply };
        struct msghdr msg = {
                .msg_iov = &iov,
                .msg_iovlen = 1,
                .msg_control = control.buf,
                .msg_controllen = sizeof control.buf,
        };
        struct cmsghdr *c;
        ssize_t n;
        int fd = -1, s = broker_connect();

        if (s < 0)
                return -1;
        fill_request(&req, INTERCEPT_CLAIM, addr, len, port, type);
        if (send(s, &req, sizeof req, MSG_NOSIGNAL) != (ssize_t) sizeof req) {
                close(s);
                return -1;
        }
        do
                n = recvmsg(s, &msg, MSG_CMSG_CLOEXEC);
        while (n < 0 && errno == EINTR);
        close(s);
        if (n != (ssize_t) sizeof reply)
                msg.msg_controllen = 0;
        for (c = msg.msg_controllen ? CMSG_FIRSTHDR(&msg) : NULL; c; c = CMSG_NXTHDR(&msg, c))
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int)))
                        memcpy(&fd, CMSG_DATA(c), sizeof fd);
        if (fd >= 0 && (n != (ssize_t) sizeof reply || reply.error != 0 || (msg.msg_flags & MSG_CTRUNC))) {
                close(fd);
                fd = -1;
        }
        *ret_port = reply.port;
        return fd;
}

static int sockopt_int(int fd, int level, int name) {
        int v = -1;
        socklen_t l = sizeof v;

        return getsockopt(fd, level, name, &v, &l) < 0 ? -1 : v;
}

/* Is this what a server binding a port of this type can take? A listening
 * stream socket, or a bound datagram socket, of an IP family, on the port
 * the broker said. */
static bool handed_socket_fits(int fd, int type, uint32_t port) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        uint16_t actual;
        int family = sockopt_int(fd, SOL_SOCKET, SO_DOMAIN);

        if (family != AF_INET && family != AF_INET6)
                return false;
        if (sockopt_int(fd, SOL_SOCKET, SO_TYPE) != type)
                return false;
        if (type == SOCK_STREAM && sockopt_int(fd, SOL_SOCKET, SO_ACCEPTCONN) != 1)
                return false;
        if (getsockname(fd, (struct sockaddr *) &ss, &len) < 0 ||
            !intercept_sockaddr_port((struct sockaddr *) &ss, len, &actual))
                return false;
        return actual != 0 && actual == port;
}

static struct claim *claim_slot(uint16_t port, int type) {
        struct claim *free_slot = NULL;

        for (size_t i = 0; i < INTERCEPT_PORTS_MAX; i++) {
                if (claims[i].port == port && claims[i].type == type)
                        return &claims[i];
                if (!free_slot && claims[i].port == 0)
                        free_slot = &claims[i];
        }
        return free_slot;
}

/* The family of the bind that got this port's socket, if this process
 * still holds it at another fd (match.h's rule): then the bind is a
 * second one (the other family, another interface), not a retry. */
static int held_family(const struct claim *c, int fd) {
        struct stat st;

        if (!c || c->port == 0)
                return 0;
        return intercept_held_family(&c->held, fd, fstat(c->held.fd, &st) == 0 ? &st : NULL);
}

/* Put the handed socket in place of the server's, at the same fd, with
 * the server's FD_CLOEXEC and O_NONBLOCK. */
static int take_over(int fd, int handed) {
        int fd_flags = fcntl(fd, F_GETFD), fl_flags = fcntl(fd, F_GETFL), handed_flags;

        if (fd_flags < 0 || fl_flags < 0)
                return -1;
        if (dup3(handed, fd, (fd_flags & FD_CLOEXEC) ? O_CLOEXEC : 0) < 0)
                return -1;
        /* O_NONBLOCK belongs to the open file description, shared with
         * prebind's copy: set it as the server asked (prebind never
         * accepts on an intercepted socket). */
        handed_flags = fcntl(fd, F_GETFL);
        if (handed_flags >= 0 && (handed_flags & O_NONBLOCK) != (fl_flags & O_NONBLOCK))
                (void) fcntl(fd, F_SETFL, (handed_flags & ~O_NONBLOCK) | (fl_flags & O_NONBLOCK));
        return 0;
}

EXPORT int bind(int fd, const struct sockaddr *addr, socklen_t len) {
        struct sockaddr_storage decoy, bound;
        const struct sockaddr *as_bound = (const struct sockaddr *) &bound;
        socklen_t bound_len;
        struct claim *slot;
        struct stat st;
        uint16_t port;
        uint32_t handed_port = 0;
        int type, handed, saved_errno = errno;

        if (!active || !addr || len < (socklen_t) sizeof(sa_family_t))
                return next_bind(fd, addr, len);
        if (addr->sa_family == AF_UNIX) {
                report(INTERCEPT_REPORT, addr, len, 0, sockopt_int(fd, SOL_SOCKET, SO_TYPE));
                errno = saved_errno;
                return next_bind(fd, addr, len);
        }
        /* What the kernel would bind (match.h), sin_family 0 included. */
        bound_len = intercept_bind_address(sockopt_int(fd, SOL_SOCKET, SO_DOMAIN), addr, len, &bound);
        if (bound_len == 0 || !intercept_sockaddr_port(as_bound, bound_len, &port) || port == 0) {
                errno = saved_errno;
                return next_bind(fd, addr, len);
        }
        type = sockopt_int(fd, SOL_SOCKET, SO_TYPE);
        if (!intercept_match(ports, n_ports, port, type)) {
                report(INTERCEPT_REPORT, as_bound, bound_len, port, type);
                errno = saved_errno;
                return next_bind(fd, addr, len);
        }

        /* A second bind of an intercepted port: match.h's rule. */
        slot = claim_slot(port, type);
        if (intercept_bind_rule(held_family(slot, fd), bound.ss_family) == INTERCEPT_GIVE_DECOY) {
                socklen_t dlen = intercept_decoy_address(bound.ss_family, &decoy);
                report(INTERCEPT_DECOY, as_bound, bound_len, port, type);
                errno = saved_errno;
                return next_bind(fd, (struct sockaddr *) &decoy, dlen);
        }

        handed = claim(as_bound, bound_len, port, type, &handed_port);
        if (handed < 0) {
                /* Refused, or no broker: bind by itself. prebind, which
                 * waits for a claim, says why when its deadline passes. */
                errno = saved_errno;
                return next_bind(fd, addr, len);
        }
        if (!handed_socket_fits(handed, type, handed_port) || fstat(handed, &st) < 0 || take_over(fd, handed) < 0) {
                close(handed);
                errno = saved_errno;
                return next_bind(fd, addr, len);
        }
        close(handed);
        if (slot)
                *slot = (struct claim) {
                        .port = port,
                        .type = type,
                        .held = { .fd = fd, .family = bound.ss_family, .dev = st.st_dev, .ino = st.st_ino },
                };
        errno = saved_errno;
        return 0;
}
