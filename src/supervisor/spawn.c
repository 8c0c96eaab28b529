/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/wait.h>

#include "compat.h"
#include "exitcode.h"
#include "fd.h"
#include "guard.h"
#include "intercept.h"
#include "netns_job.h"
#include "process.h"
#include "signals.h"
#include "spawn.h"

int exec_error_to_status(int err) {
        return err == ENOENT ? EXIT_ENOENT : EXIT_CANNOT_INVOKE;
}

/* Put the sockets at 3, 4, … (or on stdin, and stdout, for inetd) without
 * FD_CLOEXEC, and make every other fd above 2 close-on-exec. Sources are
 * first moved above the target range, so no dup2() overwrites a socket
 * still to be placed, and dup2() never gets the same fd twice (a no-op
 * that would leave FD_CLOEXEC set). keep[] are fds the child still needs
 * before exec; they are moved out of the range too, and updated. */
static int layout_fds(const struct bound_socket *sockets, size_t n, enum socket_passing passing, int *keep[],
                      size_t n_keep) {
        int first = passing == PASS_FROM_FD3 ? 3 : 0;
        int top = first + (int) n > 3 ? first + (int) n : 3;
        int moved_few[16], *moved = moved_few, r;
        size_t n_moved = 0;

        /* No allocation for the common case, which is every connection of
         * --accept (spawn_connection()). */
        if (n > 16 && !(moved = calloc(n, sizeof(int))))
                return -ENOMEM;
        for (; n_moved < n; n_moved++)
                if ((moved[n_moved] = fcntl(sockets[n_moved].fd, F_DUPFD_CLOEXEC, top)) < 0)
                        goto fail;
        for (size_t k = 0; k < n_keep; k++)
                if (*keep[k] < top && (*keep[k] = fcntl(*keep[k], F_DUPFD_CLOEXEC, top)) < 0)
                        goto fail;
        for (size_t i = 0; i < n; i++)
                if (dup2(moved[i], first + (int) i) < 0)
                        goto fail;
        if (passing == PASS_ON_STDIN_STDOUT && n > 0 && dup2(moved[0], STDOUT_FILENO) < 0)
                goto fail;
        /* The copies were only a step: with --exec, an exec that fails
         * would leave them open. */
        for (size_t i = 0; i < n_moved; i++)
                close(moved[i]);
        if (moved != moved_few)
                free(moved);
        return fd_range((unsigned) top, ~0U, FD_SET_CLOEXEC);

fail:
        /* F_DUPFD says EINVAL when top is at RLIMIT_NOFILE already: that
         * too is "out of fds". */
        if (errno == EINVAL)
                errno = EMFILE;
        r = -errno;
        for (size_t i = 0; i < n_moved; i++)
                close(moved[i]);
        if (moved != moved_few)
                free(moved);
        return r;
}

/* In the child, before exec: the death signal (if any), and prebind
 * still there. prctl(2): it is cleared by fork() and refers to the
 * parent as it was when set, which may have died already. */
static int die_with_parent(int sig, pid_t parent) {
        if (sig == 0)
                return 0;
        if (prctl(PR_SET_PDEATHSIG, sig) < 0)
                return -errno;
        return getppid() == parent ? 0 : -ESRCH;
}

/* Between fork (or --exec) and exec: what COMMAND must find. */
static int prepare_child(const struct spawn_plan *plan, int *keep[], size_t n_keep) {
        int r;

        signals_reset(plan->dispositions_are_default);
        child_env_set_pid(plan->env, getpid());
        r = layout_fds(plan->sockets, plan->n_sockets, plan->passing, keep, n_keep);
        if (r < 0)
                return r;
        environ = plan->env->envp;
        return 0;
}

/* The trial's grandchild: traced, stopped once (so that the tracer can
 * ask for the exec event), then the exec; errno over the pipe if it fails. */
static _Noreturn void trial_grandchild(char **command, char **envp, pid_t parent, int report) {
        int err;

        /* A tracer killed meanwhile (prebind was) leaves no stopped
         * COMMAND behind: PTRACE_O_EXITKILL from the first stop on, the
         * parent-death signal before it. */
        if (die_with_parent(SIGKILL, parent) == 0 && ptrace(PTRACE_TRACEME, 0, NULL, NULL) == 0 &&
            raise(SIGSTOP) == 0) {
                environ = envp;
                execvp(command[0], command);
                err = errno;
                (void) !write(report, &err, sizeof err);
        }
        _exit(EXIT_PREBIND_FAILED);
}

/* Trace the grandchild until its exec (true) or its end (false). Every
 * stop but the exec event is let go on without its signal: a signal that
 * reaches a traced process stops it until its tracer acts (a terminal's
 * SIGWINCH, a group's SIGCONT), and the tracer waits on nothing else. */
