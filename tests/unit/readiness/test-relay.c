/* SPDX-License-Identifier: MIT */
/* The --ready-log relay (relay.c): its state machine without pipes, every
 * (state, event) pair against a table written out here, and the
 * invariants any table must keep; then the real relay on real pipes, a
 * loop and the outputs it meets (a pipe, a socket, a file, /dev/null):
 * lines before and after the ready line, EOF on each stream, outputs that
 * fill up or go away, the nap, the drain, and the fallbacks when the loop
 * refuses a watch. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lines.h"
#include "loop.h"
#include "relay.h"
#include "unit.h"

/* ---- the table ------------------------------------------------------------- */

enum {
        UNWATCH_IN = RELAY_ACT_UNWATCH_IN,
        UNWATCH_OUT = RELAY_ACT_UNWATCH_OUT,
        STOP_NAP = RELAY_ACT_STOP_NAP,
        LAST_LINE = RELAY_ACT_LAST_LINE,
        WATCH_IN = RELAY_ACT_WATCH_IN,
        WATCH_OUT = RELAY_ACT_WATCH_OUT,
        NAP = RELAY_ACT_NAP,
        DRAIN = RELAY_ACT_DRAIN,
};

struct expect {
        bool same; /* nothing happens: same state, no action */
        enum relay_state state;
        unsigned actions;
};
#define X_SAME                                                                                                        \
        { true, 0, 0 }
#define X_TO(s, a)                                                                                                    \
        { false, (s), (a) }

/* Rows: states; columns: events, in the order of enum relay_event. */
static const struct expect table[_RELAY_STATE_MAX][_RELAY_EVENT_MAX] = {
        [RELAY_CLOSED] = {
                [RELAY_ATTACH] = X_SAME,
                [RELAY_DETACH] = X_SAME,
                [RELAY_PASSED] = X_SAME,
                [RELAY_TRICKLED] = X_SAME,
                [RELAY_HELD] = X_SAME,
                [RELAY_EOF] = X_SAME,
                [RELAY_NAP_OVER] = X_SAME,
                [RELAY_WATCH_FAILED] = X_SAME,
        },
        [RELAY_IDLE] = {
                [RELAY_ATTACH] = X_TO(RELAY_READING, WATCH_IN),
                [RELAY_DETACH] = X_SAME,
                [RELAY_PASSED] = X_SAME,
                [RELAY_TRICKLED] = X_SAME,
                [RELAY_HELD] = X_SAME,
                [RELAY_EOF] = X_SAME,
                [RELAY_NAP_OVER] = X_SAME,
                /* relay_attach() returns the loop's error. */
                [RELAY_WATCH_FAILED] = X_SAME,
        },
        [RELAY_READING] = {
                [RELAY_ATTACH] = X_SAME,
                [RELAY_DETACH] = X_TO(RELAY_IDLE, UNWATCH_IN),
                [RELAY_PASSED] = X_SAME,
                [RELAY_TRICKLED] = X_TO(RELAY_NAPPING, UNWATCH_IN | NAP),
                [RELAY_HELD] = X_TO(RELAY_WAITING_OUT, UNWATCH_IN | WATCH_OUT),
                [RELAY_EOF] = X_TO(RELAY_ENDED, UNWATCH_IN | LAST_LINE),
                [RELAY_NAP_OVER] = X_SAME,
                [RELAY_WATCH_FAILED] = X_TO(RELAY_IDLE, DRAIN),
        },
        [RELAY_WAITING_OUT] = {
                [RELAY_ATTACH] = X_SAME,
                [RELAY_DETACH] = X_TO(RELAY_IDLE, UNWATCH_OUT),
                [RELAY_PASSED] = X_TO(RELAY_READING, UNWATCH_OUT | WATCH_IN),
                [RELAY_TRICKLED] = X_SAME,
                [RELAY_HELD] = X_SAME,
                [RELAY_EOF] = X_SAME,
                [RELAY_NAP_OVER] = X_SAME,
                [RELAY_WATCH_FAILED] = X_TO(RELAY_IDLE, DRAIN),
        },
        [RELAY_NAPPING] = {
                [RELAY_ATTACH] = X_SAME,
                [RELAY_DETACH] = X_TO(RELAY_IDLE, STOP_NAP),
                [RELAY_PASSED] = X_SAME,
                [RELAY_TRICKLED] = X_SAME,
                [RELAY_HELD] = X_SAME,
                [RELAY_EOF] = X_SAME,
                [RELAY_NAP_OVER] = X_TO(RELAY_READING, STOP_NAP | WATCH_IN),
                [RELAY_WATCH_FAILED] = X_TO(RELAY_IDLE, DRAIN),
        },
        [RELAY_ENDED] = {
                [RELAY_ATTACH] = X_SAME,
                [RELAY_DETACH] = X_SAME,
                [RELAY_PASSED] = X_SAME,
                [RELAY_TRICKLED] = X_SAME,
                [RELAY_HELD] = X_SAME,
                [RELAY_EOF] = X_SAME,
                [RELAY_NAP_OVER] = X_SAME,
                [RELAY_WATCH_FAILED] = X_SAME,
        },
};

