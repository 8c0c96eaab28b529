/* SPDX-License-Identifier: MIT */
#include "lifecycle.h"

enum lc_state lifecycle_started(const struct lc_facts *facts) {
        return facts->needs_ready ? LC_WAITING_READY : LC_RUNNING;
}

bool lifecycle_has_child(enum lc_state state) {
        return state != LC_INIT && state != LC_RESTART_PENDING && state != LC_DRAINING && state != LC_DONE;
}

/* COMMAND exited for good. With --group, what is left of its process
 * group is told to stop (as dumb-init's setsid mode), and with
 * --kill-after waited for, then killed. */
static struct lc_transition finished(const struct lc_facts *f, unsigned actions) {
        if (!f->group_left)
                return (struct lc_transition) { LC_DONE, actions };
        if (!f->kill_after)
                return (struct lc_transition) { LC_DONE, actions | LC_ACT_TERM_GROUP };
        return (struct lc_transition) { LC_DRAINING, actions | LC_ACT_TERM_GROUP | LC_ACT_ARM_KILL };
}

/* A new COMMAND follows: the old one's group is told to stop, not waited for. */
static unsigned term_group(const struct lc_facts *f) {
        return f->group_left ? LC_ACT_TERM_GROUP : 0;
}

/* COMMAND exited while it was meant to run: restart it, or not. Requested
 * restarts (SIGHUP) skip this: neither the policy, the limit nor the
 * delay applies to them. A COMMAND that had not become ready and is not
 * restarted is said to have exited unready. */
static struct lc_transition exited_unasked(enum lc_state state, const struct lc_facts *f) {
        unsigned unready = state == LC_WAITING_READY ? LC_ACT_SAY_EXITED_UNREADY : 0;

        if (!f->restart_wanted)
                return finished(f, unready);
        if (f->restart_limit_hit)
                return finished(f, unready | LC_ACT_GIVE_UP);
        if (f->restart_delay)
                return (struct lc_transition) { LC_RESTART_PENDING,
                                                term_group(f) | LC_ACT_TELL_RELOADING | LC_ACT_ARM_RESTART };
        return (struct lc_transition) { lifecycle_started(f),
                                        term_group(f) | LC_ACT_TELL_RELOADING | LC_ACT_COUNT_RESTART | LC_ACT_START };
}

static struct lc_transition transition(enum lc_state state, enum lc_event event, const struct lc_facts *f);
static struct lc_transition stop_requested(enum lc_state state, const struct lc_facts *f);

/* The effects that follow from the states alone: leaving the wait for
 * readiness, however, leaves no timeout or probe behind (a new COMMAND
 * starts its own, and so does the next generation). */
struct lc_transition lifecycle_next(enum lc_state state, enum lc_event event, const struct lc_facts *f) {
        struct lc_transition t = event == LC_STOP_REQUEST ? stop_requested(state, f) : transition(state, event, f);
        bool waits = state == LC_WAITING_READY || state == LC_OVERLAPPING;
        bool still = t.state == LC_WAITING_READY || t.state == LC_OVERLAPPING;

        /* (A new COMMAND that was waiting beside the serving one, still
         * waits once it is the only one.) */
        if (waits && (!still || (t.actions & LC_ACT_START_NEXT)))
                t.actions |= LC_ACT_STOP_READINESS;
        return t;
}

/* The reload is over (the new COMMAND serves, or failed and the previous
 * one serves on): the next one, if one was asked for meanwhile. */
static struct lc_transition reload_over(const struct lc_facts *f, unsigned actions) {
        if (f->reload_queued)
                return (struct lc_transition) { LC_OVERLAPPING, actions | LC_ACT_START_NEXT };
        return (struct lc_transition) { LC_RUNNING, actions };
}

/* --reload=overlap: the new COMMAND starts beside the serving
 * one, which is stopped only once the new one is ready; a new one that
 * fails leaves it serving. One reload at a time: requests meanwhile
 * make one more, after it. */