static bool trial_reached_exec(pid_t pid) {
        bool options_set = false;
        int status;

        for (;;) {
                if (waitpid(pid, &status, __WALL) < 0) {
                        if (errno == EINTR)
                                continue;
                        return false;
                }
                if (!WIFSTOPPED(status))
                        return false;
                if (status >> 8 == (SIGTRAP | (PTRACE_EVENT_EXEC << 8)))
                        return true;
                /* The first stop is its raise(SIGSTOP), or a signal
                 * before it: still before the exec either way. */
                if (!options_set) {
                        long options = PTRACE_O_TRACEEXEC | PTRACE_O_EXITKILL;

                        /* ptrace(2) takes the options as its data pointer. */
                        // NOLINTNEXTLINE(performance-no-int-to-ptr)
                        options_set = ptrace(PTRACE_SETOPTIONS, pid, NULL, (void *) options) == 0;
                }
                if (!options_set || ptrace(PTRACE_CONT, pid, NULL, NULL) < 0)
                        return false;
        }
}

/* In the child, before anything is published: would COMMAND's exec
 * succeed? A trial exec, in a grandchild that asks to be traced, so that
 * a successful exec stops it (the exec event) before the new program's
 * first instruction; it is killed there. A failed one reports errno over
 * a close-on-exec pipe before it exits. Returns the errno of a failed
 * exec, or 0: it would run, or the trial cannot tell (no ptrace here;
 * EPERM: an LSM that refuses a traced exec). */
static int trial_exec(char **command, char **envp) {
        int report[2], err = 0, status;
        pid_t parent = getpid(), pid;

        if (pipe2(report, O_CLOEXEC | O_NONBLOCK) < 0)
                return 0;
        pid = fork();
        if (pid == 0) {
                close(report[0]);
                trial_grandchild(command, envp, parent, report[1]);
        }
        close(report[1]);
        if (pid > 0) {
                /* Not at the exec: it has exited (or cannot be traced), and
                 * what it wrote before is in the pipe. */
                if (!trial_reached_exec(pid) && read(report[0], &err, sizeof err) != sizeof err)
                        err = 0;
                (void) kill(pid, SIGKILL);
                while (waitpid(pid, &status, __WALL) == pid && !WIFEXITED(status) && !WIFSIGNALED(status))
                        ;
        }
        close(report[0]);
        return err == EPERM ? 0 : err;
}

/* Async-signal-safe: write the pieces of a message to stderr. */
static void write_error(const char *what, const char *name, int err) {
        const char *parts[] = { "prebind: ", what, " '", name, "': ", strerror(err), "\n" };

        for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
                (void) !write(STDERR_FILENO, parts[i], strlen(parts[i]));
}

/* What the child of spawn_direct() shares with prebind, which waits
 * (CLONE_VFORK) until it has exec'd or exited. */
struct direct {
        const struct spawn_plan *plan;
        pid_t parent;
        int result; /* written by the child: 0 exec'd, -errno, -ECHILD */
};

/* The child of spawn_direct(): on prebind's memory, prebind stopped until
 * the exec. So it changes nothing of prebind's but its own result (the
 * environment is passed to execvpe(), not set in environ), calls nothing
 * that allocates or takes a lock, and says why it failed by write(2). */
static int direct_child(void *arg) {
        struct direct *d = arg;
        const struct spawn_plan *plan = d->plan;
        int r;

        d->result = -ECHILD;
        if (plan->new_process_group)
                setpgid(0, 0);
        /* prebind killed while it waited for this exec: nobody's to run. */
        if (die_with_parent(plan->death_signal, d->parent) == -ESRCH)
                _exit(EXIT_PREBIND_FAILED);
        /* The guard knows this pid before COMMAND runs: prebind killed
         * before it tells the guard itself leaves nothing unwatched. */
        guard_watch_self(plan->guard, plan->new_process_group);
        if ((plan->stdout_fd > 0 && dup2(plan->stdout_fd, STDOUT_FILENO) < 0) ||
            (plan->stderr_fd > 0 && dup2(plan->stderr_fd, STDERR_FILENO) < 0))
                _exit(EXIT_PREBIND_FAILED);
        signals_reset(plan->dispositions_are_default);
        child_env_set_pid(plan->env, getpid());
        r = layout_fds(plan->sockets, plan->n_sockets, plan->passing, NULL, 0);
        if (r < 0) {
                write_error("cannot pass the sockets to", plan->command[0], -r);
                _exit(EXIT_PREBIND_FAILED);
        }
        d->result = 0;
        execvpe(plan->command[0], plan->command, plan->env->envp);
        d->result = -errno;
        _exit(exec_error_to_status(errno));
}

