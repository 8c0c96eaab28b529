/* SPDX-License-Identifier: MIT */
/* Readiness (ready.c, check_notify.c) through a real loop and a real
 * notification socket: without --ready nothing is waited for; with it
 * the notify check is pending after each start, met once (by READY=1
 * from COMMAND or a descendant, never from anyone else), described while
 * unmet, and the --ready timeout fires through the loop (short timeouts,
 * bounded dispatch). */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "loop.h"
#include "ready.h"
#include "unit.h"

static const char command[] = "server";

struct calls {
        int met;
        int timed_out;
};

static void on_readiness(enum ready_event event, void *userdata) {
        struct calls *c = userdata;

        if (event == READY_MET)
                c->met++;
        else
                c->timed_out++;
}

static struct ready_options options_of(bool ready, uint64_t timeout_usec) {
        return (struct ready_options) { .notify = ready, .timeout_usec = timeout_usec };
}

/* A readiness on a loop, with its callback counting into *calls. */
struct fixture {
        struct ready_options options;
        struct loop *loop;
        struct ready *r;
        struct calls calls;
};

static void fixture_init(struct fixture *f, bool ready, uint64_t timeout_usec) {
        *f = (struct fixture) { .options = options_of(ready, timeout_usec) };
        ck_assert_int_eq(loop_new(&f->loop), 0);
        ck_assert_int_eq(ready_new(&f->options, command, &f->r), 0);
        ck_assert_int_eq(ready_attach(f->r, f->loop, on_readiness, &f->calls), 0);
}

static void fixture_done(struct fixture *f) {
        ready_detach(f->r);
        ready_free(f->r);
        loop_free(f->loop);
}

/* Dispatch until cond holds or about ms milliseconds passed. */
#define DISPATCH_UNTIL(f, cond, ms)                                                                                   \
        do {                                                                                                          \
                for (int turn_ = 0; turn_ < (ms) / 10 && !(cond); turn_++)                                            \
                        ck_assert_int_ge(loop_dispatch_once((f)->loop, 10), 0);                                       \
        } while (0)

/* Send message to the notification socket from this process. */
static void send_notification(const struct ready *r, const char *message) {
        const char *entry = ready_notify_entry(r), *address;
        struct sockaddr_un a = { .sun_family = AF_UNIX };
        socklen_t len;
        int fd;

        ck_assert_ptr_nonnull(entry);
        address = entry + strlen("NOTIFY_SOCKET=");
        ck_assert_int_eq(address[0], '@');
        len = (socklen_t) strlen(address);
        memcpy(a.sun_path, address, len);
        a.sun_path[0] = '\0';
        fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(sendto(fd, message, strlen(message), 0, (struct sockaddr *) &a,
                                (socklen_t) offsetof(struct sockaddr_un, sun_path) + len),
                         (ssize_t) strlen(message));
        close(fd);
}

/* READY=1 from this process (COMMAND in these tests), heard at once. */
static void send_ready(struct fixture *f) {
        send_notification(f->r, "READY=1");
        ready_hear(f->r);
}

/* ---- without --ready ------------------------------------------------------- */

START_TEST(test_off_waits_for_nothing) {
        struct fixture f;
        char buf[128];

        fixture_init(&f, false, 0);
        ck_assert(!ready_needed(f.r));
        ck_assert_ptr_null(ready_notify_entry(f.r));
        ck_assert_int_eq(ready_start(f.r, getpid()), 0);
        ck_assert(!ready_waiting(f.r));
        ck_assert_str_eq(ready_describe_unmet(f.r, buf, sizeof buf), "");
        /* Nothing on the loop. */
        ck_assert_int_eq(loop_dispatch_once(f.loop, 20), 0);
        ready_hear(f.r);
        ck_assert_int_eq(f.calls.met + f.calls.timed_out, 0);
        fixture_done(&f);
}
END_TEST

/* ---- with --ready-log too --------------------------------------------------- */

