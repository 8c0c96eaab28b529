/* SPDX-License-Identifier: MIT */
/* The publication formats (format.c) on hand-made struct bound_socket
 * arrays: no socket is opened, only .addr/.addr_len/.type/.name matter. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <net/if.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "format.h"
#include "socket.h"
#include "unit.h"

static struct bound_socket sock_in(const char *host, int port, int type, const char *name) {
        struct bound_socket s;

        memset(&s, 0, sizeof s);
        s.fd = -1;
        s.name = name;
        s.type = type;
        s.addr.in.sin_family = AF_INET;
        s.addr.in.sin_port = htons((uint16_t) port);
        ck_assert_int_eq(inet_pton(AF_INET, host, &s.addr.in.sin_addr), 1);
        s.addr_len = sizeof s.addr.in;
        return s;
}

static struct bound_socket sock_in6(const char *host, int port, int type, const char *name) {
        struct bound_socket s;

        memset(&s, 0, sizeof s);
        s.fd = -1;
        s.name = name;
        s.type = type;
        s.addr.in6.sin6_family = AF_INET6;
        s.addr.in6.sin6_port = htons((uint16_t) port);
        ck_assert_int_eq(inet_pton(AF_INET6, host, &s.addr.in6.sin6_addr), 1);
        s.addr_len = sizeof s.addr.in6;
        return s;
}

/* "/path" is a file, "@name" abstract, as getsockname() reports them. */
static struct bound_socket sock_un(const char *path, int type, const char *name) {
        struct bound_socket s;
        size_t len = strlen(path);

        memset(&s, 0, sizeof s);
        s.fd = -1;
        s.name = name;
        s.type = type;
        s.addr.un.sun_family = AF_UNIX;
        memcpy(s.addr.un.sun_path, path, len);
        if (path[0] == '@') {
                s.addr.un.sun_path[0] = '\0';
                s.addr_len = (socklen_t) (offsetof(struct sockaddr_un, sun_path) + len);
        } else
                s.addr_len = (socklen_t) (offsetof(struct sockaddr_un, sun_path) + len + 1);
        return s;
}

static void check_format(enum output_format format, const struct bound_socket *sockets, size_t n, pid_t pid,
                         pid_t child_pid, const char *want) {
        char *text = NULL;

        ck_assert_int_eq(format_addresses(format, sockets, n, pid, child_pid, &text), 0);
        ck_assert_ptr_nonnull(text);
        ck_assert_str_eq(text, want);
        free(text);
}

/* Five sockets of every kind, used by several formats. */
static void several(struct bound_socket s[5]) {
        s[0] = sock_in("127.0.0.1", 41234, SOCK_STREAM, "web");
        s[1] = sock_in6("::1", 41235, SOCK_STREAM, "unknown");
        s[2] = sock_un("/run/app.sock", SOCK_STREAM, "sock");
        s[3] = sock_un("@app", SOCK_DGRAM, "unknown");
        s[4] = sock_in("0.0.0.0", 5353, SOCK_DGRAM, "dns");
}

/* ---- port ---------------------------------------------------------------- */

START_TEST(test_port) {
        struct bound_socket s[5];

        s[0] = sock_in("127.0.0.1", 41234, SOCK_STREAM, "unknown");
        check_format(FORMAT_PORT, s, 1, 1, 2, "41234\n");
        s[0] = sock_in("127.0.0.1", 0, SOCK_STREAM, "unknown");
        check_format(FORMAT_PORT, s, 1, 1, 2, "0\n");
        s[0] = sock_in("0.0.0.0", 65535, SOCK_DGRAM, "unknown");
        check_format(FORMAT_PORT, s, 1, 1, 2, "65535\n");
        s[0] = sock_in6("::1", 8080, SOCK_STREAM, "unknown");
        check_format(FORMAT_PORT, s, 1, 1, 2, "8080\n");
        s[0] = sock_un("/run/app.sock", SOCK_STREAM, "unknown");
        check_format(FORMAT_PORT, s, 1, 1, 2, "/run/app.sock\n");
        s[0] = sock_un("@app", SOCK_STREAM, "unknown");
        check_format(FORMAT_PORT, s, 1, 1, 2, "@app\n");

        several(s);
        check_format(FORMAT_PORT, s, 5, 1, 2, "41234\n41235\n/run/app.sock\n@app\n5353\n");
        check_format(FORMAT_PORT, s, 0, 1, 2, "");
}
END_TEST

/* ---- addr ---------------------------------------------------------------- */

START_TEST(test_addr) {
        struct bound_socket s[5];

        s[0] = sock_in("127.0.0.1", 41234, SOCK_STREAM, "unknown");
        check_format(FORMAT_ADDR, s, 1, 1, 2, "127.0.0.1:41234\n");
        s[0] = sock_in6("::1", 41234, SOCK_STREAM, "unknown");
        check_format(FORMAT_ADDR, s, 1, 1, 2, "[::1]:41234\n");
        /* addr says what was bound: wildcards stay wildcards. */
        s[0] = sock_in("0.0.0.0", 80, SOCK_STREAM, "unknown");
        check_format(FORMAT_ADDR, s, 1, 1, 2, "0.0.0.0:80\n");
        s[0] = sock_in6("::", 80, SOCK_STREAM, "unknown");
        check_format(FORMAT_ADDR, s, 1, 1, 2, "[::]:80\n");
        s[0] = sock_in("127.0.0.1", 53, SOCK_DGRAM, "unknown");
        check_format(FORMAT_ADDR, s, 1, 1, 2, "127.0.0.1:53\n");
        s[0] = sock_un("/run/app.sock", SOCK_STREAM, "unknown");
        check_format(FORMAT_ADDR, s, 1, 1, 2, "/run/app.sock\n");
        s[0] = sock_un("@app", SOCK_STREAM, "unknown");
        check_format(FORMAT_ADDR, s, 1, 1, 2, "@app\n");

        several(s);
        check_format(FORMAT_ADDR, s, 5, 1, 2, "127.0.0.1:41234\n[::1]:41235\n/run/app.sock\n@app\n0.0.0.0:5353\n");
        check_format(FORMAT_ADDR, s, 0, 1, 2, "");
}
END_TEST

