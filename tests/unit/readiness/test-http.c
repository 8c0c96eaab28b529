/* SPDX-License-Identifier: MIT */
/* --ready-http (http_attempt.c, check_http.c): the status-line parser on every answer a
 * server may give, cut at every length, in buffers of exactly that size;
 * the request; which socket is checked. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_attempt.h"
#include "unit.h"

/* The parser on exactly len bytes of text, in a buffer of that size. */
static int parse(const char *text, size_t len, int *status) {
        char *buf = malloc(len ? len : 1);
        int r;

        memcpy(buf, text, len);
        r = http_response_status(buf, len, status);
        free(buf);
        return r;
}

static const struct {
        const char *text;
        int status; /* 0: -EBADMSG at the end, -1: -EAGAIN at the end */
        bool ready;
} answers[] = {
        { "HTTP/1.1 200 OK\r\n\r\n", 200, true },
        { "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 200, true },
        { "HTTP/1.0 200 OK\r\n", 200, true },
        { "HTTP/1.1 204 No Content\r\n", 204, true },
        { "HTTP/1.1 299 x\r\n", 299, true },
        { "HTTP/1.1 301 Moved Permanently\r\nLocation: /x\r\n\r\n", 301, true },
        { "HTTP/1.1 304 Not Modified\r\n", 304, true },
        { "HTTP/1.1 399 x\r\n", 399, true },
        { "HTTP/1.1 400 Bad Request\r\n", 400, false },
        { "HTTP/1.1 404 Not Found\r\n", 404, false },
        { "HTTP/1.1 500 Internal Server Error\r\n", 500, false },
        { "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\n\r\n", 503, false },
        { "HTTP/1.1 599 x\r\n", 599, false },
        { "HTTP/1.1 200\r\n", 200, true }, /* no reason phrase */
        { "HTTP/1.1 200\n", 200, true },   /* bare LF */
        { "HTTP/1.1 200 \r\n", 200, true },
        { "HTTP/1.9 200 OK\r\n", 200, true },                   /* a later 1.x */
        { "HTTP/1.1 101 Switching Protocols\r\n", 101, false }, /* final, never asked for */
        /* Interim answers are skipped. */
        { "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n", 200, true },
        { "HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\nHTTP/1.1 503 x\r\n", 503, false },
        { "HTTP/1.1 100 Continue\n\nHTTP/1.1 204\n", 204, true },
        { "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 102 P\r\n\r\nHTTP/1.1 302 Found\r\n", 302, true },
        /* Not there yet. */
        { "", -1, false },
        { "HTTP/1.1 200", -1, false },
        { "HTTP/1.1 100 Continue\r\n", -1, false },
        { "HTTP/1.1 100 Continue\r\n\r\n", -1, false },
        { "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 20", -1, false },
        /* Not HTTP/1.x. */
        { "http/1.1 200 OK\r\n", 0, false },
        { "HTTP/2 200\r\n", 0, false },
        { "HTTP/2.0 200 OK\r\n", 0, false },
        { "HTTP/1.1  200 OK\r\n", 0, false },
        { "HTTP/1.1 2000 OK\r\n", 0, false },
        { "HTTP/1.1 20 OK\r\n", 0, false },
        { "HTTP/1.1 20a OK\r\n", 0, false },
        { "HTTP/1.1 200OK\r\n", 0, false },
        { "HTTP/1.1\t200 OK\r\n", 0, false },
        { "HTTP/1.x 200 OK\r\n", 0, false },
        { "HTTP/1.1 099 x\r\n", 0, false },
        { "HTTP/1.1 600 x\r\n", 0, false },
        { "HTTP/1.1 000 x\r\n", 0, false },
        { " HTTP/1.1 200 OK\r\n", 0, false },
        { "\r\nHTTP/1.1 200 OK\r\n", 0, false },
        { "SSH-2.0-OpenSSH_9.2\r\n", 0, false },
        { "-ERR unknown command\r\n", 0, false }, /* redis */
        { "\x16\x03\x01\x00", 0, false },         /* TLS */
        { "HTTP/1.1 100 Continue\r\n\r\nxyz", 0, false },
        { "HTTP/1.1 100 Continue\r\n\r\n\r\nHTTP/1.1 200 OK\r\n", 0, false },
};

START_TEST(test_answer) {
        const char *text = answers[_i].text;
        size_t len = strlen(text);
        int status = -42, r = parse(text, len, &status);

        if (answers[_i].status > 0) {
                ck_assert_msg(r == 0, "'%s': %d", text, r);
                ck_assert_int_eq(status, answers[_i].status);
                ck_assert_int_eq(http_status_is_ready(status), answers[_i].ready);
        } else {
                ck_assert_int_eq(r, answers[_i].status < 0 ? -EAGAIN : -EBADMSG);
                ck_assert_int_eq(status, -42); /* untouched */
        }
}
END_TEST

/* Every prefix of an answer is "need more" or already the verdict of the
 * whole: never garbage where the whole is good, never a wrong status. */
START_TEST(test_answer_prefixes) {
        const char *text = answers[_i].text;
        size_t len = strlen(text);
        int whole = -42, r_whole = parse(text, len, &whole);

        for (size_t k = 0; k < len; k++) {
                int status = -42, r = parse(text, k, &status);

                if (r == -EAGAIN)
                        continue;
                if (r == -EBADMSG) {
                        ck_assert_msg(r_whole == -EBADMSG, "'%s' cut at %zu: garbage, but whole it is %d", text, k,
                                      r_whole);
                        continue;
                }
                ck_assert_int_eq(r, 0);
                ck_assert_msg(r_whole == 0 && status == whole, "'%s' cut at %zu: %d, whole: %d", text, k, status,
                              whole);
        }
}
END_TEST

START_TEST(test_ready_range) {
        for (int s = 0; s < 1000; s++)
                ck_assert_int_eq(http_status_is_ready(s), s >= 200 && s < 400);
}
END_TEST

/* Every three-digit code the grammar allows parses to itself. */
START_TEST(test_every_code) {
        for (int code = 0; code < 1000; code++) {
                char text[64];
                int status = -1, r;

                snprintf(text, sizeof text, "HTTP/1.1 %03d x\r\n\r\nHTTP/1.1 200 OK\r\n", code);
                r = parse(text, strlen(text), &status);
                if (code < 100 || code > 599)
                        ck_assert_int_eq(r, -EBADMSG);
                else if (code < 200 && code != 101)
                        ck_assert_msg(r == 0 && status == 200, "%d: interim, then 200", code);
                else
                        ck_assert_msg(r == 0 && status == code, "%d", code);
        }
}
END_TEST

/* ---- the request ---------------------------------------------------------- */

static struct bound_socket sock_in(int family, const char *host, int port, int type) {
        struct bound_socket s;

        memset(&s, 0, sizeof s);
        s.fd = -1;
        s.name = "unknown";
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

static void check_request(struct bound_socket s, const char *path, const char *host) {
        char *req = NULL, *want;

        ck_assert_int_eq(http_request_format(&s, path, &req), 0);
        ck_assert_int_gt(asprintf(&want,
                                  "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: prebind\r\nAccept: */*\r\n"
                                  "Connection: close\r\n\r\n",
                                  path, host),
                         0);
        ck_assert_str_eq(req, want);
        free(req);
        free(want);
}

START_TEST(test_request) {
        check_request(sock_in(AF_INET, "127.0.0.1", 8080, SOCK_STREAM), "/", "127.0.0.1:8080");
        check_request(sock_in(AF_INET, "127.0.0.1", 8080, SOCK_STREAM), "/healthz?x=1&y=%20", "127.0.0.1:8080");
        check_request(sock_in(AF_INET6, "::1", 9090, SOCK_STREAM), "/", "[::1]:9090");
        /* A wildcard is reached, and named, on loopback. */
        check_request(sock_in(AF_INET, "0.0.0.0", 80, SOCK_STREAM), "/", "127.0.0.1:80");
        check_request(sock_in(AF_INET6, "::", 81, SOCK_STREAM), "/", "[::1]:81");
}
END_TEST

static const char *const bad_paths[] = { "", "x", "healthz", "/a b", "/a\r\nX: y", "/\x7f", "/\t", "//\x01" };

START_TEST(test_bad_path) {
        struct bound_socket s = sock_in(AF_INET, "127.0.0.1", 8080, SOCK_STREAM);
        char *req = (char *) "untouched";

        ck_assert_int_eq(http_request_format(&s, bad_paths[_i], &req), -EINVAL);
        ck_assert_str_eq(req, "untouched");
}
END_TEST

START_TEST(test_check_socket) {
        struct bound_socket s[4];

        memset(s, 0, sizeof s);
        s[0].type = SOCK_STREAM;
        s[0].addr.un.sun_family = AF_UNIX;
        s[1] = sock_in(AF_INET, "127.0.0.1", 53, SOCK_DGRAM);
        s[2] = sock_in(AF_INET6, "::1", 8080, SOCK_STREAM);
        s[3] = sock_in(AF_INET, "127.0.0.1", 8081, SOCK_STREAM);
        ck_assert_ptr_eq(http_attempt_socket(s, 4), &s[2]);
        ck_assert_ptr_eq(http_attempt_socket(s + 3, 1), &s[3]);
        ck_assert_ptr_null(http_attempt_socket(s, 2));
        ck_assert_ptr_null(http_attempt_socket(s, 0));
}
END_TEST

static Suite *http_suite(void) {
        Suite *s = suite_create("http");
        TCase *tc = tcase_create("status");

        tcase_add_loop_test(tc, test_answer, 0, ARRAY_SIZE(answers));
        tcase_add_loop_test(tc, test_answer_prefixes, 0, ARRAY_SIZE(answers));
        tcase_add_test(tc, test_ready_range);
        tcase_add_test(tc, test_every_code);
        suite_add_tcase(s, tc);

        tc = tcase_create("request");
        tcase_add_test(tc, test_request);
        tcase_add_loop_test(tc, test_bad_path, 0, ARRAY_SIZE(bad_paths));
        tcase_add_test(tc, test_check_socket);
        suite_add_tcase(s, tc);
        return s;
}

int main(void) {
        return unit_run(http_suite());
}
