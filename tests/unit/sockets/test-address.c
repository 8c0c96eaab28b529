/* SPDX-License-Identifier: MIT */
/* The address grammar (address.c): listen_spec_parse(), fdname_is_valid()
 * and the sockaddr printers. Tables of cases run as check
 * loop tests: a failure names the function and the row ("…:valid_inet:3"). */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <net/if.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "address.h"
#include "unit.h"

#define SUN_PATH_OFFSET offsetof(struct sockaddr_un, sun_path)
#define SUN_PATH_SIZE sizeof(((struct sockaddr_un *) NULL)->sun_path)

/* In the tables, the scope id of "%lo", which is only known at run time. */
#define SCOPE_LO (-1)

struct valid_case {
        const char *text;
        int family;
        int type;
        const char *host; /* inet: numeric address; unix: "/path" or "@name" */
        int port;         /* -1 for unix */
        int64_t scope;    /* IPv6 scope id, or SCOPE_LO */
        const char *name; /* NULL: unnamed */
};

struct invalid_case {
        const char *text;
        int error;
};

static void check_valid(const struct valid_case *c) {
        struct listen_spec spec;
        int r;

        memset(&spec, 0, sizeof spec);
        r = listen_spec_parse(c->text, &spec);
        ck_assert_msg(r == 0, "'%s': expected success, got %d (%s)", c->text, r, strerror(-r));
        ck_assert_ptr_eq(spec.text, c->text);
        ck_assert_int_eq(spec.type, c->type);
        ck_assert_int_eq(spec.addr.sa.sa_family, c->family);
        ck_assert_pstr_eq(spec.name, c->name);

        switch (c->family) {
        case AF_INET: {
                struct in_addr want;

                ck_assert_int_eq(inet_pton(AF_INET, c->host, &want), 1);
                ck_assert_uint_eq(spec.addr_len, sizeof(struct sockaddr_in));
                ck_assert_uint_eq(spec.addr.in.sin_addr.s_addr, want.s_addr);
                ck_assert_int_eq(ntohs(spec.addr.in.sin_port), c->port);
                ck_assert_int_eq(sockaddr_port(&spec.addr), c->port);
                ck_assert(!sockaddr_is_abstract(&spec.addr, spec.addr_len));
                break;
        }
        case AF_INET6: {
                struct in6_addr want;
                uint32_t scope = c->scope == SCOPE_LO ? if_nametoindex("lo") : (uint32_t) c->scope;

                ck_assert_int_eq(inet_pton(AF_INET6, c->host, &want), 1);
                ck_assert_uint_eq(spec.addr_len, sizeof(struct sockaddr_in6));
                ck_assert_mem_eq(&spec.addr.in6.sin6_addr, &want, sizeof want);
                ck_assert_int_eq(ntohs(spec.addr.in6.sin6_port), c->port);
                ck_assert_uint_eq(spec.addr.in6.sin6_scope_id, scope);
                ck_assert_uint_eq(spec.addr.in6.sin6_flowinfo, 0);
                ck_assert_int_eq(sockaddr_port(&spec.addr), c->port);
                break;
        }
        case AF_UNIX: {
                size_t len = strlen(c->host);

                if (c->host[0] == '@') {
                        /* Abstract: a leading NUL, and no trailing one counted. */
                        ck_assert_uint_eq(spec.addr_len, SUN_PATH_OFFSET + len);
                        ck_assert_int_eq(spec.addr.un.sun_path[0], '\0');
                        ck_assert_mem_eq(spec.addr.un.sun_path + 1, c->host + 1, len - 1);
                        ck_assert(sockaddr_is_abstract(&spec.addr, spec.addr_len));
                } else {
                        ck_assert_uint_eq(spec.addr_len, SUN_PATH_OFFSET + len + 1);
                        ck_assert_str_eq(spec.addr.un.sun_path, c->host);
                        ck_assert(!sockaddr_is_abstract(&spec.addr, spec.addr_len));
                }
                ck_assert_int_eq(sockaddr_port(&spec.addr), -1);
                break;
        }
        default:
                ck_abort_msg("bad table row for '%s'", c->text);
        }
        listen_spec_done(&spec);
        ck_assert_ptr_null(spec.name);
}

static void check_invalid(const struct invalid_case *c) {
        struct listen_spec spec, before;
        int r;

        /* *ret is untouched on failure. */
        memset(&spec, 0x5a, sizeof spec);
        before = spec;
        r = listen_spec_parse(c->text, &spec);
        ck_assert_msg(r == c->error, "'%s': expected %d (%s), got %d (%s)", c->text, c->error, strerror(-c->error), r,
                      r < 0 ? strerror(-r) : "success");
        ck_assert_mem_eq(&spec, &before, sizeof spec);
}

