/* SPDX-License-Identifier: MIT */
/* The C example's own test (check): start the server through prebind,
 * read the URL prebind publishes, and talk to it over a real socket.
 * Usage: test-server PREBIND SERVER */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <check.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *prebind_path, *server_path;

struct started {
        pid_t pid;
        int out; /* prebind's stdout */
};

static struct started start(const char *const extra[]) {
        const char *argv[32] = { prebind_path, "--print=url" };
        int n = 2, pipefd[2];
        struct started s;

        for (; *extra; extra++)
                argv[n++] = *extra;
        argv[n] = NULL;
        ck_assert_int_eq(pipe(pipefd), 0);
        s.pid = fork();
        ck_assert_int_ge(s.pid, 0);
        if (s.pid == 0) {
                dup2(pipefd[1], STDOUT_FILENO);
                execv(prebind_path, (char *const *) argv);
                _exit(127);
        }
        close(pipefd[1]);
        s.out = pipefd[0];
        return s;
}

/* The first line prebind prints, within 10 s. */
static void read_line(int fd, char *buf, size_t size) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        size_t len = 0;

        while (len + 1 < size) {
                ck_assert_int_eq(poll(&p, 1, 10000), 1);
                ck_assert_int_eq(read(fd, buf + len, 1), 1);
                if (buf[len] == '\n')
                        break;
                len++;
        }
        buf[len] = '\0';
}

/* GET / over a real TCP connection to "http://127.0.0.1:PORT". */
static void http_get(const char *url, char *body, size_t size) {
        struct sockaddr_in sa = { .sin_family = AF_INET };
        struct timeval tv = { .tv_sec = 10 };
        const char *port = strrchr(url, ':');
        size_t len = 0;
        ssize_t k;
        int fd;

        ck_assert_ptr_nonnull(port);
        ck_assert_int_eq(strncmp(url, "http://127.0.0.1:", 17), 0);
        sa.sin_port = htons((uint16_t) atoi(port + 1));
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        fd = socket(AF_INET, SOCK_STREAM, 0);
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        ck_assert_int_eq(connect(fd, (struct sockaddr *) &sa, sizeof sa), 0);
        ck_assert_int_gt(write(fd, "GET / HTTP/1.0\r\n\r\n", 18), 0);
        while (len + 1 < size && (k = read(fd, body + len, size - len - 1)) > 0)
                len += (size_t) k;
        body[len] = '\0';
        close(fd);
}

static int stop(struct started *s) {
        int status;

        kill(s->pid, SIGTERM);
        ck_assert_int_eq(waitpid(s->pid, &status, 0), s->pid);
        close(s->out);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

START_TEST(test_named_socket_through_prebind) {
        const char *args[] = { "-l", "web=127.0.0.1:0", "--", server_path, "--expect", "web:stream:ipv4", NULL };
        struct started s = start(args);
        char url[256], body[1024];

        read_line(s.out, url, sizeof url);
        http_get(url, body, sizeof body);
        ck_assert_ptr_nonnull(strstr(body, "HTTP/1.0 200 OK"));
        ck_assert_ptr_nonnull(strstr(body, "hello from prebind example: fd=3 name=web"));
        ck_assert_int_eq(stop(&s), 0);
}
END_TEST

START_TEST(test_two_sockets_in_order) {
        const char *args[] = { "-l",       "a=127.0.0.1:0", "-l",       "b=127.0.0.1:0", "--", server_path,
                               "--expect", "a:stream",      "--expect", "b:stream",      NULL };
        struct started s = start(args);
        char url_a[256], url_b[256], body[1024];

        read_line(s.out, url_a, sizeof url_a);
        read_line(s.out, url_b, sizeof url_b);
        http_get(url_b, body, sizeof body);
        ck_assert_ptr_nonnull(strstr(body, "fd=4 name=b"));
        http_get(url_a, body, sizeof body);
        ck_assert_ptr_nonnull(strstr(body, "fd=3 name=a"));
        ck_assert_int_eq(stop(&s), 0);
}
END_TEST

START_TEST(test_wrong_name_is_refused_by_the_server) {
        const char *args[] = { "-q", "-l", "other=127.0.0.1:0", "--", server_path, "--expect", "web:stream", NULL };
        struct started s = start(args);
        int status;

        /* The server checks what sd_listen_fds_with_names() gave it. */
        ck_assert_int_eq(waitpid(s.pid, &status, 0), s.pid);
        close(s.out);
        ck_assert(WIFEXITED(status));
        ck_assert_int_eq(WEXITSTATUS(status), 2);
}
END_TEST

int main(int argc, char *argv[]) {
        Suite *suite = suite_create("example-c");
        TCase *tc = tcase_create("through-prebind");
        SRunner *runner;
        int failed;

        if (argc != 3) {
                fprintf(stderr, "usage: test-server PREBIND SERVER\n");
                return 2;
        }
        prebind_path = argv[1];
        server_path = argv[2];
        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, test_named_socket_through_prebind);
        tcase_add_test(tc, test_two_sockets_in_order);
        tcase_add_test(tc, test_wrong_name_is_refused_by_the_server);
        suite_add_tcase(suite, tc);
        runner = srunner_create(suite);
        srunner_run_all(runner, CK_NORMAL);
        failed = srunner_ntests_failed(runner);
        srunner_free(runner);
        return failed ? 1 : 0;
}
