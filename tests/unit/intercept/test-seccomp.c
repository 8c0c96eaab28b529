/* SPDX-License-Identifier: MIT */
/* --intercept through seccomp (src/seccomp.c): the pure parts (/proc
 * parsing, the bind rule both mechanisms share), and the whole path in a
 * forked child that installs the filter and binds as a server would:
 * both families, a second bind of each, a port not intercepted. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "intercept/match.h"
#include "loop.h"
#include "macro.h"
#include "seccomp.h"
#include "unit.h"

START_TEST(test_parse_tgid) {
        pid_t tgid = 0;

        ck_assert_int_eq(
                intercept_seccomp_parse_tgid("Name:\tgo\nUmask:\t0022\nState:\tS\nTgid:\t4242\nNgid:\t0\n", &tgid), 0);
        ck_assert_int_eq(tgid, 4242);
        ck_assert_int_eq(intercept_seccomp_parse_tgid("Tgid:\t7", &tgid), 0);
        ck_assert_int_eq(tgid, 7);
        ck_assert_int_eq(intercept_seccomp_parse_tgid("Name:\tx\nPid:\t5\n", &tgid), -EINVAL);
        ck_assert_int_eq(intercept_seccomp_parse_tgid("Tgid:\t\n", &tgid), -EINVAL);
        ck_assert_int_eq(intercept_seccomp_parse_tgid("Tgid:\t12x\n", &tgid), -EINVAL);
        ck_assert_int_eq(intercept_seccomp_parse_tgid("Tgid:\t0\n", &tgid), -EINVAL);
        ck_assert_int_eq(intercept_seccomp_parse_tgid("Tgid:\t99999999999\n", &tgid), -EINVAL);
        ck_assert_int_eq(intercept_seccomp_parse_tgid("", &tgid), -EINVAL);
        /* "NoTgid:" is not the field. */
        ck_assert_int_eq(intercept_seccomp_parse_tgid("XTgid:\t3\n", &tgid), -EINVAL);
}
END_TEST

START_TEST(test_parse_ids) {
        uid_t uid = 1;
        gid_t gid = 1;

        ck_assert_int_eq(intercept_seccomp_parse_ids("Tgid:\t5\nUid:\t1000\t65534\t1000\t1000\n"
                                                     "Gid:\t100\t200\t100\t100\nFDSize:\t64\n",
                                                     &uid, &gid),
                         0);
        /* The effective ids, as SO_PEERCRED reports them. */
        ck_assert_uint_eq(uid, 65534);
        ck_assert_uint_eq(gid, 200);
        ck_assert_int_eq(intercept_seccomp_parse_ids("Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0", &uid, &gid), 0);
        ck_assert_uint_eq(uid, 0);
        ck_assert_uint_eq(gid, 0);
        ck_assert_int_eq(intercept_seccomp_parse_ids("Uid:\t1000\nGid:\t1\t2\n", &uid, &gid), -EINVAL);
        ck_assert_int_eq(intercept_seccomp_parse_ids("Uid:\t1\t2\n", &uid, &gid), -EINVAL);
        ck_assert_int_eq(intercept_seccomp_parse_ids("Uid:\t1\t2x\nGid:\t1\t2\n", &uid, &gid), -EINVAL);
        ck_assert_int_eq(intercept_seccomp_parse_ids("Uid:\t1\t4294967295\nGid:\t1\t2\n", &uid, &gid), -EINVAL);
        /* Above 2^31, where a 32-bit long ends. */
        ck_assert_int_eq(intercept_seccomp_parse_ids("Uid:\t1\t3000000000\nGid:\t1\t4294967294\n", &uid, &gid), 0);
        ck_assert_uint_eq(uid, 3000000000U);
        ck_assert_uint_eq(gid, 4294967294U);
        ck_assert_int_eq(intercept_seccomp_parse_ids("Uid:\t1\t99999999999999999999999\nGid:\t1\t2\n", &uid, &gid),
                         -EINVAL);
}
END_TEST

