/* SPDX-License-Identifier: MIT */
/* --intercept: every intercepted socket claimed by COMMAND, as the claim
 * source of intercept/ says (claim_source.h): the broker's claims, or
 * COMMAND's bind() calls through seccomp. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "ready_check.h"
#include "log.h"

struct claims_check {
        struct ready_check check;
        const struct claim_source_ops *ops;
        void *object;
};

#define CLAIMS_OF(c) ((struct claims_check *) (c))

/* After each wake-up that served claims (and after claims_hear()). */
static void claims_served(void *userdata) {
        struct ready_check *c = userdata;
        struct claims_check *cl = CLAIMS_OF(c);

        if (c->child > 0 && c->waiting && cl->ops->all_claimed(cl->object)) {
                log_debug("'%s' took every intercepted socket", c->command);
                ready_check_met(c, "every intercepted socket claimed");
        }
}

static int claims_attach(struct ready_check *c) {
        struct claims_check *cl = CLAIMS_OF(c);

        return cl->ops->attach(cl->object, c->loop, claims_served, c);
}

static void claims_detach(struct ready_check *c) {
        struct claims_check *cl = CLAIMS_OF(c);

        cl->ops->detach(cl->object);
}

/* A claim or a report sent just before COMMAND exited, too. */
static void claims_hear(struct ready_check *c) {
        struct claims_check *cl = CLAIMS_OF(c);

        if (cl->ops->dispatch(cl->object) >= 0)
                claims_served(c);
}

/* Only this COMMAND and its descendants may claim, and must again. */
static int claims_start(struct ready_check *c) {
        struct claims_check *cl = CLAIMS_OF(c);

        cl->ops->set_command(cl->object, c->child, c->command);
        return 0;
}

static void claims_stop(struct ready_check *c) {
}

static void claims_command_exited(struct ready_check *c, pid_t pid) {
        struct claims_check *cl = CLAIMS_OF(c);

        if (cl->ops->command_exited)
                cl->ops->command_exited(cl->object, pid);
}

/* COMMAND is reaped: nobody may claim a socket (its number is free for
 * any process now). */
static void claims_forget_command(struct ready_check *c) {
        struct claims_check *cl = CLAIMS_OF(c);

        if (cl->ops->forget_command)
                cl->ops->forget_command(cl->object);
}

static size_t claims_describe(const struct ready_check *c, char *buf, size_t size) {
        const struct claims_check *cl = CLAIMS_OF(c);
        char text[512];

        cl->ops->describe_unmet(cl->object, text, sizeof text);
        return (size_t) snprintf(buf, size, "%s", text);
}

static void claims_free(struct ready_check *c) {
        struct claims_check *cl = CLAIMS_OF(c);

        cl->ops->free(cl->object);
        free(cl);
}

static const struct ready_check_kind claims_kind = {
        .name = "claims",
        .start = claims_start,
        .stop = claims_stop,
        .describe = claims_describe,
        .free = claims_free,
        .attach = claims_attach,
        .detach = claims_detach,
        .hear = claims_hear,
        .command_exited = claims_command_exited,
        .forget_command = claims_forget_command,
};

int check_claims_new(const struct claim_source_ops *ops, void *object, struct ready_check **ret) {
        struct claims_check *cl = calloc(1, sizeof *cl);

        if (!cl) {
                ops->free(object);
                return -ENOMEM;
        }
        *cl = (struct claims_check) { .check.kind = &claims_kind, .ops = ops, .object = object };
        *ret = &cl->check;
        return 0;
}
