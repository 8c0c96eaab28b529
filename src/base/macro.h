/* SPDX-License-Identifier: MIT */
#pragma once

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

/* Scope-bound release, as systemd's macro.h: a variable declared
 * _cleanup_free_ or _cleanup_close_ is freed or closed on every path out
 * of its block; TAKE_PTR()/TAKE_FD() hand it on and leave NULL/-EBADF
 * behind, so nothing is released twice. (gcc and clang.) */
#define _cleanup_(f) __attribute__((cleanup(f)))
#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)

static inline void freep(void *p) {
        free(*(void **) p);
}

static inline void closep(const int *fd) {
        if (*fd >= 0) {
                int saved = errno;
                close(*fd);
                errno = saved;
        }
}

#define TAKE_PTR(p)                                                                                                   \
        ({                                                                                                            \
                __typeof__(p) _taken = (p);                                                                           \
                (p) = NULL;                                                                                           \
                _taken;                                                                                               \
        })

#define TAKE_FD(fd)                                                                                                   \
        ({                                                                                                            \
                int _taken = (fd);                                                                                    \
                (fd) = -EBADF;                                                                                        \
                _taken;                                                                                               \
        })

#define ELEMENTSOF(a) (sizeof(a) / sizeof((a)[0]))
