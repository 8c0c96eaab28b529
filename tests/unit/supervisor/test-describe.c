/* SPDX-License-Identifier: MIT */
/* config_describe() (describe.c): the canonical description two --share
 * callers must agree on, from real command lines through
 * config_parse_argv(). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "unit-describe.h"
#include "unit.h"

/* The description of "prebind" and args (a NULL-terminated list), freed
 * by the caller. */
static char *describe(const char *const *args) {
        struct unit_argv a = {};
        char *text;

        unit_argv_add(&a, "prebind");
        for (; *args; args++)
                unit_argv_add(&a, *args);
        text = unit_describe(&a);
        ck_assert_msg(text != NULL, "'%s ...' is refused", a.argv[1]);
        return text;
}

#define DESCRIBE(...) describe((const char *const[]) { __VA_ARGS__, NULL })

static void check_same(char *a, char *b) {
        ck_assert_str_eq(a, b);
        free(a);
        free(b);
}

static void check_differ(char *a, char *b) {
        ck_assert_str_ne(a, b);
        free(a);
        free(b);
}

START_TEST(test_description_spells_each_option_once) {
        char *d = DESCRIBE("--share=x", "--", "redis-server", "--port", "0");

        ck_assert_str_eq(d, "--listen=127.0.0.1:0 -- redis-server --port 0");
        free(d);
        d = DESCRIBE("--share=x", "-l", "web=0", "-l", "udp:[::1]:53", "--ready-log=Ready to", "-E", "A={port}",
                     "--kill-after=2s", "--", "srv", "");
        ck_assert_str_eq(d, "--listen=web=127.0.0.1:0 --listen=udp:[::1]:53 --setenv=A={port} "
                            "'--ready-log=Ready to' --ready-timeout=90000ms --kill-after=2000ms -- srv ''");
        free(d);
        d = DESCRIBE("--share=x", "-E", "Q=it's", "--", "sh", "-c", "echo 'hi'");
        ck_assert_str_eq(d, "--listen=127.0.0.1:0 '--setenv=Q=it'\\''s' -- sh -c 'echo '\\''hi'\\'''");
        free(d);
}
END_TEST

START_TEST(test_description_ignores_each_callers_own_options) {
        /* Output options, verbosity, --share-linger, --die-with-parent
         * and the spelling of an address or a duration are not the
         * server's. */
        check_same(DESCRIBE("--share=x", "--", "srv"),
                   DESCRIBE("--share=y", "--print=json", "--port-file=/tmp/p", "--format=url", "-q",
                            "--share-linger=infinity", "--die-with-parent", "--", "srv"));
        /* Equal sockets spelled any way: -l 0, tcp:127.0.0.1:0, no -l. */
        check_same(DESCRIBE("--share=x", "-l", "0", "--", "srv"),
                   DESCRIBE("--share=x", "--listen=tcp:127.0.0.1:0", "--", "srv"));
        check_same(DESCRIBE("--share=x", "-l", "127.0.0.1:0", "--", "srv"), DESCRIBE("--share=x", "--", "srv"));
        check_same(DESCRIBE("--share=x", "-l", "localhost:0", "--", "srv"), DESCRIBE("--share=x", "--", "srv"));
        check_same(DESCRIBE("--share=x", "-l", "0", "--", "srv"), DESCRIBE("--share=x", "--", "srv"));
        check_same(DESCRIBE("--share=x", "-l0", "--", "srv"), DESCRIBE("--share=x", "--listen", "127.0.0.1:0", "srv"));
        check_same(DESCRIBE("--share=x", "-l", "unix:/tmp/s", "--", "srv"),
                   DESCRIBE("--share=x", "-l", "/tmp/s", "--", "srv"));
        check_same(DESCRIBE("--share=x", "--ready", "--ready-timeout=1m", "--", "srv"),
                   DESCRIBE("--share=x", "--ready=60s", "--", "srv"));
        check_same(DESCRIBE("--share=x", "--kill-after=1500ms", "--", "srv"),
                   DESCRIBE("--share=x", "--kill-after=1.5", "--", "srv"));
}
END_TEST

