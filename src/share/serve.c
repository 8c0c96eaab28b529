/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "listener.h"
#include "log.h"
#include "loop.h"
#include "share-internal.h"

static int on_conn(struct loop *l, int fd, uint32_t revents, void *userdata);

static size_t count(const struct share *s, enum share_conn_kind kind) {
        size_t n = 0;

        for (size_t i = 0; i < s->n_conns; i++)
                n += s->conns[i].kind == kind;
        return n;
}

/* Holders, and connections that may be holders still attaching: the
 * server stays while there is one. --status and --stop do not count,
 * or polling --status would keep a server from ever lingering out. */
static bool held(const struct share *s) {
        return count(s, SHARE_CONN_HOLDER) + count(s, SHARE_CONN_NEW) > 0;
}

static struct share_conn *conn_of(struct share *s, int fd) {
        for (size_t i = 0; i < s->n_conns; i++)
                if (s->conns[i].fd == fd)
                        return &s->conns[i];
        return NULL;
}

static int on_linger(struct loop *l, struct loop_timer *t, void *userdata);

/* Nobody holds it: the server stops after --share-linger, unless
 * someone attaches in between. */
static void arm_linger(struct share *s) {
        uint64_t linger = s->options.linger_usec;

        if (s->stopping || held(s) || linger == UINT64_MAX || s->linger.armed)
                return;
        log_debug("--share=%s: no holder left; stopping in %.1fs", s->options.name, (double) linger / USEC_PER_SEC);
        loop_timer_start(s->loop, &s->linger, linger, on_linger, s);
}

static void drop_conn(struct share *s, int fd) {
        struct share_conn *c = conn_of(s, fd);

        if (!c)
                return;
        if (s->loop)
                loop_remove(s->loop, fd);
        close(fd);
        *c = s->conns[--s->n_conns];
        if (!s->loop)
                return;
        /* An fd is free: a back-off ends. */
        if (s->listen_fd >= 0)
                (void) listener_watch(&s->listener, s->loop);
        arm_linger(s);
}

static void add_conn(struct share *s, int fd) {
        struct share_conn *grown;
        int r;

        if (share_check_peer(fd) < 0) {
                /* The directory is 0700: only root gets here. */
                log_error("--share: refusing a connection from another user");
                close(fd);
                return;
        }
        grown = realloc(s->conns, (s->n_conns + 1) * sizeof *grown);
        if (!grown) {
                log_oom();
                close(fd);
                return;
        }
        s->conns = grown;
        if (s->loop && (r = loop_add(s->loop, fd, LOOP_IN, on_conn, s)) < 0) {
                log_error_errno(r, "--share: cannot watch a connection: %m");
                close(fd);
                return;
        }
        s->conns[s->n_conns++] = (struct share_conn) { .fd = fd, .kind = SHARE_CONN_NEW };
}

static bool take_conn(int fd, const union sockaddr_any *peer, socklen_t peer_len, void *userdata) {
        add_conn(userdata, fd);
        return true;
}

static void accept_broken(struct listener *lst, int error, void *userdata) {
        struct share *s = userdata;

        log_error_errno(error, "--share=%s: cannot accept: %m; nobody else can attach", s->options.name);
}

static void listener_setup(struct share *s) {
        listener_init(&s->listener, &(struct listener_params) {
                                            .fd = s->listen_fd,
                                            .flags = SOCK_CLOEXEC | SOCK_NONBLOCK,
                                            .name = "--share",
                                            .accepted = take_conn,
                                            .broken = accept_broken,
                                            .userdata = s,
                                    });
}

void share_accept_pending(struct share *s) {
        if (s->listen_fd < 0)
                return;
        /* Never served (the job failed first): share_finish() still tells
         * whoever connected. */
        if (!s->listener.p.accepted)
                listener_setup(s);
        listener_accept_now(&s->listener);
}

static int send_ready(const struct share *s, int fd) {
        struct share_wire ready = {
                .kind = SHARE_READY,
                .pid = (int32_t) s->supervisor_pid,
                .child_pid = (int32_t) s->child_pid,
                .n_sockets = (uint32_t) s->n_sockets,
        };

        return share_send(fd, &ready, s->sockets, NULL);
}

static void send_state(const struct share *s, int fd) {
        struct share_wire state = {
                .kind = SHARE_STATE,
                .pid = (int32_t) s->supervisor_pid,
                .child_pid = (int32_t) s->child_pid,
                .holders = (uint32_t) count(s, SHARE_CONN_HOLDER),
                .ready = s->ready,
                .n_sockets = s->ready ? (uint32_t) s->n_sockets : 0,
        };

        (void) share_send(fd, &state, s->sockets, s->description);
}

/* Under the lock: nobody may attach any more; the next caller starts a
 * new server. Then stop COMMAND (once). */
static void begin_stop(struct share *s) {
        if (s->stopping)
                return;
        s->stopping = true;
        loop_timer_stop(s->loop, &s->linger);
        s->stop(s->userdata);
}

