/* SPDX-License-Identifier: MIT */
/* The supervisor's state machine (lifecycle.c), without processes: every
 * (state, event) pair under every combination of facts, against a table
 * written out here independently of lifecycle_next(), so that a change to
 * the machine must change this table too; then the invariants that any
 * table must keep. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "lifecycle.h"
#include "unit.h"

/* How the next state of one pair is found. */
enum expect_kind {
        SAME,        /* nothing happens: same state, no action */
        TO,          /* a fixed state and actions */
        STARTS,      /* a new COMMAND: waiting-ready or running (facts->needs_ready) */
        RESTARTS,    /* the same after an exit: what is left of the old group is told to stop */
        FINISHES,    /* COMMAND exited for good: done, or draining what is left of its group */
        EXIT_POLICY, /* COMMAND exited unasked: --restart, its limit and delay decide */
        RELOADS,     /* a reload request: overlapping (--reload=overlap, a readiness check) or restarting */
        RELOAD_OVER, /* the reload is over: running, or the queued one starts (overlapping) */
        QUEUES,      /* a request during a reload: queued once */
        ALONE,       /* the serving one exited during the reload: the new one waits alone, or restarts */
};

struct expect {
        enum expect_kind kind;
        enum lc_state state;
        unsigned actions;
};

#define X_SAME                                                                                                        \
        { SAME, 0, 0 }
#define X_TO(s, a)                                                                                                    \
        { TO, (s), (a) }
#define X_STARTS(a)                                                                                                   \
        { STARTS, 0, (a) }
#define X_RESTARTS(a)                                                                                                 \
        { RESTARTS, 0, (a) }
#define X_FINISHES(a)                                                                                                 \
        { FINISHES, 0, (a) }
#define X_POLICY                                                                                                      \
        { EXIT_POLICY, 0, 0 }
#define X_RELOADS                                                                                                     \
        { RELOADS, 0, 0 }
#define X_RELOAD_OVER(a)                                                                                              \
        { RELOAD_OVER, 0, (a) }
#define X_QUEUES                                                                                                      \
        { QUEUES, 0, 0 }
#define X_ALONE                                                                                                       \
        { ALONE, 0, 0 }

enum {
        SAY_NOT_READY = LC_ACT_SAY_NOT_READY,
        SAY_EXITED_UNREADY = LC_ACT_SAY_EXITED_UNREADY,
        MARK_NOT_READY = LC_ACT_MARK_NOT_READY,
        STOP_READINESS = LC_ACT_STOP_READINESS,
        COUNT_RESTART = LC_ACT_COUNT_RESTART,
        PUBLISH = LC_ACT_PUBLISH,
        TERM = LC_ACT_TERMINATE,
        KILL = LC_ACT_KILL,
        ARM_KILL = LC_ACT_ARM_KILL,
        ARM_GRACE = LC_ACT_ARM_GRACE,
        TELL_STOPPING = LC_ACT_TELL_STOPPING,
        TELL_RELOADING = LC_ACT_TELL_RELOADING,
        GIVE_UP = LC_ACT_GIVE_UP,
        ARM_RESTART = LC_ACT_ARM_RESTART,
        TERM_GROUP = LC_ACT_TERM_GROUP,
        KILL_GROUP = LC_ACT_KILL_GROUP,
        START = LC_ACT_START,
        RETIRE_PREVIOUS = LC_ACT_RETIRE_PREVIOUS,
        DROP_NEXT = LC_ACT_DROP_NEXT,
        QUEUE_RELOAD = LC_ACT_QUEUE_RELOAD,
        START_NEXT = LC_ACT_START_NEXT,
        OPEN_GATE = LC_ACT_OPEN_GATE,
};

