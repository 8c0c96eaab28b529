/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <time.h>
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
#include "watch.h"

/* A COMMAND that did not get ready in time is given this long to stop
 * after SIGTERM when --kill-after does not say. */
#define NOT_READY_GRACE_USEC (5 * USEC_PER_SEC)
/* A generation told to stop (replaced by a new one, or with its group
 * left behind) is given this long after SIGTERM when --kill-after does
 * not say, as systemd gives a unit TimeoutStopSec=: time to drain its
 * connections, and no generation that ignores SIGTERM holds prebind
 * for ever. */
#define RETIREE_GRACE_USEC (10 * USEC_PER_SEC)

struct supervisor;

/* A COMMAND of an earlier generation, told to stop (replaced by a new
 * one, a new one that failed, or the rest of an exited one's --group):
 * reaped when it exits, SIGKILLed after its grace, guarded until nothing
 * of it is left; its exit ends nothing. */
struct retiree {
        struct supervisor *s;
        pid_t pid;         /* with --group, also its process group */
        int pidfd;         /* -1: SIGCHLD alone, or reaped */
        int kill_timer_fd; /* -1 unless armed */
        unsigned generation;
        bool reaped; /* pid is gone; with --group, members of its group may not be */
};

/* The supervisor: one state (enum lc_state), and what carrying out its
 * transitions needs. */
struct supervisor {
        struct job *job;
        const struct config *config;
        struct loop *loop;
        enum lc_state state;
        pid_t child;            /* COMMAND; 0 when none runs (or waits at its gate) */
        pid_t group;            /* --group: the last COMMAND's process group */
        int pidfd;              /* <0 where pidfd_open() is missing: SIGCHLD alone */
        int kill_timer_fd;      /* --kill-after; -1 until armed */
        int restart_timer_fd;   /* --restart-delay; -1 when no restart is due */
        bool told_stopping;     /* STOPPING=1 went to prebind's manager */
        struct outcome outcome; /* how the last COMMAND ended */
        int error;              /* prebind must give up: -errno */
        uint64_t *restarts;     /* when the last restart_burst restarts happened */
        unsigned n_restarts;
        unsigned generation; /* COMMAND's, from 1 (issue 24) */
        unsigned n_started;  /* COMMANDs started so far */
        pid_t previous;      /* overlapping: the COMMAND that serves while COMMAND (the new one) starts */
        int previous_pidfd;
        unsigned previous_generation;
        bool reload_queued; /* a reload request came during a reload */
        struct retiree **retirees;
        size_t n_retirees;
        struct watch *watch; /* --watch */
        struct spawned gate; /* the COMMAND that LC_SPAWNED's OPEN_GATE lets exec */
};

static void on_event(struct supervisor *s, enum lc_event event);

static const char *command_name(const struct supervisor *s) {
        return s->job->command[0];
}

static void signal_command(struct supervisor *s, int sig) {
        int r = signal_process(s->child, s->config->group, sig);

        if (r < 0)
                log_error_errno(r, "cannot send signal %d (%s) to %d: %m", sig, sigabbrev_np(sig) ?: "?",
                                (int) (s->config->group ? -s->child : s->child));
}

/* SIGTERM to a COMMAND that is being replaced (or failed to replace the
 * serving one, or exited and left its group): it may drain its
 * connections, within kill_usec; then SIGKILL. reaped: pid has been
 * reaped, its group is what is left. The guard watches it (since it
 * started) until nothing of it is left. */
static int on_retiree_kill_timer(struct loop *l, int fd, uint32_t revents, void *userdata);

/* A generation told to stop has --kill-after, or RETIREE_GRACE_USEC. */
static uint64_t retiree_grace(const struct supervisor *s) {
        return s->config->kill_after_usec ?: RETIREE_GRACE_USEC;
}

static void retire(struct supervisor *s, pid_t pid, int pidfd, unsigned generation, uint64_t kill_usec, bool reaped) {
        struct retiree *t = malloc(sizeof *t), **grown;
        int r;

        r = signal_process(pid, s->config->group, SIGTERM);
        /* Stopped members would not see it before SIGCONT. */
        if (r >= 0 && s->config->group)
                r = signal_process(pid, true, SIGCONT);
        if (r < 0)
                log_error_errno(r, "cannot stop generation %u (pid %d): %m", generation, (int) pid);
        grown = t ? realloc(s->retirees, (s->n_retirees + 1) * sizeof(struct retiree *)) : NULL;
        if (!grown) {
                /* Unlisted, it is still reaped (SIGCHLD), unkilled; the
                 * guard still stops it if prebind is killed. */
                log_oom();
                free(t);
                if (pidfd >= 0) {
                        loop_remove(s->loop, pidfd);
                        close(pidfd);
                }
                return;
        }
        *t = (struct retiree) {
                .s = s, .pid = pid, .pidfd = pidfd, .kill_timer_fd = -1, .generation = generation, .reaped = reaped
        };
        s->retirees = grown;
        s->retirees[s->n_retirees++] = t;
        if ((r = loop_timer_arm(s->loop, &t->kill_timer_fd, kill_usec, on_retiree_kill_timer, t)) < 0)
                log_error_errno(r, "cannot arm the kill timer: %m");
        log_debug("generation %u (pid %d) told to stop", generation, (int) pid);
}

