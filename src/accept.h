/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>

#include "config.h"
#include "socket.h"

/* --accept: one COMMAND per connection, as systemd's Accept=yes and
 * inetd's "nowait". The connection is fd 3 (LISTEN_FDS=1,
 * LISTEN_FDNAMES=connection), or stdin and stdout with --inetd, and
 * REMOTE_ADDR/REMOTE_PORT name the peer. At most --max-connections run at
 * once; beyond that, connections wait in the backlog. SIGTERM or SIGINT
 * stops accepting, passes the signal on to every running COMMAND and waits
 * for them. signal_fd receives every blocked signal. Returns the exit
 * status: 0 after such a stop. */
int accept_loop(const struct config *config, const struct bound_socket *sockets, size_t n_sockets,
                char **command, char *const *setenv, size_t n_setenv, int signal_fd);
