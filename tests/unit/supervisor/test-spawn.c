/* SPDX-License-Identifier: MIT */
/* Starting COMMAND (spawn.c) with real, short-lived children (/bin/sh
 * scripts that look at their own fds, environment and signal state):
 * command_resolve() along PATH, exec_error_to_status(), the trial exec
 * and the gate of spawn_child()/spawn_check()/spawn_release()/
 * spawn_abandon(), the fd layout of each
 * passing mode (sockets at 3… without FD_CLOEXEC, every other fd closed
 * on exec), spawn_connection() and the --exec path. Every wait is
 * bounded. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exitcode.h"
#include "process.h"
#include "spawn.h"
#include "unit.h"

/* argv and envp vectors written as string literals: execve(2) takes
 * char *const[], and nothing here writes to them. */
#if defined(__clang__)
#pragma clang diagnostic ignored "-Wincompatible-pointer-types-discards-qualifiers"
#else
#pragma GCC diagnostic ignored "-Wdiscarded-qualifiers"
#endif

static void make_file(const char *path, mode_t mode) {
        FILE *f = fopen(path, "we");

        ck_assert_ptr_nonnull(f);
        fputs("#!/bin/sh\nexit 0\n", f);
        fclose(f);
        ck_assert_int_eq(chmod(path, mode), 0);
}

/* ---- command_resolve ------------------------------------------------------- */

START_TEST(test_resolve_along_path) {
        char *a = unit_path("a"), *b = unit_path("b"), *found = NULL, path_env[300], prog[160];
        char *envp[] = { path_env, NULL };

        ck_assert_int_eq(mkdir(a, 0755), 0);
        ck_assert_int_eq(mkdir(b, 0755), 0);
        snprintf(prog, sizeof prog, "%s/prog", a);
        make_file(prog, 0644); /* found first, not executable */
        snprintf(prog, sizeof prog, "%s/prog", b);
        make_file(prog, 0755);
        snprintf(path_env, sizeof path_env, "PATH=/nonexistent:%s:%s", a, b);
        ck_assert_int_eq(command_resolve("prog", envp, &found), 0);
        ck_assert_str_eq(found, prog);
        free(found);

        /* Only the non-executable one: found, cannot run (126). */
        snprintf(path_env, sizeof path_env, "PATH=%s", a);
        ck_assert_int_eq(command_resolve("prog", envp, &found), -EACCES);
        /* A directory of that name is not a command either. */
        snprintf(prog, sizeof prog, "%s/sub", a);
        ck_assert_int_eq(mkdir(prog, 0755), 0);
        ck_assert_int_eq(command_resolve("sub", envp, &found), -EACCES);
        /* Nowhere: 127. */
        ck_assert_int_eq(command_resolve("no-such-command-here", envp, &found), -ENOENT);
}
END_TEST

START_TEST(test_resolve_default_and_empty_path) {
        char *found = NULL, *no_path[] = { "HOME=/", NULL }, empty_elem[160], *envp[] = { empty_elem, NULL };
        int cwd;

        /* Without PATH: execvp(3)'s default list. */
        ck_assert_int_eq(command_resolve("sh", no_path, &found), 0);
        ck_assert_int_eq(access(found, X_OK), 0);
        ck_assert_ptr_nonnull(strstr(found, "/sh"));
        free(found);
        ck_assert_int_eq(command_resolve("sh", NULL, &found), 0);
        free(found);

        /* An empty element is the current directory. */
        make_file(unit_path("here"), 0755);
        cwd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(cwd, 0);
        ck_assert_int_eq(chdir(unit_dir), 0);
        snprintf(empty_elem, sizeof empty_elem, "PATH=/nonexistent:");
        ck_assert_int_eq(command_resolve("here", envp, &found), 0);
        ck_assert_str_eq(found, "here");
        free(found);
        ck_assert_int_eq(fchdir(cwd), 0);
        close(cwd);
}
END_TEST

