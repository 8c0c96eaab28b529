/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the -E/--subst template language, template_expand(),
 * against a fixed set of bound sockets of every family and type, with
 * names that hold dots, look like indexes, and are as long as allowed.
 * The input is one argument (cut at the first NUL). An expansion that
 * succeeds is checked against a straightforward reading of the grammar,
 * field by field; a failure must point inside the text. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "address.h"
#include "format.h"
#include "fuzz.h"
#include "socket.h"
#include "template.h"

static const char *const addresses[] = {
        "web=127.0.0.1:8080",  "dns=udp:[::1]:53", "admin=/run/prebind/admin.sock", "@abstract\x01name", "a.b=*:0",
        "7=[fe80::1%1]:65535", "udp:@dgram",
};

static struct bound_socket sockets[sizeof addresses / sizeof addresses[0] + 1];
static size_t n_sockets;
static char long_name[FDNAME_MAX + 1];

static void add_socket(const char *address) {
        struct listen_spec spec;
        struct bound_socket *s = &sockets[n_sockets];

        if (listen_spec_parse(address, &spec) < 0)
                FUZZ_FAIL("bad fixture '%s'", address);
        *s = (struct bound_socket) {
                .fd = -1,
                .type = spec.type,
                .addr = spec.addr,
                .addr_len = spec.addr_len,
        };
        /* The fixture lives as long as the process. */
        s->name_owned = spec.name;
        s->name = spec.name ? spec.name : "unknown";
        n_sockets++;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
        char *address;

        (void) argc;
        (void) argv;
        for (size_t i = 0; i < sizeof addresses / sizeof addresses[0]; i++)
                add_socket(addresses[i]);
        /* The longest name systemd allows. */
        memset(long_name, 'n', FDNAME_MAX);
        if (asprintf(&address, "%s=udp:0", long_name) < 0)
                abort();
        add_socket(address);
        free(address);
        return 0;
}

/* The socket "{REF.field}" means: a name first, then an index from 0. */
static long lookup(const char *ref, size_t len, size_t n) {
        long index = 0;

        if (len == 0)
                return n > 0 ? 0 : -1;
        for (size_t i = 0; i < n; i++)
                if (strlen(sockets[i].name) == len && memcmp(sockets[i].name, ref, len) == 0)
                        return (long) i;
        /* Digits only, as many as fit the parser's buffer (leading zeros
         * included). */
        if (len >= 16)
                return -1;
        for (size_t i = 0; i < len; i++) {
                if (ref[i] < '0' || ref[i] > '9')
                        return -1;
                index = index * 10 + (ref[i] - '0');
        }
        return index < (long) n ? index : -1;
}

/* What template_expand() must produce, written independently of it:
 * returns the expansion, or NULL where it must fail. */
static char *expected(const char *text, size_t n) {
        static const char *const fields[] = { "port", "host", "addr", "url", "fd", "name" };
        char *result = NULL;
        size_t size = 0;
        FILE *out = open_memstream(&result, &size);
        bool ok = true;

        if (!out)
                abort();
        for (const char *p = text; *p && ok;) {
                const char *close, *dot;
                long index;
                int field = -1;

                if ((p[0] == '{' && p[1] == '{') || (p[0] == '}' && p[1] == '}')) {
                        fputc(*p, out);
                        p += 2;
                        continue;
                }
                if (*p != '{') {
                        ok = *p != '}';
                        fputc(*p++, out);
                        continue;
                }
                close = p + 1 + strcspn(p + 1, "{}");
                if (*close != '}' || close == p + 1) {
                        ok = false;
                        break;
                }
                dot = memrchr(p + 1, '.', (size_t) (close - p - 1));
                index = dot ? (dot == p + 1 ? -1 : lookup(p + 1, (size_t) (dot - p - 1), n)) : lookup("", 0, n);
                for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++) {
                        const char *name = dot ? dot + 1 : p + 1;
                        if (strlen(fields[f]) == (size_t) (close - name) &&
                            memcmp(fields[f], name, (size_t) (close - name)) == 0)
                                field = (int) f;
                }
                if (index < 0 || field < 0) {
                        ok = false;
                        break;
                }
                if (field == FIELD_NAME) {
                        /* Whole, however long: not through a fixed buffer. */
                        fputs(sockets[index].name, out);
                } else {
                        char buf[FIELD_STRING_MAX];
                        fputs(socket_field_format(sockets, (size_t) index, (enum socket_field) field, buf, sizeof buf),
                              out);
                }
                p = close + 1;
        }
        if (fclose(out) != 0)
                abort();
        if (!ok) {
                free(result);
                return NULL;
        }
        return result;
}

static void check(const char *text, size_t n) {
        char *result = NULL, *want = expected(text, n);
        size_t offset = (size_t) -1;
        int r = template_expand(text, sockets, n, TEMPLATE_VERBATIM, &result, &offset);

        if (r == 0) {
                if (!want)
                        FUZZ_FAIL("'%s' expanded, but is not a valid template", text);
                if (strcmp(result, want) != 0)
                        FUZZ_FAIL("'%s' expanded to '%s', not '%s'", text, result, want);
                free(result);
        } else {
                if (r != -EINVAL && r != -ENOENT && r != -EBADR)
                        FUZZ_FAIL("'%s': unexpected error %d", text, r);
                if (offset > strlen(text))
                        FUZZ_FAIL("'%s': error offset %zu is outside the text", text, offset);
                if (want)
                        FUZZ_FAIL("'%s' failed (%d) but should expand to '%s'", text, r, want);
        }
        free(want);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *text = fuzz_string(data, size);

        /* With no sockets (--inetd), every field template fails. */
        check(text, 0);
        check(text, n_sockets);
        free(text);
        return 0;
}
