/* SPDX-License-Identifier: MIT */
/* The -E/--subst templates (template.c): template_expand() on hand-made
 * sockets. Tables run as check loop tests; a failure names the row. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "socket.h"
#include "template.h"
#include "unit.h"

static struct bound_socket sock_in(int family, const char *host, int port, int type, const char *name) {
        struct bound_socket s;

        memset(&s, 0, sizeof s);
        s.fd = -1;
        s.name = name;
        s.type = type;
        if (family == AF_INET) {
                s.addr.in.sin_family = AF_INET;
                s.addr.in.sin_port = htons((uint16_t) port);
                ck_assert_int_eq(inet_pton(AF_INET, host, &s.addr.in.sin_addr), 1);
                s.addr_len = sizeof s.addr.in;
        } else {
                s.addr.in6.sin6_family = AF_INET6;
                s.addr.in6.sin6_port = htons((uint16_t) port);
                ck_assert_int_eq(inet_pton(AF_INET6, host, &s.addr.in6.sin6_addr), 1);
                s.addr_len = sizeof s.addr.in6;
        }
        return s;
}

static struct bound_socket sock_path(const char *path, const char *name) {
        struct bound_socket s;

        memset(&s, 0, sizeof s);
        s.fd = -1;
        s.name = name;
        s.type = SOCK_STREAM;
        s.addr.un.sun_family = AF_UNIX;
        strcpy(s.addr.un.sun_path, path);
        s.addr_len = (socklen_t) (offsetof(struct sockaddr_un, sun_path) + strlen(path) + 1);
        return s;
}

/* fd 3: web, fd 4: my.admin.v2 (a name with dots), fd 5: unnamed unix,
 * fd 6: dns (UDP on the wildcard). */
#define N_SOCKETS 4
static struct bound_socket sockets[N_SOCKETS];

static void setup(void) {
        sockets[0] = sock_in(AF_INET, "127.0.0.1", 8080, SOCK_STREAM, "web");
        sockets[1] = sock_in(AF_INET6, "::1", 9090, SOCK_STREAM, "my.admin.v2");
        sockets[2] = sock_path("/tmp/x.sock", "unknown");
        sockets[3] = sock_in(AF_INET, "0.0.0.0", 5353, SOCK_DGRAM, "dns");
}

static void check_expand(const char *text, const struct bound_socket *s, size_t n, const char *want) {
        char *result = NULL;
        size_t offset = 4242;
        int r;

        r = template_expand(text, s, n, TEMPLATE_VERBATIM, &result, &offset);
        ck_assert_msg(r == 0, "'%s': expected success, got %d (%s)", text, r, strerror(-r));
        ck_assert_ptr_nonnull(result);
        ck_assert_str_eq(result, want);
        free(result);

        /* The offset pointer is optional. */
        r = template_expand(text, s, n, TEMPLATE_VERBATIM, &result, NULL);
        ck_assert_int_eq(r, 0);
        ck_assert_str_eq(result, want);
        free(result);
}

static void check_error(const char *text, const struct bound_socket *s, size_t n, int error, size_t offset) {
        char *result = (char *) "untouched";
        size_t got_offset = 4242;
        int r;

        r = template_expand(text, s, n, TEMPLATE_VERBATIM, &result, &got_offset);
        ck_assert_msg(r == error, "'%s': expected %d (%s), got %d (%s)", text, error, strerror(-error), r,
                      r < 0 ? strerror(-r) : "success");
        ck_assert_str_eq(result, "untouched");
        ck_assert_msg(got_offset == offset, "'%s': expected error offset %zu, got %zu", text, offset, got_offset);

        r = template_expand(text, s, n, TEMPLATE_VERBATIM, &result, NULL);
        ck_assert_int_eq(r, error);
        ck_assert_str_eq(result, "untouched");
}

/* ---- fields -------------------------------------------------------------- */

