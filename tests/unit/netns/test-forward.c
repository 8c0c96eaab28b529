/* SPDX-License-Identifier: MIT */
/* src/forward.c: the per-connection state machine, then forwarders
 * driven on a loop in this process, between real loopback sockets
 * (the factory makes plain sockets: no namespace, no other process). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "forward.h"
#include "loop.h"
#include "unit.h"

START_TEST(test_interest_every_state) {
        /* Every combination of one side's inbound and outbound flows. */
        const size_t cap = 65536, pendings[] = { 0, 1, 65535, 65536 };

        for (size_t a = 0; a < 4; a++)
                for (size_t b = 0; b < 4; b++)
                        for (int bits = 0; bits < 16; bits++) {
                                struct forward_flow fl[2] = {
                                        { .pending = pendings[a],
                                          .capacity = cap,
                                          .read_eof = bits & 1,
                                          .pipe_full = (bits >> 1) & 1 },
                                        { .pending = pendings[b],
                                          .capacity = cap,
                                          .read_eof = (bits >> 2) & 1,
                                          .pipe_full = (bits >> 3) & 1 },
                                };
                                for (int x = 0; x < 2; x++) {
                                        uint32_t ev = forward_interest(fl, x);
                                        bool in = !fl[x].read_eof && !fl[x].pipe_full && fl[x].pending < cap;
                                        bool out = fl[1 - x].pending > 0;

                                        ck_assert_int_eq(!!(ev & LOOP_IN), in);
                                        ck_assert_int_eq(!!(ev & LOOP_OUT), out);
                                        ck_assert_int_eq(ev & ~(uint32_t) (LOOP_IN | LOOP_OUT), 0);
                                }
                        }
}
END_TEST

START_TEST(test_a_stalled_side_is_not_watched) {
        /* EOF read and nothing to write: watching would wake the loop for
         * ever on a half-closed socket (LOOP_HUP). */
        struct forward_flow fl[2] = {
                { .pending = 0, .capacity = 65536, .read_eof = 1, .shut = 1 },
                { .pending = 0, .capacity = 65536 },
        };

        ck_assert_uint_eq(forward_interest(fl, 0), 0);
        ck_assert_uint_eq(forward_interest(fl, 1), LOOP_IN);
        fl[1].pending = 10;
        ck_assert_uint_eq(forward_interest(fl, 0), LOOP_OUT);
}
END_TEST

START_TEST(test_finished_only_when_both_directions_shut) {
        struct forward_flow fl[2] = { { .shut = 0 }, { .shut = 0 } };

        ck_assert(!forward_finished(fl));
        fl[0].shut = 1;
        ck_assert(!forward_finished(fl));
        fl[1].shut = 1;
        ck_assert(forward_finished(fl));
}
END_TEST

/* A world of sockets in this process. */
static int plain_socket(void *userdata, int family, int type, int *ret_fd) {
        int *made = userdata, fd = socket(family, type | SOCK_CLOEXEC, 0);

        if (fd < 0)
                return -errno;
        if (made)
                (*made)++;
        *ret_fd = fd;
        return 0;
}

static uint16_t port_of(int fd) {
        struct sockaddr_in a;
        socklen_t len = sizeof a;

        ck_assert_int_eq(getsockname(fd, (struct sockaddr *) &a, &len), 0);
        return ntohs(a.sin_port);
}

/* A TCP socket on 127.0.0.1:0, listening or only bound (a port that
 * refuses). */
static int loopback_socket(bool listening) {
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(bind(fd, (struct sockaddr *) &a, sizeof a), 0);
        if (listening)
                ck_assert_int_eq(listen(fd, 16), 0);
        return fd;
}

