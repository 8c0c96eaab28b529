/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdint.h>

/* What --intercept hands over, whichever way (the broker, seccomp): for
 * a bind() of port with a socket of type, prebind's socket fd. */
struct intercept_target {
        uint16_t port;    /* the port COMMAND binds */
        int type;         /* SOCK_STREAM or SOCK_DGRAM: prebind's socket's */
        int fd;           /* prebind's socket; the mechanisms do not own it */
        const char *name; /* its name, for messages */
};

/* At most this many targets (src/intercept/match.h's list). */
#define INTERCEPT_TARGETS_MAX 32