START_TEST(test_every_pair_matches_the_table) {
        unsigned checked = 0;

        for (int s = 0; s < _RELAY_STATE_MAX; s++)
                for (int e = 0; e < _RELAY_EVENT_MAX; e++) {
                        const struct expect *x = &table[s][e];
                        struct relay_transition got = relay_next(s, e);
                        enum relay_state want_state = x->same ? (enum relay_state) s : x->state;
                        unsigned want_actions = x->same ? 0 : x->actions;

                        ck_assert_msg(got.state == want_state && got.actions == want_actions,
                                      "%s + %s: got %s/%#x, want %s/%#x", relay_state_name(s), relay_event_name(e),
                                      relay_state_name(got.state), got.actions, relay_state_name(want_state),
                                      want_actions);
                        checked++;
                }
        ck_assert_uint_eq(checked, (unsigned) _RELAY_STATE_MAX * _RELAY_EVENT_MAX);
}
END_TEST

/* What each state keeps on the loop. */
enum { ON_IN = 1, ON_OUT = 2, ON_NAP = 4 };

static unsigned watched_in(enum relay_state s) {
        return s == RELAY_READING ? ON_IN : s == RELAY_WAITING_OUT ? ON_OUT : s == RELAY_NAPPING ? ON_NAP : 0;
}

/* Does a failure event come in state s: after a transition from s that
 * watches (what the failed watch was to replace is off the loop). */
static bool comes_after_a_failure(enum relay_state s, enum relay_event e) {
        unsigned bits = e == RELAY_WATCH_FAILED ? WATCH_IN | WATCH_OUT : 0;

        for (int o = 0; bits && o < _RELAY_EVENT_MAX; o++)
                if (relay_next(s, o).actions & bits)
                        return true;
        return false;
}

/* The loop sources a transition leaves are those of its new state: it
 * removes only what is there and adds only what is not (the loop refuses
 * a second source on one fd). After a failed watch nothing is watched. */
START_TEST(test_transitions_keep_the_loop_in_step) {
        for (int s = 0; s < _RELAY_STATE_MAX; s++)
                for (int e = 0; e < _RELAY_EVENT_MAX; e++) {
                        struct relay_transition t = relay_next(s, e);
                        unsigned before = comes_after_a_failure(s, e) ? 0 : watched_in(s), after = before;
                        unsigned removed = (t.actions & UNWATCH_IN ? ON_IN : 0) |
                                           (t.actions & UNWATCH_OUT ? ON_OUT : 0) |
                                           (t.actions & STOP_NAP ? ON_NAP : 0);
                        unsigned added = (t.actions & WATCH_IN ? ON_IN : 0) | (t.actions & WATCH_OUT ? ON_OUT : 0) |
                                         (t.actions & NAP ? ON_NAP : 0);

                        ck_assert_msg((removed & ~before) == 0, "%s + %s removes what is not watched",
                                      relay_state_name(s), relay_event_name(e));
                        after &= ~removed;
                        ck_assert_msg((added & after) == 0, "%s + %s watches twice", relay_state_name(s),
                                      relay_event_name(e));
                        after |= added;
                        ck_assert_msg(after == watched_in(t.state), "%s + %s: watched %#x in %s", relay_state_name(s),
                                      relay_event_name(e), after, relay_state_name(t.state));
                        /* At most one source at a time, and one is added at a time. */
                        ck_assert(after == 0 || after == ON_IN || after == ON_OUT || after == ON_NAP);
                }
}
END_TEST

START_TEST(test_closed_and_ended_are_absorbing) {
        for (int e = 0; e < _RELAY_EVENT_MAX; e++) {
                struct relay_transition c = relay_next(RELAY_CLOSED, e), d = relay_next(RELAY_ENDED, e);

                ck_assert(c.state == RELAY_CLOSED && c.actions == 0);
                ck_assert(d.state == RELAY_ENDED && d.actions == 0);
        }
        /* Nothing leads into closed (relay_close() does). */
        for (int s = 0; s < _RELAY_STATE_MAX; s++)
                for (int e = 0; e < _RELAY_EVENT_MAX; e++)
                        ck_assert(s == RELAY_CLOSED || relay_next(s, e).state != RELAY_CLOSED);
}
END_TEST

START_TEST(test_action_targets) {
        for (int s = 0; s < _RELAY_STATE_MAX; s++)
                for (int e = 0; e < _RELAY_EVENT_MAX; e++) {
                        struct relay_transition t = relay_next(s, e);

                        /* The stream's end, and only that, ends the last line. */
                        ck_assert_msg(!(t.actions & LAST_LINE) == !(t.state == RELAY_ENDED && s != RELAY_ENDED),
                                      "%s + %s", relay_state_name(s), relay_event_name(e));
                        if (t.state == RELAY_ENDED && s != RELAY_ENDED)
                                ck_assert(e == RELAY_EOF);
                        /* The drain is the answer to a refused watch, outside attach. */
                        if (t.actions & DRAIN)
                                ck_assert(e == RELAY_WATCH_FAILED && t.state == RELAY_IDLE && s != RELAY_IDLE);
                        if (e == RELAY_WATCH_FAILED && watched_in(s))
                                ck_assert(t.actions & DRAIN);
                        /* Detaching always ends with nothing watched. */
                        if (e == RELAY_DETACH)
                                ck_assert(watched_in(t.state) == 0);
                        /* Idle leaves only by attach (or, drained, by a new attach). */
                        if (s == RELAY_IDLE && t.state != RELAY_IDLE)
                                ck_assert(e == RELAY_ATTACH);
                        /* An event that means nothing changes nothing. */
                        if ((int) t.state == s)
                                ck_assert(t.actions == 0);
                }
}
END_TEST

START_TEST(test_unknown_event_changes_nothing) {
        for (int s = 0; s < _RELAY_STATE_MAX; s++) {
                struct relay_transition t = relay_next(s, _RELAY_EVENT_MAX);

                ck_assert((int) t.state == s && t.actions == 0);
        }
}
END_TEST

