/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"
#include "macro.h"
#include "parse.h"

/* The variables of the socket-activation and notification protocols:
 * those of an outer activation or manager are never passed on unchanged,
 * or a consumer would take sockets or a notify socket meant for prebind
 * (sd_listen_fds(3): a stale LISTEN_PIDFDID silently disables
 * activation). NOTIFY_SOCKET may be passed on deliberately (-E). */
static const char *const protocol_variables[] = {
        "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "LISTEN_PIDFDID", "NOTIFY_SOCKET",
};

enum protocol_variable protocol_variable_of(const char *name, size_t len) {
        /* Most of the environment is neither: one comparison each. */
        if (len == 0 || (name[0] != 'L' && name[0] != 'N'))
                return PROTOCOL_NONE;
        for (size_t i = 0; i < ELEMENTSOF(protocol_variables); i++)
                if (strlen(protocol_variables[i]) == len && strncmp(name, protocol_variables[i], len) == 0)
                        return strcmp(protocol_variables[i], "NOTIFY_SOCKET") == 0 ? PROTOCOL_NOTIFY : PROTOCOL_LISTEN;
        return PROTOCOL_NONE;
}

static size_t name_length(const char *entry) {
        const char *eq = strchr(entry, '=');
        return eq ? (size_t) (eq - entry) : strlen(entry);
}

static bool same_name(const char *a, const char *b) {
        size_t len = name_length(a);
        return len == name_length(b) && strncmp(a, b, len) == 0;
}

static bool overridden(const char *entry, char *const *setenv, size_t n_setenv) {
        for (size_t i = 0; i < n_setenv; i++)
                if (same_name(entry, setenv[i]))
                        return true;
        return false;
}

static const char *lookup(char *const *environ_in, const char *name) {
        for (char *const *e = environ_in; e && *e; e++)
                if (same_name(*e, name) && strchr(*e, '='))
                        return *e;
        return NULL;
}

static char *owned_string(struct child_env *env, char *s) {
        if (s)
                env->owned[env->n_owned++] = s;
        return s;
}

int child_env_build(char *const *environ_in, char *const *setenv, size_t n_setenv, const struct bound_socket *sockets,
                    size_t n, struct child_env *ret) {
        struct child_env env = { NULL, 0, NULL, 0, NULL };
        size_t n_environ = 0, names_len = 0;
        char *names, *p;

        for (char *const *e = environ_in; e && *e; e++)
                n_environ++;
        /* inherited + -E + LISTEN_FDS, LISTEN_FDNAMES, LISTEN_PID + NULL */
        env.envp = calloc(n_environ + n_setenv + 4, sizeof(char *));
        env.owned = calloc(3, sizeof(char *));
        if (!env.envp || !env.owned)
                goto oom;

        for (char *const *e = environ_in; e && *e; e++)
                if (protocol_variable_of(*e, name_length(*e)) == PROTOCOL_NONE && !overridden(*e, setenv, n_setenv))
                        env.envp[env.n++] = *e;

        for (size_t i = 0; i < n_setenv; i++) {
                const char *entry = strchr(setenv[i], '=') ? setenv[i] : lookup(environ_in, setenv[i]);
                bool later_again = false;

                /* The last -E of a name wins, as with env(1). */
                for (size_t j = i + 1; j < n_setenv; j++)
                        later_again = later_again || same_name(setenv[i], setenv[j]);
                if (entry && !later_again)
                        env.envp[env.n++] = (char *) entry;
        }

        /* Nothing at fd 3 (--inetd): no LISTEN_* at all. LISTEN_FDS=0 is
         * an error to sd_listen_fds(), not "none". */
        if (n > 0) {
                p = malloc(strlen("LISTEN_FDS=") + 21);
                if (!p)
                        goto oom;
                format_uint(stpcpy(p, "LISTEN_FDS="), n);
                env.envp[env.n++] = owned_string(&env, p);

                for (size_t i = 0; i < n; i++)
                        names_len += strlen(sockets[i].name) + 1;
                names = malloc(strlen("LISTEN_FDNAMES=") + names_len + 1);
                if (!names)
                        goto oom;
                p = stpcpy(names, "LISTEN_FDNAMES=");
                for (size_t i = 0; i < n; i++) {
                        if (i > 0)
                                *p++ = ':';
                        p = stpcpy(p, sockets[i].name);
                }
                env.envp[env.n++] = owned_string(&env, names);
        }

        env.listen_pid = owned_string(&env, calloc(1, LISTEN_PID_MAX));
        if (!env.listen_pid)
                goto oom;
        strcpy(env.listen_pid, "LISTEN_PID=");
        if (n > 0)
                env.envp[env.n++] = env.listen_pid;
        env.envp[env.n] = NULL;
        *ret = env;
        return 0;

oom:
        child_env_done(&env);
        return -ENOMEM;
}

void child_env_set_pid(struct child_env *env, pid_t pid) {
        /* In a child that shares prebind's memory, before its exec: no
         * printf (spawn.c). */
        format_uint(stpcpy(env->listen_pid, "LISTEN_PID="), (uint64_t) pid);
}

void child_env_done(struct child_env *env) {
        for (size_t i = 0; i < env->n_owned; i++)
                free(env->owned[i]);
        free(env->owned);
        free(env->envp);
        *env = (struct child_env) { NULL, 0, NULL, 0, NULL };
}
