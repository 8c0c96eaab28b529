/* SPDX-License-Identifier: MIT */
#pragma once

#include "job.h"

/* The default mode: run COMMAND as a child and supervise it until it has
 * ended for good (signals forwarded, children reaped, readiness awaited,
 * restarts, --kill-after). Returns 0 and how COMMAND ended, or -errno
 * when prebind had to give up (COMMAND is then killed). */
int supervise(struct job *job, struct outcome *ret);
