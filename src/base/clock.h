/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdint.h>

/* Time in microseconds, as every duration of prebind is kept. */
#define USEC_PER_SEC 1000000ULL
#define USEC_PER_MSEC 1000ULL

/* CLOCK_MONOTONIC now, in microseconds. */
uint64_t now_usec(void);
