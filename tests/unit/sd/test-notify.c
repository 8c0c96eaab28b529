/* SPDX-License-Identifier: MIT */
/* Notifications from COMMAND (notify.c): notify_message_parse() on every
 * key, bad values, lines without '=', empty lines, a last line without
 * newline, NUL bytes and garbage; and notify_socket_receive() on a real
 * socket, with oversized datagrams and fds attached. Every datagram is
 * parsed from a heap buffer of exactly its length, without a trailing
 * NUL, so that a read past the end shows under AddressSanitizer and
 * valgrind. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "notify.h"
#include "unit.h"

/* ---- harness ------------------------------------------------------------- */

/* The datagram in a buffer of exactly len bytes (len may be 0). */
static struct notify_message parse_bytes(const char *bytes, size_t len, char **ret_copy) {
        struct notify_message m;
        char *copy = malloc(len ? len : 1);

        ck_assert_ptr_nonnull(copy);
        memcpy(copy, bytes, len);
        memset(&m, 0x5a, sizeof m);
        notify_message_parse(copy, len, &m);
        /* STATUS= points into the datagram, never past it. */
        if (m.status) {
                ck_assert(m.status >= copy && m.status + m.status_len <= copy + len);
                ck_assert_ptr_null(memchr(m.status, '\n', m.status_len));
        } else
                ck_assert_uint_eq(m.status_len, 0);
        ck_assert(m.errno_value >= -1 && m.errno_value <= 4095);
        *ret_copy = copy;
        return m;
}

static char *last_copy;

static struct notify_message parse(const char *text) {
        free(last_copy);
        return parse_bytes(text, strlen(text), &last_copy);
}

static void teardown(void) {
        free(last_copy);
        last_copy = NULL;
}

static void check_nothing(const struct notify_message *m) {
        ck_assert(!m->ready);
        ck_assert(!m->reloading);
        ck_assert(!m->stopping);
        ck_assert_ptr_null(m->status);
        ck_assert_int_eq(m->errno_value, -1);
        ck_assert_uint_eq(m->extend_usec, 0);
}

static void check_status(const struct notify_message *m, const char *want) {
        ck_assert_ptr_nonnull(m->status);
        ck_assert_uint_eq(m->status_len, strlen(want));
        ck_assert(memcmp(m->status, want, m->status_len) == 0);
}

/* ---- every key ----------------------------------------------------------- */

START_TEST(test_empty) {
        struct notify_message m = parse("");

        check_nothing(&m);
}
END_TEST

START_TEST(test_ready) {
        struct notify_message m = parse("READY=1");

        ck_assert(m.ready);
        ck_assert(!m.reloading && !m.stopping);
        ck_assert_ptr_null(m.status);
        ck_assert_int_eq(m.errno_value, -1);
        ck_assert_uint_eq(m.extend_usec, 0);
}
END_TEST

START_TEST(test_reloading_stopping) {
        struct notify_message m = parse("RELOADING=1\n");

        ck_assert(m.reloading && !m.ready && !m.stopping);
        m = parse("STOPPING=1\n");
        ck_assert(m.stopping && !m.ready && !m.reloading);
}
END_TEST

START_TEST(test_status) {
        struct notify_message m = parse("STATUS=warming up: 3/4 caches\n");

        check_status(&m, "warming up: 3/4 caches");
        ck_assert(!m.ready);
        /* Empty is a status too (it clears systemd's). */
        m = parse("STATUS=");
        check_status(&m, "");
        /* '=' and anything but a newline belong to the value. */
        m = parse("STATUS=a=b \t\x01\x7f\xff");
        check_status(&m, "a=b \t\x01\x7f\xff");
}
END_TEST

START_TEST(test_errno) {
        struct notify_message m = parse("ERRNO=2");

        ck_assert_int_eq(m.errno_value, 2);
        m = parse("ERRNO=0\n");
        ck_assert_int_eq(m.errno_value, 0);
        m = parse("ERRNO=4095\n");
        ck_assert_int_eq(m.errno_value, 4095);
}
END_TEST

START_TEST(test_extend_timeout) {
        struct notify_message m = parse("EXTEND_TIMEOUT_USEC=3000000");

        ck_assert_uint_eq(m.extend_usec, 3000000);
        /* The largest value: UINT32_MAX seconds, as the parser caps it. */
        m = parse("EXTEND_TIMEOUT_USEC=4294967295000000");
        ck_assert_uint_eq(m.extend_usec, 4294967295000000ULL);
        m = parse("EXTEND_TIMEOUT_USEC=0");
        ck_assert_uint_eq(m.extend_usec, 0);
}
END_TEST

