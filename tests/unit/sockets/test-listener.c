/* SPDX-License-Identifier: MIT */
/* The listener (listener.c) on a real loop and real loopback sockets:
 * a batch per wake-up handed to the owner, a batch ended by the owner
 * (false, or a pause at its cap), paused and watched again, broken for
 * good (a socket not listening, one shut down, a pipe dup2()ed over it)
 * with the owner told once, and out of fds (RLIMIT_NOFILE lowered, in a
 * forked child that reads its own stderr): off the loop, back after the
 * back-off and never before, said once per episode. Every wait is
 * bounded. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "listener.h"
#include "loop.h"
#include "unit.h"

struct owner {
        struct listener lst;
        struct loop *loop;
        int fd;
        int clients[8]; /* queued in its backlog at the start */
        size_t n_clients;
        size_t accepted;
        size_t cap;        /* pause at this many, and still return true */
        bool one_per_wake; /* return false after each */
        int conn_flags;    /* of the first connection */
        int broken, broken_error, woke;
};

static bool on_accepted(int conn, const union sockaddr_any *peer, socklen_t peer_len, void *userdata) {
        struct owner *o = userdata;

        if (o->accepted == 0)
                o->conn_flags = fcntl(conn, F_GETFL);
        close(conn);
        if (++o->accepted == o->cap)
                listener_pause(&o->lst);
        return !o->one_per_wake;
}

static void on_broken(struct listener *lst, int error, void *userdata) {
        struct owner *o = userdata;

        o->broken++;
        o->broken_error = error;
        /* Told when it is off the loop already: watching is a no-op. */
        (void) listener_watch(lst, o->loop);
}

static void on_woke(void *userdata) {
        ((struct owner *) userdata)->woke++;
}

static struct sockaddr_in listening_address;

/* A non-blocking TCP socket on 127.0.0.1, port 0; listening or not. */
static int loopback(bool listening) {
        socklen_t len = sizeof listening_address;
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

        listening_address = (struct sockaddr_in) { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(bind(fd, (struct sockaddr *) &listening_address, len), 0);
        if (listening)
                ck_assert_int_eq(listen(fd, 64), 0);
        ck_assert_int_eq(getsockname(fd, (struct sockaddr *) &listening_address, &len), 0);
        return fd;
}

/* A client of the last loopback(true), queued in its backlog. */
static int connected(void) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(connect(fd, (struct sockaddr *) &listening_address, sizeof listening_address), 0);
        return fd;
}

/* A listener of fd with n clients waiting, paused. */
static void owner_open(struct owner *o, int fd, size_t n) {
        *o = (struct owner) { .fd = fd, .n_clients = n, .cap = SIZE_MAX };
        ck_assert_uint_le(n, ARRAY_SIZE(o->clients));
        for (size_t i = 0; i < n; i++)
                o->clients[i] = connected();
        ck_assert_int_eq(loop_new(&o->loop), 0);
        listener_init(&o->lst, &(struct listener_params) {
                                       .fd = fd,
                                       .flags = SOCK_CLOEXEC | SOCK_NONBLOCK,
                                       .name = "test",
                                       .accepted = on_accepted,
                                       .broken = on_broken,
                                       .woke = on_woke,
                                       .userdata = o,
                               });
}

static void owner_close(struct owner *o) {
        listener_pause(&o->lst);
        loop_free(o->loop);
        for (size_t i = 0; i < o->n_clients; i++)
                close(o->clients[i]);
        close(o->fd);
}

START_TEST(test_a_wake_up_accepts_the_batch_and_calls_back) {
        struct owner o;

        owner_open(&o, loopback(true), 5);
        ck_assert_int_eq(listener_state(&o.lst), LISTENER_PAUSED);
        ck_assert_int_eq(listener_watch(&o.lst, o.loop), 0);
        ck_assert_int_eq(listener_state(&o.lst), LISTENER_WATCHING);
        ck_assert_int_eq(loop_dispatch_once(o.loop, 5000), 1);
        ck_assert_uint_eq(o.accepted, 5);
        ck_assert_int_eq(o.woke, 1);
        ck_assert(o.conn_flags & O_NONBLOCK);
        /* The backlog is empty: nothing to wake for. */
        ck_assert_int_eq(loop_dispatch_once(o.loop, 0), 0);
        ck_assert_int_eq(o.broken, 0);
        owner_close(&o);
}
END_TEST

START_TEST(test_false_from_the_owner_ends_the_batch) {
        struct owner o;

        owner_open(&o, loopback(true), 3);
        o.one_per_wake = true;
        ck_assert_int_eq(listener_watch(&o.lst, o.loop), 0);
        for (size_t i = 1; i <= 3; i++) {
                ck_assert_int_eq(loop_dispatch_once(o.loop, 5000), 1);
                ck_assert_uint_eq(o.accepted, i);
        }
        ck_assert_int_eq(o.woke, 3);
        owner_close(&o);
}
END_TEST