/* ---- inet ---------------------------------------------------------------- */

static const struct valid_case valid_inet[] = {
        { "80", AF_INET, SOCK_STREAM, "127.0.0.1", 80, 0, NULL },
        { "0", AF_INET, SOCK_STREAM, "127.0.0.1", 0, 0, NULL },
        { "65535", AF_INET, SOCK_STREAM, "127.0.0.1", 65535, 0, NULL },
        { "00080", AF_INET, SOCK_STREAM, "127.0.0.1", 80, 0, NULL }, /* decimal, not octal */
        { "127.0.0.1:8080", AF_INET, SOCK_STREAM, "127.0.0.1", 8080, 0, NULL },
        { "10.1.2.3:1", AF_INET, SOCK_STREAM, "10.1.2.3", 1, 0, NULL },
        { "0.0.0.0:0", AF_INET, SOCK_STREAM, "0.0.0.0", 0, 0, NULL },
        { "255.255.255.255:65535", AF_INET, SOCK_STREAM, "255.255.255.255", 65535, 0, NULL },
        { "localhost:80", AF_INET, SOCK_STREAM, "127.0.0.1", 80, 0, NULL },
        { "localhost:0", AF_INET, SOCK_STREAM, "127.0.0.1", 0, 0, NULL },
        { "*:80", AF_INET, SOCK_STREAM, "0.0.0.0", 80, 0, NULL },
        { "*:0", AF_INET, SOCK_STREAM, "0.0.0.0", 0, 0, NULL },
        { "tcp:80", AF_INET, SOCK_STREAM, "127.0.0.1", 80, 0, NULL },
        { "tcp:localhost:443", AF_INET, SOCK_STREAM, "127.0.0.1", 443, 0, NULL },
        { "tcp:*:22", AF_INET, SOCK_STREAM, "0.0.0.0", 22, 0, NULL },
        { "tcp:192.168.0.1:65535", AF_INET, SOCK_STREAM, "192.168.0.1", 65535, 0, NULL },
        { "udp:53", AF_INET, SOCK_DGRAM, "127.0.0.1", 53, 0, NULL },
        { "udp:0", AF_INET, SOCK_DGRAM, "127.0.0.1", 0, 0, NULL },
        { "udp:0.0.0.0:5353", AF_INET, SOCK_DGRAM, "0.0.0.0", 5353, 0, NULL },
        { "udp:*:0", AF_INET, SOCK_DGRAM, "0.0.0.0", 0, 0, NULL },
        { "udp:localhost:1", AF_INET, SOCK_DGRAM, "127.0.0.1", 1, 0, NULL },
};

START_TEST(test_valid_inet) {
        check_valid(&valid_inet[_i]);
}
END_TEST

static const struct valid_case valid_inet6[] = {
        { "[::1]:80", AF_INET6, SOCK_STREAM, "::1", 80, 0, NULL },
        { "[::1]:0", AF_INET6, SOCK_STREAM, "::1", 0, 0, NULL },
        { "[::]:0", AF_INET6, SOCK_STREAM, "::", 0, 0, NULL },
        { "[::]:65535", AF_INET6, SOCK_STREAM, "::", 65535, 0, NULL },
        { "[2001:db8::42]:8443", AF_INET6, SOCK_STREAM, "2001:db8::42", 8443, 0, NULL },
        { "[2001:DB8:0:0:0:0:0:1]:1", AF_INET6, SOCK_STREAM, "2001:db8::1", 1, 0, NULL },
        { "[::ffff:127.0.0.1]:80", AF_INET6, SOCK_STREAM, "::ffff:127.0.0.1", 80, 0, NULL },
        { "[fe80::1%lo]:80", AF_INET6, SOCK_STREAM, "fe80::1", 80, SCOPE_LO, NULL },
        { "[fe80::1%1]:80", AF_INET6, SOCK_STREAM, "fe80::1", 80, 1, NULL },
        { "[fe80::1%4294967295]:0", AF_INET6, SOCK_STREAM, "fe80::1", 0, 4294967295, NULL },
        { "[::1%lo]:0", AF_INET6, SOCK_STREAM, "::1", 0, SCOPE_LO, NULL },
        { "tcp:[::1]:80", AF_INET6, SOCK_STREAM, "::1", 80, 0, NULL },
        { "tcp:[::]:0", AF_INET6, SOCK_STREAM, "::", 0, 0, NULL },
        { "udp:[::1]:53", AF_INET6, SOCK_DGRAM, "::1", 53, 0, NULL },
        { "udp:[::]:0", AF_INET6, SOCK_DGRAM, "::", 0, 0, NULL },
        { "udp:[fe80::2%lo]:547", AF_INET6, SOCK_DGRAM, "fe80::2", 547, SCOPE_LO, NULL },
};

