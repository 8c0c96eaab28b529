/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "accept.h"
#include "format.h"
#include "log.h"
#include "loop.h"
#include "macro.h"
#include "notify.h"
#include "process.h"
#include "signals.h"
#include "spawn.h"

struct acceptor {
        const struct config *config;
        struct job *job;
        struct loop *loop;
        char **setenv; /* the -E entries, then REMOTE_ADDR and REMOTE_PORT */
        char remote_addr[ADDRESS_STRING_MAX + 16];
        char remote_port[32];
        struct child_env env; /* built once; the REMOTE_* and LISTEN_PID slots change */
        char *path;           /* COMMAND, resolved once */
        pid_t *children;      /* running COMMANDs, max_connections slots; 0 = free */
        unsigned running;
        bool accepting;   /* the listening sockets are on the loop */
        bool backing_off; /* out of fds: off the loop for one wait */
        bool out_of_fds;  /* since the last accept that worked */
        bool stopping;
        int error; /* accepting cannot go on: -errno */
};

static void reap_connections(struct acceptor *a) {
        pid_t pid;
        int status;

        while (reap_one(&pid, &status) > 0)
                for (unsigned i = 0; i < a->config->max_connections; i++)
                        if (a->children[i] == pid) {
                                a->children[i] = 0;
                                a->running--;
                                log_debug("connection handler %d ended, status %d", (int) pid, status);
                                break;
                        }
}

static void signal_connections(struct acceptor *a, int sig) {
        for (unsigned i = 0; i < a->config->max_connections; i++)
                (void) signal_process(a->children[i], a->config->group, sig);
}

/* The peer, as systemd sets it for Accept=yes services (a unix peer has
 * no port: REMOTE_PORT is then empty). */
static void set_remote(struct acceptor *a, const union sockaddr_any *peer, socklen_t len) {
        char host[ADDRESS_STRING_MAX];
        int port = sockaddr_port(peer);

        snprintf(a->remote_addr, sizeof a->remote_addr, "REMOTE_ADDR=%s",
                 sockaddr_host_to_string(peer, len, host, sizeof host) ?: "");
        if (port >= 0)
                snprintf(a->remote_port, sizeof a->remote_port, "REMOTE_PORT=%d", port);
        else
                snprintf(a->remote_port, sizeof a->remote_port, "REMOTE_PORT=");
}

/* One connection per wake-up: then the loop hears signals and handlers'
 * ends before the next. */
static bool start_connection(int conn_fd, const union sockaddr_any *peer, socklen_t peer_len, void *userdata) {
        struct acceptor *a = userdata;
        struct bound_socket conn = { .fd = conn_fd, .name = "connection", .type = SOCK_STREAM };
        struct spawn_plan plan = {
                .command = a->job->command,
                .env = &a->env,
                .sockets = &conn,
                .n_sockets = 1,
                .new_process_group = a->config->group,
                .passing = a->config->inetd ? PASS_ON_STDIN_STDOUT : PASS_FROM_FD3,
                .death_signal = config_death_signal(a->config),
        };
        pid_t pid;

        if (a->out_of_fds)
                log_info("accepting connections again");
        a->out_of_fds = false;
        set_remote(a, peer, peer_len);
        pid = spawn_connection(&plan, a->path);
        close(conn.fd);
        if (pid < 0) {
                log_error_errno((int) pid, "cannot start '%s': %m", a->job->command[0]);
                return false;
        }
        for (unsigned i = 0; i < a->config->max_connections; i++)
                if (a->children[i] == 0) {
                        a->children[i] = pid;
                        a->running++;
                        break;
                }
        return false;
}

static void on_signal(const struct signalfd_siginfo *si, struct signal_verdict v, void *userdata) {
        struct acceptor *a = userdata;

        if (v.reap)
                reap_connections(a);
        if (v.reap || v.own)
                return;
        if (v.shutdown)
                a->stopping = true;
        if (v.forward)
                signal_connections(a, (int) si->ssi_signo);
        if (v.stop_self)
                raise(SIGSTOP);
}

static int on_signalfd(struct loop *l, int fd, uint32_t revents, void *userdata) {
        struct acceptor *a = userdata;

        signals_drain(fd, a->config->group, on_signal, a);
        return 0;
}

static int on_listening(struct loop *l, int fd, uint32_t revents, void *userdata) {
        struct acceptor *a = userdata;
        int r;

        if (a->stopping || a->running >= a->config->max_connections)
                return 0;
        /* The connection's fd is COMMAND's stdin or fd 3: blocking. */
        r = accept_each(fd, SOCK_CLOEXEC, 0, start_connection, a);
        if (r < 0 && accept_failure_of(-r) == ACCEPT_FAILURE_BACK_OFF) {
                /* The connection waits in the backlog until a handler
                 * ends or ACCEPT_BACK_OFF_USEC passed; said once per
                 * spell, not once per try. */
                if (!a->out_of_fds)
                        log_error_errno(r, "cannot accept a connection: %m; trying again as fds free up");
                a->out_of_fds = a->backing_off = true;
        } else if (r < 0) {
                /* Stop as for SIGTERM, and say so once. */
                a->error = log_error_errno(r, "cannot accept a connection: %m; stopping");
                a->stopping = true;
                signal_connections(a, SIGTERM);
        }
        return 0;
}

