/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "broker.h"
#include "intercept/match.h"
#include "process.h"

/* What both --intercept mechanisms (the broker of the interposer, and
 * seccomp) keep alike and say alike when a port was not claimed in time:
 * which targets COMMAND claimed, and the last binds it made instead. One
 * wording for both. */

#define CLAIMS_NOTES_MAX 8

struct claims_note {
        int family;
        int type;
        unsigned port;
        char address[112]; /* intercept_address_text() */
};

/* The last CLAIMS_NOTES_MAX binds of a COMMAND that got nothing of
 * prebind's; n counts them all. Zeroed: empty. */
struct claims_notes {
        struct claims_note ring[CLAIMS_NOTES_MAX];
        size_t n;
};

void claims_note(struct claims_notes *notes, int family, int type, unsigned port, const char *address);

/* The targets' ports, in the mechanism's order (target i is port[i]),
 * which of them COMMAND has claimed, and what it bound instead, since it
 * started. */
struct claims {
        struct intercept_port port[INTERCEPT_PORTS_MAX];
        bool claimed[INTERCEPT_PORTS_MAX];
        size_t n;
        struct claims_notes notes;
        unsigned refused; /* claims refused (claims_refusal()) */
        pid_t refused_pid;
        const char *refused_why; /* the last refusal's reason */
};

/* The ports of targets (n <= INTERCEPT_PORTS_MAX), none claimed. */
void claims_init(struct claims *c, const struct intercept_target *targets, size_t n);

/* Why the process peer may not have a socket of prebind's, or NULL: it
 * must be alive, and COMMAND (command; 0 once reaped, as during
 * --restart's delay) or one of its descendants now. The one
 * rule of both mechanisms: the broker asks it of whoever connected, the
 * seccomp listener of whoever called bind(). A detached leftover of an
 * exited COMMAND would otherwise serve the published port beside the
 * next one. */
const char *claims_refusal(pid_t command, const struct peer *peer);

/* A claim of port refused to pid, for why: counted for
 * claims_describe(), and logged (rate-limited: anyone may ask the
 * broker). */
void claims_refuse(struct claims *c, unsigned port, pid_t pid, const char *why);

/* A new COMMAND: nothing claimed, nothing noted, nothing refused. */
void claims_restart(struct claims *c);

bool claims_all_claimed(const struct claims *c);

/* "did not claim port 6379/tcp or 53/udp (it bound 0.0.0.0:6380/tcp
 * instead)" into buf, for the targets not claimed, and the refusals ("(2
 * claims refused to pid 12, which …)"): "" when every one is claimed.
 * Returns the length. */
size_t claims_describe(const struct claims *c, char *buf, size_t size);

/* snprintf() at buf + len that never runs past the end: the new length,
 * at most size - 1. */
size_t claims_append(char *buf, size_t size, size_t len, const char *format, ...)
        __attribute__((format(printf, 4, 5)));

/* "tcp", "udp" or "other". */
const char *claims_type_name(int type);