START_TEST(test_valid_inet6) {
        check_valid(&valid_inet6[_i]);
}
END_TEST

static const struct invalid_case invalid_inet[] = {
        { "", -EINVAL },
        { "-1", -EINVAL },
        { "+80", -EINVAL },
        { " 80", -EINVAL },
        { "80 ", -EINVAL },
        { "8o", -EINVAL },
        { "0x50", -EINVAL },
        { "80.0", -EINVAL },
        { "65536", -ERANGE },
        { "99999", -ERANGE },
        { "18446744073709551616", -ERANGE },
        { "127.0.0.1:65536", -ERANGE },
        { "localhost:65536", -ERANGE },
        { "tcp:65536", -ERANGE },
        { "udp:65536", -ERANGE },
        { "[::1]:65536", -ERANGE },
        { "1.2.3:80", -EINVAL },
        { "1.2.3.4.5:80", -EINVAL },
        { "256.0.0.1:80", -EINVAL },
        { "127.0.0.1:", -EINVAL },
        { "127.0.0.1:-1", -EINVAL },
        { "127.0.0.1:80:80", -EINVAL },
        { "127.0.0.1", -EINVAL },
        { "localhost:", -EINVAL },
        { "localhost", -EINVAL },
        { "example.com:80", -EINVAL }, /* no name resolution */
        { ":80", -EINVAL },
        { "*", -EINVAL },
        { "*:", -EINVAL },
        { "::1:80", -EINVAL }, /* IPv6 needs brackets */
        { "::1", -EINVAL },
        { "[::1]", -EINVAL },
        { "[::1]80", -EINVAL },
        { "[::1]:", -EINVAL },
        { "[::1]:-1", -EINVAL },
        { "[::1]: 80", -EINVAL },
        { "[::1]:80x", -EINVAL },
        { "[::1", -EINVAL },
        { "[]:80", -EINVAL },
        { "[1.2.3.4]:80", -EINVAL },
        { "[::1%]:80", -EINVAL },
        { "[fe80::1%nosuchif0]:80", -ENODEV },
        { "[fe80::1%4294967296]:80", -ENODEV },
        { "tcp:", -EINVAL },
        { "udp:", -EINVAL },
        { "tcp:/run/x.sock", -EINVAL },
        { "tcp:@x", -EINVAL },
        { "sctp:80", -EINVAL },
        { "TCP:80", -EINVAL },
};

START_TEST(test_invalid_inet) {
        check_invalid(&invalid_inet[_i]);
}
END_TEST

/* ---- unix ---------------------------------------------------------------- */

static const struct valid_case valid_unix[] = {
        { "/run/app.sock", AF_UNIX, SOCK_STREAM, "/run/app.sock", -1, 0, NULL },
        { "unix:/run/app.sock", AF_UNIX, SOCK_STREAM, "/run/app.sock", -1, 0, NULL },
        { "/a", AF_UNIX, SOCK_STREAM, "/a", -1, 0, NULL },
        { "unix:/a", AF_UNIX, SOCK_STREAM, "/a", -1, 0, NULL },
        { "/tmp/with space", AF_UNIX, SOCK_STREAM, "/tmp/with space", -1, 0, NULL },
        { "/tmp/a:b", AF_UNIX, SOCK_STREAM, "/tmp/a:b", -1, 0, NULL },
        { "@app", AF_UNIX, SOCK_STREAM, "@app", -1, 0, NULL },
        { "@a", AF_UNIX, SOCK_STREAM, "@a", -1, 0, NULL },
        { "@a:b", AF_UNIX, SOCK_STREAM, "@a:b", -1, 0, NULL },
        { "unix:@x", AF_UNIX, SOCK_STREAM, "@x", -1, 0, NULL },
        { "unix:@app", AF_UNIX, SOCK_STREAM, "@app", -1, 0, NULL },
        { "udp:/run/dgram.sock", AF_UNIX, SOCK_DGRAM, "/run/dgram.sock", -1, 0, NULL },
        { "udp:@dgram", AF_UNIX, SOCK_DGRAM, "@dgram", -1, 0, NULL },
};

START_TEST(test_valid_unix) {
        check_valid(&valid_unix[_i]);
}
END_TEST

static const struct invalid_case invalid_unix[] = {
        { "@", -EINVAL },      { "/", -EINVAL },     { "unix:", -EINVAL },
        { "unix:@", -EINVAL }, { "udp:@", -EINVAL }, { "udp:/", -EINVAL },
};

START_TEST(test_invalid_unix) {
        check_invalid(&invalid_unix[_i]);
}
END_TEST