/* ---- url ----------------------------------------------------------------- */

START_TEST(test_url) {
        struct bound_socket s[5];

        s[0] = sock_in("127.0.0.1", 41234, SOCK_STREAM, "unknown");
        check_format(FORMAT_URL, s, 1, 1, 2, "http://127.0.0.1:41234\n");
        s[0] = sock_in("10.1.2.3", 8080, SOCK_STREAM, "unknown");
        check_format(FORMAT_URL, s, 1, 1, 2, "http://10.1.2.3:8080\n");
        s[0] = sock_in6("::1", 41234, SOCK_STREAM, "unknown");
        check_format(FORMAT_URL, s, 1, 1, 2, "http://[::1]:41234\n");
        s[0] = sock_in6("2001:db8::1", 443, SOCK_STREAM, "unknown");
        check_format(FORMAT_URL, s, 1, 1, 2, "http://[2001:db8::1]:443\n");
        /* A URL is for a local client: wildcards become loopback. */
        s[0] = sock_in("0.0.0.0", 80, SOCK_STREAM, "unknown");
        check_format(FORMAT_URL, s, 1, 1, 2, "http://127.0.0.1:80\n");
        s[0] = sock_in6("::", 80, SOCK_STREAM, "unknown");
        check_format(FORMAT_URL, s, 1, 1, 2, "http://[::1]:80\n");
        s[0] = sock_in("127.0.0.1", 5353, SOCK_DGRAM, "unknown");
        check_format(FORMAT_URL, s, 1, 1, 2, "udp://127.0.0.1:5353\n");
        s[0] = sock_in("0.0.0.0", 5353, SOCK_DGRAM, "unknown");
        check_format(FORMAT_URL, s, 1, 1, 2, "udp://127.0.0.1:5353\n");
        s[0] = sock_in6("::", 53, SOCK_DGRAM, "unknown");
        check_format(FORMAT_URL, s, 1, 1, 2, "udp://[::1]:53\n");
        s[0] = sock_un("/run/app.sock", SOCK_STREAM, "unknown");
        check_format(FORMAT_URL, s, 1, 1, 2, "unix:/run/app.sock\n");
        s[0] = sock_un("/run/log.sock", SOCK_DGRAM, "unknown");
        check_format(FORMAT_URL, s, 1, 1, 2, "unix:/run/log.sock\n");
        s[0] = sock_un("@app", SOCK_STREAM, "unknown");
        check_format(FORMAT_URL, s, 1, 1, 2, "unix:@app\n");

        several(s);
        check_format(FORMAT_URL, s, 5, 1, 2,
                     "http://127.0.0.1:41234\nhttp://[::1]:41235\nunix:/run/app.sock\nunix:@app\n"
                     "udp://127.0.0.1:5353\n");
        check_format(FORMAT_URL, s, 0, 1, 2, "");
}
END_TEST

/* ---- json ---------------------------------------------------------------- */

START_TEST(test_json_ipv4) {
        struct bound_socket s[1];

        s[0] = sock_in("127.0.0.1", 41234, SOCK_STREAM, "web");
        check_format(FORMAT_JSON, s, 1, 100, 101,
                     "{\"pid\":100,\"child_pid\":101,\"sockets\":[{\"fd\":3,\"name\":\"web\",\"family\":\"ipv4\","
                     "\"type\":\"stream\",\"address\":\"127.0.0.1\",\"port\":41234,"
                     "\"url\":\"http://127.0.0.1:41234\"}]}\n");
        /* --exec: prebind's pid is COMMAND's. */
        check_format(FORMAT_JSON, s, 1, 7, 7,
                     "{\"pid\":7,\"child_pid\":7,\"sockets\":[{\"fd\":3,\"name\":\"web\",\"family\":\"ipv4\","
                     "\"type\":\"stream\",\"address\":\"127.0.0.1\",\"port\":41234,"
                     "\"url\":\"http://127.0.0.1:41234\"}]}\n");
}
END_TEST

START_TEST(test_json_ipv6_wildcard) {
        struct bound_socket s[2];

        s[0] = sock_in6("::", 8080, SOCK_STREAM, "unknown");
        s[1] = sock_in("0.0.0.0", 53, SOCK_DGRAM, "dns");
        check_format(FORMAT_JSON, s, 2, 1, 2,
                     "{\"pid\":1,\"child_pid\":2,\"sockets\":["
                     "{\"fd\":3,\"name\":\"unknown\",\"family\":\"ipv6\",\"type\":\"stream\",\"address\":\"::\","
                     "\"port\":8080,\"url\":\"http://[::1]:8080\"},"
                     "{\"fd\":4,\"name\":\"dns\",\"family\":\"ipv4\",\"type\":\"dgram\",\"address\":\"0.0.0.0\","
                     "\"port\":53,\"url\":\"udp://127.0.0.1:53\"}]}\n");
}
END_TEST

START_TEST(test_json_unix) {
        struct bound_socket s[2];

        s[0] = sock_un("/run/app.sock", SOCK_STREAM, "sock");
        s[1] = sock_un("@app", SOCK_DGRAM, "unknown");
        check_format(FORMAT_JSON, s, 2, 10, 11,
                     "{\"pid\":10,\"child_pid\":11,\"sockets\":["
                     "{\"fd\":3,\"name\":\"sock\",\"family\":\"unix\",\"type\":\"stream\","
                     "\"address\":\"/run/app.sock\",\"port\":null,\"url\":\"unix:/run/app.sock\"},"
                     "{\"fd\":4,\"name\":\"unknown\",\"family\":\"unix\",\"type\":\"dgram\","
                     "\"address\":\"@app\",\"port\":null,\"url\":\"unix:@app\"}]}\n");
}
END_TEST

