/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "macro.h"
#include "rules.h"
#include "watch.h"

/* What a change is: a file written and closed (a write in place), renamed
 * in or out (an editor's save by rename, a delete by rename), created,
 * deleted, or its metadata changed (touch). IN_MODIFY is left out: a file
 * being written gives one per write, and its IN_CLOSE_WRITE follows. */
#define CHANGES (IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE | IN_ATTRIB)
/* Directories below a root, at most this deep (a loop of bind mounts
 * would otherwise never end). */
#define DEPTH_MAX 32

/* One inotify watch: a directory, and the root it belongs to. */
struct watched {
        int wd;
        char *path;         /* as it is opened */
        char *rel;          /* relative to its root, for the globs ("" for the root) */
        bool recursive;     /* a directory given, or below one; false: a given file's directory */
        const char **names; /* !recursive: the files watched in it */
        size_t n_names;
};

struct watch {
        struct watch_options o;
        int fd;
        struct loop *loop;
        watch_callback callback;
        void *userdata;
        struct watched *dirs; /* ordered by wd: the kernel hands them out increasing */
        size_t n_dirs;
        bool warned_full;
        int timer_fd;
        uint64_t first_usec;    /* the first change of the burst */
        char changed[PATH_MAX]; /* the last one */
};

static void closedirp(DIR **d) {
        if (*d)
                closedir(*d);
}

static struct watched *find(struct watch *w, int wd) {
        size_t lo = 0, hi = w->n_dirs;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;

                if (w->dirs[mid].wd == wd)
                        return &w->dirs[mid];
                if (w->dirs[mid].wd < wd)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return NULL;
}

static void watched_done(struct watched *d) {
        free(d->path);
        free(d->rel);
        free(d->names);
}

static void forget(struct watch *w, struct watched *d) {
        size_t i = (size_t) (d - w->dirs);

        watched_done(d);
        memmove(d, d + 1, (w->n_dirs - i - 1) * sizeof *d);
        w->n_dirs--;
}

/* Said once: what is left is not watched. */
static void warn_full(struct watch *w, int err, const char *path) {
        char limit[32] = "?";
        FILE *f;

        if (w->warned_full)
                return;
        w->warned_full = true;
        if (err == ENOSPC) {
                f = fopen("/proc/sys/fs/inotify/max_user_watches", "re");
                if (f) {
                        if (!fgets(limit, sizeof limit, f))
                                strcpy(limit, "?");
                        limit[strcspn(limit, "\n")] = '\0';
                        fclose(f);
                }
                log_info("--watch: inotify's limit of watches is reached (fs.inotify.max_user_watches = %s): "
                         "'%s' and what follows are not watched",
                         limit, path);
        } else
                log_info("--watch: more than %d directories: '%s' and what follows are not watched", WATCH_DIRS_MAX,
                         path);
}

/* Watch one directory. Returns 1 if it is watched now, 0 if it was
 * already or is left out (the limits), or -errno. */
static int add_dir(struct watch *w, const char *path, const char *rel, bool recursive, bool follow, const char *name) {
        struct watched *d, *grown;
        int wd;

        if (w->n_dirs >= WATCH_DIRS_MAX) {
                warn_full(w, 0, path);
                return 0;
        }
        wd = inotify_add_watch(w->fd, path, CHANGES | IN_ONLYDIR | IN_EXCL_UNLINK | (follow ? 0 : IN_DONT_FOLLOW));
        if (wd < 0) {
                if (errno == ENOSPC) {
                        warn_full(w, ENOSPC, path);
                        return 0;
                }
                return -errno;
        }
        d = find(w, wd);
        if (!d) {
                /* New wds are larger than every one in use. */
                grown = realloc(w->dirs, (w->n_dirs + 1) * sizeof *grown);
                if (!grown)
                        return -ENOMEM;
                w->dirs = grown;
                d = &w->dirs[w->n_dirs];
                *d = (struct watched) { .wd = wd, .path = strdup(path), .rel = strdup(rel) };
                w->n_dirs++;
                if (!d->path || !d->rel) {
                        forget(w, d);
                        return -ENOMEM;
                }
                if (w->n_dirs > 1 && w->dirs[w->n_dirs - 2].wd > wd) {
                        /* Not what the kernel does; keep the order anyway. */
                        struct watched tmp = *d;
                        size_t i = w->n_dirs - 1;

                        for (; i > 0 && w->dirs[i - 1].wd > wd; i--)
                                w->dirs[i] = w->dirs[i - 1];
                        w->dirs[i] = tmp;
                        d = &w->dirs[i];
                }
        } else if (!recursive && d->recursive)
                return 0; /* the whole directory is watched already */
        if (recursive) {
                d->recursive = true;
                free(d->names);
                d->names = NULL;
                d->n_names = 0;
        } else if (name) {
                const char **names = realloc(d->names, (d->n_names + 1) * sizeof *names);

                if (!names)
                        return -ENOMEM;
                d->names = names;
                d->names[d->n_names++] = name;
        }
        return 1;
}

