/* SPDX-License-Identifier: MIT */
/* Processes (process.c) with real, short-lived children: the exit status
 * a shell would report, reaping without waiting, signalling one process
 * or its group, and the descent check that decides whose READY=1 or
 * socket claim counts: by pidfd, a process that is reaped counts no more.
 * Each test runs in check's own forked process, so its children are its
 * own; every wait is bounded. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "exitcode.h"
#include "process.h"
#include "unit.h"

/* A child that exits with code at once. */
static pid_t child_exiting(int code) {
        pid_t pid = fork();

        ck_assert_int_ge(pid, 0);
        if (pid == 0)
                _exit(code);
        return pid;
}

/* A child that waits (at most 10 s) to be signalled; returns once it
 * has its signals (and group) set up. */
static pid_t child_waiting(bool own_group) {
        int p[2];
        pid_t pid;
        char c;

        ck_assert_int_eq(pipe(p), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                unit_default_signals();
                if (own_group)
                        setpgid(0, 0);
                close(p[0]);
                (void) !write(p[1], "x", 1);
                close(p[1]);
                for (int i = 0; i < 100; i++)
                        usleep(100000);
                _exit(99);
        }
        if (own_group)
                setpgid(pid, pid);
        close(p[1]);
        ck_assert_int_eq(read(p[0], &c, 1), 1);
        close(p[0]);
        return pid;
}

/* ---- exit statuses -------------------------------------------------------- */

START_TEST(test_exit_codes) {
        int codes[] = { 0, 1, 2, 42, 125, 126, 127, 128, 255 };

        for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
                pid_t pid = child_exiting(codes[i]);
                ck_assert_int_eq(exit_status_of(unit_wait_bounded(pid)), codes[i]);
        }
}
END_TEST

START_TEST(test_killed_by_signal_is_128_plus) {
        int sigs[] = { SIGTERM, SIGKILL, SIGINT, SIGUSR1 };

        for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
                pid_t pid = child_waiting(false);
                ck_assert_int_eq(kill(pid, sigs[i]), 0);
                ck_assert_int_eq(exit_status_of(unit_wait_bounded(pid)), 128 + sigs[i]);
        }
}
END_TEST

START_TEST(test_synthetic_statuses) {
        /* The encoding of wait(2), without processes: exited, signalled,
         * and a stopped child, which is neither (prebind's own failure). */
        ck_assert_int_eq(exit_status_of(3 << 8), 3);
        ck_assert_int_eq(exit_status_of(SIGSEGV), 128 + SIGSEGV);
        ck_assert_int_eq(exit_status_of(SIGSEGV | 0x80), 128 + SIGSEGV); /* core dumped */
        ck_assert_int_eq(exit_status_of((SIGSTOP << 8) | 0x7f), EXIT_PREBIND_FAILED);
}
END_TEST

/* ---- reaping -------------------------------------------------------------- */

START_TEST(test_reap_one_without_children_is_echild) {
        pid_t pid = 12345;
        int status = 7;

        ck_assert_int_eq(reap_one(&pid, &status), -ECHILD);
        ck_assert_int_eq(pid, 12345);
        ck_assert_int_eq(status, 7);
}
END_TEST

START_TEST(test_reap_one_with_a_live_child_is_0) {
        pid_t child = child_waiting(false), pid = 0;
        int status = -1;

        ck_assert_int_eq(reap_one(&pid, &status), 0);
        ck_assert_int_eq(pid, 0);
        kill(child, SIGKILL);
        unit_wait_bounded(child);
}
END_TEST

START_TEST(test_reap_one_reaps_each_exited_child) {
        pid_t a = child_exiting(3), b = child_exiting(4), pid;
        int status, got = 0, r = 0;
        bool seen_a = false, seen_b = false;

        /* Bounded: both exit at once; 2 s at most. */
        for (int i = 0; i < 400 && got < 2; i++) {
                r = reap_one(&pid, &status);
                ck_assert_int_ge(r, 0);
                if (r == 0) {
                        usleep(5000);
                        continue;
                }
                got++;
                if (pid == a) {
                        ck_assert_int_eq(status, 3);
                        seen_a = true;
                } else {
                        ck_assert_int_eq(pid, b);
                        ck_assert_int_eq(status, 4);
                        seen_b = true;
                }
        }
        ck_assert(seen_a && seen_b);
        ck_assert_int_eq(reap_one(&pid, &status), -ECHILD);
}
END_TEST

