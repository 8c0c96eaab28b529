/* SPDX-License-Identifier: MIT */
#pragma once

/* What the interposer (libprebind-intercept.so, in COMMAND and its
 * descendants) and prebind's broker (src/broker.c) say to each other.
 *
 * prebind puts two variables in COMMAND's environment:
 *   PREBIND_BROKER=@prebind/broker/<pid>/<nonce>   an abstract AF_UNIX
 *       SOCK_SEQPACKET socket; one connection per request
 *   PREBIND_INTERCEPT=6379/tcp,53/udp              the ports to intercept
 * Without PREBIND_BROKER the interposer does nothing at all.
 *
 * A bind() of an intercepted port sends a CLAIM and waits for the reply:
 * error 0 and the socket as SCM_RIGHTS, or an errno and no fd. Every other
 * bind of a non-zero port, or of a unix socket, is a REPORT (no reply), so
 * that prebind can say what COMMAND bound instead. A DECOY report tells
 * prebind that a second bind of an intercepted port was bound to a
 * private loopback port of its own (see intercept_decoy_address()). */

#include <stdint.h>

#define INTERCEPT_ENV_BROKER "PREBIND_BROKER"
#define INTERCEPT_ENV_PORTS "PREBIND_INTERCEPT"
#define INTERCEPT_PROTOCOL_VERSION 1

enum intercept_kind {
        INTERCEPT_CLAIM = 1,
        INTERCEPT_REPORT = 2,
        INTERCEPT_DECOY = 3,
};

/* The address as text: "0.0.0.0", "::1", "/run/x.sock", "@name". */
#define INTERCEPT_ADDRESS_MAX 112

struct intercept_request {
        uint32_t version;
        uint32_t kind;                       /* enum intercept_kind */
        int32_t family;                      /* AF_INET, AF_INET6, AF_UNIX */
        int32_t type;                        /* SOCK_STREAM, SOCK_DGRAM… */
        uint32_t port;                       /* 0 for unix sockets */
        char address[INTERCEPT_ADDRESS_MAX]; /* NUL-terminated, may be cut */
};

struct intercept_reply {
        int32_t error; /* 0, or the positive errno of a refusal */
        uint32_t port; /* the handed socket's own port, to check */
};
