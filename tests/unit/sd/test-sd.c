/* SPDX-License-Identifier: MIT */
/* The libsystemd glue (sd.c): nothing is loaded unless prebind was
 * socket-activated (its own LISTEN_PID) or has a manager (NOTIFY_SOCKET),
 * and never in a build without libsystemd; then sd_listen_fds_with_names()
 * and sd_notify() (or prebind's own protocol code) do their work on
 * a real socket at fd 3 and a real abstract notification socket. Each
 * test runs in its own process (check forks), so "loaded" is per test. */
#include <check.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sd.h"
#include "unit.h"

static bool libsystemd_loaded(void) {
        void *h = dlopen("libsystemd.so.0", RTLD_NOW | RTLD_NOLOAD);

        if (h)
                dlclose(h);
        return h != NULL;
}

/* Built with -Dlibsystemd=disabled, prebind speaks both protocols itself
 * (sdproto.c) and never loads libsystemd: the same results, nothing loaded. */
#ifdef HAVE_LIBSYSTEMD
static const bool with_libsystemd = true;
#else
static const bool with_libsystemd = false;
#endif

/* ---- sd_listen_fds_with_names_lazy ---------------------------------------- */

START_TEST(test_listen_without_listen_pid_loads_nothing) {
        char **names = (char **) 1;

        ck_assert(!libsystemd_loaded());
        unsetenv("LISTEN_PID");
        setenv("LISTEN_FDS", "1", 1);
        ck_assert_int_eq(sd_listen_fds_with_names_lazy(&names), 0);
        ck_assert_ptr_null(names);
        ck_assert(!libsystemd_loaded());
        /* Not ours to unset. */
        ck_assert_str_eq(getenv("LISTEN_FDS"), "1");
        unsetenv("LISTEN_FDS");
}
END_TEST

START_TEST(test_listen_with_anothers_pid_loads_nothing) {
        char **names = (char **) 1, other[32];
        static const char *const not_ours[] = { "1", "", "abc", NULL };

        snprintf(other, sizeof other, "%d", (int) getppid());
        setenv("LISTEN_FDS", "1", 1);
        setenv("LISTEN_PID", other, 1);
        ck_assert_int_eq(sd_listen_fds_with_names_lazy(&names), 0);
        ck_assert_ptr_null(names);
        for (size_t i = 0; not_ours[i]; i++) {
                names = (char **) 1;
                setenv("LISTEN_PID", not_ours[i], 1);
                ck_assert_int_eq(sd_listen_fds_with_names_lazy(&names), 0);
                ck_assert_ptr_null(names);
        }
        /* Our pid with a suffix is not our pid. */
        snprintf(other, sizeof other, "%d0", (int) getpid());
        setenv("LISTEN_PID", other, 1);
        ck_assert_int_eq(sd_listen_fds_with_names_lazy(&names), 0);
        ck_assert(!libsystemd_loaded());
        ck_assert_str_eq(getenv("LISTEN_PID"), other);
        unsetenv("LISTEN_PID");
        unsetenv("LISTEN_FDS");
}
END_TEST

/* In a child of its own (fd 3 is the process's): a TCP socket at fd 3,
 * LISTEN_* for this pid. Exit status 0 if all holds, else the step. */
static int listen_in_child(const char *fdnames, const char *want_name, const char *pid_prefix) {
        pid_t pid = unit_fork();

        if (pid == 0) {
                struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
                int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
                char **names = NULL, self[32];
                int n;

                if (fd < 0 || bind(fd, (struct sockaddr *) &a, sizeof a) < 0 || listen(fd, 4) < 0)
                        exit(10);
                if (fd != 3 && (dup2(fd, 3) < 0 || close(fd) < 0))
                        exit(11);
                snprintf(self, sizeof self, "%s%d", pid_prefix, (int) getpid());
                setenv("LISTEN_PID", self, 1);
                setenv("LISTEN_FDS", "1", 1);
                if (fdnames)
                        setenv("LISTEN_FDNAMES", fdnames, 1);
                else
                        unsetenv("LISTEN_FDNAMES");
                n = sd_listen_fds_with_names_lazy(&names);
                if (n != 1)
                        exit(12);
                if (!names || !names[0] || strcmp(names[0], want_name) != 0 || names[1])
                        exit(13);
                /* Unset for whatever prebind runs; fd 3 close-on-exec. */
                if (getenv("LISTEN_PID") || getenv("LISTEN_FDS") || getenv("LISTEN_FDNAMES"))
                        exit(14);
                if (!(fcntl(3, F_GETFD) & FD_CLOEXEC))
                        exit(15);
                if (libsystemd_loaded() != with_libsystemd)
                        exit(16);
                free(names[0]);
                free(names);
                exit(0);
        }
        return WEXITSTATUS(unit_wait_bounded(pid));
}

