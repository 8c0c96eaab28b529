/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "format.h"
#include "log.h"
#include "publish.h"
#include "socket.h"
#include "spawn.h"
#include "supervise.h"
#include "template.h"

/* Everything prebind holds while it runs, released in one place. */
struct job {
        const struct config *config;
        struct bound_socket *sockets;
        size_t n_sockets;
        char **setenv;          /* -E entries, templates expanded */
        char **command;         /* COMMAND, templates expanded with --subst */
        struct child_env env;
        struct publication publication;
        int signal_fd;
};

static void job_done(struct job *job) {
        /* Close the sockets first: clients still queued in the backlog get
         * a reset at once instead of hanging on a server that is gone. */
        for (size_t i = 0; i < job->n_sockets; i++)
                socket_release(&job->sockets[i]);
        publication_withdraw(&job->publication);
        free(job->sockets);
        for (size_t i = 0; job->setenv && i < job->config->n_setenv; i++)
                free(job->setenv[i]);
        free(job->setenv);
        for (char **a = job->command; a && *a; a++)
                free(*a);
        free(job->command);
        child_env_done(&job->env);
        if (job->signal_fd >= 0)
                close(job->signal_fd);
}

static const char *bind_error(int r) {
        switch (r) {
        case -EEXIST:
                return "the path exists and is not a socket (left alone)";
        case -EADDRINUSE:
                return "Address already in use";
        default:
                return strerror(-r);
        }
}

static int bind_all(struct job *job) {
        const struct config *c = job->config;

        job->sockets = calloc(c->n_listens, sizeof *job->sockets);
        if (!job->sockets)
                return log_error_errno(ENOMEM, "out of memory");
        for (size_t i = 0; i < c->n_listens; i++) {
                int r = socket_bind(&c->listens[i], c, &job->sockets[i]);
                if (r < 0) {
                        log_error("cannot listen on '%s': %s", c->listens[i].text, bind_error(r));
                        return r;
                }
                job->n_sockets++;
        }
        return 0;
}

static int expand(const struct job *job, const char *what, const char *text, char **ret) {
        size_t offset = 0;
        int r = template_expand(text, job->sockets, job->n_sockets, ret, &offset);

        switch (r) {
        case 0:
                return 0;
        case -ENOENT:
                log_error("%s '%s': no socket of that name or index at '%s'", what, text, text + offset);
                return -EINVAL;
        case -EBADR:
                log_error("%s '%s': unknown field at '%s' (port, host, addr, url, fd, name)", what, text,
                          text + offset);
                return -EINVAL;
        case -EINVAL:
                log_error("%s '%s': bad template at '%s' (write {{ and }} for braces)", what, text, text + offset);
                return -EINVAL;
        default:
                return log_error_errno(r, "%s '%s': %m", what, text);
        }
}

/* -E values and, with --subst, COMMAND's arguments: the templates are
 * filled in with the bound addresses, so they are known only now. */
static int expand_templates(struct job *job) {
        const struct config *c = job->config;
        size_t argc = 0;
        int r;

        job->setenv = calloc(c->n_setenv + 1, sizeof(char *));
        for (char **a = c->command; *a; a++)
                argc++;
        job->command = calloc(argc + 1, sizeof(char *));
        if (!job->setenv || !job->command)
                return log_error_errno(ENOMEM, "out of memory");

        for (size_t i = 0; i < c->n_setenv; i++) {
                const char *eq = strchr(c->setenv[i], '=');
                if (!eq)
                        job->setenv[i] = strdup(c->setenv[i]);
                else if ((r = expand(job, "--setenv", c->setenv[i], &job->setenv[i])) < 0)
                        return r;
                if (!job->setenv[i])
                        return log_error_errno(ENOMEM, "out of memory");
        }
        for (size_t i = 0; i < argc; i++) {
                if (!c->subst)
                        job->command[i] = strdup(c->command[i]);
                else if ((r = expand(job, "--subst: argument", c->command[i], &job->command[i])) < 0)
                        return r;
                if (!job->command[i])
                        return log_error_errno(ENOMEM, "out of memory");
        }
        return 0;
}

/* Signals that are not forwarded but keep their default action: faults
 * are about prebind itself, and the job-control stops let Ctrl-Z stop
 * prebind together with COMMAND (both are in the terminal's foreground
 * process group); "fg" continues both. */
static bool signal_is_forwardable(int sig) {
        switch (sig) {
        case SIGKILL: case SIGSTOP:
        case SIGSEGV: case SIGBUS: case SIGILL: case SIGFPE: case SIGTRAP: case SIGSYS: case SIGABRT:
        case SIGTSTP: case SIGTTIN: case SIGTTOU:
                return false;
        default:
                return true;
        }
}

/* Block every forwardable signal and receive them on a signalfd, so none
 * is lost between fork() and the loop. Ignored dispositions inherited from
 * the parent are reset: an ignored signal is discarded even when blocked,
 * and SIGCHLD ignored would make the kernel reap COMMAND and lose its
 * status (tini hangs forever in that case). */