/* Rows: states; columns: events, in the order of enum lc_event. */
static const struct expect table[_LC_STATE_MAX][_LC_EVENT_MAX] = {
        [LC_INIT] = {
                [LC_BEGIN] = X_STARTS(START),
                [LC_SPAWNED] = X_SAME,
                [LC_READY] = X_SAME,
                [LC_READY_TIMEOUT] = X_SAME,
                [LC_SHUTDOWN] = X_SAME,
                [LC_STOP_REQUEST] = X_SAME,
                [LC_RESTART_REQUEST] = X_SAME,
                [LC_KILL_TIMEOUT] = X_SAME,
                [LC_RESTART_DUE] = X_SAME,
                [LC_EXITED] = X_SAME,
                [LC_START_FAILED] = X_TO(LC_DONE, 0),
                [LC_GROUP_GONE] = X_SAME,
                [LC_PREVIOUS_EXITED] = X_SAME,
        },
        [LC_WAITING_READY] = {
                [LC_BEGIN] = X_SAME,
                [LC_SPAWNED] = X_TO(LC_WAITING_READY, OPEN_GATE),
                [LC_READY] = X_TO(LC_RUNNING, STOP_READINESS | PUBLISH),
                [LC_READY_TIMEOUT] = X_TO(LC_NOT_READY,
                                          SAY_NOT_READY | STOP_READINESS | TERM | ARM_GRACE | TELL_STOPPING),
                [LC_SHUTDOWN] = X_TO(LC_STOPPING, STOP_READINESS | TELL_STOPPING | ARM_KILL),
                [LC_STOP_REQUEST] = X_TO(LC_STOPPING, STOP_READINESS | TERM | TELL_STOPPING | ARM_KILL),
                [LC_RESTART_REQUEST] = X_TO(LC_RESTARTING, STOP_READINESS | TERM | ARM_KILL),
                [LC_KILL_TIMEOUT] = X_SAME,
                [LC_RESTART_DUE] = X_SAME,
                [LC_EXITED] = X_POLICY,
                [LC_START_FAILED] = X_TO(LC_DONE, STOP_READINESS),
                [LC_GROUP_GONE] = X_SAME,
                [LC_PREVIOUS_EXITED] = X_SAME,
        },
        [LC_RUNNING] = {
                [LC_BEGIN] = X_SAME,
                [LC_SPAWNED] = X_TO(LC_RUNNING, PUBLISH | OPEN_GATE),
                [LC_READY] = X_SAME,
                [LC_READY_TIMEOUT] = X_SAME,
                [LC_SHUTDOWN] = X_TO(LC_STOPPING, TELL_STOPPING | ARM_KILL),
                [LC_STOP_REQUEST] = X_TO(LC_STOPPING, TERM | TELL_STOPPING | ARM_KILL),
                [LC_RESTART_REQUEST] = X_RELOADS,
                [LC_KILL_TIMEOUT] = X_SAME,
                [LC_RESTART_DUE] = X_SAME,
                [LC_EXITED] = X_POLICY,
                [LC_START_FAILED] = X_TO(LC_DONE, 0),
                [LC_GROUP_GONE] = X_SAME,
                [LC_PREVIOUS_EXITED] = X_SAME,
        },
        [LC_RESTARTING] = {
                [LC_BEGIN] = X_SAME,
                [LC_SPAWNED] = X_SAME,
                [LC_READY] = X_SAME,
                [LC_READY_TIMEOUT] = X_SAME,
                [LC_SHUTDOWN] = X_TO(LC_STOPPING, TELL_STOPPING | ARM_KILL),
                [LC_STOP_REQUEST] = X_TO(LC_STOPPING, TERM | TELL_STOPPING | ARM_KILL),
                [LC_RESTART_REQUEST] = X_SAME,
                [LC_KILL_TIMEOUT] = X_TO(LC_RESTARTING, KILL),
                [LC_RESTART_DUE] = X_SAME,
                [LC_EXITED] = X_RESTARTS(TELL_RELOADING | START),
                [LC_START_FAILED] = X_TO(LC_DONE, 0),
                [LC_GROUP_GONE] = X_SAME,
                [LC_PREVIOUS_EXITED] = X_SAME,
        },
        [LC_OVERLAPPING] = {
                [LC_BEGIN] = X_SAME,
                [LC_SPAWNED] = X_TO(LC_OVERLAPPING, OPEN_GATE),
                [LC_READY] = X_RELOAD_OVER(STOP_READINESS | PUBLISH | RETIRE_PREVIOUS),
                [LC_READY_TIMEOUT] = X_RELOAD_OVER(SAY_NOT_READY | STOP_READINESS | DROP_NEXT),
                [LC_SHUTDOWN] = X_TO(LC_STOPPING, STOP_READINESS | TELL_STOPPING | ARM_KILL | RETIRE_PREVIOUS),
                [LC_STOP_REQUEST] = X_TO(LC_STOPPING, STOP_READINESS | TERM | TELL_STOPPING | ARM_KILL | RETIRE_PREVIOUS),
                [LC_RESTART_REQUEST] = X_QUEUES,
                [LC_KILL_TIMEOUT] = X_SAME,
                [LC_RESTART_DUE] = X_SAME,
                [LC_EXITED] = X_RELOAD_OVER(SAY_EXITED_UNREADY | STOP_READINESS | DROP_NEXT),
                [LC_START_FAILED] = X_TO(LC_RUNNING, STOP_READINESS | DROP_NEXT),
                [LC_GROUP_GONE] = X_SAME,
                [LC_PREVIOUS_EXITED] = X_ALONE,
        },
        [LC_RESTART_PENDING] = {
                [LC_BEGIN] = X_SAME,
                [LC_SPAWNED] = X_SAME,
                [LC_READY] = X_SAME,
                [LC_READY_TIMEOUT] = X_SAME,
                [LC_SHUTDOWN] = X_TO(LC_DONE, TELL_STOPPING),
                [LC_STOP_REQUEST] = X_TO(LC_DONE, TELL_STOPPING),
                [LC_RESTART_REQUEST] = X_STARTS(COUNT_RESTART | START),
                [LC_KILL_TIMEOUT] = X_SAME,
                [LC_RESTART_DUE] = X_STARTS(COUNT_RESTART | START),
                [LC_EXITED] = X_SAME,
                [LC_START_FAILED] = X_TO(LC_DONE, 0),
                [LC_GROUP_GONE] = X_SAME,
                [LC_PREVIOUS_EXITED] = X_SAME,
        },
        [LC_STOPPING] = {
                [LC_BEGIN] = X_SAME,
                [LC_SPAWNED] = X_SAME,
                [LC_READY] = X_SAME,
                [LC_READY_TIMEOUT] = X_SAME,
                [LC_SHUTDOWN] = X_SAME,
                [LC_STOP_REQUEST] = X_TO(LC_STOPPING, TERM),
                [LC_RESTART_REQUEST] = X_SAME,
                [LC_KILL_TIMEOUT] = X_TO(LC_STOPPING, KILL),
                [LC_RESTART_DUE] = X_SAME,
                [LC_EXITED] = X_FINISHES(0),
                [LC_START_FAILED] = X_TO(LC_DONE, 0),
                [LC_GROUP_GONE] = X_SAME,
                [LC_PREVIOUS_EXITED] = X_SAME,
        },
        [LC_NOT_READY] = {
                [LC_BEGIN] = X_SAME,
                [LC_SPAWNED] = X_SAME,
                [LC_READY] = X_SAME,
                [LC_READY_TIMEOUT] = X_SAME,
                [LC_SHUTDOWN] = X_SAME,
                [LC_STOP_REQUEST] = X_TO(LC_NOT_READY, TERM),
                [LC_RESTART_REQUEST] = X_SAME,
                [LC_KILL_TIMEOUT] = X_TO(LC_NOT_READY, KILL),
                [LC_RESTART_DUE] = X_SAME,
                [LC_EXITED] = X_FINISHES(MARK_NOT_READY),
                [LC_START_FAILED] = X_TO(LC_DONE, 0),
                [LC_GROUP_GONE] = X_SAME,
                [LC_PREVIOUS_EXITED] = X_SAME,
        },
        [LC_DRAINING] = {
                [LC_BEGIN] = X_SAME,
                [LC_SPAWNED] = X_SAME,
                [LC_READY] = X_SAME,
                [LC_READY_TIMEOUT] = X_SAME,
                [LC_SHUTDOWN] = X_SAME,
                [LC_STOP_REQUEST] = X_SAME,
                [LC_RESTART_REQUEST] = X_SAME,
                [LC_KILL_TIMEOUT] = X_TO(LC_DONE, KILL_GROUP),
                [LC_RESTART_DUE] = X_SAME,
                [LC_EXITED] = X_SAME,
                [LC_START_FAILED] = X_TO(LC_DONE, 0),
                [LC_GROUP_GONE] = X_TO(LC_DONE, 0),
                [LC_PREVIOUS_EXITED] = X_SAME,
        },
        [LC_DONE] = {
                [LC_BEGIN] = X_SAME,
                [LC_SPAWNED] = X_SAME,
                [LC_READY] = X_SAME,
                [LC_READY_TIMEOUT] = X_SAME,
                [LC_SHUTDOWN] = X_SAME,
                [LC_STOP_REQUEST] = X_SAME,
                [LC_RESTART_REQUEST] = X_SAME,
                [LC_KILL_TIMEOUT] = X_SAME,
                [LC_RESTART_DUE] = X_SAME,
                [LC_EXITED] = X_SAME,
                [LC_START_FAILED] = X_SAME,
                [LC_GROUP_GONE] = X_SAME,
                [LC_PREVIOUS_EXITED] = X_SAME,
        },
};