static const struct {
        const char *text;
        const char *want;
} expansions[] = {
        /* the first socket */
        { "{port}", "8080" },
        { "{host}", "127.0.0.1" },
        { "{addr}", "127.0.0.1:8080" },
        { "{url}", "http://127.0.0.1:8080" },
        { "{fd}", "3" },
        { "{name}", "web" },
        /* by name */
        { "{web.port}", "8080" },
        { "{web.url}", "http://127.0.0.1:8080" },
        { "{web.fd}", "3" },
        { "{my.admin.v2.port}", "9090" },
        { "{my.admin.v2.host}", "::1" },
        { "{my.admin.v2.addr}", "[::1]:9090" },
        { "{my.admin.v2.url}", "http://[::1]:9090" },
        { "{my.admin.v2.fd}", "4" },
        { "{my.admin.v2.name}", "my.admin.v2" },
        { "{dns.port}", "5353" },
        { "{dns.host}", "0.0.0.0" },
        { "{dns.addr}", "0.0.0.0:5353" },
        { "{dns.url}", "udp://127.0.0.1:5353" },
        { "{dns.fd}", "6" },
        /* by index, from 0 */
        { "{0.port}", "8080" },
        { "{0.name}", "web" },
        { "{1.url}", "http://[::1]:9090" },
        { "{1.fd}", "4" },
        { "{2.port}", "/tmp/x.sock" },
        { "{2.host}", "/tmp/x.sock" },
        { "{2.addr}", "/tmp/x.sock" },
        { "{2.url}", "unix:/tmp/x.sock" },
        { "{2.fd}", "5" },
        { "{2.name}", "unknown" },
        { "{3.addr}", "0.0.0.0:5353" },
        { "{3.fd}", "6" },
        /* in text */
        { "--port={port}", "--port=8080" },
        { "--listen={addr}", "--listen=127.0.0.1:8080" },
        { "http://localhost:{port}/x?a={web.port}&b={1.port}", "http://localhost:8080/x?a=8080&b=9090" },
        { "{port}{port}", "80808080" },
        { "{port}:{dns.port}", "8080:5353" },
        { "h\xc3\xa9llo {fd}", "h\xc3\xa9llo 3" },
        /* escapes */
        { "{{", "{" },
        { "}}", "}" },
        { "{{}}", "{}" },
        { "{{port}}", "{port}" },
        { "{{{port}}}", "{8080}" },
        { "a{{b}}c", "a{b}c" },
        { "{{{{", "{{" },
        { "x}}{port}{{y", "x}8080{y" },
        { "json={{\"port\":{port}}}", "json={\"port\":8080}" },
        /* no templates */
        { "", "" },
        { "plain text", "plain text" },
        { "a.b:c=d%e$f\\g", "a.b:c=d%e$f\\g" },
        { "port", "port" },
};

START_TEST(test_expansions) {
        check_expand(expansions[_i].text, sockets, N_SOCKETS, expansions[_i].want);
}
END_TEST

START_TEST(test_name_before_index) {
        /* A socket named "1" is found by name before "1" is read as an index. */
        struct bound_socket s[2];

        s[0] = sock_in(AF_INET, "127.0.0.1", 1000, SOCK_STREAM, "1");
        s[1] = sock_in(AF_INET, "127.0.0.1", 2000, SOCK_STREAM, "unknown");
        check_expand("{1.port}", s, 2, "1000");
        check_expand("{0.port}", s, 2, "1000");
}
END_TEST

START_TEST(test_dotted_names) {
        /* The field is after the last dot; the name may hold dots and may
         * end with what looks like a field. */
        struct bound_socket s[3];

        s[0] = sock_in(AF_INET, "127.0.0.1", 1000, SOCK_STREAM, "web");
        s[1] = sock_in(AF_INET, "127.0.0.1", 2000, SOCK_STREAM, "web.port");
        s[2] = sock_in(AF_INET, "127.0.0.1", 3000, SOCK_STREAM, "a.b.c.d");
        check_expand("{web.port}", s, 3, "1000");
        check_expand("{web.port.port}", s, 3, "2000");
        check_expand("{web.port.fd}", s, 3, "4");
        check_expand("{a.b.c.d.port}", s, 3, "3000");
        check_error("{a.b.c.port}", s, 3, -ENOENT, 0);
}
END_TEST

