/* SPDX-License-Identifier: MIT */
/* The supervisor: one state (lifecycle.c's table), the one place where it
 * changes (on_event()), the actions of its transitions, and the loop that
 * feeds it events: exits, signals, timers, readiness, reload requests. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "compat.h"
#include "guard.h"
#include "lifecycle.h"
#include "log.h"
#include "loop.h"
#include "macro.h"
#include "netns_job.h"
#include "notify.h"
#include "parse.h"
#include "process.h"
#include "ready.h"
#include "share.h"
#include "signals.h"
#include "supervise.h"
#include "supervisor-internal.h"
#include "watch.h"

void unwatch_pidfd(struct supervisor *s, int *pidfd) {
        if (*pidfd >= 0) {
                loop_remove(s->loop, *pidfd);
                close(*pidfd);
        }
        *pidfd = -1;
}

void signal_command(struct supervisor *s, int sig) {
        int r = signal_process(s->child, s->config->group, sig);

        if (r < 0)
                log_error_errno(r, "cannot send signal %d (%s) to %d: %m", sig, sigabbrev_np(sig) ?: "?",
                                (int) (s->config->group ? -s->child : s->child));
}

static int on_kill_timer(struct loop *l, struct loop_timer *t, void *userdata) {
        struct supervisor *s = userdata;

        on_event(s, LC_KILL_TIMEOUT);
        return 0;
}

static int on_restart_timer(struct loop *l, struct loop_timer *t, void *userdata) {
        struct supervisor *s = userdata;

        on_event(s, LC_RESTART_DUE);
        return 0;
}

/* Would one more restart be too many? At most restart_burst restarts
 * within restart_interval, as systemd's StartLimitBurst=/
 * StartLimitIntervalSec=. A query: count_restart() records one. */
static bool restart_limit_hit(const struct supervisor *s) {
        const struct config *c = s->config;

        return c->restart_burst > 0 && s->n_restarts == c->restart_burst &&
               now_usec() - s->restarts[0] < c->restart_interval_usec;
}

static void count_restart(struct supervisor *s) {
        const struct config *c = s->config;

        if (c->restart_burst == 0)
                return;
        if (s->n_restarts == c->restart_burst) {
                memmove(s->restarts, s->restarts + 1, (c->restart_burst - 1) * sizeof(uint64_t));
                s->n_restarts--;
        }
        s->restarts[s->n_restarts++] = now_usec();
}

static struct lc_facts facts_for(struct supervisor *s, enum lc_event event) {
        const struct config *c = s->config;
        bool exited = s->outcome.kind == OUTCOME_EXITED;
        struct lc_facts f = {
                .needs_ready = ready_needed(s->job->readiness),
                .restart_wanted = c->restart == RESTART_ALWAYS ||
                                  (c->restart == RESTART_ON_FAILURE && (!exited || s->outcome.status != 0)),
                .restart_delay = c->restart_delay_usec > 0,
                .group_left = event == LC_EXITED && group_left(s),
                .kill_after = c->kill_after_usec > 0,
                .overlap = c->reload == RELOAD_OVERLAP,
                .reload_queued = s->reload_queued,
        };

        if (event == LC_EXITED && f.restart_wanted)
                f.restart_limit_hit = restart_limit_hit(s);
        return f;
}

/* One line that names what was not met, then the last lines COMMAND
 * wrote (--ready-log), as testcontainers shows a container's log. */
static void log_not_ready(struct supervisor *s) {
        char unmet[2048];

        log_error("'%s' %s within %.1fs; stopping it", command_name(s),
                  ready_describe_unmet(s->job->readiness, unmet, sizeof unmet),
                  (double) s->config->ready.timeout_usec / USEC_PER_SEC);
        ready_log_details(s->job->readiness);
}

static void log_error_exited_unready(struct supervisor *s) {
        char unmet[2048];

        log_error("'%s' exited before it was ready, with status %d: %s", command_name(s), s->outcome.status,
                  ready_describe_unmet(s->job->readiness, unmet, sizeof unmet));
        ready_log_details(s->job->readiness);
}

/* A COMMAND that cannot be run ends the job with 126/127; anything else
 * that keeps a new one from starting is prebind's failure. */
static int start_failed(struct supervisor *s, int r) {
        if (s->outcome.kind != OUTCOME_EXEC_FAILED)
                s->error = r;
        return LC_START_FAILED;
}

/* COMMAND exited and left members of its --group: they are told to stop.
 * When a new COMMAND follows (now, or after the delay), they are a
 * retiree from here on (a kill timer, signalled with the others, the
 * guard's until they are gone), and s->group is free for the next one's;
 * otherwise prebind ends, or drains them. */
