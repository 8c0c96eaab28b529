/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdint.h>

#include "clock.h"

/* The one strict number parser of prebind (as OpenBSD's strtonum):
 * decimal digits only, no sign, no spaces, value within [min, max].
 * Returns 0, -EINVAL or -ERANGE; *ret is untouched on failure. */
int parse_uint(const char *text, unsigned long min, unsigned long max, unsigned long *ret);

/* The decimal digits of v at p, and a NUL: returns the end (the NUL).
 * p needs room for 21 bytes. Async-signal-safe, and no printf: a run
 * that formats only numbers does not page in libc's printf. */
char *format_uint(char *p, uint64_t v);

/* A duration as timeout(1) takes it: a decimal number with an optional
 * unit, "ms", "s" (the default), "m", "h" or "d": "10", "1.5", "500ms",
 * "2m". Returns 0 and microseconds (at most 30 days), or -EINVAL/-ERANGE. */
int parse_duration(const char *text, uint64_t *ret_usec);