/* Every combination of the four facts. */
static struct lc_facts facts_of(unsigned bits) {
        return (struct lc_facts) {
                .needs_ready = bits & 1,
                .restart_wanted = bits & 2,
                .restart_limit_hit = bits & 4,
                .restart_delay = bits & 8,
                .group_left = bits & 16,
                .kill_after = bits & 32,
                .overlap = bits & 64,
                .reload_queued = bits & 128,
        };
}
#define N_FACTS 256u

static enum lc_state started_state(const struct lc_facts *f) {
        return f->needs_ready ? LC_WAITING_READY : LC_RUNNING;
}

/* prebind(1), --group: when COMMAND exits, what is left of its group is
 * told to stop; for good, it is waited for (--kill-after, then killed). */
static unsigned term_group(const struct lc_facts *f) {
        return f->group_left ? TERM_GROUP : 0;
}

static struct lc_transition finishes(const struct lc_facts *f, unsigned actions) {
        if (!f->group_left)
                return (struct lc_transition) { LC_DONE, actions };
        if (!f->kill_after)
                return (struct lc_transition) { LC_DONE, actions | TERM_GROUP };
        return (struct lc_transition) { LC_DRAINING, actions | TERM_GROUP | ARM_KILL };
}

/* A state and an event the table answers alone. */
static struct lc_transition expected_from_table(enum lc_state s, const struct expect *x, const struct lc_facts *f) {
        switch (x->kind) {
        case SAME:
                return (struct lc_transition) { s, 0 };
        case TO:
                return (struct lc_transition) { x->state, x->actions };
        case STARTS:
                return (struct lc_transition) { started_state(f), x->actions };
        case RESTARTS:
                return (struct lc_transition) { started_state(f), x->actions | term_group(f) };
        case FINISHES:
                return finishes(f, x->actions);
        case RELOADS:
                /* prebind(1), --reload=overlap: the new one starts beside the
                 * old one, which needs a readiness check to be stopped. */
                if (f->overlap && f->needs_ready)
                        return (struct lc_transition) { LC_OVERLAPPING, START_NEXT };
                return (struct lc_transition) { LC_RESTARTING, TERM | ARM_KILL };
        case RELOAD_OVER:
                /* Requests during a reload: one more after it. */
                if (f->reload_queued)
                        return (struct lc_transition) { LC_OVERLAPPING, x->actions | START_NEXT };
                return (struct lc_transition) { LC_RUNNING, x->actions };
        case QUEUES:
                return f->reload_queued ? (struct lc_transition) { s, 0 } : (struct lc_transition) { s, QUEUE_RELOAD };
        case ALONE:
                /* A queued request, as in waiting-ready: a restart. */
                if (f->reload_queued)
                        return (struct lc_transition) { LC_RESTARTING, STOP_READINESS | TERM | ARM_KILL };
                return (struct lc_transition) { LC_WAITING_READY, 0 };
        case EXIT_POLICY:
                break;
        }
        ck_abort_msg("bad table entry");
        return (struct lc_transition) { 0 };
}