START_TEST(test_resolve_names_with_a_slash) {
        char *found = NULL, *envp[] = { "PATH=/nonexistent", NULL }, *exe = unit_path("x"), *plain = unit_path("p");

        make_file(exe, 0755);
        make_file(plain, 0600);
        /* Taken as they are, PATH is not searched. */
        ck_assert_int_eq(command_resolve("/bin/sh", envp, &found), 0);
        ck_assert_str_eq(found, "/bin/sh");
        free(found);
        ck_assert_int_eq(command_resolve(exe, envp, &found), 0);
        ck_assert_str_eq(found, exe);
        free(found);
        ck_assert_int_eq(command_resolve(plain, envp, &found), -EACCES);
        ck_assert_int_eq(command_resolve(unit_dir, envp, &found), -EACCES);
        ck_assert_int_eq(command_resolve(unit_path("missing"), envp, &found), -ENOENT);
        ck_assert_int_eq(command_resolve("./no/such", envp, &found), -ENOENT);
}
END_TEST

START_TEST(test_exec_error_to_status) {
        ck_assert_int_eq(exec_error_to_status(ENOENT), EXIT_ENOENT);
        ck_assert_int_eq(exec_error_to_status(ENOENT), 127);
        ck_assert_int_eq(exec_error_to_status(EACCES), 126);
        ck_assert_int_eq(exec_error_to_status(ENOEXEC), 126);
        ck_assert_int_eq(exec_error_to_status(E2BIG), 126);
        ck_assert_int_eq(exec_error_to_status(ENOTDIR), 126);
}
END_TEST

/* ---- spawn_child ----------------------------------------------------------- */

/* n sockets (a listening TCP socket on loopback, then UDP ones). */
static struct bound_socket bound[20];
static char bound_names[20][16];

static void make_sockets(size_t n) {
        for (size_t i = 0; i < n; i++) {
                int type = i == 0 ? SOCK_STREAM : SOCK_DGRAM;
                int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
                struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };

                ck_assert_int_ge(fd, 0);
                ck_assert_int_eq(bind(fd, (struct sockaddr *) &a, sizeof a), 0);
                if (type == SOCK_STREAM)
                        ck_assert_int_eq(listen(fd, 8), 0);
                snprintf(bound_names[i], sizeof bound_names[i], i == 0 ? "web" : "s%zu", i);
                bound[i] = (struct bound_socket) { .fd = fd, .name = bound_names[i], .type = type };
        }
}

static void close_sockets(size_t n) {
        for (size_t i = 0; i < n; i++)
                close(bound[i].fd);
}

/* "socket:[inode]", as readlink(/proc/self/fd/N) shows it. */
static void socket_link(int fd, char *buf, size_t size) {
        struct stat st;

        ck_assert_int_eq(fstat(fd, &st), 0);
        snprintf(buf, size, "socket:[%lu]", (unsigned long) st.st_ino);
}

/* Run script under /bin/sh -c through spawn_child() and spawn_release():
 * returns COMMAND's exit status. The child's environment is extra plus
 * the protocol's variables for the n sockets. */
static int run_script(const char *script, size_t n, enum socket_passing passing, char **extra) {
        char *command[] = { "/bin/sh", "-c", (char *) script, NULL };
        struct child_env env;
        struct spawn_plan plan = {
                .command = command,
                .env = &env,
                .sockets = bound,
                .n_sockets = n,
                .passing = passing,
        };
        struct spawned child;
        size_t n_extra = 0;

        while (extra && extra[n_extra])
                n_extra++;
        ck_assert_int_eq(child_env_build(extra, NULL, 0, bound, passing == PASS_FROM_FD3 ? n : 0, &env), 0);
        ck_assert_int_eq(spawn_child(&plan, &child), 0);
        ck_assert_int_gt(child.pid, 0);
        ck_assert_int_eq(spawn_release(&child), 0);
        ck_assert_int_eq(child.gate_fd, -1);
        ck_assert_int_eq(child.error_fd, -1);
        child_env_done(&env);
        return exit_status_of(unit_wait_bounded(child.pid));
}

