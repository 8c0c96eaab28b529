/* SPDX-License-Identifier: MIT */
/* The check interface (ready_check.h) and the list that decides (ready.c),
 * with a kind of this test's own: two checks, all or any of them, each
 * started, stopped and freed once, their phrases joined; then each real
 * kind's constructor on good and bad arguments, and its phrase. */
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ready_check.h"
#include "loop.h"
#include "ready.h"
#include "unit.h"

/* ---- a kind of the test's own ----------------------------------------------- */

struct counts {
        int started, stopped, freed, attached, detached;
};

struct fake_check {
        struct ready_check check;
        const char *phrase;
        struct counts *counts;
};

static int fake_start(struct ready_check *c) {
        ((struct fake_check *) c)->counts->started++;
        return 0;
}

static void fake_stop(struct ready_check *c) {
        ((struct fake_check *) c)->counts->stopped++;
}

static size_t fake_describe(const struct ready_check *c, char *buf, size_t size) {
        return (size_t) snprintf(buf, size, "%s", ((const struct fake_check *) c)->phrase);
}

static void fake_free(struct ready_check *c) {
        ((struct fake_check *) c)->counts->freed++;
        free(c);
}

static int fake_attach(struct ready_check *c) {
        ((struct fake_check *) c)->counts->attached++;
        return 0;
}

static void fake_detach(struct ready_check *c) {
        ((struct fake_check *) c)->counts->detached++;
}

static const struct ready_check_kind fake_kind = {
        .name = "fake",
        .start = fake_start,
        .stop = fake_stop,
        .describe = fake_describe,
        .free = fake_free,
        .attach = fake_attach,
        .detach = fake_detach,
};

static struct ready_check *fake_new(const char *phrase, struct counts *counts) {
        struct fake_check *f = calloc(1, sizeof *f);

        ck_assert_ptr_nonnull(f);
        *f = (struct fake_check) { .check.kind = &fake_kind, .phrase = phrase, .counts = counts };
        return &f->check;
}

struct calls {
        int met, timed_out;
};

static void on_ready(enum ready_event event, void *userdata) {
        struct calls *c = userdata;

        if (event == READY_MET)
                c->met++;
        else
                c->timed_out++;
}

/* A list of two fake checks, a and b, on a loop. */
struct pair {
        struct loop *loop;
        struct ready *r;
        struct ready_check *a, *b;
        struct counts ca, cb;
        struct calls calls;
};

static void pair_open(struct pair *p, enum ready_mode mode) {
        struct ready_options o = { .timeout_usec = 0 };

        *p = (struct pair) { 0 };
        ck_assert_int_eq(loop_new(&p->loop), 0);
        ck_assert_int_eq(ready_new(&o, "server", &p->r), 0);
        ck_assert(!ready_needed(p->r));
        p->a = fake_new("did not a", &p->ca);
        p->b = fake_new("did not b", &p->cb);
        ck_assert_int_eq(ready_add_check(p->r, p->a), 0);
        ck_assert_int_eq(ready_attach(p->r, p->loop, on_ready, &p->calls), 0);
        /* Added once attached: attached at once. */
        ck_assert_int_eq(ready_add_check(p->r, p->b), 0);
        ck_assert_int_eq(p->ca.attached + p->cb.attached, 2);
        ready_set_mode(p->r, mode);
        ck_assert(ready_needed(p->r));
}

static void pair_close(struct pair *p) {
        ready_free(p->r);
        /* Each detached and freed once. */
        ck_assert_int_eq(p->ca.detached, 1);
        ck_assert_int_eq(p->cb.detached, 1);
        ck_assert_int_eq(p->ca.freed, 1);
        ck_assert_int_eq(p->cb.freed, 1);
        loop_free(p->loop);
}

START_TEST(test_all_waits_for_both) {
        struct pair p;
        char buf[64];

        pair_open(&p, READY_ALL);
        ck_assert_int_eq(ready_start(p.r, getpid()), 0);
        ck_assert_int_eq(p.ca.started, 1);
        ck_assert_int_eq(p.cb.started, 1);
        ck_assert(p.a->child == getpid() && p.a->waiting && !p.a->met);
        ck_assert_str_eq(ready_describe_unmet(p.r, buf, sizeof buf), "did not a and did not b");
        ready_check_met(p.b, "b");
        /* A check that holds stops; the list waits on. */
        ck_assert_int_eq(p.cb.stopped, 1);
        ck_assert_int_eq(p.calls.met, 0);
        ck_assert(ready_waiting(p.r));
        ck_assert_str_eq(ready_describe_unmet(p.r, buf, sizeof buf), "did not a");
        /* Met twice: once. */
        ready_check_met(p.b, "b");
        ck_assert_int_eq(p.cb.stopped, 1);
        ready_check_met(p.a, "a");
        ck_assert_int_eq(p.calls.met, 1);
        ck_assert(!ready_waiting(p.r));
        ck_assert_str_eq(ready_describe_unmet(p.r, buf, sizeof buf), "");
        ck_assert_int_eq(p.ca.stopped, 1);
        ck_assert_int_eq(p.cb.stopped, 1);
        /* A new COMMAND: both pending again. */
        ck_assert_int_eq(ready_start(p.r, getpid()), 0);
        ck_assert_int_eq(p.ca.started, 2);
        ck_assert(!p.a->met && !p.b->met);
        ck_assert_str_eq(ready_describe_unmet(p.r, buf, sizeof buf), "did not a and did not b");
        pair_close(&p);
        ck_assert_int_eq(p.calls.met, 1);
}
END_TEST