/* A string of prefix followed by fill up to len characters in all. */
static char *make_string(const char *prefix, char fill, size_t len) {
        char *s = malloc(len + 1);

        ck_assert_ptr_nonnull(s);
        memset(s, fill, len);
        memcpy(s, prefix, strlen(prefix));
        s[len] = '\0';
        return s;
}

START_TEST(test_unix_path_length) {
        /* sun_path holds 108 bytes: a path of 107 and its NUL. */
        char *ok = make_string("/", 'p', SUN_PATH_SIZE - 1);
        char *too_long = make_string("/", 'p', SUN_PATH_SIZE);
        struct valid_case c = { ok, AF_UNIX, SOCK_STREAM, ok, -1, 0, NULL };
        struct listen_spec spec;

        ck_assert_uint_eq(strlen(ok), 107);
        check_valid(&c);
        ck_assert_int_eq(listen_spec_parse(too_long, &spec), -ENAMETOOLONG);
        free(ok);
        free(too_long);

        /* The same limit through the prefixes. */
        ok = make_string("unix:/", 'p', 5 + SUN_PATH_SIZE - 1);
        too_long = make_string("unix:/", 'p', 5 + SUN_PATH_SIZE);
        c = (struct valid_case) { ok, AF_UNIX, SOCK_STREAM, ok + 5, -1, 0, NULL };
        check_valid(&c);
        ck_assert_int_eq(listen_spec_parse(too_long, &spec), -ENAMETOOLONG);
        free(ok);
        free(too_long);

        ok = make_string("udp:/", 'p', 4 + SUN_PATH_SIZE - 1);
        too_long = make_string("udp:/", 'p', 4 + SUN_PATH_SIZE);
        c = (struct valid_case) { ok, AF_UNIX, SOCK_DGRAM, ok + 4, -1, 0, NULL };
        check_valid(&c);
        ck_assert_int_eq(listen_spec_parse(too_long, &spec), -ENAMETOOLONG);
        free(ok);
        free(too_long);
}
END_TEST

START_TEST(test_unix_abstract_length) {
        /* An abstract name has no NUL at the end: '@' (the leading NUL)
         * and 107 bytes fill sun_path. */
        char *ok = make_string("@", 'a', SUN_PATH_SIZE);
        char *too_long = make_string("@", 'a', SUN_PATH_SIZE + 1);
        struct valid_case c = { ok, AF_UNIX, SOCK_STREAM, ok, -1, 0, NULL };
        struct listen_spec spec;

        check_valid(&c);
        ck_assert_int_eq(listen_spec_parse(too_long, &spec), -ENAMETOOLONG);
        free(ok);
        free(too_long);

        ok = make_string("unix:@", 'a', 5 + SUN_PATH_SIZE);
        too_long = make_string("unix:@", 'a', 5 + SUN_PATH_SIZE + 1);
        c = (struct valid_case) { ok, AF_UNIX, SOCK_STREAM, ok + 5, -1, 0, NULL };
        check_valid(&c);
        ck_assert_int_eq(listen_spec_parse(too_long, &spec), -ENAMETOOLONG);
        free(ok);
        free(too_long);
}
END_TEST

/* BUG (reported): the grammar is "unix:/path" or "unix:@name" (prebind(1),
 * SPEC), and "udp:" takes only those two; but "unix:" takes anything as
 * a path relative to the working directory, so a typo such as
 * "unix:[::1]:80" silently creates a socket file named "[::1]:80". */
START_TEST(test_bug_unix_relative_path) {
        struct listen_spec spec;

        ck_assert_int_eq(listen_spec_parse("udp:rel.sock", &spec), -EINVAL);
        ck_assert_int_eq(listen_spec_parse("unix:rel.sock", &spec), -EINVAL);
        ck_assert_int_eq(listen_spec_parse("unix:[::1]:80", &spec), -EINVAL);
}
END_TEST

START_TEST(test_null_text) {
        struct listen_spec spec;

        ck_assert_int_eq(listen_spec_parse(NULL, &spec), -EINVAL);
}
END_TEST

/* ---- NAME= --------------------------------------------------------------- */

