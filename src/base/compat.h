/* SPDX-License-Identifier: MIT */
#pragma once

/* What glibc (or the kernel headers) provide and musl does not, so that
 * the same sources build the static prebind (-Dstatic=true with musl-gcc,
 * whose include path has no <linux/…> headers). meson.build defines
 * HAVE_<FUNCTION> for what the C library has. */

#include <signal.h>
#include <stddef.h>
#include <string.h>

/* <linux/close_range.h>, Linux 5.11. */
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/* <asm-generic/socket.h> and <linux/socket.h>, Linux 6.5 (glibc 2.39):
 * the peer of a unix socket as a pidfd. Older kernels answer
 * ENOPROTOOPT, or send no SCM_PIDFD. */
#ifndef SO_PASSPIDFD
#define SO_PASSPIDFD 76
#endif
#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif
#ifndef SCM_PIDFD
#define SCM_PIDFD 0x04
#endif

/* glibc 2.32: "TERM" for SIGTERM, NULL for a number that names no signal. */
const char *prebind_sigabbrev(int sig);
#ifndef HAVE_SIGABBREV_NP
#define sigabbrev_np prebind_sigabbrev
#endif

/* glibc's strerror() texts, whatever the C library: prebind's messages
 * are the same in the static (musl) build, whose own texts differ ("Not a
 * socket" for "Socket operation on non-socket"), and the same tests hold.
 * Returns "Unknown error N" (in a static buffer) for an unknown number. */
const char *prebind_strerror(int err);

/* format with every "%m" replaced by prebind_strerror(err), in buf; or
 * format itself when it has no "%m" or buf is too small. */
const char *prebind_expand_errno(const char *format, int err, char *buf, size_t size);

#ifndef __GLIBC__
#define strerror prebind_strerror
#define PREBIND_EXPAND_ERRNO 1
#endif

/* sigaddset(), for every signal a glibc prebind blocks and forwards: all
 * but 32 and 33, which glibc keeps for itself. musl keeps 34 as well, but
 * 34 is glibc's SIGRTMIN, the first real-time signal of a glibc server
 * (and Python's signal.SIGRTMIN): unblocked, it would kill prebind. A
 * single-threaded prebind never needs musl's use of it (__synccall). */
int prebind_sigaddset(sigset_t *set, int sig);