static void term_group_left(struct supervisor *s, bool next_follows) {
        log_debug("'%s' exited; stopping the rest of its process group %d", command_name(s), (int) s->group);
        if (next_follows) {
                retire_group_left(s);
                return;
        }
        (void) signal_process(s->group, true, SIGTERM);
        /* Stopped members would not see it before SIGCONT. */
        (void) signal_process(s->group, true, SIGCONT);
}

/* Carry out a transition's actions, in the order of enum lc_action.
 * Returns the event they caused (a new COMMAND spawned, or a start that
 * failed), or -1. */
static int act(struct supervisor *s, unsigned actions) {
        const struct config *c = s->config;
        int r, published = 0, next = -1;

        if (actions & LC_ACT_SAY_NOT_READY)
                log_not_ready(s);
        if (actions & LC_ACT_SAY_EXITED_UNREADY)
                log_error_exited_unready(s);
        if (actions & LC_ACT_MARK_NOT_READY)
                s->outcome.kind = OUTCOME_NOT_READY;
        if (actions & LC_ACT_STOP_READINESS)
                ready_stop(s->job->readiness);
        if (actions & LC_ACT_PUBLISH && (published = publish(s, s->child)) < 0)
                s->error = published;
        if (actions & LC_ACT_TERMINATE)
                signal_command(s, SIGTERM);
        if (actions & LC_ACT_KILL) {
                log_info("'%s' still running after --kill-after, sending SIGKILL", command_name(s));
                signal_command(s, SIGKILL);
        }
        if (actions & LC_ACT_ARM_KILL && c->kill_after_usec && !s->kill_timer.armed)
                loop_timer_start(s->loop, &s->kill_timer, c->kill_after_usec, on_kill_timer, s);
        if (actions & LC_ACT_ARM_GRACE && !s->kill_timer.armed)
                loop_timer_start(s->loop, &s->kill_timer, c->kill_after_usec ?: NOT_READY_GRACE_USEC, on_kill_timer,
                                 s);
        if (actions & LC_ACT_TELL_STOPPING && !s->told_stopping) {
                notify_manager("STOPPING=1");
                s->told_stopping = true;
        }
        if (actions & LC_ACT_TELL_RELOADING) {
                log_info("'%s' exited with status %d; restarting it", command_name(s), s->outcome.status);
                if (s->job->published)
                        notify_manager("RELOADING=1");
        }
        if (actions & LC_ACT_GIVE_UP)
                log_error("'%s' was restarted %u times within %.1fs: giving up", command_name(s), c->restart_burst,
                          (double) c->restart_interval_usec / USEC_PER_SEC);
        if (actions & LC_ACT_TERM_GROUP)
                term_group_left(s, actions & (LC_ACT_ARM_RESTART | LC_ACT_START));
        if (actions & LC_ACT_KILL_GROUP) {
                log_info("process group %d still running after --kill-after, sending SIGKILL", (int) s->group);
                (void) signal_process(s->group, true, SIGKILL);
        }
        if (actions & LC_ACT_ARM_RESTART)
                loop_timer_start(s->loop, &s->restart_timer, c->restart_delay_usec, on_restart_timer, s);
        if (actions & LC_ACT_COUNT_RESTART)
                count_restart(s);
        if (actions & LC_ACT_START) {
                loop_timer_stop(s->loop, &s->restart_timer);
                r = start_command(s);
                if (r < 0)
                        return start_failed(s, r);
                next = LC_SPAWNED;
        }
        if (actions & LC_ACT_RETIRE_PREVIOUS)
                retire_previous(s);
        if (actions & LC_ACT_DROP_NEXT)
                drop_next(s);
        if (actions & LC_ACT_QUEUE_RELOAD) {
                log_debug("a reload was requested during a reload: one more follows it");
                s->reload_queued = true;
        }
        if (actions & LC_ACT_START_NEXT) {
                r = start_next(s);
                if (r < 0)
                        return start_failed(s, r);
                next = LC_SPAWNED;
        }
        if (actions & LC_ACT_OPEN_GATE && (r = open_gate(s, published)) < 0)
                return start_failed(s, r);
        return next;
}

/* The one place where the state changes: the transition for event, its
 * actions, and those of any event the actions caused. */
void on_event(struct supervisor *s, enum lc_event event) {
        for (int next = (int) event; next >= 0;) {
                struct lc_facts facts = facts_for(s, (enum lc_event) next);
                struct lc_transition t = lifecycle_next(s->state, (enum lc_event) next, &facts);

                if (t.state != s->state || t.actions)
                        log_debug("%s: %s -> %s", lifecycle_event_name((enum lc_event) next),
                                  lifecycle_state_name(s->state), lifecycle_state_name(t.state));
                s->state = t.state;
                next = act(s, t.actions);
        }
}