START_TEST(test_any_takes_either) {
        struct pair p;

        pair_open(&p, READY_ANY);
        ck_assert_int_eq(ready_start(p.r, getpid()), 0);
        ready_check_met(p.a, "a");
        ck_assert_int_eq(p.calls.met, 1);
        ck_assert(!ready_waiting(p.r));
        /* The other one is stopped, unmet. */
        ck_assert_int_eq(p.cb.stopped, 1);
        ck_assert(!p.b->met && !p.b->waiting);
        /* Too late: nothing more. */
        ready_check_met(p.b, "b");
        ck_assert_int_eq(p.calls.met, 1);
        ck_assert_int_eq(ready_start(p.r, getpid()), 0);
        ready_check_met(p.b, "b");
        ck_assert_int_eq(p.calls.met, 2);
        pair_close(&p);
}
END_TEST

/* Stopping stops every check still waiting, once; the free after it
 * frees each one. */
START_TEST(test_stop_and_free) {
        struct pair p;

        pair_open(&p, READY_ALL);
        ck_assert_int_eq(ready_start(p.r, getpid()), 0);
        ready_check_met(p.a, "a");
        ready_stop(p.r);
        ck_assert_int_eq(p.ca.stopped, 1);
        ck_assert_int_eq(p.cb.stopped, 1);
        ready_stop(p.r);
        ck_assert_int_eq(p.cb.stopped, 1);
        ck_assert_int_eq(p.calls.met, 0);
        pair_close(&p);
}
END_TEST

/* The joined phrases are cut to the buffer, never overrun. */
START_TEST(test_describe_cuts) {
        struct pair p;
        char buf[64];

        pair_open(&p, READY_ALL);
        ck_assert_int_eq(ready_start(p.r, getpid()), 0);
        for (size_t size = 1; size <= sizeof "did not a and did not b"; size++) {
                memset(buf, 'x', sizeof buf);
                ready_describe_unmet(p.r, buf, size);
                ck_assert_uint_eq(strlen(buf), size - 1);
                ck_assert(strncmp(buf, "did not a and did not b", size - 1) == 0);
                ck_assert_int_eq(buf[size], 'x');
        }
        pair_close(&p);
}
END_TEST

/* ---- each kind: its constructor and its phrase ------------------------------ */

/* The phrase of a check that was never started (as after a start). */
static const char *phrase_of(const struct ready_check *c, char *buf, size_t size) {
        c->kind->describe(c, buf, size);
        return buf;
}

static struct bound_socket tcp_socket(void) {
        struct bound_socket s = { .fd = -1, .type = SOCK_STREAM, .name = (char *) "web" };