START_TEST(test_all_keys_in_one_datagram) {
        struct notify_message m =
                parse("READY=1\nRELOADING=1\nSTOPPING=1\nSTATUS=all\nERRNO=5\nEXTEND_TIMEOUT_USEC=7\n");

        ck_assert(m.ready && m.reloading && m.stopping);
        check_status(&m, "all");
        ck_assert_int_eq(m.errno_value, 5);
        ck_assert_uint_eq(m.extend_usec, 7);
}
END_TEST

START_TEST(test_unknown_keys_ignored) {
        struct notify_message m = parse("MAINPID=1\nWATCHDOG=1\nFDSTORE=1\nFDNAME=x\nBARRIER=1\n"
                                        "WATCHDOG_USEC=1\nNOTIFYACCESS=all\nX=1\nREADY_=1\nREADYY=1\n");

        check_nothing(&m);
        m = parse("MAINPID=1\nREADY=1\nX=2");
        ck_assert(m.ready);
}
END_TEST

START_TEST(test_flag_once_set_stays) {
        /* A later READY=0 in the same datagram does not take READY=1 back. */
        struct notify_message m = parse("READY=1\nREADY=0\n");

        ck_assert(m.ready);
        m = parse("READY=0\nREADY=1");
        ck_assert(m.ready);
}
END_TEST

/* ---- bad values ---------------------------------------------------------- */

/* Flags are set by exactly "1": anything else is not READY=1. */
static const char *const not_ready[] = {
        "READY=0",    "READY=2",   "READY=11",    "READY=",   "READY=1 ", "READY= 1", "READY=01",
        "READY=true", "READY=1\r", "READY=1\r\n", "READY=+1", "ready=1",  "Ready=1",  " READY=1",
        "\tREADY=1",  "READY =1",  "XREADY=1",    "READY:1",  "READY==1",
};

START_TEST(test_not_ready) {
        struct notify_message m = parse(not_ready[_i]);

        ck_assert_msg(!m.ready, "'%s' was taken for READY=1", not_ready[_i]);
}
END_TEST

static const char *const bad_errno[] = {
        "ERRNO=",     "ERRNO=-1",
        "ERRNO=4096", "ERRNO=99999999999999999999999",
        "ERRNO=abc",  "ERRNO=2x",
        "ERRNO= 2",   "ERRNO=2 ",
        "ERRNO=+2",   "ERRNO=0x2",
        "ERRNO=2.0",  "ERRNO=\xff",
        "ERRNO=1\r",  "ERRNO=00000000000000000000000000000000002", /* longer than the parser's buffer */
};

START_TEST(test_bad_errno) {
        struct notify_message m = parse(bad_errno[_i]);

        ck_assert_msg(m.errno_value == -1, "'%s' gave %d", bad_errno[_i], m.errno_value);
}
END_TEST

static const char *const bad_extend[] = {
        "EXTEND_TIMEOUT_USEC=",
        "EXTEND_TIMEOUT_USEC=-1",
        "EXTEND_TIMEOUT_USEC=1s",
        "EXTEND_TIMEOUT_USEC=1.5",
        "EXTEND_TIMEOUT_USEC=4294967295000001",
        "EXTEND_TIMEOUT_USEC=18446744073709551616",
        "EXTEND_TIMEOUT_USEC=99999999999999999999999999999999",
        "EXTEND_TIMEOUT_USEC= 5",
};

START_TEST(test_bad_extend) {
        struct notify_message m = parse(bad_extend[_i]);

        ck_assert_msg(m.extend_usec == 0, "'%s' gave %llu", bad_extend[_i], (unsigned long long) m.extend_usec);
}
END_TEST

/* ---- lines --------------------------------------------------------------- */

START_TEST(test_missing_equals) {
        /* A key without '=' is no assignment at all. */
        struct notify_message m = parse("READY\nSTATUS\nERRNO\nSTOPPING\nRELOADING\nEXTEND_TIMEOUT_USEC\n");

        check_nothing(&m);
        m = parse("READY");
        check_nothing(&m);
        m = parse("=1\n=\n==\n");
        check_nothing(&m);
}
END_TEST

START_TEST(test_empty_lines) {
        struct notify_message m = parse("\n");

        check_nothing(&m);
        m = parse("\n\n\n");
        check_nothing(&m);
        m = parse("\n\nREADY=1\n\n\nSTATUS=x\n\n");
        ck_assert(m.ready);
        check_status(&m, "x");
}
END_TEST

