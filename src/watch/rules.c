/* SPDX-License-Identifier: MIT */
#include <fnmatch.h>
#include <limits.h>
#include <string.h>

#include "rules.h"

const char watch_default_ignores[][16] = {
        ".git",        ".hg",         ".svn",  ".jj", /* version control */
        "__pycache__", "*.pyc",       "*.pyo", ".pytest_cache",
        ".mypy_cache", ".ruff_cache", ".tox",  "node_modules",
        "zig-cache", /* caches and build output */
        "*.swp",       "*.swx",       "*.swo", "*~",
        ".#*",         "#*#",         "4913",  ".DS_Store", /* editors */
};
const size_t watch_n_default_ignores = sizeof watch_default_ignores / sizeof watch_default_ignores[0];

bool watch_glob_matches(const char *glob, const char *path) {
        const char *component = path;

        if (strlen(path) >= PATH_MAX)
                return false;
        if (strchr(glob, '/'))
                return fnmatch(glob, path, FNM_PATHNAME) == 0;
        while (*component) {
                const char *end = strchrnul(component, '/');
                size_t len = (size_t) (end - component);
                char name[NAME_MAX + 1];

                if (len > 0 && len <= NAME_MAX) {
                        memcpy(name, component, len);
                        name[len] = '\0';
                        if (fnmatch(glob, name, 0) == 0)
                                return true;
                }
                component = *end ? end + 1 : end;
        }
        return false;
}

bool watch_ignored(const char *const *globs, size_t n, bool defaults, const char *path) {
        for (size_t i = 0; defaults && i < watch_n_default_ignores; i++)
                if (watch_glob_matches(watch_default_ignores[i], path))
                        return true;
        for (size_t i = 0; i < n; i++)
                if (watch_glob_matches(globs[i], path))
                        return true;
        return false;
}

uint64_t watch_due(uint64_t first_usec, uint64_t now_usec, uint64_t delay_usec) {
        uint64_t settle = delay_usec * 10 > WATCH_SETTLE_MAX_USEC ? delay_usec * 10 : WATCH_SETTLE_MAX_USEC;
        uint64_t latest = first_usec + settle, due = now_usec + delay_usec;

        return due < latest ? due : (latest > now_usec ? latest : now_usec);
}
