/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "accept.h"
#include "format.h"
#include "log.h"
#include "signals.h"
#include "spawn.h"

struct acceptor {
        const struct config *config;
        const struct bound_socket *sockets;
        size_t n_sockets;
        char **command;
        char **setenv;          /* the -E entries, then REMOTE_ADDR and REMOTE_PORT */
        char remote_addr[ADDRESS_STRING_MAX + 16];
        char remote_port[32];
        struct child_env env;   /* built once; the REMOTE_* and LISTEN_PID slots change */
        char *path;             /* COMMAND, resolved once */
        pid_t *children;        /* running COMMANDs, max_connections slots; 0 = free */
        unsigned running;
        bool stopping;
};

extern char **environ;

static void reap_connections(struct acceptor *a) {
        pid_t pid;
        int status;

        while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
                for (unsigned i = 0; i < a->config->max_connections; i++)
                        if (a->children[i] == pid) {
                                a->children[i] = 0;
                                a->running--;
                                log_debug("connection handler %d ended, status %d", (int) pid,
                                          WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
                                break;
                        }
}

static void signal_connections(struct acceptor *a, int sig) {
        for (unsigned i = 0; i < a->config->max_connections; i++)
                if (a->children[i] > 0)
                        (void) kill(a->config->group ? -a->children[i] : a->children[i], sig);
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

/* Errors that concern one connection, or none: accept(2) says to treat
 * the pending network errors like EAGAIN. Anything else (EMFILE, ENFILE,
 * ENOBUFS, ENOMEM, EINVAL…) leaves the connection in the backlog, and
 * poll() would report it again at once: a busy loop. */
static bool accept_error_is_transient(int err) {
        switch (err) {
        case EAGAIN:
        case EINTR:
        case ECONNABORTED:
        case EPROTO:
        case EPERM:
        case ENETDOWN:
        case ENOPROTOOPT:
        case EHOSTDOWN:
        case ENONET:
        case EHOSTUNREACH:
        case EOPNOTSUPP:
        case ENETUNREACH:
                return true;
        default:
                return false;
        }
}

/* Returns 0, or -errno when accepting cannot go on. */
static int start_connection(struct acceptor *a, int listen_fd) {
        union sockaddr_any peer;
        socklen_t peer_len = sizeof peer;
        struct bound_socket conn = { .name = "connection", .type = SOCK_STREAM };
        struct spawn_plan plan = {
                .command = a->command,
                .env = &a->env,
                .sockets = &conn,
                .n_sockets = 1,
                .new_process_group = a->config->group,
                .passing = a->config->inetd ? PASS_ON_STDIN_STDOUT : PASS_FROM_FD3,
        };
        pid_t pid;

        conn.fd = accept4(listen_fd, &peer.sa, &peer_len, SOCK_CLOEXEC);
        if (conn.fd < 0)
                return accept_error_is_transient(errno) ? 0 : -errno;
        set_remote(a, &peer, peer_len);
        pid = spawn_connection(&plan, a->path);
        close(conn.fd);
        if (pid < 0) {
                log_error_errno((int) pid, "cannot start '%s': %m", a->command[0]);
                return 0;
        }
        for (unsigned i = 0; i < a->config->max_connections; i++)
                if (a->children[i] == 0) {
                        a->children[i] = pid;
                        a->running++;
                        break;
                }
        return 0;
}

static void handle_signal(struct acceptor *a, const struct signalfd_siginfo *si) {
        struct signal_verdict v = signal_classify(si, a->config->group);

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

int accept_loop(const struct config *config, const struct bound_socket *sockets, size_t n_sockets,
                char **command, char *const *setenv, size_t n_setenv, int signal_fd) {
        struct acceptor a = {
                .config = config,
                .sockets = sockets,
                .n_sockets = n_sockets,
                .command = command,
        };
        struct bound_socket conn_name = { .fd = -1 };
        struct pollfd *fds;
        int status = 0, r;

        a.children = calloc(config->max_connections, sizeof(pid_t));
        a.setenv = calloc(n_setenv + 3, sizeof(char *));
        fds = calloc(n_sockets + 1, sizeof *fds);
        if (!a.children || !a.setenv || !fds) {
                log_error("out of memory");
                status = EXIT_PREBIND_FAILED;
                goto out;
        }
        /* Only prebind accepts on these: non-blocking, so that a client
         * gone between poll() and accept() cannot block the loop. */
        for (size_t i = 0; i < n_sockets; i++)
                (void) fcntl(sockets[i].fd, F_SETFL, fcntl(sockets[i].fd, F_GETFL) | O_NONBLOCK);
        if (n_setenv)
                memcpy(a.setenv, setenv, n_setenv * sizeof(char *));
        /* The slots must hold "NAME=" already: child_env_build() keeps
         * pointers to them, and takes an entry without '=' as a name to
         * look up. */
        snprintf(a.remote_addr, sizeof a.remote_addr, "REMOTE_ADDR=");
        snprintf(a.remote_port, sizeof a.remote_port, "REMOTE_PORT=");
        a.setenv[n_setenv] = a.remote_addr;
        a.setenv[n_setenv + 1] = a.remote_port;
        /* One environment for every connection: the peer and LISTEN_PID
         * are written into their slots just before each start. */
        conn_name.name = "connection";
        if (child_env_build(environ, a.setenv, n_setenv + 2, &conn_name, config->inetd ? 0 : 1, &a.env) < 0) {
                log_error("out of memory");
                status = EXIT_PREBIND_FAILED;
                goto out;
        }
        r = command_resolve(command[0], a.env.envp, &a.path);
        if (r < 0) {
                log_error_errno(r, "cannot run '%s': %m", command[0]);
                status = r == -ENOMEM ? EXIT_PREBIND_FAILED : exec_error_to_status(-r);
                goto out;
        }

        fds[0] = (struct pollfd) { .fd = signal_fd, .events = POLLIN };
        while (!a.stopping || a.running > 0) {
                /* At the limit, or stopping, the listening sockets are not
                 * polled: new connections wait in the backlog. */
                bool accepting = !a.stopping && a.running < config->max_connections;

                for (size_t i = 0; i < n_sockets; i++)
                        fds[i + 1] = (struct pollfd) { .fd = accepting ? sockets[i].fd : -1, .events = POLLIN };
                if (poll(fds, n_sockets + 1, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        status = EXIT_PREBIND_FAILED;
                        log_error("poll: %m");
                        break;
                }
                if (fds[0].revents) {
                        struct signalfd_siginfo si;
                        while (read(signal_fd, &si, sizeof si) == sizeof si)
                                handle_signal(&a, &si);
                }
                for (size_t i = 0; i < n_sockets && !a.stopping; i++) {
                        if (!fds[i + 1].revents || a.running >= config->max_connections)
                                continue;
                        r = start_connection(&a, sockets[i].fd);
                        if (r < 0) {
                                /* Stop as for SIGTERM, and say so once. */
                                log_error_errno(r, "cannot accept a connection: %m; stopping");
                                status = EXIT_PREBIND_FAILED;
                                a.stopping = true;
                                signal_connections(&a, SIGTERM);
                        }
                }
        }
out:
        child_env_done(&a.env);
        free(a.path);
        free(a.children);
        free(a.setenv);
        free(fds);
        return status;
}
