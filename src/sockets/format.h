/* SPDX-License-Identifier: MIT */
#pragma once

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#include "socket.h"

/* How the addresses are published (--format, --print=FORMAT). */
enum output_format {
        FORMAT_PORT,
        FORMAT_ADDR,
        FORMAT_URL,
        FORMAT_JSON,
        FORMAT_ENV,
        _FORMAT_MAX,
        _FORMAT_INVALID = -EINVAL,
};

enum output_format output_format_from_string(const char *s);
const char *output_format_to_string(enum output_format f);

/* What can be said of one socket: in the formats, in -E/--subst templates
 * ({port}, {web.url}) and in the env format's variable names. */
enum socket_field {
        FIELD_PORT, /* 41234; unix: the path or @name */
        FIELD_HOST, /* 127.0.0.1, ::1; unix: the path or @name */
        FIELD_ADDR, /* 127.0.0.1:41234, [::1]:41234, /path, @name */
        FIELD_URL,  /* http://127.0.0.1:41234, udp://…, unix:/path */
        FIELD_FD,   /* 3, 4, … as COMMAND sees it */
        FIELD_NAME, /* LISTEN_FDNAMES entry */
        _FIELD_MAX,
        _FIELD_INVALID = -EINVAL,
};

/* Room for the longest field: a URL ("unix:" and an address), or a name
 * of FDNAME_MAX characters. */
#define FIELD_STRING_MAX (ADDRESS_STRING_MAX + FDNAME_MAX + 16)

enum socket_field socket_field_from_string(const char *s, size_t len);

/* Write the field of sockets[index] (passed as fd 3+index) into buf, which
 * holds FIELD_STRING_MAX bytes. Returns buf. */
const char *socket_field_format(const struct bound_socket *sockets, size_t index, enum socket_field field, char *buf,
                                size_t size);

/* The length of the well-formed UTF-8 sequence that s starts with (1-4;
 * RFC 3629: no overlong form, no surrogate, nothing above U+10FFFF), or 0
 * when s starts with none (or with the NUL). Reads no further than the
 * first byte that does not fit. */
size_t utf8_sequence_length(const char *s);

/* s as a JSON string, quotes included, always valid UTF-8: '"', '\\' and
 * control characters escaped, well-formed UTF-8 written as it is, and
 * each byte that is not part of it (0x80-0xff) as \udcXX, the lone
 * surrogate that Python's surrogateescape maps back to that byte. */
void json_string(FILE *f, const char *s);

/* Where a shell reads a quoted value: a word of a command, or the value
 * of an assignment (NAME=value). */
enum shell_place {
        SHELL_WORD,
        SHELL_ASSIGNMENT,
};

/* Write value to f so that a POSIX shell reads it back as exactly those
 * bytes, in place: bare when every character is a letter, a digit or one
 * of @%+=:,./_- (and [] in an assignment), so that ports, addresses and
 * URLs stay as they are; otherwise in single quotes, each ' written as
 * '\''. The empty string is ''. */
void shell_quote(FILE *f, const char *value, enum shell_place place);

/* Everything published, in one of the --format formats, as a string that
 * ends with a newline. pid is prebind's, child_pid COMMAND's (the same
 * with --exec). Returns 0 or -ENOMEM; *ret is the caller's to free. */
int format_addresses(enum output_format format, const struct bound_socket *sockets, size_t n, pid_t pid,
                     pid_t child_pid, char **ret);
