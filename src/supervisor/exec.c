/* SPDX-License-Identifier: MIT */
#include <unistd.h>

#include "exec.h"
#include "log.h"
#include "spawn.h"

static int cannot_run(struct job *job, int r, struct outcome *ret) {
        log_error_errno(r, "cannot run '%s': %m", job->command[0]);
        *ret = (struct outcome) { OUTCOME_EXEC_FAILED, -r };
        return 0;
}

/* --exec: publish, then become COMMAND. Returns only on failure. */
int exec_run(struct job *job, struct outcome *ret) {
        struct spawn_plan plan = job_spawn_plan(job);
        int r;

        /* Nothing is published for a COMMAND that cannot be run. */
        r = spawn_trial(&plan);
        if (r < 0)
                return cannot_run(job, r, ret);

        /* SIGPIPE is ignored since main(): a reader gone from stdout gives
         * EPIPE and 125; COMMAND gets SIGPIPE back by the reset in
         * spawn_exec_in_place(). */
        /* The sockets listen: as far as a manager is concerned, the service
         * is ready (connections queue until COMMAND accepts). */
        r = job_publish(job, getpid());
        if (r < 0)
                return r;
        /* Laying out the fds can fail (out of fds): that is prebind's
         * failure (125), not COMMAND's (126/127). */
        r = spawn_prepare_in_place(&plan);
        if (r < 0)
                return log_error_errno(r, "cannot pass the sockets: %m");
        return cannot_run(job, spawn_exec_in_place(&plan), ret);
}
