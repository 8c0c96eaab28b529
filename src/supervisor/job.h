/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "config.h"
#include "env.h"
#include "publish.h"
#include "socket.h"
#include "spawn.h"

struct ready;
struct netns_job;
struct guard;
struct intercept;
struct share;

/* How COMMAND (or the job) ended, as the modes saw it. main() alone turns
 * it into prebind's exit status (job_exit_status()). */
enum outcome_kind {
        OUTCOME_EXITED,      /* status: its exit code, or 128+N for signal N */
        OUTCOME_NOT_READY,   /* readiness timed out: 124 */
        OUTCOME_EXEC_FAILED, /* status: the errno of the failed exec: 126/127 */
};

struct outcome {
        enum outcome_kind kind;
        int status;
};

/* Everything prebind holds while it runs: the parsed config, made into
 * bound sockets, an expanded command line and environment, and what was
 * published. Built by job_setup(), released by job_done(). */
struct job {
        const struct config *config;
        struct bound_socket *sockets;
        size_t n_sockets;
        char **setenv; /* -E entries, templates expanded (+ NOTIFY_SOCKET) */
        size_t n_setenv;
        char **command;       /* COMMAND, templates expanded with --subst */
        struct child_env env; /* COMMAND's environment (not with --accept) */
        struct ready *readiness;
        struct netns_job *netns;     /* --netns; NULL without */
        struct guard *guard;         /* stops COMMAND if prebind is killed; NULL: none */
        struct bound_socket *passed; /* what COMMAND gets: the sockets less the intercepted */
        size_t n_passed;
        struct intercept *intercept; /* --intercept's hand-over (its claims: the readiness's); NULL: none */
        struct publication publication;
        bool published;
        int signal_fd;       /* the supervised modes' signalfd; -1 */
        struct share *share; /* --share: in the shared supervisor, its holders; NULL otherwise */
};

/* From a parsed config to a job ready to run: the parent-death signal,
 * the guard, the sockets (inherited, then bound), the templates,
 * readiness, the environment. Logs its errors; returns 0 or -errno. */
int job_setup(const struct config *config, struct job *ret);
void job_done(struct job *job);

/* Before a supervised mode (the supervisor, --accept) runs: every signal
 * blocked and read from job->signal_fd, log lines that never wait for
 * stderr's reader, and with --group or --subreaper a subreaper. The mode
 * itself is main()'s choice (modes depend on the job, never the
 * reverse). Logs; 0 or -errno. */
int job_prepare_supervision(struct job *job);

/* Publish the addresses (the first time; afterwards only prebind's
 * manager hears READY=1 again) and tell prebind's manager. child_pid is
 * COMMAND's (prebind's with --exec, 0 with --accept). Logs; 0 or -errno. */
int job_publish(struct job *job, pid_t child_pid);

/* The spawn plan for COMMAND with the job's sockets. */
struct spawn_plan job_spawn_plan(const struct job *job);

/* prebind's exit status for how a mode ended: the one place where
 * errors and outcomes become 124-127, COMMAND's status or 128+N. */
int job_exit_status(const struct config *config, int r, const struct outcome *outcome);
