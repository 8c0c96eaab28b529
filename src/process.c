/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "exitcode.h"
#include "process.h"

int exit_status_of(int wait_status) {
        if (WIFEXITED(wait_status))
                return WEXITSTATUS(wait_status);
        if (WIFSIGNALED(wait_status))
                return 128 + WTERMSIG(wait_status);
        return EXIT_PREBIND_FAILED;
}

int reap_one(pid_t *ret_pid, int *ret_status) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);

        if (pid < 0)
                return -errno;
        if (pid == 0)
                return 0;
        *ret_pid = pid;
        *ret_status = exit_status_of(status);
        return 1;
}

int signal_process(pid_t pid, bool group, int sig) {
        if (pid <= 0)
                return 0;
        if (kill(group ? -pid : pid, sig) < 0 && errno != ESRCH)
                return -errno;
        return 0;
}

bool process_descends_from(pid_t pid, pid_t root) {
        for (int depth = 0; depth < 64 && pid > 1; depth++) {
                char path[64], buf[512], *p;
                FILE *f;
                int ppid;

                if (pid == root)
                        return true;
                snprintf(path, sizeof path, "/proc/%d/stat", (int) pid);
                f = fopen(path, "re");
                if (!f)
                        return false;
                /* The name in parentheses may hold anything, ')' too. */
                p = fgets(buf, sizeof buf, f) ? strrchr(buf, ')') : NULL;
                fclose(f);
                /* NOLINTNEXTLINE(cert-err34-c): the kernel wrote this number */
                if (!p || sscanf(p, ") %*c %d", &ppid) != 1)
                        return false;
                pid = ppid;
        }
        return false;
}
