/* SPDX-License-Identifier: MIT */
/* Publication (publish.c): the atomic port file (content, mode, what it
 * refuses to replace, no temporary file left behind on failure), the
 * addresses written to --port-fd, stdout and --port-file from options
 * built here, and the withdrawal that removes only prebind's own file.
 * Everything in a temporary directory; each test in its own process. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "publish.h"
#include "unit.h"

/* The whole file, in a static buffer. */
static const char *contents(const char *path) {
        static char buf[4096];
        FILE *f = fopen(path, "re");
        size_t n;

        ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
        n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = '\0';
        fclose(f);
        return buf;
}

static void write_plain(const char *path, const char *text) {
        FILE *f = fopen(path, "we");

        ck_assert_ptr_nonnull(f);
        fputs(text, f);
        fclose(f);
}

/* How many entries the directory holds (without . and ..). */
static int entries(void) {
        DIR *d = opendir(unit_dir);
        struct dirent *de;
        int n = 0;

        ck_assert_ptr_nonnull(d);
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
                        n++;
        closedir(d);
        return n;
}

/* ---- write_file_atomic ---------------------------------------------------- */

START_TEST(test_atomic_content_and_fd) {
        const char *path = unit_path("port");
        struct stat by_path, by_fd;
        int fd = -1;

        ck_assert_int_eq(write_file_atomic(path, "41234\n", NULL, &fd), 0);
        ck_assert_int_ge(fd, 0);
        ck_assert_str_eq(contents(path), "41234\n");
        ck_assert_int_eq(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
        ck_assert_int_eq(stat(path, &by_path), 0);
        ck_assert_int_eq(fstat(fd, &by_fd), 0);
        ck_assert_uint_eq(by_path.st_ino, by_fd.st_ino);
        ck_assert(S_ISREG(by_path.st_mode));
        /* Only the file itself: no temporary file left. */
        ck_assert_int_eq(entries(), 1);
        close(fd);
}
END_TEST

START_TEST(test_atomic_mode_follows_umask) {
        static const mode_t masks[] = { 0022, 0077, 0, 0027, 0777 };

        for (size_t i = 0; i < sizeof masks / sizeof masks[0]; i++) {
                const char *path = unit_path("mode");
                struct stat st;
                mode_t old = umask(masks[i]);
                int fd;

                ck_assert_int_eq(write_file_atomic(path, "x", NULL, &fd), 0);
                ck_assert_int_eq(umask(old), masks[i]); /* restored */
                ck_assert_int_eq(stat(path, &st), 0);
                ck_assert_int_eq(st.st_mode & 07777, 0666 & ~masks[i]);
                close(fd);
        }
}
END_TEST

START_TEST(test_atomic_replaces_a_regular_file) {
        const char *path = unit_path("old");
        int fd;

        write_plain(path, "old content, longer than the new one\n");
        ck_assert_int_eq(write_file_atomic(path, "new\n", NULL, &fd), 0);
        ck_assert_str_eq(contents(path), "new\n");
        ck_assert_int_eq(entries(), 1);
        close(fd);
        /* An empty content is a file too. */
        ck_assert_int_eq(write_file_atomic(path, "", NULL, &fd), 0);
        ck_assert_str_eq(contents(path), "");
        close(fd);
}
END_TEST

START_TEST(test_atomic_refuses_what_is_not_a_regular_file) {
        const char *target = unit_path("target"), *link = unit_path("link"), *fifo = unit_path("fifo"),
                   *subdir = unit_path("subdir");
        struct stat st;
        int fd = -7;

        write_plain(target, "keep\n");
        ck_assert_int_eq(symlink(target, link), 0);
        ck_assert_int_eq(mkfifo(fifo, 0600), 0);
        ck_assert_int_eq(mkdir(subdir, 0700), 0);

        ck_assert_int_eq(write_file_atomic(link, "x", NULL, &fd), -EEXIST);
        ck_assert_int_eq(write_file_atomic(fifo, "x", NULL, &fd), -EEXIST);
        ck_assert_int_eq(write_file_atomic(subdir, "x", NULL, &fd), -EEXIST);
        ck_assert_int_eq(fd, -7);
        /* All untouched, and nothing added. */
        ck_assert_int_eq(lstat(link, &st), 0);
        ck_assert(S_ISLNK(st.st_mode));
        ck_assert_str_eq(contents(target), "keep\n");
        ck_assert_int_eq(lstat(fifo, &st), 0);
        ck_assert(S_ISFIFO(st.st_mode));
        ck_assert_int_eq(lstat(subdir, &st), 0);
        ck_assert(S_ISDIR(st.st_mode));
        ck_assert_int_eq(entries(), 4);
}
END_TEST

START_TEST(test_atomic_device_is_refused) {
        int fd;

        /* As root, rename(2) would turn /dev/null into a file. */
        ck_assert_int_eq(write_file_atomic("/dev/null", "x", NULL, &fd), -EEXIST);
        {
                struct stat st;
                ck_assert_int_eq(stat("/dev/null", &st), 0);
                ck_assert(S_ISCHR(st.st_mode));
        }
}
END_TEST

/* write_file_atomic() under RLIMIT_FSIZE=1 (with SIGXFSZ ignored), both
 * restored before anything else writes (check's own result file, when
 * it does not fork). */
static int write_limited_to_one_byte(const char *path, const char *content, int *ret_fd) {
        struct rlimit one = { 1, 1 }, old;
        void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
        int r;

        ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
        one.rlim_max = old.rlim_max;
        ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &one), 0);
        r = write_file_atomic(path, content, NULL, ret_fd);
        setrlimit(RLIMIT_FSIZE, &old);
        signal(SIGXFSZ, old_handler);
        return r;
}

