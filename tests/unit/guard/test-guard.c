/* SPDX-License-Identifier: MIT */
/* The guard (guard.c) with real processes: a guard that is told prebind
 * exits cleanly leaves COMMAND and the files alone; one whose prebind dies
 * without a word stops COMMAND (SIGTERM, SIGKILL after the grace) and
 * removes the files prebind made, or was about to make at a name of its
 * own. "prebind" is a forked child of the test, which is the subreaper
 * that COMMAND comes back to: its status says which signal ended it.
 * Every wait is bounded (5 s). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "guard.h"
#include "unit.h"

#define WAIT_STEPS 1000 /* of 5 ms: 5 s */

/* COMMAND: sleep 30, exec'd (the guard's socket is close-on-exec,
 * as in prebind's COMMAND), ignoring SIGTERM if asked. */
static pid_t start_command(bool ignore_term) {
        pid_t pid = unit_fork();

        if (pid == 0) {
                unit_default_signals();
                if (ignore_term)
                        signal(SIGTERM, SIG_IGN);
                execl("/bin/sleep", "sleep", "30", (char *) NULL);
                _exit(127);
        }
        return pid;
}

static int make_file(const char *path) {
        int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

        ck_assert_int_ge(fd, 0);
        return fd;
}

static bool exists(const char *path) {
        struct stat st;

        return lstat(path, &st) == 0;
}

/* Wait (bounded) until path is gone. */
static bool gone_in_time(const char *path) {
        for (int i = 0; i < WAIT_STEPS && exists(path); i++)
                usleep(5000);
        return !exists(path);
}

START_TEST(test_no_guard_is_a_no_op) {
        unit_dir_make();
        guard_watch(NULL, getpid(), -1, false);
        guard_unwatch(NULL, getpid());
        guard_file_expected(NULL, GUARD_FILE_REGULAR, unit_path("f"));
        guard_file_created(NULL, GUARD_FILE_REGULAR, unit_path("f"), -1);
        guard_file_created_at(NULL, GUARD_FILE_SOCKET, unit_path("f"), 0, 0);
        guard_file_forget(NULL, unit_path("f"));
        guard_free(NULL);
        unit_dir_remove();
}
END_TEST

/* guard_free(): the guard exits doing nothing, and is gone when it
 * returns. */
START_TEST(test_clean_exit_leaves_command_and_files) {
        struct guard *g = NULL;
        pid_t command;
        int fd, status;

        unit_dir_make();
        ck_assert_int_eq(guard_start("sleep", 5000000, &g), 0);
        ck_assert_ptr_nonnull(g);
        command = start_command(false);
        fd = make_file(unit_path("port"));
        guard_watch(g, command, -1, false);
        guard_file_created(g, GUARD_FILE_REGULAR, unit_path("port"), fd);
        close(fd);
        guard_free(g);

        ck_assert(exists(unit_path("port")));
        ck_assert_int_eq(waitpid(command, &status, WNOHANG), 0);
        kill(command, SIGKILL);
        status = unit_wait_bounded(command);
        ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        unit_dir_remove();
}
END_TEST

/* A prebind that dies without guard_free(): it starts the guard and
 * COMMAND, tells the guard of both and of two files, writes COMMAND's pid
 * to report, and exits. */
static _Noreturn void prebind_dies(int report, bool ignore_term, uint64_t grace_usec) {
        struct guard *g = NULL;
        pid_t command;
        int fd;

        unit_default_signals();
        if (guard_start("sleep", grace_usec, &g) < 0)
                _exit(2);
        command = start_command(ignore_term);
        guard_watch(g, command, (int) syscall(SYS_pidfd_open, command, 0), false);
        /* Made and told: the port file. */
        fd = make_file(unit_path("port"));
        guard_file_created(g, GUARD_FILE_REGULAR, unit_path("port"), fd);
        /* Expected only, a temporary name of prebind's: dead before it
         * said what it made there. */
        guard_file_expected(g, GUARD_FILE_REGULAR, unit_path("port.tmp"));
        (void) make_file(unit_path("port.tmp"));
        if (write(report, &command, sizeof command) != sizeof command)
                _exit(3);
        _exit(0);
}

/* COMMAND's wait status once its prebind has died, and the files gone. */
static int command_after_prebind_died(bool ignore_term, uint64_t grace_usec) {
        pid_t prebind, command = 0;
        int p[2], status;

        unit_dir_make();
        ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
        ck_assert_int_eq(pipe(p), 0);
        prebind = unit_fork();
        if (prebind == 0) {
                close(p[0]);
                prebind_dies(p[1], ignore_term, grace_usec);
        }
        close(p[1]);
        ck_assert_int_eq(read(p[0], &command, sizeof command), sizeof command);
        close(p[0]);
        status = unit_wait_bounded(prebind);
        ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);

        /* COMMAND came back to the test (the subreaper). */
        status = unit_wait_bounded(command);
        ck_assert(gone_in_time(unit_path("port")));
        ck_assert(gone_in_time(unit_path("port.tmp")));
        /* As CK_FORK=no needs: the process as it was. */
        ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 0), 0);
        unit_dir_remove();
        return status;
}

START_TEST(test_killed_prebind_stops_command_and_removes_files) {
        int status = command_after_prebind_died(false, 5000000);

        ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
}
END_TEST

