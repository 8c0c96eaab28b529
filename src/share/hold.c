/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exitcode.h"
#include "format.h"
#include "guard.h"
#include "log.h"
#include "macro.h"
#include "notify.h"
#include "publish.h"
#include "share-internal.h"

/* --share=NAME --status when no server runs, as systemctl status says
 * "not active". */
#define EXIT_NOT_RUNNING 3

/* SIGTERM, SIGINT and SIGHUP end the hold; PR_SET_PDEATHSIG sends
 * SIGTERM when the caller's parent goes. Read from a signalfd. */
static int hold_signals(void) {
        sigset_t set;
        int fd;

        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGINT);
        sigaddset(&set, SIGHUP);
        if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
                return -errno;
        fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
        if (fd < 0)
                return -errno;
        /* Writing the addresses to a reader that is gone: EPIPE, 125. */
        signal(SIGPIPE, SIG_IGN);
        return fd;
}

/* The holder ends with its parent (the test worker). The parent may be
 * gone already: compare with the pid seen before prctl() (FIELD-NOTES). */
static int tie_to_parent(void) {
        pid_t parent = getppid();

        if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0)
                return log_error_errno(errno, "--share: cannot set the parent death signal: %m");
        return getppid() == parent ? 0 : -ESRCH;
}

/* A stdin that is a pipe or a socket ends the hold when it hangs up:
 * a fixture that holds the other end lets go by closing it, or by dying.
 * Only hang-ups are watched (no POLLIN): nothing is read from it, so a
 * stdin the caller shares with others (execnet's pipe under xdist) is
 * left as it is. */
static bool stdin_watched(void) {
        struct stat st;

        return fstat(STDIN_FILENO, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode));
}

static void log_ended(const char *name, const struct share_message *m) {
        const char *tail = m->text;

        if (m->head.status == 0) {
                log_info("--share=%s: the server ended with status 0", name);
                return;
        }
        log_error("--share=%s: the server ended with exit status %d%s", name, m->head.status,
                  *tail ? "; the last lines of its output:" : "");
        if (*tail)
                fprintf(stderr, "%s%s", tail, tail[strlen(tail) - 1] == '\n' ? "" : "\n");
}

/* One message from the supervisor. Returns 1 to go on holding, or the
 * exit status. */
static int on_message(const struct share *s, const struct share_message *m, const struct publish_options *publish,
                      struct guard *guard, bool *published, struct publication *publication) {
        const char *name = s->options.name;
        struct bound_socket sockets[SHARE_SOCKETS_MAX];

        switch (m->head.kind) {
        case SHARE_READY:
                if (*published)
                        return 1;
                share_wire_to_sockets(m->sockets, m->head.n_sockets, sockets);
                if (publish_addresses(publish, sockets, m->head.n_sockets, (pid_t) m->head.pid,
                                      (pid_t) m->head.child_pid, guard, publication) < 0)
                        return EXIT_PREBIND_FAILED;
                *published = true;
                /* As a prebind that runs the server itself tells its manager. */
                notify_manager("READY=1");
                return 1;
        case SHARE_REFUSED:
                log_error("--share=%s runs another server: (%s), this call asks for (%s): refusing to attach", name,
                          m->text, s->description);
                return EXIT_PREBIND_FAILED;
        case SHARE_ENDED:
                log_ended(name, m);
                return m->head.status;
        default:
                log_error("--share=%s: unexpected message %u from the supervisor", name, m->head.kind);
                return EXIT_PREBIND_FAILED;
        }
}

