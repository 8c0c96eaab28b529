/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "accept.h"
#include "format.h"
#include "log.h"
#include "notify.h"
#include "publish.h"
#include "signals.h"
#include "socket.h"
#include "spawn.h"
#include "supervise.h"
#include "template.h"

/* Everything prebind holds while it runs, released in one place. */
struct job {
        const struct config *config;
        struct bound_socket *sockets;
        size_t n_sockets;
        char **setenv;          /* -E entries, templates expanded; NULL-terminated */
        size_t n_setenv;
        char **command;         /* COMMAND, templates expanded with --subst */
        struct child_env env;
        struct publication publication;
        struct notify_socket notify;    /* --ready: COMMAND's NOTIFY_SOCKET */
        int signal_fd;
};

static void job_done(struct job *job) {
        /* Close the sockets first: clients still queued in the backlog get
         * a reset at once instead of hanging on a server that is gone. */
        for (size_t i = 0; i < job->n_sockets; i++)
                socket_release(&job->sockets[i]);
        publication_withdraw(&job->publication);
        free(job->sockets);
        for (size_t i = 0; job->setenv && i < job->n_setenv; i++)
                free(job->setenv[i]);
        free(job->setenv);
        for (char **a = job->command; a && *a; a++)
                free(*a);
        free(job->command);
        child_env_done(&job->env);
        notify_socket_close(&job->notify);
        if (job->signal_fd >= 0)
                close(job->signal_fd);
}

static const char *bind_error(const struct listen_spec *spec, int r) {
        int family = spec->addr.sa.sa_family;

        switch (r) {
        case -EEXIST:
                return "the path exists and is not a socket (left alone)";
        case -EADDRINUSE:
                /* For port 0 the kernel says EADDRINUSE when it has no port
                 * left to pick: nothing was "in use" that the user named. */
                if ((family == AF_INET || family == AF_INET6) && sockaddr_port(&spec->addr) == 0)
                        return "no free port left in the local port range (net.ipv4.ip_local_port_range)";
                return "Address already in use";
        default:
                return strerror(-r);
        }
}

/* The sockets, in COMMAND's order: those prebind was passed itself
 * (socket activation: they come first, names kept), then its own -l
 * sockets. The default 127.0.0.1:0 applies only when there is neither. */
static int bind_all(struct job *job) {
        const struct config *c = job->config;
        struct bound_socket *inherited = NULL, *all;
        int n_inherited;
        size_t n_own;

        n_inherited = sockets_inherit(&inherited);
        if (n_inherited == -EBADMSG)
                return log_error_errno(n_inherited, "cannot take the sockets passed to prebind: LISTEN_FDNAMES holds "
                                       "an invalid name (1-255 printable ASCII characters, no ':')");
        if (n_inherited == -EAFNOSUPPORT)
                return log_error_errno(n_inherited, "cannot take the sockets passed to prebind: one is neither an IP "
                                       "nor a unix socket");
        if (n_inherited < 0)
                return log_error_errno(n_inherited, "cannot take the sockets passed to prebind (LISTEN_FDS): %m");
        n_own = c->listen_default && n_inherited > 0 ? 0 : c->n_listens;

        all = calloc((size_t) n_inherited + n_own + 1, sizeof *all);
        if (!all) {
                free(inherited);
                return log_error_errno(ENOMEM, "out of memory");
        }
        if (n_inherited > 0)
                memcpy(all, inherited, (size_t) n_inherited * sizeof *all);
        free(inherited);
        job->sockets = all;
        job->n_sockets = (size_t) n_inherited;

        for (size_t i = 0; i < n_own; i++) {
                int r = socket_bind(&c->listens[i], c, &job->sockets[job->n_sockets]);
                if (r < 0) {
                        log_error("cannot listen on '%s': %s", c->listens[i].text, bind_error(&c->listens[i], r));
                        return r;
                }
                job->n_sockets++;
        }
        return 0;
}

