/* SPDX-License-Identifier: MIT */
/* The supervisor's event loop (loop.c) on real fds: pipes and eventfds as
 * sources, handlers that add and remove sources while a batch is being
 * dispatched, errors that end dispatch, and the deadlines the loop keeps. Every
 * wait is bounded (a few hundred milliseconds at most). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "loop.h"
#include "unit.h"

/* What the handlers saw. */
struct seen {
        int calls;
        int fd;
        uint32_t revents;
};

static int record(struct loop *l, int fd, uint32_t revents, void *userdata) {
        struct seen *s = userdata;

        s->calls++;
        s->fd = fd;
        s->revents = revents;
        return 0;
}

static int drain_and_record(struct loop *l, int fd, uint32_t revents, void *userdata) {
        uint64_t v;

        ck_assert_int_eq(read(fd, &v, sizeof v), (ssize_t) sizeof v);
        return record(l, fd, revents, userdata);
}

static int new_eventfd(void) {
        int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);

        ck_assert_int_ge(fd, 0);
        return fd;
}

static void signal_eventfd(int fd) {
        uint64_t one = 1;

        ck_assert_int_eq(write(fd, &one, sizeof one), (ssize_t) sizeof one);
}

static struct loop *new_loop(void) {
        struct loop *l = NULL;

        ck_assert_int_eq(loop_new(&l), 0);
        ck_assert_ptr_nonnull(l);
        return l;
}

/* ---- sources ------------------------------------------------------------- */