/* prebind(1), --restart: an exit that nobody asked for ends prebind
 * unless the policy wants a restart; the limit gives up; a delay waits.
 * A COMMAND that was waiting for readiness and is not restarted "exited
 * before it was ready"; whatever leaves the wait for readiness stops it. */
static struct lc_transition exit_policy(enum lc_state s, const struct lc_facts *f) {
        unsigned unready = s == LC_WAITING_READY ? SAY_EXITED_UNREADY : 0;

        if (!f->restart_wanted)
                return finishes(f, unready);
        if (f->restart_limit_hit)
                return finishes(f, unready | GIVE_UP);
        if (f->restart_delay)
                return (struct lc_transition) { LC_RESTART_PENDING, term_group(f) | TELL_RELOADING | ARM_RESTART };
        return (struct lc_transition) { started_state(f), term_group(f) | TELL_RELOADING | COUNT_RESTART | START };
}

static struct lc_transition expected(enum lc_state s, enum lc_event e, const struct lc_facts *f) {
        const struct expect *x = &table[s][e];
        struct lc_transition t;

        if (x->kind != EXIT_POLICY)
                return expected_from_table(s, x, f);
        t = exit_policy(s, f);
        if (s == LC_WAITING_READY && t.state != LC_WAITING_READY)
                t.actions |= STOP_READINESS;
        return t;
}

START_TEST(test_every_pair_matches_the_table) {
        unsigned checked = 0;

        for (int s = 0; s < _LC_STATE_MAX; s++)
                for (int e = 0; e < _LC_EVENT_MAX; e++)
                        for (unsigned b = 0; b < N_FACTS; b++) {
                                struct lc_facts f = facts_of(b);
                                struct lc_transition want = expected(s, e, &f), got = lifecycle_next(s, e, &f);

                                ck_assert_msg(got.state == want.state && got.actions == want.actions,
                                              "%s + %s (facts %#x): got %s/%#x, want %s/%#x", lifecycle_state_name(s),
                                              lifecycle_event_name(e), b, lifecycle_state_name(got.state), got.actions,
                                              lifecycle_state_name(want.state), want.actions);
                                checked++;
                        }
        ck_assert_uint_eq(checked, (unsigned) _LC_STATE_MAX * _LC_EVENT_MAX * N_FACTS);
}
END_TEST

