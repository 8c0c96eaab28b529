/* SPDX-License-Identifier: MIT */
/* --watch (src/watch/): the ignore rules and the debounce, pure; then the
 * watcher on a real directory, on a real loop: what counts as a change
 * (a write in place, a rename over, a new file in a new subdirectory, a
 * watched file renamed over), what does not (ignored names, another file
 * beside a watched one), and that a burst is one callback. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "loop.h"
#include "rules.h"
#include "unit.h"
#include "watch.h"

static bool ignored_by_default(const char *path) {
        return watch_ignored(NULL, 0, true, path);
}

START_TEST(test_defaults) {
        static const char *const ignored[] = {
                ".git",
                ".git/index",
                "src/.git/HEAD",
                "__pycache__/app.cpython-311.pyc",
                "app.pyc",
                "node_modules/x/index.js",
                ".app.py.swp",
                "app.py~",
                ".#app.py",
                "#app.py#",
                "4913",
                "sub/4913",
                ".hg/store",
                ".svn/entries",
                "pkg/__pycache__",
        };
        static const char *const counted[] = {
                "app.py", "src/app.py",           "gitignore", "x.git", "49130", "swp", "my_modules/a.js",
                "a~b",    "templates/index.html", "",          ".env",
        };

        for (size_t i = 0; i < ARRAY_SIZE(ignored); i++)
                ck_assert_msg(ignored_by_default(ignored[i]), "%s", ignored[i]);
        for (size_t i = 0; i < ARRAY_SIZE(counted); i++)
                ck_assert_msg(!ignored_by_default(counted[i]), "%s", counted[i]);
        /* An empty --watch-ignore drops them. */
        ck_assert(!watch_ignored(NULL, 0, false, ".git/index"));
}
END_TEST

START_TEST(test_globs) {
        static const char *const globs[] = { "*.log", "build/*.o", "tmp" };

        ck_assert(watch_glob_matches("*.log", "a/b/server.log"));
        ck_assert(!watch_glob_matches("*.log", "server.log.txt"));
        /* With a '/': the whole path, '*' not across '/'. */
        ck_assert(watch_glob_matches("build/*.o", "build/x.o"));
        ck_assert(!watch_glob_matches("build/*.o", "build/sub/x.o"));
        ck_assert(!watch_glob_matches("build/*.o", "src/build/x.o"));
        ck_assert(watch_glob_matches("tmp", "a/tmp/b"));
        ck_assert(!watch_glob_matches("tmp", "a/tmpx/b"));
        ck_assert(watch_ignored(globs, ARRAY_SIZE(globs), false, "x/y.log"));
        ck_assert(!watch_ignored(globs, ARRAY_SIZE(globs), false, "x/y.py"));
        ck_assert(watch_ignored(globs, ARRAY_SIZE(globs), true, ".git/HEAD"));
}
END_TEST

START_TEST(test_bounded_names) {
        char long_name[NAME_MAX + 2], long_path[PATH_MAX + 8];

        memset(long_name, 'a', sizeof long_name - 1);
        long_name[sizeof long_name - 1] = '\0';
        ck_assert(!watch_glob_matches("a*", long_name)); /* longer than NAME_MAX: never matched */
        ck_assert(watch_glob_matches("a*", "x/aa"));
        memset(long_path, 'b', sizeof long_path - 1);
        long_path[sizeof long_path - 1] = '\0';
        ck_assert(!watch_glob_matches("b*", long_path));
}
END_TEST

START_TEST(test_debounce) {
        const uint64_t ms = 1000, delay = 100 * ms;

        /* delay after the last change... */
        ck_assert_uint_eq(watch_due(0, 0, delay), 100 * ms);
        ck_assert_uint_eq(watch_due(0, 50 * ms, delay), 150 * ms);
        /* ...but no later than 1 s (or 10 delays) after the first. */
        ck_assert_uint_eq(watch_due(0, 950 * ms, delay), 1000 * ms);
        ck_assert_uint_eq(watch_due(0, 2000 * ms, delay), 2000 * ms);
        ck_assert_uint_eq(watch_due(0, 1000 * ms, 500 * ms), 1500 * ms);
        ck_assert_uint_eq(watch_due(0, 4900 * ms, 500 * ms), 5000 * ms);
        ck_assert_uint_eq(watch_due(7, 7, 0), 7);
}
END_TEST