static int expand(const struct job *job, const char *what, const char *text, char **ret) {
        char quoted[LOG_QUOTE_SIZE], quoted_at[LOG_QUOTE_SIZE];
        size_t offset = 0;
        int r = template_expand(text, job->sockets, job->n_sockets, ret, &offset);
        const char *t = log_shorten(text, quoted), *at = log_shorten(text + offset, quoted_at);

        switch (r) {
        case 0:
                return 0;
        case -ENOENT:
                log_error("%s '%s': no socket of that name or index at '%s'", what, t, at);
                return -EINVAL;
        case -EBADR:
                log_error("%s '%s': unknown field at '%s' (port, host, addr, url, fd, name)", what, t, at);
                return -EINVAL;
        case -EINVAL:
                log_error("%s '%s': bad template at '%s' (write {{ and }} for braces)", what, t, at);
                return -EINVAL;
        default:
                return log_error_errno(r, "%s '%s': %m", what, t);
        }
}

/* -E values and, with --subst, COMMAND's arguments: the templates are
 * filled in with the bound addresses, so they are known only now. */
static int expand_templates(struct job *job) {
        const struct config *c = job->config;
        size_t argc = 0;
        int r;

        /* One more slot: --ready adds NOTIFY_SOCKET. */
        job->setenv = calloc(c->n_setenv + 2, sizeof(char *));
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
                job->n_setenv++;
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

/* Every signal is blocked and read from a signalfd, so none is lost
 * between fork() and the loop. The faults (SIGSEGV…) may be blocked too:
 * a real fault is forced through by the kernel and still kills prebind,
 * while the same signal sent with kill() is forwarded like any other.
 * Ignored dispositions inherited from the parent are reset: an ignored
 * signal is discarded even when blocked, and an ignored SIGCHLD would make
 * the kernel reap COMMAND and lose its status (tini hangs in that case). */
static int setup_signals(struct job *job) {
        sigset_t mask;

        sigemptyset(&mask);
        for (int sig = 1; sig < NSIG; sig++)
                if (sig != SIGKILL && sig != SIGSTOP && sigaddset(&mask, sig) == 0)
                        signal(sig, SIG_DFL);
        if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
                return log_error_errno(errno, "cannot block signals: %m");
        job->signal_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        if (job->signal_fd < 0)
                return log_error_errno(errno, "cannot create signalfd: %m");
        return 0;
}

/* --die-with-parent: the kernel sends SIGTERM when the parent dies, which
 * is then handled as any SIGTERM (forwarded, --kill-after armed). The
 * parent may already be gone: compare with the pid seen before prctl(). */
static int setup_parent_death(const struct config *c) {
        pid_t parent = getppid();

        if (!c->die_with_parent)
                return 0;
        if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0)
                return log_error_errno(errno, "cannot set the parent death signal: %m");
        if (getppid() != parent) {
                log_error("the parent process is already gone (--die-with-parent)");
                return -ESRCH;
        }
        return 0;
}

static int exit_status_of(int wait_status) {
        if (WIFEXITED(wait_status))
                return WEXITSTATUS(wait_status);
        if (WIFSIGNALED(wait_status))
                return 128 + WTERMSIG(wait_status);
        return EXIT_PREBIND_FAILED;
}

/* The state of one supervised COMMAND. */
struct supervisor {
        struct job *job;
        pid_t child;
        int pidfd;              /* -1 where pidfd_open() is missing: SIGCHLD alone */
        int kill_timer_fd;      /* --kill-after; -1 until armed */
        int ready_timer_fd;     /* --ready=TIMEOUT; -1 when not waiting */
        int restart_timer_fd;   /* --restart-delay; -1 when no restart is due */
        bool waiting_ready;     /* --ready, and no READY=1 yet */
        bool ready_timed_out;
        bool published;
        bool shutdown;          /* SIGTERM or SIGINT: no restart after this */
        bool restart_requested; /* SIGHUP with --restart */
        bool stopping;          /* told the manager STOPPING=1 */
        bool exited;            /* COMMAND has exited and is reaped */
        int status;             /* its last exit status */
        uint64_t *restarts;     /* when the last restart_burst restarts happened */
        unsigned n_restarts;
};

/* Reap every child that has exited: one SIGCHLD may stand for several,
 * and as PID 1 or a subreaper the orphans are ours to reap too. */
