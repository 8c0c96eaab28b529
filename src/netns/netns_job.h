/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loop.h"
#include "socket.h"

/* --netns for the supervisor: a new namespace for each start of COMMAND
 * (an orphan of the last one cannot keep its port), the forwarders of
 * --intercept on an event loop of their own, started once the
 * intercepted port accepts a connection inside.
 *
 * The namespace lives as long as anything is in it: COMMAND, its
 * descendants, the keeper. prebind drops the keeper when COMMAND exits;
 * with --restart the next COMMAND gets a new namespace, and the
 * published sockets stay: clients wait in the backlog in between. */
struct netns_job;

/* The namespace only: no forwarding until netns_job_forward(). */
int netns_job_new(const struct bound_socket *sockets, struct netns_job **ret);
void netns_job_free(struct netns_job *j);

/* --intercept-via=forward (or auto without seccomp): connections to
 * sockets[socket] are spliced to port inside the namespace, at most
 * max_connections at once per socket, each waiting wait_usec for the
 * server inside. Stream sockets only (logs what is not: -EINVAL), one
 * port per socket (the caller checks: forwarding could not tell which of
 * two ports a connection is for). */
struct netns_forward {
        size_t socket; /* index into the job's sockets */
        uint16_t port;
};
int netns_job_forward(struct netns_job *j, const struct netns_forward *forwards, size_t n, unsigned max_connections,
                      uint64_t wait_usec);

/* Forward on loop (each forwarder waits for netns_job_port_accepts()).
 * Detach before the loop is freed. */
int netns_job_attach(struct netns_job *j, struct loop *loop);
void netns_job_detach(struct netns_job *j);

/* The namespace a new COMMAND joins (netns_job_enter(), between fork and
 * exec): owned by the job, valid until the next netns_job_prepare() or
 * netns_job_stopped(). */
struct netns_join {
        int net_fd;
        int user_fd; /* -1 as root */
};

/* In COMMAND's child, before exec: join the namespace of a
 * netns_job_prepare() (its user namespace first, when there is one).
 * Async-signal-safe. 0 or -errno. */
int netns_job_enter(int net_fd, int user_fd);

/* Before a start: make the namespace, and say what COMMAND joins. Logs
 * why not: -errno. */
int netns_job_prepare(struct netns_job *j, struct netns_join *ret);
/* A socket made in the current namespace (e.g. COMMAND's notification
 * socket: abstract unix names are per network namespace). 0 or -errno. */
int netns_job_socket(const struct netns_job *j, int family, int type, int *ret_fd);
/* The intercepted ports, in the order of netns_job_forward() (at most
 * max into ret_ports); returns how many there are. Whether each accepts
 * inside is a readiness check (the supervisor connects through
 * netns_job_socket()). */
size_t netns_job_ports(const struct netns_job *j, uint16_t *ret_ports, size_t max);
/* Port k accepts inside, on family (AF_INET or AF_INET6): forward to it.
 * Logs its error; returns 0 or -errno. */
int netns_job_port_accepts(struct netns_job *j, size_t k, int family);
/* COMMAND has exited: stop accepting, drop the namespace. */
void netns_job_stopped(struct netns_job *j);