START_TEST(test_log_and_notify_both_wanted) {
        struct fixture f = { .options = options_of(true, 0) };
        char buf[256];
        int out = -1, err = -1;

        ck_assert_ptr_null(ready_options_add(&f.options, &ready_check_log, "^up$"));
        f.options.interval_usec = 100000;
        ck_assert_int_eq(loop_new(&f.loop), 0);
        ck_assert_int_eq(ready_new(&f.options, command, &f.r), 0);
        ck_assert_int_eq(ready_add_checks(f.r, NULL, 0, NULL, 0), 0);
        ck_assert_int_eq(ready_attach(f.r, f.loop, on_readiness, &f.calls), 0);
        ready_child_output(f.r, &out, &err);
        ck_assert_int_gt(out, 2);
        ck_assert_int_gt(err, 2);
        ck_assert_int_eq(ready_start(f.r, getpid()), 0);
        ck_assert_str_eq(ready_describe_unmet(f.r, buf, sizeof buf),
                         "did not send READY=1 and wrote no line that matches --ready-log '^up$'");
        ck_assert_str_eq(ready_describe_unmet(f.r, buf, 8), "did not");
        ck_assert_str_eq(ready_describe_unmet(f.r, buf, 27), "did not send READY=1 and w");
        /* A line on COMMAND's stderr (relayed to ours) meets one condition. */
        ck_assert_int_eq(write(err, "starting\nup\n", 12), 12);
        DISPATCH_UNTIL(&f, !strstr(ready_describe_unmet(f.r, buf, sizeof buf), "--ready-log"), 2000);
        ck_assert_str_eq(ready_describe_unmet(f.r, buf, sizeof buf), "did not send READY=1");
        ck_assert_int_eq(f.calls.met, 0);
        send_ready(&f);
        ck_assert_int_eq(f.calls.met, 1);
        ck_assert(!ready_waiting(f.r));
        fixture_done(&f);
}
END_TEST

/* ---- with --ready ---------------------------------------------------------- */

START_TEST(test_on_pending_until_met_once) {
        struct fixture f;
        char buf[128];

        fixture_init(&f, true, 0);
        ck_assert(ready_needed(f.r));
        ck_assert_ptr_nonnull(strstr(ready_notify_entry(f.r), "NOTIFY_SOCKET=@prebind/"));
        ck_assert(!ready_waiting(f.r));
        ck_assert_int_eq(ready_start(f.r, getpid()), 0);
        ck_assert(ready_waiting(f.r));
        ck_assert_str_eq(ready_describe_unmet(f.r, buf, sizeof buf), "did not send READY=1");
        /* A buffer too small is cut, never overrun. */
        ck_assert_str_eq(ready_describe_unmet(f.r, buf, 8), "did not");
        send_ready(&f);
        ck_assert_int_eq(f.calls.met, 1);
        ck_assert(!ready_waiting(f.r));
        ck_assert_str_eq(ready_describe_unmet(f.r, buf, sizeof buf), "");
        /* Once: a second READY=1 calls nobody. */
        send_ready(&f);
        ck_assert_int_eq(f.calls.met, 1);
        /* A restarted COMMAND is waited for anew. */
        ck_assert_int_eq(ready_start(f.r, getpid()), 0);
        ck_assert(ready_waiting(f.r));
        send_ready(&f);
        ck_assert_int_eq(f.calls.met, 2);
        ck_assert_int_eq(f.calls.timed_out, 0);
        fixture_done(&f);
}
END_TEST

START_TEST(test_ready_from_command_through_the_loop) {
        struct fixture f;

        fixture_init(&f, true, 0);
        ck_assert_int_eq(ready_start(f.r, getpid()), 0);
        send_notification(f.r, "STATUS=starting\nEXTEND_TIMEOUT_USEC=1000");
        DISPATCH_UNTIL(&f, false, 50);
        ck_assert_int_eq(f.calls.met, 0);
        ck_assert(ready_waiting(f.r));
        send_notification(f.r, "READY=1\nSTATUS=serving");
        DISPATCH_UNTIL(&f, f.calls.met > 0, 1000);
        ck_assert_int_eq(f.calls.met, 1);
        ck_assert(!ready_waiting(f.r));
        /* Again: already ready, no second call. */
        send_notification(f.r, "READY=1");
        DISPATCH_UNTIL(&f, false, 50);
        ck_assert_int_eq(f.calls.met, 1);
        fixture_done(&f);
}
END_TEST