START_TEST(test_listen_with_our_pid) {
        ck_assert_int_eq(listen_in_child("web", "web", ""), 0);
        /* No names: systemd says "unknown". */
        ck_assert_int_eq(listen_in_child(NULL, "unknown", ""), 0);
        /* And the check can fail: the wrong name is noticed. */
        ck_assert_int_eq(listen_in_child("api", "web", ""), 13);
        /* LISTEN_PID by libsystemd's number rule (parse_pid()), which
         * the check before loading it follows too: a sign, blanks. */
        ck_assert_int_eq(listen_in_child("web", "web", "+"), 0);
        ck_assert_int_eq(listen_in_child("web", "web", " \t"), 0);
        ck_assert_int_eq(listen_in_child("web", "web", "0"), 12); /* octal: not ours */
}
END_TEST

/* ---- sd_notify_lazy -------------------------------------------------------- */

START_TEST(test_notify_without_socket_is_a_no_op) {
        unsetenv("NOTIFY_SOCKET");
        ck_assert_int_eq(sd_notify_lazy("READY=1"), 0);
        ck_assert(!libsystemd_loaded());
}
END_TEST

/* An abstract datagram socket, bound to a name of this test's own. */
static int notify_listener(char *address, size_t size) {
        struct sockaddr_un a = { .sun_family = AF_UNIX };
        int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        socklen_t len;

        ck_assert_int_ge(fd, 0);
        snprintf(address, size, "@prebind-test-sd/%d", (int) getpid());
        len = (socklen_t) strlen(address);
        memcpy(a.sun_path, address, len);
        a.sun_path[0] = '\0';
        ck_assert_int_eq(bind(fd, (struct sockaddr *) &a, (socklen_t) offsetof(struct sockaddr_un, sun_path) + len),
                         0);
        return fd;
}

START_TEST(test_notify_reaches_the_managers_socket) {
        char address[64], buf[256];
        int fd = notify_listener(address, sizeof address);
        ssize_t n;

        setenv("NOTIFY_SOCKET", address, 1);
        ck_assert_int_gt(sd_notify_lazy("READY=1\nSTATUS=serving"), 0);
        ck_assert(libsystemd_loaded() == with_libsystemd);
        n = recv(fd, buf, sizeof buf - 1, MSG_DONTWAIT);
        ck_assert_int_gt(n, 0);
        buf[n] = '\0';
        ck_assert_str_eq(buf, "READY=1\nSTATUS=serving");
        /* sd_notify(0, …) leaves NOTIFY_SOCKET for later messages. */
        ck_assert_str_eq(getenv("NOTIFY_SOCKET"), address);
        ck_assert_int_gt(sd_notify_lazy("STOPPING=1"), 0);
        n = recv(fd, buf, sizeof buf - 1, MSG_DONTWAIT);
        ck_assert_int_eq(n, 10);
        unsetenv("NOTIFY_SOCKET");
        close(fd);
}
END_TEST

START_TEST(test_notify_to_nobody_is_an_error) {
        setenv("NOTIFY_SOCKET", "@prebind-test-sd/nobody-listens-here", 1);
        ck_assert_int_eq(sd_notify_lazy("READY=1"), -ECONNREFUSED);
        unsetenv("NOTIFY_SOCKET");
}
END_TEST

int main(void) {
        Suite *s = suite_create("sd");
        TCase *listen_tc = tcase_create("listen-fds"), *notify = tcase_create("notify");

        tcase_add_test(listen_tc, test_listen_without_listen_pid_loads_nothing);
        tcase_add_test(listen_tc, test_listen_with_anothers_pid_loads_nothing);
        tcase_add_test(listen_tc, test_listen_with_our_pid);
        suite_add_tcase(s, listen_tc);
        tcase_add_test(notify, test_notify_without_socket_is_a_no_op);
        tcase_add_test(notify, test_notify_reaches_the_managers_socket);
        tcase_add_test(notify, test_notify_to_nobody_is_an_error);
        suite_add_tcase(s, notify);
        return unit_run(s);
}