START_TEST(test_atomic_failed_write_leaves_nothing) {
        const char *path = unit_path("big");
        int fd = -7, r;

        /* A file size limit of one byte makes the write fail (EFBIG)
         * after the temporary file exists. */
        r = write_limited_to_one_byte(path, "too long for the limit\n", &fd);
        ck_assert_int_eq(r, -EFBIG);
        ck_assert_int_eq(fd, -7);
        ck_assert_int_eq(entries(), 0);
        /* An existing file stays as it was. */
        write_plain(path, "k");
        r = write_limited_to_one_byte(path, "too long\n", &fd);
        ck_assert_int_eq(r, -EFBIG);
        ck_assert_str_eq(contents(path), "k");
        ck_assert_int_eq(entries(), 1);
}
END_TEST

START_TEST(test_atomic_missing_directory) {
        int fd = -7;

        ck_assert_int_eq(write_file_atomic(unit_path("no/such/file"), "x", NULL, &fd), -ENOENT);
        ck_assert_int_eq(fd, -7);
        ck_assert_int_eq(entries(), 0);
}
END_TEST

START_TEST(test_write_all_errors) {
        int p[2];

        ck_assert_int_eq(pipe(p), 0);
        ck_assert_int_eq(write_all(p[1], "abc", 3), 0);
        ck_assert_int_eq(write_all(p[1], "", 0), 0);
        close(p[0]);
        signal(SIGPIPE, SIG_IGN);
        ck_assert_int_eq(write_all(p[1], "abc", 3), -EPIPE);
        signal(SIGPIPE, SIG_DFL);
        close(p[1]);
        ck_assert_int_eq(write_all(p[1], "abc", 3), -EBADF);
}
END_TEST

/* ---- publish_addresses ----------------------------------------------------- */

/* Two sockets, as bound: 127.0.0.1:41234 named "web", and [::1]:8080. */
static struct bound_socket sockets[2];

