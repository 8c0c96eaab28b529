/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* A name watched in a directory, for a root: the root's own name in its
 * parent, a watched file's, or a symbolic link's on the way to either. */
struct watched_name {
        char *name;
        size_t root; /* index in o.paths */
};

/* One inotify watch: a directory, in a root's tree and/or for names. */
struct watched {
        int wd;
        char *path;  /* as it is opened */
        char *rel;   /* relative to its root, for the globs ("" for the root and a names-only one) */
        size_t tree; /* the root whose tree it is in; NO_TREE: watched for names only */
        struct watched_name *names;
        size_t n_names;
};

#define NO_TREE SIZE_MAX
/* Symbolic links followed on the way from a root to what it names, as
 * the kernel's own bound on a path's resolution (path_resolution(7)). */
#define HOPS_MAX 40

struct watch {
        struct watch_options o;
        int fd;
        struct loop *loop;
        watch_callback callback;
        void *userdata;
        struct watched *dirs; /* ordered by wd: the kernel hands them out increasing */
        size_t n_dirs;
        bool *stale; /* per root: what its path leads to changed, watched anew after the event */
        bool warned_full;
        struct loop_timer timer; /* --watch-delay after the first change of a burst */
        uint64_t first_usec;     /* the first change of the burst */
        char changed[PATH_MAX];  /* the last one */
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
        for (size_t i = 0; i < d->n_names; i++)
                free(d->names[i].name);
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

/* Watch one directory (rel: relative to its tree's root). *ret is its
 * entry, or NULL if it is left out (the limits). Returns 1 if it is
 * watched now, 0 if it was already or is left out, or -errno. */
static int watch_dir(struct watch *w, const char *path, const char *rel, bool follow, struct watched **ret) {
        struct watched *d, *grown;
        int wd;

        *ret = NULL;
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
        *ret = find(w, wd);
        if (*ret)
                return 0;
        /* New wds are larger than every one in use. */
        grown = realloc(w->dirs, (w->n_dirs + 1) * sizeof *grown);
        if (!grown)
                return -ENOMEM;
        w->dirs = grown;
        d = &w->dirs[w->n_dirs];
        *d = (struct watched) { .wd = wd, .path = strdup(path), .rel = strdup(rel), .tree = NO_TREE };
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
        *ret = d;
        return 1;
}

/* Watch name in directory dir for root. 0 or -errno. */
static int add_name(struct watch *w, const char *dir, const char *name, size_t root) {
        struct watched *d;
        struct watched_name *names;
        int r = watch_dir(w, dir, "", true, &d);

        if (!d)
                return r;
        for (size_t i = 0; i < d->n_names; i++)
                if (d->names[i].root == root && strcmp(d->names[i].name, name) == 0)
                        return 0;
        names = realloc(d->names, (d->n_names + 1) * sizeof *names);
        if (!names)
                return -ENOMEM;
        d->names = names;
        d->names[d->n_names] = (struct watched_name) { .name = strdup(name), .root = root };
        if (!d->names[d->n_names].name)
                return -ENOMEM;
        d->n_names++;
        return 0;
}

/* dir/name into buf; false when it does not fit (no such path is watched). */
static bool join(char *buf, size_t size, const char *dir, const char *name) {
        int n = snprintf(buf, size, "%s%s%s", dir, *dir && dir[strlen(dir) - 1] != '/' ? "/" : "", name);

        return n >= 0 && (size_t) n < size;
}

/* A directory and every one below it that is not ignored. With found,
 * the first file found in them (made before its directory was watched)
 * is written there, if any. */
/* NOLINTNEXTLINE(misc-no-recursion): one level a call, DEPTH_MAX deep at most */
static int add_tree(struct watch *w, const char *path, const char *rel, size_t root, int depth, char *found,
                    size_t found_size) {
        _cleanup_(closedirp) DIR *dir = NULL;
        struct watched *d;
        struct dirent *e;
        int r;

        /* Symbolic links below a root are not followed (a link to ".."
         * would be a loop); a root given as one is. */
        r = watch_dir(w, path, rel, depth == 0, &d);
        if (!d || d->tree != NO_TREE)
                return r < 0 ? r : 0;
        d->tree = root;
        if (r == 0) {
                /* Watched for names so far: its rel is the tree's now. */
                char *copy = strdup(rel);

                if (!copy)
                        return -ENOMEM;
                free(d->rel);
                d->rel = copy;
        }
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
                if (!join(sub, sizeof sub, path, e->d_name) || !join(subrel, sizeof subrel, rel, e->d_name))
                        continue;
                if (watch_ignored(w->o.ignore, w->o.n_ignore, w->o.ignore_defaults, subrel))
                        continue;
                if (e->d_type == DT_UNKNOWN && lstat(sub, &st) == 0)
                        is_dir = S_ISDIR(st.st_mode);
                if (is_dir)
                        r = add_tree(w, sub, subrel, root, depth + 1, found, found_size);
                else if (found && !*found)
                        snprintf(found, found_size, "%s", sub);
                if (r == -ENOMEM)
                        return r;
        }
        return 0;
}

