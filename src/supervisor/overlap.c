/* SPDX-License-Identifier: MIT */
/* --reload=overlap: a new generation starts beside the serving one, which
 * serves until the new one is ready, then retires; a new one that fails
 * hands back to it. */
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include "guard.h"
#include "log.h"
#include "notify.h"
#include "ready.h"
#include "supervisor-internal.h"

/* --reload=overlap: the serving COMMAND becomes the previous one, and a
 * new one starts beside it on the same sockets. */
int start_next(struct supervisor *s) {
        char reloading[64];

        s->reload_queued = false;
        s->previous = s->child;
        s->previous_pidfd = s->pidfd;
        s->previous_generation = s->generation;
        s->child = 0;
        s->pidfd = -1;
        if (s->job->published) {
                snprintf(reloading, sizeof reloading, "RELOADING=1\nMONOTONIC_USEC=%llu",
                         (unsigned long long) now_usec());
                notify_manager(reloading);
        }
        log_debug("reloading: generation %u starts beside generation %u", s->n_started + 1, s->previous_generation);
        return start_command(s);
}

/* The new COMMAND failed (exited, not ready in time, not started): it is
 * stopped if it still runs, and the previous one serves on. */
void drop_next(struct supervisor *s) {
        char status[96];
        unsigned failed = s->n_started;

        if (s->child > 0)
                retire(s, s->child, s->pidfd, s->generation, s->config->kill_after_usec ?: NOT_READY_GRACE_USEC,
                       false);
        else
                unwatch_pidfd(s, &s->pidfd);
        retire_group_left(s);
        s->child = s->previous;
        s->pidfd = s->previous_pidfd;
        s->generation = s->previous_generation;
        s->group = s->config->group ? s->child : 0;
        s->previous = 0;
        s->previous_pidfd = -1;
        ready_set_command(s->job->readiness, s->child, 0);
        log_error("reload failed: generation %u keeps serving", s->generation);
        if (s->job->published) {
                snprintf(status, sizeof status, "READY=1\nSTATUS=generation %u serving (generation %u failed)",
                         s->generation, failed);
                notify_manager(status);
        }
}

/* The new COMMAND is ready: the previous one is told to stop. */
void retire_previous(struct supervisor *s) {
        if (s->previous <= 0)
                return;
        retire(s, s->previous, s->previous_pidfd, s->previous_generation, retiree_grace(s), false);
        s->previous = 0;
        s->previous_pidfd = -1;
        ready_set_command(s->job->readiness, s->child, 0);
}

/* Overlapping: the serving COMMAND exited before the new one was ready.
 * Its status is not prebind's: the new one is COMMAND now. */
void previous_exited(struct supervisor *s, int status) {
        ready_command_exited(s->job->readiness, s->previous);
        unwatch_pidfd(s, &s->previous_pidfd);
        /* Its --group's members, if any are left, stop as a retiree's. */
        if (s->config->group && kill(-s->previous, 0) == 0)
                retire(s, s->previous, -1, s->previous_generation, retiree_grace(s), true);
        else
                guard_unwatch(s->job->guard, s->previous);
        s->previous = 0;
        ready_set_command(s->job->readiness, s->child, 0);
        log_info("generation %u exited with status %d during the reload; generation %u is the only one",
                 s->previous_generation, status, s->generation);
        on_event(s, LC_PREVIOUS_EXITED);
}