static int connect_to(uint16_t port) {
        struct sockaddr_in a = { .sin_family = AF_INET,
                                 .sin_port = htons(port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        ck_assert_int_eq(connect(fd, (struct sockaddr *) &a, sizeof a), 0);
        return fd;
}

static int64_t now_msec(void) {
        struct timespec now;

        clock_gettime(CLOCK_MONOTONIC, &now);
        return (int64_t) now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

/* Run the loop until cond holds, for 10 s at most (a bound against a
 * hang, not a speed: what is awaited comes after a few turns). */
#define RUN_LOOP_UNTIL(l, cond)                                                                                       \
        do {                                                                                                          \
                int64_t until_ = now_msec() + 10000;                                                                  \
                while (!(cond) && now_msec() < until_)                                                                \
                        ck_assert_int_ge(loop_dispatch_once((l), 5), 0);                                              \
        } while (0)

/* Run the loop for ms: for what must not happen in that time. */
static void run_loop(struct loop *l, int ms) {
        struct timespec start, now;

        clock_gettime(CLOCK_MONOTONIC, &start);
        do {
                ck_assert_int_ge(loop_dispatch_once(l, 5), 0);
                clock_gettime(CLOCK_MONOTONIC, &now);
        } while ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 < ms);
}

/* Accept on the inside server, running the loop meanwhile (bounded). */
static int accept_inside(struct loop *l, int server) {
        fcntl(server, F_SETFL, O_NONBLOCK);
        for (int i = 0; i < 400; i++) {
                int fd = accept4(server, NULL, NULL, SOCK_CLOEXEC);
                if (fd >= 0) {
                        fcntl(fd, F_SETFL, 0);
                        return fd;
                }
                ck_assert_int_ge(loop_dispatch_once(l, 5), 0);
        }
        ck_abort_msg("the forwarder never connected inside");
        return -1;
}

/* Read exactly len bytes (or to EOF), running the loop between tries. */
static ssize_t read_some(struct loop *l, int fd, char *buf, size_t len) {
        size_t got = 0;

        for (int i = 0; i < 2000 && got < len; i++) {
                ssize_t k = recv(fd, buf + got, len - got, MSG_DONTWAIT);
                if (k == 0)
                        break;
                if (k < 0) {
                        if (errno != EAGAIN)
                                return -errno;
                        ck_assert_int_ge(loop_dispatch_once(l, 5), 0);
                        continue;
                }
                got += (size_t) k;
        }
        return (ssize_t) got;
}

struct world {
        struct loop *loop;
        int outside; /* the published socket */
        int inside;  /* the server's own listening socket */
        struct forwarder *f;
        int made;
};

static void world_open(struct world *w, bool inside_listening, unsigned max, uint64_t wait_usec) {
        ck_assert_int_eq(loop_new(&w->loop), 0);
        w->outside = loopback_socket(true);
        w->inside = loopback_socket(inside_listening);
        w->made = 0;
        ck_assert_int_eq(forwarder_new(w->loop,
                                       &(struct forward_params) {
                                               .listen_fd = w->outside,
                                               .port = port_of(w->inside),
                                               .max_connections = max,
                                               .wait_usec = wait_usec,
                                               .make_socket = plain_socket,
                                               .userdata = &w->made,
                                       },
                                       &w->f),
                         0);
        ck_assert_int_eq(forwarder_start(w->f), 0);
}

static void world_close(struct world *w) {
        forwarder_free(w->f);
        loop_free(w->loop);
        close(w->outside);
        close(w->inside);
}

START_TEST(test_both_ways_and_half_close) {
        struct world w;
        struct forward_stats st;
        char buf[64];
        int client, server;

        world_open(&w, true, 8, 0);
        client = connect_to(port_of(w.outside));
        server = accept_inside(w.loop, w.inside);
        ck_assert_int_eq(write(client, "hello", 5), 5);
        ck_assert_int_eq(read_some(w.loop, server, buf, 5), 5);
        ck_assert(memcmp(buf, "hello", 5) == 0);
        /* The client half-closes: the server reads EOF, and answers. */
        ck_assert_int_eq(shutdown(client, SHUT_WR), 0);
        ck_assert_int_eq(read_some(w.loop, server, buf, sizeof buf), 0);
        ck_assert_int_eq(write(server, "bye", 3), 3);
        ck_assert_int_eq(read_some(w.loop, client, buf, 3), 3);
        ck_assert(memcmp(buf, "bye", 3) == 0);
        ck_assert_uint_eq(forwarder_connections(w.f), 1);
        close(server);
        ck_assert_int_eq(read_some(w.loop, client, buf, sizeof buf), 0);
        RUN_LOOP_UNTIL(w.loop, forwarder_connections(w.f) == 0);
        ck_assert_uint_eq(forwarder_connections(w.f), 0);
        forwarder_get_stats(w.f, &st);
        ck_assert_uint_eq(st.accepted, 1);
        ck_assert_uint_eq(st.bytes[0], 5);
        ck_assert_uint_eq(st.bytes[1], 3);
        ck_assert_uint_eq(st.resets, 0);
        close(client);
        world_close(&w);
}
END_TEST

static void reset_close(int fd) {
        struct linger lg = { .l_onoff = 1, .l_linger = 0 };

        ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg), 0);
        close(fd);
}

START_TEST(test_server_reset_is_passed_on_as_a_reset) {
        struct world w;
        struct forward_stats st;
        char buf[8];
        int client, server;

        world_open(&w, true, 8, 0);
        client = connect_to(port_of(w.outside));
        server = accept_inside(w.loop, w.inside);
        reset_close(server);
        ck_assert_int_eq(read_some(w.loop, client, buf, sizeof buf), -ECONNRESET);
        forwarder_get_stats(w.f, &st);
        ck_assert_uint_eq(st.resets, 1);
        ck_assert_uint_eq(forwarder_connections(w.f), 0);
        close(client);
        world_close(&w);
}
END_TEST