static const struct valid_case valid_named[] = {
        { "web=80", AF_INET, SOCK_STREAM, "127.0.0.1", 80, 0, "web" },
        { "my-web.1=127.0.0.1:8080", AF_INET, SOCK_STREAM, "127.0.0.1", 8080, 0, "my-web.1" },
        { "web=tcp:[::1]:0", AF_INET6, SOCK_STREAM, "::1", 0, 0, "web" },
        { "web=[::]:0", AF_INET6, SOCK_STREAM, "::", 0, 0, "web" },
        { "dns=udp:53", AF_INET, SOCK_DGRAM, "127.0.0.1", 53, 0, "dns" },
        { "sock=/run/app.sock", AF_UNIX, SOCK_STREAM, "/run/app.sock", -1, 0, "sock" },
        { "sock=unix:/run/app.sock", AF_UNIX, SOCK_STREAM, "/run/app.sock", -1, 0, "sock" },
        { "abs=@app", AF_UNIX, SOCK_STREAM, "@app", -1, 0, "abs" },
        { "abs=unix:@app", AF_UNIX, SOCK_STREAM, "@app", -1, 0, "abs" },
        { "log=udp:/run/log.sock", AF_UNIX, SOCK_DGRAM, "/run/log.sock", -1, 0, "log" },
        { "a b=80", AF_INET, SOCK_STREAM, "127.0.0.1", 80, 0, "a b" }, /* printable, as systemd */
        { "web@x=80", AF_INET, SOCK_STREAM, "127.0.0.1", 80, 0, "web@x" },
        { "80=81", AF_INET, SOCK_STREAM, "127.0.0.1", 81, 0, "80" },
        { "unknown=80", AF_INET, SOCK_STREAM, "127.0.0.1", 80, 0, "unknown" },
        { "~!#$%^&*()=80", AF_INET, SOCK_STREAM, "127.0.0.1", 80, 0, "~!#$%^&*()" },
        /* Not names: the '=' belongs to the address. */
        { "/tmp/a=b", AF_UNIX, SOCK_STREAM, "/tmp/a=b", -1, 0, NULL },
        { "@a=b", AF_UNIX, SOCK_STREAM, "@a=b", -1, 0, NULL },
        { "unix:/tmp/a=b", AF_UNIX, SOCK_STREAM, "/tmp/a=b", -1, 0, NULL },
        { "unix:@a=b", AF_UNIX, SOCK_STREAM, "@a=b", -1, 0, NULL },
        { "udp:/tmp/a=b", AF_UNIX, SOCK_DGRAM, "/tmp/a=b", -1, 0, NULL },
        { "web=/tmp/a=b", AF_UNIX, SOCK_STREAM, "/tmp/a=b", -1, 0, "web" },
        { "web=@a=b", AF_UNIX, SOCK_STREAM, "@a=b", -1, 0, "web" },
};

START_TEST(test_valid_named) {
        check_valid(&valid_named[_i]);
}
END_TEST

static const struct invalid_case invalid_named[] = {
        { "=80", -EINVAL },
        { "web=", -EINVAL },
        { "x=y=80", -EINVAL },
        { "a:b=80", -EINVAL },
        { "a\tb=80", -EINVAL },
        { "a\nb=80", -EINVAL },
        { "\x7f"
          "=80",
          -EINVAL },
        { "w\xc3\xa9"
          "b=80",
          -EINVAL },
        { "web=65536", -ERANGE },
        { "web=[fe80::1%nosuchif0]:80", -ENODEV },
};

START_TEST(test_invalid_named) {
        check_invalid(&invalid_named[_i]);
}
END_TEST

START_TEST(test_name_length) {
        char *name = make_string("", 'n', FDNAME_MAX);
        char *text;
        struct valid_case c = { NULL, AF_INET, SOCK_STREAM, "127.0.0.1", 80, 0, name };
        struct listen_spec spec;

        ck_assert_int_gt(asprintf(&text, "%s=80", name), 0);
        c.text = text;
        check_valid(&c);
        free(text);

        ck_assert_int_gt(asprintf(&text, "%sn=80", name), 0);
        ck_assert_int_eq(listen_spec_parse(text, &spec), -EINVAL);
        free(text);
        free(name);
}
END_TEST

START_TEST(test_fdname_is_valid) {
        char *name = make_string("", 'x', FDNAME_MAX);
        char *longer = make_string("", 'x', FDNAME_MAX + 1);

        ck_assert(fdname_is_valid("web"));
        ck_assert(fdname_is_valid("a"));
        ck_assert(fdname_is_valid("unknown"));
        ck_assert(fdname_is_valid("my-web.1"));
        ck_assert(fdname_is_valid(" "));
        ck_assert(fdname_is_valid("a b"));
        ck_assert(fdname_is_valid("=@/~!\"'\\{}[]"));
        ck_assert(fdname_is_valid(name));
        ck_assert_uint_eq(strlen(name), 255);

        ck_assert(!fdname_is_valid(NULL));
        ck_assert(!fdname_is_valid(""));
        ck_assert(!fdname_is_valid(longer));
        ck_assert(!fdname_is_valid(":"));
        ck_assert(!fdname_is_valid("a:b"));
        ck_assert(!fdname_is_valid("web:"));
        ck_assert(!fdname_is_valid("\t"));
        ck_assert(!fdname_is_valid("a\nb"));
        ck_assert(!fdname_is_valid("a\x1f"));
        ck_assert(!fdname_is_valid("\x7f"));
        ck_assert(!fdname_is_valid("caf\xc3\xa9"));
        ck_assert(!fdname_is_valid("\x80"));
        ck_assert(!fdname_is_valid("\xff"));
        free(name);
        free(longer);
}
END_TEST