static int setup_signals(struct job *job) {
        sigset_t mask;

        sigemptyset(&mask);
        for (int sig = 1; sig < NSIG; sig++)
                if (signal_is_forwardable(sig) && sigaddset(&mask, sig) == 0)
                        signal(sig, SIG_DFL);
        if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
                return log_error_errno(errno, "cannot block signals: %m");
        job->signal_fd = signalfd(-1, &mask, SFD_CLOEXEC);
        if (job->signal_fd < 0)
                return log_error_errno(errno, "cannot create signalfd: %m");
        return 0;
}

static int exit_status_of(int wait_status) {
        if (WIFEXITED(wait_status))
                return WEXITSTATUS(wait_status);
        if (WIFSIGNALED(wait_status))
                return 128 + WTERMSIG(wait_status);
        return EXIT_PREBIND_FAILED;
}

/* Reap every child that has exited (one SIGCHLD may stand for several);
 * returns true once COMMAND is among them. */
static bool reap(pid_t child, int *ret_status) {
        bool done = false;
        pid_t pid;
        int status;

        while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
                if (pid == child) {
                        *ret_status = exit_status_of(status);
                        done = true;
                }
        return done;
}

static void forward(const struct signalfd_siginfo *si, pid_t child) {
        /* Our own SIGPIPE, from writing to a reader that went away, is
         * about prebind's stdout, not COMMAND's. */
        if (si->ssi_signo == SIGPIPE && si->ssi_pid == (uint32_t) getpid())
                return;
        /* Sent by the kernel to the whole process group (Ctrl-C, Ctrl-\,
         * a terminal hangup, SIGWINCH): COMMAND shares prebind's group,
         * so it already has its own copy; forwarding would deliver twice. */
        if (si->ssi_code == SI_KERNEL)
                return;
        log_debug("forwarding signal %u (%s) to %d", si->ssi_signo, strsignal((int) si->ssi_signo), (int) child);
        if (kill(child, (int) si->ssi_signo) < 0 && errno != ESRCH)
                log_error("cannot forward signal %u: %m", si->ssi_signo);
}

static int supervise_loop(struct job *job, pid_t child) {
        int status = EXIT_PREBIND_FAILED;

        for (;;) {
                struct signalfd_siginfo si;
                ssize_t k = read(job->signal_fd, &si, sizeof si);

                if (k < 0 && errno == EINTR)
                        continue;
                if (k != sizeof si) {
                        log_error("cannot read signalfd: %m");
                        /* Without signals we cannot supervise: wait for
                         * COMMAND the plain way. */
                        while (waitpid(child, &status, 0) < 0 && errno == EINTR)
                                ;
                        return exit_status_of(status);
                }
                if (si.ssi_signo == SIGCHLD) {
                        if (reap(child, &status))
                                return status;
                        continue;
                }
                forward(&si, child);
        }
}

static int run_supervised(struct job *job) {
        struct spawn_plan plan = {
                .command = job->command,
                .env = &job->env,
                .sockets = job->sockets,
                .n_sockets = job->n_sockets,
        };
        struct spawned child;
        int r, err, status;

        r = setup_signals(job);
        if (r < 0)
                return EXIT_PREBIND_FAILED;
        r = spawn_child(&plan, &child);
        if (r < 0)
                return log_error_errno(r, "cannot fork: %m"), EXIT_PREBIND_FAILED;

        r = publish_addresses(job->config, job->sockets, job->n_sockets, getpid(), child.pid,
                              &job->publication);
        if (r < 0) {
                /* Closing the gate unopened makes the child exit unexec'd. */
                close(child.gate_fd);
                close(child.error_fd);
                waitpid(child.pid, NULL, 0);
                return EXIT_PREBIND_FAILED;
        }

        err = spawn_release(&child);
        if (err > 0) {
                log_error_errno(err, "cannot run '%s': %m", job->command[0]);
                waitpid(child.pid, NULL, 0);
                return exec_error_to_status(err);
        }
        log_debug("started '%s' as pid %d", job->command[0], (int) child.pid);

        status = supervise_loop(job, child.pid);
        log_debug("'%s' ended, exit status %d", job->command[0], status);
        return status;
}

static int run_in_place(struct job *job) {
        struct spawn_plan plan = {
                .command = job->command,
                .env = &job->env,
                .sockets = job->sockets,
                .n_sockets = job->n_sockets,
        };
        int r;

        r = publish_addresses(job->config, job->sockets, job->n_sockets, getpid(), getpid(), &job->publication);
        if (r < 0)
                return EXIT_PREBIND_FAILED;
        r = spawn_exec_in_place(&plan);
        log_error_errno(r, "cannot run '%s': %m", job->command[0]);
        return exec_error_to_status(-r);
}

int prebind_run(const struct config *config) {
        extern char **environ;
        struct job job = { .config = config, .signal_fd = -1 };
        int status = EXIT_PREBIND_FAILED;

        if (bind_all(&job) < 0 || expand_templates(&job) < 0)
                goto out;
        if (child_env_build(environ, job.setenv, config->n_setenv, job.sockets, job.n_sockets, &job.env) < 0) {
                log_error("out of memory");
                goto out;
        }
        status = config->exec ? run_in_place(&job) : run_supervised(&job);
out:
        job_done(&job);
        return status;
}
