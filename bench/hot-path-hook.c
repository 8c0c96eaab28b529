/* SPDX-License-Identifier: MIT */
/* bench/hot-path's recorder, linked into a -finstrument-functions build of
 * prebind: every function entered, once, in a table in a shared mapping
 * of the file $PREBIND_HOT_PATH_OUT, so that every process on prebind's
 * memory or forked from it (the guard, the vfork-style children) writes
 * to it, and nothing depends on anyone's exit (a SIGKILLed prebind's
 * entries are there too). Each slot is an address less
 * __executable_start, 0 when free. */
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define NO_HOOK __attribute__((no_instrument_function))
#define SLOTS 4096

static uint64_t *entered;
extern char __executable_start[];

NO_HOOK void __cyg_profile_func_enter(void *fn, void *site);
NO_HOOK void __cyg_profile_func_exit(void *fn, void *site);

NO_HOOK __attribute__((constructor)) static void map_table(void) {
        const char *path = getenv("PREBIND_HOT_PATH_OUT");
        int fd;
        void *p;

        if (!path || (fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) < 0)
                return;
        if (ftruncate(fd, SLOTS * sizeof *entered) == 0 &&
            (p = mmap(NULL, SLOTS * sizeof *entered, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) != MAP_FAILED)
                entered = p;
        close(fd);
}

void __cyg_profile_func_enter(void *fn, void *site) {
        uint64_t offset = (uint64_t) ((char *) fn - __executable_start);
        size_t h = (size_t) (offset >> 2) % SLOTS;

        (void) site;
        if (!entered)
                return;
        for (size_t i = 0; i < SLOTS; i++, h = (h + 1) % SLOTS) {
                uint64_t was = 0;

                if (__atomic_compare_exchange_n(&entered[h], &was, offset, false, __ATOMIC_RELAXED,
                                                __ATOMIC_RELAXED) ||
                    was == offset)
                        return;
        }
}

void __cyg_profile_func_exit(void *fn, void *site) {
        (void) fn;
        (void) site;
}