static struct lc_transition overlapping(enum lc_event event, const struct lc_facts *f) {
        struct lc_transition same = { LC_OVERLAPPING, 0 };

        switch (event) {
        case LC_READY:
                return reload_over(f, LC_ACT_RETIRE_PREVIOUS | LC_ACT_PUBLISH);
        case LC_READY_TIMEOUT:
                return reload_over(f, LC_ACT_SAY_NOT_READY | LC_ACT_DROP_NEXT);
        case LC_EXITED:
                return reload_over(f, LC_ACT_SAY_EXITED_UNREADY | LC_ACT_DROP_NEXT);
        case LC_START_FAILED:
                return (struct lc_transition) { LC_RUNNING, LC_ACT_DROP_NEXT };
        case LC_SPAWNED:
                /* It is published once ready, as the one it replaces was. */
                return (struct lc_transition) { LC_OVERLAPPING, LC_ACT_OPEN_GATE };
        case LC_SHUTDOWN:
                /* The signal goes to the new one; the serving one is told too. */
                return (struct lc_transition) { LC_STOPPING,
                                                LC_ACT_RETIRE_PREVIOUS | LC_ACT_TELL_STOPPING | LC_ACT_ARM_KILL };
        case LC_RESTART_REQUEST:
                return f->reload_queued ? same : (struct lc_transition) { LC_OVERLAPPING, LC_ACT_QUEUE_RELOAD };
        case LC_PREVIOUS_EXITED:
                /* The new one is the only one, still waiting; a request
                 * queued meanwhile is handled as in that state. */
                if (f->reload_queued)
                        return (struct lc_transition) { LC_RESTARTING, LC_ACT_TERMINATE | LC_ACT_ARM_KILL };
                return (struct lc_transition) { LC_WAITING_READY, 0 };
        default:
                return same;
        }
}

/* --share's last holder left, or --stop: a shutdown that no signal came
 * with, so none is forwarded: SIGTERM is what stops COMMAND, even one
 * told to stop already. */
static struct lc_transition stop_requested(enum lc_state state, const struct lc_facts *f) {
        struct lc_transition t = transition(state, LC_SHUTDOWN, f);

        if (lifecycle_has_child(state))
                t.actions |= LC_ACT_TERMINATE;
        return t;
}

static struct lc_transition transition(enum lc_state state, enum lc_event event, const struct lc_facts *f) {
        struct lc_transition same = { state, 0 };
        bool live = state == LC_WAITING_READY || state == LC_RUNNING;