START_TEST(test_no_trailing_newline) {
        struct notify_message m = parse("READY=1\nSTATUS=last");

        ck_assert(m.ready);
        check_status(&m, "last");
        m = parse("STATUS=a\nERRNO=17");
        ck_assert_int_eq(m.errno_value, 17);
        m = parse("EXTEND_TIMEOUT_USEC=12");
        ck_assert_uint_eq(m.extend_usec, 12);
        /* Cut inside a key: no assignment. */
        m = parse("READY=1\nSTAT");
        ck_assert(m.ready);
        ck_assert_ptr_null(m.status);
        m = parse("READY=");
        ck_assert(!m.ready);
}
END_TEST

START_TEST(test_nul_bytes) {
        static const char with_nul[] = "STATUS=a\0b\nREADY=1\0\nERRNO=2\0";
        struct notify_message m;

        /* A NUL is a byte like any other: it does not end the datagram. */
        free(last_copy);
        m = parse_bytes(with_nul, sizeof with_nul - 1, &last_copy);
        ck_assert_ptr_nonnull(m.status);
        ck_assert_uint_eq(m.status_len, 3);
        ck_assert(memcmp(m.status, "a\0b", 3) == 0);
        ck_assert(!m.ready);                 /* "1\0" is not "1" */
        ck_assert_int_eq(m.errno_value, -1); /* nor "2\0" a number */

        free(last_copy);
        m = parse_bytes("\0\0\0READY=1", 10, &last_copy);
        ck_assert(!m.ready);
        free(last_copy);
        m = parse_bytes("\0\nREADY=1", 9, &last_copy);
        ck_assert(m.ready);
}
END_TEST

START_TEST(test_length_is_respected) {
        /* Only len bytes count, whatever follows them. */
        const char *text = "READY=1\nSTATUS=abcdef";
        struct notify_message m;

        free(last_copy);
        m = parse_bytes(text, 6, &last_copy); /* "READY=" */
        ck_assert(!m.ready);
        free(last_copy);
        m = parse_bytes(text, 7, &last_copy); /* "READY=1" */
        ck_assert(m.ready);
        ck_assert_ptr_null(m.status);
        free(last_copy);
        m = parse_bytes(text, 18, &last_copy); /* ... "STATUS=abc" */
        check_status(&m, "abc");
}
END_TEST

/* ---- oversize and garbage ------------------------------------------------ */

START_TEST(test_long_datagram) {
        /* The parser has no limit of its own (the socket has): a status
         * of 64 KiB, and READY=1 after it, are read whole. */
        size_t n = 65536;
        char *text = malloc(n + 64);
        struct notify_message m;

        ck_assert_ptr_nonnull(text);
        strcpy(text, "STATUS=");
        memset(text + 7, 'x', n);
        strcpy(text + 7 + n, "\nREADY=1");
        m = parse(text);
        ck_assert(m.ready);
        ck_assert_uint_eq(m.status_len, n);
        free(text);
}
END_TEST

START_TEST(test_garbage) {
        /* Random bytes, many newlines and '=' among them: no crash, and the
         * harness checks STATUS= stays inside each datagram. */
        uint64_t state = 0x9e3779b97f4a7c15ULL;
        char *buf = malloc(4096), *copy = NULL;

        ck_assert_ptr_nonnull(buf);
        for (int round = 0; round < 2000; round++) {
                size_t len = (size_t) (state % 4096);
                for (size_t i = 0; i < len; i++) {
                        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
                        switch ((state >> 33) % 8) {
                        case 0:
                                buf[i] = '\n';
                                break;
                        case 1:
                                buf[i] = '=';
                                break;
                        case 2:
                                buf[i] = "READYSTOPINGLUCX_0123456789"[(state >> 40) % 27];
                                break;
                        default:
                                buf[i] = (char) (state >> 56);
                        }
                }
                state = state * 6364136223846793005ULL + 1442695040888963407ULL;
                (void) parse_bytes(buf, len, &copy);
                free(copy);
        }
        free(buf);
}
END_TEST

/* ---- the socket ---------------------------------------------------------- */

static int count_fds(void) {
        DIR *d = opendir("/proc/self/fd");
        struct dirent *de;
        int n = 0;

        ck_assert_ptr_nonnull(d);
        while ((de = readdir(d)))
                n += de->d_name[0] != '.';
        closedir(d);
        return n - 1; /* the directory's own fd */
}

static struct notify_socket ns = { .fd = -1 };
static int sender = -1;

