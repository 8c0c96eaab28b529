/* SPDX-License-Identifier: MIT */
/* What the static (musl) build uses in place of glibc's extensions and
 * texts (compat.c): prebind_sigabbrev() and prebind_strerror() give
 * glibc's answers for every number (zero, negatives and past the last
 * included), and prebind_expand_errno() turns %m into that text. */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat.h"
#include "unit.h"

START_TEST(test_sigabbrev_matches_glibc) {
        int sig = _i;
        const char *ours = prebind_sigabbrev(sig);
#ifdef __GLIBC__
        const char *glibc = sigabbrev_np(sig);

        if (!glibc)
                ck_assert_msg(!ours, "signal %d: glibc has no name, we say '%s'", sig, ours);
        else
                ck_assert_msg(ours && strcmp(ours, glibc) == 0, "signal %d: glibc says '%s', we say '%s'", sig, glibc,
                              ours ? ours : "(null)");
#else
        (void) ours;
#endif
}
END_TEST

START_TEST(test_sigabbrev_common_names) {
        ck_assert_str_eq(prebind_sigabbrev(SIGTERM), "TERM");
        ck_assert_str_eq(prebind_sigabbrev(SIGKILL), "KILL");
        ck_assert_str_eq(prebind_sigabbrev(SIGCHLD), "CHLD");
        ck_assert_str_eq(prebind_sigabbrev(SIGSYS), "SYS");
        ck_assert_ptr_null(prebind_sigabbrev(0));
        ck_assert_ptr_null(prebind_sigabbrev(-SIGTERM));
        ck_assert_ptr_null(prebind_sigabbrev(SIGRTMIN));
        ck_assert_ptr_null(prebind_sigabbrev(1 << 30));
}
END_TEST

START_TEST(test_strerror_matches_glibc) {
        int err = _i;
        char glibc[64];

#ifdef __GLIBC__
        snprintf(glibc, sizeof glibc, "%s", strerror(err));
#else
        snprintf(glibc, sizeof glibc, "%s", prebind_strerror(err));
#endif
        ck_assert_str_eq(prebind_strerror(err), glibc);
}
END_TEST

START_TEST(test_strerror_texts_the_tests_read) {
        ck_assert_str_eq(prebind_strerror(ENOTSOCK), "Socket operation on non-socket");
        ck_assert_str_eq(prebind_strerror(ENAMETOOLONG), "File name too long");
        ck_assert_str_eq(prebind_strerror(EADDRINUSE), "Address already in use");
        ck_assert_str_eq(prebind_strerror(EMFILE), "Too many open files");
        ck_assert_str_eq(prebind_strerror(41), "Unknown error 41");
        ck_assert_str_eq(prebind_strerror(-1), "Unknown error -1");
        ck_assert_str_eq(prebind_strerror(100000), "Unknown error 100000");
}
END_TEST

static const struct {
        const char *format;
        int err;
        const char *expected; /* NULL: the format itself comes back */
} expansions[] = {
        { "cannot bind '%s': %m", EADDRINUSE, "cannot bind '%s': Address already in use" },
        { "%m", EBADF, "Bad file descriptor" },
        { "%m and %m", EPERM, "Operation not permitted and Operation not permitted" },
        { "100%% sure: %m", EINVAL, "100%% sure: Invalid argument" },
        { "%%m is literal", EINVAL, NULL },
        { "%%%m", EINVAL, "%%Invalid argument" },
        { "no errno here: %s %d", EINVAL, NULL },
        { "", EINVAL, NULL },
        { "trailing %", EINVAL, NULL },
        { "%m", 9999, "Unknown error 9999" },
};

START_TEST(test_expand_errno) {
        char buf[128];
        const char *got = prebind_expand_errno(expansions[_i].format, expansions[_i].err, buf, sizeof buf);

        if (!expansions[_i].expected) {
                ck_assert_ptr_eq(got, expansions[_i].format);
                return;
        }
        ck_assert_ptr_eq(got, buf);
        ck_assert_str_eq(got, expansions[_i].expected);
}
END_TEST

START_TEST(test_expand_errno_too_small_keeps_format) {
        char buf[16];
        const char *format = "cannot bind: %m";

        ck_assert_ptr_eq(prebind_expand_errno(format, EADDRINUSE, buf, sizeof buf), format);
        ck_assert_ptr_eq(prebind_expand_errno(format, EADDRINUSE, buf, 14), format);
}
END_TEST

START_TEST(test_expand_errno_exact_fit) {
        char exact[sizeof "Operation not permitted"];
        const char *one_more = "%m.";

        /* The text and its NUL fit; one more character does not. */
        ck_assert_ptr_eq(prebind_expand_errno("%m", EPERM, exact, sizeof exact), exact);
        ck_assert_str_eq(exact, "Operation not permitted");
        ck_assert_ptr_eq(prebind_expand_errno(one_more, EPERM, exact, sizeof exact), one_more);
}
END_TEST

START_TEST(test_sigaddset_as_glibc) {
        sigset_t set;

        /* Every signal glibc lets a program block, 34 (SIGRTMIN) included,
         * and nothing else. */
        sigemptyset(&set);
        for (int sig = 1; sig < NSIG; sig++)
                (void) prebind_sigaddset(&set, sig);
        for (int sig = 1; sig < NSIG; sig++)
                ck_assert_msg(sigismember(&set, sig) == (sig != 32 && sig != 33), "signal %d", sig);
        ck_assert_int_eq(prebind_sigaddset(&set, 0), -1);
        ck_assert_int_eq(prebind_sigaddset(&set, NSIG + 1), -1);
}
END_TEST

static Suite *compat_suite(void) {
        Suite *s = suite_create("compat");
        TCase *tc = tcase_create("sigabbrev");

        tcase_add_loop_test(tc, test_sigabbrev_matches_glibc, -2, NSIG + 2);
        tcase_add_test(tc, test_sigabbrev_common_names);
        tcase_add_test(tc, test_sigaddset_as_glibc);
        suite_add_tcase(s, tc);

        tc = tcase_create("strerror");
        tcase_add_loop_test(tc, test_strerror_matches_glibc, -2, 200);
        tcase_add_test(tc, test_strerror_texts_the_tests_read);
        tcase_add_loop_test(tc, test_expand_errno, 0, sizeof expansions / sizeof expansions[0]);
        tcase_add_test(tc, test_expand_errno_too_small_keeps_format);
        tcase_add_test(tc, test_expand_errno_exact_fit);
        suite_add_tcase(s, tc);
        return s;
}

int main(void) {
        return unit_run(compat_suite());
}
