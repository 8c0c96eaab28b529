/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "claim_source.h"
#include "target.h"

/* --intercept: COMMAND's own bind() of a port gets prebind's socket. The
 * one header of intercept/ that the supervisor includes: it asks for a
 * hand-over, and gets back what COMMAND's environment needs, the claims
 * readiness waits for, and what COMMAND's child does before exec. Which
 * mechanism does it (seccomp user notification, the LD_PRELOAD
 * interposer) stays in here; a new one is a file of intercept/, a value
 * of --intercept-via and a branch of intercept_setup(). */

/* --intercept-via: how COMMAND's bind() is caught. */
enum intercept_via {
        INTERCEPT_VIA_AUTO,    /* seccomp where the kernel allows it, else preload (forward with --netns) */
        INTERCEPT_VIA_SECCOMP, /* seccomp user notification (intercept/seccomp.c) */
        INTERCEPT_VIA_PRELOAD, /* the LD_PRELOAD interposer (intercept/preload.c, interpose.c) */
        INTERCEPT_VIA_FORWARD, /* --netns only: connections spliced to PORT inside (netns/forward.c) */
};

struct intercept_request {
        const struct intercept_target *targets; /* their fds must outlive the hand-over */
        size_t n_targets;                       /* at most INTERCEPT_TARGETS_MAX */
        enum intercept_via via;                 /* not FORWARD: that is no hand-over */
        /* --netns: where seccomp cannot hand over, auto lets the caller
         * forward (the interposer cannot reach prebind from another
         * network namespace). */
        bool can_forward;
        const char *command; /* COMMAND as given: the interposer checks the program */
        char *const *setenv; /* COMMAND's -E entries: LD_PRELOAD is added to the last */
        size_t n_setenv;
};

struct intercept;

/* Pick the mechanism for req and prepare it. Returns 0 and *ret; or 0,
 * *ret NULL and *ret_no_handover, why not in a phrase, when seccomp
 * cannot hand over and req->can_forward (the caller forwards instead);
 * or -errno, logged. */
int intercept_setup(const struct intercept_request *req, struct intercept **ret, const char **ret_no_handover);
void intercept_free(struct intercept *i);

/* Is a target intercepted twice, for the way it goes? Handed over, a
 * bind() gets one socket: the same port twice for one socket type could
 * not tell which. Forwarded (--netns, forwarded true), a socket goes to
 * one port inside (and two sockets, v4 and v6, may go to one port).
 * intercept_setup() checks its hand-over; the caller checks what it
 * forwards. Logs which: -EINVAL; or 0. */
int intercept_check_twice(const struct intercept_target *targets, size_t n, bool forwarded);

/* What COMMAND's environment gets (the interposer's LD_PRELOAD and the
 * broker's address and ports; none with seccomp): *ret_n entries, owned
 * by i. */
char *const *intercept_env(const struct intercept *i, size_t *ret_n);

/* The claims, as readiness's condition: the object passes to the caller
 * (ops->free frees it), once; it must outlive the children spawned with
 * i (intercept_child()). */
void intercept_claims(struct intercept *i, const struct claim_source_ops **ret_ops, void **ret_object);

/* In COMMAND's child, between fork and exec. First the fd it must keep
 * through the fd layout (-1: none; i may be NULL), then, after the
 * layout, the hand-over's part of the child with that fd, where it may
 * have moved: says why on stderr and returns -errno (the child then
 * exits), or 0. */
int intercept_child_fd(const struct intercept *i);
int intercept_child(const struct intercept *i, int fd);
