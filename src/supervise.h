/* SPDX-License-Identifier: MIT */
#pragma once

#include "config.h"

/* The whole job: bind, publish, run COMMAND (supervised, or in place with
 * --exec), clean up. Returns prebind's exit status (see prebind(1)). */
int prebind_run(const struct config *config);