static void reap(struct supervisor *s) {
        pid_t pid;
        int status;

        while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
                if (pid == s->child) {
                        s->status = exit_status_of(status);
                        s->exited = true;
                }
}

static void signal_command(struct supervisor *s, int sig) {
        pid_t target = s->job->config->group ? -s->child : s->child;

        /* Between a COMMAND and its restart there is nobody to signal (and
         * kill(0) would signal prebind's own process group). */
        if (s->child <= 0)
                return;
        if (kill(target, sig) < 0 && errno != ESRCH)
                log_error("cannot send signal %d (%s) to %d: %m", sig, sigabbrev_np(sig) ?: "?", (int) target);
}

static int timer_start(int *fd, uint64_t usec) {
        struct itimerspec when = { .it_value = {
                .tv_sec = (time_t) (usec / USEC_PER_SEC),
                .tv_nsec = (long) (usec % USEC_PER_SEC) * 1000,
        } };

        if (*fd < 0)
                *fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
        if (*fd < 0 || timerfd_settime(*fd, 0, &when, NULL) < 0)
                return -errno;
        return 0;
}

static void timer_stop(int *fd) {
        if (*fd >= 0)
                close(*fd);
        *fd = -1;
}

static void tell_manager_stopping(struct supervisor *s) {
        if (!s->stopping)
                notify_manager("STOPPING=1");
        s->stopping = true;
}

/* Begin a shutdown: the --kill-after clock starts (once). */
static void begin_shutdown(struct supervisor *s, uint64_t kill_after_usec) {
        s->shutdown = true;
        tell_manager_stopping(s);
        if (kill_after_usec && s->kill_timer_fd < 0 && timer_start(&s->kill_timer_fd, kill_after_usec) < 0)
                log_error("cannot arm the kill timer: %m");
}

static void handle_signal(struct supervisor *s, const struct signalfd_siginfo *si) {
        struct signal_verdict v = signal_classify(si, s->job->config->group);
        int sig = (int) si->ssi_signo;

        if (v.reap)
                reap(s);
        if (v.reap || v.own)
                return;
        if (v.shutdown)
                begin_shutdown(s, s->job->config->kill_after_usec);
        else if (sig == SIGHUP && s->job->config->restart_set) {
                /* Restart on demand (a file watcher): stop COMMAND as for a
                 * shutdown, then start a new one at once; not forwarded. */
                log_info("SIGHUP: restarting '%s'", s->job->command[0]);
                s->restart_requested = true;
                signal_command(s, SIGTERM);
                if (s->job->config->kill_after_usec && s->kill_timer_fd < 0)
                        (void) timer_start(&s->kill_timer_fd, s->job->config->kill_after_usec);
                return;
        }
        if (v.forward) {
                log_debug("forwarding signal %d (SIG%s)", sig, sigabbrev_np(sig) ?: "?");
                signal_command(s, sig);
        }
        if (v.stop_self)
                raise(SIGSTOP);
}

static void drain_signals(struct supervisor *s) {
        struct signalfd_siginfo si;

        while (read(s->job->signal_fd, &si, sizeof si) == sizeof si)
                handle_signal(s, &si);
}

static void kill_after_expired(struct supervisor *s) {
        uint64_t ticks;

        if (read(s->kill_timer_fd, &ticks, sizeof ticks) != sizeof ticks)
                return;
        log_info("'%s' still running after --kill-after, sending SIGKILL", s->job->command[0]);
        signal_command(s, SIGKILL);
}

/* "Everything is listening": the addresses for prebind's own manager. */
static void tell_manager_ready(const struct job *job) {
        char status[4096], url[FIELD_STRING_MAX];
        size_t len;

        if (!getenv("NOTIFY_SOCKET"))
                return;

        len = (size_t) snprintf(status, sizeof status, "READY=1\nSTATUS=listening on");
        for (size_t i = 0; i < job->n_sockets && len < sizeof status; i++)
                len += (size_t) snprintf(status + len, sizeof status - len, "%s %s", i ? "," : "",
                                         socket_field_format(job->sockets, i, FIELD_URL, url, sizeof url));
        notify_manager(status);
}

/* Publish the addresses, then tell prebind's own manager: the one way
 * out for every mode. child_pid is COMMAND's (prebind's with --exec, 0
 * with --accept). Errors are logged by publish_addresses(). */
