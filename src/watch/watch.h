/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loop.h"

/* --watch: changes under a set of paths, as one source on the
 * supervisor's loop (inotify), debounced, reported as one callback with
 * the path that changed last. Directories are watched recursively, new
 * subdirectories as they appear (and scanned: a file made before the
 * watch was added counts); a file is watched through its directory,
 * filtered by name, so that an editor's rename over it is seen. A path is
 * followed, not the inode it first led to: its name in its parent and
 * each symbolic link's on the way are watched too, and a change of one of
 * them (a directory renamed and made anew, a ..data swap) is a change and
 * watches the path anew. Names that rules.h ignores do not count. */
struct watch;

struct watch_options {
        const char *const *paths;
        size_t n_paths;
        const char *const *ignore; /* globs, besides the defaults */
        size_t n_ignore;
        bool ignore_defaults;
        uint64_t delay_usec; /* the debounce */
};

/* At most this many directories are watched; inotify's own limit
 * (fs.inotify.max_user_watches) may come first. Either is said once, and
 * what is left is not watched. */
#define WATCH_DIRS_MAX 8192
/* Events read per wake-up: one read of this many bytes. */
#define WATCH_READ_BUFFER (64 * 1024)

typedef void (*watch_callback)(const char *changed, void *userdata);

/* Watch o->paths (kept: they must outlive the watch). A path that cannot
 * be watched at all (missing, unreadable) fails the start: -errno, and
 * *ret_path names it. */
int watch_start(const struct watch_options *o, struct loop *loop, watch_callback callback, void *userdata,
                struct watch **ret, const char **ret_path);
/* Off the loop, every watch removed. NULL is fine. */
void watch_stop(struct watch *w);
