/* SPDX-License-Identifier: MIT */
/* sockets/connect.c: connect with back-off, on a loop in this process,
 * to real loopback sockets (the factory makes plain sockets): it waits
 * for a port that refuses, reports the family that accepted, once, and
 * asks the factory again each round. */
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "connect.h"
#include "loop.h"
#include "unit.h"

static int plain_socket(void *userdata, int family, int type, int *ret_fd) {
        int *made = userdata, fd = socket(family, type | SOCK_CLOEXEC, 0);

        if (fd < 0)
                return -errno;
        if (made)
                (*made)++;
        *ret_fd = fd;
        return 0;
}

static int no_socket(void *userdata, int family, int type, int *ret_fd) {
        return -EMFILE;
}

static uint16_t port_of(int fd) {
        struct sockaddr_in a;
        socklen_t len = sizeof a;

        ck_assert_int_eq(getsockname(fd, (struct sockaddr *) &a, &len), 0);
        return ntohs(a.sin_port);
}

/* A TCP socket bound on 127.0.0.1:0, not listening yet (it refuses). */
static int bound_socket(void) {
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(bind(fd, (struct sockaddr *) &a, sizeof a), 0);
        return fd;
}

static int64_t now_msec(void) {
        struct timespec now;

        clock_gettime(CLOCK_MONOTONIC, &now);
        return (int64_t) now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

/* Run the loop until cond holds, for 10 s at most (a bound against a
 * hang, not a speed), or for ms when cond is false (what must not happen
 * in that time). */
#define RUN_LOOP_UNTIL(l, cond, ms)                                                                                   \
        do {                                                                                                          \
                int64_t until_ = now_msec() + (ms);                                                                   \
                while (!(cond) && now_msec() < until_)                                                                \
                        ck_assert_int_ge(loop_dispatch_once((l), 5), 0);                                              \
        } while (0)

struct result {
        int calls;
        int result;
};

static void on_done(void *userdata, int result) {
        struct result *r = userdata;

        r->calls++;
        r->result = result;
}

START_TEST(test_waits_for_listen_then_reports_the_family) {
        struct loop *l;
        struct connect_backoff *c;
        struct result res = { 0, 0 };
        int inside = bound_socket(), made = 0;

        ck_assert_int_eq(loop_new(&l), 0);
        ck_assert_int_eq(connect_backoff_start(l, port_of(inside), plain_socket, &made, on_done, &res, &c), 0);
        /* Never from the call itself. */
        ck_assert_int_eq(made, 0);
        RUN_LOOP_UNTIL(l, false, 60);
        ck_assert_int_eq(res.calls, 0);
        /* Refused, then again after a pause: more than one round. */
        ck_assert_int_ge(made, 2);
        ck_assert_int_eq(listen(inside, 4), 0);
        RUN_LOOP_UNTIL(l, res.calls > 0, 10000);
        ck_assert_int_eq(res.calls, 1);
        ck_assert_int_eq(res.result, AF_INET);
        /* Once. */
        RUN_LOOP_UNTIL(l, false, 150);
        ck_assert_int_eq(res.calls, 1);
        connect_backoff_free(c);
        loop_free(l);
        close(inside);
}
END_TEST

START_TEST(test_finds_a_server_on_ipv6_loopback_only) {
        struct sockaddr_in6 a = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT };
        socklen_t len = sizeof a;
        struct loop *l;
        struct connect_backoff *c;
        struct result res = { 0, 0 };
        int inside = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);

        if (inside < 0 || bind(inside, (struct sockaddr *) &a, sizeof a) < 0)
                return; /* no IPv6 here */
        ck_assert_int_eq(listen(inside, 4), 0);
        ck_assert_int_eq(getsockname(inside, (struct sockaddr *) &a, &len), 0);
        ck_assert_int_eq(loop_new(&l), 0);
        ck_assert_int_eq(connect_backoff_start(l, ntohs(a.sin6_port), plain_socket, NULL, on_done, &res, &c), 0);
        RUN_LOOP_UNTIL(l, res.calls > 0, 10000);
        ck_assert_int_eq(res.calls, 1);
        ck_assert_int_eq(res.result, AF_INET6);
        connect_backoff_free(c);
        loop_free(l);
        close(inside);
}
END_TEST

/* A factory that fails is the end: its error, once. */
START_TEST(test_factory_error_is_reported) {
        struct loop *l;
        struct connect_backoff *c;
        struct result res = { 0, 0 };

        ck_assert_int_eq(loop_new(&l), 0);
        ck_assert_int_eq(connect_backoff_start(l, 9, no_socket, NULL, on_done, &res, &c), 0);
        RUN_LOOP_UNTIL(l, res.calls > 0, 10000);
        ck_assert_int_eq(res.result, -EMFILE);
        RUN_LOOP_UNTIL(l, false, 50);
        ck_assert_int_eq(res.calls, 1);
        connect_backoff_free(c);
        loop_free(l);
}
END_TEST

/* Freed before it ever ran: nothing is called, nothing is left on the loop. */
START_TEST(test_free_before_the_first_attempt) {
        struct loop *l;
        struct connect_backoff *c;
        struct result res = { 0, 0 };

        ck_assert_int_eq(loop_new(&l), 0);
        ck_assert_int_eq(connect_backoff_start(l, 9, plain_socket, NULL, on_done, &res, &c), 0);
        connect_backoff_free(c);
        ck_assert_int_eq(loop_dispatch_once(l, 10), 0);
        ck_assert_int_eq(res.calls, 0);
        loop_free(l);
}
END_TEST

START_TEST(test_loopback_addresses) {
        union sockaddr_any a;

        ck_assert_uint_eq(connect_loopback(AF_INET, 8080, &a), sizeof a.in);
        ck_assert_int_eq(a.in.sin_family, AF_INET);
        ck_assert_uint_eq(ntohs(a.in.sin_port), 8080);
        ck_assert_uint_eq(ntohl(a.in.sin_addr.s_addr), INADDR_LOOPBACK);
        ck_assert_uint_eq(connect_loopback(AF_INET6, 53, &a), sizeof a.in6);
        ck_assert_int_eq(a.in6.sin6_family, AF_INET6);
        ck_assert_uint_eq(ntohs(a.in6.sin6_port), 53);
        ck_assert(IN6_IS_ADDR_LOOPBACK(&a.in6.sin6_addr));
}
END_TEST

int main(void) {
        Suite *s = suite_create("connect");
        TCase *tc = tcase_create("back-off");

        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, test_loopback_addresses);
        tcase_add_test(tc, test_waits_for_listen_then_reports_the_family);
        tcase_add_test(tc, test_finds_a_server_on_ipv6_loopback_only);
        tcase_add_test(tc, test_factory_error_is_reported);
        tcase_add_test(tc, test_free_before_the_first_attempt);
        suite_add_tcase(s, tc);
        return unit_run(s);
}