/* ---- the watcher on a directory ------------------------------------------ */

static char root[256];
static unsigned calls;
static char last[PATH_MAX];

static void on_change(const char *changed, void *userdata) {
        calls++;
        snprintf(last, sizeof last, "%s", changed);
}

static void write_file(const char *rel, const char *text) {
        char path[PATH_MAX + 300];
        FILE *f;

        snprintf(path, sizeof path, "%s/%s", root, rel);
        f = fopen(path, "we");
        ck_assert_ptr_nonnull(f);
        fputs(text, f);
        fclose(f);
}

static void rename_over(const char *tmp, const char *rel) {
        char from[PATH_MAX + 300], to[PATH_MAX + 300];

        write_file(tmp, "new\n");
        snprintf(from, sizeof from, "%s/%s", root, tmp);
        snprintf(to, sizeof to, "%s/%s", root, rel);
        ck_assert_int_eq(rename(from, to), 0);
}

/* Dispatch for ms milliseconds (bounded), counting the callbacks. */
static unsigned run_for(struct loop *l, unsigned ms) {
        uint64_t end = now_usec() + ms * 1000ULL;
        unsigned before = calls;

        while (now_usec() < end)
                ck_assert_int_ge(loop_dispatch_once(l, (int) ((end - now_usec()) / 1000) + 1), 0);
        return calls - before;
}

static struct loop *start_watching(const char *const *paths, size_t n, struct watch **w) {
        static const char *const ignore[] = { "*.log" };
        struct watch_options o = { .paths = paths,
                                   .n_paths = n,
                                   .ignore = ignore,
                                   .n_ignore = 1,
                                   .ignore_defaults = true,
                                   .delay_usec = 50 * 1000 };
        const char *bad = NULL;
        struct loop *l;

        ck_assert_int_eq(loop_new(&l), 0);
        ck_assert_int_eq(watch_start(&o, l, on_change, NULL, w, &bad), 0);
        return l;
}

static void make_root(void) {
        snprintf(root, sizeof root, "%.200s/prebind-watch-XXXXXX", getenv("TMPDIR") ?: "/tmp");
        ck_assert_ptr_nonnull(mkdtemp(root));
        calls = 0;
}

static void remove_root(void) {
        char cmd[PATH_MAX + 16];

        snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
        ck_assert_int_eq(system(cmd), 0);
}

START_TEST(test_directory_changes) {
        const char *paths[] = { root };
        char path[PATH_MAX + 300];
        struct watch *w;
        struct loop *l;

        make_root();
        snprintf(path, sizeof path, "%s/.git", root);
        ck_assert_int_eq(mkdir(path, 0700), 0);
        l = start_watching(paths, 1, &w);

        write_file("app.py", "x\n"); /* a write in place */
        ck_assert_uint_eq(run_for(l, 300), 1);
        ck_assert(strstr(last, "/app.py"));
        rename_over(".app.py.swp", "app.py"); /* an editor's save */
        ck_assert_uint_eq(run_for(l, 300), 1);
        ck_assert(strstr(last, "/app.py"));
        snprintf(path, sizeof path, "%s/pkg", root); /* a new file in a new subdirectory */
        ck_assert_int_eq(mkdir(path, 0700), 0);
        write_file("pkg/mod.py", "y\n");
        ck_assert_uint_eq(run_for(l, 300), 1);
        write_file("pkg/mod.py", "z\n"); /* ...which is watched from then on */
        ck_assert_uint_eq(run_for(l, 300), 1);
        ck_assert(strstr(last, "/pkg/mod.py"));
        write_file(".git/index", "i\n"); /* ignored */
        write_file("server.log", "l\n");
        write_file("4913", "");
        ck_assert_uint_eq(run_for(l, 300), 0);
        for (int i = 0; i < 20; i++) /* a burst: one callback */
                write_file("app.py", "burst\n");
        ck_assert_uint_eq(run_for(l, 400), 1);

        watch_stop(w);
        loop_free(l);
        remove_root();
}
END_TEST

