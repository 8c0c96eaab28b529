/* SPDX-License-Identifier: MIT */
#pragma once

/* libsystemd's sd-daemon, loaded only when prebind was actually started
 * by socket activation or under a manager (LISTEN_PID, NOTIFY_SOCKET).
 * Linking it directly maps it and seven more libraries (libgcrypt, liblzma,
 * libzstd…) at every start: 0.9 M of prebind's 1 M instructions for
 * "prebind -- true", and twice tini's memory (BENCHMARKS.md).
 * Without libsystemd (-Dlibsystemd=disabled, -Dstatic=true, or no
 * libsystemd0 installed), prebind speaks the protocols itself: sdproto.h. */

/* sd_listen_fds_with_names(1, names), or 0 when prebind's own LISTEN_PID
 * is not set (then nothing is loaded). */
int sd_listen_fds_with_names_lazy(char ***names);

/* sd_notify(0, message), or nothing when NOTIFY_SOCKET is not set. */
int sd_notify_lazy(const char *message);