/* At its cap the owner pauses it inside accepted(), and still says true:
 * the listener ends the batch itself, and leaves the loop, though
 * connections wait. Watched again, it takes them. */
START_TEST(test_paused_by_its_owner_and_watched_again) {
        struct owner o;

        owner_open(&o, loopback(true), 4);
        o.cap = 2;
        /* Paused from the start: not on the loop. */
        ck_assert_int_eq(loop_dispatch_once(o.loop, 0), 0);
        ck_assert_int_eq(listener_watch(&o.lst, o.loop), 0);
        ck_assert_int_eq(loop_dispatch_once(o.loop, 5000), 1);
        ck_assert_uint_eq(o.accepted, 2);
        ck_assert_int_eq(listener_state(&o.lst), LISTENER_PAUSED);
        ck_assert_int_eq(loop_dispatch_once(o.loop, 50), 0);
        ck_assert_uint_eq(o.accepted, 2);
        ck_assert_int_eq(listener_watch(&o.lst, o.loop), 0);
        ck_assert_int_eq(listener_watch(&o.lst, o.loop), 0); /* watching: nothing to do */
        ck_assert_int_eq(loop_dispatch_once(o.loop, 5000), 1);
        ck_assert_uint_eq(o.accepted, 4);
        ck_assert_int_eq(listener_state(&o.lst), LISTENER_WATCHING);
        /* Paused, an owner still takes what waits (before it ends). */
        close(o.clients[0]);
        o.clients[0] = connected();
        listener_pause(&o.lst);
        listener_accept_now(&o.lst);
        ck_assert_uint_eq(o.accepted, 5);
        ck_assert_int_eq(listener_state(&o.lst), LISTENER_PAUSED);
        ck_assert_int_eq(o.woke, 2);
        owner_close(&o);
}
END_TEST

/* A socket accept(2) cannot work on, ready for ever (HUP, or a readable
 * pipe): 0 not listening, 1 shut down, 2 a pipe dup2()ed over it. */