START_TEST(test_client_reset_is_passed_on_as_a_reset) {
        struct world w;
        char buf[8];
        int client, server;

        world_open(&w, true, 8, 0);
        client = connect_to(port_of(w.outside));
        server = accept_inside(w.loop, w.inside);
        ck_assert_int_eq(write(client, "x", 1), 1);
        ck_assert_int_eq(read_some(w.loop, server, buf, 1), 1);
        reset_close(client);
        ck_assert_int_eq(read_some(w.loop, server, buf, sizeof buf), -ECONNRESET);
        close(server);
        world_close(&w);
}
END_TEST

START_TEST(test_refused_inside_waits_until_the_server_listens) {
        struct world w;
        struct forward_stats st;
        char buf[8];
        int client, server;
        int64_t start, elapsed;

        world_open(&w, false, 8, 10 * 1000000);
        client = connect_to(port_of(w.outside));
        ck_assert_int_eq(write(client, "early", 5), 5);
        /* Tried again with a backoff (10 ms up to 100 ms): a few sockets
         * per family in the time it took to make four, not a busy loop.
         * Counted against the time that passed, which a loaded machine
         * stretches. */
        start = now_msec();
        RUN_LOOP_UNTIL(w.loop, w.made >= 4);
        elapsed = now_msec() - start;
        ck_assert_int_ge(w.made, 4);
        ck_assert_int_le(w.made, 2 * (elapsed / 10 + 2));
        forwarder_get_stats(w.f, &st);
        ck_assert_uint_eq(st.accepted, 1);
        ck_assert_uint_eq(st.refused, 0);
        ck_assert_int_eq(listen(w.inside, 16), 0);
        server = accept_inside(w.loop, w.inside);
        ck_assert_int_eq(read_some(w.loop, server, buf, 5), 5);
        ck_assert(memcmp(buf, "early", 5) == 0);
        close(server);
        close(client);
        world_close(&w);
}
END_TEST

START_TEST(test_refused_without_waiting_resets_the_client) {
        struct world w;
        struct forward_stats st;
        char buf[8];
        int client;

        world_open(&w, false, 8, FORWARD_NO_WAIT);
        client = connect_to(port_of(w.outside));
        ck_assert_int_eq(read_some(w.loop, client, buf, sizeof buf), -ECONNRESET);
        forwarder_get_stats(w.f, &st);
        ck_assert_uint_eq(st.refused, 1);
        close(client);
        world_close(&w);
}
END_TEST

START_TEST(test_wait_is_bounded) {
        struct world w;
        struct forward_stats st;
        char buf[8];
        int client;

        world_open(&w, false, 8, 100 * 1000);
        client = connect_to(port_of(w.outside));
        ck_assert_int_eq(read_some(w.loop, client, buf, sizeof buf), -ECONNRESET);
        forwarder_get_stats(w.f, &st);
        ck_assert_uint_eq(st.refused, 1);
        close(client);
        world_close(&w);
}
END_TEST

START_TEST(test_max_connections_stops_accepting) {
        struct world w;
        struct forward_stats st;
        int c1, c2, s1, s2;

        world_open(&w, true, 1, 0);
        c1 = connect_to(port_of(w.outside));
        s1 = accept_inside(w.loop, w.inside);
        c2 = connect_to(port_of(w.outside)); /* waits in the backlog */
        run_loop(w.loop, 50);
        forwarder_get_stats(w.f, &st);
        ck_assert_uint_eq(st.accepted, 1);
        close(c1);
        close(s1);
        s2 = accept_inside(w.loop, w.inside);
        forwarder_get_stats(w.f, &st);
        ck_assert_uint_eq(st.accepted, 2);
        close(c2);
        close(s2);
        world_close(&w);
}
END_TEST

START_TEST(test_stopped_forwarder_leaves_clients_in_the_backlog) {
        struct world w;
        struct forward_stats st;
        int c, s;

        world_open(&w, true, 8, 0);
        forwarder_stop(w.f);
        c = connect_to(port_of(w.outside));
        run_loop(w.loop, 30);
        forwarder_get_stats(w.f, &st);
        ck_assert_uint_eq(st.accepted, 0);
        ck_assert_int_eq(forwarder_start(w.f), 0);
        s = accept_inside(w.loop, w.inside);
        close(c);
        close(s);
        world_close(&w);
}
END_TEST

/* Out of fds with no connection open: the forwarder backs off on a timer
 * it made before (one made then would need an fd there is not), and
 * forwards the waiting client once fds are free again. */
