/* SPDX-License-Identifier: MIT */
#pragma once

/* The interposer's pure logic, shared with prebind and its unit tests:
 * the PREBIND_INTERCEPT list, and which bind() it covers. Nothing here
 * allocates or logs: the interposer calls it from bind(), which must stay
 * async-signal-safe. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>

#define INTERCEPT_PORTS_MAX 32

struct intercept_port {
        uint16_t port; /* 1-65535 */
        int type;      /* SOCK_STREAM ("tcp") or SOCK_DGRAM ("udp") */
};

/* Parse "6379/tcp,53/udp": at most max entries. Returns 0 and the count,
 * or -EINVAL (syntax, port 0, unknown type) or -E2BIG (too many). */
int intercept_ports_parse(const char *text, struct intercept_port *ports, size_t max, size_t *ret_n);

/* Write the list in the same syntax. Returns the length, or -ENOBUFS if
 * buf is too small. */
int intercept_ports_format(const struct intercept_port *ports, size_t n, char *buf, size_t size);

/* The port of an IPv4 or IPv6 address of plausible length; false for
 * anything else (unix, netlink, a short or NULL address). */
bool intercept_sockaddr_port(const struct sockaddr *sa, socklen_t len, uint16_t *ret_port);

/* The address a bind() of sa on a socket of domain binds, as Linux reads
 * it, copied to ret with that family: a sockaddr_in whose sin_family is
 * 0 (AF_UNSPEC) with INADDR_ANY binds 0.0.0.0 on an AF_INET socket
 * (inet_bind()), and would escape a check of sa_family. Returns its
 * length, or 0 for what the kernel does not bind as an IP address (a
 * short address, another family, or the other IP family's address,
 * which the kernel refuses). Both mechanisms decide on this address. */
socklen_t intercept_bind_address(int domain, const struct sockaddr *sa, socklen_t len, struct sockaddr_storage *ret);

/* The entry for a bind of port on a socket of type (SOCK_CLOEXEC and
 * SOCK_NONBLOCK bits are ignored), or NULL. Port 0 never matches. */
const struct intercept_port *intercept_match(const struct intercept_port *ports, size_t n, uint16_t port, int type);

/* The rule for a bind of an intercepted port, for both mechanisms (the
 * interposer and seccomp): held_family is the family of the bind that got
 * prebind's socket before and still holds it (0: none). Redis and
 * memcached bind 0.0.0.0 and ::: the second family gets a decoy, so they
 * neither fail nor share one socket between two fds (both would wake for
 * each connection). A second bind of the same family gets the socket
 * again: an nginx reload that turns "listen 8080" into "listen
 * 127.0.0.1:8080" binds the new address before it closes the old socket,
 * and a decoy would leave it serving on a port nobody knows. */
enum intercept_action {
        INTERCEPT_GIVE_SOCKET,
        INTERCEPT_GIVE_DECOY,
};
enum intercept_action intercept_bind_rule(int held_family, int family);

/* The socket a process was handed for an intercepted port: at which fd,
 * for a bind of which family, and which socket it is. */
struct intercept_held {
        int fd; /* -1: none handed */
        int family;
        dev_t dev;
        ino_t ino;
};

/* held_family for intercept_bind_rule(), the same for both mechanisms: the
 * family of h's bind while the caller still holds that socket at h->fd
 * (at_fd: its fstat() of h->fd now, NULL when it has nothing there), and
 * the new bind is on another fd; else 0. A server that closed the first
 * socket binds anew: "[::]:P, close, 0.0.0.0:P" gets the socket again,
 * where a decoy would leave the published port queueing connections
 * nobody accepts. */
int intercept_held_family(const struct intercept_held *h, int fd, const struct stat *at_fd);

/* A decoy for a bind of the other family (intercept_bind_rule()):
 * loopback port 0 of the same family, which nobody is told about. Returns its length, or 0 for a family other than
 * AF_INET/AF_INET6. */
socklen_t intercept_decoy_address(int family, struct sockaddr_storage *ret);

/* The host part of an address, or a unix path ("@name" if abstract), as
 * text into buf (always NUL-terminated). */
void intercept_address_text(const struct sockaddr *sa, socklen_t len, char *buf, size_t size);
