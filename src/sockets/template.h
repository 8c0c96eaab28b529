/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>

#include "socket.h"

/* How a value is written where its template was. */
enum template_quoting {
        TEMPLATE_VERBATIM, /* as it is: -E values, --subst arguments */
        TEMPLATE_SHELL,    /* shell_quote()d as a word: --ready-exec's sh -c */
};

/* Expand {FIELD} (the first socket), {NAME.FIELD} (the socket named NAME)
 * and {N.FIELD} (the socket passed as fd 3+N… counted from 0) in text,
 * where FIELD is port, host, addr, url, fd or name; "{{" and "}}" stand
 * for literal braces. Returns 0 and a new string in *ret, or
 *   -EINVAL  a brace that opens no template or is never closed,
 *   -ENOENT  no socket of that name or index,
 *   -EBADR   an unknown FIELD,
 *   -ENOMEM.
 * On error, *ret_error_offset (if not NULL) is where the bad template starts. */
int template_expand(const char *text, const struct bound_socket *sockets, size_t n, enum template_quoting quoting,
                    char **ret, size_t *ret_error_offset);