START_TEST(test_out_of_fds_backs_off_then_forwards) {
        struct world w;
        struct forward_stats st;
        struct rlimit saved, none;
        int c, s, lowest;

        if (unit_under_valgrind())
                return;
        world_open(&w, true, 8, 0);
        c = connect_to(port_of(w.outside)); /* waits in the backlog */
        lowest = dup(0);
        ck_assert_int_ge(lowest, 0);
        close(lowest);
        ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &saved), 0);
        none = (struct rlimit) { .rlim_cur = (rlim_t) lowest, .rlim_max = saved.rlim_max };
        ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &none), 0);
        run_loop(w.loop, 50);
        ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &saved), 0);
        forwarder_get_stats(w.f, &st);
        ck_assert_uint_eq(st.accepted, 0);
        s = accept_inside(w.loop, w.inside);
        forwarder_get_stats(w.f, &st);
        ck_assert_uint_eq(st.accepted, 1);
        close(c);
        close(s);
        world_close(&w);
}
END_TEST

/* A server that does not read: the client's bytes fill the pipe and the
 * socket buffers, and the loop then sleeps (no busy wake-ups on a readable
 * socket whose pipe is full), until the server reads again. */
START_TEST(test_backpressure_without_busy_loop_then_all_bytes_arrive) {
        enum { TOTAL = 64 << 20 };
        struct world w;
        struct forward_stats st;
        char *chunk = malloc(65536), *buf = malloc(65536);
        size_t sent = 0, got = 0;
        int client, server, dispatched = 0;

        world_open(&w, true, 8, 0);
        client = connect_to(port_of(w.outside));
        server = accept_inside(w.loop, w.inside);
        fcntl(client, F_SETFL, O_NONBLOCK);
        for (size_t i = 0; i < 65536; i++)
                chunk[i] = (char) (i * 7);
        /* Fill until nothing more is taken for a while. */
        for (int i = 0, idle = 0; i < 5000 && idle < 20 && sent < TOTAL; i++) {
                ssize_t k = send(client, chunk + sent % 65536, 65536 - sent % 65536, MSG_DONTWAIT);
                if (k > 0)
                        sent += (size_t) k;
                idle = k > 0 ? 0 : idle + 1;
                (void) loop_dispatch_once(w.loop, 1);
        }
        ck_assert_uint_lt(sent, TOTAL); /* the buffers are bounded */
        for (int i = 0; i < 20; i++) {
                int r = loop_dispatch_once(w.loop, 5);
                ck_assert_int_ge(r, 0);
                dispatched += r;
        }
        ck_assert_int_le(dispatched, 4);
        /* Now read everything, sending the rest meanwhile; the bytes are
         * checked against the pattern sent. */
        fcntl(server, F_SETFL, O_NONBLOCK);
        for (int i = 0; i < 200000 && got < TOTAL; i++) {
                ssize_t k;

                if (sent < TOTAL &&
                    (k = send(client, chunk + sent % 65536,
                              65536 - sent % 65536 < TOTAL - sent ? 65536 - sent % 65536 : TOTAL - sent,
                              MSG_DONTWAIT)) > 0)
                        sent += (size_t) k;
                (void) loop_dispatch_once(w.loop, 1);
                while ((k = recv(server, buf, 65536, 0)) > 0) {
                        for (ssize_t j = 0; j < k; j++)
                                if (buf[j] != (char) (((got + (size_t) j) % 65536) * 7))
                                        ck_abort_msg("byte %zu differs", got + (size_t) j);
                        got += (size_t) k;
                }
        }
        ck_assert_uint_eq(got, TOTAL);
        forwarder_get_stats(w.f, &st);
        ck_assert_uint_eq(st.bytes[0], TOTAL);
        free(chunk);
        free(buf);
        close(client);
        close(server);
        world_close(&w);
}
END_TEST

int main(void) {
        Suite *s = suite_create("forward");
        TCase *tc;

        tc = tcase_create("state");
        tcase_add_test(tc, test_interest_every_state);
        tcase_add_test(tc, test_a_stalled_side_is_not_watched);
        tcase_add_test(tc, test_finished_only_when_both_directions_shut);
        suite_add_tcase(s, tc);

        tc = tcase_create("forwarding");
        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, test_both_ways_and_half_close);
        tcase_add_test(tc, test_server_reset_is_passed_on_as_a_reset);
        tcase_add_test(tc, test_client_reset_is_passed_on_as_a_reset);
        tcase_add_test(tc, test_refused_inside_waits_until_the_server_listens);
        tcase_add_test(tc, test_refused_without_waiting_resets_the_client);
        tcase_add_test(tc, test_wait_is_bounded);
        tcase_add_test(tc, test_max_connections_stops_accepting);
        tcase_add_test(tc, test_stopped_forwarder_leaves_clients_in_the_backlog);
        tcase_add_test(tc, test_out_of_fds_backs_off_then_forwards);
        tcase_add_test(tc, test_backpressure_without_busy_loop_then_all_bytes_arrive);
        suite_add_tcase(s, tc);

        return unit_run(s);
}