static int on_linger(struct loop *l, struct loop_timer *t, void *userdata) {
        struct share *s = userdata;

        /* A caller connects under the lock: either it did before we took
         * it (and its connection is in the backlog: accepted here, so the
         * server stays), or it finds the name gone and starts anew. */
        share_lock(s);
        share_accept_pending(s);
        if (!held(s)) {
                share_give_up_name(s);
                log_info("--share=%s: no holder for %.1fs: stopping the server", s->options.name,
                         (double) s->options.linger_usec / USEC_PER_SEC);
        }
        share_unlock(s);
        if (!held(s))
                begin_stop(s);
        return 0;
}

static void on_message(struct share *s, struct share_conn *c, const struct share_message *m) {
        struct share_wire refused = { .kind = SHARE_REFUSED, .pid = (int32_t) s->supervisor_pid };

        switch (m->head.kind) {
        case SHARE_HOLD:
                if (strcmp(m->text, s->description) != 0) {
                        (void) share_send(c->fd, &refused, NULL, s->description);
                        drop_conn(s, c->fd);
                        return;
                }
                c->kind = SHARE_CONN_HOLDER;
                /* A holder during the linger keeps the server. */
                loop_timer_stop(s->loop, &s->linger);
                if (s->ready && send_ready(s, c->fd) < 0)
                        drop_conn(s, c->fd);
                return;
        case SHARE_STATUS:
                c->kind = SHARE_CONN_QUERY;
                send_state(s, c->fd);
                drop_conn(s, c->fd);
                return;
        case SHARE_STOP:
                c->kind = SHARE_CONN_QUERY;
                log_info("--share=%s: --stop: stopping the server", s->options.name);
                share_lock(s);
                share_give_up_name(s);
                share_unlock(s);
                /* The connection stays: --stop waits for the end. */
                begin_stop(s);
                return;
        default:
                drop_conn(s, c->fd);
        }
}

static int on_conn(struct loop *l, int fd, uint32_t revents, void *userdata) {
        struct share *s = userdata;
        struct share_conn *c = conn_of(s, fd);
        struct share_message m;
        int r;

        if (!c)
                return 0;
        r = share_receive(fd, MSG_DONTWAIT, &m);
        if (r == -EAGAIN)
                return 0;
        if (r <= 0) {
                /* Gone (exit, kill -9: the kernel closes it), or garbage. */
                drop_conn(s, fd);
                return 0;
        }
        on_message(s, c, &m);
        share_message_done(&m);
        return 0;
}

int share_serve(struct share *s, struct loop *loop, share_stop_fn stop, void *userdata) {
        int r;

        s->loop = loop;
        s->stop = stop;
        s->userdata = userdata;
        listener_setup(s);
        if (s->listen_fd >= 0 && (r = listener_watch(&s->listener, loop)) < 0)
                return log_error_errno(r, "--share: cannot watch '%s': %m", s->paths.sock);
        for (size_t i = 0; i < s->n_conns; i++)
                if ((r = loop_add(loop, s->conns[i].fd, LOOP_IN, on_conn, s)) < 0)
                        return log_error_errno(r, "--share: cannot watch a connection: %m");
        /* The first caller's connection waits in the backlog. */
        share_accept_pending(s);
        arm_linger(s);
        return 0;
}

void share_serve_end(struct share *s) {
        if (!s || !s->loop)
                return;
        loop_timer_stop(s->loop, &s->linger);
        listener_pause(&s->listener);
        for (size_t i = 0; i < s->n_conns; i++)
                loop_remove(s->loop, s->conns[i].fd);
        s->loop = NULL;
}

void share_ready(struct share *s, const struct bound_socket *sockets, size_t n, pid_t child_pid) {
        if (!s || s->ready)
                return;
        if (n > SHARE_SOCKETS_MAX)
                n = SHARE_SOCKETS_MAX;
        s->sockets = calloc(n + 1, sizeof *s->sockets);
        if (!s->sockets) {
                log_oom();
                return;
        }
        share_wire_from_sockets(sockets, n, s->sockets);
        s->n_sockets = n;
        s->child_pid = child_pid;
        s->ready = true;
        for (size_t i = 0; i < s->n_conns;) {
                int fd = s->conns[i].fd;

                if (s->conns[i].kind == SHARE_CONN_HOLDER && send_ready(s, fd) < 0) {
                        drop_conn(s, fd);
                        continue;
                }
                i++;
        }
}

/* Under the lock: NAME.sock no longer leads here, so the next caller
 * starts a new server. Only our own file is removed (a new supervisor's
 * may be there already). */
void share_give_up_name(struct share *s) {
        struct stat st;

        if (s->listen_fd < 0)
                return;
        listener_pause(&s->listener);
        if (lstat(s->paths.sock, &st) == 0 && st.st_dev == s->sock_dev && st.st_ino == s->sock_ino)
                unlink(s->paths.sock);
        close(s->listen_fd);
        s->listen_fd = -1;
}

void share_lock(const struct share *s) {
        while (flock(s->lock_fd, LOCK_EX) < 0 && errno == EINTR)
                ;
}

void share_unlock(const struct share *s) {
        (void) flock(s->lock_fd, LOCK_UN);
}