/* ---- signals -------------------------------------------------------------- */

START_TEST(test_signal_pid_0_and_negative_are_no_ops) {
        /* kill(0) would reach our own group: this process would die of
         * SIGTERM and the test would fail. */
        ck_assert_int_eq(signal_process(0, false, SIGTERM), 0);
        ck_assert_int_eq(signal_process(0, true, SIGTERM), 0);
        ck_assert_int_eq(signal_process(-1, false, SIGTERM), 0);
        ck_assert_int_eq(signal_process(-getpid(), true, SIGTERM), 0);
}
END_TEST

START_TEST(test_signal_one_process) {
        pid_t pid = child_waiting(false);
        int status;

        ck_assert_int_eq(signal_process(pid, false, SIGUSR2), 0);
        status = unit_wait_bounded(pid);
        ck_assert(WIFSIGNALED(status));
        ck_assert_int_eq(WTERMSIG(status), SIGUSR2);
        /* Gone (reaped): ESRCH is not an error. */
        ck_assert_int_eq(signal_process(pid, false, SIGTERM), 0);
}
END_TEST

START_TEST(test_signal_group_reaches_every_member) {
        pid_t leader = child_waiting(true), member;
        int p[2], status;
        char c;

        /* A second process in the leader's group, not its child. */
        ck_assert_int_eq(pipe(p), 0);
        member = fork();
        ck_assert_int_ge(member, 0);
        if (member == 0) {
                unit_default_signals();
                setpgid(0, leader);
                (void) !write(p[1], "x", 1);
                for (int i = 0; i < 100; i++)
                        usleep(100000);
                _exit(99);
        }
        close(p[1]);
        ck_assert_int_eq(read(p[0], &c, 1), 1);
        close(p[0]);
        ck_assert_int_eq(getpgid(member), leader);

        ck_assert_int_eq(signal_process(leader, true, SIGTERM), 0);
        status = unit_wait_bounded(member);
        ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
        status = unit_wait_bounded(leader);
        ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
        /* A group that no longer exists. */
        ck_assert_int_eq(signal_process(leader, true, SIGTERM), 0);
}
END_TEST

START_TEST(test_signal_group_does_not_reach_others) {
        pid_t leader = child_waiting(true), outsider = child_waiting(false);
        int status;

        ck_assert_int_eq(signal_process(leader, true, SIGKILL), 0);
        unit_wait_bounded(leader);
        /* The outsider, in our group, is still there. */
        ck_assert_int_eq(waitpid(outsider, &status, WNOHANG), 0);
        kill(outsider, SIGKILL);
        unit_wait_bounded(outsider);
}
END_TEST

START_TEST(test_signal_permission_error_is_returned) {
        /* Only an unprivileged user gets EPERM from pid 1; as root the
         * signal 0 is simply allowed. */
        int r = signal_process(1, false, 0);

        if (geteuid() == 0)
                ck_assert_int_eq(r, 0);
        else
                ck_assert_int_eq(r, -EPERM);
        ck_assert_int_eq(signal_process(getpid(), false, 1000), -EINVAL);
}
END_TEST

/* ---- pidfd ---------------------------------------------------------------- */

/* open_pidfd(): a close-on-exec pidfd of a live process; -ESRCH once it
 * is reaped; -ENOSYS alone where pidfd_open() is missing. */
