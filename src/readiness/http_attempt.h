/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "address.h"
#include "socket.h"

/* --ready-http: a minimal HTTP/1.1 client. One attempt is one connection:
 * GET PATH with Host and "Connection: close", then the status line of
 * the answer. 2xx and 3xx are ready; anything else (4xx, 5xx, a reset, a
 * connection closed early, an answer that is not HTTP) is "not yet". */

/* The status of an HTTP response that starts buf (len bytes): 0 and the
 * final status in *ret_status (interim 1xx responses and their headers
 * are skipped), -EAGAIN if more bytes are needed to tell, -EBADMSG if it
 * is not an HTTP/1.x response. Pure; never reads past len. */
int http_response_status(const char *buf, size_t len, int *ret_status);

/* 2xx or 3xx. */
static inline bool http_status_is_ready(int status) {
        return status >= 200 && status <= 399;
}

/* The request for path on socket s, as sent. Returns 0 and a new string,
 * or -EINVAL (path empty, not starting with '/', or with a control
 * character or space), -ENOMEM. */
int http_request_format(const struct bound_socket *s, const char *path, char **ret);

/* Room for the status line, a few interim responses and their headers. */
#define HTTP_RESPONSE_MAX 4096

struct http_attempt {
        union sockaddr_any addr; /* where to connect: loopback for a wildcard */
        socklen_t addr_len;
        char *request;
        size_t request_len;
        int fd; /* -1 between attempts */
        bool connected;
        size_t sent;
        char response[HTTP_RESPONSE_MAX];
        size_t received;
        int status;    /* the last attempt's status, 0 if none */
        int error;     /* the last attempt's errno, 0 if none */
        bool garbage;  /* the last answer was not HTTP */
        int listen_fd; /* prebind's listening socket, to see its queue */
};

/* The first TCP socket of sockets, or NULL. */
const struct bound_socket *http_attempt_socket(const struct bound_socket *sockets, size_t n);

int http_attempt_init(struct http_attempt *p, const struct bound_socket *s, const char *path);
void http_attempt_done(struct http_attempt *p);

/* Start an attempt: a non-blocking connect. Returns 0 (then wait for
 * p->fd with http_attempt_events()), or -errno (the attempt failed at
 * once). */
int http_attempt_begin(struct http_attempt *p);
/* What to wait for on p->fd. */
uint32_t http_attempt_events(const struct http_attempt *p);
/* p->fd is ready: go on. Returns 1 when the answer says ready, 0 while
 * the attempt goes on, -EAGAIN when it is over and not ready (p->status,
 * p->error, p->garbage say why). The fd is closed when the attempt is
 * over. */
int http_attempt_continue(struct http_attempt *p);
/* Is a connection still waiting in the listening socket's accept queue
 * (COMMAND has not accepted it yet)? Then the attempt is not stuck, only
 * early: closing it would make COMMAND accept a dead connection and log
 * a broken pipe. From TCP_INFO, which gives a listener's queue length in
 * tcpi_unacked. */
bool http_attempt_queued(const struct http_attempt *p);
/* Give up the attempt under way (its time is up). */
void http_attempt_abort(struct http_attempt *p);