START_TEST(test_sockets_at_3_and_nothing_else) {
        char link3[64], link4[64], e3[80], e4[80], script[1024];
        char *extra[] = { "PATH=/usr/bin:/bin", e3, e4, "LISTEN_FDS=9", "NOTIFY_SOCKET=/x", NULL };
        int leaked;

        make_sockets(2);
        socket_link(bound[0].fd, link3, sizeof link3);
        socket_link(bound[1].fd, link4, sizeof link4);
        snprintf(e3, sizeof e3, "EXPECT3=%s", link3);
        snprintf(e4, sizeof e4, "EXPECT4=%s", link4);
        /* An fd prebind holds without FD_CLOEXEC: COMMAND must not get it. */
        leaked = fcntl(bound[0].fd, F_DUPFD, 20);
        ck_assert_int_ge(leaked, 20);
        snprintf(script, sizeof script,
                 "[ \"$(readlink /proc/self/fd/3)\" = \"$EXPECT3\" ] || exit 10\n"
                 "[ \"$(readlink /proc/self/fd/4)\" = \"$EXPECT4\" ] || exit 11\n"
                 "[ -e /proc/self/fd/%d ] && exit 12\n"
                 "[ \"$LISTEN_FDS\" = 2 ] || exit 13\n"
                 "[ \"$LISTEN_PID\" = $$ ] || exit 14\n"
                 "[ \"$LISTEN_FDNAMES\" = web:s1 ] || exit 15\n"
                 "[ -z \"$NOTIFY_SOCKET\" ] || exit 16\n"
                 /* The glob's own directory fd is the only one past 4. */
                 "cd /proc/self/fd || exit 17\n"
                 "for fd in *; do [ \"$fd\" -le 5 ] || exit 18; done\n"
                 "exit 0\n",
                 leaked);
        ck_assert_int_eq(run_script(script, 2, PASS_FROM_FD3, extra), 0);
        /* And the test can fail: a script that expects a third socket. */
        ck_assert_int_eq(run_script("[ -S /proc/self/fd/5 ] || exit 19", 2, PASS_FROM_FD3, extra), 19);
        close(leaked);
        close_sockets(2);
}
END_TEST

START_TEST(test_many_sockets) {
        char script[512];

        /* More than layout_fds() keeps on its stack. */
        make_sockets(20);
        snprintf(script, sizeof script,
                 "i=3; while [ $i -le 22 ]; do [ -S /proc/self/fd/$i ] || exit $i; i=$((i + 1)); done\n"
                 "[ -e /proc/self/fd/23 ] && exit 99\n"
                 "[ \"$LISTEN_FDS\" = 20 ] || exit 98\n");
        ck_assert_int_eq(run_script(script, 20, PASS_FROM_FD3, NULL), 0);
        close_sockets(20);
}
END_TEST

START_TEST(test_sockets_whose_fds_are_in_the_target_range) {
        char links[4][64], e[4][300];
        char *extra[] = { "PATH=/usr/bin:/bin", e[0], e[1], e[2], e[3], NULL };

        /* Four sockets go to 3…6; the last two sit at 6 and 5, swapped:
         * a naive dup2() loop would put the third at 5 over the fourth
         * before the fourth is placed. (Not 3 and 4: without check's
         * fork, its own result file may be there.) */
        make_sockets(4);
        for (int i = 0; i < 4; i++) {
                int moved = fcntl(bound[i].fd, F_DUPFD_CLOEXEC, 40);

                ck_assert_int_ge(moved, 0);
                close(bound[i].fd);
                bound[i].fd = moved;
        }
        ck_assert_msg(fcntl(5, F_GETFD) == -1 && fcntl(6, F_GETFD) == -1, "fds 5 and 6 are in use");
        for (int i = 2; i < 4; i++) {
                int target = i == 2 ? 6 : 5;

                ck_assert_int_eq(dup3(bound[i].fd, target, O_CLOEXEC), target);
                close(bound[i].fd);
                bound[i].fd = target;
        }
        for (int i = 0; i < 4; i++) {
                socket_link(bound[i].fd, links[i], sizeof links[i]);
                snprintf(e[i], sizeof e[i], "E%d=%s", i + 3, links[i]);
        }
        ck_assert_int_eq(run_script("for fd in 3 4 5 6; do\n"
                                    "  eval want=\\$E$fd\n"
                                    "  [ \"$(readlink /proc/self/fd/$fd)\" = \"$want\" ] || exit $((10 + fd))\n"
                                    "done\n",
                                    4, PASS_FROM_FD3, extra),
                         0);
        close_sockets(4);
}
END_TEST