static int on_retiree_kill_timer(struct loop *l, int fd, uint32_t revents, void *userdata) {
        struct retiree *t = userdata;

        if (!timer_expired(fd))
                return 0;
        log_info("generation %u (pid %d%s) still running after its grace, sending SIGKILL", t->generation,
                 (int) t->pid, t->s->config->group ? " and its process group" : "");
        (void) signal_process(t->pid, t->s->config->group, SIGKILL);
        loop_timer_disarm(l, &t->kill_timer_fd);
        return 0;
}

static void retiree_forget_pidfd(struct supervisor *s, struct retiree *t) {
        if (t->pidfd >= 0) {
                loop_remove(s->loop, t->pidfd);
                close(t->pidfd);
        }
        t->pidfd = -1;
}

static void retiree_free(struct supervisor *s, struct retiree *t) {
        loop_timer_disarm(s->loop, &t->kill_timer_fd);
        retiree_forget_pidfd(s, t);
        free(t);
}

/* Is pid a retiree? Then it is gone (retirees_sweep() forgets it, once
 * its group is gone too). */
static bool retiree_reaped(struct supervisor *s, pid_t pid, int status) {
        for (size_t i = 0; i < s->n_retirees; i++) {
                struct retiree *t = s->retirees[i];

                if (t->pid != pid || t->reaped)
                        continue;
                log_debug("generation %u (pid %d) ended, exit status %d", t->generation, (int) pid, status);
                readiness_command_exited(s->job->readiness, pid);
                retiree_forget_pidfd(s, t);
                t->reaped = true;
                return true;
        }
        return false;
}

/* Forget the retirees of which nothing is left: reaped, and with --group
 * no member of their group (prebind, their subreaper, reaps those). */
static void retirees_sweep(struct supervisor *s) {
        for (size_t i = 0; i < s->n_retirees;) {
                struct retiree *t = s->retirees[i];

                if (!t->reaped || (s->config->group && kill(-t->pid, 0) == 0)) {
                        i++;
                        continue;
                }
                guard_unwatch(s->job->guard, t->pid);
                retiree_free(s, t);
                s->retirees[i] = s->retirees[--s->n_retirees];
        }
}

/* A signal for every generation alive: COMMAND, the one serving beside
 * a new one, those told to stop. */
static void signal_generations(struct supervisor *s, int sig) {
        if (s->child > 0)
                signal_command(s, sig);
        (void) signal_process(s->previous, s->config->group, sig);
        for (size_t i = 0; i < s->n_retirees; i++)
                if (!s->retirees[i]->reaped || s->config->group)
                        (void) signal_process(s->retirees[i]->pid, s->config->group, sig);
}

static void arm_timer(struct supervisor *s, int *fd, uint64_t usec, loop_handler handler, const char *what) {
        int r = loop_timer_arm(s->loop, fd, usec, handler, s);

        if (r < 0)
                log_error_errno(r, "cannot arm the %s timer: %m", what);
}

static int on_kill_timer(struct loop *l, int fd, uint32_t revents, void *userdata) {
        struct supervisor *s = userdata;

        if (!timer_expired(fd))
                return 0;
        on_event(s, LC_KILL_TIMEOUT);
        return 0;
}

