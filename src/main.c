/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <unistd.h>

#include "config.h"
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

int main(int argc, char *argv[]) {
        struct config config;
        int r, status;

        if (ensure_std_fds() < 0)
                return EXIT_PREBIND_FAILED;
        r = config_parse_argv(argc, argv, &config);
        if (r <= 0)
                return r < 0 ? EXIT_PREBIND_FAILED : 0;
        status = prebind_run(&config);
        config_done(&config);
        return status;
}