/* Every combination: the end wins, then a full output, and only a small
 * wake-up of splices naps. */
START_TEST(test_splice_event) {
        static const uint64_t moved[] = { 0, 1, RELAY_BATCH - 1, RELAY_BATCH, RELAY_WAKE_MAX };

        for (unsigned b = 0; b < 4; b++)
                for (size_t m = 0; m < ARRAY_SIZE(moved); m++)
                        for (int splicing = 0; splicing < 2; splicing++) {
                                bool eof = b & 1, full = b & 2;
                                enum relay_event e = relay_splice_event(eof, full, moved[m], splicing);
                                enum relay_event want = eof    ? RELAY_EOF
                                                        : full ? RELAY_HELD
                                                        : moved[m] > 0 && moved[m] < RELAY_BATCH && splicing
                                                                ? RELAY_TRICKLED
                                                                : RELAY_PASSED;

                                ck_assert_msg(e == want, "eof %d full %d moved %llu splicing %d: %s", eof, full,
                                              (unsigned long long) moved[m], splicing, relay_event_name(e));
                        }
}
END_TEST

START_TEST(test_names) {
        for (int s = 0; s < _RELAY_STATE_MAX; s++) {
                ck_assert_str_ne(relay_state_name(s), "?");
                for (int o = 0; o < s; o++)
                        ck_assert_str_ne(relay_state_name(s), relay_state_name(o));
        }
        for (int e = 0; e < _RELAY_EVENT_MAX; e++) {
                ck_assert_str_ne(relay_event_name(e), "?");
                for (int o = 0; o < e; o++)
                        ck_assert_str_ne(relay_event_name(e), relay_event_name(o));
        }
        ck_assert_str_eq(relay_state_name(RELAY_WAITING_OUT), "waiting-out");
        ck_assert_str_eq(relay_event_name(RELAY_NAP_OVER), "nap-over");
        ck_assert_str_eq(relay_state_name(_RELAY_STATE_MAX), "?");
        ck_assert_str_eq(relay_state_name((enum relay_state) - 1), "?");
        ck_assert_str_eq(relay_event_name(_RELAY_EVENT_MAX), "?");
        ck_assert_str_eq(relay_event_name((enum relay_event) - 1), "?");
}
END_TEST

/* ---- the real relay --------------------------------------------------------- */

/* One relay on a loop, writing to out[1] (read back from out[0]) or to
 * another target, with a matcher when a pattern is given. */
struct rig {
        struct loop *loop;
        int out[2];
        int target;
        struct line_regex *re;
        struct line_tail tail;
        struct line_matcher lines;
        struct relay r;
        unsigned fed; /* on_lines calls */
        char got[4 * 1024 * 1024];
        size_t n_got;
};

static struct rig *rig;

static void on_lines(void *userdata) {
        ((struct rig *) userdata)->fed++;
}

static void rig_setup(void) {
        rig = calloc(1, sizeof *rig);
        ck_assert_ptr_nonnull(rig);
        rig->out[0] = rig->out[1] = rig->target = -1;
        rig->r = (struct relay) RELAY_UNOPENED;
        ck_assert_int_eq(loop_new(&rig->loop), 0);
        /* A write to a pipe nobody reads is EPIPE here, as in prebind. */
        signal(SIGPIPE, SIG_IGN);
        unit_dir_make();
}

static void rig_teardown(void) {
        relay_close(&rig->r);
        if (rig->lines.line)
                line_matcher_done(&rig->lines);
        line_regex_free(rig->re);
        for (int i = 0; i < 2; i++)
                if (rig->out[i] >= 0)
                        close(rig->out[i]);
        if (rig->target >= 0 && rig->target != rig->out[1])
                close(rig->target);
        loop_free(rig->loop);
        free(rig);
        rig = NULL;
        signal(SIGPIPE, SIG_DFL);
        unit_dir_remove();
}

/* The relay to target (-1: a pipe of out_size bytes, read back at out[0]),
 * attached; with pattern, lines are wanted. */
static void rig_open(int target, const char *pattern, int out_size) {
        char error[256];

        if (target < 0) {
                ck_assert_int_eq(pipe2(rig->out, O_CLOEXEC), 0);
                ck_assert_int_eq(fcntl(rig->out[0], F_SETFL, O_NONBLOCK), 0);
                ck_assert_int_ge(fcntl(rig->out[1], F_SETPIPE_SZ, out_size), out_size);
                target = rig->out[1];
        }
        rig->target = target;
        if (pattern) {
                ck_assert_int_eq(line_regex_compile(pattern, &rig->re, error, sizeof error), 0);
                ck_assert_int_eq(line_matcher_init(&rig->lines, rig->re, &rig->tail), 0);
        }
        ck_assert_int_eq(relay_open(&rig->r, target, pattern ? &rig->lines : NULL), 0);
        ck_assert_int_eq(rig->r.state, RELAY_IDLE);
        relay_want_lines(&rig->r, pattern != NULL);
        ck_assert_int_eq(relay_attach(&rig->r, rig->loop, on_lines, rig), 0);
        ck_assert_int_eq(rig->r.state, RELAY_READING);
}

/* COMMAND writes. */
static void put(const void *data, size_t len) {
        const char *p = data;

        while (len > 0) {
                ssize_t k = write(rig->r.child_fd, p, len);

                ck_assert_int_gt(k, 0);
                p += k;
                len -= (size_t) k;
        }
}

static void puts_(const char *s) {
        put(s, strlen(s));
}

