/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "address.h"
#include "socket.h"

/* The messages between holders and the shared supervisor: one datagram
 * each on the SOCK_SEQPACKET name socket (boundaries kept, a close seen
 * as end of file). Both ends are the same prebind on the same machine;
 * the version keeps two builds from misreading each other. */
#define SHARE_WIRE_VERSION 1
#define SHARE_MESSAGE_MAX (64 * 1024)
#define SHARE_SOCKETS_MAX 64

enum share_kind {
        SHARE_HOLD = 1, /* holder: text is its description */
        SHARE_STATUS,   /* --status */
        SHARE_STOP,     /* --stop: the supervisor stops COMMAND, then ends */
        SHARE_READY,    /* supervisor: the sockets, pid, child_pid */
        SHARE_REFUSED,  /* supervisor: another description; text is its own */
        SHARE_ENDED,    /* supervisor: status, text the last lines of output */
        SHARE_STATE,    /* supervisor, to --status: all fields; text its description */
};

struct share_wire_socket {
        int32_t type;
        uint32_t addr_len;
        union sockaddr_any addr;
        char name[FDNAME_MAX + 1];
};

struct share_wire {
        uint32_t version;
        uint32_t kind;
        int32_t status;
        int32_t pid;       /* the supervisor's */
        int32_t child_pid; /* COMMAND's; 0 when none runs */
        uint32_t holders;
        uint32_t ready;
        uint32_t n_sockets;
        uint32_t text_len;
        uint32_t reserved; /* the sockets that follow are 8-byte aligned */
};
_Static_assert(sizeof(struct share_wire) % 8 == 0, "share_wire_socket alignment");

/* A message received: header, sockets and text (NUL-terminated) in one
 * allocation. */
struct share_message {
        struct share_wire head;
        const struct share_wire_socket *sockets;
        const char *text;
        void *buffer;
};

/* Send one message (MSG_NOSIGNAL: a holder gone is EPIPE, not a
 * signal). Returns 0 or -errno. */
int share_send(int fd, const struct share_wire *head, const struct share_wire_socket *sockets, const char *text);
/* Receive one message. Returns 1 and *ret (share_message_done() it), 0
 * at end of file, -EAGAIN, -EBADMSG for a malformed one, or -errno. */
int share_receive(int fd, int flags, struct share_message *ret);
void share_message_done(struct share_message *m);

/* The bound sockets as the wire carries them, and back (fd -1, the name
 * pointing into the message). */
void share_wire_from_sockets(const struct bound_socket *sockets, size_t n, struct share_wire_socket *ret);
void share_wire_to_sockets(const struct share_wire_socket *wire, size_t n, struct bound_socket *ret);

/* The peer on a share connection must be this user (SO_PEERCRED): both
 * ends check. Returns 0, -EPERM, or -errno. */
int share_check_peer(int fd);