/* Run script with one socket passed in mode; $EXPECT is the link that
 * stands for the socket. */
static int run_with_one_socket(const char *script, enum socket_passing passing) {
        char link[64], expect[80];
        char *extra[] = { expect, NULL };
        int status;

        make_sockets(1);
        socket_link(bound[0].fd, link, sizeof link);
        snprintf(expect, sizeof expect, "EXPECT=%s", link);
        status = run_script(script, 1, passing, extra);
        close_sockets(1);
        return status;
}

START_TEST(test_pass_on_stdin) {
        /* $$: the shell's own fds, not those of the $(…) subshell. */
        ck_assert_int_eq(run_with_one_socket("[ \"$(/bin/readlink /proc/$$/fd/0)\" = \"$EXPECT\" ] || exit 10\n"
                                             "[ -S /proc/self/fd/1 ] && exit 11\n"
                                             "[ -e /proc/self/fd/3 ] && exit 12\n"
                                             "[ -z \"$LISTEN_FDS\" ] || exit 13\n"
                                             "exit 0\n",
                                             PASS_ON_STDIN),
                         0);
}
END_TEST

START_TEST(test_pass_on_stdin_stdout) {
        ck_assert_int_eq(run_with_one_socket("[ \"$(/bin/readlink /proc/$$/fd/0)\" = \"$EXPECT\" ] || exit 10\n"
                                             "[ \"$(/bin/readlink /proc/$$/fd/1)\" = \"$EXPECT\" ] || exit 11\n"
                                             "[ -e /proc/self/fd/3 ] && exit 12\n"
                                             "exit 0\n",
                                             PASS_ON_STDIN_STDOUT),
                         0);
}
END_TEST

START_TEST(test_signals_reset_for_command) {
        sigset_t usr1;

        /* What prebind may have inherited or set: a blocked signal and an
         * ignored one. COMMAND gets neither. */
        sigemptyset(&usr1);
        sigaddset(&usr1, SIGUSR1);
        ck_assert_int_eq(sigprocmask(SIG_BLOCK, &usr1, NULL), 0);
        signal(SIGUSR2, SIG_IGN);
        ck_assert_int_eq(run_script("grep -q '^SigBlk:.0000000000000000$' /proc/self/status || exit 10\n"
                                    "grep -q '^SigIgn:.0000000000000000$' /proc/self/status || exit 11\n",
                                    0, PASS_FROM_FD3, (char *[]) { "PATH=/usr/bin:/bin", NULL }),
                         0);
        sigprocmask(SIG_UNBLOCK, &usr1, NULL);
        signal(SIGUSR2, SIG_DFL);
}
END_TEST

START_TEST(test_exec_failures_are_reported) {
        char *missing[] = { "no-such-command-prebind", NULL }, *noexec[] = { unit_path("noexec"), NULL };
        char *path[] = { "PATH=/nonexistent", NULL };
        struct child_env env;
        struct spawn_plan plan = { .env = &env };
        struct spawned child;

        make_file(noexec[0], 0644);
        ck_assert_int_eq(child_env_build(path, NULL, 0, NULL, 0, &env), 0);
        plan.command = missing;
        ck_assert_int_eq(spawn_child(&plan, &child), 0);
        ck_assert_int_eq(spawn_release(&child), -ENOENT);
        ck_assert_int_eq(exit_status_of(unit_wait_bounded(child.pid)), 127);
        plan.command = noexec;
        ck_assert_int_eq(spawn_child(&plan, &child), 0);
        ck_assert_int_eq(spawn_release(&child), -EACCES);
        ck_assert_int_eq(exit_status_of(unit_wait_bounded(child.pid)), 126);
        /* Told by the trial, before the gate: nothing need be published. */
        ck_assert_int_eq(spawn_child(&plan, &child), 0);
        ck_assert_int_eq(spawn_check(&child), -EACCES);
        ck_assert_int_eq(exit_status_of(unit_wait_bounded(child.pid)), 126);
        close(child.gate_fd);
        close(child.error_fd);
        child_env_done(&env);
}
END_TEST

