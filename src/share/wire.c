/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "wire.h"

int share_send(int fd, const struct share_wire *head, const struct share_wire_socket *sockets, const char *text) {
        struct share_wire h = *head;
        struct iovec iov[3];
        struct msghdr msg = { .msg_iov = iov, .msg_iovlen = 3 };
        size_t total;

        h.version = SHARE_WIRE_VERSION;
        h.text_len = text ? (uint32_t) strlen(text) : 0;
        total = sizeof h + h.n_sockets * sizeof *sockets + h.text_len;
        if (h.n_sockets > SHARE_SOCKETS_MAX || total > SHARE_MESSAGE_MAX)
                return -EMSGSIZE;
        iov[0] = (struct iovec) { &h, sizeof h };
        iov[1] = (struct iovec) { (void *) sockets, h.n_sockets * sizeof *sockets };
        iov[2] = (struct iovec) { (void *) text, h.text_len };
        for (;;) {
                ssize_t k = sendmsg(fd, &msg, MSG_NOSIGNAL);

                if (k >= 0)
                        return 0;
                if (errno != EINTR)
                        return -errno;
        }
}

int share_receive(int fd, int flags, struct share_message *ret) {
        char *buf = malloc(SHARE_MESSAGE_MAX + 1);
        struct share_wire h;
        ssize_t k;
        int resets = 0;

        if (!buf)
                return -ENOMEM;
        /* ECONNRESET: the peer closed with something of ours unread; the
         * error is reported once (sock_error() clears it), and what it
         * sent before is still queued: read on. */
        do
                k = recv(fd, buf, SHARE_MESSAGE_MAX, flags);
        while (k < 0 && (errno == EINTR || (errno == ECONNRESET && resets++ == 0)));
        if (k <= 0) {
                int r = k < 0 ? -errno : 0;

                free(buf);
                return r;
        }
        if ((size_t) k < sizeof h)
                goto bad;
        memcpy(&h, buf, sizeof h);
        if (h.version != SHARE_WIRE_VERSION || h.n_sockets > SHARE_SOCKETS_MAX ||
            (size_t) k != sizeof h + h.n_sockets * sizeof(struct share_wire_socket) + h.text_len)
                goto bad;
        buf[k] = '\0';
        for (uint32_t i = 0; i < h.n_sockets; i++)
                ((struct share_wire_socket *) (buf + sizeof h))[i].name[FDNAME_MAX] = '\0';
        *ret = (struct share_message) {
                .head = h,
                .sockets = (const struct share_wire_socket *) (buf + sizeof h),
                .text = buf + (size_t) k - h.text_len,
                .buffer = buf,
        };
        return 1;
bad:
        free(buf);
        return -EBADMSG;
}

void share_message_done(struct share_message *m) {
        free(m->buffer);
        *m = (struct share_message) {};
}

void share_wire_from_sockets(const struct bound_socket *sockets, size_t n, struct share_wire_socket *ret) {
        for (size_t i = 0; i < n; i++) {
                ret[i] = (struct share_wire_socket) {
                        .type = sockets[i].type,
                        .addr_len = sockets[i].addr_len,
                        .addr = sockets[i].addr,
                };
                snprintf(ret[i].name, sizeof ret[i].name, "%s", sockets[i].name);
        }
}

void share_wire_to_sockets(const struct share_wire_socket *wire, size_t n, struct bound_socket *ret) {
        for (size_t i = 0; i < n; i++)
                ret[i] = (struct bound_socket) {
                        .fd = -1,
                        .name = wire[i].name,
                        .type = wire[i].type,
                        .addr = wire[i].addr,
                        .addr_len = wire[i].addr_len > sizeof wire[i].addr ? sizeof wire[i].addr : wire[i].addr_len,
                };
}

/* The peer must be this user: the directory keeps others out, and this
 * says so again for every connection (no other user attaches). */
int share_check_peer(int fd) {
        struct ucred cred;
        socklen_t len = sizeof cred;

        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
                return -errno;
        return cred.uid == geteuid() ? 0 : -EPERM;
}
