/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "broker.h"
#include "claiming.h"
#include "intercept.h"
#include "log.h"
#include "macro.h"
#include "preload.h"
#include "process.h"
#include "seccomp.h"

struct intercept {
        /* The claims: the mechanism's object, the caller's once taken
         * (intercept_claims()). */
        const struct claim_source_ops *ops;
        void *object;
        bool claims_taken;
        struct intercept_seccomp *seccomp; /* the object, via seccomp: its child's part */
        char *env[3];
        size_t n_env;
};

void intercept_free(struct intercept *i) {
        if (!i)
                return;
        if (i->object && !i->claims_taken)
                i->ops->free(i->object);
        for (size_t k = 0; k < i->n_env; k++)
                free(i->env[k]);
        free(i);
}

static void intercept_freep(struct intercept **i) {
        intercept_free(*i);
}

char *const *intercept_env(const struct intercept *i, size_t *ret_n) {
        *ret_n = i->n_env;
        return i->env;
}

void intercept_claims(struct intercept *i, const struct claim_source_ops **ret_ops, void **ret_object) {
        i->claims_taken = true;
        *ret_ops = i->ops;
        *ret_object = i->object;
}

int intercept_child_fd(const struct intercept *i) {
        return i && i->seccomp ? intercept_seccomp_child_socket(i->seccomp) : -1;
}

int intercept_child(const struct intercept *i, int fd) {
        int r;

        if (!i || !i->seccomp)
                return 0;
        r = intercept_seccomp_child(i->seccomp, fd);
        if (r < 0)
                fprintf(stderr, "prebind: cannot install the seccomp filter (--intercept): %s\n",
                        intercept_seccomp_why_not(r));
        return r;
}

/* Through seccomp: the filter goes into each COMMAND's process before
 * exec (intercept_child()), its listener onto the loop (the claims). */
static int setup_seccomp(struct intercept *i, const struct intercept_request *req, unsigned flags) {
        int r = intercept_seccomp_new(req->targets, req->n_targets, flags, &i->seccomp);

        if (r < 0)
                return log_error_errno(r, "--intercept: cannot prepare the seccomp filter: %m");
        i->ops = &seccomp_claims_ops;
        i->object = i->seccomp;
        log_debug("--intercept: COMMAND's bind() calls come to prebind through seccomp user notification");
        return 0;
}

/* The broker that hands the sockets over, the interposer in COMMAND's
 * LD_PRELOAD, and a claim as a readiness condition. COMMAND is checked
 * first: one that no LD_PRELOAD reaches would leave its clients hanging
 * on a socket nobody accepts on, so it is not started at all. */
static int setup_preload(struct intercept *i, const struct intercept_request *req, const char *no_seccomp) {
        _cleanup_free_ char *path = NULL, *library = NULL;
        const char *reason = NULL, *existing;
        struct broker *broker;
        int r;

        /* Not found or not executable: left to exec, which reports 126/127. */
        if (command_resolve(req->command, environ, &path) >= 0 && preload_check_program(path, &reason) < 0) {
                if (no_seccomp)
                        log_error("--intercept: '%s' %s, and seccomp cannot catch its bind(): %s", path, reason,
                                  no_seccomp);
                else
                        log_error("--intercept: '%s' %s", path, reason);
                return -EPERM;
        }
        r = preload_library_find(&library);
        if (r < 0)
                return log_error_errno(r,
                                       "--intercept: cannot find libprebind-intercept.so beside '%s' "
                                       "(set PREBIND_INTERCEPT_LIBRARY)%s%s",
                                       program_invocation_name,
                                       no_seccomp ? ", and seccomp cannot catch its bind(): " : "",
                                       no_seccomp ? no_seccomp : "");
        /* Appended to the user's LD_PRELOAD: the last -E LD_PRELOAD=…, or
         * prebind's own. */
        existing = getenv("LD_PRELOAD");
        for (size_t k = 0; k < req->n_setenv; k++)
                if (strncmp(req->setenv[k], "LD_PRELOAD=", strlen("LD_PRELOAD=")) == 0)
                        existing = req->setenv[k] + strlen("LD_PRELOAD=");
        r = preload_env_entry(existing, library, &i->env[i->n_env]);
        if (r == -EINVAL) {
                log_error("--intercept: the library path '%s' holds a space or ':', which LD_PRELOAD cannot take",
                          library);
                return r;
        }
        if (r < 0)
                return log_oom();
        i->n_env++;

        r = broker_open(req->targets, req->n_targets, &broker);
        if (r < 0)
                return log_error_errno(r, "--intercept: cannot open the broker socket: %m");
        i->ops = &broker_claims_ops;
        i->object = broker;
        if (!(i->env[i->n_env++] = strdup(broker_env_address(broker))) ||
            !(i->env[i->n_env++] = strdup(broker_env_ports(broker))))
                return log_oom();
        log_debug("--intercept: COMMAND's bind() calls come to prebind through the LD_PRELOAD interposer");
        return 0;
}

int intercept_check_twice(const struct intercept_target *targets, size_t n, bool forwarded) {
        for (size_t i = 0; i < n; i++)
                for (size_t k = 0; k < i; k++) {
                        const struct intercept_target *a = &targets[k], *b = &targets[i];
                        char what[128], why[128];

                        if (forwarded ? a->fd != b->fd : (a->port != b->port || a->type != b->type))
                                continue;
                        if (forwarded) {
                                (void) snprintf(what, sizeof what, "socket '%s'", b->name);
                                (void) snprintf(why, sizeof why,
                                                "(ports %u and %u: --netns forwards a socket to one port)",
                                                (unsigned) a->port, (unsigned) b->port);
                        } else {
                                (void) snprintf(what, sizeof what, "port %u", (unsigned) b->port);
                                (void) snprintf(why, sizeof why, "for %s sockets",
                                                b->type == SOCK_DGRAM ? "udp" : "tcp");
                        }
                        log_error("--intercept: %s is intercepted twice %s", what, why);
                        return -EINVAL;
                }
        return 0;
}

/* seccomp where the kernel allows it (probed: another listener in the
 * tree, an old kernel, a policy), else the interposer, or with --netns
 * the caller's forwarder. */
int intercept_setup(const struct intercept_request *req, struct intercept **ret, const char **ret_no_handover) {
        _cleanup_(intercept_freep) struct intercept *i = NULL;
        const char *no_seccomp = NULL;
        unsigned flags = 0;
        bool seccomp = false;
        int r;

        if (req->via != INTERCEPT_VIA_PRELOAD) {
                r = intercept_seccomp_probe(&flags);
                seccomp = r >= 0;
                if (!seccomp) {
                        no_seccomp = intercept_seccomp_why_not(r);
                        if (req->via == INTERCEPT_VIA_SECCOMP) {
                                log_error("--intercept-via=seccomp: cannot catch COMMAND's bind(): %s", no_seccomp);
                                return r;
                        }
                        if (req->can_forward) {
                                *ret = NULL;
                                *ret_no_handover = no_seccomp;
                                return 0;
                        }
                        log_debug("--intercept: no seccomp (%s): trying the LD_PRELOAD interposer", no_seccomp);
                }
        }
        if ((r = intercept_check_twice(req->targets, req->n_targets, false)) < 0)
                return r;
        if (!(i = calloc(1, sizeof *i)))
                return log_oom();
        r = seccomp ? setup_seccomp(i, req, flags) : setup_preload(i, req, no_seccomp);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(i);
        return 0;
}