static int on_restart_timer(struct loop *l, int fd, uint32_t revents, void *userdata) {
        struct supervisor *s = userdata;

        if (!timer_expired(fd))
                return 0;
        loop_timer_disarm(s->loop, &s->restart_timer_fd);
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

/* --group: does the exited COMMAND's process group still have members?
 * (kill() with signal 0 checks, and says ESRCH for an empty group.) */
static bool group_left(const struct supervisor *s) {
        return s->config->group && s->group > 0 && kill(-s->group, 0) == 0;
}

static struct lc_facts facts_for(struct supervisor *s, enum lc_event event) {
        const struct config *c = s->config;
        bool exited = s->outcome.kind == OUTCOME_EXITED;
        struct lc_facts f = {
                .needs_ready = readiness_needed(s->job->readiness),
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

static int on_pidfd(struct loop *l, int fd, uint32_t revents, void *userdata);

static void forget_pidfd(struct supervisor *s) {
        if (s->pidfd >= 0)
                close(s->pidfd);
        s->pidfd = -1;
}

/* Ready: published the first time; after that READY=1 again to prebind's
 * manager (systemd's Type=notify-reload: RELOADING=1, then READY=1), with
 * the generation that serves. */
static int publish(struct supervisor *s, pid_t pid) {
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
                r = readiness_move_notify(s->job->readiness, fd);
        if (r < 0)
                return log_error_errno(r, "cannot make the notification socket in the namespace: %m");
        return 0;
}

/* The last COMMAND exited and left members of its --group, told to stop
 * and not waited for, as a new COMMAND follows (or the serving one goes
 * on): they are a retiree now, with its grace and the guard. Not the
 * group of the one that serves beside a new one. */
static void retire_group_left(struct supervisor *s) {
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
 * readiness conditions the addresses are published in between
 * (LC_SPAWNED's actions): before COMMAND runs, with its pid known. */
static int start_command(struct supervisor *s) {
        struct spawn_plan plan;
        int r;

        r = readiness_prepare_output(s->job->readiness);
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
static int open_gate(struct supervisor *s, int published) {
        bool needs_ready = readiness_needed(s->job->readiness);
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

        if (s->pidfd >= 0 && loop_add(s->loop, s->pidfd, EPOLLIN, on_pidfd, s) < 0) {
                close(s->pidfd);
                s->pidfd = -1;
        }
        if (needs_ready && (r = readiness_start(s->job->readiness, pid)) < 0)
                return r;
        readiness_set_command(s->job->readiness, pid, s->previous);
        /* --intercept: ready once every port accepts inside. */
        return s->job->netns ? netns_job_started(s->job->netns) : 0;
}

/* One line that names what was not met, then the last lines COMMAND
 * wrote (--ready-log), as testcontainers shows a container's log. */
static void log_not_ready(struct supervisor *s) {
        char unmet[2048];

        log_error("'%s' %s within %.1fs; stopping it", command_name(s),
                  readiness_describe_unmet(s->job->readiness, unmet, sizeof unmet),
                  (double) s->config->ready.timeout_usec / USEC_PER_SEC);
        readiness_log_details(s->job->readiness);
}

static void log_error_exited_unready(struct supervisor *s) {
        char unmet[2048];

        log_error("'%s' exited before it was ready, with status %d: %s", command_name(s), s->outcome.status,
                  readiness_describe_unmet(s->job->readiness, unmet, sizeof unmet));
        readiness_log_details(s->job->readiness);
}

/* --reload=overlap: the serving COMMAND becomes the previous one, and a
 * new one starts beside it on the same sockets. */
static int start_next(struct supervisor *s) {
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
static void drop_next(struct supervisor *s) {
        char status[96];
        unsigned failed = s->n_started;

        if (s->child > 0)
                retire(s, s->child, s->pidfd, s->generation, s->config->kill_after_usec ?: NOT_READY_GRACE_USEC,
                       false);
        else if (s->pidfd >= 0) {
                loop_remove(s->loop, s->pidfd);
                close(s->pidfd);
        }
        retire_group_left(s);
        s->child = s->previous;
        s->pidfd = s->previous_pidfd;
        s->generation = s->previous_generation;
        s->group = s->config->group ? s->child : 0;
        s->previous = 0;
        s->previous_pidfd = -1;
        readiness_set_command(s->job->readiness, s->child, 0);
        log_error("reload failed: generation %u keeps serving", s->generation);
        if (s->job->published) {
                snprintf(status, sizeof status, "READY=1\nSTATUS=generation %u serving (generation %u failed)",
                         s->generation, failed);
                notify_manager(status);
        }
}

/* The new COMMAND is ready: the previous one is told to stop. */
static void retire_previous(struct supervisor *s) {
        if (s->previous <= 0)
                return;
        retire(s, s->previous, s->previous_pidfd, s->previous_generation, retiree_grace(s), false);
        s->previous = 0;
        s->previous_pidfd = -1;
        readiness_set_command(s->job->readiness, s->child, 0);
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
                readiness_stop(s->job->readiness);
        if (actions & LC_ACT_PUBLISH && (published = publish(s, s->child)) < 0)
                s->error = published;
        if (actions & LC_ACT_TERMINATE)
                signal_command(s, SIGTERM);
        if (actions & LC_ACT_KILL) {
                log_info("'%s' still running after --kill-after, sending SIGKILL", command_name(s));
                signal_command(s, SIGKILL);
        }
        if (actions & LC_ACT_ARM_KILL && c->kill_after_usec && s->kill_timer_fd < 0)
                arm_timer(s, &s->kill_timer_fd, c->kill_after_usec, on_kill_timer, "kill");
        if (actions & LC_ACT_ARM_GRACE && s->kill_timer_fd < 0)
                arm_timer(s, &s->kill_timer_fd, c->kill_after_usec ?: NOT_READY_GRACE_USEC, on_kill_timer, "kill");
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
                arm_timer(s, &s->restart_timer_fd, c->restart_delay_usec, on_restart_timer, "restart");
        if (actions & LC_ACT_COUNT_RESTART)
                count_restart(s);
        if (actions & LC_ACT_START) {
                loop_timer_disarm(s->loop, &s->restart_timer_fd);
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
static void on_event(struct supervisor *s, enum lc_event event) {
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
        readiness_forget_child(s->job->readiness);
        readiness_command_exited(s->job->readiness, s->child);
        if (s->pidfd >= 0) {
                loop_remove(s->loop, s->pidfd);
                close(s->pidfd);
        }
        s->pidfd = -1;
        if (!group_left(s))
                guard_unwatch(s->job->guard, s->child);
        s->child = 0;
        if (s->job->netns)
                netns_job_stopped(s->job->netns);
        loop_timer_disarm(s->loop, &s->kill_timer_fd);
}

/* COMMAND exited with status (exit_status_of()). */
static void command_exited(struct supervisor *s, int status) {
        command_gone(s);
        s->outcome = (struct outcome) { OUTCOME_EXITED, status };
        log_debug("'%s' ended, exit status %d", command_name(s), status);
        on_event(s, LC_EXITED);
}

/* Overlapping: the serving COMMAND exited before the new one was ready.
 * Its status is not prebind's: the new one is COMMAND now. */
static void previous_exited(struct supervisor *s, int status) {
        readiness_command_exited(s->job->readiness, s->previous);
        if (s->previous_pidfd >= 0) {
                loop_remove(s->loop, s->previous_pidfd);
                close(s->previous_pidfd);
        }
        s->previous_pidfd = -1;
        /* Its --group's members, if any are left, stop as a retiree's. */
        if (s->config->group && kill(-s->previous, 0) == 0)
                retire(s, s->previous, -1, s->previous_generation, retiree_grace(s), true);
        else
                guard_unwatch(s->job->guard, s->previous);
        s->previous = 0;
        readiness_set_command(s->job->readiness, s->child, 0);
        log_info("generation %u exited with status %d during the reload; generation %u is the only one",
                 s->previous_generation, status, s->generation);
        on_event(s, LC_PREVIOUS_EXITED);
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
         * pidfd, and a reaped sender's pidfd has no number (issue 19). */
        readiness_hear(s->job->readiness);
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
}

static int on_pidfd(struct loop *l, int fd, uint32_t revents, void *userdata) {
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

static void on_readiness(enum readiness_event event, void *userdata) {
        struct supervisor *s = userdata;

        on_event(s, event == READINESS_MET ? LC_READY : LC_READY_TIMEOUT);
}

static void on_ports_ready(void *userdata) {
        struct supervisor *s = userdata;

        readiness_condition_met(s->job->readiness, READY_PORTS);
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
        readiness_detach(s->job->readiness);
        netns_job_detach(s->job->netns);
        loop_timer_disarm(s->loop, &s->kill_timer_fd);
        loop_timer_disarm(s->loop, &s->restart_timer_fd);
        if (s->pidfd >= 0)
                close(s->pidfd);
        if (s->previous_pidfd >= 0)
                close(s->previous_pidfd);
        for (size_t i = 0; i < s->n_retirees; i++)
                retiree_free(s, s->retirees[i]);
        free(s->retirees);
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
        for (size_t i = 0; i < s->n_retirees; i++) {
                (void) signal_process(s->retirees[i]->pid, s->config->group, SIGKILL);
                waitpid(s->retirees[i]->pid, NULL, 0);
        }
        return s->error;
}

int supervise(struct job *job, struct outcome *ret) {
        _cleanup_(supervisor_done) struct supervisor s = {
                .job = job,
                .config = job->config,
                .pidfd = -1,
                .kill_timer_fd = -1,
                .restart_timer_fd = -1,
                .previous_pidfd = -1,
        };
        int r;

        s.restarts = calloc(s.config->restart_burst ?: 1, sizeof(uint64_t));
        if (!s.restarts)
                return log_oom();
        r = loop_new(&s.loop);
        if (r < 0)
                return log_error_errno(r, "cannot create the event loop: %m");
        if ((r = loop_add(s.loop, job->signal_fd, EPOLLIN, on_signalfd, &s)) < 0 ||
            (r = readiness_attach(job->readiness, s.loop, on_readiness, &s)) < 0)
                return log_error_errno(r, "cannot watch the event sources: %m");
        if (job->netns && (r = netns_job_attach(job->netns, s.loop, on_ports_ready, &s)) < 0)
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
                return give_up(&s); /* one that failed after its exec (readiness, --netns's probes) too */
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
