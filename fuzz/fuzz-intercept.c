/* SPDX-License-Identifier: MIT */
/* libFuzzer target: what the interposer reads in every process it is
 * loaded into (src/intercept/match.c): the PREBIND_INTERCEPT list
 * (intercept_ports_parse(), then intercept_ports_format() and a second
 * parse must give the same list back), and a bind() address of any bytes
 * and length (intercept_sockaddr_port(), intercept_address_text(): never
 * a read past the address, always a NUL-terminated text). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "fuzz.h"
#include "intercept/match.h"

static void fuzz_list(const uint8_t *data, size_t size) {
        struct intercept_port ports[INTERCEPT_PORTS_MAX], again[INTERCEPT_PORTS_MAX];
        char *text = fuzz_string(data, size), buf[INTERCEPT_PORTS_MAX * 12];
        size_t n = 0, m = 0;
        int len;

        if (intercept_ports_parse(text, ports, INTERCEPT_PORTS_MAX, &n) == 0) {
                if (n == 0 || n > INTERCEPT_PORTS_MAX)
                        FUZZ_FAIL("parsed %zu entries", n);
                for (size_t i = 0; i < n; i++)
                        if (ports[i].port == 0 || (ports[i].type != SOCK_STREAM && ports[i].type != SOCK_DGRAM))
                                FUZZ_FAIL("entry %zu: port %u type %d", i, ports[i].port, ports[i].type);
                len = intercept_ports_format(ports, n, buf, sizeof buf);
                if (len < 0 || (size_t) len != strlen(buf))
                        FUZZ_FAIL("format gave %d", len);
                if (intercept_ports_parse(buf, again, INTERCEPT_PORTS_MAX, &m) != 0 || m != n)
                        FUZZ_FAIL("'%s' does not parse back", buf);
                for (size_t i = 0; i < n; i++)
                        if (again[i].port != ports[i].port || again[i].type != ports[i].type)
                                FUZZ_FAIL("entry %zu changed in '%s'", i, buf);
                for (size_t i = 0; i < n; i++)
                        if (intercept_match(ports, n, ports[i].port, ports[i].type | SOCK_CLOEXEC) == NULL)
                                FUZZ_FAIL("entry %zu does not match itself", i);
        }
        free(text);
}

static void fuzz_address(const uint8_t *data, size_t size) {
        /* Exactly size bytes: AddressSanitizer sees a read past the end. */
        uint8_t *copy = malloc(size ? size : 1);
        char text[64];
        uint16_t port;

        if (!copy)
                abort();
        memcpy(copy, data, size);
        memset(text, 'x', sizeof text);
        if (intercept_sockaddr_port((const struct sockaddr *) copy, (socklen_t) size, &port) &&
            size < sizeof(sa_family_t))
                FUZZ_FAIL("a port from %zu bytes", size);
        intercept_address_text((const struct sockaddr *) copy, (socklen_t) size, text, sizeof text);
        if (!memchr(text, '\0', sizeof text))
                FUZZ_FAIL("address text not terminated");
        free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        /* The first byte chooses: a list, or an address. */
        if (size == 0)
                return 0;
        if (data[0] & 1)
                fuzz_address(data + 1, size - 1);
        else
                fuzz_list(data + 1, size - 1);
        return 0;
}
