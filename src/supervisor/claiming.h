/* SPDX-License-Identifier: MIT */
#pragma once

#include "ready.h"

/* intercept/'s two ways of handing COMMAND its sockets, as readiness's
 * claims check (struct readiness_claims_ops): the supervisor joins the
 * two subsystems, which do not know each other. */

/* The object: a struct broker (broker.h), --intercept via LD_PRELOAD. */
extern const struct readiness_claims_ops broker_claims_ops;

/* The object: a struct intercept_seccomp (seccomp.h), --intercept via
 * seccomp user notification. */
extern const struct readiness_claims_ops seccomp_claims_ops;