/* At the limit, or stopping, the listening sockets leave the loop: new
 * connections wait in the backlog. */
static int set_accepting(struct acceptor *a, bool accepting) {
        const struct job *job = a->job;
        int r;

        if (accepting == a->accepting)
                return 0;
        for (size_t i = 0; i < job->n_sockets; i++) {
                if (!accepting) {
                        loop_remove(a->loop, job->sockets[i].fd);
                        continue;
                }
                r = loop_add(a->loop, job->sockets[i].fd, EPOLLIN, on_listening, a);
                if (r < 0)
                        return r;
        }
        a->accepting = accepting;
        return 0;
}

/* One environment for every connection: the peer and LISTEN_PID are
 * written into their slots just before each start. */
static int prepare(struct acceptor *a) {
        const struct job *job = a->job;
        struct bound_socket conn_name = { .fd = -1, .name = "connection" };

        a->children = calloc(a->config->max_connections, sizeof(pid_t));
        a->setenv = calloc(job->n_setenv + 3, sizeof(char *));
        if (!a->children || !a->setenv)
                return -ENOMEM;
        /* Only prebind accepts on these: non-blocking, so that a client
         * gone between the wake-up and accept() cannot block the loop. */
        for (size_t i = 0; i < job->n_sockets; i++)
                (void) fcntl(job->sockets[i].fd, F_SETFL, fcntl(job->sockets[i].fd, F_GETFL) | O_NONBLOCK);
        if (job->n_setenv)
                memcpy(a->setenv, job->setenv, job->n_setenv * sizeof(char *));
        /* The slots must hold "NAME=" already: child_env_build() keeps
         * pointers to them, and takes an entry without '=' as a name to
         * look up. */
        snprintf(a->remote_addr, sizeof a->remote_addr, "REMOTE_ADDR=");
        snprintf(a->remote_port, sizeof a->remote_port, "REMOTE_PORT=");
        a->setenv[job->n_setenv] = a->remote_addr;
        a->setenv[job->n_setenv + 1] = a->remote_port;
        return child_env_build(environ, a->setenv, job->n_setenv + 2, &conn_name, a->config->inetd ? 0 : 1, &a->env);
}

static void acceptor_done(struct acceptor *a) {
        child_env_done(&a->env);
        free(a->path);
        free(a->children);
        free(a->setenv);
        loop_free(a->loop);
}

int accept_run(struct job *job, struct outcome *ret) {
        _cleanup_(acceptor_done) struct acceptor a = { .config = job->config, .job = job };
        int r;

        if (prepare(&a) < 0)
                return log_oom();
        /* A COMMAND that cannot be found or run is told before anything
         * is published: no client is sent to a server that never runs. */
        r = command_resolve(job->command[0], a.env.envp, &a.path);
        if (r == -ENOMEM)
                return log_oom();
        if (r < 0) {
                log_error_errno(r, "cannot run '%s': %m", job->command[0]);
                *ret = (struct outcome) { OUTCOME_EXEC_FAILED, -r };
                return 0;
        }
        /* The sockets listen: publish, then accept until stopped. */
        r = job_publish(job, 0);
        if (r < 0)
                return r;
        r = loop_new(&a.loop);
        if (r < 0 || (r = loop_add(a.loop, job->signal_fd, EPOLLIN, on_signalfd, &a)) < 0)
                return log_error_errno(r, "cannot watch the event sources: %m");

        while (!a.stopping || a.running > 0) {
                /* Backing off: the sockets are off the loop for one wait,
                 * which a handler's end (SIGCHLD) or ACCEPT_BACK_OFF_USEC
                 * ends (no timerfd: there may be no fd for one). */
                bool pause = a.backing_off;

                a.backing_off = false;
                r = set_accepting(&a, !a.stopping && a.running < a.config->max_connections && !pause);
                if (r >= 0)
                        r = loop_dispatch_once(a.loop, pause ? (int) (ACCEPT_BACK_OFF_USEC / USEC_PER_MSEC) : -1);
                if (r < 0) {
                        a.error = log_error_errno(r, "cannot wait for connections: %m");
                        a.stopping = true;
                        signal_connections(&a, SIGTERM);
                }
        }
        notify_manager("STOPPING=1");
        if (a.error < 0)
                return a.error;
        *ret = (struct outcome) { OUTCOME_EXITED, 0 };
        return 0;
}