/* BUG (reported, see test-parse.c): "-l 70000x" is reported as "port out
 * of range" rather than "invalid address", because parse_uint() returns
 * -ERANGE for a non-number whose leading digits exceed the range. */
START_TEST(test_bug_port_syntax_before_range) {
        struct listen_spec spec;

        ck_assert_int_eq(listen_spec_parse("70000x", &spec), -EINVAL);
        ck_assert_int_eq(listen_spec_parse("127.0.0.1:99999-", &spec), -EINVAL);
        ck_assert_int_eq(listen_spec_parse("[::1]:123456a", &spec), -EINVAL);
}
END_TEST

/* ---- sockaddr printers --------------------------------------------------- */

static union sockaddr_any make_in(const char *host, int port, socklen_t *ret_len) {
        union sockaddr_any a;

        memset(&a, 0, sizeof a);
        a.in.sin_family = AF_INET;
        a.in.sin_port = htons((uint16_t) port);
        ck_assert_int_eq(inet_pton(AF_INET, host, &a.in.sin_addr), 1);
        *ret_len = sizeof a.in;
        return a;
}

static union sockaddr_any make_in6(const char *host, int port, uint32_t scope, socklen_t *ret_len) {
        union sockaddr_any a;

        memset(&a, 0, sizeof a);
        a.in6.sin6_family = AF_INET6;
        a.in6.sin6_port = htons((uint16_t) port);
        a.in6.sin6_scope_id = scope;
        ck_assert_int_eq(inet_pton(AF_INET6, host, &a.in6.sin6_addr), 1);
        *ret_len = sizeof a.in6;
        return a;
}

/* A unix address of len bytes of sun_path, copied from path (which may
 * hold NULs: "\0name" is abstract). */
static union sockaddr_any make_un(const char *path, size_t len, socklen_t *ret_len) {
        union sockaddr_any a;

        memset(&a, 0, sizeof a);
        a.un.sun_family = AF_UNIX;
        memcpy(a.un.sun_path, path, len);
        *ret_len = (socklen_t) (SUN_PATH_OFFSET + len);
        return a;
}

static void check_strings(const union sockaddr_any *a, socklen_t len, const char *want_host, const char *want_addr,
                          int want_port) {
        char buf[ADDRESS_STRING_MAX];

        memset(buf, 'X', sizeof buf);
        ck_assert_ptr_eq(sockaddr_host_to_string(a, len, buf, sizeof buf), buf);
        ck_assert_str_eq(buf, want_host);
        memset(buf, 'X', sizeof buf);
        ck_assert_ptr_eq(sockaddr_to_string(a, len, buf, sizeof buf), buf);
        ck_assert_str_eq(buf, want_addr);
        ck_assert_int_eq(sockaddr_port(a), want_port);
}

START_TEST(test_sockaddr_inet) {
        socklen_t len;
        union sockaddr_any a;

        a = make_in("127.0.0.1", 80, &len);
        check_strings(&a, len, "127.0.0.1", "127.0.0.1:80", 80);
        a = make_in("0.0.0.0", 0, &len);
        check_strings(&a, len, "0.0.0.0", "0.0.0.0:0", 0);
        a = make_in("255.255.255.255", 65535, &len);
        check_strings(&a, len, "255.255.255.255", "255.255.255.255:65535", 65535);
        a = make_in("10.0.0.1", 41234, &len);
        check_strings(&a, len, "10.0.0.1", "10.0.0.1:41234", 41234);
        ck_assert(!sockaddr_is_abstract(&a, len));
}
END_TEST

START_TEST(test_sockaddr_inet6) {
        socklen_t len;
        union sockaddr_any a;

        a = make_in6("::1", 443, 0, &len);
        check_strings(&a, len, "::1", "[::1]:443", 443);
        a = make_in6("::", 0, 0, &len);
        check_strings(&a, len, "::", "[::]:0", 0);
        a = make_in6("2001:DB8::0:42", 65535, 0, &len);
        check_strings(&a, len, "2001:db8::42", "[2001:db8::42]:65535", 65535);
        a = make_in6("::ffff:1.2.3.4", 1, 0, &len);
        check_strings(&a, len, "::ffff:1.2.3.4", "[::ffff:1.2.3.4]:1", 1);
        ck_assert(!sockaddr_is_abstract(&a, len));
}
END_TEST