/* COMMAND exits: its end of the pipe closes. */
static void command_exits(struct relay *r) {
        close(r->child_fd);
        r->child_fd = -1;
}

/* The reader of prebind's output reads what is there. */
static void take(void) {
        ssize_t k;

        while ((k = read(rig->out[0], rig->got + rig->n_got, sizeof rig->got - rig->n_got)) > 0)
                rig->n_got += (size_t) k;
}

static void dispatch(int timeout_ms) {
        ck_assert_int_ge(loop_dispatch_once(rig->loop, timeout_ms), 0);
}

/* Dispatch until the loop is quiet for 20 ms (naps included), reading the
 * output as it comes. */
static void settle(void) {
        for (int i = 0; i < 2000; i++) {
                int n = loop_dispatch_once(rig->loop, 20);

                ck_assert_int_ge(n, 0);
                if (rig->out[0] >= 0)
                        take();
                if (n == 0)
                        return;
        }
        ck_abort_msg("the relay never settled");
}

static void assert_got(const char *want) {
        ck_assert_uint_eq(rig->n_got, strlen(want));
        ck_assert(memcmp(rig->got, want, rig->n_got) == 0);
}

/* The reader reads on until all n bytes came, and they are data's. Returns
 * whether the relay waited for the output meanwhile. */
static bool all_arrive(const char *data, size_t n) {
        bool waited = false;

        for (int i = 0; i < 5000 && rig->n_got < n; i++) {
                waited |= rig->r.state == RELAY_WAITING_OUT;
                take();
                dispatch(10);
        }
        settle();
        ck_assert_uint_eq(rig->n_got, n);
        ck_assert(memcmp(rig->got, data, n) == 0);
        return waited;
}

/* The output a socket (out[1]; read back at out[0]) with a small send
 * buffer, that fills soon. */
static void rig_open_socket(void) {
        int small = 4096;

        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, rig->out), 0);
        ck_assert_int_eq(fcntl(rig->out[0], F_SETFL, O_NONBLOCK), 0);
        ck_assert_int_eq(setsockopt(rig->out[1], SOL_SOCKET, SO_SNDBUF, &small, sizeof small), 0);
        rig_open(rig->out[1], NULL, 0);
}

/* n bytes that show their order: lines of a counter. */
static char *pattern_bytes(size_t n) {
        char *p = malloc(n);

        ck_assert_ptr_nonnull(p);
        for (size_t i = 0; i < n; i++)
                p[i] = i % 64 == 63 ? '\n' : (char) ('a' + (i / 64 + i) % 26);
        return p;
}

static int pipe_size(int fd) {
        return fcntl(fd, F_GETPIPE_SZ);
}

static int dummy_handler(struct loop *l, int fd, uint32_t revents, void *userdata) {
        (void) l, (void) fd, (void) revents, (void) userdata;
        return 0;
}

START_TEST(test_lines_before_and_after_the_ready_line) {
        rig_open(-1, "^ready$", 65536);
        /* While matching, the pipe holds what the matcher takes at a time. */
        ck_assert_int_le(pipe_size(rig->r.in_fd), 65536);

        puts_("one\ntwo\n");
        dispatch(1000);
        take();
        assert_got("one\ntwo\n");
        ck_assert_uint_eq(rig->fed, 1);
        ck_assert(!rig->lines.matched);
        ck_assert_uint_eq(rig->tail.count, 2);

        puts_("ready\nthree\n");
        dispatch(1000);
        take();
        assert_got("one\ntwo\nready\nthree\n");
        ck_assert(rig->lines.matched);
        ck_assert_str_eq(rig->lines.matched_line, "ready");
        ck_assert_uint_eq(rig->tail.count, 4);
        ck_assert_int_eq(rig->r.state, RELAY_READING);

        /* Ready: no line is wanted, the bytes are spliced, in a big pipe. */
        relay_want_lines(&rig->r, false);
        ck_assert_int_eq(pipe_size(rig->r.in_fd), 1024 * 1024);
        puts_("after\n");
        dispatch(1000);
        take();
        assert_got("one\ntwo\nready\nthree\nafter\n");
        ck_assert_uint_eq(rig->tail.count, 4);
        ck_assert_uint_eq(rig->fed, 2);
        /* A little moved: the pipe rests. */
        ck_assert_int_eq(rig->r.state, RELAY_NAPPING);
        ck_assert(rig->r.nap.armed);
        settle();
        ck_assert_int_eq(rig->r.state, RELAY_READING);
        ck_assert(!rig->r.nap.armed);
        ck_assert_uint_eq(rig->r.relayed, rig->n_got);
        ck_assert_uint_eq(rig->r.dropped, 0);
}
END_TEST

START_TEST(test_the_nap_gathers_small_writes) {
        rig_open(-1, NULL, 65536);
        ck_assert_int_eq(rig->r.output, RELAY_OUT_SPLICE);
        puts_("a");
        dispatch(1000);
        ck_assert_int_eq(rig->r.state, RELAY_NAPPING);
        ck_assert_uint_eq(rig->r.relayed, 1);
        /* Written during the nap: the nap's end reads what gathered, in
         * one wake-up, and naps again. */
        puts_("b");
        puts_("c");
        while (rig->r.relayed < 3)
                dispatch(1000);
        ck_assert_int_eq(rig->r.state, RELAY_NAPPING);
        /* A nap with nothing after it: reading again. */
        settle();
        ck_assert_int_eq(rig->r.state, RELAY_READING);
        assert_got("abc");
}
END_TEST