START_TEST(test_json_several) {
        struct bound_socket s[5];

        several(s);
        check_format(FORMAT_JSON, s, 5, 100, 101,
                     "{\"pid\":100,\"child_pid\":101,\"sockets\":["
                     "{\"fd\":3,\"name\":\"web\",\"family\":\"ipv4\",\"type\":\"stream\",\"address\":\"127.0.0.1\","
                     "\"port\":41234,\"url\":\"http://127.0.0.1:41234\"},"
                     "{\"fd\":4,\"name\":\"unknown\",\"family\":\"ipv6\",\"type\":\"stream\",\"address\":\"::1\","
                     "\"port\":41235,\"url\":\"http://[::1]:41235\"},"
                     "{\"fd\":5,\"name\":\"sock\",\"family\":\"unix\",\"type\":\"stream\","
                     "\"address\":\"/run/app.sock\",\"port\":null,\"url\":\"unix:/run/app.sock\"},"
                     "{\"fd\":6,\"name\":\"unknown\",\"family\":\"unix\",\"type\":\"dgram\",\"address\":\"@app\","
                     "\"port\":null,\"url\":\"unix:@app\"},"
                     "{\"fd\":7,\"name\":\"dns\",\"family\":\"ipv4\",\"type\":\"dgram\",\"address\":\"0.0.0.0\","
                     "\"port\":5353,\"url\":\"udp://127.0.0.1:5353\"}]}\n");
}
END_TEST

START_TEST(test_json_empty) {
        check_format(FORMAT_JSON, NULL, 0, 1, 2, "{\"pid\":1,\"child_pid\":2,\"sockets\":[]}\n");
}
END_TEST

START_TEST(test_json_escaping) {
        struct bound_socket s[1];

        /* Quotes and backslashes in a name (valid fd names may hold both). */
        s[0] = sock_in("127.0.0.1", 1, SOCK_STREAM, "a\"b\\c");
        check_format(FORMAT_JSON, s, 1, 1, 2,
                     "{\"pid\":1,\"child_pid\":2,\"sockets\":[{\"fd\":3,\"name\":\"a\\\"b\\\\c\",\"family\":\"ipv4\","
                     "\"type\":\"stream\",\"address\":\"127.0.0.1\",\"port\":1,\"url\":\"http://127.0.0.1:1\"}]}\n");

        /* Control characters (an inherited LISTEN_FDNAMES is not ours to
         * trust) as \u00XX; '/' needs no escape. */
        s[0] = sock_in("127.0.0.1", 1, SOCK_STREAM, "\x01\t\n\x1f\x7f/");
        check_format(FORMAT_JSON, s, 1, 1, 2,
                     "{\"pid\":1,\"child_pid\":2,\"sockets\":[{\"fd\":3,"
                     "\"name\":\"\\u0001\\u0009\\u000a\\u001f\\u007f/\",\"family\":\"ipv4\","
                     "\"type\":\"stream\",\"address\":\"127.0.0.1\",\"port\":1,\"url\":\"http://127.0.0.1:1\"}]}\n");

        /* A path with a quote and a backslash, in address and url. */
        s[0] = sock_un("/tmp/q\"\\x", SOCK_STREAM, "unknown");
        check_format(FORMAT_JSON, s, 1, 1, 2,
                     "{\"pid\":1,\"child_pid\":2,\"sockets\":[{\"fd\":3,\"name\":\"unknown\",\"family\":\"unix\","
                     "\"type\":\"stream\",\"address\":\"/tmp/q\\\"\\\\x\",\"port\":null,"
                     "\"url\":\"unix:/tmp/q\\\"\\\\x\"}]}\n");

        /* UTF-8 passes through as it is: JSON is UTF-8. */
        s[0] = sock_un("/tmp/caf\xc3\xa9", SOCK_STREAM, "unknown");
        check_format(FORMAT_JSON, s, 1, 1, 2,
                     "{\"pid\":1,\"child_pid\":2,\"sockets\":[{\"fd\":3,\"name\":\"unknown\",\"family\":\"unix\","
                     "\"type\":\"stream\",\"address\":\"/tmp/caf\xc3\xa9\",\"port\":null,"
                     "\"url\":\"unix:/tmp/caf\xc3\xa9\"}]}\n");

        /* Control bytes of a path are shown as '?' by the address printer
         * (sockaddr_host_to_string), before JSON sees them. */
        s[0] = sock_un("/tmp/a\nb", SOCK_STREAM, "unknown");
        check_format(FORMAT_JSON, s, 1, 1, 2,
                     "{\"pid\":1,\"child_pid\":2,\"sockets\":[{\"fd\":3,\"name\":\"unknown\",\"family\":\"unix\","
                     "\"type\":\"stream\",\"address\":\"/tmp/a?b\",\"port\":null,"
                     "\"url\":\"unix:/tmp/a?b\"}]}\n");
}
END_TEST

/* ---- json: always UTF-8 ---------------------------------------------------- */

/* The oracle, from the definition rather than RFC 3629's table: the
 * sequence of length L has the lead bits of L and L-1 continuation bytes,
 * and decodes to a code point that needs L bytes (no overlong form), is
 * not a UTF-16 surrogate and is at most U+10FFFF. */
