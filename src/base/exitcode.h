/* SPDX-License-Identifier: MIT */
#pragma once

/* prebind's own exit statuses, as env(1) and timeout(1) (prebind(1),
 * EXIT STATUS). Every other status is COMMAND's, or 128+N for a COMMAND
 * killed by signal N. */
#define EXIT_TIMEDOUT 124       /* not ready in time */
#define EXIT_PREBIND_FAILED 125 /* usage, bind, publish… */
#define EXIT_CANNOT_INVOKE 126  /* COMMAND found, but could not be run */
#define EXIT_ENOENT 127         /* COMMAND not found */