static void socket_setup(void) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        size_t len;

        ck_assert_int_eq(notify_socket_open(&ns), 0);
        ck_assert(ns.address[0] == '@');
        /* Close-on-exec, like every fd of prebind's but the sockets. */
        ck_assert_int_eq(fcntl(ns.fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
        len = strlen(ns.address);
        memcpy(sa.sun_path, ns.address, len);
        sa.sun_path[0] = '\0';
        sender = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(sender, 0);
        ck_assert_int_eq(
                connect(sender, (struct sockaddr *) &sa, (socklen_t) (offsetof(struct sockaddr_un, sun_path) + len)),
                0);
}

static void socket_teardown(void) {
        notify_socket_close(&ns);
        ck_assert_int_eq(ns.fd, -1);
        notify_socket_close(&ns); /* twice is harmless */
        if (sender >= 0)
                close(sender);
        sender = -1;
}

static void send_with_fds(const void *data, size_t len, int n_fds) {
        union {
                struct cmsghdr header;
                char space[CMSG_SPACE(sizeof(int) * 253)];
        } control;
        struct iovec iov = { .iov_base = (void *) data, .iov_len = len };
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
        int fds[253];

        ck_assert_int_le(n_fds, 253);
        if (n_fds > 0) {
                struct cmsghdr *c;

                for (int i = 0; i < n_fds; i++) {
                        fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
                        ck_assert_int_ge(fds[i], 0);
                }
                memset(&control, 0, sizeof control);
                msg.msg_control = &control;
                msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t) n_fds);
                c = CMSG_FIRSTHDR(&msg);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t) n_fds);
                memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t) n_fds);
        }
        ck_assert_int_eq(sendmsg(sender, &msg, 0), (ssize_t) len);
        for (int i = 0; i < n_fds; i++)
                close(fds[i]);
}

