/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include "config.h"
#include "exitcode.h"
#include "job.h"
#include "log.h"

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
        r = job_setup(&config, &job);
        if (r >= 0)
                r = job_run(&job, &outcome);
        log_flush();
        status = job_exit_status(&config, r, &outcome);
        job_done(&job);
        config_done(&config);
        return status;
}