/* What any exit of COMMAND ends, whichever transition follows: not
 * actions of the table, since none depends on it, and all done before
 * LC_EXITED, whose START may fork the next COMMAND. The guard watches
 * until nothing of COMMAND is left: with --group, until its group is
 * gone too (LC_GROUP_GONE, in reap()). */
static void command_gone(struct supervisor *s) {
        /* Reaped: its number may be the next process's. What it said was
         * heard before (reap()); now pass on all it wrote (--ready-log). */
        ready_forget_child(s->job->readiness);
        ready_command_exited(s->job->readiness, s->child);
        unwatch_pidfd(s, &s->pidfd);
        if (!group_left(s))
                guard_unwatch(s->job->guard, s->child);
        s->child = 0;
        if (s->job->netns)
                netns_job_stopped(s->job->netns);
        loop_timer_stop(s->loop, &s->kill_timer);
}

/* COMMAND exited with status (exit_status_of()). */
static void command_exited(struct supervisor *s, int status) {
        command_gone(s);
        s->outcome = (struct outcome) { OUTCOME_EXITED, status };
        log_debug("'%s' ended, exit status %d", command_name(s), status);
        on_event(s, LC_EXITED);
}

/* Reap every child that has exited: COMMAND, and as PID 1 or a subreaper
 * (--group makes prebind one), adopted orphans: members of COMMAND's
 * group among them, whose exits tell when the group is gone. */
static void reap(struct supervisor *s) {
        pid_t pid;
        int status, command_status = -1, previous_status = -1;

        /* What COMMAND said before it exited is queued already: hear it (a
         * last STATUS=, STOPPING=1, a report of what it bound) while it is
         * a zombie, whose number is still its own: the sender checks go by
         * pidfd, and a reaped sender's pidfd has no number. */
        ready_hear(s->job->readiness);
        /* What each exit's COMMAND wrote is passed on, waiting for the
         * reader (command_gone(), previous_exited(), retiree_reaped()):
         * the lines about those exits come after the last of it, and wait
         * too (bounded: log.h). */
        log_stderr_patient(true);
        /* Every zombie next: one left unreaped would still count as a
         * member of COMMAND's group. */
        while (reap_one(&pid, &status) > 0) {
                if (pid == s->child)
                        command_status = status;
                else if (s->previous > 0 && pid == s->previous)
                        previous_status = status;
                else
                        (void) retiree_reaped(s, pid, status);
        }
        /* The previous one first: a new one that failed hands back to it. */
        if (previous_status >= 0)
                previous_exited(s, previous_status);
        if (command_status >= 0)
                command_exited(s, command_status);
        retirees_sweep(s);
        if (s->state == LC_DRAINING && !group_left(s)) {
                /* The rest of command_gone(): nothing is left to guard. */
                guard_unwatch(s->job->guard, s->group);
                on_event(s, LC_GROUP_GONE);
        }
        log_stderr_patient(false);
}

int on_pidfd(struct loop *l, int fd, uint32_t revents, void *userdata) {
        reap(userdata);
        return 0;
}

static void on_signal(const struct signalfd_siginfo *si, struct signal_verdict v, void *userdata) {
        struct supervisor *s = userdata;
        int sig = (int) si->ssi_signo;

        if (v.reap)
                reap(s);
        if (v.reap || v.own)
                return;
        if (v.shutdown)
                on_event(s, LC_SHUTDOWN);
        else if (sig == SIGHUP && config_reloads(s->config)) {
                /* Reload on demand: stop COMMAND as for a shutdown, then
                 * start a new one at once (--reload=overlap: start the new
                 * one first); not forwarded. */
                log_info("SIGHUP: %s '%s'", s->config->reload == RELOAD_OVERLAP ? "reloading" : "restarting",
                         command_name(s));
                on_event(s, LC_RESTART_REQUEST);
                return;
        }
        if (v.forward) {
                log_debug("forwarding signal %d (SIG%s)", sig, sigabbrev_np(sig) ?: "?");
                signal_generations(s, sig);
        }
        if (v.stop_self)
                raise(SIGSTOP);
}

/* --watch: a change under a watched path is a reload request, as SIGHUP. */
static void on_watch(const char *changed, void *userdata) {
        struct supervisor *s = userdata;

        log_info("--watch: '%s' changed: %s '%s'", changed,
                 s->config->reload == RELOAD_OVERLAP ? "reloading" : "restarting", command_name(s));
        on_event(s, LC_RESTART_REQUEST);
}

