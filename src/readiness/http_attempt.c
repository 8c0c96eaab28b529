/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/tcp.h>
#include "loop.h"
#include <sys/socket.h>
#include <unistd.h>

#include "format.h"
#include "http_attempt.h"

static bool is_digit(char c) {
        return c >= '0' && c <= '9';
}

/* The end of the header block that starts at buf: the offset just past
 * its empty line (CRLF CRLF, or bare LF LF as RFC 9112 2.2 lets a
 * recipient accept), or 0 if it is not all there yet. */
static size_t header_end(const char *buf, size_t len) {
        for (size_t i = 0; i < len; i++) {
                if (buf[i] != '\n')
                        continue;
                if (i + 1 < len && buf[i + 1] == '\n')
                        return i + 2;
                if (i + 2 < len && buf[i + 1] == '\r' && buf[i + 2] == '\n')
                        return i + 3;
        }
        return 0;
}

/* status-line = HTTP-version SP status-code SP [ reason-phrase ] CRLF,
 * HTTP-version = "HTTP/" DIGIT "." DIGIT (RFC 9112 4). Only the start
 * is needed: through the code and the byte after it. */
static int status_line(const char *buf, size_t len, int *ret_status) {
        static const char prefix[] = "HTTP/1.";
        const size_t need = sizeof prefix - 1 + 1 + 1 + 3 + 1; /* "HTTP/1." D SP DDD (SP|CR|LF) */
        size_t n = len < need ? len : need;

        /* Whatever has arrived must be a prefix of a status line. */
        for (size_t i = 0; i < n; i++) {
                char c = buf[i];
                bool ok;

                /* "HTTP/1." (0-6), the minor digit (7), SP (8), the code
                 * (9-11), then SP or the line's end (12). */
                if (i < sizeof prefix - 1)
                        ok = c == prefix[i];
                else if (i == 8)
                        ok = c == ' ';
                else if (i < 12)
                        ok = is_digit(c);
                else
                        ok = c == ' ' || c == '\r' || c == '\n';
                if (!ok)
                        return -EBADMSG;
        }
        if (len < need)
                return -EAGAIN;
        *ret_status = (buf[9] - '0') * 100 + (buf[10] - '0') * 10 + (buf[11] - '0');
        /* RFC 9110 15: three digits, the first from 1 to 5. */
        if (*ret_status < 100 || *ret_status > 599)
                return -EBADMSG;
        return 0;
}

int http_response_status(const char *buf, size_t len, int *ret_status) {
        for (;;) {
                size_t end;
                int status, r = status_line(buf, len, &status);

                if (r < 0)
                        return r;
                /* 1xx: an interim response (103 Early Hints, a stray 100
                 * Continue); the final one follows its headers. 101 would
                 * switch protocols, which a GET never asked for. */
                if (status >= 200 || status == 101) {
                        *ret_status = status;
                        return 0;
                }
                end = header_end(buf, len);
                if (end == 0)
                        return -EAGAIN;
                buf += end;
                len -= end;
        }
}

static bool path_is_valid(const char *path) {
        if (!path || path[0] != '/')
                return false;
        for (const unsigned char *p = (const unsigned char *) path; *p; p++)
                if (*p <= ' ' || *p == 0x7f)
                        return false;
        return true;
}

const struct bound_socket *http_attempt_socket(const struct bound_socket *sockets, size_t n) {
        for (size_t i = 0; i < n; i++) {
                int family = sockets[i].addr.sa.sa_family;

                if (sockets[i].type == SOCK_STREAM && (family == AF_INET || family == AF_INET6))
                        return &sockets[i];
        }
        return NULL;
}

int http_request_format(const struct bound_socket *s, const char *path, char **ret) {
        char url[FIELD_STRING_MAX];
        const char *host;

        if (!path_is_valid(path))
                return -EINVAL;
        /* The URL names the address a client uses: loopback for a
         * wildcard bind. The Host header is its authority. */
        socket_field_format(s, 0, FIELD_URL, url, sizeof url);
        host = strstr(url, "://");
        host = host ? host + 3 : url;
        if (asprintf(ret,
                     "GET %s HTTP/1.1\r\n"
                     "Host: %s\r\n"
                     "User-Agent: prebind\r\n"
                     "Accept: */*\r\n"
                     "Connection: close\r\n"
                     "\r\n",
                     path, host) < 0)
                return -ENOMEM;
        return 0;
}