/* No gate: nothing is published before COMMAND runs. COMMAND is started
 * as posix_spawn() does: clone(CLONE_VM | CLONE_VFORK), no copy of
 * prebind's memory, no pipe, and this returns once it has exec'd (or
 * failed to). Only where the child needs nothing but system calls: no
 * trial (it forks), no namespace to join (setns() of a user namespace
 * refuses a shared memory), no seccomp filter to install, and no more
 * sockets than layout_fds() lays out without allocating. And not where
 * such a clone is a fork() (valgrind): the child's result would not come
 * back. */
static bool can_spawn_direct(const struct spawn_plan *plan) {
        return !plan->trial && !plan->join_netns && !plan->intercept && plan->n_sockets <= 16 &&
               clone_vm_shares_memory();
}

static int spawn_direct(const struct spawn_plan *plan, struct spawned *ret) {
        /* 1: never written, the child ran on a copy of prebind's memory
         * (valgrind): its exec's outcome is its exit status, later. */
        struct direct d = { .plan = plan, .parent = getpid(), .result = 1 };
        pid_t pid;

        pid = clone_vfork(direct_child, &d, SIGCHLD);
        if (pid < 0)
                return pid;
        if (d.result == 1) {
                clone_vm_learned(false);
                d.result = 0;
        }
        /* Both sides set the group, as in spawn_child(); the child has
         * exec'd by now (EACCES) or did it itself. */
        if (plan->new_process_group)
                (void) setpgid(pid, pid);
        *ret = (struct spawned) {
                .pid = pid,
                .gate_fd = -1,
                .error_fd = -1,
                .checked = true,
                .no_trial = true,
                .group = plan->new_process_group,
                .direct = true,
                .result = d.result,
        };
        return 0;
}

/* The child of spawn_child(), held at its gate: the namespace, the
 * sockets laid out, the verdict of its trial exec, then the exec once
 * the parent has published. */
_Noreturn static void gated_child(const struct spawn_plan *plan, pid_t parent, int gate[2], int error[2]) {
        int intercept_fd = intercept_child_fd(plan->intercept);
        int *keep[] = { &gate[0], &error[1], &intercept_fd };
        char go;
        int err;

        close(gate[1]);
        close(error[0]);
        if (plan->new_process_group)
                setpgid(0, 0);
        /* First, while the namespace fds are where they were
         * opened: laying out the sockets may cover them. */
        if (plan->join_netns && (err = -netns_job_enter(plan->net_fd, plan->user_fd)) > 0) {
                fprintf(stderr, "prebind: cannot enter the network namespace (--netns): %s\n", strerror(err));
                _exit(EXIT_PREBIND_FAILED);
        }
        /* After joining the namespace: a change of credentials
         * would clear it. prebind gone already: the gate tells. */
        (void) die_with_parent(plan->death_signal, parent);
        /* Before the sockets are laid out: the pipes may sit where
         * a socket goes (their copies here are close-on-exec). */
        if ((plan->stdout_fd > 0 && dup2(plan->stdout_fd, STDOUT_FILENO) < 0) ||
            (plan->stderr_fd > 0 && dup2(plan->stderr_fd, STDERR_FILENO) < 0))
                _exit(EXIT_PREBIND_FAILED);
        if (prepare_child(plan, keep, intercept_fd >= 0 ? 3 : 2) < 0) {
                fprintf(stderr, "prebind: cannot pass the sockets: %s\n", strerror(errno));
                _exit(EXIT_PREBIND_FAILED);
        }
        /* Nothing is published for a COMMAND that cannot run: the
         * verdict comes first (0: it can), then the gate. */
        err = plan->trial ? trial_exec(plan->command, plan->env->envp) : 0;
        if (err == 0 && intercept_child(plan->intercept, intercept_fd) < 0)
                _exit(EXIT_PREBIND_FAILED);
        if (write(error[1], &err, sizeof err) != sizeof err || err != 0)
                _exit(exec_error_to_status(err));
        /* Wait for the parent to publish; EOF without the byte means
         * it gave up (publishing failed, or it died). */
        if (read(gate[0], &go, 1) != 1)
                _exit(EXIT_PREBIND_FAILED);
        execvp(plan->command[0], plan->command);
        err = errno;
        (void) !write(error[1], &err, sizeof err);
        _exit(exec_error_to_status(err));
}

int spawn_child(const struct spawn_plan *plan, struct spawned *ret) {
        int gate[2], error[2];
        pid_t parent = getpid(), pid;

        if (can_spawn_direct(plan))
                return spawn_direct(plan, ret);

        if (pipe2(gate, O_CLOEXEC) < 0)
                return -errno;
        if (pipe2(error, O_CLOEXEC) < 0) {
                int r = -errno;
                close(gate[0]);
                close(gate[1]);
                return r;
        }

        pid = fork();
        if (pid < 0) {
                int r = -errno;
                close(gate[0]);
                close(gate[1]);
                close(error[0]);
                close(error[1]);
                return r;
        }
        if (pid == 0)
                gated_child(plan, parent, gate, error);

        /* Both sides set the group, so that neither the parent's first
         * signal nor the child's exec can come before it. */
        if (plan->new_process_group)
                setpgid(pid, pid);
        close(gate[0]);
        close(error[1]);
        *ret = (struct spawned) {
                .pid = pid,
                .gate_fd = gate[1],
                .error_fd = error[0],
                .no_trial = !plan->trial,
                .group = plan->new_process_group,
        };
        return 0;
}