/* A few rows spelled out, as a reader checks them against prebind(1). */
START_TEST(test_readable_examples) {
        struct lc_facts always = { .restart_wanted = true },
                        ready_always = { .needs_ready = true, .restart_wanted = true },
                        delayed = { .restart_wanted = true, .restart_delay = true },
                        limited = { .restart_wanted = true, .restart_limit_hit = true }, none = { 0 };
        struct lc_transition t;

        t = lifecycle_next(LC_RUNNING, LC_EXITED, &none);
        ck_assert(t.state == LC_DONE && t.actions == 0);
        t = lifecycle_next(LC_RUNNING, LC_EXITED, &always);
        ck_assert(t.state == LC_RUNNING && t.actions == (LC_ACT_TELL_RELOADING | LC_ACT_COUNT_RESTART | LC_ACT_START));
        t = lifecycle_next(LC_RUNNING, LC_EXITED, &ready_always);
        ck_assert(t.state == LC_WAITING_READY && (t.actions & LC_ACT_START));
        t = lifecycle_next(LC_WAITING_READY, LC_EXITED, &delayed);
        ck_assert(t.state == LC_RESTART_PENDING &&
                  t.actions == (LC_ACT_STOP_READINESS | LC_ACT_TELL_RELOADING | LC_ACT_ARM_RESTART));
        /* The restart after the delay is the one that counts. */
        t = lifecycle_next(LC_RESTART_PENDING, LC_RESTART_DUE, &none);
        ck_assert(t.state == LC_RUNNING && t.actions == (LC_ACT_COUNT_RESTART | LC_ACT_START));
        t = lifecycle_next(LC_RUNNING, LC_EXITED, &limited);
        ck_assert(t.state == LC_DONE && t.actions == LC_ACT_GIVE_UP);
        /* SIGHUP skips the policy, the limit and the delay. */
        t = lifecycle_next(LC_RESTARTING, LC_EXITED, &none);
        ck_assert(t.state == LC_RUNNING && (t.actions & LC_ACT_START));
        t = lifecycle_next(LC_RESTARTING, LC_EXITED, &limited);
        ck_assert(t.state == LC_RUNNING && !(t.actions & (LC_ACT_GIVE_UP | LC_ACT_COUNT_RESTART)));
        /* Not ready in time: said (before the wait is stopped: the
         * message names what was unmet), then COMMAND is stopped, and the
         * job ends "not ready" however COMMAND ends. */
        t = lifecycle_next(LC_WAITING_READY, LC_READY_TIMEOUT, &none);
        ck_assert(t.state == LC_NOT_READY &&
                  (t.actions & (LC_ACT_SAY_NOT_READY | LC_ACT_STOP_READINESS | LC_ACT_TERMINATE)) ==
                          (LC_ACT_SAY_NOT_READY | LC_ACT_STOP_READINESS | LC_ACT_TERMINATE));
        ck_assert(LC_ACT_SAY_NOT_READY < LC_ACT_STOP_READINESS);
        t = lifecycle_next(LC_NOT_READY, LC_EXITED, &always);
        ck_assert(t.state == LC_DONE && t.actions == LC_ACT_MARK_NOT_READY);
        t = lifecycle_next(LC_WAITING_READY, LC_EXITED, &none);
        ck_assert(t.state == LC_DONE && t.actions == (LC_ACT_SAY_EXITED_UNREADY | LC_ACT_STOP_READINESS));
        t = lifecycle_next(LC_RUNNING, LC_EXITED, &none);
        ck_assert(!(t.actions & LC_ACT_SAY_EXITED_UNREADY));
        /* --group: the rest of the group is told to stop, and with
         * --kill-after waited for, then killed. */
        t = lifecycle_next(LC_RUNNING, LC_EXITED, &(struct lc_facts) { .group_left = true });
        ck_assert(t.state == LC_DONE && t.actions == LC_ACT_TERM_GROUP);
        t = lifecycle_next(LC_STOPPING, LC_EXITED, &(struct lc_facts) { .group_left = true, .kill_after = true });
        ck_assert(t.state == LC_DRAINING && t.actions == (LC_ACT_TERM_GROUP | LC_ACT_ARM_KILL));
        t = lifecycle_next(LC_DRAINING, LC_GROUP_GONE, &none);
        ck_assert(t.state == LC_DONE && t.actions == 0);
        t = lifecycle_next(LC_DRAINING, LC_KILL_TIMEOUT, &none);
        ck_assert(t.state == LC_DONE && t.actions == LC_ACT_KILL_GROUP);
        /* --reload=overlap: SIGHUP starts the next generation beside the
         * serving one; once it is ready the old one is told to stop; if
         * it fails, the old one serves on; a request meanwhile waits. */
        struct lc_facts overlap = { .needs_ready = true, .overlap = true },
                        queued = { .needs_ready = true, .overlap = true, .reload_queued = true };
        t = lifecycle_next(LC_RUNNING, LC_RESTART_REQUEST, &overlap);
        ck_assert(t.state == LC_OVERLAPPING && t.actions == LC_ACT_START_NEXT);
        t = lifecycle_next(LC_OVERLAPPING, LC_READY, &overlap);
        ck_assert(t.state == LC_RUNNING && (t.actions & LC_ACT_RETIRE_PREVIOUS) && (t.actions & LC_ACT_PUBLISH));
        ck_assert(LC_ACT_PUBLISH < LC_ACT_RETIRE_PREVIOUS && LC_ACT_RETIRE_PREVIOUS < LC_ACT_START_NEXT);
        t = lifecycle_next(LC_OVERLAPPING, LC_EXITED, &overlap);
        ck_assert(t.state == LC_RUNNING && (t.actions & LC_ACT_DROP_NEXT) && !(t.actions & LC_ACT_RETIRE_PREVIOUS));
        t = lifecycle_next(LC_OVERLAPPING, LC_READY_TIMEOUT, &overlap);
        ck_assert(t.state == LC_RUNNING && (t.actions & LC_ACT_DROP_NEXT) && !(t.actions & LC_ACT_MARK_NOT_READY));
        t = lifecycle_next(LC_OVERLAPPING, LC_RESTART_REQUEST, &overlap);
        ck_assert(t.state == LC_OVERLAPPING && t.actions == LC_ACT_QUEUE_RELOAD);
        t = lifecycle_next(LC_OVERLAPPING, LC_RESTART_REQUEST, &queued);
        ck_assert(t.state == LC_OVERLAPPING && t.actions == 0);
        t = lifecycle_next(LC_OVERLAPPING, LC_READY, &queued);
        ck_assert(t.state == LC_OVERLAPPING && (t.actions & LC_ACT_START_NEXT) &&
                  (t.actions & LC_ACT_RETIRE_PREVIOUS));
        t = lifecycle_next(LC_OVERLAPPING, LC_PREVIOUS_EXITED, &overlap);
        ck_assert(t.state == LC_WAITING_READY && t.actions == 0);
        /* The first COMMAND starts as every later one: it is forked, then
         * (published first when nothing is to wait for) let exec. */
        t = lifecycle_next(LC_INIT, LC_BEGIN, &none);
        ck_assert(t.state == LC_RUNNING && t.actions == LC_ACT_START);
        t = lifecycle_next(LC_RUNNING, LC_SPAWNED, &none);
        ck_assert(t.state == LC_RUNNING && t.actions == (LC_ACT_PUBLISH | LC_ACT_OPEN_GATE));
        ck_assert(LC_ACT_PUBLISH < LC_ACT_OPEN_GATE);
        t = lifecycle_next(LC_WAITING_READY, LC_SPAWNED, &overlap);
        ck_assert(t.state == LC_WAITING_READY && t.actions == LC_ACT_OPEN_GATE);
        /* --share's stop: SIGTERM, since no signal is forwarded for it. */
        t = lifecycle_next(LC_RUNNING, LC_STOP_REQUEST, &none);
        ck_assert(t.state == LC_STOPPING && (t.actions & LC_ACT_TERMINATE));
        t = lifecycle_next(LC_RESTART_PENDING, LC_STOP_REQUEST, &none);
        ck_assert(t.state == LC_DONE && t.actions == LC_ACT_TELL_STOPPING);
        /* Without a readiness check, or before the first is ready: a restart. */
        t = lifecycle_next(LC_RUNNING, LC_RESTART_REQUEST, &(struct lc_facts) { .overlap = true });
        ck_assert(t.state == LC_RESTARTING);
        t = lifecycle_next(LC_WAITING_READY, LC_RESTART_REQUEST, &overlap);
        ck_assert(t.state == LC_RESTARTING);
}
END_TEST

