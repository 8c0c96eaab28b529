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

/* clone(CLONE_VM | CLONE_VFORK | flags): fn(arg) runs in a child on
 * prebind's memory while prebind waits in this call, until the child
 * execs or exits, as a vfork() child does. Like one, it runs on this
 * stack, below the frames in use: the pages it touches are those that
 * prebind's own calls touch, not a buffer reserved in a caller's frame
 * (below which the caller's calls would touch pages of their own). fn
 * must not return into this function: it execs or _exit()s. Returns the
 * child's pid or -errno. */
pid_t clone_vfork(int (*fn)(void *), void *arg, int flags);

/* Does a clone(CLONE_VM | CLONE_VFORK) child share prebind's memory? Not
 * under valgrind, which runs such a clone as a fork(): the children that
 * report through shared memory are then started by fork(). Known from the
 * first such clone (clone_vm_learned()), or else tried once. */
bool clone_vm_shares_memory(void);
void clone_vm_learned(bool shares);

/* Send sig to pid, or to its whole process group (--group: pid leads it).
 * ESRCH (already gone) is not an error. Never signals pid <= 0: kill(0)
 * would reach prebind's own group. Returns 0 or -errno. */
int signal_process(pid_t pid, bool group, int sig);

/* pidfd_open(2): a pidfd for whatever process has the number pid now
 * (close-on-exec, as every pidfd is), or -errno: -ESRCH when none has,
 * -ENOSYS where the kernel (Linux < 5.3) or valgrind (< 3.20) has no
 * pidfd_open(). glibc wraps it only since 2.36, musl not at all. */
int open_pidfd(pid_t pid);

/* The process at the other end of a unix socket, for messages that only
 * COMMAND (or a worker it started) may send: a socket claim, READY=1.
 *
 * Not a pid: the kernel reports the pid a process had when it
 * connected or sent, and once that process is reaped the number goes to
 * the next process forked. Another user who keeps a connection open from
 * a process that has exited, and wraps the pid counter until a worker of
 * COMMAND gets that number, would pass any check of the number. A pidfd
 * stays with its process: it is what is checked. */
struct peer {
        int pidfd;      /* -1: it was gone before it could be pinned */
        bool by_number; /* no pidfd_open() here (Linux < 5.3, valgrind < 3.20): pid is all there is */
        pid_t pid;      /* the number the kernel reported, for messages */
        uid_t uid;      /* the ids it reported (SO_PEERCRED, SCM_CREDENTIALS) */
        gid_t gid;
};

#define PEER_NONE ((struct peer) { .pidfd = -1 })

/* A peer from what the kernel reported with a connection or a message:
 * pidfd from SO_PEERPIDFD or SCM_PIDFD (Linux 6.5), taken over; or
 * -ENOPROTOOPT where the kernel has neither: then pidfd_open(pid) pins
 * whatever process has that number now, which is the sender unless the
 * number was reused since it connected or sent (prebind(1), OTHER LOCAL
 * USERS); any other negative value: the process was gone. Without
 * pidfd_open() the checks go by the number alone:
 * not safe against another user who wraps the pid counter. */
void peer_init(struct peer *ret, pid_t pid, uid_t uid, gid_t gid, int pidfd);
void peer_done(struct peer *p);

/* Has it exited (a zombie included), or was it gone from the start? */
bool peer_exited(const struct peer *p);

/* Is it, not yet reaped, root or one of root's descendants now, and are
 * the reported ids still among its own (real, effective or saved: what
 * the kernel would let it claim)? Walks the parent chain in /proc (at
 * most 64 steps), each process on it pinned by a pidfd as it is read.
 * root must be a child not yet reaped (COMMAND): its number is then its
 * own. */
bool peer_descends_from(const struct peer *p, pid_t root);

/* Find COMMAND along the PATH of its environment envp, as execvp() would,
 * once rather than per connection. Returns 0 and a new string, -ENOENT
 * (not found) or -EACCES (found, not executable). */
int command_resolve(const char *name, char *const *envp, char **ret);
