/* SPDX-License-Identifier: MIT */
#pragma once

#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

/* The two sd-daemon protocols, spoken by prebind itself: taking the
 * sockets it was passed (sd_listen_fds_with_names(3)) and sending one
 * notification to its manager (sd_notify(3)). The static build has no
 * libsystemd to load, and the dynamic build falls back to these when
 * libsystemd0 is not installed (src/sd.c). The rules are libsystemd's
 * (v252, Debian 12); the unit suite compares the two where it can. */

/* The first passed fd (SD_LISTEN_FDS_START). */
#define SDPROTO_LISTEN_FDS_START 3

/* LISTEN_FDS and LISTEN_PID as libsystemd 252 reads them (safe_atoi(),
 * parse_pid()), so that the static build and the dynamic one agree on
 * every value: blanks before the number, a sign, "0x" hex, a leading 0
 * as octal ("010" is 8), Python's "0b" and "0o". -ERANGE beyond an int
 * (a pid: beyond pid_t, or not positive), -EINVAL for anything else. */
int sdproto_parse_listen_fds(const char *s, int *ret);
int sdproto_parse_pid(const char *s, pid_t *ret);

/* How many fds LISTEN_PID and LISTEN_FDS (NULL when unset) pass to the
 * process self: n > 0; 0 when they are not for self (LISTEN_PID unset,
 * not a pid, garbage included, as src/sd.c always treated it, or
 * another's) or LISTEN_FDS is unset; -ERANGE when LISTEN_FDS is more
 * than an int; -EINVAL when it is no number or not in 1..INT_MAX-3. */
int sdproto_listen_fds_count(const char *listen_pid, const char *listen_fds, pid_t self);

/* LISTEN_FDNAMES (NULL when unset) for n fds: n names split at every ':'
 * (empty names kept: "a:" is "a" and ""), NULL-terminated, in
 * *ret_names; all "unknown" when unset. -EINVAL when the count is not n,
 * -ENOMEM. The names are not judged here, as libsystemd does not judge
 * them: the caller does (fdname_is_valid()). */
int sdproto_listen_fdnames_split(const char *listen_fdnames, int n, char ***ret_names);

/* sd_listen_fds_with_names(1, ret_names) from this process's environment:
 * the count, then each fd from 3 must be open (-EBADF otherwise) and is
 * made close-on-exec, then the names. LISTEN_PID, LISTEN_FDS and
 * LISTEN_FDNAMES are unset in every case. Returns n with *ret_names, 0
 * with *ret_names = NULL, or -errno. */
int sdproto_listen_fds(char ***ret_names);

/* The address NOTIFY_SOCKET names: "/path" (absolute), or "@name" for an
 * abstract socket (the '@' becomes the leading NUL). -EINVAL for anything
 * else: empty, relative, a lone "@" or "/", longer than sun_path. */
int sdproto_notify_address(const char *value, struct sockaddr_un *ret, socklen_t *ret_len);

/* Send message as one datagram to NOTIFY_SOCKET. Returns 1 when sent, 0
 * when NOTIFY_SOCKET is unset, -errno otherwise (-EINVAL: a bad address,
 * and the error of socket() or sendto(): -ECONNREFUSED, -ENOENT…). */
int sdproto_notify(const char *message);
