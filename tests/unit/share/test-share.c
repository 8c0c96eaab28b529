/* SPDX-License-Identifier: MIT */
/* --share (src/share): the names it accepts. The description two callers
 * must agree on is the supervisor's (tests/unit/supervisor/test-describe.c). */
#include <check.h>
#include <string.h>

#include "share.h"
#include "unit.h"

START_TEST(test_names) {
        static const char *const good[] = { "pg", "redis-6", "a.b_c", "X", "0", "ab-" };
        static const char *const bad[] = { "", ".", "..", ".pg", "a/b", "/", "a b", "a\nb", "é", "pg*", "a:b" };
        char longest[66];

        for (size_t i = 0; i < ARRAY_SIZE(good); i++)
                ck_assert_msg(share_name_is_valid(good[i]), "%s", good[i]);
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
                ck_assert_msg(!share_name_is_valid(bad[i]), "%s", bad[i]);
        memset(longest, 'n', 64);
        longest[64] = '\0';
        ck_assert(share_name_is_valid(longest));
        longest[64] = 'n';
        longest[65] = '\0';
        ck_assert(!share_name_is_valid(longest));
}
END_TEST

int main(void) {
        Suite *s = suite_create("share");
        TCase *names = tcase_create("names");

        tcase_add_test(names, test_names);
        suite_add_tcase(s, names);
        return unit_run(s);
}