static int broken_socket(int how, int *ret_error) {
        int fd, p[2];

        switch (how) {
        case 0:
                *ret_error = -EINVAL;
                return loopback(false);
        case 1:
                fd = loopback(true);
                ck_assert_int_eq(shutdown(fd, SHUT_RDWR), 0);
                *ret_error = -EINVAL;
                return fd;
        default:
                fd = loopback(true);
                ck_assert_int_eq(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
                ck_assert_int_eq(write(p[1], "x", 1), 1);
                ck_assert_int_eq(dup2(p[0], fd), fd);
                close(p[0]);
                close(p[1]);
                *ret_error = -ENOTSOCK;
                return fd;
        }
}

START_TEST(test_broken_for_good_and_said_once) {
        struct owner o;
        int error, fd = broken_socket(_i, &error);

        owner_open(&o, fd, 0);
        ck_assert_int_eq(listener_watch(&o.lst, o.loop), 0);
        ck_assert_int_eq(loop_dispatch_once(o.loop, 5000), 1);
        ck_assert_int_eq(o.broken, 1);
        ck_assert_int_eq(o.broken_error, error);
        ck_assert_int_eq(o.woke, 1);
        ck_assert_int_eq(listener_state(&o.lst), LISTENER_BROKEN);
        /* Off the loop, though the fd is still ready; watching again,
         * pausing or accepting now changes nothing, and says nothing. */
        ck_assert_int_eq(loop_dispatch_once(o.loop, 50), 0);
        ck_assert_int_eq(listener_watch(&o.lst, o.loop), 0);
        listener_pause(&o.lst);
        listener_accept_now(&o.lst);
        ck_assert_int_eq(listener_state(&o.lst), LISTENER_BROKEN);
        ck_assert_int_eq(loop_dispatch_once(o.loop, 50), 0);
        ck_assert_int_eq(o.broken, 1);
        ck_assert_uint_eq(o.accepted, 0);
        owner_close(&o);
}
END_TEST

/* ---- out of fds, in a forked child that reads its own stderr --------- */

static int saved_stderr = -1;

/* A failed check in the child: said on the test's stderr, exit 1. */
__attribute__((format(printf, 2, 3))) static void require(bool ok, const char *format, ...) {
        va_list ap;

        if (ok)
                return;
        va_start(ap, format);
        vdprintf(saved_stderr, format, ap);
        va_end(ap);
        dprintf(saved_stderr, "\n");
        exit(1);
}

/* How many of the lines that stderr got since the last call contain
 * what (the pipe is non-blocking: what is there now). */
static int lines_with(int fd, const char *what) {
        static char buf[8192];
        ssize_t k = read(fd, buf, sizeof buf - 1);
        int n = 0;

        buf[k > 0 ? k : 0] = '\0';
        for (char *p = buf; (p = strstr(p, what)); p += strlen(what))
                n++;
        return n;
}

/* The lowest free fd number: with the limit there, no new fd. */
static void no_fd_left(struct rlimit *saved) {
        int lowest = dup(0);
        struct rlimit none;

        require(lowest >= 0 && getrlimit(RLIMIT_NOFILE, saved) == 0, "no limit to lower");
        close(lowest);
        none = (struct rlimit) { .rlim_cur = (rlim_t) lowest, .rlim_max = saved->rlim_max };
        require(setrlimit(RLIMIT_NOFILE, &none) == 0, "setrlimit: %m");
}

/* Turns of the loop for ms; returns how many dispatched something. */
static int busy_turns(struct loop *l, int ms) {
        uint64_t end = now_usec() + (uint64_t) ms * USEC_PER_MSEC;
        int busy = 0;

        while (now_usec() < end)
                busy += loop_dispatch_once(l, 10) > 0;
        return busy;
}

/* Short of fds: the first episode ends by itself after the back-off, once
 * fds are back; the second because the owner freed one. */
static void child_out_of_fds(void) {
        int p[2], second;
        struct owner o;
        struct rlimit saved;
        uint64_t before;

        saved_stderr = dup(STDERR_FILENO);
        require(pipe2(p, O_CLOEXEC | O_NONBLOCK) == 0 && dup2(p[1], STDERR_FILENO) == STDERR_FILENO, "no pipe");
        owner_open(&o, loopback(true), 1);
        second = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        require(listener_watch(&o.lst, o.loop) == 0, "not watched");
        no_fd_left(&saved);
        before = now_usec();
        require(loop_dispatch_once(o.loop, 5000) == 1 && o.accepted == 0, "no wake-up, or a connection");
        require(listener_state(&o.lst) == LISTENER_BACKING_OFF, "not backing off: %d", listener_state(&o.lst));
        /* Off the loop: the connection waits, and wakes nobody. */
        require(loop_dispatch_once(o.loop, 0) == 0, "still on the loop");
        while (listener_state(&o.lst) == LISTENER_BACKING_OFF && now_usec() - before < 5 * USEC_PER_SEC)
                (void) loop_dispatch_once(o.loop, 1000);
        require(listener_state(&o.lst) == LISTENER_WATCHING, "not watching again");
        require(now_usec() - before >= LISTENER_BACK_OFF_USEC, "back after %llu us only",
                (unsigned long long) (now_usec() - before));
        /* Still short for 500 ms: about five tries (a timer and a
         * wake-up each), not a spin; said once. */
        require(busy_turns(o.loop, 500) <= 14, "spinning");
        require(lines_with(p[0], "prebind: test: cannot accept: ") == 1, "not said once");
        require(setrlimit(RLIMIT_NOFILE, &saved) == 0, "setrlimit: %m");
        while (o.accepted == 0 && now_usec() - before < 10 * USEC_PER_SEC)
                (void) loop_dispatch_once(o.loop, 1000);
        require(o.accepted == 1 && o.broken == 0, "accepted %zu, broken %d", o.accepted, o.broken);
        require(lines_with(p[0], "prebind: test: accepting again\n") == 1, "the end of the episode not said");

        /* A second episode is said again; an fd freed ends its back-off. */
        no_fd_left(&saved);
        require(connect(second, (struct sockaddr *) &listening_address, sizeof listening_address) == 0, "connect");
        require(loop_dispatch_once(o.loop, 5000) == 1 && listener_state(&o.lst) == LISTENER_BACKING_OFF,
                "no back-off");
        require(setrlimit(RLIMIT_NOFILE, &saved) == 0, "setrlimit: %m");
        require(listener_watch(&o.lst, o.loop) == 0 && listener_state(&o.lst) == LISTENER_WATCHING &&
                        !o.lst.back_off.armed,
                "the back-off did not end");
        require(loop_dispatch_once(o.loop, 5000) == 1 && o.accepted == 2, "not accepted at once");
        require(lines_with(p[0], "prebind: test: cannot accept: ") == 1, "the second episode not said once");
        owner_close(&o);
        close(second);
        exit(0);
}

static void (*const children[])(void) = { child_out_of_fds };

START_TEST(test_out_of_fds_backs_off_and_says_it_once) {
        if (unit_under_valgrind())
                return;
        unit_child_passes(children, 0);
}
END_TEST

int main(void) {
        Suite *s = suite_create("listener");
        TCase *tc = tcase_create("accepting");

        tcase_add_test(tc, test_a_wake_up_accepts_the_batch_and_calls_back);
        tcase_add_test(tc, test_false_from_the_owner_ends_the_batch);
        tcase_add_test(tc, test_paused_by_its_owner_and_watched_again);
        suite_add_tcase(s, tc);
        tc = tcase_create("broken");
        tcase_add_loop_test(tc, test_broken_for_good_and_said_once, 0, 3);
        suite_add_tcase(s, tc);
        tc = tcase_create("out-of-fds");
        tcase_add_test(tc, test_out_of_fds_backs_off_and_says_it_once);
        suite_add_tcase(s, tc);
        return unit_run(s);
}