static size_t utf8_oracle(const unsigned char *p) {
        static const struct {
                unsigned char mask, lead;
                unsigned long min;
        } forms[] = { { 0x80, 0x00, 0x0 }, { 0xe0, 0xc0, 0x80 }, { 0xf0, 0xe0, 0x800 }, { 0xf8, 0xf0, 0x10000 } };

        if (p[0] == 0)
                return 0;
        for (size_t len = 1; len <= 4; len++) {
                unsigned long cp;

                if ((p[0] & forms[len - 1].mask) != forms[len - 1].lead)
                        continue;
                cp = p[0] & (unsigned char) ~forms[len - 1].mask;
                for (size_t i = 1; i < len; i++) {
                        if ((p[i] & 0xc0) != 0x80)
                                return 0;
                        cp = cp << 6 | (p[i] & 0x3f);
                }
                if (cp < forms[len - 1].min || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
                        return 0;
                return len;
        }
        return 0;
}

static void check_sequence(unsigned char b0, unsigned char b1, unsigned char b2, unsigned char b3) {
        unsigned char buf[5] = { b0, b1, b2, b3, 0 };
        size_t got = utf8_sequence_length((const char *) buf), want = utf8_oracle(buf);

        if (got != want)
                ck_abort_msg("%02x %02x %02x %02x: length %zu, expected %zu", b0, b1, b2, b3, got, want);
}

/* Every first two bytes; every third after a byte that may start three
 * or four (E0-FF; before the others a third byte is read by neither, so
 * 00 and 80 stand for all); the fourth a continuation byte, and not one;
 * then every fourth after a byte that may start four (F0-FF). */
START_TEST(test_utf8_every_sequence) {
        for (unsigned b0 = 0; b0 < 256; b0++)
                for (unsigned b1 = 0; b1 < 256; b1++)
                        for (unsigned b2 = 0; b2 < 256; b2 = b0 >= 0xe0 ? b2 + 1 : b2 + 0x80) {
                                check_sequence((unsigned char) b0, (unsigned char) b1, (unsigned char) b2, 0x80);
                                if (b0 >= 0xf0)
                                        check_sequence((unsigned char) b0, (unsigned char) b1, (unsigned char) b2,
                                                       0x41);
                        }
        for (unsigned b0 = 0xf0; b0 < 256; b0++)
                for (unsigned b1 = 0x80; b1 < 0xc0; b1++)
                        for (unsigned b3 = 0; b3 < 256; b3++)
                                check_sequence((unsigned char) b0, (unsigned char) b1, 0x80, (unsigned char) b3);
}
END_TEST

START_TEST(test_utf8_every_code_point) {
        /* Each code point's own encoding is one sequence of its length;
         * a surrogate's is none. */
        for (unsigned long cp = 1; cp <= 0x10ffff; cp++) {
                unsigned char buf[5] = { 0 };
                size_t len;

                if (cp < 0x80) {
                        buf[0] = (unsigned char) cp;
                        len = 1;
                } else if (cp < 0x800) {
                        buf[0] = (unsigned char) (0xc0 | cp >> 6);
                        buf[1] = (unsigned char) (0x80 | (cp & 0x3f));
                        len = 2;
                } else if (cp < 0x10000) {
                        buf[0] = (unsigned char) (0xe0 | cp >> 12);
                        buf[1] = (unsigned char) (0x80 | (cp >> 6 & 0x3f));
                        buf[2] = (unsigned char) (0x80 | (cp & 0x3f));
                        len = 3;
                } else {
                        buf[0] = (unsigned char) (0xf0 | cp >> 18);
                        buf[1] = (unsigned char) (0x80 | (cp >> 12 & 0x3f));
                        buf[2] = (unsigned char) (0x80 | (cp >> 6 & 0x3f));
                        buf[3] = (unsigned char) (0x80 | (cp & 0x3f));
                        len = 4;
                }
                if (cp >= 0xd800 && cp <= 0xdfff)
                        len = 0;
                if (utf8_sequence_length((const char *) buf) != len)
                        ck_abort_msg("U+%04lX: length %zu, expected %zu", cp, utf8_sequence_length((const char *) buf),
                                     len);
        }
}
END_TEST

/* A JSON string as Python reads it back with json.loads() and
 * os.fsencode(): \udcXX is byte XX, \u00XX byte XX, \" and \\ as they
 * are, anything else as it is. Returns the length, or -1 when it is not
 * a string this encoder could have written. */
static int json_decode(const char *text, unsigned char *out) {
        const char *p = text;
        int n = 0;

        if (*p++ != '"')
                return -1;
        while (*p && *p != '"') {
                unsigned value;

                if (*p != '\\') {
                        out[n++] = (unsigned char) *p++;
                        continue;
                }
                p++;
                if (*p == '"' || *p == '\\') {
                        out[n++] = (unsigned char) *p++;
                        continue;
                }
                if (*p != 'u' || sscanf(p + 1, "%4x", &value) != 1 || strlen(p + 1) < 4)
                        return -1;
                if ((value >= 0xdc80 && value <= 0xdcff) || value < 0x20 || value == 0x7f)
                        out[n++] = (unsigned char) value;
                else
                        return -1;
                p += 5;
        }
        return *p == '"' && p[1] == '\0' ? n : -1;
}

static bool all_utf8(const char *s) {
        for (size_t len; *s; s += len)
                if ((len = utf8_oracle((const unsigned char *) s)) == 0)
                        return false;
        return true;
}

/* Every string of one or two bytes, and each with a third (0x80, 0xbf:
 * after the lead bytes E0-EF): valid UTF-8 out, the same bytes back. One
 * call per first and third byte takes the string of every second byte,
 * each short string ended by an 'x' so that none reads into the next. */
START_TEST(test_json_string_every_short_string) {
        static const unsigned char thirds[] = { 0, 0x80, 0xbf };
        unsigned char in[256 * 4 + 1], back[sizeof in];
        char *text = NULL;
        size_t size = 0;

        for (unsigned b0 = 1; b0 < 256; b0++)
                for (size_t k = 0; k < ARRAY_SIZE(thirds); k++) {
                        size_t in_len = 0;
                        FILE *f;
                        int n;

                        for (unsigned b1 = k == 0 ? 0 : 1; b1 < 256; b1++) {
                                in[in_len++] = (unsigned char) b0;
                                if (b1 != 0)
                                        in[in_len++] = (unsigned char) b1;
                                if (b1 != 0 && thirds[k] != 0)
                                        in[in_len++] = thirds[k];
                                in[in_len++] = 'x';
                        }
                        in[in_len] = '\0';
                        f = open_memstream(&text, &size);
                        ck_assert_ptr_nonnull(f);
                        json_string(f, (const char *) in);
                        ck_assert_int_eq(fclose(f), 0);
                        if (!all_utf8(text))
                                ck_abort_msg("lead %02x, third %02x: '%s' is not UTF-8", b0, thirds[k], text);
                        n = json_decode(text, back);
                        if (n != (int) in_len || memcmp(back, in, in_len) != 0)
                                ck_abort_msg("lead %02x, third %02x: '%s' does not read back", b0, thirds[k], text);
                        free(text);
                }
}
END_TEST

START_TEST(test_json_not_utf8) {
        struct bound_socket s[1];
        static const struct {
                const char *path, *want;
        } rows[] = {
                { "/tmp/\xff", "/tmp/\\udcff" },
                { "/tmp/\x80x", "/tmp/\\udc80x" },
                { "/tmp/caf\xe9", "/tmp/caf\\udce9" },                            /* Latin-1 */
                { "/tmp/\xc3\xa9\xc3", "/tmp/\xc3\xa9\\udcc3" },                  /* cut short */
                { "/tmp/\xc0\xaf", "/tmp/\\udcc0\\udcaf" },                       /* overlong '/' */
                { "/tmp/\xe0\x80\xaf", "/tmp/\\udce0\\udc80\\udcaf" },            /* overlong '/' */
                { "/tmp/\xed\xa0\x80", "/tmp/\\udced\\udca0\\udc80" },            /* U+D800 */
                { "/tmp/\xf4\x90\x80\x80", "/tmp/\\udcf4\\udc90\\udc80\\udc80" }, /* U+110000 */
                { "/tmp/\xf0\x9f\x98\x80", "/tmp/\xf0\x9f\x98\x80" },             /* U+1F600 */
                { "/tmp/\xef\xbf\xbf", "/tmp/\xef\xbf\xbf" },                     /* U+FFFF */
        };
        char *want = NULL;

        for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
                s[0] = sock_un(rows[i].path, SOCK_STREAM, "unknown");
                ck_assert_int_gt(asprintf(&want,
                                          "{\"pid\":1,\"child_pid\":2,\"sockets\":[{\"fd\":3,\"name\":\"unknown\","
                                          "\"family\":\"unix\",\"type\":\"stream\",\"address\":\"%s\","
                                          "\"port\":null,\"url\":\"unix:%s\"}]}\n",
                                          rows[i].want, rows[i].want),
                                 0);
                check_format(FORMAT_JSON, s, 1, 1, 2, want);
                free(want);
        }
}
END_TEST

