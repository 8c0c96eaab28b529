/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exitcode.h"
#include "exec_attempt.h"
#include "process.h"
#include "signals.h"

void exec_attempt_init(struct exec_attempt *p, const char *command, char *const *envp) {
        *p = (struct exec_attempt) { .command = command, .envp = envp, .done_fd = -1, .output_fd = -1, .status = -1 };
}

void keep_tail(char *buf, size_t *len, size_t size, const char *text, size_t n) {
        if (n >= size) {
                memcpy(buf, text + n - size, size);
                *len = size;
                return;
        }
        if (*len + n > size) {
                size_t drop = *len + n - size;

                memmove(buf, buf + drop, *len - drop);
                *len -= drop;
        }
        memcpy(buf + *len, text, n);
        *len += n;
}

/* In the clone, before exec: only system calls. */
static _Noreturn void exec_shell(const struct exec_attempt *p, int output) {
        char *argv[] = { (char *) "sh", (char *) "-c", (char *) p->command, NULL };
        int null;

        signals_reset(false);
        null = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (null < 0 || dup2(null, STDIN_FILENO) < 0 || dup2(output, STDOUT_FILENO) < 0 ||
            dup2(output, STDERR_FILENO) < 0)
                _exit(EXIT_PREBIND_FAILED);
        execve("/bin/sh", argv, p->envp);
        _exit(EXIT_ENOENT);
}

static void kill_own_group(int sig) {
        (void) sig;
        (void) kill(0, SIGKILL);
}

/* The clone prebind waits for. An exec would make it an ordinary child
 * again (execve(2) resets the exit signal to SIGCHLD), so it does not
 * exec: it forks the shell, waits for it and exits with its status. */
static _Noreturn void run_attempt(const struct exec_attempt *p, pid_t parent, int output, int done) {
        pid_t shell;
        int status, code;

        struct sigaction take_group_down = { .sa_handler = kill_own_group };
        sigset_t term;

        (void) setpgid(0, 0);
        /* Never outlive prebind, even if it is killed with SIGKILL: the
         * kernel then sends this process SIGTERM, and the handler takes
         * the whole attempt down, this process group (the shell and what it
         * started: a shell does not always exec its last command). */
        sigemptyset(&term);
        sigaddset(&term, SIGTERM);
        if (sigaction(SIGTERM, &take_group_down, NULL) < 0 || sigprocmask(SIG_UNBLOCK, &term, NULL) < 0 ||
            prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != parent)
                _exit(EXIT_PREBIND_FAILED);
        /* Hold nothing of prebind's (sockets, pipes): only the output, as
         * fd 3, and the pipe for the status, as fd 4. */
        if ((output = fcntl(output, F_DUPFD_CLOEXEC, 5)) < 0 || (done = fcntl(done, F_DUPFD_CLOEXEC, 5)) < 0 ||
            dup2(output, 3) < 0 || dup2(done, 4) < 0 || fcntl(3, F_SETFD, FD_CLOEXEC) < 0 ||
            fcntl(4, F_SETFD, FD_CLOEXEC) < 0)
                _exit(EXIT_PREBIND_FAILED);
        (void) syscall(SYS_close_range, 5U, ~0U, 0U);
        parent = getpid();
        shell = fork();
        if (shell < 0)
                _exit(EXIT_PREBIND_FAILED);
        if (shell == 0) {
                close(4);
                if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
                        _exit(EXIT_PREBIND_FAILED);
                exec_shell(p, 3);
        }
        while (waitpid(shell, &status, 0) < 0)
                if (errno != EINTR)
                        _exit(EXIT_PREBIND_FAILED);
        code = exit_status_of(status);
        (void) !write(4, &code, sizeof code);
        _exit(0);
}

/* fork() with no exit signal (see exec_attempt.h): the old clone(), whose
 * flags hold the exit signal in their low byte (x86-64 order: flags,
 * stack, parent_tid, child_tid, tls; no stack: the child runs on a copy,
 * as after fork()). Neither clone3() nor pidfd_open() is needed, which
 * valgrind does not know. */
static pid_t fork_quiet(void) {
        return (pid_t) syscall(SYS_clone, 0UL, 0UL, NULL, NULL, 0UL);
}

int exec_attempt_begin(struct exec_attempt *p) {
        pid_t parent = getpid(), pid;
        int out[2], done[2];

        p->output_len = 0;
        if (pipe2(out, O_CLOEXEC) < 0)
                return -errno;
        if (pipe2(done, O_CLOEXEC) < 0) {
                int r = -errno;
                close(out[0]);
                close(out[1]);
                return r;
        }
        pid = fork_quiet();
        if (pid < 0) {
                int r = -errno;
                close(out[0]);
                close(out[1]);
                close(done[0]);
                close(done[1]);
                return r;
        }
        if (pid == 0)
                run_attempt(p, parent, out[1], done[1]);
        (void) setpgid(pid, pid);
        close(out[1]);
        close(done[1]);
        (void) fcntl(out[0], F_SETFL, O_NONBLOCK);
        (void) fcntl(done[0], F_SETFL, O_NONBLOCK);
        p->pid = pid;
        p->done_fd = done[0];
        p->output_fd = out[0];
        return 0;
}

void exec_attempt_read(struct exec_attempt *p) {
        char buf[4096];
        ssize_t n;

        while (p->output_fd >= 0 && (n = read(p->output_fd, buf, sizeof buf)) != 0) {
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN)
                                return;
                        break;
                }
                keep_tail(p->output, &p->output_len, sizeof p->output, buf, (size_t) n);
        }
        /* EOF or an error: nothing more to read. */
        if (p->output_fd >= 0)
                close(p->output_fd);
        p->output_fd = -1;
}

/* Reap the attempt (it has said its status, or was killed): the group's
 * leftovers are killed first, while the leader still holds the group id.
 * Returns the shell's status, 128+9 if it was killed. */
static int reap(struct exec_attempt *p) {
        int code = 128 + SIGKILL, ws;
        ssize_t k;

        do
                k = read(p->done_fd, &code, sizeof code);
        while (k < 0 && errno == EINTR);
        if (k != sizeof code)
                code = 128 + SIGKILL;
        (void) kill(-p->pid, SIGKILL);
        while (waitpid(p->pid, &ws, __WALL) < 0 && errno == EINTR)
                ;
        exec_attempt_read(p);
        if (p->output_fd >= 0)
                close(p->output_fd);
        p->output_fd = -1;
        close(p->done_fd);
        p->done_fd = -1;
        p->pid = 0;
        memcpy(p->last_output, p->output, p->output_len);
        p->last_output[p->output_len] = '\0';
        return code;
}

int exec_attempt_finish(struct exec_attempt *p) {
        if (p->pid <= 0)
                return -EAGAIN;
        p->timed_out = false;
        p->status = reap(p);
        return p->status == 0 ? 1 : -EAGAIN;
}

void exec_attempt_kill(struct exec_attempt *p) {
        if (p->pid <= 0)
                return;
        (void) kill(-p->pid, SIGKILL);
        (void) kill(p->pid, SIGKILL);
        p->status = reap(p);
        p->timed_out = true;
}