/* Without a gate the child runs on prebind's memory until its exec
 * (clone(CLONE_VM | CLONE_VFORK)): spawn_child() returns once it has
 * exec'd, and prebind's environ, signal mask and fds are as they were;
 * the child's LISTEN_PID is its own pid. */
START_TEST(test_direct_spawn_leaves_prebind_as_it_was) {
        char script[512], *command[] = { "/bin/sh", "-c", script, NULL };
        const char *out = unit_path("pid");
        char **environ_before = environ, line[64] = "";
        sigset_t usr1, mask;
        struct child_env env;
        struct spawn_plan plan = { .command = command, .env = &env, .sockets = bound, .n_sockets = 1 };
        struct spawned child;
        FILE *f;

        make_sockets(1);
        sigemptyset(&usr1);
        sigaddset(&usr1, SIGUSR1);
        sigprocmask(SIG_BLOCK, &usr1, NULL);
        snprintf(script, sizeof script, "echo \"$LISTEN_PID $$\" > '%s'", out);
        ck_assert_int_eq(child_env_build(NULL, NULL, 0, bound, 1, &env), 0);
        ck_assert_int_eq(spawn_child(&plan, &child), 0);
        /* Under valgrind such a clone is a fork(): then the fork path
         * serves, and what follows holds of it too. */
        ck_assert(child.direct == clone_vm_shares_memory());
        ck_assert_int_eq(spawn_check(&child), 0);
        ck_assert_int_eq(spawn_release(&child), 0);
        ck_assert_int_eq(exit_status_of(unit_wait_bounded(child.pid)), 0);
        ck_assert_ptr_eq(environ, environ_before);
        sigprocmask(SIG_BLOCK, NULL, &mask);
        ck_assert(sigismember(&mask, SIGUSR1));
        ck_assert_int_ge(fcntl(bound[0].fd, F_GETFD), 0);
        f = fopen(out, "r");
        ck_assert_ptr_nonnull(f);
        ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
        fclose(f);
        snprintf(script, sizeof script, "%d %d\n", (int) child.pid, (int) child.pid);
        ck_assert_str_eq(line, script);
        sigprocmask(SIG_UNBLOCK, &usr1, NULL);
        child_env_done(&env);
        close_sockets(1);
}
END_TEST

/* A child at its gate whose COMMAND would create the file marker. */
static struct spawned spawn_marker(const char *marker, struct child_env *env, bool trial) {
        static char script[256];
        static char *command[] = { "/bin/sh", "-c", script, NULL };
        struct spawn_plan plan = { .command = command, .env = env, .trial = trial };
        struct spawned child;

        snprintf(script, sizeof script, "echo > '%s'", marker);
        ck_assert_int_eq(child_env_build(NULL, NULL, 0, NULL, 0, env), 0);
        ck_assert_int_eq(spawn_child(&plan, &child), 0);
        return child;
}

START_TEST(test_gate_holds_until_release) {
        const char *marker = unit_path("ran");
        struct child_env env;
        struct spawned child = spawn_marker(marker, &env, true);

        /* The trial exec succeeded, and ran not one instruction of it. */
        ck_assert_int_eq(spawn_check(&child), 0);
        usleep(50000);
        ck_assert_int_eq(access(marker, F_OK), -1);
        ck_assert_int_eq(waitpid(child.pid, NULL, WNOHANG), 0);
        ck_assert_int_eq(spawn_release(&child), 0);
        ck_assert_int_eq(exit_status_of(unit_wait_bounded(child.pid)), 0);
        ck_assert_int_eq(access(marker, F_OK), 0);
        child_env_done(&env);
}
END_TEST