/* path's directory and last name, trailing slashes dropped. false for
 * a path with no name to watch in a parent ("/", ".", ".."). */
static bool split(const char *path, char *dir, size_t dir_size, char *name, size_t name_size) {
        size_t len = strlen(path);
        const char *last;

        while (len > 1 && path[len - 1] == '/')
                len--;
        /* The last name starts after the last slash; the slash before it
         * ends the directory ("/" for a name at the root). */
        for (last = path + len; last > path && last[-1] != '/'; last--)
                ;
        snprintf(name, name_size, "%.*s", (int) (path + len - last), last);
        if (last == path)
                snprintf(dir, dir_size, ".");
        else
                snprintf(dir, dir_size, "%.*s", (int) (last - 1 == path ? 1 : last - 1 - path), path);
        return *name && strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
}

/* Watch the names on the way to what path leads to, each in its
 * directory: path's own, and each symbolic link's target's, hop by hop;
 * a directory reached through a link (Kubernetes' "..data") is such a
 * name too. A change of any of them (an editor's rename over the file,
 * the directory renamed and made anew, the link swapped) changes what
 * path is: the root is then watched anew. */
/* NOLINTNEXTLINE(misc-no-recursion): bounded by HOPS_MAX hops in all */
static int add_names(struct watch *w, const char *path, size_t root, int *hops) {
        char cur[PATH_MAX], dir[PATH_MAX], name[NAME_MAX + 1], target[PATH_MAX];
        struct stat st;
        ssize_t n;
        int r;

        snprintf(cur, sizeof cur, "%s", path);
        while ((*hops)++ < HOPS_MAX && split(cur, dir, sizeof dir, name, sizeof name)) {
                if (lstat(dir, &st) == 0 && S_ISLNK(st.st_mode) && (r = add_names(w, dir, root, hops)) < 0)
                        return r;
                r = add_name(w, dir, name, root);
                if (r < 0 && r != -ENOENT && r != -EACCES && r != -ENOTDIR)
                        return r;
                n = readlink(cur, target, sizeof target - 1);
                if (n < 0)
                        return 0;
                target[n] = '\0';
                if (target[0] == '/')
                        snprintf(cur, sizeof cur, "%s", target);
                else if (!join(cur, sizeof cur, dir, target))
                        return 0;
        }
        return 0;
}

/* Watch root i: the names on its way, and the tree if it is a
 * directory. At the start a root must exist; later it may be gone
 * for a moment (renamed away, not yet made anew). */
static int add_root(struct watch *w, size_t i, bool starting) {
        const char *path = w->o.paths[i];
        struct stat st;
        int hops = 0, r;

        if (stat(path, &st) < 0) {
                if (starting)
                        return -errno;
                /* Its parent stays watched for its name: made anew, it is
                 * watched again. */
                return add_names(w, path, i, &hops);
        }
        r = add_names(w, path, i, &hops);
        if (r < 0)
                return r;
        return S_ISDIR(st.st_mode) ? add_tree(w, path, "", i, 0, NULL, 0) : 0;
}

/* Root i leads nowhere so far: no tree, no names. Its directories stay
 * watched until sweep(): most are its again at once. */
