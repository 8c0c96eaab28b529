/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>

/* The supervisor's state, one value, and every event a transition in one
 * table (lifecycle_next()), as s6-supervise keeps it. Pure: no process,
 * no fd, no clock; supervise.c carries out the actions. */
enum lc_state {
        LC_INIT,            /* nothing started yet: LC_BEGIN starts the first COMMAND */
        LC_WAITING_READY,   /* COMMAND runs; readiness conditions pending */
        LC_RUNNING,         /* COMMAND runs; published */
        LC_RESTARTING,      /* SIGHUP: COMMAND was told to stop, a new one follows */
        LC_OVERLAPPING,     /* --reload=overlap: a new COMMAND waits for readiness beside the one serving */
        LC_RESTART_PENDING, /* COMMAND exited; the next starts after --restart-delay */
        LC_STOPPING,        /* SIGTERM/SIGINT: waiting for COMMAND, no restart */
        LC_NOT_READY,       /* readiness timed out: COMMAND told to stop; ends 124 */
        LC_DRAINING,        /* --group: COMMAND exited, the rest of its group was told to stop */
        LC_DONE,
        _LC_STATE_MAX,
};

enum lc_event {
        LC_BEGIN,   /* supervision begins: the first COMMAND starts */
        LC_SPAWNED, /* a new COMMAND was forked, and waits at its gate to exec */
        LC_READY,   /* every readiness condition holds */
        LC_READY_TIMEOUT,
        LC_SHUTDOWN,        /* SIGTERM, SIGINT, a terminal hangup */
        LC_STOP_REQUEST,    /* --share: no holder is left, or --stop; as LC_SHUTDOWN, with no signal to forward */
        LC_RESTART_REQUEST, /* a reload request: SIGHUP (with --restart, --reload or --watch), --watch */
        LC_KILL_TIMEOUT,    /* --kill-after (or the not-ready grace) passed */
        LC_RESTART_DUE,     /* --restart-delay passed */
        LC_EXITED,          /* COMMAND exited and was reaped */
        LC_START_FAILED,    /* a new COMMAND could not be started */
        LC_GROUP_GONE,      /* --group: no process of COMMAND's group is left */
        LC_PREVIOUS_EXITED, /* overlapping: the serving COMMAND exited (LC_EXITED is the new one's) */
        _LC_EVENT_MAX,
};

/* What the supervisor does on a transition, in this order. Every effect
 * of a transition is one of these: the supervisor adds none of its own. */
enum lc_action {
        LC_ACT_SAY_NOT_READY = 1 << 0,      /* say what was not met in time, and the last lines */
        LC_ACT_SAY_EXITED_UNREADY = 1 << 1, /* say that COMMAND exited before it was ready */
        LC_ACT_MARK_NOT_READY = 1 << 2,     /* the job ends "not ready" (124), however COMMAND ended */
        LC_ACT_STOP_READINESS = 1 << 3,     /* the wait is over: no timeout or probe is left */
        LC_ACT_PUBLISH = 1 << 4,            /* publish (the first time), or READY=1 again */
        LC_ACT_TERMINATE = 1 << 5,          /* SIGTERM to COMMAND */
        LC_ACT_KILL = 1 << 6,               /* SIGKILL to COMMAND */
        LC_ACT_ARM_KILL = 1 << 7,           /* start the --kill-after clock, once */
        LC_ACT_ARM_GRACE = 1 << 8,          /* the same, with a default when --kill-after is not given */
        LC_ACT_TELL_STOPPING = 1 << 9,      /* STOPPING=1 to prebind's manager, once */
        LC_ACT_TELL_RELOADING = 1 << 10,    /* RELOADING=1, if published */
        LC_ACT_GIVE_UP = 1 << 11,           /* say that the restart limit was hit */
        LC_ACT_ARM_RESTART = 1 << 12,       /* start the --restart-delay clock */
        LC_ACT_TERM_GROUP = 1 << 13,        /* --group: SIGTERM what is left of the exited COMMAND's group */
        LC_ACT_KILL_GROUP = 1 << 14,        /* …and SIGKILL it */
        LC_ACT_COUNT_RESTART = 1 << 15,     /* a --restart policy restart: it counts towards --restart-limit */
        LC_ACT_START = 1 << 16,             /* fork a new COMMAND, held at its gate (LC_SPAWNED follows) */
        LC_ACT_RETIRE_PREVIOUS =
                1 << 17,               /* the replaced COMMAND: SIGTERM, its own --kill-after; its exit ends nothing */
        LC_ACT_DROP_NEXT = 1 << 18,    /* the new COMMAND failed: stopped if it runs (SIGTERM, the not-ready
                                        * grace); the previous one is COMMAND again, READY=1 to the manager */
        LC_ACT_QUEUE_RELOAD = 1 << 19, /* one more reload once this one is over */
        LC_ACT_START_NEXT = 1 << 20,   /* RELOADING=1 (if published); fork a new COMMAND beside the serving one
                                        * (LC_SPAWNED follows); the queued reload, if any, is this one */
        LC_ACT_OPEN_GATE = 1 << 21,    /* the new COMMAND may exec (after PUBLISH, when that is due); if
                                        * publishing failed, it exits unexec'd instead */
};

/* What the supervisor knows when an event comes, for the transitions that
 * depend on it. */
struct lc_facts {
        bool needs_ready;       /* a new COMMAND waits for readiness conditions */
        bool restart_wanted;    /* --restart's policy, for the status COMMAND exited with */
        bool restart_limit_hit; /* …but --restart-limit forbids one more now (a query: nothing is counted) */
        bool restart_delay;     /* --restart-delay is not 0 */
        bool group_left;        /* --group: the exited COMMAND's group still has processes */
        bool kill_after;        /* --kill-after is given */
        bool overlap;           /* --reload=overlap */
        bool reload_queued;     /* a reload request came during the current reload */
};

struct lc_transition {
        enum lc_state state;
        unsigned actions; /* enum lc_action bits */
};

/* The state a newly started COMMAND is in. */
enum lc_state lifecycle_started(const struct lc_facts *facts);

/* The next state and the actions to take. An event that means nothing in
 * a state leaves it as it is, with no action. */
struct lc_transition lifecycle_next(enum lc_state state, enum lc_event event, const struct lc_facts *facts);

/* Is a COMMAND running (or stopping) in this state? */
bool lifecycle_has_child(enum lc_state state);

const char *lifecycle_state_name(enum lc_state state);
const char *lifecycle_event_name(enum lc_event event);