START_TEST(test_started) {
        struct lc_facts ready = { .needs_ready = true }, plain = { 0 };

        ck_assert_int_eq(lifecycle_started(&ready), LC_WAITING_READY);
        ck_assert_int_eq(lifecycle_started(&plain), LC_RUNNING);
}
END_TEST

START_TEST(test_has_child) {
        static const bool child[_LC_STATE_MAX] = {
                [LC_INIT] = false,       [LC_WAITING_READY] = true,    [LC_RUNNING] = true,
                [LC_RESTARTING] = true,  [LC_RESTART_PENDING] = false, [LC_STOPPING] = true,
                [LC_NOT_READY] = true,   [LC_DRAINING] = false,        [LC_DONE] = false,
                [LC_OVERLAPPING] = true,
        };

        for (int s = 0; s < _LC_STATE_MAX; s++)
                ck_assert_msg(lifecycle_has_child(s) == child[s], "%s", lifecycle_state_name(s));
}
END_TEST

/* ---- invariants, over every pair and facts ------------------------------- */

#define FOR_EVERY(s, e, f, b)                                                                                         \
        for (int s = 0; s < _LC_STATE_MAX; s++)                                                                       \
                for (int e = 0; e < _LC_EVENT_MAX; e++)                                                               \
                        for (unsigned b = 0; b < N_FACTS; b++)                                                        \
                                for (struct lc_facts f = facts_of(b), *_once = &f; _once; _once = NULL)

START_TEST(test_done_is_absorbing) {
        FOR_EVERY(s, e, f, b) {
                struct lc_transition t = lifecycle_next(LC_DONE, e, &f);
                ck_assert(t.state == LC_DONE && t.actions == 0);
                (void) s;
        }
}
END_TEST

START_TEST(test_start_only_into_a_running_command) {
        FOR_EVERY(s, e, f, b) {
                struct lc_transition t = lifecycle_next(s, e, &f);

                if (t.actions & LC_ACT_START) {
                        ck_assert_msg(t.state == LC_WAITING_READY || t.state == LC_RUNNING, "%s + %s",
                                      lifecycle_state_name(s), lifecycle_event_name(e));
                        ck_assert_int_eq(t.state, lifecycle_started(&f));
                        /* Never a second COMMAND beside a live one. */
                        ck_assert_msg(!lifecycle_has_child(s) || e == LC_EXITED, "%s + %s", lifecycle_state_name(s),
                                      lifecycle_event_name(e));
                }
        }
}
END_TEST

START_TEST(test_signals_only_where_a_child_runs) {
        FOR_EVERY(s, e, f, b) {
                struct lc_transition t = lifecycle_next(s, e, &f);

                if (t.actions & (LC_ACT_KILL | LC_ACT_TERMINATE | LC_ACT_ARM_GRACE))
                        ck_assert_msg(lifecycle_has_child(s) && lifecycle_has_child(t.state), "%s + %s",
                                      lifecycle_state_name(s), lifecycle_event_name(e));
                /* The kill clock: for COMMAND, or for what is left of its group. */
                if (t.actions & LC_ACT_ARM_KILL)
                        ck_assert_msg((lifecycle_has_child(s) && lifecycle_has_child(t.state)) ||
                                              t.state == LC_DRAINING,
                                      "%s + %s", lifecycle_state_name(s), lifecycle_event_name(e));
                /* The group's rest: told to stop only once COMMAND exited and
                 * some of it is left; killed only when draining it took too long. */
                if (t.actions & LC_ACT_TERM_GROUP)
                        ck_assert(e == LC_EXITED && f.group_left);
                if (t.actions & LC_ACT_KILL_GROUP)
                        ck_assert(s == LC_DRAINING && e == LC_KILL_TIMEOUT && t.state == LC_DONE);
                if (t.state == LC_DRAINING && s != LC_DRAINING)
                        ck_assert(f.group_left && f.kill_after &&
                                  (t.actions & (LC_ACT_TERM_GROUP | LC_ACT_ARM_KILL)) ==
                                          (LC_ACT_TERM_GROUP | LC_ACT_ARM_KILL));
                /* SIGKILL only for a COMMAND already told to stop. */
                if (t.actions & LC_ACT_KILL)
                        ck_assert(s == LC_RESTARTING || s == LC_STOPPING || s == LC_NOT_READY);
        }
}
END_TEST