/* ---- env ----------------------------------------------------------------- */

START_TEST(test_env_single) {
        struct bound_socket s[1];

        s[0] = sock_in("127.0.0.1", 41234, SOCK_STREAM, "unknown");
        check_format(FORMAT_ENV, s, 1, 10, 11,
                     "PREBIND_PORT=41234\n"
                     "PREBIND_HOST=127.0.0.1\n"
                     "PREBIND_ADDR=127.0.0.1:41234\n"
                     "PREBIND_URL=http://127.0.0.1:41234\n"
                     "PREBIND_FD=3\n"
                     "PREBIND_PID=10\n"
                     "PREBIND_CHILD_PID=11\n");

        s[0] = sock_in6("::", 8080, SOCK_STREAM, "unknown");
        check_format(FORMAT_ENV, s, 1, 10, 11,
                     "PREBIND_PORT=8080\n"
                     "PREBIND_HOST=::\n"
                     "PREBIND_ADDR=[::]:8080\n"
                     "PREBIND_URL=http://[::1]:8080\n"
                     "PREBIND_FD=3\n"
                     "PREBIND_PID=10\n"
                     "PREBIND_CHILD_PID=11\n");

        s[0] = sock_un("@app", SOCK_DGRAM, "unknown");
        check_format(FORMAT_ENV, s, 1, 10, 11,
                     "PREBIND_PORT=@app\n"
                     "PREBIND_HOST=@app\n"
                     "PREBIND_ADDR=@app\n"
                     "PREBIND_URL=unix:@app\n"
                     "PREBIND_FD=3\n"
                     "PREBIND_PID=10\n"
                     "PREBIND_CHILD_PID=11\n");
}
END_TEST

START_TEST(test_env_named) {
        struct bound_socket s[2];

        /* The first socket is "the" address, and again under its name. */
        s[0] = sock_in("127.0.0.1", 8080, SOCK_STREAM, "my-web.1");
        s[1] = sock_in6("::1", 9000, SOCK_STREAM, "Admin_2");
        check_format(FORMAT_ENV, s, 2, 10, 11,
                     "PREBIND_PORT=8080\n"
                     "PREBIND_HOST=127.0.0.1\n"
                     "PREBIND_ADDR=127.0.0.1:8080\n"
                     "PREBIND_URL=http://127.0.0.1:8080\n"
                     "PREBIND_FD=3\n"
                     "PREBIND_MY_WEB_1_PORT=8080\n"
                     "PREBIND_MY_WEB_1_HOST=127.0.0.1\n"
                     "PREBIND_MY_WEB_1_ADDR=127.0.0.1:8080\n"
                     "PREBIND_MY_WEB_1_URL=http://127.0.0.1:8080\n"
                     "PREBIND_MY_WEB_1_FD=3\n"
                     "PREBIND_ADMIN_2_PORT=9000\n"
                     "PREBIND_ADMIN_2_HOST=::1\n"
                     "PREBIND_ADMIN_2_ADDR=[::1]:9000\n"
                     "PREBIND_ADMIN_2_URL=http://[::1]:9000\n"
                     "PREBIND_ADMIN_2_FD=4\n"
                     "PREBIND_PID=10\n"
                     "PREBIND_CHILD_PID=11\n");
}
END_TEST

