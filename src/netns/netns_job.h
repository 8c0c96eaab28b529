/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "loop.h"
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

/* NULL in *ret without --netns. With forward, checks the --intercept
 * specs against the sockets (names, stream sockets only) and logs what is
 * wrong: -EINVAL; without (--intercept-via=seccomp hands the sockets
 * over), the namespace only. */
int netns_job_new(const struct config *c, const struct bound_socket *sockets, size_t n_sockets, bool forward,
                  struct netns_job **ret);
void netns_job_free(struct netns_job *j);

/* Is socket i passed to COMMAND? Intercepted ones are forwarded instead. */
bool netns_job_passes(const struct netns_job *j, size_t i);

/* Forward on loop; ready(userdata) is called when every intercepted port
 * of the running COMMAND accepts. Detach before the loop is freed. */
typedef void (*netns_job_ready_fn)(void *userdata);
int netns_job_attach(struct netns_job *j, struct loop *loop, netns_job_ready_fn ready, void *userdata);
void netns_job_detach(struct netns_job *j);

/* Before a start: make the namespace and tell plan to join it. Logs why
 * not: -errno. */
int netns_job_prepare(struct netns_job *j, struct spawn_plan *plan);
/* A socket made in the current namespace (e.g. COMMAND's notification
 * socket: abstract unix names are per network namespace). 0 or -errno. */
int netns_job_socket(const struct netns_job *j, int family, int type, int *ret_fd);
/* COMMAND runs: probe every intercepted port. */
int netns_job_started(struct netns_job *j);
/* COMMAND has exited: stop accepting, drop the namespace. */
void netns_job_stopped(struct netns_job *j);

/* Ports that do not accept yet; the first of them in *ret_port. */
size_t netns_job_waiting(const struct netns_job *j, unsigned *ret_port);