static int hold_loop(struct share *s, int signal_fd, const struct publish_options *publish, struct guard *guard,
                     struct publication *publication) {
        struct pollfd fds[3] = {
                { .fd = s->conn_fd, .events = POLLIN },
                { .fd = signal_fd, .events = POLLIN },
                { .fd = stdin_watched() ? STDIN_FILENO : -1, .events = POLLRDHUP },
        };
        bool published = false;

        for (;;) {
                struct share_message m;
                int r;

                if (poll(fds, ELEMENTSOF(fds), -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        log_error_errno(errno, "--share: cannot wait: %m");
                        return EXIT_PREBIND_FAILED;
                }
                if (fds[1].revents || fds[2].revents)
                        return 0;
                if (!fds[0].revents)
                        continue;
                r = share_receive(s->conn_fd, 0, &m);
                if (r <= 0) {
                        log_error("--share=%s: the supervisor is gone%s", s->options.name,
                                  r == 0 ? "" : " (a message it sent cannot be read)");
                        return EXIT_PREBIND_FAILED;
                }
                r = on_message(s, &m, publish, guard, &published, publication);
                share_message_done(&m);
                if (r != 1)
                        return r;
        }
}

/* A holder that publishes a port file has a guard (guard.h) of its own:
 * killed with SIGKILL, it would leave the file naming a server that may
 * be gone, or another's once the port is reused. */
static int start_guard(const struct share *s, const struct publish_options *publish, struct guard **ret) {
        int r;

        *ret = NULL;
        if (!publish->port_file)
                return 0;
        r = guard_start(s->options.name, 0, ret);
        if (r < 0)
                return log_error_errno(r,
                                       "--share=%s: cannot start the guard that removes the port file if "
                                       "prebind is killed: %m",
                                       s->options.name);
        return 0;
}

static int attach(struct share *s, int signal_fd, const struct publish_options *publish, struct guard *guard,
                  struct publication *publication) {
        struct share_wire hold = { .kind = SHARE_HOLD };
        int r = share_send(s->conn_fd, &hold, NULL, s->description);

        /* A supervisor that ended at once (it could not bind) closed the
         * connection already: its SHARE_ENDED is still there to read. */
        if (r < 0 && r != -EPIPE && r != -ECONNRESET) {
                log_error_errno(r, "--share=%s: cannot attach: %m", s->options.name);
                return EXIT_PREBIND_FAILED;
        }
        return hold_loop(s, signal_fd, publish, guard, publication);
}

int share_hold(struct share *s, const struct publish_options *publish) {
        struct publication publication = { .port_file_fd = -1 };
        _cleanup_close_ int signal_fd = hold_signals();
        struct guard *guard = NULL;
        int r, status;

        if (signal_fd < 0) {
                log_error_errno(signal_fd, "--share: cannot block signals: %m");
                return EXIT_PREBIND_FAILED;
        }
        if (start_guard(s, publish, &guard) < 0)
                return EXIT_PREBIND_FAILED;
        r = tie_to_parent();
        if (r == -ESRCH)
                status = 0;
        else if (r < 0)
                status = EXIT_PREBIND_FAILED;
        else
                status = attach(s, signal_fd, publish, guard, &publication);
        publication_withdraw(&publication);
        guard_free(guard);
        return status;
}

static void print_state(const char *name, const struct share_message *m) {
        struct bound_socket sockets[SHARE_SOCKETS_MAX];
        char url[FIELD_STRING_MAX];

        printf("%s: running, %s; supervisor pid %d, server pid %d, %u holder%s\n", name,
               m->head.ready ? "ready" : "starting", (int) m->head.pid, (int) m->head.child_pid, m->head.holders,
               m->head.holders == 1 ? "" : "s");
        share_wire_to_sockets(m->sockets, m->head.n_sockets, sockets);
        for (size_t i = 0; i < m->head.n_sockets; i++)
                printf("  listening on %s\n", socket_field_format(sockets, i, FIELD_URL, url, sizeof url));
        printf("  runs: %s\n", m->text);
}

/* --stop: wait for the supervisor to end (it closes the connection). */
static int wait_stopped(int fd) {
        for (;;) {
                struct share_message m;
                int r = share_receive(fd, 0, &m);

                if (r <= 0)
                        return 0;
                share_message_done(&m);
        }
}

int share_query(const struct share_options *o) {
        struct share_paths paths;
        struct share_wire request = { .kind = o->action == SHARE_ACTION_STOP ? SHARE_STOP : SHARE_STATUS };
        struct share_message m;
        _cleanup_close_ int fd = -EBADF;
        int r;

        if (share_paths(o->name, false, &paths) < 0)
                return EXIT_PREBIND_FAILED;
        r = share_connect(paths.sock, &fd);
        share_paths_done(&paths);
        if (r == -ENOENT || r == -ECONNREFUSED) {
                if (o->action == SHARE_ACTION_STOP) {
                        log_info("--share=%s: not running", o->name);
                        return 0;
                }
                printf("%s: not running\n", o->name);
                return EXIT_NOT_RUNNING;
        }
        if (r < 0) {
                log_error_errno(r, "--share=%s: cannot connect: %m", o->name);
                return EXIT_PREBIND_FAILED;
        }
        r = share_send(fd, &request, NULL, NULL);
        if (r < 0) {
                log_error_errno(r, "--share=%s: cannot ask: %m", o->name);
                return EXIT_PREBIND_FAILED;
        }
        if (o->action == SHARE_ACTION_STOP)
                return wait_stopped(fd);
        r = share_receive(fd, 0, &m);
        if (r <= 0 || m.head.kind != SHARE_STATE) {
                if (r > 0)
                        share_message_done(&m);
                /* It was ending just then. */
                printf("%s: not running\n", o->name);
                return EXIT_NOT_RUNNING;
        }
        print_state(o->name, &m);
        share_message_done(&m);
        return fflush(stdout) == 0 ? 0 : EXIT_PREBIND_FAILED;
}
