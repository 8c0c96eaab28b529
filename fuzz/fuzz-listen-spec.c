/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the address grammar, listen_spec_parse() (-l/--listen).
 * The input is one argument, as the shell would pass it (cut at the first
 * NUL). Besides "no crash, no leak", it checks what the grammar promises:
 * a parsed address prints within ADDRESS_STRING_MAX, and an address that
 * prints without substitutions ('?' for control bytes) parses back to the
 * same socket address. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "address.h"
#include "fuzz.h"

static void check_round_trip(const struct listen_spec *spec, const char *printed) {
        struct listen_spec again;
        char *text;

        /* "udp:" is the only prefix that changes the type; a name is not
         * part of the address. */
        if (asprintf(&text, "%s%s", spec->type == SOCK_DGRAM ? "udp:" : "", printed) < 0)
                abort();
        if (listen_spec_parse(text, &again) != 0)
                FUZZ_FAIL("'%s' does not parse back (from '%s')", text, spec->text);
        if (again.type != spec->type || again.addr_len != spec->addr_len ||
            memcmp(&again.addr, &spec->addr, spec->addr_len) != 0)
                FUZZ_FAIL("'%s' parses back to another address (from '%s')", text, spec->text);
        listen_spec_done(&again);
        free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *text = fuzz_string(data, size);
        char printed[ADDRESS_STRING_MAX];
        struct listen_spec spec;
        bool controls = false;

        (void) fdname_is_valid(text);
        if (listen_spec_parse(text, &spec) < 0) {
                free(text);
                return 0;
        }
        if (spec.name && !fdname_is_valid(spec.name))
                FUZZ_FAIL("accepted the invalid name '%s'", spec.name);
        if (spec.addr_len == 0 || spec.addr_len > sizeof spec.addr)
                FUZZ_FAIL("address length %u", (unsigned) spec.addr_len);
        if (!sockaddr_to_string(&spec.addr, spec.addr_len, printed, sizeof printed))
                FUZZ_FAIL("'%s' parsed but cannot be printed", text);
        if (strlen(printed) >= sizeof printed - 1)
                FUZZ_FAIL("'%s' prints truncated", text);
        if (spec.addr.sa.sa_family == AF_UNIX) {
                /* The bytes of the name: after the leading NUL of an
                 * abstract name, before the trailing NUL of a path. */
                size_t n = spec.addr_len - offsetof(struct sockaddr_un, sun_path);
                bool abstract = sockaddr_is_abstract(&spec.addr, spec.addr_len);
                const char *name = spec.addr.un.sun_path + (abstract ? 1 : 0);

                if (!abstract && spec.addr.un.sun_path[n - 1] != '\0')
                        FUZZ_FAIL("'%s': path without its NUL", text);
                for (size_t i = 0; i < n - 1; i++)
                        controls = controls || (unsigned char) name[i] < ' ' || name[i] == 0x7f;
        }
        if (!controls)
                check_round_trip(&spec, printed);
        listen_spec_done(&spec);
        free(text);
        return 0;
}