        if (state == LC_DONE)
                return same;
        if (state == LC_OVERLAPPING)
                return overlapping(event, f);
        switch (event) {
        case LC_BEGIN:
                return state == LC_INIT ? (struct lc_transition) { lifecycle_started(f), LC_ACT_START } : same;
        case LC_SPAWNED:
                /* Nothing to wait for: published while it waits at its
                 * gate, before it runs, with its pid known. */
                if (state == LC_RUNNING)
                        return (struct lc_transition) { LC_RUNNING, LC_ACT_PUBLISH | LC_ACT_OPEN_GATE };
                return state == LC_WAITING_READY ? (struct lc_transition) { state, LC_ACT_OPEN_GATE } : same;
        case LC_READY:
                return state == LC_WAITING_READY ? (struct lc_transition) { LC_RUNNING, LC_ACT_PUBLISH } : same;
        case LC_READY_TIMEOUT:
                if (state != LC_WAITING_READY)
                        return same;
                return (struct lc_transition) { LC_NOT_READY, LC_ACT_SAY_NOT_READY | LC_ACT_TERMINATE |
                                                                      LC_ACT_ARM_GRACE | LC_ACT_TELL_STOPPING };
        case LC_SHUTDOWN:
                /* The signal itself is forwarded (or COMMAND had it from
                 * the terminal): it is what stops COMMAND. */
                if (live || state == LC_RESTARTING)
                        return (struct lc_transition) { LC_STOPPING, LC_ACT_TELL_STOPPING | LC_ACT_ARM_KILL };
                if (state == LC_RESTART_PENDING)
                        return (struct lc_transition) { LC_DONE, LC_ACT_TELL_STOPPING };
                return same;
        case LC_RESTART_REQUEST:
                /* Nothing serves before COMMAND is ready: a restart loses nothing. */
                if (state == LC_RUNNING && f->overlap && f->needs_ready)
                        return (struct lc_transition) { LC_OVERLAPPING, LC_ACT_START_NEXT };
                if (live)
                        return (struct lc_transition) { LC_RESTARTING, LC_ACT_TERMINATE | LC_ACT_ARM_KILL };
                /* During the delay: cut it short. */
                if (state == LC_RESTART_PENDING)
                        return (struct lc_transition) { lifecycle_started(f), LC_ACT_COUNT_RESTART | LC_ACT_START };
                return same;
        case LC_KILL_TIMEOUT:
                if (state == LC_DRAINING)
                        return (struct lc_transition) { LC_DONE, LC_ACT_KILL_GROUP };
                return lifecycle_has_child(state) && !live ? (struct lc_transition) { state, LC_ACT_KILL } : same;
        case LC_RESTART_DUE:
                return state == LC_RESTART_PENDING
                               ? (struct lc_transition) { lifecycle_started(f), LC_ACT_COUNT_RESTART | LC_ACT_START }
                               : same;
        case LC_EXITED:
                if (live)
                        return exited_unasked(state, f);
                if (state == LC_RESTARTING)
                        return (struct lc_transition) { lifecycle_started(f),
                                                        term_group(f) | LC_ACT_TELL_RELOADING | LC_ACT_START };
                if (state == LC_STOPPING)
                        return finished(f, 0);
                /* However it ends after that (killed, its --group drained),
                 * a COMMAND stopped for not being ready makes the job
                 * "not ready". */
                if (state == LC_NOT_READY)
                        return finished(f, LC_ACT_MARK_NOT_READY);
                return same;
        case LC_START_FAILED:
                return (struct lc_transition) { LC_DONE, 0 };
        case LC_GROUP_GONE:
                return state == LC_DRAINING ? (struct lc_transition) { LC_DONE, 0 } : same;
        default:
                return same;
        }
}

const char *lifecycle_state_name(enum lc_state state) {
        static const char *const names[_LC_STATE_MAX] = {
                [LC_INIT] = "init",
                [LC_WAITING_READY] = "waiting-ready",
                [LC_RUNNING] = "running",
                [LC_RESTARTING] = "restarting",
                [LC_RESTART_PENDING] = "restart-pending",
                [LC_OVERLAPPING] = "overlapping",
                [LC_STOPPING] = "stopping",
                [LC_NOT_READY] = "not-ready",
                [LC_DRAINING] = "draining",
                [LC_DONE] = "done",
        };
        return state >= 0 && state < _LC_STATE_MAX ? names[state] : "?";
}

const char *lifecycle_event_name(enum lc_event event) {
        static const char *const names[_LC_EVENT_MAX] = {
                [LC_BEGIN] = "begin",
                [LC_SPAWNED] = "spawned",
                [LC_READY] = "ready",
                [LC_READY_TIMEOUT] = "ready-timeout",
                [LC_SHUTDOWN] = "shutdown",
                [LC_STOP_REQUEST] = "stop-request",
                [LC_RESTART_REQUEST] = "restart-request",
                [LC_KILL_TIMEOUT] = "kill-timeout",
                [LC_RESTART_DUE] = "restart-due",
                [LC_EXITED] = "exited",
                [LC_START_FAILED] = "start-failed",
                [LC_GROUP_GONE] = "group-gone",
                [LC_PREVIOUS_EXITED] = "previous-exited",
        };
        return event >= 0 && event < _LC_EVENT_MAX ? names[event] : "?";
}
