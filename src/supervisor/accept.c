/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "accept.h"
#include "format.h"
#include "listener.h"
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
        struct listener *listeners; /* one per socket of the job */
        bool stopping;
        int error; /* accepting cannot go on: -errno */
};

/* Accept while not stopping and below --max-connections: otherwise the
 * listening sockets leave the loop, and new connections wait in the
 * backlog. Watching again is also what ends a back-off when a handler
 * ended (an fd is free). */
static void update_accepting(struct acceptor *a);

static void signal_connections(struct acceptor *a, int sig);

/* Accepting cannot go on: stop as for SIGTERM. */
static void give_up_accepting(struct acceptor *a, int error) {
        a->error = error;
        a->stopping = true;
        signal_connections(a, SIGTERM);
}

static void update_accepting(struct acceptor *a) {
        bool want = !a->stopping && a->running < a->config->max_connections;

        for (size_t i = 0; want && i < a->job->n_sockets; i++) {
                int r = listener_watch(&a->listeners[i], a->loop);

                if (r < 0) {
                        give_up_accepting(a, log_error_errno(r, "cannot wait for connections: %m"));
                        want = false;
                }
        }
        if (!want)
                for (size_t i = 0; i < a->job->n_sockets; i++)
                        listener_pause(&a->listeners[i]);
}

static void stop_on_error(struct acceptor *a, int error) {
        give_up_accepting(a, error);
        update_accepting(a);
}

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
        update_accepting(a);
        return false;
}

static void on_signal(const struct signalfd_siginfo *si, struct signal_verdict v, void *userdata) {
        struct acceptor *a = userdata;

        if (v.reap) {
                reap_connections(a);
                update_accepting(a);
        }
        if (v.reap || v.own)
                return;
        if (v.shutdown) {
                a->stopping = true;
                update_accepting(a);
        }
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

static void accept_broken(struct listener *lst, int error, void *userdata) {
        stop_on_error(userdata, log_error_errno(error, "cannot accept a connection: %m; stopping"));
}

/* One environment for every connection: the peer and LISTEN_PID are
 * written into their slots just before each start. */
static int prepare(struct acceptor *a) {
        const struct job *job = a->job;
        struct bound_socket conn_name = { .fd = -1, .name = "connection" };

        a->children = calloc(a->config->max_connections, sizeof(pid_t));
        a->setenv = calloc(job->n_setenv + 3, sizeof(char *));
        a->listeners = calloc(job->n_sockets, sizeof *a->listeners);
        if (!a->children || !a->setenv || !a->listeners)
                return -ENOMEM;
        for (size_t i = 0; i < job->n_sockets; i++) {
                /* Only prebind accepts on these: non-blocking, so that a
                 * client gone between the wake-up and accept() cannot
                 * block the loop. */
                (void) fcntl(job->sockets[i].fd, F_SETFL, fcntl(job->sockets[i].fd, F_GETFL) | O_NONBLOCK);
                listener_init(&a->listeners[i], &(struct listener_params) {
                                                        .fd = job->sockets[i].fd,
                                                        /* The connection's fd is COMMAND's stdin or
                                                         * fd 3: blocking. */
                                                        .flags = SOCK_CLOEXEC,
                                                        .name = "--accept",
                                                        .accepted = start_connection,
                                                        .broken = accept_broken,
                                                        .userdata = a,
                                                });
        }
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
        for (size_t i = 0; a->listeners && i < a->job->n_sockets; i++)
                listener_pause(&a->listeners[i]);
        free(a->listeners);
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
        if (r < 0 || (r = loop_add(a.loop, job->signal_fd, LOOP_IN, on_signalfd, &a)) < 0)
                return log_error_errno(r, "cannot watch the event sources: %m");

        update_accepting(&a);
        while (!a.stopping || a.running > 0) {
                r = loop_dispatch_once(a.loop, -1);
                if (r < 0)
                        stop_on_error(&a, log_error_errno(r, "cannot wait for connections: %m"));
        }
        notify_manager("STOPPING=1");
        if (a.error < 0)
                return a.error;
        *ret = (struct outcome) { OUTCOME_EXITED, 0 };
        return 0;
}
