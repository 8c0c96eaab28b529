/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "clock.h"
#include "loop.h"

/* The attempts of a check that tries again (--ready-exec, --ready-http):
 * one timer either starts the next attempt or ends the one under way.
 *
 * Scheduling, pure: an attempt may take max(interval, 1s); the next
 * starts interval after the last one started, and never before it
 * ended (attempts never overlap). An attempt that runs out of time
 * doubles the bound of the next, up to ATTEMPT_BOUND_MAX: on a loaded
 * machine (a CI runner at load 30 was measured) `sh -c 'redis-cli ping'`
 * takes more than a second to start, and a fixed bound would kill every
 * attempt. A hung attempt still costs at most one bound. */
#define ATTEMPT_BOUND_MAX (8 * USEC_PER_SEC)
uint64_t attempt_timeout(uint64_t interval_usec);
uint64_t attempt_next_bound(uint64_t bound_usec);
uint64_t attempt_next_start(uint64_t started_usec, uint64_t ended_usec, uint64_t interval_usec);

struct attempts {
        struct loop *loop;
        struct loop_timer timer;
        loop_timer_handler handler; /* the owner's: starts or ends an attempt */
        void *userdata;
        uint64_t interval;
        bool running;
        uint64_t started;
        unsigned count;
        uint64_t bound;      /* how long the next attempt may take */
        uint64_t last_bound; /* …and the last one that ran out of time */
};

/* For a new COMMAND: no attempt yet, the first one at once. */
void attempts_begin(struct attempts *a, struct loop *l, uint64_t interval_usec, loop_timer_handler handler,
                    void *userdata);
/* An attempt started: the timer bounds it. */
void attempt_started(struct attempts *a);
/* The attempt is over and not ready: the next one is due. */
void attempt_failed(struct attempts *a);
/* The attempt ran out of time: the next may take longer. */
void attempt_timed_out(struct attempts *a);
/* Give the attempt under way more time (one bound more). */
void attempt_extend(struct attempts *a);
/* No more attempts. */
void attempts_stop(struct attempts *a);