START_TEST(test_no_child_is_abandoned) {
        /* Leaving a state with a COMMAND for one without: only once it is
         * gone (or never started). */
        FOR_EVERY(s, e, f, b) {
                struct lc_transition t = lifecycle_next(s, e, &f);

                if (lifecycle_has_child(s) && !lifecycle_has_child(t.state))
                        ck_assert_msg(e == LC_EXITED || e == LC_START_FAILED, "%s + %s", lifecycle_state_name(s),
                                      lifecycle_event_name(e));
        }
}
END_TEST

START_TEST(test_action_targets) {
        FOR_EVERY(s, e, f, b) {
                struct lc_transition t = lifecycle_next(s, e, &f);

                /* Once ready; or, with nothing to wait for, before it runs. */
                if (t.actions & LC_ACT_PUBLISH)
                        ck_assert((e == LC_READY &&
                                   ((s == LC_WAITING_READY && t.state == LC_RUNNING) || s == LC_OVERLAPPING)) ||
                                  (e == LC_SPAWNED && s == LC_RUNNING && t.state == LC_RUNNING));
                if (t.actions & LC_ACT_ARM_RESTART)
                        ck_assert(t.state == LC_RESTART_PENDING);
                if (t.state == LC_RESTART_PENDING && s != LC_RESTART_PENDING)
                        ck_assert(t.actions & LC_ACT_ARM_RESTART);
                /* Giving up ends prebind, once what is left of the group is gone. */
                if (t.actions & LC_ACT_GIVE_UP)
                        ck_assert(t.state == LC_DONE || t.state == LC_DRAINING);
                if (t.actions & LC_ACT_TELL_STOPPING)
                        ck_assert(t.state == LC_STOPPING || t.state == LC_NOT_READY || t.state == LC_DONE);
                /* An event that means nothing changes nothing. */
                if ((int) t.state == s && s != LC_RESTARTING && s != LC_STOPPING && s != LC_NOT_READY)
                        ck_assert_msg(t.actions == 0 || (t.actions & (LC_ACT_START | LC_ACT_START_NEXT)) ||
                                              t.actions == LC_ACT_QUEUE_RELOAD || e == LC_SPAWNED,
                                      "%s + %s", lifecycle_state_name(s), lifecycle_event_name(e));
        }
}
END_TEST

/* Two generations at once: the previous one is never forgotten (it is
 * told to stop, serves on, or exited), and a new one only beside a
 * serving one, with a readiness check to know when to stop the old. */
START_TEST(test_generations) {
        FOR_EVERY(s, e, f, b) {
                struct lc_transition t = lifecycle_next(s, e, &f);
                unsigned hands = t.actions & (LC_ACT_RETIRE_PREVIOUS | LC_ACT_DROP_NEXT);

                if (hands)
                        ck_assert_msg(s == LC_OVERLAPPING && hands != (LC_ACT_RETIRE_PREVIOUS | LC_ACT_DROP_NEXT),
                                      "%s + %s", lifecycle_state_name(s), lifecycle_event_name(e));
                if (s == LC_OVERLAPPING && (t.state != LC_OVERLAPPING || (t.actions & LC_ACT_START_NEXT)))
                        ck_assert_msg(hands || e == LC_PREVIOUS_EXITED, "%s + %s", lifecycle_state_name(s),
                                      lifecycle_event_name(e));
                if (t.actions & LC_ACT_START_NEXT)
                        ck_assert(t.state == LC_OVERLAPPING && !(t.actions & LC_ACT_START) &&
                                  (s == LC_OVERLAPPING || (s == LC_RUNNING && f.overlap && f.needs_ready)));
                if (t.state == LC_OVERLAPPING && s != LC_OVERLAPPING)
                        ck_assert(t.actions & LC_ACT_START_NEXT);
                if (t.actions & LC_ACT_QUEUE_RELOAD)
                        ck_assert(s == LC_OVERLAPPING && e == LC_RESTART_REQUEST && !f.reload_queued);
                /* Leaving the wait stops it; one that goes on (alone) does not. */
                if (s == LC_OVERLAPPING && e == LC_PREVIOUS_EXITED && t.state == LC_WAITING_READY)
                        ck_assert(!(t.actions & LC_ACT_STOP_READINESS));
        }
}
END_TEST

/* Every COMMAND starts through START (START_NEXT beside a serving one),
 * the first one too (LC_BEGIN), and execs only through OPEN_GATE, once
 * LC_SPAWNED says it waits at its gate. */