static int publish_job(struct job *job, pid_t child_pid) {
        int r = publish_addresses(job->config, job->sockets, job->n_sockets, getpid(), child_pid, &job->publication);

        if (r < 0)
                return r;
        tell_manager_ready(job);
        return 0;
}

/* Publish the addresses, the first time; after a restart, the sockets
 * and what was published are the same: only the manager hears again. */
static int publish(struct supervisor *s) {
        int r;

        if (s->published) {
                notify_manager("READY=1");
                return 0;
        }
        r = publish_job(s->job, s->child);
        if (r < 0)
                return r;
        s->published = true;
        return 0;
}

/* A notification counts if it comes from COMMAND, or from a process
 * descended from it at the time it is read (a server whose worker reports
 * for it): each sender's parent chain is walked in /proc. Anyone else,
 * even with a guessed socket name, is ignored. */
static bool sender_is_command(pid_t sender, pid_t child) {
        for (int depth = 0; depth < 64 && sender > 1; depth++) {
                char path[64], buf[512], *p;
                FILE *f;
                int ppid;

                if (sender == child)
                        return true;
                snprintf(path, sizeof path, "/proc/%d/stat", (int) sender);
                f = fopen(path, "re");
                if (!f)
                        return false;
                p = fgets(buf, sizeof buf, f) ? strrchr(buf, ')') : NULL;
                fclose(f);
                /* NOLINTNEXTLINE(cert-err34-c): the kernel wrote this number */
                if (!p || sscanf(p, ") %*c %d", &ppid) != 1)
                        return false;
                sender = ppid;
        }
        return false;
}

static void extend_ready_timeout(struct supervisor *s, uint64_t usec) {
        struct itimerspec left;
        uint64_t left_usec;

        /* As systemd: the timeout becomes at least usec from now. */
        if (s->ready_timer_fd < 0 || timerfd_gettime(s->ready_timer_fd, &left) < 0)
                return;
        left_usec = (uint64_t) left.it_value.tv_sec * USEC_PER_SEC + (uint64_t) left.it_value.tv_nsec / 1000;
        if (usec > left_usec)
                (void) timer_start(&s->ready_timer_fd, usec);
}

static int handle_notification(struct supervisor *s) {
        char buf[NOTIFY_MESSAGE_MAX + 1];
        struct notify_message m;
        pid_t sender;
        int r;

        while ((r = notify_socket_receive(&s->job->notify, buf, sizeof buf, &sender, &m)) >= 0) {
                if (r == 0)
                        continue;
                if (!sender_is_command(sender, s->child)) {
                        log_info("ignoring a notification from pid %d, which is not '%s' (pid %d)", (int) sender,
                                 s->job->command[0], (int) s->child);
                        continue;
                }
                if (m.status)
                        log_info("%s: %.*s", s->job->command[0], (int) m.status_len, m.status);
                if (m.errno_value >= 0)
                        log_info("%s: reports error %d (%s)", s->job->command[0], m.errno_value,
                                 strerror(m.errno_value));
                if (m.stopping)
                        log_debug("%s is stopping", s->job->command[0]);
                if (m.reloading)
                        log_debug("%s is reloading", s->job->command[0]);
                if (m.extend_usec && s->waiting_ready)
                        extend_ready_timeout(s, m.extend_usec);
                if (m.ready)
                        log_debug("READY=1 from pid %d", (int) sender);
                if (m.ready && s->waiting_ready) {
                        s->waiting_ready = false;
                        timer_stop(&s->ready_timer_fd);
                        if (publish(s) < 0)
                                return -EIO;
                }
        }
        return r == -EAGAIN || r == -EWOULDBLOCK ? 0 : r;
}

static void ready_timed_out(struct supervisor *s) {
        const uint64_t default_grace = 5 * USEC_PER_SEC;

        log_error("'%s' did not send READY=1 within %.1fs; stopping it", s->job->command[0],
                  (double) s->job->config->ready_timeout_usec / USEC_PER_SEC);
        timer_stop(&s->ready_timer_fd);
        s->waiting_ready = false;
        s->ready_timed_out = true;
        signal_command(s, SIGTERM);
        begin_shutdown(s, s->job->config->kill_after_usec ?: default_grace);
}