START_TEST(test_abandon_never_execs_and_reaps) {
        const char *marker = unit_path("ran");
        struct child_env env;
        struct spawned child = spawn_marker(marker, &env, true);

        spawn_abandon(&child);
        ck_assert_int_eq(child.gate_fd, -1);
        ck_assert_int_eq(child.error_fd, -1);
        /* Reaped already, and it never ran COMMAND. */
        ck_assert_int_eq(waitpid(child.pid, NULL, WNOHANG), -1);
        ck_assert_int_eq(errno, ECHILD);
        ck_assert_int_eq(access(marker, F_OK), -1);
        child_env_done(&env);
}
END_TEST

/* Without a trial the check is the real exec: COMMAND runs once it said
 * 0, and abandoning it then kills it. */
START_TEST(test_check_without_trial_is_the_exec) {
        const char *marker = unit_path("ran");
        char *command[] = { "/bin/sh", "-c", NULL, NULL };
        char script[256];
        struct child_env env;
        struct spawn_plan plan = { .command = command, .env = &env, .new_process_group = true };
        struct spawned child;

        snprintf(script, sizeof script, "echo > '%s'; exec sleep 60", marker);
        command[2] = script;
        ck_assert_int_eq(child_env_build(NULL, NULL, 0, NULL, 0, &env), 0);
        ck_assert_int_eq(spawn_child(&plan, &child), 0);
        ck_assert_int_eq(spawn_check(&child), 0);
        ck_assert_int_eq(child.gate_fd, -1);
        /* The file appears once the shell runs: bounded, on the event. */
        for (int i = 0; i < 2000 && access(marker, F_OK) < 0; i++)
                usleep(5000);
        ck_assert_int_eq(access(marker, F_OK), 0);
        spawn_abandon(&child);
        ck_assert_int_eq(waitpid(child.pid, NULL, WNOHANG), -1);
        child_env_done(&env);
}
END_TEST

START_TEST(test_new_process_group) {
        char *command[] = { "/bin/sh", "-c", "exit 0", NULL };
        struct child_env env;
        struct spawn_plan plan = { .command = command, .env = &env, .new_process_group = true };
        struct spawned child;

        ck_assert_int_eq(child_env_build(NULL, NULL, 0, NULL, 0, &env), 0);
        ck_assert_int_eq(spawn_child(&plan, &child), 0);
        /* Set by the parent too, so it holds as soon as spawn_child()
         * returns. */
        ck_assert_int_eq(getpgid(child.pid), child.pid);
        ck_assert_int_eq(spawn_release(&child), 0);
        ck_assert_int_eq(exit_status_of(unit_wait_bounded(child.pid)), 0);

        plan.new_process_group = false;
        ck_assert_int_eq(spawn_child(&plan, &child), 0);
        ck_assert_int_eq(getpgid(child.pid), getpgrp());
        spawn_abandon(&child);
        child_env_done(&env);
}
END_TEST

/* ---- spawn_connection ------------------------------------------------------ */

START_TEST(test_connection_on_stdin_stdout) {
        char *command[] = { "sh", "-c", "read line; echo \"got $line\"", NULL }, *path = NULL, buf[64] = { 0 };
        struct child_env env;
        struct spawn_plan plan = {
                .command = command, .env = &env, .passing = PASS_ON_STDIN_STDOUT, .sockets = bound, .n_sockets = 1
        };
        int pair[2];
        ssize_t n = 0, k;
        pid_t pid;

        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
        bound[0] = (struct bound_socket) { .fd = pair[1], .name = "unknown", .type = SOCK_STREAM };
        ck_assert_int_eq(child_env_build((char *[]) { "PATH=/usr/bin:/bin", NULL }, NULL, 0, NULL, 0, &env), 0);
        ck_assert_int_eq(command_resolve("sh", env.envp, &path), 0);
        pid = spawn_connection(&plan, path);
        ck_assert_int_gt(pid, 0);
        close(pair[1]);
        ck_assert_int_eq(write(pair[0], "hello\n", 6), 6);
        while (n < (ssize_t) sizeof buf - 1 && (k = read(pair[0], buf + n, sizeof buf - 1 - (size_t) n)) > 0)
                n += k;
        ck_assert_str_eq(buf, "got hello\n");
        ck_assert_int_eq(exit_status_of(unit_wait_bounded(pid)), 0);
        close(pair[0]);
        free(path);
        child_env_done(&env);
}
END_TEST

