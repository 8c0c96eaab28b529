/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* --ready-exec: one attempt is "/bin/sh -c COMMAND", ready when it exits
 * 0. The attempt runs in a process group of its own, with stdin on
 * /dev/null and stdout and stderr captured; prebind kills the whole group
 * when the attempt is over (its time is up, or it has exited and left
 * something behind) and when prebind dies (PR_SET_PDEATHSIG).
 *
 * prebind's child is a clone without an exit signal that forks the shell
 * and writes its status on a pipe: a supervisor's waitpid(-1, …) never
 * reaps such a child (waitpid(2): only __WCLONE or __WALL waits for it),
 * and no SIGCHLD comes. (It does not exec: execve(2) would make it an
 * ordinary child again, with SIGCHLD.) */

#define EXEC_OUTPUT_MAX 1024

struct exec_attempt {
        const char *command; /* templates expanded */
        char *const *envp;
        pid_t pid;                    /* 0 between attempts */
        int done_fd;                  /* readable when the attempt is over: its status, or EOF */
        int output_fd;                /* its stdout and stderr */
        char output[EXEC_OUTPUT_MAX]; /* the end of this attempt's output */
        size_t output_len;
        /* The last attempt that is over: */
        int status; /* exit status, 128+N for signal N; -1: none yet */
        bool timed_out;
        char last_output[EXEC_OUTPUT_MAX + 1];
};

void exec_attempt_init(struct exec_attempt *p, const char *command, char *const *envp);

/* Start an attempt. Returns 0, or -errno (it could not start). */
int exec_attempt_begin(struct exec_attempt *p);
/* output_fd is readable: keep what it says. */
void exec_attempt_read(struct exec_attempt *p);
/* done_fd is readable: the attempt is over. Returns 1 if it exited 0,
 * -EAGAIN if not. */
int exec_attempt_finish(struct exec_attempt *p);
/* Its time is up: kill it, and the attempt is over (not ready). */
void exec_attempt_kill(struct exec_attempt *p);
/* Keep the end of text in buf (len held, size max): pure, for the output. */
void keep_tail(char *buf, size_t *len, size_t size, const char *text, size_t n);
