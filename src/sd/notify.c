/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "compat.h"
#include "fd.h"
#include "notify.h"
#include "parse.h"
#include "sd.h"

static bool key_is(const char *line, size_t len, const char *key, const char **ret_value, size_t *ret_len) {
        size_t k = strlen(key);

        if (len < k || strncmp(line, key, k) != 0)
                return false;
        *ret_value = line + k;
        *ret_len = len - k;
        return true;
}

static bool value_parse_uint(const char *value, size_t len, unsigned long max, unsigned long *ret) {
        char text[32];

        /* A NUL inside the value would end the copy early: "ERRNO=2\0x"
         * must not read as 2. */
        if (len == 0 || len >= sizeof text || memchr(value, '\0', len))
                return false;
        memcpy(text, value, len);
        text[len] = '\0';
        return parse_uint(text, 0, max, ret) == 0;
}

void notify_message_parse(const char *buf, size_t len, struct notify_message *ret) {
        struct notify_message m = { .errno_value = -1 };
        const char *end = buf + len;

        for (const char *line = buf; line < end;) {
                const char *nl = memchr(line, '\n', (size_t) (end - line));
                size_t line_len = (size_t) ((nl ? nl : end) - line);
                const char *value;
                size_t value_len;
                unsigned long n;

                if (key_is(line, line_len, "READY=", &value, &value_len))
                        m.ready = m.ready || (value_len == 1 && value[0] == '1');
                else if (key_is(line, line_len, "RELOADING=", &value, &value_len))
                        m.reloading = m.reloading || (value_len == 1 && value[0] == '1');
                else if (key_is(line, line_len, "STOPPING=", &value, &value_len))
                        m.stopping = m.stopping || (value_len == 1 && value[0] == '1');
                else if (key_is(line, line_len, "STATUS=", &value, &value_len)) {
                        m.status = value;
                        m.status_len = value_len;
                } else if (key_is(line, line_len, "ERRNO=", &value, &value_len))
                        m.errno_value = value_parse_uint(value, value_len, 4095, &n) ? (int) n : -1;
                else if (key_is(line, line_len, "EXTEND_TIMEOUT_USEC=", &value, &value_len))
                        m.extend_usec = value_parse_uint(value, value_len, UINT32_MAX * USEC_PER_SEC, &n) ? n : 0;
                /* The last line may have no newline: stop there, rather
                 * than form a pointer past the end of the datagram. */
                if (!nl)
                        break;
                line = nl + 1;
        }
        *ret = m;
}

/* The kernel's word for each sender: SCM_CREDENTIALS, and the sender
 * itself as SCM_PIDFD where the kernel has it (Linux 6.5): its pid is
 * only a number, which may be another process's by the time the message
 * is read. */
static int pass_credentials(int fd) {
        int one = 1;

        if (setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof one) < 0)
                return -errno;
        (void) setsockopt(fd, SOL_SOCKET, SO_PASSPIDFD, &one, sizeof one);
        return 0;
}

/* fd, credentials on, bound to the abstract name address: what
 * notify_socket_open() and notify_socket_move() both make. */
static int bind_notify(int fd, const char *address) {
        struct sockaddr_un sa;
        socklen_t len = unix_address(&sa, address, true);
        int r = pass_credentials(fd);

        if (r == 0 && bind(fd, (struct sockaddr *) &sa, len) < 0)
                r = -errno;
        return r;
}

int notify_socket_open(struct notify_socket *ret) {
        struct notify_socket s = { .fd = -1 };
        int r;

        /* What protects READY=1 is the sender check on what the kernel
         * fills in (pass_credentials()), not the name. */
        r = abstract_socket_name(s.address, sizeof s.address, "notify");
        if (r < 0)
                return r;
        s.fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (s.fd < 0)
                return -errno;
        r = bind_notify(s.fd, s.address);
        if (r < 0) {
                close(s.fd);
                return r;
        }
        *ret = s;
        return 0;
}

void notify_socket_close(struct notify_socket *s) {
        if (s->fd >= 0)
                close(s->fd);
        s->fd = -1;
}

int notify_socket_receive(struct notify_socket *s, char *buf, size_t size, struct peer *ret_sender,
                          struct notify_message *ret) {
        union {
                struct cmsghdr header;
                char space[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(sizeof(int)) + CMSG_SPACE(sizeof(int) * 16)];
        } control;
        struct iovec iov = { .iov_base = buf, .iov_len = size - 1 };
        struct msghdr msg = {
                .msg_iov = &iov,
                .msg_iovlen = 1,
                .msg_control = &control,
                .msg_controllen = sizeof control,
        };
        const struct ucred *cred = NULL;
        /* No SCM_PIDFD: the kernel has none (peer_init()). */
        int pidfd = -ENOPROTOOPT;
        ssize_t n;

        n = recvmsg(s->fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC | MSG_TRUNC);
        if (n < 0)
                return -errno;
        /* Fds passed along (FDSTORE=1) are not for us: close them. */
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
                if (c->cmsg_level != SOL_SOCKET)
                        continue;
                if (c->cmsg_type == SCM_CREDENTIALS && c->cmsg_len == CMSG_LEN(sizeof(struct ucred)))
                        cred = (const struct ucred *) CMSG_DATA(c);
                /* A negative value: the sender was gone (Linux 6.5 to
                 * 6.15 cannot make a pidfd of a reaped process). */
                else if (c->cmsg_type == SCM_PIDFD && c->cmsg_len == CMSG_LEN(sizeof(int)) && pidfd == -ENOPROTOOPT)
                        memcpy(&pidfd, CMSG_DATA(c), sizeof pidfd);
                else if (c->cmsg_type == SCM_RIGHTS) {
                        int *fds = (int *) CMSG_DATA(c);
                        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                        for (size_t i = 0; i < k; i++)
                                close(fds[i]);
                }
        }
        if (!cred || cred->pid <= 0 || (size_t) n >= size || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
                if (pidfd >= 0)
                        close(pidfd);
                return 0;
        }
        buf[n] = '\0';
        peer_init(ret_sender, cred->pid, cred->uid, cred->gid, pidfd);
        notify_message_parse(buf, (size_t) n, ret);
        return 1;
}

void notify_manager(const char *message) {
        /* A no-op without NOTIFY_SOCKET; failures to notify are not fatal:
         * the manager will time us out itself. */
        (void) sd_notify_lazy(message);
}

int notify_socket_move(struct notify_socket *s, int fd) {
        int flags = fcntl(fd, F_GETFL), r = 0;

        if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
                r = -errno;
        if (r == 0)
                r = bind_notify(fd, s->address);
        if (r < 0) {
                close(fd);
                return r;
        }
        notify_socket_close(s);
        s->fd = fd;
        return 0;
}

int abstract_socket_name(char *buf, size_t size, const char *kind) {
        uint64_t nonce[2];
        int n;

        if (getrandom(nonce, sizeof nonce, GRND_NONBLOCK) != (ssize_t) sizeof nonce) {
                /* Early boot (no entropy yet): unique is enough, see the
                 * header. */
                struct timespec ts;

                clock_gettime(CLOCK_MONOTONIC, &ts);
                nonce[0] = (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
                nonce[1] = (uint64_t) getpid() * 2654435761u;
        }
        n = snprintf(buf, size, "@prebind/%s/%d/%016llx%016llx", kind, (int) getpid(), (unsigned long long) nonce[0],
                     (unsigned long long) nonce[1]);
        return n < 0 || (size_t) n >= size ? -ENAMETOOLONG : n;
}
