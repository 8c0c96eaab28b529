/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "process.h"

/* What one sd_notify(3) datagram says, as far as prebind cares. Unknown
 * keys are ignored, as systemd does. */
struct notify_message {
        bool ready;         /* READY=1 */
        bool reloading;     /* RELOADING=1 */
        bool stopping;      /* STOPPING=1 */
        const char *status; /* STATUS=…, points into the buffer */
        size_t status_len;
        int errno_value;      /* ERRNO=…, -1 if absent or invalid */
        uint64_t extend_usec; /* EXTEND_TIMEOUT_USEC=…, 0 if absent */
};

/* The largest datagram read: longer ones are dropped whole. */
#define NOTIFY_MESSAGE_MAX 4096

/* Parse newline-separated KEY=VALUE assignments. A malformed line is
 * skipped; never fails. */
void notify_message_parse(const char *buf, size_t len, struct notify_message *ret);

/* A private notification socket for COMMAND: an abstract AF_UNIX datagram
 * socket with SO_PASSCRED and SO_PASSPIDFD, so the sender of each message
 * is known. */
struct notify_socket {
        int fd;
        char address[64]; /* for NOTIFY_SOCKET=, "@prebind/…" */
};

int notify_socket_open(struct notify_socket *ret);
void notify_socket_close(struct notify_socket *s);

/* Receive one message. Returns 1 with *ret_sender (peer_done() it) and
 * the parsed message (pointing into buf), 0 if the message was dropped
 * (no credentials, truncated), or -errno (-EAGAIN when there is nothing
 * to read). */
int notify_socket_receive(struct notify_socket *s, char *buf, size_t size, struct peer *ret_sender,
                          struct notify_message *ret);

/* Tell prebind's own service manager (its NOTIFY_SOCKET, if any). */
void notify_manager(const char *message);

/* --netns: abstract unix socket names are per network namespace. Bind
 * fd, a new AF_UNIX datagram socket made in COMMAND's namespace, to the
 * same name as s, and make it s's socket: NOTIFY_SOCKET stays valid. */
int notify_socket_move(struct notify_socket *s, int fd);

/* A name for one of prebind's own sockets in the abstract namespace, as
 * NOTIFY_SOCKET= and PREBIND_BROKER= give it: "@prebind/KIND/PID/NONCE"
 * ('@' for the leading NUL), the nonce 128 random bits. Abstract, so
 * nothing is left on disk; unguessable only as a courtesy: each socket
 * checks its peers itself (SO_PEERCRED, SCM_CREDENTIALS). Returns the
 * length, or -ENAMETOOLONG. */
int abstract_socket_name(char *buf, size_t size, const char *kind);
