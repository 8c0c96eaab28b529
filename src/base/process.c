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
                char path[64], buf[1024], *p;
                size_t n;
                FILE *f;
                int ppid;

                if (pid == root)
                        return true;
                snprintf(path, sizeof path, "/proc/%d/stat", (int) pid);
                f = fopen(path, "re");
                if (!f)
                        return false;
                /* The name in parentheses is the process's own choice
                 * (prctl(PR_SET_NAME)) and may hold anything, ')' and
                 * '\n' too: read the whole record, not a line, and take
                 * the last ')'. A line would end inside a name such as
                 * "x) S 1234\n" and give any process the parent it
                 * names. Nothing after the name holds a ')'. */
                n = fread(buf, 1, sizeof buf - 1, f);
                fclose(f);
                buf[n] = '\0';
                p = strrchr(buf, ')');
                /* NOLINTNEXTLINE(cert-err34-c): the kernel wrote this number */
                if (!p || sscanf(p, ") %*c %d", &ppid) != 1)
                        return false;
                pid = ppid;
        }
        return false;
}
