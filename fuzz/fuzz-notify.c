/* SPDX-License-Identifier: MIT */
/* libFuzzer target: sd_notify(3) datagrams as COMMAND may send them,
 * notify_message_parse(). The input is one datagram, any bytes (NULs
 * included), in a buffer of exactly its size. The parse is checked
 * against a second reading of the rules, field by field. */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "notify.h"

/* The datagram as the rules read it, written independently of the parser:
 * flags are set by any line that is exactly "KEY=1"; for STATUS=, ERRNO=
 * and EXTEND_TIMEOUT_USEC= the last line counts, and a number is decimal
 * digits only (no NUL, no sign), within its range. */
static bool number(const char *p, size_t len, unsigned long long max, unsigned long long *ret) {
        unsigned long long v = 0;

        if (len == 0 || len >= 32)
                return false;
        for (size_t i = 0; i < len; i++) {
                if (p[i] < '0' || p[i] > '9')
                        return false;
                if (v > (ULLONG_MAX - 9) / 10)
                        return false;
                v = v * 10 + (unsigned long long) (p[i] - '0');
        }
        if (v > max)
                return false;
        *ret = v;
        return true;
}

static void reference(const char *buf, size_t len, struct notify_message *ret) {
        struct notify_message m = { .errno_value = -1 };
        const char *end = buf + len;

        for (const char *p = buf; p < end;) {
                const char *nl = memchr(p, '\n', (size_t) (end - p));
                size_t k = (size_t) ((nl ? nl : end) - p);
                unsigned long long v;

#define IS(key) (k >= strlen(key) && memcmp(p, key, strlen(key)) == 0)
#define VALUE(key) (p + strlen(key)), (k - strlen(key))
                if (k == 7 && memcmp(p, "READY=1", 7) == 0)
                        m.ready = true;
                else if (k == 11 && memcmp(p, "RELOADING=1", 11) == 0)
                        m.reloading = true;
                else if (k == 10 && memcmp(p, "STOPPING=1", 10) == 0)
                        m.stopping = true;
                else if (IS("STATUS=")) {
                        m.status = p + 7;
                        m.status_len = k - 7;
                } else if (IS("ERRNO="))
                        m.errno_value = number(VALUE("ERRNO="), 4095, &v) ? (int) v : -1;
                else if (IS("EXTEND_TIMEOUT_USEC="))
                        m.extend_usec = number(VALUE("EXTEND_TIMEOUT_USEC="), 4294967295ULL * 1000000ULL, &v) ? v : 0;
#undef IS
#undef VALUE
                if (!nl)
                        break;
                p = nl + 1;
        }
        *ret = m;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const char *buf = (const char *) data;
        struct notify_message m, want;

        memset(&m, 0xa5, sizeof m);
        notify_message_parse(buf, size, &m);

        if (m.status && (m.status < buf || m.status + m.status_len > buf + size))
                FUZZ_FAIL("STATUS= points outside the datagram");
        if (!m.status && m.status_len != 0)
                FUZZ_FAIL("no STATUS=, but a length %zu", m.status_len);
        if (m.status && memchr(m.status, '\n', m.status_len))
                FUZZ_FAIL("STATUS= runs over a line");
        reference(buf, size, &want);
        if (m.ready != want.ready || m.reloading != want.reloading || m.stopping != want.stopping)
                FUZZ_FAIL("flags READY=%d RELOADING=%d STOPPING=%d, want %d %d %d", m.ready, m.reloading, m.stopping,
                          want.ready, want.reloading, want.stopping);
        if (m.status != want.status || m.status_len != want.status_len)
                FUZZ_FAIL("STATUS= is not the last STATUS= line");
        if (m.errno_value != want.errno_value)
                FUZZ_FAIL("ERRNO=%d, want %d", m.errno_value, want.errno_value);
        if (m.extend_usec != want.extend_usec)
                FUZZ_FAIL("EXTEND_TIMEOUT_USEC=%llu, want %llu", (unsigned long long) m.extend_usec,
                          (unsigned long long) want.extend_usec);
        return 0;
}