START_TEST(test_ready_from_a_stranger_is_ignored) {
        struct fixture f;
        int p[2];
        pid_t other;
        char c;

        fixture_init(&f, true, 0);
        /* COMMAND is a child; this process is not its descendant. */
        ck_assert_int_eq(pipe(p), 0);
        other = fork();
        ck_assert_int_ge(other, 0);
        if (other == 0) {
                unit_default_signals();
                close(p[1]);
                /* Send READY=1 when told to (a byte), or give up at EOF. */
                if (read(p[0], &c, 1) == 1)
                        send_notification(f.r, "READY=1");
                _exit(0);
        }
        close(p[0]);
        ck_assert_int_eq(ready_start(f.r, other), 0);
        send_notification(f.r, "READY=1");
        DISPATCH_UNTIL(&f, f.calls.met > 0, 100);
        ck_assert_int_eq(f.calls.met, 0);
        ck_assert(ready_waiting(f.r));
        /* COMMAND itself: counts. */
        ck_assert_int_eq(write(p[1], "x", 1), 1);
        close(p[1]);
        DISPATCH_UNTIL(&f, f.calls.met > 0, 2000);
        ck_assert_int_eq(f.calls.met, 1);
        unit_wait_bounded(other);
        fixture_done(&f);
}
END_TEST

START_TEST(test_forgotten_child_counts_no_more) {
        struct fixture f;

        fixture_init(&f, true, 0);
        ck_assert_int_eq(ready_start(f.r, getpid()), 0);
        ready_forget_child(f.r);
        send_notification(f.r, "READY=1");
        /* Heard before an exit is acted upon, as the supervisor does. */
        ready_hear(f.r);
        ck_assert_int_eq(f.calls.met, 0);
        ck_assert(ready_waiting(f.r));
        fixture_done(&f);
}
END_TEST

/* ---- the timeout ----------------------------------------------------------- */

static uint64_t now_msec(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000u + (uint64_t) ts.tv_nsec / 1000000u;
}

START_TEST(test_timeout_fires_through_the_loop) {
        struct fixture f;
        char buf[128];
        uint64_t start;

        fixture_init(&f, true, 50000);
        start = now_msec();
        ck_assert_int_eq(ready_start(f.r, getpid()), 0);
        DISPATCH_UNTIL(&f, f.calls.timed_out > 0, 2000);
        ck_assert_int_eq(f.calls.timed_out, 1);
        ck_assert_uint_ge(now_msec() - start, 50);
        ck_assert_int_eq(f.calls.met, 0);
        /* Still unmet, for the message; stopping is the owner's call. */
        ck_assert(ready_waiting(f.r));
        ck_assert_str_eq(ready_describe_unmet(f.r, buf, sizeof buf), "did not send READY=1");
        ready_stop(f.r);
        ck_assert(!ready_waiting(f.r));
        DISPATCH_UNTIL(&f, false, 100);
        ck_assert_int_eq(f.calls.timed_out, 1);
        /* A new COMMAND gets a new clock. */
        ck_assert_int_eq(ready_start(f.r, getpid()), 0);
        DISPATCH_UNTIL(&f, f.calls.timed_out > 1, 2000);
        ck_assert_int_eq(f.calls.timed_out, 2);
        fixture_done(&f);
}
END_TEST

START_TEST(test_ready_in_time_stops_the_clock) {
        struct fixture f;

        fixture_init(&f, true, 60000);
        ck_assert_int_eq(ready_start(f.r, getpid()), 0);
        send_notification(f.r, "READY=1");
        DISPATCH_UNTIL(&f, f.calls.met > 0, 1000);
        ck_assert_int_eq(f.calls.met, 1);
        /* Past the timeout: nothing fires. */
        DISPATCH_UNTIL(&f, false, 150);
        ck_assert_int_eq(f.calls.timed_out, 0);
        fixture_done(&f);
}
END_TEST