START_TEST(test_parse_fdinfo_flags) {
        unsigned flags = 0;

        ck_assert_int_eq(
                intercept_seccomp_parse_fdinfo_flags("pos:\t0\nflags:\t02000002\nmnt_id:\t8\nino:\t1\n", &flags), 0);
        ck_assert_uint_eq(flags, 02000002);
        ck_assert(flags & O_CLOEXEC);
        ck_assert_int_eq(intercept_seccomp_parse_fdinfo_flags("pos:\t0\nflags:\t04002\n", &flags), 0);
        ck_assert_uint_eq(flags, O_NONBLOCK | O_RDWR);
        ck_assert(!(flags & O_CLOEXEC));
        ck_assert_int_eq(intercept_seccomp_parse_fdinfo_flags("pos:\t0\n", &flags), -EINVAL);
        ck_assert_int_eq(intercept_seccomp_parse_fdinfo_flags("flags:\t09\n", &flags), -EINVAL);
        ck_assert_int_eq(intercept_seccomp_parse_fdinfo_flags("flags:\t\n", &flags), -EINVAL);
        ck_assert_int_eq(intercept_seccomp_parse_fdinfo_flags("flags:\t0777777777777\n", &flags), -EINVAL);
}
END_TEST

START_TEST(test_bind_rule) {
        /* The first bind, and a second of the same family (an nginx
         * reload from "8080" to "127.0.0.1:8080"), get the socket. */
        ck_assert_int_eq(intercept_bind_rule(0, AF_INET), INTERCEPT_GIVE_SOCKET);
        ck_assert_int_eq(intercept_bind_rule(0, AF_INET6), INTERCEPT_GIVE_SOCKET);
        ck_assert_int_eq(intercept_bind_rule(AF_INET, AF_INET), INTERCEPT_GIVE_SOCKET);
        ck_assert_int_eq(intercept_bind_rule(AF_INET6, AF_INET6), INTERCEPT_GIVE_SOCKET);
        /* The other family (Redis: * and ::) a decoy. */
        ck_assert_int_eq(intercept_bind_rule(AF_INET, AF_INET6), INTERCEPT_GIVE_DECOY);
        ck_assert_int_eq(intercept_bind_rule(AF_INET6, AF_INET), INTERCEPT_GIVE_DECOY);
}
END_TEST

START_TEST(test_why_not) {
        ck_assert(strstr(intercept_seccomp_why_not(-EBUSY), "another seccomp supervisor"));
        ck_assert(strstr(intercept_seccomp_why_not(-ENOSYS), "seccomp() is not available"));
        ck_assert(strstr(intercept_seccomp_why_not(-ENOTTY), "Linux 5.9"));
        ck_assert(strstr(intercept_seccomp_why_not(-EINVAL), "Linux 5.9"));
        ck_assert(strstr(intercept_seccomp_why_not(-EPERM), "policy"));
}
END_TEST

/* The version rule of the fast probe: 5.9 (ADDFD) or later, the killable
 * wait from 5.19; anything else, or anything unreadable, goes to the
 * child. */
START_TEST(test_release_flags) {
        static const struct {
                const char *release;
                int r;
                bool killable;
        } cases[] = {
                { "6.18.44-fc-v1045", 0, true },
                { "6.1.0-28-amd64", 0, true },
                { "5.19.0", 0, true },
                { "5.19-rc1", 0, true },
                { "5.18.19", 0, false },
                { "5.10.0-33-cloud-amd64", 0, false },
                { "5.9", 0, false },
                { "10.0", 0, true },
                { "5.8.18", -EINVAL, false },
                { "4.18.0-553.el8_10.x86_64", -EINVAL, false },
                { "3.10.0", -EINVAL, false },
                { "5", -EINVAL, false },
                { "5.", -EINVAL, false },
                { "5-9", -EINVAL, false },
                { ".9", -EINVAL, false },
                { " 5.9", -EINVAL, false },
                { "-6.1", -EINVAL, false },
                { "6.-1", -EINVAL, false },
                { "99999999999999999999999.1", -EINVAL, false },
                { "", -EINVAL, false },
                { "linux", -EINVAL, false },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                unsigned flags = 12345;
                int r = intercept_seccomp_release_flags(cases[i].release, &flags);

                ck_assert_msg(r == cases[i].r, "'%s': %d", cases[i].release, r);
                if (r == 0)
                        ck_assert_msg((flags != 0) == cases[i].killable, "'%s': flags %u", cases[i].release, flags);
                else
                        ck_assert_msg(flags == 12345, "'%s': flags written on failure", cases[i].release);
        }
}
END_TEST

