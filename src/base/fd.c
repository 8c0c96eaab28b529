/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <unistd.h>
#include <sys/syscall.h>

#include "compat.h"
#include "fd.h"
#include "parse.h"

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