static void join(char *buf, size_t size, const char *dir, const char *name) {
        snprintf(buf, size, "%s%s%s", dir, *dir && dir[strlen(dir) - 1] != '/' ? "/" : "", name);
}

/* A directory and every one below it that is not ignored. With found,
 * the first file found in them (made before its directory was watched)
 * is written there, if any. */
/* NOLINTNEXTLINE(misc-no-recursion): one level a call, DEPTH_MAX deep at most */
static int add_tree(struct watch *w, const char *path, const char *rel, int depth, char *found, size_t found_size) {
        _cleanup_(closedirp) DIR *dir = NULL;
        struct dirent *e;
        int r;

        /* Symbolic links below a root are not followed (a link to ".."
         * would be a loop); a root given as one is. */
        r = add_dir(w, path, rel, true, depth == 0, NULL);
        if (r <= 0)
                return r;
        if (depth >= DEPTH_MAX)
                return 0;
        dir = opendir(path);
        if (!dir)
                return 0; /* gone again, or unreadable: its own events say */
        while ((e = readdir(dir))) {
                char sub[PATH_MAX], subrel[PATH_MAX];
                bool is_dir = e->d_type == DT_DIR;
                struct stat st;

                if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                        continue;
                join(sub, sizeof sub, path, e->d_name);
                join(subrel, sizeof subrel, rel, e->d_name);
                if (watch_ignored(w->o.ignore, w->o.n_ignore, w->o.ignore_defaults, subrel))
                        continue;
                if (e->d_type == DT_UNKNOWN && lstat(sub, &st) == 0)
                        is_dir = S_ISDIR(st.st_mode);
                if (is_dir)
                        r = add_tree(w, sub, subrel, depth + 1, found, found_size);
                else if (found && !*found)
                        snprintf(found, found_size, "%s", sub);
                if (r == -ENOMEM)
                        return r;
        }
        return 0;
}

static int add_root(struct watch *w, const char *path) {
        char dir[PATH_MAX];
        const char *slash, *name;
        struct stat st;

        if (stat(path, &st) < 0)
                return -errno;
        if (S_ISDIR(st.st_mode))
                return add_tree(w, path, "", 0, NULL, 0);
        /* A file: its directory, for the name (an editor's save renames
         * a new file over it: a watch on the file would follow the old). */
        slash = strrchr(path, '/');
        name = slash ? slash + 1 : path;
        if (!slash)
                snprintf(dir, sizeof dir, ".");
        else
                snprintf(dir, sizeof dir, "%.*s", (int) (slash == path ? 1 : slash - path), path);
        return add_dir(w, dir, "", false, true, name);
}

static int on_timer(struct loop *l, int fd, uint32_t revents, void *userdata) {
        struct watch *w = userdata;

        if (!timer_expired(fd))
                return 0;
        loop_timer_disarm(l, &w->timer_fd);
        w->callback(w->changed, w->userdata);
        return 0;
}

static void changed(struct watch *w, const char *path) {
        uint64_t now = now_usec(), due;
        int r;

        snprintf(w->changed, sizeof w->changed, "%s", path);
        if (w->timer_fd < 0)
                w->first_usec = now;
        due = watch_due(w->first_usec, now, w->o.delay_usec);
        r = loop_timer_arm(w->loop, &w->timer_fd, due > now ? due - now : 1, on_timer, w);
        if (r < 0) {
                /* Without the clock: reload at once. */
                log_error_errno(r, "cannot arm the --watch timer: %m");
                w->callback(w->changed, w->userdata);
        }
}

