/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/stat.h>
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
