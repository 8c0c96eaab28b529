/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

/* Processes prebind started or adopted: the few rules that the supervisor
 * and --accept share. */

/* The status a shell would report for a waitpid() status: the exit code,
 * or 128+N for a process killed by signal N. */
int exit_status_of(int wait_status);

/* Reap one child that has exited, without waiting: returns 1 with its pid
 * and exit_status_of() its status, 0 when none is left, or -errno (-ECHILD
 * when there are no children at all). One SIGCHLD may stand for several
 * exits, and as PID 1 or a subreaper orphans are ours to reap too: call it
 * until it returns 0. */
int reap_one(pid_t *ret_pid, int *ret_status);

/* Send sig to pid, or to its whole process group (--group: pid leads it).
 * ESRCH (already gone) is not an error. Never signals pid <= 0: kill(0)
 * would reach prebind's own group. Returns 0 or -errno. */
int signal_process(pid_t pid, bool group, int sig);

/* Is pid the process root, or one of its descendants now? Walks the
 * parent chain in /proc (at most 64 steps). For messages that only
 * COMMAND (or a worker it started) may send: READY=1, a socket claim. */
bool process_descends_from(pid_t pid, pid_t root);