START_TEST(test_single_socket) {
        struct bound_socket s[1];

        s[0] = sock_path("/run/app.sock", "unknown");
        check_expand("{port}", s, 1, "/run/app.sock");
        check_expand("{url}", s, 1, "unix:/run/app.sock");
        check_expand("{name}", s, 1, "unknown");
        check_expand("{0.fd}", s, 1, "3");
        check_error("{1.fd}", s, 1, -ENOENT, 0);
}
END_TEST

START_TEST(test_no_sockets) {
        check_expand("", NULL, 0, "");
        check_expand("plain", NULL, 0, "plain");
        check_expand("{{}}", NULL, 0, "{}");
        check_error("{port}", NULL, 0, -ENOENT, 0);
        check_error("{0.port}", NULL, 0, -ENOENT, 0);
        check_error("{web.port}", NULL, 0, -ENOENT, 0);
}
END_TEST

/* ---- errors -------------------------------------------------------------- */

static const struct {
        const char *text;
        int error;
        size_t offset;
} errors[] = {
        /* unknown field */
        { "{bogus}", -EBADR, 0 },
        { "{PORT}", -EBADR, 0 },
        { "{ports}", -EBADR, 0 },
        { "{ port}", -EBADR, 0 },
        { "x{web.bogus}", -EBADR, 1 },
        { "{web.}", -EBADR, 0 },
        { "{0.}", -EBADR, 0 },
        { "{web.Port}", -EBADR, 0 },
        /* unknown socket */
        { "{nope.port}", -ENOENT, 0 },
        { "ab{4.port}", -ENOENT, 2 },
        { "{9.port}", -ENOENT, 0 },
        { "{-1.port}", -ENOENT, 0 },
        { "{+1.port}", -ENOENT, 0 },
        { "{99999999999999999999999.port}", -ENOENT, 0 },
        { "{WEB.port}", -ENOENT, 0 },
        { "{nope.bogus}", -ENOENT, 0 },
        { "ok {port} then {nope.url}", -ENOENT, 15 },
        /* syntax */
        { "{", -EINVAL, 0 },
        { "{port", -EINVAL, 0 },
        { "abc{port", -EINVAL, 3 },
        { "{port}{", -EINVAL, 6 },
        { "}", -EINVAL, 0 },
        { "abc}", -EINVAL, 3 },
        { "{port}}", -EINVAL, 6 },
        { "{{port}", -EINVAL, 6 },
        { "{}", -EINVAL, 0 },
        { "x{}y", -EINVAL, 1 },
        { "{.port}", -EINVAL, 0 },
        { "{.}", -EINVAL, 0 },
        { "{a{port}}", -EINVAL, 0 },
        { "{port{}}", -EINVAL, 0 },
        { "{{{", -EINVAL, 2 },
        { "}}}", -EINVAL, 2 },
};

START_TEST(test_errors) {
        check_error(errors[_i].text, sockets, N_SOCKETS, errors[_i].error, errors[_i].offset);
}
END_TEST

/* ---- quoted for the shell (--ready-exec) ---------------------------------- */

static void check_shell(const char *text, const struct bound_socket *s, size_t n, const char *want) {
        char *result = NULL;
        int r = template_expand(text, s, n, TEMPLATE_SHELL, &result, NULL);

        ck_assert_msg(r == 0, "'%s': expected success, got %d", text, r);
        ck_assert_msg(strcmp(result, want) == 0, "'%s': expected '%s', got '%s'", text, want, result);
        free(result);
}

