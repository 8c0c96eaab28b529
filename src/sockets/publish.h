/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "format.h"
#include "socket.h"

struct guard;

/* Where the addresses go, and in which format: --print, --port-file,
 * --port-fd, --format. */
struct publish_options {
        enum output_format format; /* --port-file's and --port-fd's */
        bool print;
        enum output_format print_format; /* --print=FORMAT; --format without */
        const char *port_file;
        int port_fd; /* -1: none; closed by publish_addresses(), once it has been written */
};

/* What prebind published and must take back when it exits. */
struct publication {
        const char *port_file; /* NULL until it is in place */
        int port_file_fd;      /* held open: see publication_withdraw() */
};

/* Write the addresses everywhere the options ask (--port-fd, --print,
 * --port-file), or log them on stderr if they ask for none. The guard (or
 * NULL) hears of the port file's names before they exist (guard.h). Logs
 * its own errors (with the output that failed) and returns a negative
 * errno. */
int publish_addresses(const struct publish_options *options, const struct bound_socket *sockets, size_t n, pid_t pid,
                      pid_t child_pid, struct guard *guard, struct publication *ret);

/* Must the addresses go out before COMMAND runs? When they go to a
 * stream COMMAND writes to as well (stdout with --print; stderr, where
 * they are logged), and wherever publishing can fail (a port file, an
 * fd): a failure must then leave COMMAND unrun. Only a run that
 * publishes nothing (-q alone) needs no order. */
bool publish_precedes_command(const struct publish_options *options);

/* Remove the port file, if it is still the one prebind wrote. */
void publication_withdraw(struct publication *p);

/* Write a whole buffer, retrying short writes and EINTR. */
int write_all(int fd, const char *buf, size_t len);

/* Create path atomically with content: a temporary file in the same
 * directory (O_EXCL, never following a symlink), then rename(2), so a
 * concurrent reader sees no file or the whole file, never a part of it.
 * Only a regular file at path is replaced (-EEXIST for anything else).
 * The guard (or NULL) is told each name before it exists and each file
 * once it does, so that a killed prebind leaves neither behind. Returns
 * 0 and an O_CLOEXEC fd of the new file, or -errno. */
int write_file_atomic(const char *path, const char *content, struct guard *guard, int *ret_fd);
