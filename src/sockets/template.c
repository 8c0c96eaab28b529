/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "address.h"
#include "format.h"
#include "template.h"

/* Which socket "{web.port}" or "{0.port}" means; "{port}" is the first. */
static int find_socket(const char *ref, size_t len, const struct bound_socket *sockets, size_t n, size_t *ret) {
        char index_text[16];
        unsigned long index;

        if (len == 0) {
                if (n == 0)
                        return -ENOENT;
                *ret = 0;
                return 0;
        }
        for (size_t i = 0; i < n; i++)
                if (strlen(sockets[i].name) == len && strncmp(sockets[i].name, ref, len) == 0) {
                        *ret = i;
                        return 0;
                }
        if (len < sizeof index_text) {
                memcpy(index_text, ref, len);
                index_text[len] = '\0';
                if (parse_uint(index_text, 0, n ? n - 1 : 0, &index) == 0 && n > 0) {
                        *ret = index;
                        return 0;
                }
        }
        return -ENOENT;
}

static int expand_one(FILE *out, const char *body, size_t len, const struct bound_socket *sockets, size_t n,
                      enum template_quoting quoting) {
        /* The field is after the last '.': names may hold dots themselves. */
        const char *dot = memrchr(body, '.', len);
        const char *field_text = dot ? dot + 1 : body;
        size_t ref_len = dot ? (size_t) (dot - body) : 0;
        char buf[FIELD_STRING_MAX];
        enum socket_field field;
        size_t index;
        int r;

        if (dot && ref_len == 0)
                return -EINVAL;
        r = find_socket(body, ref_len, sockets, n, &index);
        if (r < 0)
                return r;
        field = socket_field_from_string(field_text, len - (size_t) (field_text - body));
        if (field < 0)
                return -EBADR;
        socket_field_format(sockets, index, field, buf, sizeof buf);
        if (quoting == TEMPLATE_SHELL)
                shell_quote(out, buf, SHELL_WORD);
        else
                fputs(buf, out);
        return 0;
}

int template_expand(const char *text, const struct bound_socket *sockets, size_t n, enum template_quoting quoting,
                    char **ret, size_t *ret_error_offset) {
        char *result = NULL;
        size_t size = 0;
        const char *p = text;
        FILE *out;
        int r = 0;

        out = open_memstream(&result, &size);
        if (!out)
                return -ENOMEM;

        while (*p) {
                const char *close;

                if ((p[0] == '{' && p[1] == '{') || (p[0] == '}' && p[1] == '}')) {
                        fputc(p[0], out);
                        p += 2;
                        continue;
                }
                if (p[0] == '}') {
                        r = -EINVAL;
                        break;
                }
                if (p[0] != '{') {
                        fputc(*p++, out);
                        continue;
                }
                close = strpbrk(p + 1, "{}");
                if (!close || *close != '}' || close == p + 1) {
                        r = -EINVAL;
                        break;
                }
                r = expand_one(out, p + 1, (size_t) (close - p - 1), sockets, n, quoting);
                if (r < 0)
                        break;
                p = close + 1;
        }

        if (fclose(out) != 0 && r == 0)
                r = -ENOMEM;
        if (r < 0) {
                free(result);
                if (ret_error_offset)
                        *ret_error_offset = (size_t) (p - text);
                return r;
        }
        *ret = result;
        return 0;
}