int http_attempt_init(struct http_attempt *p, const struct bound_socket *s, const char *path) {
        int r;

        *p = (struct http_attempt) { .fd = -1, .addr = s->addr, .addr_len = s->addr_len, .listen_fd = s->fd };
        /* A wildcard bind is reached on loopback, as the url format says. */
        if (p->addr.sa.sa_family == AF_INET && p->addr.in.sin_addr.s_addr == htonl(INADDR_ANY))
                p->addr.in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        else if (p->addr.sa.sa_family == AF_INET6 && IN6_IS_ADDR_UNSPECIFIED(&p->addr.in6.sin6_addr))
                p->addr.in6.sin6_addr = in6addr_loopback;
        r = http_request_format(s, path, &p->request);
        if (r < 0)
                return r;
        p->request_len = strlen(p->request);
        return 0;
}

void http_attempt_done(struct http_attempt *p) {
        http_attempt_abort(p);
        free(p->request);
        p->request = NULL;
}

bool http_attempt_queued(const struct http_attempt *p) {
        struct tcp_info info;
        socklen_t len = sizeof info;

        if (p->fd < 0 || p->listen_fd < 0 || getsockopt(p->listen_fd, IPPROTO_TCP, TCP_INFO, &info, &len) < 0 ||
            info.tcpi_state != TCP_LISTEN)
                return false;
        return info.tcpi_unacked > 0;
}

void http_attempt_abort(struct http_attempt *p) {
        if (p->fd >= 0)
                close(p->fd);
        p->fd = -1;
}

int http_attempt_begin(struct http_attempt *p) {
        http_attempt_abort(p);
        p->connected = false;
        p->sent = p->received = 0;
        p->status = p->error = 0;
        p->garbage = false;
        p->fd = socket(p->addr.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (p->fd < 0)
                return p->error = errno, -errno;
        if (connect(p->fd, &p->addr.sa, p->addr_len) < 0 && errno != EINPROGRESS) {
                p->error = errno;
                http_attempt_abort(p);
                return -p->error;
        }
        return 0;
}

uint32_t http_attempt_events(const struct http_attempt *p) {
        return !p->connected || p->sent < p->request_len ? LOOP_OUT : LOOP_IN;
}

static int attempt_over(struct http_attempt *p, int error) {
        if (error)
                p->error = error;
        http_attempt_abort(p);
        return -EAGAIN;
}

int http_attempt_continue(struct http_attempt *p) {
        if (p->fd < 0)
                return -EAGAIN;
        if (!p->connected) {
                int err = 0;
                socklen_t len = sizeof err;

                if (getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
                        err = errno;
                if (err == EINPROGRESS)
                        return 0;
                if (err)
                        return attempt_over(p, err);
                p->connected = true;
        }
        while (p->sent < p->request_len) {
                ssize_t k = send(p->fd, p->request + p->sent, p->request_len - p->sent, MSG_NOSIGNAL);

                if (k < 0)
                        return errno == EAGAIN || errno == EINTR ? 0 : attempt_over(p, errno);
                p->sent += (size_t) k;
        }
        for (;;) {
                ssize_t k = recv(p->fd, p->response + p->received, sizeof p->response - p->received, 0);
                int r, status = 0;

                if (k < 0)
                        return errno == EAGAIN || errno == EINTR ? 0 : attempt_over(p, errno);
                if (k == 0) {
                        /* Closed before a whole status line: nothing at
                         * all is a reset, part of one is garbage. */
                        p->garbage = p->received > 0;
                        return attempt_over(p, p->received ? 0 : ECONNRESET);
                }
                p->received += (size_t) k;
                r = http_response_status(p->response, p->received, &status);
                if (r == -EAGAIN && p->received < sizeof p->response)
                        continue;
                if (r < 0) {
                        p->garbage = true;
                        return attempt_over(p, 0);
                }
                p->status = status;
                http_attempt_abort(p);
                return http_status_is_ready(status) ? 1 : -EAGAIN;
        }
}