START_TEST(test_sockaddr_inet6_scope) {
        socklen_t len;
        union sockaddr_any a;
        unsigned lo = if_nametoindex("lo");
        char ifname[IF_NAMESIZE];

        /* A scope is shown by interface name when there is one… */
        ck_assert_uint_ne(lo, 0);
        a = make_in6("fe80::1", 80, lo, &len);
        check_strings(&a, len, "fe80::1%lo", "[fe80::1%lo]:80", 80);
        /* …and by number otherwise. */
        ck_assert_ptr_null(if_indextoname(999999, ifname));
        a = make_in6("fe80::1", 80, 999999, &len);
        check_strings(&a, len, "fe80::1%999999", "[fe80::1%999999]:80", 80);
}
END_TEST

START_TEST(test_sockaddr_unix_path) {
        socklen_t len;
        union sockaddr_any a;
        char path[SUN_PATH_SIZE];

        /* With the NUL counted in len (as bind(2) is given) and without. */
        a = make_un("/run/x.sock", sizeof "/run/x.sock", &len);
        check_strings(&a, len, "/run/x.sock", "/run/x.sock", -1);
        ck_assert(!sockaddr_is_abstract(&a, len));
        a = make_un("/run/x.sock", strlen("/run/x.sock"), &len);
        check_strings(&a, len, "/run/x.sock", "/run/x.sock", -1);

        /* getsockname() may report the whole of sun_path, NULs after the path. */
        a = make_un("/a", 2, &len);
        len = sizeof(struct sockaddr_un);
        check_strings(&a, len, "/a", "/a", -1);

        /* 108 bytes, no NUL at all. */
        memset(path, 'p', sizeof path);
        path[0] = '/';
        a = make_un(path, sizeof path, &len);
        {
                char want[SUN_PATH_SIZE + 1];

                memcpy(want, path, sizeof path);
                want[sizeof path] = '\0';
                check_strings(&a, len, want, want, -1);
        }

        a = make_un("/tmp/with space", sizeof "/tmp/with space", &len);
        check_strings(&a, len, "/tmp/with space", "/tmp/with space", -1);

        /* Unprintable bytes are shown as '?', so a line stays a line. */
        a = make_un("/tmp/a\nb\x7f", sizeof "/tmp/a\nb\x7f", &len);
        check_strings(&a, len, "/tmp/a?b?", "/tmp/a?b?", -1);
}
END_TEST

START_TEST(test_sockaddr_unix_abstract) {
        socklen_t len;
        union sockaddr_any a;

        a = make_un("\0name", 5, &len);
        ck_assert(sockaddr_is_abstract(&a, len));
        check_strings(&a, len, "@name", "@name", -1);

        /* The name is exactly len bytes: no trailing NUL is implied or shown. */
        a = make_un("\0n", 2, &len);
        check_strings(&a, len, "@n", "@n", -1);

        /* Embedded NULs are shown as '@' (as ss(8) does), control bytes as '?'. */
        a = make_un("\0a\0b\x01"
                    "c",
                    6, &len);
        check_strings(&a, len, "@a@b?c", "@a@b?c", -1);

        /* The empty abstract name (autobind reports "\0" + 5 hex digits, but
         * a bare NUL is possible too). */
        a = make_un("\0", 1, &len);
        ck_assert(sockaddr_is_abstract(&a, len));
        check_strings(&a, len, "@", "@", -1);
}
END_TEST

START_TEST(test_sockaddr_unix_unnamed) {
        union sockaddr_any a;

        memset(&a, 0, sizeof a);
        a.un.sun_family = AF_UNIX;
        check_strings(&a, sizeof(sa_family_t), "(unnamed)", "(unnamed)", -1);
        ck_assert(!sockaddr_is_abstract(&a, sizeof(sa_family_t)));
}
END_TEST

START_TEST(test_sockaddr_truncation) {
        socklen_t len;
        union sockaddr_any a;
        char buf[5];

        a = make_un("\0abcdef", 7, &len);
        ck_assert_ptr_eq(sockaddr_host_to_string(&a, len, buf, sizeof buf), buf);
        ck_assert_str_eq(buf, "@abc");
        a = make_un("/abcdef", 8, &len);
        ck_assert_ptr_eq(sockaddr_to_string(&a, len, buf, sizeof buf), buf);
        ck_assert_str_eq(buf, "/abc");
        a = make_in("127.0.0.1", 80, &len);
        ck_assert_ptr_eq(sockaddr_to_string(&a, len, buf, sizeof buf), buf);
        ck_assert_str_eq(buf, "127.");
        /* inet_ntop(3) itself refuses a buffer too small for the host. */
        ck_assert_ptr_null(sockaddr_host_to_string(&a, len, buf, sizeof buf));
}
END_TEST