static bool wanted(const struct watched *d, const char *name) {
        if (d->recursive)
                return true;
        for (size_t i = 0; i < d->n_names; i++)
                if (strcmp(d->names[i], name) == 0)
                        return true;
        return false;
}

static void handle(struct watch *w, const struct inotify_event *ev) {
        char path[PATH_MAX], rel[PATH_MAX], found[PATH_MAX] = "";
        struct watched *d;
        int r;

        if (ev->mask & IN_Q_OVERFLOW) {
                changed(w, "(more changes than inotify could queue)");
                return;
        }
        d = find(w, ev->wd);
        if (!d)
                return;
        if (ev->mask & IN_IGNORED) {
                /* The directory is gone (or unmounted). */
                forget(w, d);
                return;
        }
        if (ev->len == 0 || !wanted(d, ev->name))
                return;
        join(path, sizeof path, d->path, ev->name);
        join(rel, sizeof rel, d->rel, ev->name);
        if (watch_ignored(w->o.ignore, w->o.n_ignore, w->o.ignore_defaults, rel))
                return;
        if ((ev->mask & IN_ISDIR) && (ev->mask & (IN_CREATE | IN_MOVED_TO)) && d->recursive) {
                /* A new directory: watched, and what it holds already counts. */
                r = add_tree(w, path, rel, 1, found, sizeof found);
                if (r < 0 && r != -ENOENT)
                        log_error_errno(r, "--watch: cannot watch '%s': %m", path);
                if (ev->mask & IN_MOVED_TO || *found)
                        changed(w, *found ? found : path);
                return;
        }
        if ((ev->mask & IN_ISDIR) && (ev->mask & IN_ATTRIB))
                return;
        changed(w, path);
}

static int on_inotify(struct loop *l, int fd, uint32_t revents, void *userdata) {
        struct watch *w = userdata;
        /* Aligned for struct inotify_event, as inotify(7) shows. */
        char buf[WATCH_READ_BUFFER] __attribute__((aligned(__alignof__(struct inotify_event))));
        ssize_t n;

        /* One read per wake-up: the loop comes back while more is queued. */
        n = read(fd, buf, sizeof buf);
        if (n < 0) {
                if (errno != EAGAIN && errno != EINTR)
                        log_error_errno(errno, "--watch: cannot read the changes: %m");
                return 0;
        }
        for (char *p = buf; p < buf + n;) {
                const struct inotify_event *ev = (const struct inotify_event *) p;

                handle(w, ev);
                p += sizeof *ev + ev->len;
        }
        return 0;
}

int watch_start(const struct watch_options *o, struct loop *loop, watch_callback callback, void *userdata,
                struct watch **ret, const char **ret_path) {
        struct watch *w = calloc(1, sizeof *w);
        int r;

        if (!w)
                return -ENOMEM;
        *w = (struct watch) { .o = *o, .loop = loop, .callback = callback, .userdata = userdata, .timer_fd = -1 };
        w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (w->fd < 0) {
                r = -errno;
                free(w);
                *ret_path = NULL;
                return r;
        }
        for (size_t i = 0; i < o->n_paths; i++) {
                r = add_root(w, o->paths[i]);
                if (r < 0) {
                        *ret_path = o->paths[i];
                        watch_stop(w);
                        return r;
                }
        }
        r = loop_add(loop, w->fd, EPOLLIN, on_inotify, w);
        if (r < 0) {
                *ret_path = NULL;
                w->loop = NULL;
                watch_stop(w);
                return r;
        }
        log_debug("--watch: %zu directories watched", w->n_dirs);
        *ret = w;
        return 0;
}

void watch_stop(struct watch *w) {
        if (!w)
                return;
        if (w->loop) {
                loop_remove(w->loop, w->fd);
                loop_timer_disarm(w->loop, &w->timer_fd);
        }
        for (size_t i = 0; i < w->n_dirs; i++)
                watched_done(&w->dirs[i]);
        free(w->dirs);
        close(w->fd);
        free(w);
}