static int receive(struct notify_message *m) {
        char buf[NOTIFY_MESSAGE_MAX + 1];
        struct peer from = PEER_NONE;
        int r;

        memset(m, 0, sizeof *m);
        r = notify_socket_receive(&ns, buf, sizeof buf, &from, m);
        if (r == 1) {
                ck_assert_int_eq(from.pid, getpid()); /* the kernel's word for the sender */
                ck_assert_int_eq(from.uid, getuid());
                /* …and the sender itself, as a pidfd (SCM_PIDFD, or the
                 * fallback's pidfd_open()), close-on-exec. */
                ck_assert_int_ge(from.pidfd, 0);
                ck_assert_int_eq(fcntl(from.pidfd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
                ck_assert(peer_descends_from(&from, getpid()));
                ck_assert(!peer_exited(&from));
        } else
                ck_assert_int_eq(from.pidfd, -1);
        peer_done(&from);
        /* m points into buf: keep only what outlives it. */
        m->status = NULL;
        return r;
}

START_TEST(test_receive) {
        struct notify_message m;

        ck_assert_int_eq(receive(&m), -EAGAIN);
        send_with_fds("READY=1\nSTATUS=up", 17, 0);
        ck_assert_int_eq(receive(&m), 1);
        ck_assert(m.ready);
        ck_assert_uint_eq(m.status_len, 2);
        ck_assert_int_eq(receive(&m), -EAGAIN);
}
END_TEST

START_TEST(test_receive_empty_datagram) {
        struct notify_message m;

        send_with_fds("", 0, 0);
        ck_assert_int_eq(receive(&m), 1);
        ck_assert(!m.ready);
        ck_assert_int_eq(m.errno_value, -1);
}
END_TEST

START_TEST(test_receive_size_limit) {
        char *big = malloc(NOTIFY_MESSAGE_MAX + 2);
        struct notify_message m;

        ck_assert_ptr_nonnull(big);
        memset(big, 'x', NOTIFY_MESSAGE_MAX + 2);
        memcpy(big, "READY=1\n", 8);
        /* At the limit: read whole. */
        send_with_fds(big, NOTIFY_MESSAGE_MAX, 0);
        ck_assert_int_eq(receive(&m), 1);
        ck_assert(m.ready);
        /* One byte more, or many: dropped whole, READY=1 and all. */
        send_with_fds(big, NOTIFY_MESSAGE_MAX + 1, 0);
        ck_assert_int_eq(receive(&m), 0);
        ck_assert(!m.ready);
        send_with_fds(big, NOTIFY_MESSAGE_MAX + 2, 0);
        ck_assert_int_eq(receive(&m), 0);
        ck_assert_int_eq(receive(&m), -EAGAIN);
        free(big);
}
END_TEST

START_TEST(test_receive_huge_datagram) {
        size_t n = 65000;
        char *huge = malloc(n);
        struct notify_message m;

        ck_assert_ptr_nonnull(huge);
        memset(huge, '\n', n);
        memcpy(huge, "READY=1", 7);
        send_with_fds(huge, n, 0);
        ck_assert_int_eq(receive(&m), 0);
        ck_assert(!m.ready);
        free(huge);
}
END_TEST

START_TEST(test_receive_closes_passed_fds) {
        struct notify_message m;
        int before = count_fds();

        /* A few fds (FDSTORE=1 style): the message counts, the fds are
         * closed. */
        send_with_fds("READY=1", 7, 3);
        ck_assert_int_eq(count_fds(), before);
        ck_assert_int_eq(receive(&m), 1);
        ck_assert(m.ready);
        ck_assert_int_eq(count_fds(), before);

        /* More than the control buffer holds: the datagram is dropped, and
         * neither the fds received nor those the kernel had to cut off stay
         * open in the receiver. */
        send_with_fds("READY=1", 7, 200);
        ck_assert_int_eq(receive(&m), 0);
        ck_assert(!m.ready);
        ck_assert_int_eq(count_fds(), before);
        ck_assert_int_eq(receive(&m), -EAGAIN);
}
END_TEST

START_TEST(test_abstract_socket_name) {
        char a[108], b[108], tiny[24], kind[16], hex[64];
        int pid, n = abstract_socket_name(a, sizeof a, "notify");

        ck_assert_int_eq(n, (int) strlen(a));
        ck_assert_int_eq(sscanf(a, "@prebind/%15[a-z]/%d/%63[0-9a-f]", kind, &pid, hex), 3);
        ck_assert_str_eq(kind, "notify");
        ck_assert_int_eq(pid, (int) getpid());
        ck_assert_uint_eq(strlen(hex), 32);
        /* A new nonce each time: two sockets of one prebind differ. */
        ck_assert_int_eq(abstract_socket_name(b, sizeof b, "notify"), n);
        ck_assert_str_ne(a, b);
        /* Too small: an error, not a cut name that another socket may share. */
        ck_assert_int_eq(abstract_socket_name(tiny, sizeof tiny, "broker"), -ENAMETOOLONG);
}
END_TEST

static Suite *notify_suite(void) {
        Suite *s = suite_create("notify");
        TCase *tc;

        tc = tcase_create("keys");
        tcase_add_checked_fixture(tc, NULL, teardown);
        tcase_add_test(tc, test_empty);
        tcase_add_test(tc, test_ready);
        tcase_add_test(tc, test_reloading_stopping);
        tcase_add_test(tc, test_status);
        tcase_add_test(tc, test_errno);
        tcase_add_test(tc, test_extend_timeout);
        tcase_add_test(tc, test_all_keys_in_one_datagram);
        tcase_add_test(tc, test_unknown_keys_ignored);
        tcase_add_test(tc, test_flag_once_set_stays);
        suite_add_tcase(s, tc);

        tc = tcase_create("bad values");
        tcase_add_checked_fixture(tc, NULL, teardown);
        tcase_add_loop_test(tc, test_not_ready, 0, ARRAY_SIZE(not_ready));
        tcase_add_loop_test(tc, test_bad_errno, 0, ARRAY_SIZE(bad_errno));
        tcase_add_loop_test(tc, test_bad_extend, 0, ARRAY_SIZE(bad_extend));
        suite_add_tcase(s, tc);

        tc = tcase_create("lines");
        tcase_add_checked_fixture(tc, NULL, teardown);
        tcase_add_test(tc, test_missing_equals);
        tcase_add_test(tc, test_empty_lines);
        tcase_add_test(tc, test_no_trailing_newline);
        tcase_add_test(tc, test_nul_bytes);
        tcase_add_test(tc, test_length_is_respected);
        suite_add_tcase(s, tc);

        tc = tcase_create("garbage");
        tcase_add_checked_fixture(tc, NULL, teardown);
        tcase_add_test(tc, test_long_datagram);
        tcase_add_test(tc, test_garbage);
        suite_add_tcase(s, tc);

        tc = tcase_create("socket");
        tcase_add_checked_fixture(tc, socket_setup, socket_teardown);
        tcase_add_test(tc, test_receive);
        tcase_add_test(tc, test_receive_empty_datagram);
        tcase_add_test(tc, test_receive_size_limit);
        tcase_add_test(tc, test_receive_huge_datagram);
        tcase_add_test(tc, test_receive_closes_passed_fds);
        tcase_add_test(tc, test_abstract_socket_name);
        suite_add_tcase(s, tc);

        return s;
}

int main(void) {
        return unit_run(notify_suite());
}
