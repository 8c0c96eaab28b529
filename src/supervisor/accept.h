/* SPDX-License-Identifier: MIT */
#pragma once

#include "job.h"

/* --accept: one COMMAND per connection, as systemd's Accept=yes and
 * inetd's "nowait". The connection is fd 3 (LISTEN_FDS=1,
 * LISTEN_FDNAMES=connection), or stdin and stdout with --inetd, and
 * REMOTE_ADDR/REMOTE_PORT name the peer. At most --max-connections run at
 * once; beyond that, connections wait in the backlog. SIGTERM or SIGINT
 * stops accepting, passes the signal on to every running COMMAND and waits
 * for them. Publishes first. Returns 0 (outcome: status 0 after such a
 * stop, or COMMAND not found/runnable), or -errno. */
int accept_run(struct job *job, struct outcome *ret);
