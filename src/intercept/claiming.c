/* SPDX-License-Identifier: MIT */
#include <errno.h>

#include "broker.h"
#include "claiming.h"
#include "log.h"
#include "seccomp.h"

static int broker_claims_attach(void *b, struct loop *loop, claim_source_served served, void *userdata) {
        return broker_attach(b, loop, served, userdata);
}

static void broker_claims_detach(void *b) {
        broker_detach(b);
}

static int broker_claims_dispatch(void *b) {
        broker_dispatch(b);
        return 0;
}

static void broker_claims_set_command(void *b, pid_t pid, const char *command) {
        broker_set_command(b, pid);
}

static void broker_claims_forget_command(void *b) {
        broker_forget_command(b);
}

static bool broker_claims_all_claimed(const void *b) {
        return broker_all_claimed(b);
}

static void broker_claims_describe_unmet(const void *b, char *buf, size_t size) {
        broker_describe_unmet(b, buf, size);
}

static void broker_claims_free(void *b) {
        broker_free(b);
}

const struct claim_source_ops broker_claims_ops = {
        .attach = broker_claims_attach,
        .detach = broker_claims_detach,
        .dispatch = broker_claims_dispatch,
        .set_command = broker_claims_set_command,
        .forget_command = broker_claims_forget_command,
        .all_claimed = broker_claims_all_claimed,
        .describe_unmet = broker_claims_describe_unmet,
        .free = broker_claims_free,
};

static int seccomp_claims_attach(void *s, struct loop *loop, claim_source_served served, void *userdata) {
        return intercept_seccomp_attach(s, loop, served, userdata);
}

static void seccomp_claims_detach(void *s) {
        intercept_seccomp_detach(s);
}

/* Answer COMMAND's bind() calls (the listener logs what fails). */
static int seccomp_claims_dispatch(void *s) {
        return intercept_seccomp_dispatch(s);
}

static void seccomp_claims_set_command(void *s, pid_t pid, const char *command) {
        int r = intercept_seccomp_set_command(s, pid);

        /* Its filter's listener came before it exec'd; without one the
         * child has said why and exited 125. */
        if (r < 0 && r != -ENOENT)
                log_error_errno(r, "cannot take the seccomp listener of '%s' (--intercept): %m", command);
}

static void seccomp_claims_forget_command(void *s) {
        intercept_seccomp_forget_command(s);
}

static void seccomp_claims_command_exited(void *s, pid_t pid) {
        intercept_seccomp_command_exited(s, pid);
}

static bool seccomp_claims_all_claimed(const void *s) {
        return intercept_seccomp_all_claimed(s);
}

static void seccomp_claims_describe_unmet(const void *s, char *buf, size_t size) {
        intercept_seccomp_describe_unmet(s, buf, size);
}

static void seccomp_claims_free(void *s) {
        intercept_seccomp_free(s);
}

const struct claim_source_ops seccomp_claims_ops = {
        .attach = seccomp_claims_attach,
        .detach = seccomp_claims_detach,
        .dispatch = seccomp_claims_dispatch,
        .set_command = seccomp_claims_set_command,
        .forget_command = seccomp_claims_forget_command,
        .command_exited = seccomp_claims_command_exited,
        .all_claimed = seccomp_claims_all_claimed,
        .describe_unmet = seccomp_claims_describe_unmet,
        .free = seccomp_claims_free,
};