START_TEST(test_a_watched_file) {
        char file[PATH_MAX + 300];
        const char *paths[] = { file };
        struct watch *w;
        struct loop *l;

        make_root();
        snprintf(file, sizeof file, "%s/config.toml", root);
        write_file("config.toml", "a\n");
        l = start_watching(paths, 1, &w);
        write_file("other.txt", "b\n"); /* beside it: does not count */
        ck_assert_uint_eq(run_for(l, 300), 0);
        rename_over("config.toml.tmp", "config.toml"); /* renamed over: counts... */
        ck_assert_uint_eq(run_for(l, 300), 1);
        ck_assert_str_eq(last, file);
        rename_over("config.toml.tmp", "config.toml"); /* ...and again: the watch survived */
        ck_assert_uint_eq(run_for(l, 300), 1);
        watch_stop(w);
        loop_free(l);
        remove_root();
}
END_TEST

static void in_root(char *buf, size_t size, const char *rel) {
        snprintf(buf, size, "%s/%s", root, rel);
}

static void rename_in_root(const char *from, const char *to) {
        char a[PATH_MAX + 300], b[PATH_MAX + 300];

        in_root(a, sizeof a, from);
        in_root(b, sizeof b, to);
        ck_assert_int_eq(rename(a, b), 0);
}

static void mkdir_in_root(const char *rel) {
        char path[PATH_MAX + 300];

        in_root(path, sizeof path, rel);
        ck_assert_int_eq(mkdir(path, 0700), 0);
}

static void symlink_in_root(const char *target, const char *rel) {
        char path[PATH_MAX + 300];

        in_root(path, sizeof path, rel);
        ck_assert_int_eq(symlink(target, path), 0);
}

/* The path is followed, not the directory it first led to: renamed away
 * and made anew, or removed and made anew, the new one is watched and
 * the old one no longer counts. */
START_TEST(test_a_root_renamed_or_removed_and_made_anew) {
        char src[PATH_MAX + 300], cmd[PATH_MAX + 340];
        const char *paths[] = { src };
        struct watch *w;
        struct loop *l;

        make_root();
        in_root(src, sizeof src, "src");
        mkdir_in_root("src");
        l = start_watching(paths, 1, &w);
        write_file("src/a.py", "1\n");
        ck_assert_uint_eq(run_for(l, 300), 1);
        rename_in_root("src", "src.old");
        mkdir_in_root("src");
        ck_assert_uint_eq(run_for(l, 300), 1); /* the swap is a change */
        write_file("src.old/a.py", "2\n");     /* the old one: no longer counts */
        ck_assert_uint_eq(run_for(l, 300), 0);
        write_file("src/b.py", "3\n"); /* the new one does */
        ck_assert_uint_eq(run_for(l, 300), 1);
        ck_assert(strstr(last, "/src/b.py"));
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", src);
        ck_assert_int_eq(system(cmd), 0);
        ck_assert_uint_eq(run_for(l, 300), 1); /* gone: a change, seen while it is missing */
        mkdir_in_root("src");
        mkdir_in_root("src/pkg");
        ck_assert_uint_eq(run_for(l, 300), 1);
        write_file("src/pkg/c.py", "4\n"); /* removed and made anew: watched, below too */
        ck_assert_uint_eq(run_for(l, 300), 1);
        ck_assert(strstr(last, "/src/pkg/c.py"));
        write_file("src.old/a.py", "5\n");
        ck_assert_uint_eq(run_for(l, 300), 0);
        watch_stop(w);
        loop_free(l);
        remove_root();
}
END_TEST

