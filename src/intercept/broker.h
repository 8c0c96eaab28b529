/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "loop.h"
#include "target.h"

/* The prebind side of --intercept: hands prebind's sockets to COMMAND's
 * interposer (src/intercept/) on request, and hears what else it bound.
 * See src/intercept/protocol.h for the wire format. */

struct broker;

/* A broker for n targets (at most INTERCEPT_PORTS_MAX), listening on a
 * private abstract unix socket with an unguessable name. Returns 0 or
 * -errno. The targets are copied; their fds must outlive the broker. */
int broker_open(const struct intercept_target *targets, size_t n, struct broker **ret);
void broker_free(struct broker *b);

/* The variables COMMAND needs: "PREBIND_BROKER=@…" and
 * "PREBIND_INTERCEPT=6379/tcp,…" (owned by the broker). */
const char *broker_env_address(const struct broker *b);
const char *broker_env_ports(const struct broker *b);

/* Called once the broker has served connections on the loop: a claim may
 * have been granted (broker_all_claimed()). */
typedef void (*broker_callback)(void *userdata);

/* Serve on l: the listening socket, each connection and the timer are
 * sources of l from now on, until broker_detach() (broker_free() detaches
 * too). Returns 0 or -errno. */
int broker_attach(struct broker *b, struct loop *l, broker_callback callback, void *userdata);
void broker_detach(struct broker *b);

/* A new COMMAND (a start or a restart): only it and its descendants may
 * claim, and every target must be claimed again. */
void broker_set_command(struct broker *b, pid_t pid);
/* COMMAND has been reaped: nobody may claim until the next one starts. */
void broker_forget_command(struct broker *b);

/* Serve what is ready now, without blocking and without the loop (before
 * COMMAND is reaped, as the loop may not have turned yet): claims
 * (answered with the socket or a refusal), reports. */
void broker_dispatch(struct broker *b);

/* Has every target been handed to COMMAND (or a descendant) since the
 * last broker_set_command()? */
bool broker_all_claimed(const struct broker *b);

/* Why not, in one phrase for "prebind: 'CMD' … within 90s": "did not
 * claim port 6379/tcp (it bound 0.0.0.0:6380/tcp instead)", or "(no
 * bind() of a port reached the interposer…)": only what was seen. Empty when all
 * are claimed. */
void broker_describe_unmet(const struct broker *b, char *buf, size_t size);