START_TEST(test_env_several) {
        struct bound_socket s[5];

        several(s);
        check_format(FORMAT_ENV, s, 5, 100, 101,
                     "PREBIND_PORT=41234\n"
                     "PREBIND_HOST=127.0.0.1\n"
                     "PREBIND_ADDR=127.0.0.1:41234\n"
                     "PREBIND_URL=http://127.0.0.1:41234\n"
                     "PREBIND_FD=3\n"
                     "PREBIND_WEB_PORT=41234\n"
                     "PREBIND_WEB_HOST=127.0.0.1\n"
                     "PREBIND_WEB_ADDR=127.0.0.1:41234\n"
                     "PREBIND_WEB_URL=http://127.0.0.1:41234\n"
                     "PREBIND_WEB_FD=3\n"
                     "PREBIND_SOCK_PORT=/run/app.sock\n"
                     "PREBIND_SOCK_HOST=/run/app.sock\n"
                     "PREBIND_SOCK_ADDR=/run/app.sock\n"
                     "PREBIND_SOCK_URL=unix:/run/app.sock\n"
                     "PREBIND_SOCK_FD=5\n"
                     "PREBIND_DNS_PORT=5353\n"
                     "PREBIND_DNS_HOST=0.0.0.0\n"
                     "PREBIND_DNS_ADDR=0.0.0.0:5353\n"
                     "PREBIND_DNS_URL=udp://127.0.0.1:5353\n"
                     "PREBIND_DNS_FD=7\n"
                     "PREBIND_PID=100\n"
                     "PREBIND_CHILD_PID=101\n");
}
END_TEST

START_TEST(test_env_empty) {
        check_format(FORMAT_ENV, NULL, 0, 10, 11, "PREBIND_PID=10\nPREBIND_CHILD_PID=11\n");
}
END_TEST

/* The per-name prefix of the first variable, for the mangling cases. */
static const struct {
        const char *name;
        const char *key;
} env_keys[] = {
        { "web", "PREBIND_WEB_PORT=" },
        { "my-web.1", "PREBIND_MY_WEB_1_PORT=" },
        { "Web_2", "PREBIND_WEB_2_PORT=" },
        { "a b", "PREBIND_A_B_PORT=" },
        { "9lives", "PREBIND_9LIVES_PORT=" },
        { "x", "PREBIND_X_PORT=" },
        { "~!@#$%^&*()=\"'\\", "PREBIND_________________PORT=" },
};

START_TEST(test_env_key_mangling) {
        struct bound_socket s[2];
        char *text = NULL, *want;

        s[0] = sock_in("127.0.0.1", 1, SOCK_STREAM, "unknown");
        s[1] = sock_in("127.0.0.1", 2, SOCK_STREAM, env_keys[_i].name);
        ck_assert_int_eq(format_addresses(FORMAT_ENV, s, 2, 1, 2, &text), 0);
        ck_assert_int_gt(asprintf(&want, "\n%s2\n", env_keys[_i].key), 0);
        ck_assert_msg(strstr(text, want), "'%s': no '%s' in:\n%s", env_keys[_i].name, env_keys[_i].key, text);
        free(want);
        free(text);
}
END_TEST

START_TEST(test_env_longest_name) {
        struct bound_socket s[2];
        char name[FDNAME_MAX + 1], key[FDNAME_MAX + 1];
        char *text = NULL, *want;

        memset(name, 'n', FDNAME_MAX);
        name[FDNAME_MAX] = '\0';
        memset(key, 'N', FDNAME_MAX);
        key[FDNAME_MAX] = '\0';
        s[0] = sock_in("127.0.0.1", 1, SOCK_STREAM, "unknown");
        s[1] = sock_in("127.0.0.1", 2, SOCK_STREAM, name);
        ck_assert_int_eq(format_addresses(FORMAT_ENV, s, 2, 1, 2, &text), 0);
        ck_assert_int_gt(asprintf(&want,
                                  "\nPREBIND_%s_PORT=2\nPREBIND_%s_HOST=127.0.0.1\n"
                                  "PREBIND_%s_ADDR=127.0.0.1:2\nPREBIND_%s_URL=http://127.0.0.1:2\n"
                                  "PREBIND_%s_FD=4\nPREBIND_PID=1\n",
                                  key, key, key, key, key),
                         0);
        ck_assert_ptr_nonnull(strstr(text, want));
        free(want);
        free(text);
}
END_TEST

START_TEST(test_env_quoting) {
        struct bound_socket s[1];

        /* A space: single-quoted for the shell. */
        s[0] = sock_un("/tmp/my dir/s.sock", SOCK_STREAM, "unknown");
        check_format(FORMAT_ENV, s, 1, 1, 2,
                     "PREBIND_PORT='/tmp/my dir/s.sock'\n"
                     "PREBIND_HOST='/tmp/my dir/s.sock'\n"
                     "PREBIND_ADDR='/tmp/my dir/s.sock'\n"
                     "PREBIND_URL='unix:/tmp/my dir/s.sock'\n"
                     "PREBIND_FD=3\n"
                     "PREBIND_PID=1\n"
                     "PREBIND_CHILD_PID=2\n");

        /* A single quote: closed, escaped, reopened. */
        s[0] = sock_un("/tmp/it's", SOCK_STREAM, "unknown");
        check_format(FORMAT_ENV, s, 1, 1, 2,
                     "PREBIND_PORT='/tmp/it'\\''s'\n"
                     "PREBIND_HOST='/tmp/it'\\''s'\n"
                     "PREBIND_ADDR='/tmp/it'\\''s'\n"
                     "PREBIND_URL='unix:/tmp/it'\\''s'\n"
                     "PREBIND_FD=3\n"
                     "PREBIND_PID=1\n"
                     "PREBIND_CHILD_PID=2\n");

        /* Other shell-special characters are quoted, the harmless ones are not. */
        s[0] = sock_un("/tmp/$HOME", SOCK_STREAM, "unknown");
        check_format(FORMAT_ENV, s, 1, 1, 2,
                     "PREBIND_PORT='/tmp/$HOME'\n"
                     "PREBIND_HOST='/tmp/$HOME'\n"
                     "PREBIND_ADDR='/tmp/$HOME'\n"
                     "PREBIND_URL='unix:/tmp/$HOME'\n"
                     "PREBIND_FD=3\n"
                     "PREBIND_PID=1\n"
                     "PREBIND_CHILD_PID=2\n");
        s[0] = sock_un("@a%b+c=d,e.f_g-h[i]", SOCK_STREAM, "unknown");
        check_format(FORMAT_ENV, s, 1, 1, 2,
                     "PREBIND_PORT=@a%b+c=d,e.f_g-h[i]\n"
                     "PREBIND_HOST=@a%b+c=d,e.f_g-h[i]\n"
                     "PREBIND_ADDR=@a%b+c=d,e.f_g-h[i]\n"
                     "PREBIND_URL=unix:@a%b+c=d,e.f_g-h[i]\n"
                     "PREBIND_FD=3\n"
                     "PREBIND_PID=1\n"
                     "PREBIND_CHILD_PID=2\n");
}
END_TEST

