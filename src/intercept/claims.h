/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>

#include "intercept/match.h"

/* What both --intercept mechanisms (the broker of the interposer, and
 * seccomp) say when a port was not claimed in time: the ports, and the
 * last binds COMMAND made instead. One wording for both. */

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

/* "did not claim port 6379/tcp or 53/udp (it bound 0.0.0.0:6380/tcp
 * instead)" into buf, for the n unclaimed ports. Returns the length. */
size_t claims_describe(const struct claims_notes *notes, const struct intercept_port *unclaimed, size_t n, char *buf,
                       size_t size);

/* snprintf() at buf + len that never runs past the end: the new length,
 * at most size - 1. */
size_t claims_append(char *buf, size_t size, size_t len, const char *format, ...)
        __attribute__((format(printf, 4, 5)));

/* "tcp", "udp" or "other". */
const char *claims_type_name(int type);
