/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* --netns: a network namespace for COMMAND, held by a keeper.
 *
 * The keeper is a small child of prebind that creates the namespace (as
 * root: unshare(CLONE_NEWNET); otherwise unshare(CLONE_NEWUSER |
 * CLONE_NEWNET) with the caller's uid and gid mapped to themselves),
 * brings its loopback up, sends prebind the namespace fds and then makes
 * sockets in it on request (SCM_RIGHTS). Sockets keep the namespace they
 * were created in, so prebind can connect into the namespace without
 * entering it — which an unprivileged prebind could not do anyway:
 * setns() into a network namespace needs CAP_SYS_ADMIN in prebind's own
 * user namespace (setns(2)). COMMAND joins the namespace with
 * netns_enter() between fork and exec. The keeper exits when prebind
 * closes its end (netns_close()) or dies (PR_SET_PDEATHSIG). */
struct netns {
        pid_t pid;      /* the keeper; 0: none */
        int pidfd;      /* the keeper's pidfd, to reap it safely; <0 */
        int control_fd; /* SOCK_SEQPACKET to the keeper; -1 */
        int net_fd;     /* the namespace, for setns(); -1 */
        int user_fd;    /* its user namespace when unprivileged; -1 as root */
};

#define NETNS_INIT                                                                                                    \
        { .pid = 0, .pidfd = -1, .control_fd = -1, .net_fd = -1, .user_fd = -1 }

/* Where creating the namespace failed, for the message. */
enum netns_step {
        NETNS_STEP_NONE = 0,
        NETNS_STEP_UNSHARE_NET,  /* unshare(CLONE_NEWNET), as root */
        NETNS_STEP_UNSHARE_USER, /* unshare(CLONE_NEWUSER | CLONE_NEWNET) */
        NETNS_STEP_ID_MAP,       /* writing uid_map, setgroups, gid_map */
        NETNS_STEP_LOOPBACK,     /* bringing lo up */
        NETNS_STEP_REPORT,       /* the keeper died or said nothing */
};

/* Start a keeper. Returns 0, or -errno with *ret_step saying where it
 * failed (netns_explain() turns both into a reason). Nothing is left
 * behind on failure. */
int netns_open(struct netns *ret, enum netns_step *ret_step);

/* Stop the keeper (it exits when its control socket closes) and reap it;
 * the namespace lives on while COMMAND or its descendants are in it. */
void netns_close(struct netns *n);

/* A socket of family and type (SOCK_NONBLOCK and SOCK_CLOEXEC allowed)
 * made in the namespace, close-on-exec here. Returns 0 or -errno
 * (-ECONNRESET: the keeper is gone). */
int netns_socket(const struct netns *n, int family, int type, int *ret_fd);

/* In COMMAND's child, before exec: join the namespace (and its user
 * namespace first, when there is one). Async-signal-safe. 0 or -errno. */
int netns_enter(int net_fd, int user_fd);

/* One line that says why the namespace could not be made: the step, the
 * error, and what on this system explains it (unprivileged user
 * namespaces disabled by sysctl or AppArmor). sysctl_dir is "/proc/sys"
 * (tests pass a directory of their own). Writes into buf, returns buf. */
const char *netns_explain(enum netns_step step, int err, bool privileged, const char *sysctl_dir, char *buf,
                          size_t size);