static void strip_root(struct watch *w, size_t root) {
        for (size_t k = 0; k < w->n_dirs; k++) {
                struct watched *d = &w->dirs[k];

                for (size_t j = d->n_names; j-- > 0;)
                        if (d->names[j].root == root) {
                                free(d->names[j].name);
                                d->names[j] = d->names[--d->n_names];
                        }
                if (d->tree == root)
                        d->tree = NO_TREE;
        }
}

/* Directories no root leads to any more (a tree renamed away): no
 * change in them counts. */
static void sweep(struct watch *w) {
        for (size_t k = w->n_dirs; k-- > 0;)
                if (w->dirs[k].tree == NO_TREE && w->dirs[k].n_names == 0) {
                        (void) inotify_rm_watch(w->fd, w->dirs[k].wd);
                        forget(w, &w->dirs[k]);
                }
}

/* Roots whose way changed: watched anew, from their paths. */
static void rewatch_stale(struct watch *w) {
        for (size_t i = 0; i < w->o.n_paths; i++) {
                int r;

                if (!w->stale[i])
                        continue;
                w->stale[i] = false;
                strip_root(w, i);
                r = add_root(w, i, false);
                if (r < 0)
                        log_error_errno(r, "--watch: cannot watch '%s' anew: %m", w->o.paths[i]);
        }
        sweep(w);
}

static int on_timer(struct loop *l, struct loop_timer *t, void *userdata) {
        struct watch *w = userdata;

        w->callback(w->changed, w->userdata);
        return 0;
}

static void changed(struct watch *w, const char *path) {
        uint64_t now = now_usec(), due;

        snprintf(w->changed, sizeof w->changed, "%s", path);
        if (!w->timer.armed)
                w->first_usec = now;
        due = watch_due(w->first_usec, now, w->o.delay_usec);
        loop_timer_start(w->loop, &w->timer, due > now ? due - now : 0, on_timer, w);
}

static bool wanted(const struct watched *d, const char *name) {
        if (d->tree != NO_TREE)
                return true;
        for (size_t i = 0; i < d->n_names; i++)
                if (strcmp(d->names[i].name, name) == 0)
                        return true;
        return false;
}

/* A name on a root's way made, removed or renamed: the root leads
 * elsewhere now. Returns whether any root does. */
static bool mark_stale(struct watch *w, const struct watched *d, const struct inotify_event *ev) {
        bool any = false;

        if (!(ev->mask & (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO)))
                return false;
        for (size_t i = 0; i < d->n_names; i++)
                if (strcmp(d->names[i].name, ev->name) == 0)
                        any = w->stale[d->names[i].root] = true;
        return any;
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
        if (!join(path, sizeof path, d->path, ev->name) || !join(rel, sizeof rel, d->rel, ev->name))
                return;
        if (mark_stale(w, d, ev)) {
                /* A root is no glob's to ignore. */
                rewatch_stale(w);
                changed(w, path);
                return;
        }
        if (watch_ignored(w->o.ignore, w->o.n_ignore, w->o.ignore_defaults, rel))
                return;
        if ((ev->mask & IN_ISDIR) && (ev->mask & (IN_CREATE | IN_MOVED_TO)) && d->tree != NO_TREE) {
                /* A new directory: watched, and what it holds already counts. */
                r = add_tree(w, path, rel, d->tree, 1, found, sizeof found);
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
        *w = (struct watch) { .o = *o, .loop = loop, .callback = callback, .userdata = userdata };
        w->stale = calloc(o->n_paths + 1, sizeof *w->stale);
        w->fd = w->stale ? inotify_init1(IN_NONBLOCK | IN_CLOEXEC) : -1;
        if (w->fd < 0) {
                r = w->stale ? -errno : -ENOMEM;
                free(w->stale);
                free(w);
                *ret_path = NULL;
                return r;
        }
        for (size_t i = 0; i < o->n_paths; i++) {
                r = add_root(w, i, true);
                if (r < 0) {
                        *ret_path = o->paths[i];
                        watch_stop(w);
                        return r;
                }
        }
        r = loop_add(loop, w->fd, LOOP_IN, on_inotify, w);
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
                loop_timer_stop(w->loop, &w->timer);
        }
        for (size_t i = 0; i < w->n_dirs; i++)
                watched_done(&w->dirs[i]);
        free(w->dirs);
        free(w->stale);
        close(w->fd);
        free(w);
}