START_TEST(test_shell_quoting) {
        struct bound_socket s[1];

        /* Ports, IPv4 addresses and URLs are bare; what a shell would read
         * otherwise is single-quoted: '[' is a glob character. */
        check_shell("redis-cli -p {port} ping", sockets, N_SOCKETS, "redis-cli -p 8080 ping");
        check_shell("curl -f {url}/health", sockets, N_SOCKETS, "curl -f http://127.0.0.1:8080/health");
        check_shell("curl -f {1.url}", sockets, N_SOCKETS, "curl -f 'http://[::1]:9090'");
        check_shell("test -S {2.port}", sockets, N_SOCKETS, "test -S /tmp/x.sock");
        check_shell("{{ echo {name}; }}", sockets, N_SOCKETS, "{ echo web; }");
        s[0] = sock_path("/tmp/my dir/s.sock", "unknown");
        check_shell("test -S {port}", s, 1, "test -S '/tmp/my dir/s.sock'");
        s[0] = sock_path("/tmp/$(touch X)", "unknown");
        check_shell("test -S {port}", s, 1, "test -S '/tmp/$(touch X)'");
        s[0] = sock_path("/tmp/it's", "unknown");
        check_shell("test -S {url}", s, 1, "test -S 'unix:/tmp/it'\\''s'");
        /* Control characters are shown as '?' in every field (address.c);
         * quoted, that '?' is no glob. */
        s[0] = sock_path("/tmp/a\nb", "unknown");
        check_shell("test -S {port}", s, 1, "test -S '/tmp/a?b'");
        s[0] = sock_path("/tmp/it's", "unknown");
        /* Verbatim, as for -E and --subst, the same path stays as it is. */
        check_expand("{port}", s, 1, "/tmp/it's");
}
END_TEST

/* What sh reads back from each path, as one word: the bytes themselves. */
static const char *const hostile_paths[] = {
        "/tmp/my dir/s.sock", "/tmp/$(touch X)", "/tmp/`id`", "/tmp/a;b&c|d", "/tmp/'",
        "/tmp/''\"\"",        "/tmp/\\",         "/tmp/*",    "/tmp/[ab]",    "/tmp/~x",
        "/tmp/$HOME",         "/tmp/${x:-y}",    "/tmp/!x",   "/tmp/#x",      "/tmp/\xff\xfe",
        "@abstract name",     "/tmp/{x}",        "/tmp/a=b",
};

START_TEST(test_shell_reads_the_path_back) {
        struct bound_socket s[1];
        char *command = NULL, got[256];
        FILE *sh;
        size_t len;

        s[0] = sock_path(hostile_paths[_i], "unknown");
        ck_assert_int_eq(template_expand("printf %s {port}", s, 1, TEMPLATE_SHELL, &command, NULL), 0);
        sh = popen(command, "r");
        ck_assert_ptr_nonnull(sh);
        len = fread(got, 1, sizeof got - 1, sh);
        got[len] = '\0';
        ck_assert_int_eq(pclose(sh), 0);
        ck_assert_msg(strcmp(got, hostile_paths[_i]) == 0, "'%s': sh read '%s' from '%s'", hostile_paths[_i], got,
                      command);
        free(command);
}
END_TEST

static Suite *template_suite(void) {
        Suite *s = suite_create("template");
        TCase *tc;

        tc = tcase_create("expand");
        tcase_add_checked_fixture(tc, setup, NULL);
        tcase_add_loop_test(tc, test_expansions, 0, ARRAY_SIZE(expansions));
        tcase_add_test(tc, test_name_before_index);
        tcase_add_test(tc, test_dotted_names);
        tcase_add_test(tc, test_single_socket);
        tcase_add_test(tc, test_no_sockets);
        suite_add_tcase(s, tc);

        tc = tcase_create("shell");
        tcase_add_checked_fixture(tc, setup, NULL);
        tcase_add_test(tc, test_shell_quoting);
        tcase_add_loop_test(tc, test_shell_reads_the_path_back, 0, ARRAY_SIZE(hostile_paths));
        suite_add_tcase(s, tc);

        tc = tcase_create("errors");
        tcase_add_checked_fixture(tc, setup, NULL);
        tcase_add_loop_test(tc, test_errors, 0, ARRAY_SIZE(errors));
        suite_add_tcase(s, tc);

        return s;
}

int main(void) {
        return unit_run(template_suite());
}
