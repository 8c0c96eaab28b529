/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sd.h"
#include "sdproto.h"

#ifdef HAVE_LIBSYSTEMD
#include <dlfcn.h>

/* libsystemd's soname: it has been libsystemd.so.0 since the library
 * was created (its ABI is kept stable), and a build may override it with
 * -DLIBSYSTEMD_SONAME=… where a distribution ships another. */
#ifndef LIBSYSTEMD_SONAME
#define LIBSYSTEMD_SONAME "libsystemd.so.0"
#endif

static void *libsystemd(void) {
        static void *handle;

        if (!handle)
                handle = dlopen(LIBSYSTEMD_SONAME, RTLD_NOW | RTLD_LOCAL);
        return handle;
}

static void *symbol(const char *name) {
        void *h = libsystemd();
        return h ? dlsym(h, name) : NULL;
}
#else
/* -Dlibsystemd=disabled, and the static build: prebind's own code. */
static void *symbol(const char *name) {
        return NULL;
}
#endif

int sd_listen_fds_with_names_lazy(char ***names) {
        int (*fn)(int, char ***);
        const char *text = getenv("LISTEN_PID");
        pid_t pid;

        /* The check sd_listen_fds() makes first, by its own number rule:
         * not ours (or no pid at all), nothing to load. */
        if (!text || sdproto_parse_pid(text, &pid) < 0 || pid != getpid()) {
                *names = NULL;
                return 0;
        }
        fn = (int (*)(int, char ***)) symbol("sd_listen_fds_with_names");
        /* No libsystemd0 on this machine: the same protocol, spoken by
         * prebind itself. */
        if (!fn)
                return sdproto_listen_fds(names);
        return fn(1, names);
}

int sd_notify_lazy(const char *message) {
        int (*fn)(int, const char *);

        if (!getenv("NOTIFY_SOCKET"))
                return 0;
        fn = (int (*)(int, const char *)) symbol("sd_notify");
        if (!fn)
                return sdproto_notify(message);
        return fn(0, message);
}
