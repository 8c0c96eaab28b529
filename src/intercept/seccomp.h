/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "broker.h"

/* --intercept through seccomp user notification: COMMAND's
 * process installs a filter before exec that sends its bind() calls to
 * prebind; for an intercepted port prebind puts its own socket at the
 * server's fd number (SECCOMP_IOCTL_NOTIF_ADDFD + SECCOMP_ADDFD_FLAG_SETFD)
 * and answers 0; every other bind continues untouched. Any program, static
 * and Go included, with nothing on the data path. Linux >= 5.9.
 *
 * The façade: probe, new (before the first COMMAND), the child's half
 * (between fork and exec), then attached to the loop, with a new listener
 * for each COMMAND. Every seccomp, pidfd and /proc call stays in here. */

struct intercept_seccomp;

/* Does the kernel let COMMAND's bind() calls come to prebind? Where
 * prebind runs under no seccomp filter of its own and the kernel is 5.9
 * or later, yes without trying; else a child tries it. Returns 0 and the
 * filter flags to use, or -errno:
 * -EBUSY (another seccomp supervisor listens in this process tree),
 * -EINVAL/-ENOTTY (a kernel older than 5.9), -ENOSYS (no seccomp()
 * at all, or valgrind), -EACCES/-EPERM (a
 * policy refuses seccomp()), -EOPNOTSUPP (not built for this CPU). */
int intercept_seccomp_probe(unsigned *ret_flags);

/* The same, always tried in a child. */
int intercept_seccomp_probe_child(unsigned *ret_flags);

/* The filter flags for a kernel of that release (uname -r): 0 and the
 * flags for 5.9 or later, -EINVAL for an older or unreadable one. */
int intercept_seccomp_release_flags(const char *release, unsigned *ret_flags);

/* Why not, in a phrase, for intercept_seccomp_probe()'s error. */
const char *intercept_seccomp_why_not(int r);

/* For n targets (their fds must outlive it), with the probe's flags.
 * Returns 0 or -errno. */
int intercept_seccomp_new(const struct intercept_target *targets, size_t n, unsigned flags,
                          struct intercept_seccomp **ret);
void intercept_seccomp_free(struct intercept_seccomp *s);

/* The child's end of the socket the listener comes back on: the child
 * keeps it through its fd layout (it may be moved; pass the new number). */
int intercept_seccomp_child_socket(const struct intercept_seccomp *s);

/* In the child, after fork and before exec (async-signal-safe):
 * PR_SET_NO_NEW_PRIVS, the filter, and its listener sent to prebind over
 * sock. Returns 0 or -errno. */
int intercept_seccomp_child(const struct intercept_seccomp *s, int sock);

/* Called once the listener has served on the loop (an answer that failed
 * is logged here): a target may have been claimed
 * (intercept_seccomp_all_claimed()). As broker.h's broker_callback. */
typedef void (*intercept_seccomp_callback)(void *userdata);

/* Answer on l: the listener of each COMMAND is a source of l from now on,
 * until intercept_seccomp_detach() (intercept_seccomp_free() detaches
 * too). Returns 0 or -errno. */
int intercept_seccomp_attach(struct intercept_seccomp *s, struct loop *l, intercept_seccomp_callback callback,
                             void *userdata);
void intercept_seccomp_detach(struct intercept_seccomp *s);

/* A new COMMAND has exec'd: take its filter's listener, and every target
 * must be claimed again (by it: its claims are what
 * intercept_seccomp_all_claimed() asks about). The listeners of earlier
 * COMMANDs are answered too, each by its own claims and hand-overs, until
 * no process is left under their filter. Returns 0, -ENOENT when the
 * child sent none, or -ENOMEM. */
int intercept_seccomp_set_command(struct intercept_seccomp *s, pid_t pid);

/* COMMAND has been reaped: until the next one, binds of an intercepted
 * port are refused the socket (claims_refusal()), as the broker refuses
 * them: a leftover of the old COMMAND still runs under its filter. */
void intercept_seccomp_forget_command(struct intercept_seccomp *s);

/* The same for the COMMAND of any generation that ran as pid (one
 * replaced, or told to stop): its number may be the next process's. */
void intercept_seccomp_command_exited(struct intercept_seccomp *s, pid_t pid);

/* Answer what waits now, without blocking and without the loop (before
 * COMMAND is reaped). Returns 0 or -errno, logged here. */
int intercept_seccomp_dispatch(struct intercept_seccomp *s);

/* Has every target been claimed since intercept_seccomp_set_command()? */
bool intercept_seccomp_all_claimed(const struct intercept_seccomp *s);

/* As broker_describe_unmet(): "did not claim port 6379/tcp (it bound
 * 0.0.0.0:6380/tcp instead)". Empty when all are claimed. */
void intercept_seccomp_describe_unmet(const struct intercept_seccomp *s, char *buf, size_t size);

/* The pure parts, for the unit tests. */

/* The thread group of a /proc/TID/status text ("Tgid:\t123"). Returns 0,
 * or -EINVAL when there is no valid Tgid line. */
int intercept_seccomp_parse_tgid(const char *status, pid_t *ret);

/* The effective uid and gid (the second number of "Uid:" and "Gid:") of
 * the same text. Returns 0, or -EINVAL. */
int intercept_seccomp_parse_ids(const char *status, uid_t *ret_uid, gid_t *ret_gid);

/* The "flags:" (octal) of a /proc/PID/fdinfo/FD text. Returns 0, or
 * -EINVAL. */
int intercept_seccomp_parse_fdinfo_flags(const char *fdinfo, unsigned *ret);
