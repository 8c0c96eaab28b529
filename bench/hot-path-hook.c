/* SPDX-License-Identifier: MIT */
/* bench/hot-path's recorder, linked into a -finstrument-functions build of
 * prebind: every function entered, once, in a table shared by every
 * process on prebind's memory (the guard and the vfork-style children
 * too), written out at prebind's exit as offsets from the image's start. */
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define NO_HOOK __attribute__((no_instrument_function))
#define SLOTS 4096

static void *entered[SLOTS];
extern char __executable_start[];

NO_HOOK void __cyg_profile_func_enter(void *fn, void *site);
NO_HOOK void __cyg_profile_func_exit(void *fn, void *site);

void __cyg_profile_func_enter(void *fn, void *site) {
        size_t h = ((size_t) fn >> 2) % SLOTS;

        (void) site;
        for (size_t i = 0; i < SLOTS; i++, h = (h + 1) % SLOTS) {
                void *was = NULL;

                if (__atomic_compare_exchange_n(&entered[h], &was, fn, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED) ||
                    was == fn)
                        return;
        }
}

void __cyg_profile_func_exit(void *fn, void *site) {
        (void) fn;
        (void) site;
}

NO_HOOK __attribute__((destructor)) static void write_out(void) {
        const char *path = getenv("PREBIND_HOT_PATH_OUT");
        int fd;

        if (!path || (fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600)) < 0)
                return;
        for (size_t i = 0; i < SLOTS; i++)
                if (entered[i])
                        dprintf(fd, "%zx\n", (size_t) ((char *) entered[i] - __executable_start));
        close(fd);
}
