/* SPDX-License-Identifier: MIT */
#pragma once

/* What supervise.c (the state, its transitions and the loop), start.c
 * (starting a COMMAND: gate, trial exec, publishing), overlap.c (a new
 * generation beside the serving one) and retirees.c (generations told to
 * stop) share. */

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "job.h"
#include "lifecycle.h"
#include "loop.h"
#include "spawn.h"

struct watch;

/* A COMMAND that did not get ready in time is given this long to stop
 * after SIGTERM when --kill-after does not say. */
#define NOT_READY_GRACE_USEC (5 * USEC_PER_SEC)
/* A generation told to stop (replaced by a new one, or with its group
 * left behind) is given this long after SIGTERM when --kill-after does
 * not say, as systemd gives a unit TimeoutStopSec=: time to drain its
 * connections, and no generation that ignores SIGTERM holds prebind
 * for ever. */
#define RETIREE_GRACE_USEC (10 * USEC_PER_SEC)

/* A COMMAND of an earlier generation, told to stop (replaced by a new
 * one, a new one that failed, or the rest of an exited one's --group):
 * reaped when it exits, SIGKILLed after its grace, guarded until nothing
 * of it is left; its exit ends nothing. */
struct retiree {
        struct supervisor *s;
        pid_t pid; /* with --group, also its process group */
        int pidfd; /* -1: SIGCHLD alone, or reaped */
        struct loop_timer kill_timer;
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
        pid_t child;                     /* COMMAND; 0 when none runs (or waits at its gate) */
        pid_t group;                     /* --group: the last COMMAND's process group */
        int pidfd;                       /* <0 where pidfd_open() is missing: SIGCHLD alone */
        struct loop_timer kill_timer;    /* --kill-after, or the grace of one not ready */
        struct loop_timer restart_timer; /* --restart-delay */
        bool told_stopping;              /* STOPPING=1 went to prebind's manager */
        struct outcome outcome;          /* how the last COMMAND ended */
        int error;                       /* prebind must give up: -errno */
        uint64_t *restarts;              /* when the last restart_burst restarts happened */
        unsigned n_restarts;
        unsigned generation; /* COMMAND's, from 1 */
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

static inline const char *command_name(const struct supervisor *s) {
        return s->job->command[0];
}

/* --group: does the exited COMMAND's process group still have members?
 * (kill() with signal 0 checks, and says ESRCH for an empty group.) */
static inline bool group_left(const struct supervisor *s) {
        return s->config->group && s->group > 0 && kill(-s->group, 0) == 0;
}

/* supervise.c */
void on_event(struct supervisor *s, enum lc_event event);
void signal_command(struct supervisor *s, int sig);
int on_pidfd(struct loop *l, int fd, uint32_t revents, void *userdata);
/* Take *pidfd off the loop, close it, and set it to -1 (-1 is fine). */
void unwatch_pidfd(struct supervisor *s, int *pidfd);

/* start.c */
int publish(struct supervisor *s, pid_t pid);
void retire_group_left(struct supervisor *s);
int start_command(struct supervisor *s);
int open_gate(struct supervisor *s, int published);

/* overlap.c */
int start_next(struct supervisor *s);
void drop_next(struct supervisor *s);
void retire_previous(struct supervisor *s);
void previous_exited(struct supervisor *s, int status);

/* retirees.c */
uint64_t retiree_grace(const struct supervisor *s);
void retire(struct supervisor *s, pid_t pid, int pidfd, unsigned generation, uint64_t kill_usec, bool reaped);
bool retiree_reaped(struct supervisor *s, pid_t pid, int status);
void retirees_sweep(struct supervisor *s);
void signal_generations(struct supervisor *s, int sig);
void retirees_kill(struct supervisor *s);
void retirees_free(struct supervisor *s);
