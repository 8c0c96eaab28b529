/* SPDX-License-Identifier: MIT */
/* src/netns.c: the one line that says why --netns cannot work here, read
 * from a sysctl tree of the test's own. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "netns.h"
#include "unit.h"

static char dir[] = "/tmp/prebind-test-netns-XXXXXX";

static void put(const char *name, const char *value) {
        char path[256];
        FILE *f;

        snprintf(path, sizeof path, "%s/%s", dir, name);
        f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        fputs(value, f);
        fclose(f);
}

static void setup(void) {
        char path[256];

        ck_assert_ptr_nonnull(mkdtemp(dir));
        snprintf(path, sizeof path, "%s/user", dir);
        mkdir(path, 0755);
        snprintf(path, sizeof path, "%s/kernel", dir);
        mkdir(path, 0755);
}

static void teardown(void) {
        char cmd[300];

        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        (void) !system(cmd);
        strcpy(dir, "/tmp/prebind-test-netns-XXXXXX");
}

static const char *explain(enum netns_step step, int err, bool privileged) {
        static char buf[512];

        return netns_explain(step, err, privileged, dir, buf, sizeof buf);
}

START_TEST(test_max_user_namespaces_zero) {
        put("user/max_user_namespaces", "0\n");
        ck_assert_str_eq(explain(NETNS_STEP_UNSHARE_USER, -ENOSPC, false),
                         "cannot create a network namespace (--netns): unshare(CLONE_NEWUSER|CLONE_NEWNET): No "
                         "space left on device: user namespaces are disabled (sysctl user.max_user_namespaces=0)");
}
END_TEST

START_TEST(test_debian_sysctl_disables_unprivileged) {
        put("user/max_user_namespaces", "1000\n");
        put("kernel/unprivileged_userns_clone", "0\n");
        ck_assert_str_eq(explain(NETNS_STEP_UNSHARE_USER, EPERM, false),
                         "cannot create a network namespace (--netns): unshare(CLONE_NEWUSER|CLONE_NEWNET): "
                         "Operation not permitted: unprivileged user namespaces are disabled (sysctl "
                         "kernel.unprivileged_userns_clone=0)");
        /* Root does not need them: that sysctl is not the reason. */
        ck_assert_ptr_null(strstr(explain(NETNS_STEP_UNSHARE_NET, EPERM, true), "unprivileged_userns_clone"));
}
END_TEST

START_TEST(test_apparmor_restriction_at_any_later_step) {
        put("kernel/apparmor_restrict_unprivileged_userns", "1\n");
        ck_assert_ptr_nonnull(strstr(explain(NETNS_STEP_ID_MAP, EPERM, false),
                                     "mapping the user in a user namespace: Operation not permitted: AppArmor "
                                     "restricts unprivileged user namespaces"));
        ck_assert_ptr_nonnull(strstr(explain(NETNS_STEP_LOOPBACK, EPERM, false), "bringing the loopback up"));
}
END_TEST

START_TEST(test_without_a_known_cause) {
        ck_assert_str_eq(explain(NETNS_STEP_UNSHARE_USER, ENOSPC, false),
                         "cannot create a network namespace (--netns): unshare(CLONE_NEWUSER|CLONE_NEWNET): No "
                         "space left on device: the limit of user namespaces is reached (sysctl "
                         "user.max_user_namespaces)");
        ck_assert_ptr_nonnull(strstr(explain(NETNS_STEP_UNSHARE_NET, EPERM, true), "no CAP_SYS_ADMIN"));
        ck_assert_str_eq(explain(NETNS_STEP_REPORT, ECHILD, false),
                         "cannot create a network namespace (--netns): starting its keeper: No child processes");
        ck_assert_str_eq(explain(NETNS_STEP_LOOPBACK, ENODEV, true),
                         "cannot create a network namespace (--netns): bringing the loopback up: No such device");
}
END_TEST

int main(void) {
        Suite *s = suite_create("netns");
        TCase *tc = tcase_create("explain");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, test_max_user_namespaces_zero);
        tcase_add_test(tc, test_debian_sysctl_disables_unprivileged);
        tcase_add_test(tc, test_apparmor_restriction_at_any_later_step);
        tcase_add_test(tc, test_without_a_known_cause);
        suite_add_tcase(s, tc);
        return unit_run(s);
}
