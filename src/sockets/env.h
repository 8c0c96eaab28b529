/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>
#include <sys/types.h>

#include "socket.h"

enum protocol_variable {
        PROTOCOL_NONE,
        PROTOCOL_LISTEN, /* LISTEN_FDS, LISTEN_PID, LISTEN_FDNAMES, LISTEN_PIDFDID */
        PROTOCOL_NOTIFY, /* NOTIFY_SOCKET */
};

/* Is the variable NAME (len bytes, not NUL-terminated) one of the
 * socket-activation or notification protocol? The one list of them. */
enum protocol_variable protocol_variable_of(const char *name, size_t len);

/* COMMAND's environment: prebind's own, less the variables of an outer
 * activation (LISTEN_*, NOTIFY_SOCKET), plus the -E variables, plus the
 * protocol's LISTEN_FDS, LISTEN_FDNAMES and LISTEN_PID. LISTEN_PID is only
 * known in the child: it is written into listen_pid, a slot of the
 * vector, by child_env_set_pid(). */
struct child_env {
        char **envp; /* NULL-terminated; entries owned below */
        size_t n;
        char **owned; /* the strings this struct allocated */
        size_t n_owned;
        char *listen_pid; /* "LISTEN_PID=" + room for the pid */
};

#define LISTEN_PID_MAX 32

/* setenv holds "NAME=VALUE" (already expanded) or "NAME" (copied from
 * environ if set there; the way to pass NOTIFY_SOCKET on deliberately).
 * Returns 0 or -ENOMEM. */
int child_env_build(char *const *environ_in, char *const *setenv, size_t n_setenv, const struct bound_socket *sockets,
                    size_t n, struct child_env *ret);
void child_env_set_pid(struct child_env *env, pid_t pid);
void child_env_done(struct child_env *env);