/* The fast probe answers as the child does, where both say yes. */
START_TEST(test_probe_agrees) {
        unsigned fast = 0, child = 0;
        int r = intercept_seccomp_probe_child(&child);

        if (r < 0) /* an old kernel, or under another listener: nothing to compare */
                return;
        ck_assert_int_eq(intercept_seccomp_probe(&fast), 0);
        ck_assert_uint_eq(fast, child);
}
END_TEST

/* ---- the whole path, in a child -------------------------------------- */

#define PORT 48123

static unsigned short port_of(int fd) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        uint16_t port = 0;

        if (getsockname(fd, (struct sockaddr *) &ss, &len) < 0 ||
            !intercept_sockaddr_port((struct sockaddr *) &ss, len, &port))
                return 0;
        return port;
}

static int bind_again(int fd, int family, unsigned short port) {
        struct sockaddr_in in = { .sin_family = AF_INET,
                                  .sin_port = htons(port),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        struct sockaddr_in6 in6 = { .sin6_family = AF_INET6, .sin6_port = htons(port) };

        return family == AF_INET ? bind(fd, (struct sockaddr *) &in, sizeof in)
                                 : bind(fd, (struct sockaddr *) &in6, sizeof in6);
}

static int bind_port(int family, int type, unsigned short port) {
        int fd = socket(family, type | SOCK_CLOEXEC, 0), one = 1;

        if (fd < 0)
                return -1;
        if (family == AF_INET6)
                (void) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
        if (bind_again(fd, family, port) < 0)
                return -1;
        return fd;
}

/* The child: exit 0 when every bind went as the rule says. */
static void server(struct intercept_seccomp *s, unsigned short ours) {
        int v6, v6_again, v4, other, udp;

        unit_default_signals();
        if (intercept_seccomp_child(s, intercept_seccomp_child_socket(s)) < 0)
                _exit(10);
        v6 = bind_port(AF_INET6, SOCK_STREAM, PORT);
        if (v6 < 0 || port_of(v6) != ours || listen(v6, 8) < 0)
                _exit(11);
        /* Close-on-exec is the server's own. */
        if (!(fcntl(v6, F_GETFD) & FD_CLOEXEC))
                _exit(12);
        /* A bind restarted on the swapped fd (a signal between ADDFD and
         * the answer, without the killable wait) is answered 0 (the
         * kernel alone would say EINVAL: the socket is bound). */
        if (bind_again(v6, AF_INET6, PORT) < 0)
                _exit(17);
        v6_again = bind_port(AF_INET6, SOCK_STREAM, PORT);
        if (v6_again < 0 || port_of(v6_again) != ours)
                _exit(13);
        v4 = bind_port(AF_INET, SOCK_STREAM, PORT);
        if (v4 < 0 || port_of(v4) == ours || port_of(v4) == PORT || port_of(v4) == 0)
                _exit(14);
        /* Not intercepted: the kernel binds it (port 0 here). */
        other = bind_port(AF_INET, SOCK_STREAM, 0);
        if (other < 0 || port_of(other) == ours)
                _exit(15);
        udp = bind_port(AF_INET, SOCK_DGRAM, 0);
        if (udp < 0)
                _exit(16);
        _exit(0);
}

/* A failed answer is logged by the listener; the child's checks of
 * what each bind returned say whether it was right. */
static void answered(void *userdata) {
        (*(unsigned *) userdata)++;
}

/* Both ways: with the kernel's killable wait where it has one, and
 * without it (the restarted-bind answer is what saves Go there). */
START_TEST(test_whole_path) {
        struct intercept_seccomp *s = NULL;
        struct intercept_target target;
        struct timespec start, now;
        struct loop *loop;
        unsigned flags = 0, n_answered = 0;
        int listening, status = -1;
        unsigned short ours;
        pid_t pid;

        if (intercept_seccomp_probe(&flags) < 0)
                return; /* an old kernel, or under another listener: the fallback's business */
        if (_i == 1)
                flags = 0;
        listening = bind_port(AF_INET, SOCK_STREAM, 0);
        ours = port_of(listening);
        ck_assert_int_ge(listening, 0);
        ck_assert_int_eq(listen(listening, 8), 0);
        target = (struct intercept_target) { .port = PORT, .type = SOCK_STREAM, .fd = listening, .name = "t" };
        ck_assert_int_eq(intercept_seccomp_new(&target, 1, flags, &s), 0);
        ck_assert_int_eq(loop_new(&loop), 0);
        ck_assert_int_eq(intercept_seccomp_attach(s, loop, answered, &n_answered), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0)
                server(s, ours);
        clock_gettime(CLOCK_MONOTONIC, &start);
        while (intercept_seccomp_set_command(s, pid) == -ENOENT) {
                clock_gettime(CLOCK_MONOTONIC, &now);
                ck_assert_msg(now.tv_sec - start.tv_sec < 20, "no listener from the child");
                usleep(1000);
        }
        for (;;) {
                ck_assert_int_ge(loop_dispatch_once(loop, 20), 0);
                if (waitpid(pid, &status, WNOHANG) == pid)
                        break;
                clock_gettime(CLOCK_MONOTONIC, &now);
                if (now.tv_sec - start.tv_sec > 20) {
                        kill(pid, SIGKILL);
                        waitpid(pid, &status, 0);
                        ck_abort_msg("the child did not finish within 20s");
                }
        }
        ck_assert(WIFEXITED(status));
        ck_assert_int_eq(WEXITSTATUS(status), 0);
        ck_assert(intercept_seccomp_all_claimed(s));
        ck_assert_uint_gt(n_answered, 0);
        intercept_seccomp_free(s);
        loop_free(loop);
        close(listening);
}
END_TEST

START_TEST(test_unmet_names_what_was_bound) {
        struct intercept_seccomp *s = NULL;
        struct intercept_target target = { .port = PORT, .type = SOCK_DGRAM, .fd = STDIN_FILENO, .name = "t" };
        char why[256];

        ck_assert_int_eq(intercept_seccomp_new(&target, 1, 0, &s), 0);
        intercept_seccomp_describe_unmet(s, why, sizeof why);
        ck_assert_str_eq(why, "did not claim port 48123/udp (it bound no IP port)");
        intercept_seccomp_describe_unmet(s, why, 10);
        ck_assert_uint_eq(strlen(why), 9);
        intercept_seccomp_free(s);
}
END_TEST

static Suite *seccomp_suite(void) {
        Suite *s = suite_create("seccomp");
        TCase *tc;

        tc = tcase_create("parse");
        tcase_add_test(tc, test_parse_tgid);
        tcase_add_test(tc, test_parse_ids);
        tcase_add_test(tc, test_parse_fdinfo_flags);
        tcase_add_test(tc, test_bind_rule);
        tcase_add_test(tc, test_why_not);
        tcase_add_test(tc, test_release_flags);
        tcase_add_test(tc, test_probe_agrees);
        suite_add_tcase(s, tc);

        tc = tcase_create("notification");
        tcase_set_timeout(tc, 30);
        tcase_add_loop_test(tc, test_whole_path, 0, 2);
        tcase_add_test(tc, test_unmet_names_what_was_bound);
        suite_add_tcase(s, tc);
        return s;
}

int main(void) {
        return unit_run(seccomp_suite());
}
