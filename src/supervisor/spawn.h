/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "env.h"
#include "socket.h"

struct guard;
struct intercept;

/* Where COMMAND finds its sockets. */
enum socket_passing {
        PASS_FROM_FD3 = 0,    /* the LISTEN_FDS protocol: 3, 4, … */
        PASS_ON_STDIN,        /* inetd "wait": the one socket as fd 0 */
        PASS_ON_STDIN_STDOUT, /* inetd "nowait": the connection as fds 0 and 1 */
};

/* Everything the child needs between fork() and exec(). */
struct spawn_plan {
        char **command;
        struct child_env *env;
        const struct bound_socket *sockets;
        size_t n_sockets;
        bool new_process_group; /* --group: COMMAND leads its own group */
        enum socket_passing passing;
        /* --ready-log: pipes for COMMAND's stdout and stderr (fds 1 and
         * 2); 0 leaves prebind's own. */
        int stdout_fd, stderr_fd;
        /* Every signal disposition is SIG_DFL already (the supervisor set
         * them): the child then only clears its mask. */
        bool dispositions_are_default;
        /* The kernel's parent-death signal for COMMAND (PR_SET_PDEATHSIG):
         * it does not outlive prebind. 0: none (--no-die-with-supervisor). */
        int death_signal;
        /* Try COMMAND's exec before the gate opens (trial_exec()): only
         * where the addresses must go out before COMMAND runs, and so
         * before its real exec can tell whether it runs (--print). Else
         * the gate opens at once and spawn_check() reports the real exec:
         * publishing after it is as safe, and costs no second exec. */
        bool trial;
        /* --netns: join this network namespace (and user namespace, if
         * >= 0) before anything else. */
        bool join_netns;
        int net_fd;
        int user_fd;
        /* --intercept: the hand-over's part of the child comes last,
         * after the fd layout (intercept_child()); NULL without. */
        const struct intercept *intercept;
        /* The guard (NULL: none): a child that execs at once (no gate)
         * tells it about itself before its exec. */
        const struct guard *guard;
};

/* A child forked by spawn_child(), waiting at its gate: the two pipes
 * that let it exec and report how the exec went. */
struct spawned {
        pid_t pid;
        int gate_fd;   /* write one byte to let the child exec */
        int error_fd;  /* first 4 bytes: the trial's errno (0: it ran); then EOF: exec succeeded, or errno */
        bool checked;  /* the trial's report was read (spawn_check()) */
        bool no_trial; /* the gate opened in spawn_check(): COMMAND ran if that said 0 */
        bool group;    /* it leads a process group of its own (--group) */
        /* Started with no gate (clone(CLONE_VM | CLONE_VFORK): spawn_child()
         * returned once it had exec'd or failed): how that went, 0 or
         * -errno, -ECHILD when it failed before its exec. */
        bool direct;
        int result;
};

/* Fork a child that resets its signals, lays out its fds, tries COMMAND's
 * exec (in a traced grandchild, stopped and killed before it runs a
 * single instruction) and waits on the gate before it execs: the parent
 * publishes in between, so nothing is published for a COMMAND that
 * cannot be run, the child's pid is known to the publication and COMMAND
 * cannot write to stdout before the addresses. Returns 0 or -errno. */
int spawn_child(const struct spawn_plan *plan, struct spawned *ret);

/* How the trial exec went: 0 when COMMAND can be run (or the trial could
 * not tell), -errno of the exec that failed (the child has then exited
 * 126/127: reap it), or -ECHILD when the child failed before its trial
 * (it said why; it exits 125). Before anything is published. Without a
 * trial (plan->trial false): opens the gate and reports the real exec. */
int spawn_check(struct spawned *s);

/* Let the child exec (open the gate), and wait for the outcome (the
 * trial's first, if spawn_check() was not called): returns 0
 * when COMMAND runs, or -errno of the failed exec (the child has then
 * exited: reap it). After spawn_check(), an exec fails only if COMMAND
 * changed in between (removed, made non-executable). */
int spawn_release(struct spawned *s);

/* Do not let it exec after all (publishing failed): closing the gate
 * unopened makes the child exit unexec'd; one that ran already (no
 * trial) is killed, with its group. It is reaped here. */
void spawn_abandon(struct spawned *s);

/* --accept: start a COMMAND for one connection, with no gate (nothing is
 * published per connection) and no exec report (the child says itself
 * why it could not run, and exits 126/127). path is COMMAND resolved by
 * command_resolve(). Signal dispositions must be the defaults already.
 * Returns its pid or -errno. */
pid_t spawn_connection(const struct spawn_plan *plan, const char *path);

/* --exec: would COMMAND's exec succeed? The trial of spawn_child(), run
 * from prebind itself before it publishes: 0 (it would, or the trial
 * cannot tell) or -errno. */
int spawn_trial(const struct spawn_plan *plan);

/* --exec: become COMMAND. First lay out the fds, signals and environment
 * in prebind itself (-errno: prebind's failure, such as running out of
 * fds), then exec, which returns only on failure (-errno: COMMAND's). */
int spawn_prepare_in_place(const struct spawn_plan *plan);
int spawn_exec_in_place(const struct spawn_plan *plan);

/* The exit status for a failed exec, as env(1): 127 not found, else 126. */
int exec_error_to_status(int err);
