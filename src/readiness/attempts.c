/* SPDX-License-Identifier: MIT */
#include "attempts.h"

uint64_t attempt_timeout(uint64_t interval_usec) {
        return interval_usec > USEC_PER_SEC ? interval_usec : USEC_PER_SEC;
}

uint64_t attempt_next_bound(uint64_t bound_usec) {
        uint64_t next = bound_usec * 2;

        if (bound_usec >= ATTEMPT_BOUND_MAX)
                return bound_usec;
        return next < ATTEMPT_BOUND_MAX ? next : ATTEMPT_BOUND_MAX;
}

uint64_t attempt_next_start(uint64_t started_usec, uint64_t ended_usec, uint64_t interval_usec) {
        uint64_t next = started_usec + interval_usec;

        return next > ended_usec ? next : ended_usec;
}

void attempts_begin(struct attempts *a, struct loop *l, uint64_t interval_usec, loop_timer_handler handler,
                    void *userdata) {
        attempts_stop(a);
        *a = (struct attempts) {
                .loop = l,
                .handler = handler,
                .userdata = userdata,
                .interval = interval_usec,
                .bound = attempt_timeout(interval_usec),
        };
        loop_timer_start(l, &a->timer, 0, handler, userdata);
}

void attempt_started(struct attempts *a) {
        a->running = true;
        a->started = now_usec();
        a->count++;
        loop_timer_start(a->loop, &a->timer, a->bound, a->handler, a->userdata);
}

void attempt_failed(struct attempts *a) {
        uint64_t now = now_usec(), next = attempt_next_start(a->started, now, a->interval);

        a->running = false;
        loop_timer_start(a->loop, &a->timer, next > now ? next - now : 0, a->handler, a->userdata);
}

void attempt_timed_out(struct attempts *a) {
        a->last_bound = a->bound;
        a->bound = attempt_next_bound(a->bound);
        attempt_failed(a);
}

void attempt_extend(struct attempts *a) {
        loop_timer_start(a->loop, &a->timer, a->bound, a->handler, a->userdata);
}

void attempts_stop(struct attempts *a) {
        if (a->loop)
                loop_timer_stop(a->loop, &a->timer);
        a->running = false;
}