START_TEST(test_open_pidfd) {
        pid_t child = child_exiting(0);
        int fd = open_pidfd(getpid());

        if (fd == -ENOSYS) {
                /* No pidfd_open() (valgrind before 3.20): nothing to test. */
                unit_wait_bounded(child);
                return;
        }
        ck_assert_int_ge(fd, 0);
        ck_assert_int_ne(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
        close(fd);
        unit_wait_bounded(child);
        ck_assert_int_eq(open_pidfd(child), -ESRCH);
        ck_assert_int_eq(open_pidfd(-1), -EINVAL);
}
END_TEST

/* ---- descent -------------------------------------------------------------- */

/* The check on a pid number, as it is made where the kernel has no
 * SO_PEERPIDFD: pidfd_open() of the number, now. */
static bool descends(pid_t pid, pid_t root) {
        struct peer p;
        bool yes;

        peer_init(&p, pid, getuid(), getgid(), -ENOPROTOOPT);
        yes = peer_descends_from(&p, root);
        peer_done(&p);
        ck_assert_int_eq(p.pidfd, -1);
        return yes;
}

START_TEST(test_descends_self_and_child) {
        pid_t child = child_waiting(false);

        ck_assert(descends(getpid(), getpid()));
        ck_assert(descends(child, getpid()));
        ck_assert(descends(child, child));
        /* Not the other way round. */
        ck_assert(!descends(getpid(), child));
        kill(child, SIGKILL);
        unit_wait_bounded(child);
}
END_TEST

START_TEST(test_descends_grandchild) {
        int p[2];
        pid_t child, grandchild;

        ck_assert_int_eq(pipe(p), 0);
        child = fork();
        ck_assert_int_ge(child, 0);
        if (child == 0) {
                pid_t g = fork();

                if (g == 0) {
                        for (int i = 0; i < 100; i++)
                                usleep(100000);
                        _exit(0);
                }
                (void) !write(p[1], &g, sizeof g);
                waitpid(g, NULL, 0);
                _exit(0);
        }
        close(p[1]);
        ck_assert_int_eq(read(p[0], &grandchild, sizeof grandchild), (ssize_t) sizeof grandchild);
        close(p[0]);
        ck_assert(descends(grandchild, child));
        ck_assert(descends(grandchild, getpid()));
        ck_assert(!descends(child, grandchild));
        kill(grandchild, SIGKILL);
        unit_wait_bounded(child);
}
END_TEST

START_TEST(test_descends_unrelated_and_pid_1) {
        pid_t a = child_waiting(false), b = child_waiting(false);

        /* Siblings are unrelated. */
        ck_assert(!descends(a, b));
        ck_assert(!descends(b, a));
        /* The walk stops at pid 1 without claiming it: nobody descends
         * from 1 in prebind's sense, and 1 descends from nobody. */
        ck_assert(!descends(getpid(), 1));
        ck_assert(!descends(1, getpid()));
        ck_assert(!descends(1, 1));
        ck_assert(!descends(0, getpid()));
        /* A pid that does not exist. */
        ck_assert(!descends(a, 0));
        kill(a, SIGKILL);
        kill(b, SIGKILL);
        unit_wait_bounded(a);
        unit_wait_bounded(b);
        ck_assert(!descends(a, getpid()));
}
END_TEST

START_TEST(test_descends_not_fooled_by_a_name) {
        pid_t root = child_waiting(false), spoofer;
        int p[2];
        char c;

        /* A process's name (comm) is its own to choose and may hold ')'
         * and a newline: "x) S <root>\n" makes the first line of its
         * /proc/PID/stat read as if root were its parent. */
        ck_assert_int_eq(pipe(p), 0);
        spoofer = fork();
        ck_assert_int_ge(spoofer, 0);
        if (spoofer == 0) {
                char name[16];

                unit_default_signals();
                snprintf(name, sizeof name, "x) S %d\n", (int) root);
                prctl(PR_SET_NAME, name, 0, 0, 0);
                (void) !write(p[1], "x", 1);
                for (int i = 0; i < 100; i++)
                        usleep(100000);
                _exit(0);
        }
        close(p[1]);
        ck_assert_int_eq(read(p[0], &c, 1), 1);
        close(p[0]);
        ck_assert(!descends(spoofer, root));
        /* Its real parent is still found past the name. */
        ck_assert(descends(spoofer, getpid()));
        kill(spoofer, SIGKILL);
        kill(root, SIGKILL);
        unit_wait_bounded(spoofer);
        unit_wait_bounded(root);
}
END_TEST

/* A pidfd is the process, not its number (issue 19): a zombie still has
 * its number and passes; once reaped, its pidfd has none, and the check
 * fails, even against root's own number, which the next process forked
 * may get. */
START_TEST(test_peer_reaped_is_nobody) {
        pid_t child = child_waiting(false);
        struct peer p;
        siginfo_t info = { 0 };

        peer_init(&p, child, getuid(), getgid(), -ENOPROTOOPT);
        if (p.by_number) {
                /* No pidfd_open() (valgrind before 3.20): nothing to test. */
                kill(child, SIGKILL);
                unit_wait_bounded(child);
                return;
        }
        ck_assert_int_ge(p.pidfd, 0);
        ck_assert(!peer_exited(&p));
        ck_assert(peer_descends_from(&p, getpid()));
        ck_assert_int_eq(kill(child, SIGKILL), 0);
        ck_assert_int_eq(waitid(P_PID, (id_t) child, &info, WEXITED | WNOWAIT), 0);
        ck_assert(peer_exited(&p));               /* a zombie: exited… */
        ck_assert(peer_descends_from(&p, child)); /* …and still itself */
        ck_assert(peer_descends_from(&p, getpid()));
        unit_wait_bounded(child);
        ck_assert(peer_exited(&p));
        ck_assert(!peer_descends_from(&p, child));
        ck_assert(!peer_descends_from(&p, getpid()));
        peer_done(&p);
        peer_done(&p); /* twice is harmless */
}
END_TEST

START_TEST(test_peer_gone_before_it_was_pinned) {
        struct peer p;

        /* SO_PEERPIDFD or SCM_PIDFD failed: the sender was gone. */
        peer_init(&p, getpid(), getuid(), getgid(), -ESRCH);
        ck_assert_int_eq(p.pidfd, -1);
        ck_assert(peer_exited(&p));
        ck_assert(!peer_descends_from(&p, getpid()));
        /* A pid that is nobody's. */
        peer_init(&p, 0, getuid(), getgid(), -ENOPROTOOPT);
        ck_assert_int_eq(p.pidfd, -1);
        ck_assert(!peer_descends_from(&p, getpid()));
        p = PEER_NONE;
        ck_assert(peer_exited(&p));
        peer_done(&p);
}
END_TEST

START_TEST(test_peer_ids_must_be_its_own) {
        struct peer p;

        /* Ids the process does not have: its number was reused by
         * another user's process, or it changed them. */
        peer_init(&p, getpid(), getuid() + 1, getgid(), -ENOPROTOOPT);
        ck_assert(!peer_descends_from(&p, getpid()));
        peer_done(&p);
        peer_init(&p, getpid(), getuid(), getgid() + 1, -ENOPROTOOPT);
        ck_assert(!peer_descends_from(&p, getpid()));
        peer_done(&p);
        peer_init(&p, getpid(), getuid(), getgid(), -ENOPROTOOPT);
        ck_assert(peer_descends_from(&p, getpid()));
        peer_done(&p);
}
END_TEST

int main(void) {
        Suite *s = suite_create("process");
        TCase *status = tcase_create("exit-status"), *reap = tcase_create("reap"), *sig = tcase_create("signal"),
              *pidfd = tcase_create("pidfd"), *descent = tcase_create("descent");

        tcase_add_test(status, test_exit_codes);
        tcase_add_test(status, test_killed_by_signal_is_128_plus);
        tcase_add_test(status, test_synthetic_statuses);
        suite_add_tcase(s, status);
        tcase_add_test(reap, test_reap_one_without_children_is_echild);
        tcase_add_test(reap, test_reap_one_with_a_live_child_is_0);
        tcase_add_test(reap, test_reap_one_reaps_each_exited_child);
        suite_add_tcase(s, reap);
        tcase_add_test(sig, test_signal_pid_0_and_negative_are_no_ops);
        tcase_add_test(sig, test_signal_one_process);
        tcase_add_test(sig, test_signal_group_reaches_every_member);
        tcase_add_test(sig, test_signal_group_does_not_reach_others);
        tcase_add_test(sig, test_signal_permission_error_is_returned);
        suite_add_tcase(s, sig);
        tcase_add_test(pidfd, test_open_pidfd);
        suite_add_tcase(s, pidfd);
        tcase_add_test(descent, test_descends_self_and_child);
        tcase_add_test(descent, test_descends_grandchild);
        tcase_add_test(descent, test_descends_unrelated_and_pid_1);
        tcase_add_test(descent, test_descends_not_fooled_by_a_name);
        tcase_add_test(descent, test_peer_reaped_is_nobody);
        tcase_add_test(descent, test_peer_gone_before_it_was_pinned);
        tcase_add_test(descent, test_peer_ids_must_be_its_own);
        suite_add_tcase(s, descent);
        return unit_run(s);
}