/* Was this the restart too many? At most restart_burst restarts within
 * restart_interval, as systemd's StartLimitBurst=/StartLimitIntervalSec=. */
static bool restart_limit_hit(struct supervisor *s) {
        const struct config *c = s->job->config;
        struct timespec ts;
        uint64_t now;

        if (c->restart_burst == 0)
                return false;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        now = (uint64_t) ts.tv_sec * USEC_PER_SEC + (uint64_t) ts.tv_nsec / 1000;
        if (s->n_restarts == c->restart_burst) {
                if (now - s->restarts[0] < c->restart_interval_usec)
                        return true;
                memmove(s->restarts, s->restarts + 1, (c->restart_burst - 1) * sizeof(uint64_t));
                s->n_restarts--;
        }
        s->restarts[s->n_restarts++] = now;
        return false;
}

static int start_command(struct supervisor *s);

/* COMMAND has exited: restart it, or not. Returns true when a new one is
 * running or due, false when prebind is done. */
static bool after_exit(struct supervisor *s) {
        const struct config *c = s->job->config;
        bool requested = s->restart_requested;
        bool wanted = c->restart == RESTART_ALWAYS || (c->restart == RESTART_ON_FAILURE && s->status != 0);

        /* What COMMAND said before it exited is queued already: hear it
         * (a last STATUS=, STOPPING=1) before going on. */
        if (s->job->notify.fd >= 0)
                (void) handle_notification(s);
        if (s->pidfd >= 0)
                close(s->pidfd);
        s->pidfd = -1;
        s->child = 0;
        s->exited = false;
        s->restart_requested = false;
        timer_stop(&s->kill_timer_fd);
        timer_stop(&s->ready_timer_fd);

        if (s->ready_timed_out || s->shutdown || !(requested || wanted))
                return false;
        if (!requested && restart_limit_hit(s)) {
                log_error("'%s' was restarted %u times within %.1fs: giving up", s->job->command[0],
                          c->restart_burst, (double) c->restart_interval_usec / USEC_PER_SEC);
                return false;
        }
        log_info("'%s' exited with status %d; restarting it", s->job->command[0], s->status);
        if (s->published)
                notify_manager("RELOADING=1");
        if (requested || c->restart_delay_usec == 0)
                return start_command(s) >= 0;
        if (timer_start(&s->restart_timer_fd, c->restart_delay_usec) < 0)
                return start_command(s) >= 0;
        return true;
}

/* Wait for COMMAND: signals (forwarded or reaped), its pidfd, its
 * notifications, the timers. No periodic wake-up. Returns 0 when prebind
 * is done (s->status is COMMAND's last), or -errno when it must give up
 * (it then kills COMMAND). */