START_TEST(test_connection_exec_failure_is_127) {
        char *command[] = { "missing", NULL };
        struct child_env env;
        struct spawn_plan plan = { .command = command, .env = &env };
        pid_t pid;

        ck_assert_int_eq(child_env_build(NULL, NULL, 0, NULL, 0, &env), 0);
        pid = spawn_connection(&plan, "/nonexistent/missing");
        ck_assert_int_gt(pid, 0);
        ck_assert_int_eq(exit_status_of(unit_wait_bounded(pid)), 127);
        pid = spawn_connection(&plan, unit_dir);
        ck_assert_int_eq(exit_status_of(unit_wait_bounded(pid)), 126);
        child_env_done(&env);
}
END_TEST

/* ---- --exec ---------------------------------------------------------------- */

START_TEST(test_exec_in_place_failure_returns) {
        pid_t pid;

        make_sockets(1);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                char *command[] = { "no-such-command-prebind", NULL };
                struct child_env env;
                struct spawn_plan plan = { .command = command, .env = &env, .sockets = bound, .n_sockets = 1 };
                int r;

                unit_default_signals();
                if (child_env_build((char *[]) { "PATH=/nonexistent", NULL }, NULL, 0, bound, 1, &env) < 0)
                        _exit(20);
                if (spawn_prepare_in_place(&plan) < 0)
                        _exit(21);
                /* Laid out: the socket at 3, inheritable. */
                if (fcntl(3, F_GETFD) != 0)
                        _exit(22);
                r = spawn_exec_in_place(&plan);
                if (r != -ENOENT)
                        _exit(23);
                /* The copy at 3 is closed again; the socket's own fd is
                 * the caller's. */
                if (bound[0].fd != 3 && fcntl(3, F_GETFD) != -1)
                        _exit(24);
                if (fcntl(bound[0].fd, F_GETFD) < 0)
                        _exit(25);
                _exit(0);
        }
        ck_assert_int_eq(exit_status_of(unit_wait_bounded(pid)), 0);
        close_sockets(1);
}
END_TEST

int main(void) {
        Suite *s = suite_create("spawn");
        TCase *resolve = tcase_create("resolve"), *layout = tcase_create("layout"), *gate = tcase_create("gate"),
              *connection = tcase_create("connection"), *in_place = tcase_create("exec-in-place");

        tcase_add_checked_fixture(resolve, unit_dir_make, unit_dir_remove);
        tcase_add_test(resolve, test_resolve_along_path);
        tcase_add_test(resolve, test_resolve_default_and_empty_path);
        tcase_add_test(resolve, test_resolve_names_with_a_slash);
        tcase_add_test(resolve, test_exec_error_to_status);
        suite_add_tcase(s, resolve);
        tcase_add_test(layout, test_sockets_at_3_and_nothing_else);
        tcase_add_test(layout, test_many_sockets);
        tcase_add_test(layout, test_sockets_whose_fds_are_in_the_target_range);
        tcase_add_test(layout, test_pass_on_stdin);
        tcase_add_test(layout, test_pass_on_stdin_stdout);
        tcase_add_test(layout, test_signals_reset_for_command);
        suite_add_tcase(s, layout);
        tcase_add_checked_fixture(gate, unit_dir_make, unit_dir_remove);
        tcase_add_test(gate, test_exec_failures_are_reported);
        tcase_add_test(gate, test_gate_holds_until_release);
        tcase_add_test(gate, test_check_without_trial_is_the_exec);
        tcase_add_test(gate, test_direct_spawn_leaves_prebind_as_it_was);
        tcase_add_test(gate, test_abandon_never_execs_and_reaps);
        tcase_add_test(gate, test_new_process_group);
        suite_add_tcase(s, gate);
        tcase_add_checked_fixture(connection, unit_dir_make, unit_dir_remove);
        tcase_add_test(connection, test_connection_on_stdin_stdout);
        tcase_add_test(connection, test_connection_exec_failure_is_127);
        suite_add_tcase(s, connection);
        tcase_add_test(in_place, test_exec_in_place_failure_returns);
        suite_add_tcase(s, in_place);
        return unit_run(s);
}