START_TEST(test_description_tells_servers_apart) {
        check_differ(DESCRIBE("--share=x", "--", "srv", "a"), DESCRIBE("--share=x", "--", "srv", "b"));
        check_differ(DESCRIBE("--share=x", "--", "srv", "a b"), DESCRIBE("--share=x", "--", "srv", "a", "b"));
        check_differ(DESCRIBE("--share=x", "-l", "1234", "--", "srv"), DESCRIBE("--share=x", "--", "srv"));
        check_differ(DESCRIBE("--share=x", "-l", "0", "--", "srv"), DESCRIBE("--share=x", "-l", "udp:0", "--", "srv"));
        /* A socket's name, its address family, and a second socket. */
        check_differ(DESCRIBE("--share=x", "-l", "web=0", "--", "srv"), DESCRIBE("--share=x", "-l", "0", "--", "srv"));
        check_differ(DESCRIBE("--share=x", "-l", "[::1]:0", "--", "srv"), DESCRIBE("--share=x", "--", "srv"));
        check_differ(DESCRIBE("--share=x", "-l", "0", "-l", "0", "--", "srv"), DESCRIBE("--share=x", "--", "srv"));
        check_differ(DESCRIBE("--share=x", "-E", "A=1", "--", "srv"), DESCRIBE("--share=x", "-E", "A=2", "--", "srv"));
        check_differ(DESCRIBE("--share=x", "--intercept=80", "--", "srv"), DESCRIBE("--share=x", "--", "srv"));
        check_differ(DESCRIBE("--share=x", "--ready-log=a", "--", "srv"), DESCRIBE("--share=x", "--", "srv"));
        check_differ(DESCRIBE("--share=x", "--restart=always", "--", "srv"), DESCRIBE("--share=x", "--", "srv"));
        check_differ(DESCRIBE("--share=x", "--group", "--", "srv"), DESCRIBE("--share=x", "--", "srv"));
        check_differ(DESCRIBE("--share=x", "--success-status=143", "--", "srv"), DESCRIBE("--share=x", "--", "srv"));
        check_differ(DESCRIBE("--share=x", "--subst", "--", "srv"), DESCRIBE("--share=x", "--", "srv"));
        /* A server that reloads, or outlives a killed supervisor, is
         * another server (these once attached silently). */
        check_differ(DESCRIBE("--share=x", "--ready", "--reload=overlap", "--", "srv"),
                     DESCRIBE("--share=x", "--ready", "--", "srv"));
        check_differ(DESCRIBE("--share=x", "--watch=/etc", "--", "srv"), DESCRIBE("--share=x", "--", "srv"));
        check_differ(DESCRIBE("--share=x", "--watch=/etc", "--watch-delay=1s", "--", "srv"),
                     DESCRIBE("--share=x", "--watch=/etc", "--", "srv"));
        check_differ(DESCRIBE("--share=x", "--watch=/etc", "--watch-ignore=*.log", "--", "srv"),
                     DESCRIBE("--share=x", "--watch=/etc", "--", "srv"));
        check_differ(DESCRIBE("--share=x", "--watch=/etc", "--watch-ignore=", "--", "srv"),
                     DESCRIBE("--share=x", "--watch=/etc", "--", "srv"));
        check_differ(DESCRIBE("--share=x", "--no-die-with-supervisor", "--", "srv"),
                     DESCRIBE("--share=x", "--", "srv"));
        check_same(DESCRIBE("--share=x", "--watch=/etc", "--watch-delay=100ms", "--", "srv"),
                   DESCRIBE("--share=x", "--watch=/etc", "--", "srv"));
        /* Templates as written (once all described as port 0). */
        check_differ(DESCRIBE("--share=x", "--subst", "--intercept={port}", "--", "srv"),
                     DESCRIBE("--share=x", "--subst", "--intercept={1.port}", "--", "srv"));
        check_differ(DESCRIBE("--share=x", "--intercept=80", "--", "srv"),
                     DESCRIBE("--share=x", "--intercept-via=seccomp", "--intercept=80", "--", "srv"));
        check_differ(DESCRIBE("--share=x", "--netns", "--intercept=80", "--", "srv"),
                     DESCRIBE("--share=x", "--netns", "--intercept-via=forward", "--intercept=80", "--", "srv"));
        check_same(DESCRIBE("--share=x", "--intercept-via=auto", "--intercept=80", "--", "srv"),
                   DESCRIBE("--share=x", "--intercept=80", "--", "srv"));
}
END_TEST

int main(void) {
        Suite *s = suite_create("describe");
        TCase *description = tcase_create("description");

        tcase_add_test(description, test_description_spells_each_option_once);
        tcase_add_test(description, test_description_ignores_each_callers_own_options);
        tcase_add_test(description, test_description_tells_servers_apart);
        suite_add_tcase(s, description);
        return unit_run(s);
}
