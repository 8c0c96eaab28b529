/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "loop.h"

/* --intercept: COMMAND claims its sockets, through one of intercept/'s
 * mechanisms (the broker of the LD_PRELOAD interposer, or the seccomp
 * listener), and readiness waits for every claim. The two are beside each
 * other (neither includes the other), so the calls between them are
 * declared here, below both: intercept/ fills them in
 * (intercept_claims()), readiness calls them (ready_add_claims()).
 * Each logs its own errors. */
typedef void (*claim_source_served)(void *userdata);
struct claim_source_ops {
        /* Put its sources on loop, and call served(userdata) after each
         * wake-up that served claims, until detach. Returns 0 or -errno. */
        int (*attach)(void *object, struct loop *loop, claim_source_served served, void *userdata);
        void (*detach)(void *object);
        /* Serve what waits now, without blocking (before COMMAND is
         * reaped: its last claims). Returns 0 or -errno. */
        int (*dispatch)(void *object);
        /* A new COMMAND (pid; command: its name, for messages): only it
         * and its descendants may claim, and every socket must be claimed
         * again. */
        void (*set_command)(void *object, pid_t pid, const char *command);
        /* COMMAND has been reaped: nobody may claim until the next one
         * starts. NULL: nothing to do. */
        void (*forget_command)(void *object);
        /* A COMMAND of any generation (pid: the current one, one replaced
         * or told to stop) has been reaped: nobody may claim for it any
         * more. NULL: nothing to do. */
        void (*command_exited)(void *object, pid_t pid);
        /* Has every socket been claimed since set_command()? */
        bool (*all_claimed)(const void *object);
        /* Why not, in one phrase ("did not claim port 6379/tcp …"). */
        void (*describe_unmet)(const void *object, char *buf, size_t size);
        void (*free)(void *object);
};
