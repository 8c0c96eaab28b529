/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include "accept.h"
#include "config.h"
#include "exec.h"
#include "exitcode.h"
#include "job.h"
#include "log.h"
#include "macro.h"
#include "share.h"
#include "supervise.h"

/* A closed 0, 1 or 2 would be reused by the first socket, which COMMAND
 * would then take for stdin or stdout: fill the holes with /dev/null. */
static int ensure_std_fds(void) {
        for (int fd = 0; fd <= 2; fd++) {
                if (fcntl(fd, F_GETFD) >= 0)
                        continue;
                int null = open("/dev/null", O_RDWR);
                if (null < 0)
                        return -1;
                if (null != fd) {
                        close(null);
                        return -1;
                }
        }
        return 0;
}

/* Run the job in the mode the config chose: --exec (in place), --accept,
 * or the supervisor (the default). Returns 0 and how COMMAND ended, or
 * -errno when prebind itself failed (logged). */
static int run_job(struct job *job, struct outcome *ret) {
        int r;

        if (job->config->exec)
                return exec_run(job, ret);
        r = job_prepare_supervision(job);
        if (r < 0)
                return r;
        return job->config->accept ? accept_run(job, ret) : supervise(job, ret);
}

/* In the detached supervisor of --share: the config the job runs with.
 * The holders publish, each in its own way; the supervisor is nobody's
 * child. */
static struct config shared_server_config(const struct config *config) {
        struct config c = *config;

        c.publish.print = false;
        c.publish.port_file = NULL;
        c.publish.port_fd = -1;
        c.die_with_parent = false;
        return c;
}

/* --share=NAME: attach to the server that runs under NAME, or start it
 * in a detached supervisor (share_enter() returns there too, to run the
 * job as always) and attach to it. */
static int run_shared(const struct config *config) {
        _cleanup_(share_freep) struct share *share = NULL;
        _cleanup_free_ char *description = NULL;
        struct config served;
        struct job job;
        struct outcome outcome = { OUTCOME_EXITED, 0 };
        int r, status;

        if (config->share.action != SHARE_ACTION_HOLD)
                return share_query(&config->share);
        if (config_describe(config, &description) < 0) {
                log_oom();
                return EXIT_PREBIND_FAILED;
        }
        r = share_enter(&config->share, description, &share);
        if (r < 0)
                return EXIT_PREBIND_FAILED;
        if (r == SHARE_ROLE_HOLDER)
                return share_hold(share, &config->publish);
        served = shared_server_config(config);
        r = job_setup(&served, &job);
        job.share = share;
        share_guard(share, job.guard);
        if (r >= 0)
                r = run_job(&job, &outcome);
        status = job_exit_status(&served, r, &outcome);
        job.share = NULL;
        job_done(&job);
        share_finish(share, status);
        return status;
}

/* 1. parse the command line; 2. bind, expand, prepare (job_setup);
 * 3. run COMMAND in the chosen mode; 4. clean up; 5. exit with COMMAND's
 * status, or 124-127 (job_exit_status(): the one mapping). */
int main(int argc, char *argv[]) {
        struct config config;
        struct job job;
        struct outcome outcome = { OUTCOME_EXITED, 0 };
        int r, status;

        /* First thing: a reader gone from stderr or stdout (a usage error
         * piped to a closed pager, --print to a reader that quit) must give
         * EPIPE and 125, never kill prebind with SIGPIPE (exit 141). Every
         * child gets the default back before exec (signals_reset()). */
        signal(SIGPIPE, SIG_IGN);
        if (ensure_std_fds() < 0)
                return EXIT_PREBIND_FAILED;
        r = config_parse_argv(argc, argv, &config);
        if (r <= 0)
                return r < 0 ? EXIT_PREBIND_FAILED : 0;
        if (config.share.name) {
                status = run_shared(&config);
                config_done(&config);
                return status;
        }
        r = job_setup(&config, &job);
        if (r >= 0)
                r = run_job(&job, &outcome);
        log_flush();
        status = job_exit_status(&config, r, &outcome);
        job_done(&job);
        config_done(&config);
        return status;
}
