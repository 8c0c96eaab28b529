/* SPDX-License-Identifier: MIT */
/* Starting a COMMAND: forked at its gate, its trial exec, the addresses
 * published, the gate opened (or closed unopened). */
#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "guard.h"
#include "log.h"
#include "netns_job.h"
#include "notify.h"
#include "process.h"
#include "ready.h"
#include "supervisor-internal.h"

static void forget_pidfd(struct supervisor *s) {
        if (s->pidfd >= 0)
                close(s->pidfd);
        s->pidfd = -1;
}

/* Ready: published the first time; after that READY=1 again to prebind's
 * manager (systemd's Type=notify-reload: RELOADING=1, then READY=1), with
 * the generation that serves. */
int publish(struct supervisor *s, pid_t pid) {
        char status[64];

        log_debug("generation %u ready, serving", s->generation);
        if (!s->job->published)
                return job_publish(s->job, pid);
        snprintf(status, sizeof status, "READY=1\nSTATUS=generation %u serving", s->generation);
        notify_manager(status);
        return 0;
}

/* --netns: a new namespace for each COMMAND, and its notification socket
 * made there (abstract unix names are per network namespace). */
static int prepare_netns(struct supervisor *s, struct spawn_plan *plan) {
        struct netns_join join;
        int r, fd;

        r = netns_job_prepare(s->job->netns, &join);
        if (r < 0)
                return r;
        plan->join_netns = true;
        plan->net_fd = join.net_fd;
        plan->user_fd = join.user_fd;
        if (!s->config->ready.notify)
                return 0;
        r = netns_job_socket(s->job->netns, AF_UNIX, SOCK_DGRAM, &fd);
        if (r >= 0)
                r = ready_move_notify(s->job->readiness, fd);
        if (r < 0)
                return log_error_errno(r, "cannot make the notification socket in the namespace: %m");
        return 0;
}

/* The last COMMAND exited and left members of its --group, told to stop
 * and not waited for, as a new COMMAND follows (or the serving one goes
 * on): they are a retiree now, with its grace and the guard. Not the
 * group of the one that serves beside a new one. */
void retire_group_left(struct supervisor *s) {
        if (s->child > 0 || s->group <= 0 || s->group == s->previous)
                return;
        /* Gone meanwhile: the guard no longer watches it either (its
         * number may be another group's soon). */
        if (!group_left(s))
                guard_unwatch(s->job->guard, s->group);
        else
                retire(s, s->group, -1, s->generation, retiree_grace(s), true);
        s->group = 0;
}

/* A new COMMAND that never ran (its exec failed, or it was not let
 * exec): reaped, and no longer watched by the guard. */
static int never_ran(struct supervisor *s, int r, bool exec_failed) {
        pid_t pid = s->gate.pid;

        if (exec_failed) {
                log_error_errno(r, "cannot run '%s': %m", command_name(s));
                s->outcome = (struct outcome) { OUTCOME_EXEC_FAILED, -r };
        }
        spawn_abandon(&s->gate);
        s->child = 0;
        guard_unwatch(s->job->guard, pid);
        forget_pidfd(s);
        return r;
}

/* Fork COMMAND; it waits at its gate until open_gate(), once its trial
 * exec says it can run (a COMMAND that cannot publishes nothing). Without
 * readiness checks the addresses are published in between
 * (LC_SPAWNED's actions): before COMMAND runs, with its pid known. */
int start_command(struct supervisor *s) {
        struct spawn_plan plan;
        int r;

        r = ready_prepare_output(s->job->readiness);
        if (r < 0)
                return log_error_errno(r, "cannot create the pipes for --ready-log: %m");
        plan = job_spawn_plan(s->job);

        /* signals_block_all() made every disposition the default. */
        plan.dispositions_are_default = true;
        if (s->job->netns && (r = prepare_netns(s, &plan)) < 0)
                return r;
        r = spawn_child(&plan, &s->gate);
        if (r < 0)
                /* pipe2() or fork(): out of fds or processes. */
                return log_error_errno(r, "cannot start '%s': %m", command_name(s));
        retire_group_left(s);

        /* Our own child cannot be reaped by anyone else, so its pid is not
         * reused while we hold it: the pidfd is a precise exit event. The
         * guard watches it before it may exec: a prebind killed before
         * that closes the gate, and the child exits unexec'd. */
        s->pidfd = open_pidfd(s->gate.pid);
        guard_watch(s->job->guard, s->gate.pid, s->pidfd, s->config->group);
        s->generation = ++s->n_started;
        s->child = s->gate.pid;
        r = spawn_check(&s->gate);
        return r < 0 ? never_ran(s, r, r != -ECHILD) : 0;
}

/* Let the new COMMAND exec; or, when publishing it failed (published <
 * 0), not: closing the gate unopened makes the child exit unexec'd. */
int open_gate(struct supervisor *s, int published) {
        bool needs_ready = ready_needed(s->job->readiness);
        pid_t pid = s->gate.pid;
        int r;

        s->child = 0;
        if (published < 0)
                return never_ran(s, published, false);
        r = spawn_release(&s->gate);
        if (r < 0)
                return never_ran(s, r, true);
        s->child = pid;
        s->group = s->config->group ? pid : 0;
        log_debug("started '%s' as pid %d, generation %u", command_name(s), (int) pid, s->generation);

        if (s->pidfd >= 0 && loop_add(s->loop, s->pidfd, LOOP_IN, on_pidfd, s) < 0) {
                close(s->pidfd);
                s->pidfd = -1;
        }
        if (needs_ready && (r = ready_start(s->job->readiness, pid)) < 0)
                return r;
        ready_set_command(s->job->readiness, pid, s->previous);
        return 0;
}
