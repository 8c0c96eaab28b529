/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>

#include <stdbool.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

/* What to do with each open fd of a range. */
enum fd_action {
        FD_CLOSE,
        FD_SET_CLOEXEC,
};

/* Close, or mark close-on-exec, every open fd from first to last
 * (inclusive): close_range(2) where the kernel (and valgrind) has it,
 * else each fd listed in /proc/self/fd. For a child between fork and
 * exec as much as for prebind. Returns 0, or -errno when neither works. */
int fd_range(unsigned first, unsigned last, enum fd_action action);

/* A way to write to fd without waiting that leaves fd's open file
 * description as it is (O_NONBLOCK lives there, and COMMAND shares it).
 * fd: a non-blocking open of the same pipe or terminal through /proc
 * (owned: the caller closes it), else the fd given. type: its file type
 * (the S_IFMT bits; 0 if fstat failed). A socket is written with
 * send(MSG_DONTWAIT); a regular file never waits; a pipe or terminal
 * that could not be opened again (no /proc, another user's pipe: 0600,
 * no fd left) waits unless the caller polls first. */
struct fd_writer {
        int fd;
        mode_t type;
        bool owned;
};
void fd_writer_open(int fd, struct fd_writer *ret);

/* Messages with fds on a unix socket (SCM_RIGHTS), at most this many fds
 * in one. */
#define FD_MESSAGE_FDS_MAX 2

/* Send len bytes and n_fds fds as one message, never raising SIGPIPE;
 * flags as for sendmsg(2) (MSG_DONTWAIT). Returns 0 or -errno. */
int fd_send_message(int sock, const void *data, size_t len, const int *fds, size_t n_fds, int flags);

/* Receive one message of at most size bytes and at most max_fds fds, made
 * close-on-exec (more are closed). Returns the number of fds, with the
 * message's length in *ret_len (0: the other end closed), or -errno; a
 * message cut short (MSG_TRUNC, MSG_CTRUNC) is -EBADMSG, its fds closed.
 * Made of raw system calls (raw.h): the guard may call it. */
int fd_recv_message(int sock, void *data, size_t size, int *fds, size_t max_fds, size_t *ret_len);

/* ret, the address of a unix socket named name: a path, or with
 * abstract, a name in the abstract namespace whose first byte (prebind
 * writes it '@') becomes the NUL. A path's length counts its NUL, an
 * abstract name's only its bytes. Returns the length for bind() and
 * connect(), or 0 if name is empty or too long for sun_path. One copy
 * for every socket prebind names, checked here. */
socklen_t unix_address(struct sockaddr_un *ret, const char *name, bool abstract);

/* Is the unix socket file at path one that nobody is bound to any more
 * (connect() is refused)? A path that is not there, or too long for
 * sun_path, is not stale. Raw system calls, as fd_recv_message(). */
bool unix_socket_is_stale(const char *path);
