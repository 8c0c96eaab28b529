/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clock.h"

/* The one strict number parser of prebind (as OpenBSD's strtonum):
 * decimal digits only, no sign, no spaces, value within [min, max].
 * Returns 0, -EINVAL or -ERANGE; *ret is untouched on failure. */
int parse_uint(const char *text, unsigned long min, unsigned long max, unsigned long *ret);

/* The len bytes at text, and a NUL, into buf of size bytes, for a piece
 * of a text parsed further on its own (a host in "HOST:PORT"). false, buf
 * untouched, if len is 0 or they do not fit. Here, out of the callers'
 * sight, the copy of a length they checked is a plain memcpy(), not
 * _FORTIFY_SOURCE's checked one: with every import bound at start,
 * importing that one pages in a part of libc of its own. */
bool text_piece(char *buf, size_t size, const char *text, size_t len);

/* The decimal digits at the start of text, as a number (ULONG_MAX if it
 * is larger; 0 if there are none), and where they end: for numbers inside
 * a text ("6.1.0-13-amd64"), not for input, which parse_uint() checks. */
unsigned long parse_leading_uint(const char *text, const char **ret_end);

/* The decimal digits of v at p, and a NUL: returns the end (the NUL).
 * p needs room for 21 bytes. Async-signal-safe, and no printf: a run
 * that formats only numbers does not page in libc's printf. */
char *format_uint(char *p, uint64_t v);

/* A duration as timeout(1) takes it: a decimal number with an optional
 * unit, "ms", "s" (the default), "m", "h" or "d": "10", "1.5", "500ms",
 * "2m". Returns 0 and microseconds (at most 30 days), or -EINVAL/-ERANGE. */
int parse_duration(const char *text, uint64_t *ret_usec);