/* What sh(1) makes of the env format: source it, print one variable. */
static char *shell_value(const char *script, const char *variable) {
        char path[] = "/tmp/prebind-test-env-XXXXXX";
        char *command, *value;
        size_t size = 0;
        ssize_t n;
        FILE *f, *p;
        int fd;

        fd = mkstemp(path);
        ck_assert_int_ge(fd, 0);
        f = fdopen(fd, "w");
        ck_assert_ptr_nonnull(f);
        ck_assert_int_ge(fputs(script, f), 0);
        ck_assert_int_eq(fclose(f), 0);

        /* printf adds a '.', so a trailing newline in the value would show. */
        ck_assert_int_gt(asprintf(&command, "set -e; . %s; printf '%%s.' \"$%s\"", path, variable), 0);
        p = popen(command, "r");
        ck_assert_ptr_nonnull(p);
        value = NULL;
        n = getdelim(&value, &size, '\0', p);
        ck_assert_int_eq(pclose(p), 0);
        unlink(path);
        free(command);
        ck_assert_int_gt(n, 0);
        ck_assert_int_eq(value[n - 1], '.');
        value[n - 1] = '\0';
        return value;
}

START_TEST(test_env_shell_roundtrip) {
        static const char *const paths[] = {
                "/tmp/my dir/s.sock",
                "/tmp/it's",
                "/tmp/a b'c\"d$e`f\\g*h?i;j&k|l<m>n(o)p{q}r#s!t",
                "/tmp/x:~",
                "/tmp/~",
                "/tmp/caf\xc3\xa9",
                "/tmp/ends with '",
                "@a%b+c=d,e.f_g-h[i]",
        };
        struct bound_socket s[2];
        char *text, *value, *want;

        for (size_t i = 0; i < ARRAY_SIZE(paths); i++) {
                s[0] = sock_un(paths[i], SOCK_STREAM, "unknown");
                s[1] = sock_in6("::1", 9000, SOCK_STREAM, "my-web.1");
                ck_assert_int_eq(format_addresses(FORMAT_ENV, s, 2, 1, 2, &text), 0);

                value = shell_value(text, "PREBIND_PORT");
                ck_assert_str_eq(value, paths[i]);
                free(value);
                value = shell_value(text, "PREBIND_URL");
                ck_assert_int_gt(asprintf(&want, "unix:%s", paths[i]), 0);
                ck_assert_str_eq(value, want);
                free(want);
                free(value);
                value = shell_value(text, "PREBIND_MY_WEB_1_ADDR");
                ck_assert_str_eq(value, "[::1]:9000");
                free(value);
                value = shell_value(text, "PREBIND_MY_WEB_1_URL");
                ck_assert_str_eq(value, "http://[::1]:9000");
                free(value);
                free(text);
        }
}
END_TEST

/* ---- names of formats and fields ----------------------------------------- */

START_TEST(test_output_format_strings) {
        static const struct {
                const char *s;
                enum output_format f;
        } names[] = {
                { "port", FORMAT_PORT }, { "addr", FORMAT_ADDR }, { "url", FORMAT_URL },
                { "json", FORMAT_JSON }, { "env", FORMAT_ENV },
        };

        ck_assert_uint_eq(ARRAY_SIZE(names), _FORMAT_MAX);
        for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
                ck_assert_int_eq(output_format_from_string(names[i].s), names[i].f);
                ck_assert_pstr_eq(output_format_to_string(names[i].f), names[i].s);
        }
        ck_assert_int_eq(output_format_from_string(NULL), _FORMAT_INVALID);
        ck_assert_int_eq(output_format_from_string(""), _FORMAT_INVALID);
        ck_assert_int_eq(output_format_from_string("PORT"), _FORMAT_INVALID);
        ck_assert_int_eq(output_format_from_string("Json"), _FORMAT_INVALID);
        ck_assert_int_eq(output_format_from_string("jsonl"), _FORMAT_INVALID);
        ck_assert_int_eq(output_format_from_string("js"), _FORMAT_INVALID);
        ck_assert_int_eq(output_format_from_string(" port"), _FORMAT_INVALID);
        ck_assert_int_eq(output_format_from_string("port "), _FORMAT_INVALID);
        ck_assert_int_eq(output_format_from_string("address"), _FORMAT_INVALID);
        ck_assert_int_eq(_FORMAT_INVALID, -EINVAL);

        ck_assert_ptr_null(output_format_to_string(_FORMAT_MAX));
        ck_assert_ptr_null(output_format_to_string(_FORMAT_INVALID));
        ck_assert_ptr_null(output_format_to_string((enum output_format) - 1));
        ck_assert_ptr_null(output_format_to_string((enum output_format) 100));
}
END_TEST