START_TEST(test_extend_timeout_postpones) {
        struct fixture f;
        uint64_t start;

        fixture_init(&f, true, 40000);
        start = now_msec();
        ck_assert_int_eq(ready_start(f.r, getpid()), 0);
        /* As systemd: at least 300 ms from now. */
        send_notification(f.r, "EXTEND_TIMEOUT_USEC=300000");
        DISPATCH_UNTIL(&f, f.calls.timed_out > 0, 2000);
        ck_assert_int_eq(f.calls.timed_out, 1);
        ck_assert_uint_ge(now_msec() - start, 300);
        fixture_done(&f);
}
END_TEST

/* The loop runs late on a loaded machine: the clock has run out and a
 * READY=1 waits on the socket when the loop next wakes. What is queued
 * counts, whichever of the two the loop hands over first. */
START_TEST(test_ready_queued_when_the_clock_runs_out_counts) {
        struct fixture f;

        fixture_init(&f, true, 20000);
        ck_assert_int_eq(ready_start(f.r, getpid()), 0);
        usleep(60000); /* past the timeout, so the timer is ready first */
        send_notification(f.r, "READY=1");
        DISPATCH_UNTIL(&f, f.calls.met + f.calls.timed_out > 0, 1000);
        ck_assert_int_eq(f.calls.met, 1);
        ck_assert_int_eq(f.calls.timed_out, 0);
        ck_assert(!ready_waiting(f.r));
        fixture_done(&f);
}
END_TEST

START_TEST(test_extend_queued_when_the_clock_runs_out_counts) {
        struct fixture f;
        uint64_t start;

        fixture_init(&f, true, 20000);
        ck_assert_int_eq(ready_start(f.r, getpid()), 0);
        usleep(60000);
        start = now_msec();
        send_notification(f.r, "EXTEND_TIMEOUT_USEC=200000");
        DISPATCH_UNTIL(&f, f.calls.timed_out > 0, 3000);
        ck_assert_int_eq(f.calls.timed_out, 1);
        ck_assert_uint_ge(now_msec() - start, 200);
        fixture_done(&f);
}
END_TEST

START_TEST(test_no_timeout_waits) {
        struct fixture f;

        fixture_init(&f, true, 0);
        ck_assert_int_eq(ready_start(f.r, getpid()), 0);
        DISPATCH_UNTIL(&f, false, 100);
        ck_assert_int_eq(f.calls.timed_out, 0);
        ck_assert(ready_waiting(f.r));
        fixture_done(&f);
}
END_TEST

START_TEST(test_free_without_attach) {
        struct ready_options o = options_of(true, 1000);
        struct ready *r = NULL;

        ck_assert_int_eq(ready_new(&o, command, &r), 0);
        ready_free(r);
        ready_free(NULL);
}
END_TEST

int main(void) {
        Suite *s = suite_create("ready");
        TCase *off = tcase_create("off"), *on = tcase_create("on"), *timeout = tcase_create("timeout");

        tcase_add_test(off, test_off_waits_for_nothing);
        suite_add_tcase(s, off);
        tcase_add_test(on, test_on_pending_until_met_once);
        tcase_add_test(on, test_ready_from_command_through_the_loop);
        tcase_add_test(on, test_ready_from_a_stranger_is_ignored);
        tcase_add_test(on, test_forgotten_child_counts_no_more);
        tcase_add_test(on, test_free_without_attach);
        tcase_add_test(on, test_log_and_notify_both_wanted);
        suite_add_tcase(s, on);
        tcase_add_test(timeout, test_timeout_fires_through_the_loop);
        tcase_add_test(timeout, test_ready_in_time_stops_the_clock);
        tcase_add_test(timeout, test_extend_timeout_postpones);
        tcase_add_test(timeout, test_ready_queued_when_the_clock_runs_out_counts);
        tcase_add_test(timeout, test_extend_queued_when_the_clock_runs_out_counts);
        tcase_add_test(timeout, test_no_timeout_waits);
        suite_add_tcase(s, timeout);
        return unit_run(s);
}