/* A symbolic link to a file: a write to its target counts, wherever the
 * target is. */
START_TEST(test_a_symlinked_file) {
        char link[PATH_MAX + 300];
        const char *paths[] = { link };
        struct watch *w;
        struct loop *l;

        make_root();
        mkdir_in_root("etc");
        mkdir_in_root("data");
        write_file("data/app.conf", "a\n");
        symlink_in_root("../data/app.conf", "etc/app.conf");
        in_root(link, sizeof link, "etc/app.conf");
        l = start_watching(paths, 1, &w);
        write_file("data/other.conf", "b\n"); /* beside the target: does not count */
        ck_assert_uint_eq(run_for(l, 300), 0);
        write_file("data/app.conf", "c\n"); /* the target, written in place */
        ck_assert_uint_eq(run_for(l, 300), 1);
        ck_assert(strstr(last, "/data/app.conf"));
        watch_stop(w);
        loop_free(l);
        remove_root();
}
END_TEST

/* A Kubernetes ConfigMap volume: key -> ..data/key, ..data -> ..v1; an
 * update writes ..v2, points a new link at it and renames that over
 * ..data (atomic), then removes ..v1. */
START_TEST(test_a_configmap_data_swap) {
        char key[PATH_MAX + 300], cmd[PATH_MAX + 340];
        const char *paths[] = { key };
        struct watch *w;
        struct loop *l;

        make_root();
        mkdir_in_root("cfg");
        mkdir_in_root("cfg/..v1");
        write_file("cfg/..v1/key", "1\n");
        symlink_in_root("..v1", "cfg/..data");
        symlink_in_root("..data/key", "cfg/key");
        in_root(key, sizeof key, "cfg/key");
        l = start_watching(paths, 1, &w);
        mkdir_in_root("cfg/..v2");
        write_file("cfg/..v2/key", "2\n"); /* not yet what key leads to */
        ck_assert_uint_eq(run_for(l, 300), 0);
        symlink_in_root("..v2", "cfg/..data_tmp");
        rename_in_root("cfg/..data_tmp", "cfg/..data");
        snprintf(cmd, sizeof cmd, "rm -rf '%s/cfg/..v1'", root);
        ck_assert_int_eq(system(cmd), 0);
        ck_assert_uint_eq(run_for(l, 300), 1);
        write_file("cfg/..v2/key", "3\n"); /* what key leads to now */
        ck_assert_uint_eq(run_for(l, 300), 1);
        watch_stop(w);
        loop_free(l);
        remove_root();
}
END_TEST

START_TEST(test_a_missing_path_fails) {
        const char *paths[] = { "/nonexistent/prebind-watch" };
        struct watch_options o = { .paths = paths, .n_paths = 1, .delay_usec = 1000 };
        const char *bad = NULL;
        struct watch *w = NULL;
        struct loop *l;

        ck_assert_int_eq(loop_new(&l), 0);
        ck_assert_int_eq(watch_start(&o, l, on_change, NULL, &w, &bad), -ENOENT);
        ck_assert_str_eq(bad, paths[0]);
        loop_free(l);
}
END_TEST

int main(void) {
        Suite *s = suite_create("watch");
        TCase *rules = tcase_create("rules"), *watcher = tcase_create("watcher");

        tcase_add_test(rules, test_defaults);
        tcase_add_test(rules, test_globs);
        tcase_add_test(rules, test_bounded_names);
        tcase_add_test(rules, test_debounce);
        suite_add_tcase(s, rules);
        tcase_set_timeout(watcher, 30);
        tcase_add_test(watcher, test_directory_changes);
        tcase_add_test(watcher, test_a_watched_file);
        tcase_add_test(watcher, test_a_root_renamed_or_removed_and_made_anew);
        tcase_add_test(watcher, test_a_symlinked_file);
        tcase_add_test(watcher, test_a_configmap_data_swap);
        tcase_add_test(watcher, test_a_missing_path_fails);
        suite_add_tcase(s, watcher);
        return unit_run(s);
}