START_TEST(test_sockaddr_unknown_family) {
        union sockaddr_any a;
        char buf[ADDRESS_STRING_MAX];

        memset(&a, 0, sizeof a);
        a.sa.sa_family = AF_PACKET;
        ck_assert_ptr_null(sockaddr_host_to_string(&a, sizeof a, buf, sizeof buf));
        ck_assert_ptr_null(sockaddr_to_string(&a, sizeof a, buf, sizeof buf));
        ck_assert_int_eq(sockaddr_port(&a), -1);
        ck_assert(!sockaddr_is_abstract(&a, sizeof a));
}
END_TEST

/* What is parsed prints back as --format=addr shows it. */
static const struct {
        const char *text;
        const char *addr;
} round_trips[] = {
        { "80", "127.0.0.1:80" },
        { "0", "127.0.0.1:0" },
        { "localhost:8080", "127.0.0.1:8080" },
        { "*:80", "0.0.0.0:80" },
        { "tcp:10.0.0.1:65535", "10.0.0.1:65535" },
        { "udp:53", "127.0.0.1:53" },
        { "[::1]:0", "[::1]:0" },
        { "[::]:443", "[::]:443" },
        { "[fe80::1%lo]:80", "[fe80::1%lo]:80" },
        { "[fe80::1%1]:80", "[fe80::1%lo]:80" }, /* Linux gives lo index 1 in every netns */
        { "/run/app.sock", "/run/app.sock" },
        { "unix:/run/app.sock", "/run/app.sock" },
        { "@app", "@app" },
        { "unix:@x", "@x" },
        { "udp:@dgram", "@dgram" },
        { "web=/tmp/a=b", "/tmp/a=b" },
};

START_TEST(test_round_trip) {
        struct listen_spec spec;
        char buf[ADDRESS_STRING_MAX];

        ck_assert_int_eq(listen_spec_parse(round_trips[_i].text, &spec), 0);
        ck_assert_pstr_eq(sockaddr_to_string(&spec.addr, spec.addr_len, buf, sizeof buf), round_trips[_i].addr);
        listen_spec_done(&spec);
}
END_TEST

static Suite *address_suite(void) {
        Suite *s = suite_create("address");
        TCase *tc;

        tc = tcase_create("inet");
        tcase_add_loop_test(tc, test_valid_inet, 0, ARRAY_SIZE(valid_inet));
        tcase_add_loop_test(tc, test_invalid_inet, 0, ARRAY_SIZE(invalid_inet));
        tcase_add_test(tc, test_null_text);
        tcase_add_test(tc, test_bug_port_syntax_before_range);
        suite_add_tcase(s, tc);

        tc = tcase_create("inet6");
        tcase_add_loop_test(tc, test_valid_inet6, 0, ARRAY_SIZE(valid_inet6));
        suite_add_tcase(s, tc);

        tc = tcase_create("unix");
        tcase_add_loop_test(tc, test_valid_unix, 0, ARRAY_SIZE(valid_unix));
        tcase_add_loop_test(tc, test_invalid_unix, 0, ARRAY_SIZE(invalid_unix));
        tcase_add_test(tc, test_unix_path_length);
        tcase_add_test(tc, test_unix_abstract_length);
        tcase_add_test(tc, test_bug_unix_relative_path);
        suite_add_tcase(s, tc);

        tc = tcase_create("names");
        tcase_add_loop_test(tc, test_valid_named, 0, ARRAY_SIZE(valid_named));
        tcase_add_loop_test(tc, test_invalid_named, 0, ARRAY_SIZE(invalid_named));
        tcase_add_test(tc, test_name_length);
        tcase_add_test(tc, test_fdname_is_valid);
        suite_add_tcase(s, tc);

        tc = tcase_create("sockaddr");
        tcase_add_test(tc, test_sockaddr_inet);
        tcase_add_test(tc, test_sockaddr_inet6);
        tcase_add_test(tc, test_sockaddr_inet6_scope);
        tcase_add_test(tc, test_sockaddr_unix_path);
        tcase_add_test(tc, test_sockaddr_unix_abstract);
        tcase_add_test(tc, test_sockaddr_unix_unnamed);
        tcase_add_test(tc, test_sockaddr_truncation);
        tcase_add_test(tc, test_sockaddr_unknown_family);
        tcase_add_loop_test(tc, test_round_trip, 0, ARRAY_SIZE(round_trips));
        suite_add_tcase(s, tc);

        return s;
}

int main(void) {
        return unit_run(address_suite());
}
