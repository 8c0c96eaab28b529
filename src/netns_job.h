/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "notify.h"
#include "socket.h"
#include "spawn.h"

/* --netns for the supervisor: a new namespace for each start of COMMAND
 * (an orphan of the last one cannot keep its port), the forwarders of
 * --intercept on an event loop of their own, and the readiness of the
 * intercepted ports ("the port accepts a connection inside").
 *
 * The namespace lives as long as anything is in it: COMMAND, its
 * descendants, the keeper. prebind drops the keeper when COMMAND exits;
 * with --restart the next COMMAND gets a new namespace, and the
 * published sockets stay: clients wait in the backlog in between. */
struct netns_job;

/* NULL in *ret without --netns. Checks the --intercept specs against the
 * sockets (names, stream sockets only) and logs what is wrong: -EINVAL. */
int netns_job_new(const struct config *c, const struct bound_socket *sockets, size_t n_sockets,
                  struct netns_job **ret);
void netns_job_free(struct netns_job *j);

/* Is socket i passed to COMMAND? Intercepted ones are forwarded instead. */
bool netns_job_passes(const struct netns_job *j, size_t i);

/* Before a start: make the namespace and tell plan to join it; move the
 * notify socket (may be NULL) into it. Logs why not: -errno. */
int netns_job_prepare(struct netns_job *j, struct spawn_plan *plan, struct notify_socket *notify);
/* COMMAND runs: probe every intercepted port. */
int netns_job_started(struct netns_job *j);
/* COMMAND has exited: stop accepting, drop the namespace. */
void netns_job_stopped(struct netns_job *j);

/* Ports that do not accept yet; the first of them in *ret_port. */
size_t netns_job_waiting(const struct netns_job *j, unsigned *ret_port);

/* The loop's fd, to poll; and its dispatch: returns 1 when the last port
 * became ready in this call, 0, or -errno (logged). */
int netns_job_fd(const struct netns_job *j);
int netns_job_dispatch(struct netns_job *j);