START_TEST(test_every_start_is_an_action) {
        FOR_EVERY(s, e, f, b) {
                struct lc_transition t = lifecycle_next(s, e, &f);

                if (t.actions & LC_ACT_OPEN_GATE)
                        ck_assert_msg(e == LC_SPAWNED && (int) t.state == s && lifecycle_has_child(s) &&
                                              (t.actions & ~(unsigned) (LC_ACT_PUBLISH | LC_ACT_OPEN_GATE)) == 0,
                                      "%s + %s", lifecycle_state_name(s), lifecycle_event_name(e));
                if (e == LC_BEGIN)
                        ck_assert(s == LC_INIT ? t.actions == LC_ACT_START && t.state == lifecycle_started(&f)
                                               : (int) t.state == s && t.actions == 0);
                /* Before the first start, nothing else happens (but a failed start ends it). */
                if (s == LC_INIT && e != LC_BEGIN && e != LC_START_FAILED)
                        ck_assert(t.state == LC_INIT && t.actions == 0);
        }
}
END_TEST

/* --share's last holder left, or --stop: a shutdown, and SIGTERM wherever
 * a COMMAND runs, since no signal came to be forwarded. */
START_TEST(test_stop_request_is_a_shutdown_with_sigterm) {
        for (int s = 0; s < _LC_STATE_MAX; s++)
                for (unsigned b = 0; b < N_FACTS; b++) {
                        struct lc_facts f = facts_of(b);
                        struct lc_transition t = lifecycle_next(s, LC_STOP_REQUEST, &f),
                                             sh = lifecycle_next(s, LC_SHUTDOWN, &f);

                        ck_assert(t.state == sh.state);
                        ck_assert(t.actions == (sh.actions | (lifecycle_has_child(s) ? LC_ACT_TERMINATE : 0u)));
                }
}
END_TEST

START_TEST(test_start_failed_always_ends) {
        for (int s = 0; s < _LC_STATE_MAX; s++)
                for (unsigned b = 0; b < N_FACTS; b++) {
                        struct lc_facts f = facts_of(b);
                        struct lc_transition t = lifecycle_next(s, LC_START_FAILED, &f);
                        /* …but a new generation that cannot start leaves the old one serving. */
                        if (s == LC_OVERLAPPING)
                                ck_assert(t.state == LC_RUNNING && (t.actions & LC_ACT_DROP_NEXT));
                        else
                                ck_assert(t.state == LC_DONE && (t.actions & ~(unsigned) LC_ACT_STOP_READINESS) == 0);
                }
}
END_TEST

START_TEST(test_unknown_event_changes_nothing) {
        struct lc_facts f = { .restart_wanted = true };

        for (int s = 0; s < _LC_STATE_MAX; s++) {
                struct lc_transition t = lifecycle_next(s, _LC_EVENT_MAX, &f);
                ck_assert((int) t.state == s && t.actions == 0);
        }
}
END_TEST

START_TEST(test_names) {
        for (int s = 0; s < _LC_STATE_MAX; s++) {
                ck_assert_str_ne(lifecycle_state_name(s), "?");
                for (int o = 0; o < s; o++)
                        ck_assert_str_ne(lifecycle_state_name(s), lifecycle_state_name(o));
        }
        for (int e = 0; e < _LC_EVENT_MAX; e++) {
                ck_assert_str_ne(lifecycle_event_name(e), "?");
                for (int o = 0; o < e; o++)
                        ck_assert_str_ne(lifecycle_event_name(e), lifecycle_event_name(o));
        }
        ck_assert_str_eq(lifecycle_state_name(LC_WAITING_READY), "waiting-ready");
        ck_assert_str_eq(lifecycle_event_name(LC_KILL_TIMEOUT), "kill-timeout");
        ck_assert_str_eq(lifecycle_state_name(_LC_STATE_MAX), "?");
        ck_assert_str_eq(lifecycle_state_name((enum lc_state) - 1), "?");
        ck_assert_str_eq(lifecycle_event_name(_LC_EVENT_MAX), "?");
        ck_assert_str_eq(lifecycle_event_name((enum lc_event) - 1), "?");
}
END_TEST

int main(void) {
        Suite *s = suite_create("lifecycle");
        TCase *table_tc = tcase_create("table"), *inv = tcase_create("invariants"), *names = tcase_create("names");

        tcase_add_test(table_tc, test_every_pair_matches_the_table);
        tcase_add_test(table_tc, test_readable_examples);
        tcase_add_test(table_tc, test_started);
        tcase_add_test(table_tc, test_has_child);
        suite_add_tcase(s, table_tc);
        tcase_add_test(inv, test_done_is_absorbing);
        tcase_add_test(inv, test_start_only_into_a_running_command);
        tcase_add_test(inv, test_signals_only_where_a_child_runs);
        tcase_add_test(inv, test_no_child_is_abandoned);
        tcase_add_test(inv, test_action_targets);
        tcase_add_test(inv, test_generations);
        tcase_add_test(inv, test_every_start_is_an_action);
        tcase_add_test(inv, test_stop_request_is_a_shutdown_with_sigterm);
        tcase_add_test(inv, test_start_failed_always_ends);
        tcase_add_test(inv, test_unknown_event_changes_nothing);
        suite_add_tcase(s, inv);
        tcase_add_test(names, test_names);
        suite_add_tcase(s, names);
        return unit_run(s);
}