START_TEST(test_socket_field_strings) {
        ck_assert_int_eq(socket_field_from_string("port", 4), FIELD_PORT);
        ck_assert_int_eq(socket_field_from_string("host", 4), FIELD_HOST);
        ck_assert_int_eq(socket_field_from_string("addr", 4), FIELD_ADDR);
        ck_assert_int_eq(socket_field_from_string("url", 3), FIELD_URL);
        ck_assert_int_eq(socket_field_from_string("fd", 2), FIELD_FD);
        ck_assert_int_eq(socket_field_from_string("name", 4), FIELD_NAME);
        /* Only len bytes count: the text need not end there. */
        ck_assert_int_eq(socket_field_from_string("port}", 4), FIELD_PORT);
        ck_assert_int_eq(socket_field_from_string("urlx", 3), FIELD_URL);

        ck_assert_int_eq(socket_field_from_string("por", 3), _FIELD_INVALID);
        ck_assert_int_eq(socket_field_from_string("port", 3), _FIELD_INVALID);
        ck_assert_int_eq(socket_field_from_string("ports", 5), _FIELD_INVALID);
        ck_assert_int_eq(socket_field_from_string("", 0), _FIELD_INVALID);
        ck_assert_int_eq(socket_field_from_string("PORT", 4), _FIELD_INVALID);
        ck_assert_int_eq(socket_field_from_string("Url", 3), _FIELD_INVALID);
        ck_assert_int_eq(socket_field_from_string("path", 4), _FIELD_INVALID);
        ck_assert_int_eq(socket_field_from_string("address", 7), _FIELD_INVALID);
        ck_assert_int_eq(_FIELD_INVALID, -EINVAL);
}
END_TEST

START_TEST(test_socket_field_format) {
        struct bound_socket s[5];
        char buf[FIELD_STRING_MAX];

        several(s);
        ck_assert_str_eq(socket_field_format(s, 0, FIELD_FD, buf, sizeof buf), "3");
        ck_assert_str_eq(socket_field_format(s, 4, FIELD_FD, buf, sizeof buf), "7");
        ck_assert_str_eq(socket_field_format(s, 0, FIELD_NAME, buf, sizeof buf), "web");
        ck_assert_str_eq(socket_field_format(s, 1, FIELD_NAME, buf, sizeof buf), "unknown");
        ck_assert_str_eq(socket_field_format(s, 1, FIELD_HOST, buf, sizeof buf), "::1");
        ck_assert_str_eq(socket_field_format(s, 1, FIELD_ADDR, buf, sizeof buf), "[::1]:41235");
        ck_assert_str_eq(socket_field_format(s, 2, FIELD_PORT, buf, sizeof buf), "/run/app.sock");
        ck_assert_str_eq(socket_field_format(s, 2, FIELD_HOST, buf, sizeof buf), "/run/app.sock");
        ck_assert_str_eq(socket_field_format(s, 3, FIELD_PORT, buf, sizeof buf), "@app");
        ck_assert_str_eq(socket_field_format(s, 3, FIELD_URL, buf, sizeof buf), "unix:@app");
        ck_assert_str_eq(socket_field_format(s, 4, FIELD_PORT, buf, sizeof buf), "5353");
        ck_assert_str_eq(socket_field_format(s, 4, FIELD_HOST, buf, sizeof buf), "0.0.0.0");
        ck_assert_str_eq(socket_field_format(s, 4, FIELD_ADDR, buf, sizeof buf), "0.0.0.0:5353");
        ck_assert_str_eq(socket_field_format(s, 4, FIELD_URL, buf, sizeof buf), "udp://127.0.0.1:5353");
        /* The buffer is returned, filled. */
        ck_assert_ptr_eq(socket_field_format(s, 0, FIELD_PORT, buf, sizeof buf), buf);
        ck_assert_str_eq(buf, "41234");
}
END_TEST

START_TEST(test_socket_field_format_longest) {
        /* The longest field: a full abstract name in a url ("unix:@" + 107). */
        struct bound_socket s;
        char path[sizeof s.addr.un.sun_path + 1];
        char buf[FIELD_STRING_MAX], want[sizeof path + 5];

        memset(path, 'z', sizeof path - 1);
        path[0] = '@';
        path[sizeof path - 1] = '\0';
        s = sock_un(path, SOCK_STREAM, "unknown");
        snprintf(want, sizeof want, "unix:%s", path);
        ck_assert_str_eq(socket_field_format(&s, 0, FIELD_URL, buf, sizeof buf), want);
        ck_assert_uint_eq(strlen(buf), 5 + 108);
}
END_TEST

static Suite *format_suite(void) {
        Suite *s = suite_create("format");
        TCase *tc;

        tc = tcase_create("port");
        tcase_add_test(tc, test_port);
        suite_add_tcase(s, tc);

        tc = tcase_create("addr");
        tcase_add_test(tc, test_addr);
        suite_add_tcase(s, tc);

        tc = tcase_create("url");
        tcase_add_test(tc, test_url);
        suite_add_tcase(s, tc);

        tc = tcase_create("json");
        tcase_add_test(tc, test_json_ipv4);
        tcase_add_test(tc, test_json_ipv6_wildcard);
        tcase_add_test(tc, test_json_unix);
        tcase_add_test(tc, test_json_several);
        tcase_add_test(tc, test_json_empty);
        tcase_add_test(tc, test_json_escaping);
        tcase_add_test(tc, test_json_not_utf8);
        tcase_add_test(tc, test_json_string_every_short_string);
        suite_add_tcase(s, tc);

        tc = tcase_create("utf8");
        /* 2.4 million sequences and every code point: seconds under valgrind. */
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, test_utf8_every_sequence);
        tcase_add_test(tc, test_utf8_every_code_point);
        suite_add_tcase(s, tc);

        tc = tcase_create("env");
        tcase_add_test(tc, test_env_single);
        tcase_add_test(tc, test_env_named);
        tcase_add_test(tc, test_env_several);
        tcase_add_test(tc, test_env_empty);
        tcase_add_loop_test(tc, test_env_key_mangling, 0, ARRAY_SIZE(env_keys));
        tcase_add_test(tc, test_env_longest_name);
        tcase_add_test(tc, test_env_quoting);
        tcase_add_test(tc, test_env_shell_roundtrip);
        suite_add_tcase(s, tc);

        tc = tcase_create("names");
        tcase_add_test(tc, test_output_format_strings);
        tcase_add_test(tc, test_socket_field_strings);
        tcase_add_test(tc, test_socket_field_format);
        tcase_add_test(tc, test_socket_field_format_longest);
        suite_add_tcase(s, tc);

        return s;
}

int main(void) {
        return unit_run(format_suite());
}