static int supervise_loop(struct supervisor *s) {
        for (;;) {
                struct pollfd fds[6] = {
                        { .fd = s->job->signal_fd, .events = POLLIN },
                        { .fd = s->pidfd, .events = POLLIN },
                        { .fd = s->kill_timer_fd, .events = POLLIN },
                        { .fd = s->job->notify.fd, .events = POLLIN },
                        { .fd = s->ready_timer_fd, .events = POLLIN },
                        { .fd = s->restart_timer_fd, .events = POLLIN },
                };

                if (poll(fds, 6, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        return log_error_errno(errno, "poll: %m");
                }
                if (fds[0].revents)
                        drain_signals(s);
                if (fds[1].revents)
                        reap(s);
                if (fds[2].revents)
                        kill_after_expired(s);
                if (fds[3].revents && handle_notification(s) < 0)
                        return -EIO;
                if (fds[4].revents && s->waiting_ready)
                        ready_timed_out(s);
                if (fds[5].revents || (s->restart_timer_fd >= 0 && s->restart_requested)) {
                        /* The delay is over, or SIGHUP cut it short. */
                        timer_stop(&s->restart_timer_fd);
                        s->restart_requested = false;
                        if (!s->shutdown && start_command(s) < 0)
                                return 0;
                }
                if (s->exited && !after_exit(s))
                        return 0;
                if (s->child == 0 && s->restart_timer_fd >= 0 && s->shutdown) {
                        timer_stop(&s->restart_timer_fd);
                        return 0;
                }
        }
}

static int final_status(const struct supervisor *s) {
        const struct config *c = s->job->config;

        if (s->ready_timed_out)
                return EXIT_TIMEDOUT;
        return s->status >= 0 && s->status <= 255 && c->success_status[s->status] ? 0 : s->status;
}

/* --ready: COMMAND gets a NOTIFY_SOCKET of prebind's own. */
static int setup_readiness(struct job *job) {
        char *entry;
        int r;

        if (!job->config->ready)
                return 0;
        r = notify_socket_open(&job->notify);
        if (r < 0)
                return log_error_errno(r, "cannot create the notification socket: %m");
        if (asprintf(&entry, "NOTIFY_SOCKET=%s", job->notify.address) < 0)
                return log_error_errno(ENOMEM, "out of memory");
        job->setenv[job->n_setenv++] = entry;
        return 0;
}

static int start_command(struct supervisor *s) {
        struct job *job = s->job;
        const struct config *c = job->config;
        struct spawn_plan plan = {
                .command = job->command,
                .env = &job->env,
                .sockets = job->sockets,
                .n_sockets = job->n_sockets,
                .new_process_group = c->group,
                .passing = c->inetd ? PASS_ON_STDIN : PASS_FROM_FD3,
                .dispositions_are_default = true,       /* setup_signals() */
        };
        struct spawned child;
        int r, err;

        r = spawn_child(&plan, &child);
        if (r < 0) {
                /* pipe2() or fork(): out of fds or processes. */
                log_error_errno(r, "cannot start '%s': %m", job->command[0]);
                s->status = EXIT_PREBIND_FAILED;
                return r;
        }
        s->child = child.pid;

        /* Without --ready the addresses are published now, while the child
         * waits at its gate: before COMMAND runs, with its pid known. */
        if (!c->ready && publish(s) < 0) {
                /* Closing the gate unopened makes the child exit unexec'd. */
                close(child.gate_fd);
                close(child.error_fd);
                waitpid(child.pid, NULL, 0);
                s->child = 0;
                s->status = EXIT_PREBIND_FAILED;
                return -EIO;
        }

        err = spawn_release(&child);
        if (err > 0) {
                log_error_errno(err, "cannot run '%s': %m", job->command[0]);
                waitpid(child.pid, NULL, 0);
                s->child = 0;
                s->status = exec_error_to_status(err);
                return -err;
        }
        log_debug("started '%s' as pid %d", job->command[0], (int) child.pid);

        /* Our own child cannot be reaped by anyone else, so its pid is not
         * reused while we hold it: the pidfd is a precise exit event. */
        s->pidfd = (int) syscall(SYS_pidfd_open, child.pid, 0);
        if (c->ready) {
                s->waiting_ready = true;
                if (c->ready_timeout_usec && timer_start(&s->ready_timer_fd, c->ready_timeout_usec) < 0)
                        log_error("cannot arm the --ready timer: %m");
        }
        return 0;
}

static int run_supervised(struct job *job) {
        const struct config *c = job->config;
        struct supervisor s = {
                .job = job,
                .pidfd = -1,
                .kill_timer_fd = -1,
                .ready_timer_fd = -1,
                .restart_timer_fd = -1,
        };
        int r, status;

        if (setup_signals(job) < 0)
                return EXIT_PREBIND_FAILED;
        if (c->subreaper && prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
                return log_error_errno(errno, "cannot become a subreaper: %m"), EXIT_PREBIND_FAILED;
        if (c->accept) {
                /* The sockets listen: publish, then accept until stopped. */
                if (publish_job(job, 0) < 0)
                        return EXIT_PREBIND_FAILED;
                status = accept_loop(c, job->sockets, job->n_sockets, job->command, job->setenv, job->n_setenv,
                                     job->signal_fd);
                notify_manager("STOPPING=1");
                return status;
        }
        s.restarts = calloc(c->restart_burst ? c->restart_burst : 1, sizeof(uint64_t));
        if (!s.restarts)
                return log_error_errno(ENOMEM, "out of memory"), EXIT_PREBIND_FAILED;

        r = start_command(&s);
        if (r >= 0)
                r = supervise_loop(&s);
        else
                s.exited = false;
        if (r < 0 && s.child > 0) {
                signal_command(&s, SIGKILL);
                waitpid(s.child, NULL, 0);
                s.status = EXIT_PREBIND_FAILED;
        }
        tell_manager_stopping(&s);
        if (s.pidfd >= 0)
                close(s.pidfd);
        timer_stop(&s.kill_timer_fd);
        timer_stop(&s.ready_timer_fd);
        timer_stop(&s.restart_timer_fd);
        free(s.restarts);
        if (s.waiting_ready)
                log_error("'%s' exited before it was ready, with status %d", job->command[0], s.status);
        log_debug("'%s' ended, exit status %d", job->command[0], s.status);
        return final_status(&s);
}

static int run_in_place(struct job *job) {
        struct spawn_plan plan = {
                .command = job->command,
                .env = &job->env,
                .sockets = job->sockets,
                .n_sockets = job->n_sockets,
                .passing = job->config->inetd ? PASS_ON_STDIN : PASS_FROM_FD3,
        };
        int r;

        /* A reader gone from stdout must give EPIPE and exit 125, not
         * kill prebind; COMMAND gets SIGPIPE back by the reset in
         * spawn_exec_in_place(). */
        signal(SIGPIPE, SIG_IGN);
        /* The sockets listen: as far as a manager is concerned, the service
         * is ready (connections queue until COMMAND accepts). */
        if (publish_job(job, getpid()) < 0)
                return EXIT_PREBIND_FAILED;
        /* Laying out the fds can fail (out of fds): that is prebind's
         * failure (125), not COMMAND's (126/127). */
        r = spawn_prepare_in_place(&plan);
        if (r < 0)
                return log_error_errno(r, "cannot pass the sockets: %m"), EXIT_PREBIND_FAILED;
        r = spawn_exec_in_place(&plan);
        log_error_errno(r, "cannot run '%s': %m", job->command[0]);
        return exec_error_to_status(-r);
}

/* What the options ask of the sockets, now that the inherited ones are
 * known too: config_parse_argv() saw only those of -l. */
static int check_sockets(const struct job *job) {
        const struct config *c = job->config;

        if (c->inetd && !c->accept && job->n_sockets != 1) {
                log_error("--inetd without --accept passes one socket, on stdin: there are %zu, with those passed "
                          "to prebind", job->n_sockets);
                return -EINVAL;
        }
        for (size_t i = 0; c->accept && i < job->n_sockets; i++) {
                int listening = 0;
                socklen_t len = sizeof listening;

                /* A datagram or unconnected socket would make accept() fail
                 * at every poll(). */
                if (getsockopt(job->sockets[i].fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) < 0 || !listening) {
                        log_error("--accept takes listening stream sockets only: fd %zu (name '%s') is not one", 3 + i,
                                  job->sockets[i].name);
                        return -EINVAL;
                }
        }
        return 0;
}

int prebind_run(const struct config *config) {
        extern char **environ;
        struct job job = { .config = config, .signal_fd = -1, .notify = { .fd = -1 } };
        int status = EXIT_PREBIND_FAILED;

        if (setup_parent_death(config) < 0 || bind_all(&job) < 0 || check_sockets(&job) < 0 ||
            expand_templates(&job) < 0 || setup_readiness(&job) < 0)
                goto out;
        /* With --inetd the socket is on stdin: nothing at fd 3, no LISTEN_*.
         * --accept prepares its own, per-connection environment. */
        if (!config->accept && child_env_build(environ, job.setenv, job.n_setenv, job.sockets, config->inetd ? 0 : job.n_sockets,
                            &job.env) < 0) {
                log_error("out of memory");
                goto out;
        }
        /* job_done() frees job.sockets: clang's analyzer loses track of it
         * once &job.env has gone to child_env_build(), in another file. */
        status = config->exec ? run_in_place(&job) : run_supervised(&job); /* NOLINT(clang-analyzer-unix.Malloc) */
out:
        job_done(&job);
        return status;
}