        s.addr.in = (struct sockaddr_in) { .sin_family = AF_INET,
                                           .sin_port = htons(8080),
                                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        s.addr_len = sizeof s.addr.in;
        return s;
}

START_TEST(test_notify_kind) {
        struct ready_check *c;
        char buf[128];

        ck_assert_int_eq(check_notify_new(&c), 0);
        ck_assert_str_eq(c->kind->name, "notify");
        ck_assert_ptr_nonnull(strstr(check_notify_entry(c), "NOTIFY_SOCKET=@prebind/"));
        ck_assert_str_eq(phrase_of(c, buf, sizeof buf), "did not send READY=1");
        c->kind->free(c);
}
END_TEST

START_TEST(test_log_kind) {
        const struct ready_check_env env = { .interval_usec = 100000 };
        const struct ready_check_kind *k = &ready_check_log;
        struct ready_check *c = NULL;
        char buf[128];
        int out, err;

        ck_assert_str_eq(k->refuse(""), "empty regular expression (it would match any line)");
        ck_assert_ptr_null(k->refuse("x"));
        ck_assert(!k->retries);
        ck_assert_int_eq(k->create("^up$", &env, &c), 0);
        ck_assert_str_eq(c->kind->name, "log");
        ck_assert_str_eq(phrase_of(c, buf, sizeof buf), "wrote no line that matches --ready-log '^up$'");
        c->kind->child_output(c, &out, &err);
        ck_assert_int_gt(out, 2);
        ck_assert_int_gt(err, 2);
        c->kind->free(c);
        /* A pattern refused when it is compiled: bad usage too. */
        ck_assert_int_eq(k->create("(a", &env, &c), -EINVAL);
        ck_assert_int_eq(k->create("a\\1", &env, &c), -EINVAL);
}
END_TEST

START_TEST(test_exec_kind) {
        struct bound_socket s = tcp_socket();
        char *const setenv[] = { (char *) "A=1", (char *) "NOTIFY_SOCKET=@x" };
        const struct ready_check_env env = { &s, 1, setenv, 2, 100000 };
        const struct ready_check_kind *k = &ready_check_exec;
        struct ready_check *c = NULL;
        char buf[128];

        ck_assert_str_eq(k->refuse(""), "empty command");
        ck_assert_ptr_null(k->refuse("true"));
        ck_assert(k->retries);
        ck_assert_int_eq(k->create("nc -z {web.host} {port}", &env, &c), 0);
        ck_assert_str_eq(c->kind->name, "exec");
        ck_assert_str_eq(phrase_of(c, buf, sizeof buf),
                         "did not pass --ready-exec 'nc -z 127.0.0.1 8080' (has not finished yet, 0 attempts)");
        c->kind->free(c);
        /* A template that names nothing, or a field that is not one. */
        ck_assert_int_eq(k->create("true {db.port}", &env, &c), -EINVAL);
        ck_assert_int_eq(k->create("true {nope}", &env, &c), -EINVAL);
}
END_TEST

START_TEST(test_http_kind) {
        struct bound_socket s = tcp_socket(), udp = tcp_socket();
        const struct ready_check_env env = { &s, 1, NULL, 0, 100000 }, env_udp = { &udp, 1, NULL, 0, 100000 };
        const struct ready_check_kind *k = &ready_check_http;
        struct ready_check *c = NULL;
        char buf[128];

        ck_assert_ptr_null(k->refuse);
        ck_assert_str_eq(k->default_arg, "/");
        ck_assert(k->retries);
        ck_assert_int_eq(k->create("/healthz", &env, &c), 0);
        ck_assert_str_eq(c->kind->name, "http");
        ck_assert_str_eq(phrase_of(c, buf, sizeof buf),
                         "did not pass --ready-http (GET /healthz got no answer yet, 0 attempts)");
        c->kind->free(c);
        /* No TCP socket; a path that is not one. */
        udp.type = SOCK_DGRAM;
        ck_assert_int_eq(k->create("/", &env_udp, &c), -EINVAL);
        ck_assert_int_eq(k->create("healthz", &env, &c), -EINVAL);
        ck_assert_int_eq(k->create("/a b", &env, &c), -EINVAL);
}
END_TEST

static void never(void *userdata, size_t index, int family) {
        ck_abort();
}

START_TEST(test_tcp_kind) {
        const uint16_t ports[] = { 6379, 6380 };
        struct check_tcp_params p = {
                .ports = ports,
                .n_ports = 2,
                .accepted = never,
                .where = "inside its namespace",
        };
        struct ready_check *c = NULL;
        char buf[128];

        ck_assert_int_eq(check_tcp_new(&p, &c), 0);
        ck_assert_str_eq(c->kind->name, "tcp");
        ck_assert_str_eq(phrase_of(c, buf, sizeof buf),
                         "did not accept a connection on its --intercept port inside its namespace");
        c->kind->free(c);
}
END_TEST

/* The options' list: one check per kind, the last option wins, an
 * optional argument left out is the kind's default, a refusal says why. */
START_TEST(test_options_list) {
        struct ready_options o = { 0 };

        ck_assert(!ready_options_wait(&o));
        ck_assert_ptr_null(ready_options_add(&o, &ready_check_log, "a"));
        ck_assert(ready_options_wait(&o));
        ck_assert(!ready_options_retry(&o));
        ck_assert_ptr_null(ready_options_add(&o, &ready_check_http, NULL));
        ck_assert(ready_options_retry(&o));
        ck_assert_ptr_null(ready_options_add(&o, &ready_check_log, "b"));
        ck_assert_uint_eq(o.n_checks, 2);
        ck_assert_str_eq(ready_options_arg(&o, &ready_check_log), "b");
        ck_assert_str_eq(ready_options_arg(&o, &ready_check_http), "/");
        ck_assert_ptr_null(ready_options_arg(&o, &ready_check_exec));
        ck_assert_str_eq(ready_options_add(&o, &ready_check_exec, ""), "empty command");
        ck_assert_uint_eq(o.n_checks, 2);
        /* The checks are made in the order given. */
        ck_assert_ptr_eq(o.checks[0].kind, &ready_check_log);
        ck_assert_ptr_eq(o.checks[1].kind, &ready_check_http);
}
END_TEST

int main(void) {
        Suite *s = suite_create("checks");
        TCase *list = tcase_create("list"), *kinds = tcase_create("kinds");

        tcase_add_test(list, test_all_waits_for_both);
        tcase_add_test(list, test_any_takes_either);
        tcase_add_test(list, test_stop_and_free);
        tcase_add_test(list, test_describe_cuts);
        suite_add_tcase(s, list);
        tcase_add_test(kinds, test_options_list);
        tcase_add_test(kinds, test_notify_kind);
        tcase_add_test(kinds, test_log_kind);
        tcase_add_test(kinds, test_exec_kind);
        tcase_add_test(kinds, test_http_kind);
        tcase_add_test(kinds, test_tcp_kind);
        suite_add_tcase(s, kinds);
        return unit_run(s);
}