START_TEST(test_a_big_wakeup_does_not_nap) {
        size_t n = 2 * RELAY_BATCH;
        char *data = pattern_bytes(n);

        rig_open(-1, NULL, 1024 * 1024);
        put(data, n);
        dispatch(1000);
        ck_assert_uint_eq(rig->r.relayed, n);
        ck_assert_int_eq(rig->r.state, RELAY_READING);
        take();
        ck_assert_uint_eq(rig->n_got, n);
        ck_assert(memcmp(rig->got, data, n) == 0);
        free(data);
}
END_TEST

/* A full output: the relay waits for it (the pipe is not read meanwhile,
 * COMMAND waits as on a full fd of its own), then goes on; all bytes
 * arrive, in order. */
static void full_output(const char *pattern, size_t n) {
        char *data = pattern_bytes(n);

        rig_open(-1, pattern, 4096);
        put(data, n);
        dispatch(1000);
        ck_assert_int_eq(rig->r.state, RELAY_WAITING_OUT);
        ck_assert(all_arrive(data, n));
        ck_assert_uint_eq(rig->r.relayed, n);
        ck_assert_int_eq(rig->r.state, RELAY_READING);
        free(data);
}

START_TEST(test_full_output_while_splicing) {
        full_output(NULL, 512 * 1024);
}
END_TEST

START_TEST(test_full_output_while_matching) {
        /* (The pipe holds what the matcher takes at a time.) */
        full_output("^never$", 60 * 1024);
        ck_assert(!rig->lines.matched);
        ck_assert_uint_eq(rig->tail.count, LINE_TAIL_LINES);
}
END_TEST

START_TEST(test_socket_output) {
        size_t n = 300 * 1024;
        char *data = pattern_bytes(n);

        rig_open_socket();
        /* A socket is sent to, not reopened. */
        ck_assert_int_eq(rig->r.output, RELAY_OUT_SEND);
        ck_assert_int_eq(rig->r.out_fd, rig->out[1]);
        put(data, n);
        dispatch(1000);
        ck_assert_int_eq(rig->r.state, RELAY_WAITING_OUT);
        ck_assert(all_arrive(data, n));
        free(data);
}
END_TEST

/* stdout and stderr: one regex and tail, a matcher each; lines do not
 * mix, and each stream ends on its own. */
START_TEST(test_eof_on_each_stream) {
        struct line_matcher err_lines = { 0 };
        struct relay err = RELAY_UNOPENED;
        int err_out[2];
        char buf[64];

        rig_open(-1, "^last words$", 65536);
        ck_assert_int_eq(line_matcher_init(&err_lines, rig->re, &rig->tail), 0);
        ck_assert_int_eq(pipe2(err_out, O_CLOEXEC | O_NONBLOCK), 0);
        ck_assert_int_eq(relay_open(&err, err_out[1], &err_lines), 0);
        relay_want_lines(&err, true);
        ck_assert_int_eq(relay_attach(&err, rig->loop, on_lines, rig), 0);

        /* stdout ends on a line without a newline: it is a line. */
        puts_("x\nlast ");
        ck_assert_int_eq(write(err.child_fd, "words\n", 6), 6);
        command_exits(&rig->r);
        settle();
        ck_assert_int_eq(rig->r.state, RELAY_ENDED);
        ck_assert_int_eq(err.state, RELAY_READING);
        ck_assert(!rig->lines.matched);
        ck_assert(!err_lines.matched);
        assert_got("x\nlast ");
        ck_assert_int_eq(read(err_out[0], buf, sizeof buf), 6);

        ck_assert_int_eq(write(err.child_fd, "last words", 10), 10);
        command_exits(&err);
        settle();
        ck_assert_int_eq(err.state, RELAY_ENDED);
        ck_assert(err_lines.matched);
        ck_assert_str_eq(err_lines.matched_line, "last words");
        ck_assert_int_eq(read(err_out[0], buf, sizeof buf), 10);
        ck_assert_uint_ge(rig->fed, 3);

        /* Ended: nothing to attach, drain or detach. */
        ck_assert_int_eq(relay_attach(&err, rig->loop, on_lines, rig), 0);
        relay_drain(&err);
        relay_detach(&err);
        ck_assert_int_eq(err.state, RELAY_ENDED);
        relay_close(&err);
        ck_assert_int_eq(err.state, RELAY_CLOSED);
        line_matcher_done(&err_lines);
        close(err_out[0]);
        close(err_out[1]);
}
END_TEST

START_TEST(test_eof_while_splicing) {
        rig_open(-1, NULL, 65536);
        puts_("bye");
        command_exits(&rig->r);
        settle();
        ck_assert_int_eq(rig->r.state, RELAY_ENDED);
        assert_got("bye");
}
END_TEST

/* The reader of prebind's output went away: COMMAND goes on, its lines
 * are matched, the bytes dropped and counted. */
START_TEST(test_reader_gone_while_matching) {
        rig_open(-1, "^ready$", 65536);
        close(rig->out[0]);
        rig->out[0] = -1;
        puts_("ready\n");
        settle();
        ck_assert_int_eq(rig->r.output, RELAY_OUT_GONE);
        ck_assert(rig->lines.matched);
        ck_assert_uint_eq(rig->r.relayed, 6);
        puts_("more\n");
        settle();
        ck_assert_uint_eq(rig->r.dropped, 5);
        ck_assert_uint_eq(rig->r.relayed, 11);
        ck_assert_int_eq(rig->r.state, RELAY_READING);
}
END_TEST