static void make_sockets(void) {
        memset(sockets, 0, sizeof sockets);
        sockets[0] = (struct bound_socket) { .fd = -1, .name = "web", .type = SOCK_STREAM };
        sockets[0].addr.in = (struct sockaddr_in) { .sin_family = AF_INET,
                                                    .sin_port = htons(41234),
                                                    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        sockets[0].addr_len = sizeof(struct sockaddr_in);
        sockets[1] = (struct bound_socket) { .fd = -1, .name = "unknown", .type = SOCK_STREAM };
        sockets[1].addr.in6 = (struct sockaddr_in6) { .sin6_family = AF_INET6,
                                                      .sin6_port = htons(8080),
                                                      .sin6_addr = IN6ADDR_LOOPBACK_INIT };
        sockets[1].addr_len = sizeof(struct sockaddr_in6);
}

static void publish_setup(void) {
        unit_dir_make();
        make_sockets();
}

static struct publish_options options_none(void) {
        return (struct publish_options) { .port_fd = -1, .format = FORMAT_PORT, .print_format = FORMAT_ADDR };
}

static const char *read_all(int fd) {
        static char buf[4096];
        size_t n = 0;
        ssize_t k;

        while (n < sizeof buf - 1 && (k = read(fd, buf + n, sizeof buf - 1 - n)) > 0)
                n += (size_t) k;
        buf[n] = '\0';
        return buf;
}

START_TEST(test_publish_nowhere_logs_and_holds_nothing) {
        struct publish_options c = options_none();
        struct publication p = { .port_file = "x", .port_file_fd = 99 };

        ck_assert_int_eq(publish_addresses(&c, sockets, 2, 100, 101, NULL, &p), 0);
        ck_assert_ptr_null(p.port_file);
        ck_assert_int_eq(p.port_file_fd, -1);
        ck_assert_int_eq(entries(), 0);
        publication_withdraw(&p);
}
END_TEST

START_TEST(test_publish_to_port_fd_then_eof) {
        struct publish_options c = options_none();
        struct publication p;
        int pipefd[2];

        ck_assert_int_eq(pipe2(pipefd, O_CLOEXEC), 0);
        c.port_fd = pipefd[1];
        ck_assert_int_eq(publish_addresses(&c, sockets, 2, 100, 101, NULL, &p), 0);
        /* read_all() returns: the write end was closed (the reader's EOF). */
        ck_assert_str_eq(read_all(pipefd[0]), "41234\n8080\n");
        ck_assert_int_eq(fcntl(pipefd[1], F_GETFD), -1);
        ck_assert_ptr_null(p.port_file);
        close(pipefd[0]);
}
END_TEST

START_TEST(test_publish_port_fd_in_json) {
        struct publish_options c = options_none();
        struct publication p;
        int pipefd[2];
        const char *text;

        ck_assert_int_eq(pipe2(pipefd, O_CLOEXEC), 0);
        c.port_fd = pipefd[1];
        c.format = FORMAT_JSON;
        ck_assert_int_eq(publish_addresses(&c, sockets, 2, 100, 101, NULL, &p), 0);
        text = read_all(pipefd[0]);
        ck_assert_ptr_nonnull(strstr(text, "41234"));
        ck_assert_ptr_nonnull(strstr(text, "\"web\""));
        ck_assert_ptr_nonnull(strstr(text, "101"));
        ck_assert_int_eq(text[0], '{');
        close(pipefd[0]);
}
END_TEST

START_TEST(test_publish_port_fd_write_error) {
        struct publish_options c = options_none();
        struct publication p;
        int pipefd[2];

        signal(SIGPIPE, SIG_IGN);
        ck_assert_int_eq(pipe2(pipefd, O_CLOEXEC), 0);
        close(pipefd[0]);
        c.port_fd = pipefd[1];
        c.port_file = unit_path("port");
        ck_assert_int_eq(publish_addresses(&c, sockets, 2, 100, 101, NULL, &p), -EPIPE);
        signal(SIGPIPE, SIG_DFL);
        /* Closed all the same; the port file not written after the error. */
        ck_assert_int_eq(fcntl(pipefd[1], F_GETFD), -1);
        ck_assert_ptr_null(p.port_file);
        ck_assert_int_eq(entries(), 0);
}
END_TEST

START_TEST(test_publish_to_stdout) {
        struct publish_options c = options_none();
        struct publication p;
        int pipefd[2], saved = dup(STDOUT_FILENO);

        ck_assert_int_eq(pipe2(pipefd, O_CLOEXEC), 0);
        ck_assert_int_eq(dup2(pipefd[1], STDOUT_FILENO), STDOUT_FILENO);
        close(pipefd[1]);
        c.print = true;
        c.print_format = FORMAT_ADDR;
        ck_assert_int_eq(publish_addresses(&c, sockets, 2, 100, 101, NULL, &p), 0);
        /* stdout stays open (it is not --port-fd): close it to read to EOF. */
        ck_assert_int_ne(fcntl(STDOUT_FILENO, F_GETFD), -1);
        dup2(saved, STDOUT_FILENO);
        close(saved);
        ck_assert_str_eq(read_all(pipefd[0]), "127.0.0.1:41234\n[::1]:8080\n");
        close(pipefd[0]);
}
END_TEST

START_TEST(test_publish_port_file_and_withdraw) {
        struct publish_options c = options_none();
        struct publication p;
        const char *path = unit_path("port");
        struct stat st;

        c.port_file = path;
        c.format = FORMAT_URL;
        ck_assert_int_eq(publish_addresses(&c, sockets, 2, 100, 101, NULL, &p), 0);
        ck_assert_str_eq(p.port_file, path);
        ck_assert_int_ge(p.port_file_fd, 0);
        ck_assert_str_eq(contents(path), "http://127.0.0.1:41234\nhttp://[::1]:8080\n");
        ck_assert_int_eq(stat(path, &st), 0);
        publication_withdraw(&p);
        ck_assert_int_eq(access(path, F_OK), -1);
        ck_assert_ptr_null(p.port_file);
        ck_assert_int_eq(p.port_file_fd, -1);
        /* Twice is harmless. */
        publication_withdraw(&p);
}
END_TEST

START_TEST(test_publish_everywhere_at_once) {
        struct publish_options c = options_none();
        struct publication p;
        int pipefd[2], out[2], saved = dup(STDOUT_FILENO);

        ck_assert_int_eq(pipe2(pipefd, O_CLOEXEC), 0);
        ck_assert_int_eq(pipe2(out, O_CLOEXEC), 0);
        ck_assert_int_eq(dup2(out[1], STDOUT_FILENO), STDOUT_FILENO);
        close(out[1]);
        c.port_fd = pipefd[1];
        c.print = true;
        c.print_format = FORMAT_URL;
        c.port_file = unit_path("port");
        c.format = FORMAT_PORT;
        ck_assert_int_eq(publish_addresses(&c, sockets, 1, 100, 101, NULL, &p), 0);
        dup2(saved, STDOUT_FILENO);
        close(saved);
        /* --format for --port-fd and --port-file, --print's own for stdout. */
        ck_assert_str_eq(read_all(pipefd[0]), "41234\n");
        ck_assert_str_eq(read_all(out[0]), "http://127.0.0.1:41234\n");
        ck_assert_str_eq(contents(c.port_file), "41234\n");
        publication_withdraw(&p);
        close(pipefd[0]);
        close(out[0]);
}
END_TEST

START_TEST(test_publish_port_file_not_regular) {
        struct publish_options c = options_none();
        struct publication p;

        c.port_file = unit_path("dir");
        ck_assert_int_eq(mkdir(c.port_file, 0700), 0);
        ck_assert_int_eq(publish_addresses(&c, sockets, 2, 100, 101, NULL, &p), -EEXIST);
        ck_assert_ptr_null(p.port_file);
        ck_assert_int_eq(entries(), 1);
        /* Nothing to withdraw: the directory stays. */
        publication_withdraw(&p);
        ck_assert_int_eq(access(c.port_file, F_OK), 0);
}
END_TEST

START_TEST(test_withdraw_leaves_a_replaced_file) {
        struct publish_options c = options_none();
        struct publication p;
        const char *path = unit_path("port"), *other = unit_path("other");

        c.port_file = path;
        ck_assert_int_eq(publish_addresses(&c, sockets, 1, 100, 101, NULL, &p), 0);
        /* Another prebind (or a user) put its own file in place since. */
        write_plain(other, "someone else's\n");
        ck_assert_int_eq(rename(other, path), 0);
        publication_withdraw(&p);
        ck_assert_str_eq(contents(path), "someone else's\n");
        ck_assert_int_eq(p.port_file_fd, -1);
}
END_TEST

START_TEST(test_withdraw_after_the_file_is_gone) {
        struct publish_options c = options_none();
        struct publication p;
        const char *path = unit_path("port");

        c.port_file = path;
        ck_assert_int_eq(publish_addresses(&c, sockets, 1, 100, 101, NULL, &p), 0);
        ck_assert_int_eq(unlink(path), 0);
        publication_withdraw(&p);
        ck_assert_int_eq(access(path, F_OK), -1);
        ck_assert_int_eq(entries(), 0);
}
END_TEST

int main(void) {
        Suite *s = suite_create("publish");
        TCase *atomic = tcase_create("atomic"), *publish = tcase_create("publish");

        tcase_add_checked_fixture(atomic, unit_dir_make, unit_dir_remove);
        tcase_add_test(atomic, test_atomic_content_and_fd);
        tcase_add_test(atomic, test_atomic_mode_follows_umask);
        tcase_add_test(atomic, test_atomic_replaces_a_regular_file);
        tcase_add_test(atomic, test_atomic_refuses_what_is_not_a_regular_file);
        tcase_add_test(atomic, test_atomic_device_is_refused);
        tcase_add_test(atomic, test_atomic_failed_write_leaves_nothing);
        tcase_add_test(atomic, test_atomic_missing_directory);
        tcase_add_test(atomic, test_write_all_errors);
        suite_add_tcase(s, atomic);
        tcase_add_checked_fixture(publish, publish_setup, unit_dir_remove);
        tcase_add_test(publish, test_publish_nowhere_logs_and_holds_nothing);
        tcase_add_test(publish, test_publish_to_port_fd_then_eof);
        tcase_add_test(publish, test_publish_port_fd_in_json);
        tcase_add_test(publish, test_publish_port_fd_write_error);
        tcase_add_test(publish, test_publish_to_stdout);
        tcase_add_test(publish, test_publish_port_file_and_withdraw);
        tcase_add_test(publish, test_publish_everywhere_at_once);
        tcase_add_test(publish, test_publish_port_file_not_regular);
        tcase_add_test(publish, test_withdraw_leaves_a_replaced_file);
        tcase_add_test(publish, test_withdraw_after_the_file_is_gone);
        suite_add_tcase(s, publish);
        return unit_run(s);
}
