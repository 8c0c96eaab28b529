/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clock.h"

/* The rules of --watch, pure: which names do not count, and when a burst
 * of changes has settled. */

/* Names that no reload should follow (prebind(1), --watch-ignore): version
 * control, caches that a server writes itself, editors' swap, backup and
 * lock files, and vim's probe file "4913" (it checks that it may write a
 * directory by creating and deleting it). Arrays, not pointers: no
 * relocation for the loader to write at every start (see meson.build). */
extern const char watch_default_ignores[][16];
extern const size_t watch_n_default_ignores;

/* Does glob match path (relative to a watched root, '/'-separated)? A
 * glob without '/' is matched against each component of path (so
 * "node_modules" ignores everything below one, "*.swp" any swap file); a
 * glob with '/' against the whole path (fnmatch(3), FNM_PATHNAME). Names
 * longer than NAME_MAX and paths longer than PATH_MAX do not match:
 * fnmatch stays bounded. */
bool watch_glob_matches(const char *glob, const char *path);

/* Is path ignored by the defaults (when defaults is true) or one of
 * globs? */
bool watch_ignored(const char *const *globs, size_t n, bool defaults, const char *path);

/* Debounce: a change at now_usec, the first of the burst at first_usec.
 * The reload is due delay_usec after the last change, but no later than
 * WATCH_SETTLE_MAX_USEC (or 10 × delay, if longer) after the first: a
 * tree that never stops changing (a build writing into it) still
 * reloads. */
#define WATCH_SETTLE_MAX_USEC USEC_PER_SEC
uint64_t watch_due(uint64_t first_usec, uint64_t now_usec, uint64_t delay_usec);
