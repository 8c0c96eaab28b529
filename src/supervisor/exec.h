/* SPDX-License-Identifier: MIT */
#pragma once

#include "job.h"

/* --exec: publish, then become COMMAND (same pid; nothing is cleaned up
 * after). Returns only on failure: -errno when prebind failed (logged),
 * or 0 with OUTCOME_EXEC_FAILED when COMMAND could not be run. */
int exec_run(struct job *job, struct outcome *ret);
