/* SPDX-License-Identifier: MIT */
#pragma once

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