START_TEST(test_reader_gone_while_splicing) {
        rig_open(-1, NULL, 65536);
        close(rig->out[0]);
        rig->out[0] = -1;
        puts_("abc");
        settle();
        ck_assert_int_eq(rig->r.output, RELAY_OUT_GONE);
        ck_assert_uint_eq(rig->r.dropped, 3);
        ck_assert_int_eq(rig->r.state, RELAY_READING);
}
END_TEST

/* A file in append mode refuses splice(2): written instead. */
START_TEST(test_append_file_is_written) {
        int fd = open(unit_path("out"), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        char buf[16] = { 0 };

        ck_assert_int_ge(fd, 0);
        rig_open(fd, NULL, 0);
        ck_assert_int_eq(rig->r.output, RELAY_OUT_SPLICE);
        ck_assert_int_eq(rig->r.out_fd, fd);
        puts_("abc");
        settle();
        ck_assert_int_eq(rig->r.output, RELAY_OUT_WRITE);
        puts_("def");
        settle();
        fd = open(unit_path("out"), O_RDONLY | O_CLOEXEC);
        ck_assert_int_eq(read(fd, buf, sizeof buf), 6);
        ck_assert_str_eq(buf, "abcdef");
        close(fd);
}
END_TEST

START_TEST(test_plain_file_is_spliced) {
        int fd = open(unit_path("out"), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        struct stat st;

        ck_assert_int_ge(fd, 0);
        rig_open(fd, NULL, 0);
        puts_("abc");
        settle();
        ck_assert_int_eq(rig->r.output, RELAY_OUT_SPLICE);
        ck_assert_int_eq(stat(unit_path("out"), &st), 0);
        ck_assert_int_eq(st.st_size, 3);
}
END_TEST

/* A character device (a terminal, /dev/null): reopened for prebind alone,
 * non-blocking, and written. */
START_TEST(test_character_device_is_written) {
        int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);

        ck_assert_int_ge(fd, 0);
        rig_open(fd, NULL, 0);
        ck_assert_int_eq(rig->r.output, RELAY_OUT_WRITE);
        ck_assert_int_ne(rig->r.out_fd, fd);
        ck_assert(fcntl(rig->r.out_fd, F_GETFL) & O_NONBLOCK);
        ck_assert(!(fcntl(fd, F_GETFL) & O_NONBLOCK));
        puts_("into the void\n");
        settle();
        ck_assert_uint_eq(rig->r.relayed, 14);
        ck_assert_int_eq(rig->r.state, RELAY_READING);
}
END_TEST

/* COMMAND exited: what it wrote is passed on at once, a last line without
 * a newline counts, and the relay watches the pipe again (a child left
 * behind may write on). */
START_TEST(test_drain_passes_on_everything) {
        rig_open(-1, "^ready$", 65536);
        puts_("a\nready");
        relay_drain(&rig->r);
        take();
        assert_got("a\nready");
        ck_assert(rig->lines.matched);
        ck_assert_uint_eq(rig->fed, 1);
        ck_assert_int_eq(rig->r.state, RELAY_READING);
        puts_("b\n");
        settle();
        assert_got("a\nreadyb\n");
}
END_TEST

START_TEST(test_drain_unattached_and_unopened) {
        struct relay r = RELAY_UNOPENED;
        int out[2];
        char buf[8];

        /* Never opened: every call is harmless. */
        relay_drain(&r);
        relay_detach(&r);
        relay_want_lines(&r, true);
        ck_assert_int_eq(relay_attach(&r, rig->loop, NULL, NULL), -EBADF);
        relay_close(&r);
        ck_assert_int_eq(r.state, RELAY_CLOSED);

        /* Opened, never attached: the drain leaves it so. */
        ck_assert_int_eq(pipe2(out, O_CLOEXEC | O_NONBLOCK), 0);
        ck_assert_int_eq(relay_open(&r, out[1], NULL), 0);
        ck_assert_int_eq(write(r.child_fd, "xyz", 3), 3);
        relay_drain(&r);
        ck_assert_int_eq(r.state, RELAY_IDLE);
        ck_assert_ptr_null(r.loop);
        ck_assert_int_eq(read(out[0], buf, sizeof buf), 3);
        relay_close(&r);
        close(out[0]);
        close(out[1]);
}
END_TEST

/* A reader that comes after delay_ms and reads until EOF (the relay's
 * output closes), in a child: the parent's drain waits for it. */
static pid_t slow_reader(int delay_ms) {
        pid_t pid = unit_fork();

        if (pid == 0) {
                char buf[65536];
                ssize_t k;

                close(rig->r.out_fd);
                close(rig->out[1]);
                close(rig->r.child_fd);
                fcntl(rig->out[0], F_SETFL, 0);
                usleep((useconds_t) delay_ms * 1000);
                while ((k = read(rig->out[0], buf, sizeof buf)) > 0)
                        ;
                _exit(k == 0 ? 0 : 1);
        }
        return pid;
}

static void reader_done(pid_t pid) {
        int status;

        relay_close(&rig->r);
        close(rig->out[1]);
        rig->out[1] = -1;
        status = unit_wait_bounded(pid);
        ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

START_TEST(test_drain_waits_for_a_slow_reader) {
        size_t n = 200 * 1024;
        char *data = pattern_bytes(n);
        pid_t pid;

        rig_open(-1, NULL, 4096);
        put(data, n);
        dispatch(1000);
        ck_assert_int_eq(rig->r.state, RELAY_WAITING_OUT);
        pid = slow_reader(100);
        relay_drain(&rig->r);
        ck_assert_uint_eq(rig->r.relayed, n);
        ck_assert_uint_eq(rig->r.dropped, 0);
        ck_assert_int_eq(rig->r.state, RELAY_READING);
        reader_done(pid);
        free(data);
}
END_TEST

/* Nobody reads prebind's output: the drain gives up after RELAY_STALL_MS
 * and drops the rest, counted. */
START_TEST(test_drain_gives_up_on_a_stalled_reader) {
        size_t n = 60 * 1024;
        char *data = pattern_bytes(n);
        struct timespec t0, t1;

        rig_open(-1, "^never$", 4096);
        put(data, n);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        relay_drain(&rig->r);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        ck_assert_int_eq(rig->r.output, RELAY_OUT_GONE);
        ck_assert_uint_eq(rig->r.relayed, n);
        ck_assert_uint_gt(rig->r.dropped, 0);
        ck_assert_uint_lt(rig->r.dropped, n);
        ck_assert_int_ge((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000, RELAY_STALL_MS - 10);
        free(data);
}
END_TEST

START_TEST(test_detach_while_reading_and_napping) {
        /* Reading: detached, the pipe is not heard. */
        rig_open(-1, NULL, 65536);
        relay_detach(&rig->r);
        ck_assert_int_eq(rig->r.state, RELAY_IDLE);
        ck_assert_ptr_null(rig->r.loop);
        puts_("a");
        ck_assert_int_eq(loop_dispatch_once(rig->loop, 0), 0);
        ck_assert_int_eq(relay_attach(&rig->r, rig->loop, on_lines, rig), 0);
        /* Attached twice: once. */
        ck_assert_int_eq(relay_attach(&rig->r, rig->loop, on_lines, rig), 0);
        dispatch(1000);

        /* Napping: the timer goes with it. */
        ck_assert_int_eq(rig->r.state, RELAY_NAPPING);
        relay_detach(&rig->r);
        ck_assert_int_eq(rig->r.state, RELAY_IDLE);
        ck_assert(!rig->r.nap.armed);
        ck_assert_int_eq(relay_attach(&rig->r, rig->loop, on_lines, rig), 0);
        puts_("b");
        settle();
        assert_got("ab");
        ck_assert_int_eq(rig->r.state, RELAY_READING);
}
END_TEST

/* Detached while bytes wait for the output: they are kept, and go first
 * once attached again (before anything read after them). */
START_TEST(test_detach_keeps_what_is_held) {
        size_t n = 64 * 1024;
        char *data = pattern_bytes(n + 4);

        rig_open_socket();
        put(data, n);
        dispatch(1000);
        ck_assert_int_eq(rig->r.state, RELAY_WAITING_OUT);
        ck_assert_uint_lt(rig->r.start, rig->r.end);
        relay_detach(&rig->r);
        ck_assert_int_eq(rig->r.state, RELAY_IDLE);
        ck_assert_uint_lt(rig->r.start, rig->r.end);
        take();
        ck_assert_int_eq(relay_attach(&rig->r, rig->loop, on_lines, rig), 0);
        put(data + n, 4);
        (void) all_arrive(data, n + 4);
        free(data);
}
END_TEST

/* The loop refuses the pipe (its fd is watched already): relay_attach()
 * says so and the relay stays idle. */
START_TEST(test_attach_refused) {
        rig_open(-1, NULL, 65536);
        relay_detach(&rig->r);
        ck_assert_int_eq(loop_add(rig->loop, rig->r.in_fd, LOOP_IN, dummy_handler, NULL), 0);
        ck_assert_int_eq(relay_attach(&rig->r, rig->loop, on_lines, rig), -EEXIST);
        ck_assert_int_eq(rig->r.state, RELAY_IDLE);
        ck_assert_ptr_null(rig->r.loop);
        loop_remove(rig->loop, rig->r.in_fd);
        ck_assert_int_eq(relay_attach(&rig->r, rig->loop, on_lines, rig), 0);
        ck_assert_int_eq(rig->r.state, RELAY_READING);
}
END_TEST

/* After a nap the pipe cannot be watched again: the drain passes on what
 * gathered, and the relay is left idle. */
START_TEST(test_pipe_refused_after_the_nap) {
        rig_open(-1, NULL, 65536);
        puts_("a");
        dispatch(1000);
        ck_assert_int_eq(rig->r.state, RELAY_NAPPING);
        ck_assert_int_eq(loop_add(rig->loop, rig->r.in_fd, LOOP_IN, dummy_handler, NULL), 0);
        puts_("bc");
        while (rig->r.state == RELAY_NAPPING)
                dispatch(1000);
        ck_assert_int_eq(rig->r.state, RELAY_IDLE);
        ck_assert_ptr_null(rig->r.loop);
        ck_assert(!rig->r.nap.armed);
        take();
        assert_got("abc");
        loop_remove(rig->loop, rig->r.in_fd);
        ck_assert_int_eq(relay_attach(&rig->r, rig->loop, on_lines, rig), 0);
        ck_assert_int_eq(rig->r.state, RELAY_READING);
}
END_TEST

/* The output took the rest, but the pipe cannot be watched again. */
START_TEST(test_pipe_refused_after_waiting_out) {
        size_t n = 4096 + 100;
        char *data = pattern_bytes(n);

        rig_open(-1, "^never$", 4096);
        put(data, n);
        dispatch(1000);
        ck_assert_int_eq(rig->r.state, RELAY_WAITING_OUT);
        ck_assert_int_eq(loop_add(rig->loop, rig->r.in_fd, LOOP_IN, dummy_handler, NULL), 0);
        take();
        dispatch(1000);
        ck_assert_int_eq(rig->r.state, RELAY_IDLE);
        take();
        ck_assert_uint_eq(rig->n_got, n);
        ck_assert(memcmp(rig->got, data, n) == 0);
        loop_remove(rig->loop, rig->r.in_fd);
        free(data);
}
END_TEST

/* The output is full and cannot be watched: the drain waits inside write
 * instead, then the relay reads on. */
START_TEST(test_output_refused) {
        size_t n = 60 * 1024;
        char *data = pattern_bytes(n);
        pid_t pid;

        rig_open(-1, "^never$", 4096);
        ck_assert_int_eq(loop_add(rig->loop, rig->r.out_fd, LOOP_OUT, dummy_handler, NULL), 0);
        put(data, n);
        pid = slow_reader(50);
        dispatch(1000);
        ck_assert_int_eq(rig->r.state, RELAY_READING);
        ck_assert_uint_eq(rig->r.relayed, n);
        ck_assert_uint_eq(rig->r.dropped, 0);
        loop_remove(rig->loop, rig->r.out_fd);
        reader_done(pid);
        free(data);
}
END_TEST

/* The nap needs no fd (the loop keeps its deadline): with no fd left, the
 * relay naps and reads on. In a child, whose fd limit is lowered. */
static int without_fds(void) {
        puts_("a");
        dispatch(1000);
        /* A little moved: a nap, though no fd is left. */
        if (rig->r.state != RELAY_NAPPING || !rig->r.nap.armed || rig->r.relayed != 1)
                return 4;
        settle();
        if (rig->r.state != RELAY_READING || rig->r.nap.armed)
                return 5;
        puts_("b");
        settle();
        return rig->r.relayed == 2 ? 0 : 6;
}

static void child_without_fds(void) {
        struct rlimit lim, saved;
        int fd = open("/dev/null", O_RDONLY | O_CLOEXEC), t, status;

        /* The lowest free fd: no fd can be made below the limit. */
        close(fd);
        if (getrlimit(RLIMIT_NOFILE, &saved) < 0)
                exit(2);
        lim = saved;
        lim.rlim_cur = (rlim_t) fd;
        if (setrlimit(RLIMIT_NOFILE, &lim) < 0)
                exit(3);
        t = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (t >= 0) {
                /* (valgrind keeps fds of its own: nothing to test.) */
                close(t);
                exit(0);
        }
        status = without_fds();
        /* (A coverage build writes its counts at exit.) */
        (void) setrlimit(RLIMIT_NOFILE, &saved);
        exit(status);
}

START_TEST(test_the_nap_needs_no_fd) {
        static void (*const children[])(void) = { child_without_fds };

        rig_open(-1, NULL, 65536);
        unit_child_passes(children, 0);
}
END_TEST

int main(void) {
        Suite *s = suite_create("relay");
        TCase *table_tc = tcase_create("table"), *pipes = tcase_create("pipes"),
              *fallbacks = tcase_create("fallbacks");

        tcase_add_test(table_tc, test_every_pair_matches_the_table);
        tcase_add_test(table_tc, test_transitions_keep_the_loop_in_step);
        tcase_add_test(table_tc, test_closed_and_ended_are_absorbing);
        tcase_add_test(table_tc, test_action_targets);
        tcase_add_test(table_tc, test_unknown_event_changes_nothing);
        tcase_add_test(table_tc, test_splice_event);
        tcase_add_test(table_tc, test_names);
        suite_add_tcase(s, table_tc);

        tcase_add_checked_fixture(pipes, rig_setup, rig_teardown);
        tcase_set_timeout(pipes, 30);
        tcase_add_test(pipes, test_lines_before_and_after_the_ready_line);
        tcase_add_test(pipes, test_the_nap_gathers_small_writes);
        tcase_add_test(pipes, test_a_big_wakeup_does_not_nap);
        tcase_add_test(pipes, test_full_output_while_splicing);
        tcase_add_test(pipes, test_full_output_while_matching);
        tcase_add_test(pipes, test_socket_output);
        tcase_add_test(pipes, test_eof_on_each_stream);
        tcase_add_test(pipes, test_eof_while_splicing);
        tcase_add_test(pipes, test_reader_gone_while_matching);
        tcase_add_test(pipes, test_reader_gone_while_splicing);
        tcase_add_test(pipes, test_append_file_is_written);
        tcase_add_test(pipes, test_plain_file_is_spliced);
        tcase_add_test(pipes, test_character_device_is_written);
        tcase_add_test(pipes, test_drain_passes_on_everything);
        tcase_add_test(pipes, test_drain_unattached_and_unopened);
        tcase_add_test(pipes, test_drain_waits_for_a_slow_reader);
        tcase_add_test(pipes, test_drain_gives_up_on_a_stalled_reader);
        tcase_add_test(pipes, test_detach_while_reading_and_napping);
        tcase_add_test(pipes, test_detach_keeps_what_is_held);
        suite_add_tcase(s, pipes);

        tcase_add_checked_fixture(fallbacks, rig_setup, rig_teardown);
        tcase_set_timeout(fallbacks, 30);
        tcase_add_test(fallbacks, test_attach_refused);
        tcase_add_test(fallbacks, test_pipe_refused_after_the_nap);
        tcase_add_test(fallbacks, test_pipe_refused_after_waiting_out);
        tcase_add_test(fallbacks, test_output_refused);
        tcase_add_test(fallbacks, test_the_nap_needs_no_fd);
        suite_add_tcase(s, fallbacks);
        return unit_run(s);
}