/* Read one report of the child: -errno, or 0 (EOF too). */
static int read_report(int fd) {
        ssize_t k;
        int err = 0;

        do
                k = read(fd, &err, sizeof err);
        while (k < 0 && errno == EINTR);
        return k == sizeof err ? -err : 0;
}

static void open_the_gate(struct spawned *s, bool let_exec) {
        /* If the child is already gone, the write fails and the read of
         * its report sees EOF: its exit status then tells what happened. */
        if (let_exec && s->gate_fd >= 0)
                (void) !write(s->gate_fd, "", 1);
        if (s->gate_fd >= 0)
                close(s->gate_fd);
        s->gate_fd = -1;
}

int spawn_check(struct spawned *s) {
        ssize_t k;
        int err = 0;

        if (s->direct)
                return s->result;
        s->checked = true;
        /* The child's verdict before its gate: the trial's errno, or 0
         * (it can run, or no trial was asked for). EOF first: the child
         * failed before that (entering the namespace, laying out the fds:
         * it said why, and exits 125); nothing is published for it. */
        do
                k = read(s->error_fd, &err, sizeof err);
        while (k < 0 && errno == EINTR);
        if (k != sizeof err)
                return -ECHILD;
        if (err != 0 || !s->no_trial)
                return -err;
        /* No trial: the real exec decides. */
        open_the_gate(s, true);
        return read_report(s->error_fd);
}

int spawn_release(struct spawned *s) {
        int err;

        if (s->direct)
                return s->result;
        err = s->checked ? 0 : spawn_check(s);

        open_the_gate(s, err == 0);
        if (err == 0)
                err = read_report(s->error_fd);
        close(s->error_fd);
        s->error_fd = -1;
        return err;
}

void spawn_abandon(struct spawned *s) {
        /* Without a trial, a checked child is COMMAND (or its zombie). */
        if (s->no_trial && s->checked)
                (void) kill(s->group ? -s->pid : s->pid, SIGKILL);
        open_the_gate(s, false);
        if (s->error_fd >= 0)
                close(s->error_fd);
        s->gate_fd = s->error_fd = -1;
        (void) waitpid(s->pid, NULL, 0);
}

pid_t spawn_connection(const struct spawn_plan *plan, const char *path) {
        sigset_t none;
        pid_t parent = getpid(), pid;
        int r;

        /* fork(), not vfork(): with vfork() the parent waits for each
         * exec, and accepting stalls that long (bench/accept_rate: 0.8x
         * tcpserver with vfork, on par with fork). The dispositions are
         * already the defaults (signals_block_all()): only the mask needs
         * clearing. The child stays async-signal-safe all the same. */
        pid = fork();
        if (pid != 0)
                return pid < 0 ? -errno : pid;
        if (plan->new_process_group)
                setpgid(0, 0);
        /* prebind already gone: its connection is nobody's to serve. */
        if (die_with_parent(plan->death_signal, parent) == -ESRCH)
                _exit(EXIT_PREBIND_FAILED);
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        child_env_set_pid(plan->env, getpid());
        r = layout_fds(plan->sockets, plan->n_sockets, plan->passing, NULL, 0);
        if (r < 0) {
                write_error("cannot pass the connection to", plan->command[0], -r);
                _exit(EXIT_PREBIND_FAILED);
        }
        execve(path, plan->command, plan->env->envp);
        r = errno;
        write_error("cannot run", plan->command[0], r);
        _exit(exec_error_to_status(r));
}

int spawn_trial(const struct spawn_plan *plan) {
        return -trial_exec(plan->command, plan->env->envp);
}

int spawn_prepare_in_place(const struct spawn_plan *plan) {
        return prepare_child(plan, NULL, 0);
}

int spawn_exec_in_place(const struct spawn_plan *plan) {
        int first = plan->passing == PASS_FROM_FD3 ? 3 : 0, err;

        execvp(plan->command[0], plan->command);
        err = errno;
        /* COMMAND did not start: close the copies laid out for it, but not
         * the sockets' own fds (the caller closes those) nor 0-2. */
        for (int fd = first; fd < first + (int) plan->n_sockets; fd++) {
                bool own = fd <= 2;
                for (size_t j = 0; j < plan->n_sockets; j++)
                        own = own || plan->sockets[j].fd == fd;
                if (!own)
                        close(fd);
        }
        return -err;
}