START_TEST(test_pipe_readable_dispatches_its_handler) {
        struct loop *l = new_loop();
        struct seen seen = { 0 };
        int p[2];

        ck_assert_int_eq(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
        ck_assert_int_eq(loop_add(l, p[0], LOOP_IN, record, &seen), 0);
        /* Nothing ready: a bounded wait dispatches nothing. */
        ck_assert_int_eq(loop_dispatch_once(l, 20), 0);
        ck_assert_int_eq(seen.calls, 0);
        ck_assert_int_eq(write(p[1], "x", 1), 1);
        ck_assert_int_eq(loop_dispatch_once(l, 1000), 1);
        ck_assert_int_eq(seen.calls, 1);
        ck_assert_int_eq(seen.fd, p[0]);
        ck_assert(seen.revents & LOOP_IN);
        /* Level-triggered: still readable, called again. */
        ck_assert_int_eq(loop_dispatch_once(l, 1000), 1);
        ck_assert_int_eq(seen.calls, 2);
        /* The writer goes: LOOP_HUP reaches the handler. */
        close(p[1]);
        ck_assert_int_eq(loop_dispatch_once(l, 1000), 1);
        ck_assert(seen.revents & LOOP_HUP);
        loop_free(l);
        close(p[0]);
}
END_TEST

START_TEST(test_add_rejects_bad_fd_duplicate_and_no_handler) {
        struct loop *l = new_loop();
        struct seen seen = { 0 };
        int e = new_eventfd(), dir;

        ck_assert_int_eq(loop_add(l, -1, LOOP_IN, record, &seen), -EINVAL);
        ck_assert_int_eq(loop_add(l, e, LOOP_IN, NULL, &seen), -EINVAL);
        ck_assert_int_eq(loop_add(l, e, LOOP_IN, record, &seen), 0);
        ck_assert_int_eq(loop_add(l, e, LOOP_IN, record, &seen), -EEXIST);
        /* A closed fd: epoll's own error, and no source left behind. */
        ck_assert_int_eq(loop_add(l, 900, LOOP_IN, record, &seen), -EBADF);
        ck_assert_int_eq(loop_modify(l, 900, LOOP_IN), -ENOENT);
        /* A regular directory cannot be polled: -EPERM, the fd stays free. */
        dir = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(dir, 0);
        ck_assert_int_eq(loop_add(l, dir, LOOP_IN, record, &seen), -EPERM);
        ck_assert_int_eq(loop_modify(l, dir, LOOP_IN), -ENOENT);
        close(dir);
        loop_free(l);
        close(e);
}
END_TEST

START_TEST(test_modify_changes_the_events) {
        struct loop *l = new_loop();
        struct seen seen = { 0 };
        int p[2];

        ck_assert_int_eq(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
        /* The write end is writable at once. */
        ck_assert_int_eq(loop_add(l, p[1], 0, record, &seen), 0);
        ck_assert_int_eq(loop_dispatch_once(l, 20), 0);
        ck_assert_int_eq(loop_modify(l, p[1], LOOP_OUT), 0);
        ck_assert_int_eq(loop_dispatch_once(l, 1000), 1);
        ck_assert(seen.revents & LOOP_OUT);
        ck_assert_int_eq(loop_modify(l, p[1], 0), 0);
        ck_assert_int_eq(loop_dispatch_once(l, 20), 0);
        ck_assert_int_eq(seen.calls, 1);
        ck_assert_int_eq(loop_modify(l, p[0], LOOP_IN), -ENOENT);
        ck_assert_int_eq(loop_modify(l, -1, LOOP_IN), -ENOENT);
        loop_free(l);
        close(p[0]);
        close(p[1]);
}
END_TEST

START_TEST(test_remove_stops_dispatch_and_frees_the_fd) {
        struct loop *l = new_loop();
        struct seen a = { 0 }, b = { 0 };
        int e = new_eventfd();

        ck_assert_int_eq(loop_add(l, e, LOOP_IN, record, &a), 0);
        signal_eventfd(e);
        loop_remove(l, e);
        ck_assert_int_eq(loop_dispatch_once(l, 20), 0);
        ck_assert_int_eq(a.calls, 0);
        /* Unknown fds are ignored. */
        loop_remove(l, e);
        loop_remove(l, -1);
        loop_remove(l, 100000);
        /* The fd may be added again, with another handler. */
        ck_assert_int_eq(loop_add(l, e, LOOP_IN, drain_and_record, &b), 0);
        ck_assert_int_eq(loop_dispatch_once(l, 1000), 1);
        ck_assert_int_eq(a.calls, 0);
        ck_assert_int_eq(b.calls, 1);
        loop_free(l);
        close(e);
}
END_TEST

START_TEST(test_many_sources_each_once) {
        struct loop *l = new_loop();
        struct seen seen[40] = { 0 };
        int fds[40], total = 0;

        /* More than one epoll_wait() batch (32), and fds past the table's
         * first allocation. */
        for (int i = 0; i < 40; i++) {
                fds[i] = new_eventfd();
                ck_assert_int_eq(loop_add(l, fds[i], LOOP_IN, drain_and_record, &seen[i]), 0);
                signal_eventfd(fds[i]);
        }
        for (int turn = 0; turn < 5 && total < 40; turn++) {
                int k = loop_dispatch_once(l, 1000);
                ck_assert_int_ge(k, 1);
                total += k;
        }
        ck_assert_int_eq(total, 40);
        for (int i = 0; i < 40; i++) {
                ck_assert_int_eq(seen[i].calls, 1);
                ck_assert_int_eq(seen[i].fd, fds[i]);
        }
        loop_free(l);
        for (int i = 0; i < 40; i++)
                close(fds[i]);
}
END_TEST

/* ---- handlers that change the table -------------------------------------- */

struct remover {
        int victim; /* the fd to remove */
        int calls;
        struct seen *victim_seen;
};

static int remove_other(struct loop *l, int fd, uint32_t revents, void *userdata) {
        struct remover *r = userdata;

        r->calls++;
        /* Whichever of the two runs first removes the other. */
        loop_remove(l, r->victim);
        return 0;
}

START_TEST(test_removed_source_with_pending_event_is_not_called) {
        struct loop *l = new_loop();
        int a = new_eventfd(), b = new_eventfd();
        struct remover ra = { .victim = b }, rb = { .victim = a };

        ck_assert_int_eq(loop_add(l, a, LOOP_IN, remove_other, &ra), 0);
        ck_assert_int_eq(loop_add(l, b, LOOP_IN, remove_other, &rb), 0);
        signal_eventfd(a);
        signal_eventfd(b);
        /* Both are ready in the same batch; the first handler removes the
         * other, which must not be called. */
        ck_assert_int_eq(loop_dispatch_once(l, 1000), 1);
        ck_assert_int_eq(ra.calls + rb.calls, 1);
        loop_free(l);
        close(a);
        close(b);
}
END_TEST

static int remove_self(struct loop *l, int fd, uint32_t revents, void *userdata) {
        int *calls = userdata;

        (*calls)++;
        loop_remove(l, fd);
        return 0;
}

START_TEST(test_handler_removes_itself) {
        struct loop *l = new_loop();
        int e = new_eventfd(), calls = 0;

        ck_assert_int_eq(loop_add(l, e, LOOP_IN, remove_self, &calls), 0);
        signal_eventfd(e);
        ck_assert_int_eq(loop_dispatch_once(l, 1000), 1);
        /* Still readable, but no longer watched. */
        ck_assert_int_eq(loop_dispatch_once(l, 20), 0);
        ck_assert_int_eq(calls, 1);
        loop_free(l);
        close(e);
}
END_TEST

struct adder {
        int fd;
        struct seen *seen;
};

static int add_another(struct loop *l, int fd, uint32_t revents, void *userdata) {
        struct adder *a = userdata;
        uint64_t v;

        (void) !read(fd, &v, sizeof v);
        return loop_add(l, a->fd, LOOP_IN, drain_and_record, a->seen);
}

START_TEST(test_handler_adds_a_source) {
        struct loop *l = new_loop();
        struct seen seen = { 0 };
        int e = new_eventfd(), f = new_eventfd();
        struct adder a = { f, &seen };

        ck_assert_int_eq(loop_add(l, e, LOOP_IN, add_another, &a), 0);
        signal_eventfd(e);
        signal_eventfd(f);
        ck_assert_int_eq(loop_dispatch_once(l, 1000), 1);
        ck_assert_int_eq(seen.calls, 0);
        ck_assert_int_eq(loop_dispatch_once(l, 1000), 1);
        ck_assert_int_eq(seen.calls, 1);
        ck_assert_int_eq(seen.fd, f);
        loop_free(l);
        close(e);
        close(f);
}
END_TEST

static int fail_with_eio(struct loop *l, int fd, uint32_t revents, void *userdata) {
        int *calls = userdata;

        (*calls)++;
        return -EIO;
}

START_TEST(test_handler_error_ends_dispatch) {
        struct loop *l = new_loop();
        int a = new_eventfd(), b = new_eventfd(), calls_a = 0, calls_b = 0;

        ck_assert_int_eq(loop_add(l, a, LOOP_IN, fail_with_eio, &calls_a), 0);
        ck_assert_int_eq(loop_add(l, b, LOOP_IN, fail_with_eio, &calls_b), 0);
        signal_eventfd(a);
        signal_eventfd(b);
        /* Both ready; the first error ends the batch: one handler ran. */
        ck_assert_int_eq(loop_dispatch_once(l, 1000), -EIO);
        ck_assert_int_eq(calls_a + calls_b, 1);
        loop_free(l);
        close(a);
        close(b);
}
END_TEST

START_TEST(test_free_null) {
        loop_free(NULL);
}
END_TEST

/* The fd-reuse turn: one epoll_wait() returns events for A and B; A's
 * handler closes B and a new source (an eventfd never signalled) gets B's
 * number. B's event must not reach the new source's handler. */
struct reuse {
        struct loop *loop;
        int fds[2];
        struct seen *seen_new;
        int replaced; /* the fd number reused, -1 until then */
};

static int replace_the_other(struct loop *l, int fd, uint32_t revents, void *userdata) {
        struct reuse *u = userdata;
        int other = u->fds[0] == fd ? u->fds[1] : u->fds[0];
        uint64_t v;
        int t;

        ck_assert_int_eq(read(fd, &v, sizeof v), (ssize_t) sizeof v);
        if (u->replaced >= 0)
                return 0;
        loop_remove(l, other);
        ck_assert_int_eq(close(other), 0);
        t = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK); /* never readable: not signalled */
        ck_assert_int_ge(t, 0);
        if (t != other) { /* the lowest free number is often other's */
                ck_assert_int_eq(dup3(t, other, O_CLOEXEC), other);
                ck_assert_int_eq(close(t), 0);
        }
        ck_assert_int_eq(loop_add(l, other, LOOP_IN, record, u->seen_new), 0);
        u->replaced = other;
        return 0;
}

START_TEST(test_reused_fd_does_not_get_the_stale_event) {
        struct loop *l = new_loop();
        struct seen seen_new = { 0 };
        struct reuse u = { .loop = l, .fds = { new_eventfd(), new_eventfd() }, .seen_new = &seen_new, .replaced = -1 };

        for (int i = 0; i < 2; i++) {
                ck_assert_int_eq(loop_add(l, u.fds[i], LOOP_IN, replace_the_other, &u), 0);
                signal_eventfd(u.fds[i]);
        }
        /* Both events come in one batch; the first handler replaces the
         * other fd; the second event is stale. */
        ck_assert_int_eq(loop_dispatch_once(l, 1000), 1);
        ck_assert_int_ge(u.replaced, 0);
        ck_assert_int_eq(seen_new.calls, 0);
        /* The new source works: a later event of its own is delivered. */
        signal_eventfd(u.replaced);
        ck_assert_int_eq(loop_dispatch_once(l, 1000), 1);
        ck_assert_int_eq(seen_new.calls, 1);
        ck_assert_int_eq(seen_new.fd, u.replaced);
        loop_free(l);
        close(u.fds[0]);
        close(u.fds[1]);
}
END_TEST

/* A modified source keeps its identity: its events still arrive. */
START_TEST(test_modify_keeps_the_source) {
        struct loop *l = new_loop();
        struct seen seen = { 0 };
        int e = new_eventfd();

        ck_assert_int_eq(loop_add(l, e, LOOP_OUT, drain_and_record, &seen), 0);
        ck_assert_int_eq(loop_modify(l, e, LOOP_IN), 0);
        signal_eventfd(e);
        ck_assert_int_eq(loop_dispatch_once(l, 1000), 1);
        ck_assert_int_eq(seen.calls, 1);
        loop_free(l);
        close(e);
}
END_TEST

/* ---- deadlines: timers the loop keeps, no fd ------------------------------ */

struct rang {
        int calls;
        struct loop_timer *t;
        uint64_t at;
        struct loop_timer *stop_this; /* a handler that disarms another */
        int order[4], n_order, id;
        struct rang *log;
};

static int rang(struct loop *l, struct loop_timer *t, void *userdata) {
        struct rang *r = userdata;

        r->calls++;
        r->t = t;
        r->at = now_usec();
        ck_assert(!t->armed);
        if (r->stop_this)
                loop_timer_stop(l, r->stop_this);
        if (r->log)
                r->log->order[r->log->n_order++] = r->id;
        return 0;
}

START_TEST(test_deadline_fires_once_never_early) {
        struct loop *l = new_loop();
        struct loop_timer t = { 0 };
        struct rang r = { 0 };
        uint64_t start = now_usec();

        loop_timer_start(l, &t, 30000, rang, &r);
        ck_assert(t.armed);
        ck_assert_uint_gt(loop_timer_left(&t), 0);
        /* A wait for ever is cut short by the deadline. */
        while (r.calls == 0)
                ck_assert_int_ge(loop_dispatch_once(l, -1), 0);
        ck_assert_ptr_eq(r.t, &t);
        ck_assert_uint_ge(r.at - start, 30000);
        ck_assert_uint_lt(r.at - start, 1000000);
        ck_assert(!t.armed);
        ck_assert_uint_eq(loop_timer_left(&t), 0);
        ck_assert_int_eq(loop_dispatch_once(l, 50), 0);
        ck_assert_int_eq(r.calls, 1);
        loop_free(l);
}
END_TEST

START_TEST(test_deadline_zero_runs_at_the_next_turn) {
        struct loop *l = new_loop();
        struct loop_timer t = { 0 };
        struct rang r = { 0 };

        loop_timer_start(l, &t, 0, rang, &r);
        ck_assert_int_eq(loop_dispatch_once(l, 1000), 1);
        ck_assert_int_eq(r.calls, 1);
        loop_free(l);
}
END_TEST

START_TEST(test_deadline_restart_postpones_and_stop_cancels) {
        struct loop *l = new_loop();
        struct loop_timer t = { 0 }, u = { 0 };
        struct rang r = { 0 }, q = { 0 };

        loop_timer_start(l, &t, 20000, rang, &r);
        loop_timer_start(l, &t, 10000000, rang, &r);
        ck_assert_int_eq(loop_dispatch_once(l, 60), 0);
        ck_assert_int_eq(r.calls, 0);
        loop_timer_start(l, &u, 1000, rang, &q);
        loop_timer_stop(l, &u);
        loop_timer_stop(l, &u);
        ck_assert_int_eq(loop_dispatch_once(l, 30), 0);
        ck_assert_int_eq(q.calls, 0);
        loop_timer_start(l, &t, 1000, rang, &r);
        while (r.calls == 0)
                ck_assert_int_ge(loop_dispatch_once(l, 1000), 0);
        ck_assert_int_eq(r.calls, 1);
        loop_free(l);
}
END_TEST

START_TEST(test_deadlines_run_earliest_first_and_a_stopped_one_not) {
        struct loop *l = new_loop();
        struct loop_timer a = { 0 }, b = { 0 }, c = { 0 };
        struct rang log = { 0 }, ra = { .id = 1, .log = &log }, rb = { .id = 2, .log = &log },
                    rc = { .id = 3, .log = &log };

        /* All due in one turn: b first, and b stops c before its turn. */
        loop_timer_start(l, &a, 3000, rang, &ra);
        loop_timer_start(l, &c, 4000, rang, &rc);
        loop_timer_start(l, &b, 1000, rang, &rb);
        rb.stop_this = &c;
        usleep(10000);
        ck_assert_int_eq(loop_dispatch_once(l, 0), 2);
        ck_assert_int_eq(log.n_order, 2);
        ck_assert_int_eq(log.order[0], 2);
        ck_assert_int_eq(log.order[1], 1);
        ck_assert_int_eq(rc.calls, 0);
        ck_assert_int_eq(loop_dispatch_once(l, 20), 0);
        loop_free(l);
}
END_TEST

static int again(struct loop *l, struct loop_timer *t, void *userdata) {
        int *calls = userdata;

        ++*calls;
        loop_timer_start(l, t, 0, again, calls);
        return 0;
}

START_TEST(test_deadline_rearmed_at_zero_waits_for_the_next_turn) {
        struct loop *l = new_loop();
        struct loop_timer t = { 0 };
        struct seen seen = { 0 };
        int calls = 0, e = new_eventfd();

        ck_assert_int_eq(loop_add(l, e, LOOP_IN, drain_and_record, &seen), 0);
        loop_timer_start(l, &t, 0, again, &calls);
        ck_assert_int_eq(loop_dispatch_once(l, 1000), 1);
        ck_assert_int_eq(calls, 1);
        /* The fds still get their turn. */
        signal_eventfd(e);
        ck_assert_int_eq(loop_dispatch_once(l, 1000), 2);
        ck_assert_int_eq(seen.calls, 1);
        ck_assert_int_eq(calls, 2);
        loop_timer_stop(l, &t);
        loop_remove(l, e);
        close(e);
        loop_free(l);
}
END_TEST

static int failing(struct loop *l, struct loop_timer *t, void *userdata) {
        return -EIO;
}

START_TEST(test_deadline_handler_error_ends_dispatch) {
        struct loop *l = new_loop();
        struct loop_timer t = { 0 };

        loop_timer_start(l, &t, 0, failing, NULL);
        ck_assert_int_eq(loop_dispatch_once(l, 1000), -EIO);
        ck_assert(!t.armed);
        loop_free(l);
}
END_TEST

int main(void) {
        Suite *s = suite_create("loop");
        TCase *sources = tcase_create("sources"), *changes = tcase_create("changes"),
              *deadlines = tcase_create("deadlines");

        tcase_add_test(sources, test_pipe_readable_dispatches_its_handler);
        tcase_add_test(sources, test_add_rejects_bad_fd_duplicate_and_no_handler);
        tcase_add_test(sources, test_modify_changes_the_events);
        tcase_add_test(sources, test_remove_stops_dispatch_and_frees_the_fd);
        tcase_add_test(sources, test_many_sources_each_once);
        tcase_add_test(sources, test_free_null);
        suite_add_tcase(s, sources);
        tcase_add_test(changes, test_removed_source_with_pending_event_is_not_called);
        tcase_add_test(changes, test_handler_removes_itself);
        tcase_add_test(changes, test_handler_adds_a_source);
        tcase_add_test(changes, test_handler_error_ends_dispatch);
        tcase_add_test(changes, test_reused_fd_does_not_get_the_stale_event);
        tcase_add_test(changes, test_modify_keeps_the_source);
        suite_add_tcase(s, changes);
        tcase_add_test(deadlines, test_deadline_fires_once_never_early);
        tcase_add_test(deadlines, test_deadline_zero_runs_at_the_next_turn);
        tcase_add_test(deadlines, test_deadline_restart_postpones_and_stop_cancels);
        tcase_add_test(deadlines, test_deadlines_run_earliest_first_and_a_stopped_one_not);
        tcase_add_test(deadlines, test_deadline_rearmed_at_zero_waits_for_the_next_turn);
        tcase_add_test(deadlines, test_deadline_handler_error_ends_dispatch);
        suite_add_tcase(s, deadlines);
        return unit_run(s);
}
