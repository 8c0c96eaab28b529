/* SPDX-License-Identifier: MIT */
#pragma once

#include "claim_source.h"

/* intercept/'s two ways of handing COMMAND its sockets, as a claim
 * source for readiness (claim_source.h): intercept_claims() hands the
 * one in use on. */

/* The object: a struct broker (broker.h), --intercept via LD_PRELOAD. */
extern const struct claim_source_ops broker_claims_ops;

/* The object: a struct intercept_seccomp (seccomp.h), --intercept via
 * seccomp user notification. */
extern const struct claim_source_ops seccomp_claims_ops;
