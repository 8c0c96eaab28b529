/* SPDX-License-Identifier: MIT */
/* fd_range(): closing, or marking close-on-exec, every fd of a range, as
 * the children prebind starts do before exec. Each case runs in a forked
 * child, which may close what it likes. And unix_address(), every unix
 * socket's address. */
#include <check.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fd.h"
#include "unit.h"

/* A few fds above 2, one of them far up (the range must not stop at the
 * first gap): fds[0..3]. */
static void open_some(int fds[4]) {
        for (int i = 0; i < 3; i++)
                fds[i] = open("/dev/null", O_RDONLY);
        fds[3] = fcntl(fds[0], F_DUPFD, 200);
}

static bool is_open(int fd) {
        return fcntl(fd, F_GETFD) >= 0;
}

static bool is_cloexec(int fd) {
        int flags = fcntl(fd, F_GETFD);
        return flags >= 0 && (flags & FD_CLOEXEC);
}

static void child_close_above_keep(void) {
        int fds[4];

        open_some(fds);
        if (fd_range((unsigned) fds[1] + 1, ~0U, FD_CLOSE) < 0)
                exit(10);
        if (!is_open(0) || !is_open(fds[0]) || !is_open(fds[1]))
                exit(11); /* below the range: untouched */
        if (is_open(fds[2]) || is_open(fds[3]))
                exit(12);
        exit(0);
}

static void child_close_all_but_one(void) {
        int fds[4];

        open_some(fds);
        /* As the --netns keeper keeps its control socket only. */
        if (fd_range(0, (unsigned) fds[1] - 1, FD_CLOSE) < 0 || fd_range((unsigned) fds[1] + 1, ~0U, FD_CLOSE) < 0)
                _exit(10);
        if (!is_open(fds[1]))
                _exit(11);
        for (int fd = 0; fd < 256; fd++)
                if (fd != fds[1] && is_open(fd))
                        _exit(12);
        _exit(0); /* stdio is gone: no exit() */
}

static void child_cloexec(void) {
        int fds[4];

        open_some(fds);
        if (fd_range((unsigned) fds[1], ~0U, FD_SET_CLOEXEC) < 0)
                exit(10);
        if (is_cloexec(fds[0]))
                exit(11);
        if (!is_cloexec(fds[1]) || !is_cloexec(fds[2]) || !is_cloexec(fds[3]))
                exit(12);
        if (!is_open(fds[1]) || !is_open(fds[3]))
                exit(13); /* marked, not closed */
        exit(0);
}

static void child_empty_range(void) {
        int fds[4];

        open_some(fds);
        if (fd_range((unsigned) fds[1], (unsigned) fds[0], FD_CLOSE) != 0)
                exit(10);
        if (!is_open(fds[0]) || !is_open(fds[1]))
                exit(11);
        exit(0);
}

/* fd_writer_open(): a pipe is opened again, non-blocking, and the
 * shared description stays blocking; a file or a socket is used as it is. */
static void child_writer(void) {
        struct fd_writer w;
        int p[2], s[2], file;

        if (pipe2(p, O_CLOEXEC) < 0 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s) < 0)
                exit(20);
        fd_writer_open(p[1], &w);
        if (!w.owned || w.fd == p[1] || !S_ISFIFO(w.type))
                exit(21);
        if (!(fcntl(w.fd, F_GETFL) & O_NONBLOCK) || (fcntl(p[1], F_GETFL) & O_NONBLOCK) || !is_cloexec(w.fd))
                exit(22);
        if (write(w.fd, "x", 1) != 1)
                exit(23);
        close(w.fd);
        fd_writer_open(s[0], &w);
        if (w.owned || w.fd != s[0] || !S_ISSOCK(w.type))
                exit(24);
        file = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
        fd_writer_open(file, &w);
        if (w.owned || w.fd != file || !S_ISREG(w.type))
                exit(25);
        exit(0);
}

static void (*const children[])(void) = {
        child_close_above_keep, child_close_all_but_one, child_cloexec, child_empty_range, child_writer,
};

START_TEST(test_fd_range) {
        unit_child_passes(children, _i);
}
END_TEST

/* A path's length counts its NUL, an abstract name's does not; its '@'
 * becomes the NUL; what does not fit in sun_path is 0. */
START_TEST(test_unix_address) {
        const size_t base = offsetof(struct sockaddr_un, sun_path);
        struct sockaddr_un sa;
        char name[sizeof sa.sun_path + 2];

        ck_assert_uint_eq(unix_address(&sa, "/run/x.sock", false), base + 12);
        ck_assert_uint_eq(sa.sun_family, AF_UNIX);
        ck_assert_str_eq(sa.sun_path, "/run/x.sock");
        ck_assert_uint_eq(unix_address(&sa, "@prebind-1", true), base + 10);
        ck_assert(sa.sun_path[0] == '\0' && memcmp(sa.sun_path + 1, "prebind-1", 9) == 0);
        /* Without abstract, '@' is a path's first byte. */
        ck_assert_uint_eq(unix_address(&sa, "@x", false), base + 3);
        ck_assert_str_eq(sa.sun_path, "@x");
        ck_assert_uint_eq(unix_address(&sa, "", false), 0);
        ck_assert_uint_eq(unix_address(&sa, "", true), 0);

        /* The longest of each: a path of 107 bytes (and its NUL), an
         * abstract name of 108. */
        memset(name, 'a', sizeof name);
        name[sizeof sa.sun_path - 1] = '\0';
        ck_assert_uint_eq(unix_address(&sa, name, false), base + sizeof sa.sun_path);
        name[sizeof sa.sun_path - 1] = 'a';
        name[sizeof sa.sun_path] = '\0';
        ck_assert_uint_eq(unix_address(&sa, name, false), 0);
        ck_assert_uint_eq(unix_address(&sa, name, true), base + sizeof sa.sun_path);
        name[sizeof sa.sun_path] = 'a';
        name[sizeof sa.sun_path + 1] = '\0';
        ck_assert_uint_eq(unix_address(&sa, name, true), 0);
}
END_TEST

int main(void) {
        Suite *s = suite_create("fd");
        TCase *tc = tcase_create("range");

        tcase_add_loop_test(tc, test_fd_range, 0, ARRAY_SIZE(children));
        suite_add_tcase(s, tc);
        tc = tcase_create("unix_address");
        tcase_add_test(tc, test_unix_address);
        suite_add_tcase(s, tc);
        return unit_run(s);
}
