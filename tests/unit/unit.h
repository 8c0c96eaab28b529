/* SPDX-License-Identifier: MIT */
/* What the unit suites share: running a Suite, and the children some of
 * them fork. Header-only, so each suite stays one file and one
 * executable. */
#pragma once

#include <check.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Run every test of s and return main()'s exit status. Each test runs in
 * check's own forked process, except under .ci/analyze's valgrind step
 * (CK_FORK=no): a test then restores what it changed in the process
 * (environment, umask, signals, limits, cwd) and leaves no fd open.
 * CK_VERBOSITY sets the detail. */
static inline int unit_run(Suite *s) {
        SRunner *sr = srunner_create(s);
        int failed;

        srunner_run_all(sr, CK_ENV);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* Under .ci/analyze's valgrind step (its wrapper needs this variable).
 * Valgrind keeps an fd limit of its own: what accept(2) returns at or
 * above it, it closes and calls EMFILE, so a connection is lost where a
 * kernel would leave it in the backlog. Tests of running out of fds have
 * nothing to test there. */
static inline bool unit_under_valgrind(void) {
        return getenv("PREBIND_VALGRIND_LOGS") != NULL;
}

/* check's forked test process handles SIGTERM and SIGINT by killing its
 * whole process group: a child the test forks must not inherit that. */
static inline void unit_default_signals(void) {
        signal(SIGTERM, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        signal(SIGALRM, SIG_DFL);
}

/* Fork a child that runs code under test and reports through its exit
 * status. stdio is flushed first, so that the child's exit() repeats no
 * output: exit(), not _exit(), writes the line counts of a coverage build
 * (.ci/coverage). */
static inline pid_t unit_fork(void) {
        pid_t pid;

        fflush(NULL);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        return pid;
}

/* Wait for pid within about 10 s (SIGKILL and fail after that: a child
 * forked under valgrind is slow); returns its raw wait status. */
static inline int unit_wait_bounded(pid_t pid) {
        int status;

        for (int i = 0; i < 2000; i++) {
                pid_t k = waitpid(pid, &status, WNOHANG);

                ck_assert_int_ge(k, 0);
                if (k == pid)
                        return status;
                usleep(5000);
        }
        kill(pid, SIGKILL);
        ck_abort_msg("pid %d did not exit in time", (int) pid);
        return -1;
}

/* Runs children[i] in a forked child, which exits 0 when its checks hold
 * (another status names the one that failed); fails the test otherwise,
 * or if it does not end in time. For the cases that change the process
 * (its fds, its stderr) with a loop test over an array of them. */
static inline void unit_child_passes(void (*const children[])(void), int i) {
        pid_t pid = unit_fork();
        int status;

        if (pid == 0) {
                children[i]();
                exit(0);
        }
        status = unit_wait_bounded(pid);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "case %d: status %#x", i, status);
}

/* A scratch directory for one test: unit_dir_make() (a fixture's setup)
 * creates it under /tmp, unit_dir_remove() (its teardown) removes it with
 * all it holds; unit_path() names a file in it (the last four names
 * stay valid). */
static char unit_dir[64] __attribute__((unused));

static inline void unit_dir_make(void) {
        strcpy(unit_dir, "/tmp/prebind-unit-XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(unit_dir));
}

static inline void unit_dir_remove(void) {
        char cmd[128];

        snprintf(cmd, sizeof cmd, "rm -rf '%s'", unit_dir);
        (void) !system(cmd);
}

static inline char *unit_path(const char *name) {
        static char paths[4][128];
        static int next;
        char *p = paths[next++ % 4];

        snprintf(p, sizeof paths[0], "%s/%s", unit_dir, name);
        return p;
}

/* An argv to hand a parser, its strings kept in it: words added one at
 * a time (unit_argv_add) or split at spaces (unit_argv_add_words);
 * NULL-terminated. Zeroed to start. */
struct unit_argv {
        int argc;
        char *argv[64];
        char text[2048];
        size_t used;
};

static inline void unit_argv_add(struct unit_argv *a, const char *word) {
        size_t len = strlen(word) + 1;

        ck_assert_uint_lt((size_t) a->argc + 1, ARRAY_SIZE(a->argv));
        ck_assert_uint_le(a->used + len, sizeof a->text);
        a->argv[a->argc++] = memcpy(a->text + a->used, word, len);
        a->argv[a->argc] = NULL;
        a->used += len;
}

/* "-l 0 --ready": "-l", "0", "--ready" (no quoting: a word with a space
 * is added alone). */
static inline void unit_argv_add_words(struct unit_argv *a, const char *words) {
        char word[256];

        for (const char *p = words; *p;) {
                size_t len = strcspn(p, " ");

                if (len > 0) {
                        ck_assert_uint_lt(len, sizeof word);
                        memcpy(word, p, len);
                        word[len] = '\0';
                        unit_argv_add(a, word);
                }
                p += len + (p[len] == ' ');
        }
}