/* SIGTERM ignored: SIGKILL once the grace is over. */
START_TEST(test_killed_prebind_kills_command_after_grace) {
        int status = command_after_prebind_died(true, 100000);

        ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}
END_TEST

/* Every generation alive is watched: a prebind that watched three
 * COMMANDs (one replaced and ignoring SIGTERM, one serving) and unwatched
 * the third dies; the guard stops the two, and leaves the third alone. */
static _Noreturn void prebind_with_generations_dies(int report) {
        struct guard *g = NULL;
        pid_t command[3];

        unit_default_signals();
        if (guard_start("sleep", 100000, &g) < 0)
                _exit(2);
        for (int i = 0; i < 3; i++) {
                command[i] = start_command(i == 0);
                guard_watch(g, command[i], (int) syscall(SYS_pidfd_open, command[i], 0), false);
        }
        guard_unwatch(g, command[2]);
        if (write(report, command, sizeof command) != sizeof command)
                _exit(3);
        _exit(0);
}

START_TEST(test_killed_prebind_stops_every_generation_watched) {
        pid_t prebind, command[3] = { 0 };
        int p[2], status;

        ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
        ck_assert_int_eq(pipe(p), 0);
        prebind = unit_fork();
        if (prebind == 0) {
                close(p[0]);
                prebind_with_generations_dies(p[1]);
        }
        close(p[1]);
        ck_assert_int_eq(read(p[0], command, sizeof command), sizeof command);
        close(p[0]);
        status = unit_wait_bounded(prebind);
        ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);

        status = unit_wait_bounded(command[0]);
        ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        status = unit_wait_bounded(command[1]);
        ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
        ck_assert_int_eq(waitpid(command[2], &status, WNOHANG), 0);
        kill(command[2], SIGKILL);
        status = unit_wait_bounded(command[2]);
        ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 0), 0);
}
END_TEST

/* A unix socket file at path, bound by a socket that is then closed:
 * the file stays, as a killed prebind's does. */
static void make_socket_file(const char *path, struct stat *ret) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

        ck_assert_int_ge(fd, 0);
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
        ck_assert_int_eq(bind(fd, (struct sockaddr *) &sa, sizeof sa), 0);
        close(fd);
        ck_assert_int_eq(lstat(path, ret), 0);
}

/* A prebind that made name.sock under the lock name.lock (made by the
 * test), and dies holding the lock unless the test holds it: its guard
 * takes both back, under the lock. */
static _Noreturn void prebind_dies_locked(bool lock_it) {
        struct guard *g = NULL;
        struct stat st;
        int lock = open(unit_path("name.lock"), O_RDWR | O_CLOEXEC);

        unit_default_signals();
        if (lock < 0 || guard_start("sleep", 100000, &g) < 0)
                _exit(2);
        if (lock_it && flock(lock, LOCK_EX) < 0)
                _exit(3);
        make_socket_file(unit_path("name.sock"), &st);
        guard_file_created_at(g, GUARD_FILE_SOCKET, unit_path("name.sock"), st.st_dev, st.st_ino);
        guard_file_created(g, GUARD_FILE_LOCK, unit_path("name.lock"), lock);
        _exit(0);
}

/* With held, the test holds the lock when prebind dies, and meanwhile
 * puts a new owner's name.sock in place: the guard waits for the lock,
 * then leaves the new socket file and the lock file that claims it. */
static void lock_file_after_prebind_died(bool held) {
        struct stat st;
        pid_t prebind;
        int lock, status;

        unit_dir_make();
        lock = make_file(unit_path("name.lock"));
        if (held)
                ck_assert_int_eq(flock(lock, LOCK_EX), 0);
        prebind = unit_fork();
        if (prebind == 0)
                prebind_dies_locked(!held);
        status = unit_wait_bounded(prebind);
        ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        if (held) {
                /* Not within the guard's wait for the lock (2 s). */
                usleep(100000);
                ck_assert(exists(unit_path("name.sock")));
                ck_assert_int_eq(unlink(unit_path("name.sock")), 0);
                make_socket_file(unit_path("name.sock"), &st);
                ck_assert_int_eq(flock(lock, LOCK_UN), 0);
                usleep(200000);
                ck_assert(exists(unit_path("name.sock")));
                ck_assert(exists(unit_path("name.lock")));
                unlink(unit_path("name.sock"));
                unlink(unit_path("name.lock"));
        } else {
                ck_assert(gone_in_time(unit_path("name.sock")));
                ck_assert(gone_in_time(unit_path("name.lock")));
        }
        close(lock);
        unit_dir_remove();
}

START_TEST(test_killed_prebind_removes_socket_and_lock_under_the_lock) {
        lock_file_after_prebind_died(false);
        lock_file_after_prebind_died(true);
}
END_TEST

static Suite *guard_suite(void) {
        Suite *s = suite_create("guard");
        TCase *tc = tcase_create("lifecycle");

        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, test_no_guard_is_a_no_op);
        tcase_add_test(tc, test_clean_exit_leaves_command_and_files);
        tcase_add_test(tc, test_killed_prebind_stops_command_and_removes_files);
        tcase_add_test(tc, test_killed_prebind_kills_command_after_grace);
        tcase_add_test(tc, test_killed_prebind_stops_every_generation_watched);
        tcase_add_test(tc, test_killed_prebind_removes_socket_and_lock_under_the_lock);
        suite_add_tcase(s, tc);
        return s;
}

int main(void) {
        return unit_run(guard_suite());
}