static int start_watch(struct supervisor *s) {
        const struct config *c = s->config;
        struct watch_options o = {
                .paths = c->watch,
                .n_paths = c->n_watch,
                .ignore = c->watch_ignore,
                .n_ignore = c->n_watch_ignore,
                .ignore_defaults = c->watch_ignore_defaults,
                .delay_usec = c->watch_delay_usec,
        };
        const char *path = NULL;
        int r;

        if (c->n_watch == 0)
                return 0;
        r = watch_start(&o, s->loop, on_watch, s, &s->watch, &path);
        if (r < 0 && path)
                return log_error_errno(r, "--watch: cannot watch '%s': %m", path);
        if (r < 0)
                return log_error_errno(r, "--watch: cannot start watching: %m");
        return 0;
}

static int on_signalfd(struct loop *l, int fd, uint32_t revents, void *userdata) {
        struct supervisor *s = userdata;

        signals_drain(fd, s->config->group, on_signal, s);
        return 0;
}

static void on_readiness(enum ready_event event, void *userdata) {
        struct supervisor *s = userdata;

        on_event(s, event == READY_MET ? LC_READY : LC_READY_TIMEOUT);
}

/* --share: no holder is left (after --share-linger), or --stop: as a
 * SIGTERM to prebind, though none came to forward (LC_STOP_REQUEST
 * sends it). */
static void on_share_stop(void *userdata) {
        on_event(userdata, LC_STOP_REQUEST);
}

static void supervisor_done(struct supervisor *s) {
        share_serve_end(s->job->share);
        watch_stop(s->watch);
        ready_detach(s->job->readiness);
        netns_job_detach(s->job->netns);
        loop_timer_stop(s->loop, &s->kill_timer);
        loop_timer_stop(s->loop, &s->restart_timer);
        if (s->pidfd >= 0)
                close(s->pidfd);
        if (s->previous_pidfd >= 0)
                close(s->previous_pidfd);
        retirees_free(s);
        free(s->restarts);
        loop_free(s->loop);
}

/* prebind gives up: no COMMAND of its (the current one, the previous
 * generation, those told to stop) may outlive it. Returns the error. */
static int give_up(struct supervisor *s) {
        if (s->child > 0) {
                signal_command(s, SIGKILL);
                waitpid(s->child, NULL, 0);
        }
        if (s->previous > 0) {
                (void) signal_process(s->previous, s->config->group, SIGKILL);
                waitpid(s->previous, NULL, 0);
        }
        retirees_kill(s);
        return s->error;
}

int supervise(struct job *job, struct outcome *ret) {
        _cleanup_(supervisor_done) struct supervisor s = {
                .job = job,
                .config = job->config,
                .pidfd = -1,
                .previous_pidfd = -1,
        };
        int r;

        s.restarts = calloc(s.config->restart_burst ?: 1, sizeof(uint64_t));
        if (!s.restarts)
                return log_oom();
        r = loop_new(&s.loop);
        if (r < 0)
                return log_error_errno(r, "cannot create the event loop: %m");
        if ((r = loop_add(s.loop, job->signal_fd, LOOP_IN, on_signalfd, &s)) < 0 ||
            (r = ready_attach(job->readiness, s.loop, on_readiness, &s)) < 0)
                return log_error_errno(r, "cannot watch the event sources: %m");
        if (job->netns && (r = netns_job_attach(job->netns, s.loop)) < 0)
                return r;
        if (job->share && (r = share_serve(job->share, s.loop, on_share_stop, &s)) < 0)
                return r;
        if ((r = start_watch(&s)) < 0)
                return r;

        s.state = LC_INIT;
        on_event(&s, LC_BEGIN);
        /* A first COMMAND that could not be started for any reason but
         * its executable fails prebind at once, as the steps before it
         * do (no STOPPING=1); 126/127 go through the loop's end. */
        if (s.error < 0)
                return give_up(&s); /* one that failed after its exec (a readiness check) too */
        /* Until COMMAND has ended for good, and every earlier generation
         * told to stop with it. */
        while ((s.state != LC_DONE || s.n_retirees > 0) && s.error == 0) {
                r = loop_dispatch_once(s.loop, -1);
                if (r < 0)
                        s.error = log_error_errno(r, "cannot wait for events: %m");
        }
        if (!s.told_stopping)
                notify_manager("STOPPING=1");
        if (s.error < 0)
                return give_up(&s);
        *ret = s.outcome;
        return 0;
}
