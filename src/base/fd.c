/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/syscall.h>

#include "compat.h"
#include "fd.h"
#include "parse.h"
#include "raw.h"

int fd_range(unsigned first, unsigned last, enum fd_action action) {
        DIR *d;
        struct dirent *de;

        if (first > last)
                return 0;
        if (syscall(SYS_close_range, first, last, action == FD_CLOSE ? 0U : (unsigned) CLOSE_RANGE_CLOEXEC) == 0)
                return 0;
        /* Kernels before 5.11 (and valgrind before 3.20): walk the list. */
        d = opendir("/proc/self/fd");
        if (!d)
                return -errno;
        while ((de = readdir(d))) {
                unsigned long fd;

                if (parse_uint(de->d_name, first, last < INT32_MAX ? last : INT32_MAX, &fd) < 0 ||
                    (int) fd == dirfd(d))
                        continue;
                if (action == FD_CLOSE)
                        close((int) fd);
                else
                        fcntl((int) fd, F_SETFD, FD_CLOEXEC);
        }
        closedir(d);
        return 0;
}

void fd_writer_open(int fd, struct fd_writer *ret) {
        struct fd_writer w = { .fd = fd };
        char path[64];
        struct stat st;
        int own;

        if (fstat(fd, &st) == 0)
                w.type = st.st_mode & S_IFMT;
        /* Opening a pipe or a terminal again makes a new open file
         * description of it, ours alone. */
        if (S_ISFIFO(w.type) || S_ISCHR(w.type)) {
                snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
                own = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
                if (own >= 0) {
                        w.fd = own;
                        w.owned = true;
                }
        }
        *ret = w;
}

int fd_send_message(int sock, const void *data, size_t len, const int *fds, size_t n_fds, int flags) {
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(FD_MESSAGE_FDS_MAX * sizeof(int))];
        } control;
        struct iovec iov = { .iov_base = (void *) data, .iov_len = len };
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };

        if (n_fds > FD_MESSAGE_FDS_MAX)
                return -EINVAL;
        memset(&control, 0, sizeof control);
        if (n_fds > 0) {
                struct cmsghdr *c;

                msg.msg_control = control.buf;
                msg.msg_controllen = CMSG_SPACE(n_fds * sizeof(int));
                c = CMSG_FIRSTHDR(&msg);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(n_fds * sizeof(int));
                memcpy(CMSG_DATA(c), fds, n_fds * sizeof(int));
        }
        return sendmsg(sock, &msg, MSG_NOSIGNAL | flags) < 0 ? -errno : 0;
}

int fd_recv_message(int sock, void *data, size_t size, int *fds, size_t max_fds, size_t *ret_len) {
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(FD_MESSAGE_FDS_MAX * sizeof(int))];
        } control;
        struct iovec iov = { .iov_base = data, .iov_len = size };
        struct msghdr msg = {
                .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf, .msg_controllen = sizeof control.buf
        };
        long k;
        int n = 0;

        /* raw(): the guard receives with this on prebind's memory. */
        do
                k = raw(SYS_recvmsg, sock, &msg, MSG_CMSG_CLOEXEC);
        while (k == -EINTR);
        if (k < 0)
                return (int) k;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
                // NOLINTNEXTLINE(clang-analyzer-core.UndefinedBinaryOperatorResult): the kernel wrote it (raw())
                if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                        continue;
                for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
                        int fd;

                        memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
                        if ((size_t) n < max_fds)
                                fds[n++] = fd;
                        else
                                (void) raw(SYS_close, fd);
                }
        }
        if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
                for (int i = 0; i < n; i++)
                        (void) raw(SYS_close, fds[i]);
                return -EBADMSG;
        }
        *ret_len = (size_t) k;
        return n;
}

socklen_t unix_address(struct sockaddr_un *ret, const char *name, bool abstract) {
        size_t len = strlen(name), size = len + (abstract ? 0 : 1);

        if (len == 0 || size > sizeof ret->sun_path)
                return 0;
        *ret = (struct sockaddr_un) { .sun_family = AF_UNIX };
        memcpy(ret->sun_path, name, len);
        if (abstract)
                ret->sun_path[0] = '\0';
        return (socklen_t) (offsetof(struct sockaddr_un, sun_path) + size);
}

bool unix_socket_is_stale(const char *path) {
        struct sockaddr_un addr;
        socklen_t len = unix_address(&addr, path, false);
        int fd, r;

        if (len == 0)
                return false;
        /* Non-blocking: a live listener with a full backlog (one that never
         * accepts) makes connect() wait for room, forever. EAGAIN then
         * means "in use", like any answer but ECONNREFUSED — which the
         * kernel gives when no socket of any type is bound to the file
         * (one of another type is EPROTOTYPE: in use too). */
        fd = (int) raw(SYS_socket, AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return false;
        r = (int) raw(SYS_connect, fd, &addr, len);
        (void) raw(SYS_close, fd);
        return r == -ECONNREFUSED;
}
