/* SPDX-License-Identifier: MIT */
/* COMMAND's environment (spawn.c): child_env_build() and
 * child_env_set_pid(), on given environ vectors, no fork. */
#include <check.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "socket.h"
#include "spawn.h"
#include "unit.h"

/* A NULL-terminated string vector from literals, as the API takes it. */
#define STRV(...) ((char *const *) (const char *const[]) { __VA_ARGS__, NULL })

static struct bound_socket named(const char *name) {
        struct bound_socket s;

        memset(&s, 0, sizeof s);
        s.fd = -1;
        s.name = name;
        s.type = SOCK_STREAM;
        return s;
}

static struct bound_socket two_sockets[2];

static void setup(void) {
        two_sockets[0] = named("web");
        two_sockets[1] = named("unknown");
}

static size_t strv_length(char *const *v) {
        size_t n = 0;

        while (v && v[n])
                n++;
        return n;
}

/* How many entries of envp set the variable name (with or without '='). */
static size_t count_name(char *const *envp, const char *name) {
        size_t len = strlen(name), n = 0;

        for (char *const *e = envp; *e; e++)
                if (strncmp(*e, name, len) == 0 && ((*e)[len] == '=' || (*e)[len] == '\0'))
                        n++;
        return n;
}

/* The whole entry "NAME=VALUE" of a variable that must be set exactly once. */
static const char *entry_of(char *const *envp, const char *name) {
        size_t len = strlen(name);

        ck_assert_msg(count_name(envp, name) == 1, "%s is set %zu times", name, count_name(envp, name));
        for (char *const *e = envp; *e; e++)
                if (strncmp(*e, name, len) == 0 && (*e)[len] == '=')
                        return *e;
        ck_abort_msg("%s not found", name);
        return NULL;
}

/* envp is exactly want, in order. */
static void check_envp(const struct child_env *env, char *const *want) {
        size_t n = strv_length(want);

        ck_assert_uint_eq(env->n, n);
        ck_assert_uint_eq(strv_length(env->envp), n);
        for (size_t i = 0; i < n; i++)
                ck_assert_str_eq(env->envp[i], want[i]);
        ck_assert_ptr_null(env->envp[n]);
}

/* ---- protocol variables -------------------------------------------------- */

START_TEST(test_protocol_exactly_once) {
        struct child_env env;

        ck_assert_int_eq(child_env_build(STRV("PATH=/bin", "HOME=/root"), NULL, 0, two_sockets, 2, &env), 0);
        check_envp(&env, STRV("PATH=/bin", "HOME=/root", "LISTEN_FDS=2", "LISTEN_FDNAMES=web:unknown", "LISTEN_PID="));
        ck_assert_str_eq(entry_of(env.envp, "LISTEN_FDS"), "LISTEN_FDS=2");
        ck_assert_str_eq(entry_of(env.envp, "LISTEN_FDNAMES"), "LISTEN_FDNAMES=web:unknown");
        ck_assert_str_eq(entry_of(env.envp, "LISTEN_PID"), "LISTEN_PID=");
        child_env_done(&env);
}
END_TEST

START_TEST(test_listen_fds_count) {
        struct bound_socket s[3] = { named("a"), named("unknown"), named("b.c") };
        struct child_env env;

        ck_assert_int_eq(child_env_build(NULL, NULL, 0, s, 1, &env), 0);
        check_envp(&env, STRV("LISTEN_FDS=1", "LISTEN_FDNAMES=a", "LISTEN_PID="));
        child_env_done(&env);

        ck_assert_int_eq(child_env_build(NULL, NULL, 0, s, 3, &env), 0);
        check_envp(&env, STRV("LISTEN_FDS=3", "LISTEN_FDNAMES=a:unknown:b.c", "LISTEN_PID="));
        child_env_done(&env);
}
END_TEST

START_TEST(test_fdnames_all_unknown) {
        struct bound_socket s[2] = { named("unknown"), named("unknown") };
        struct child_env env;

        ck_assert_int_eq(child_env_build(NULL, NULL, 0, s, 2, &env), 0);
        ck_assert_str_eq(entry_of(env.envp, "LISTEN_FDNAMES"), "LISTEN_FDNAMES=unknown:unknown");
        child_env_done(&env);
}
END_TEST

START_TEST(test_fdnames_long) {
        /* Many long names: the vector is sized from the names. */
        static char names[16][256];
        struct bound_socket s[16];
        struct child_env env;
        char *want, *p;

        want = malloc(strlen("LISTEN_FDNAMES=") + 16 * 256);
        ck_assert_ptr_nonnull(want);
        p = stpcpy(want, "LISTEN_FDNAMES=");
        for (size_t i = 0; i < 16; i++) {
                memset(names[i], (int) ('a' + i), 255);
                names[i][255] = '\0';
                s[i] = named(names[i]);
                if (i > 0)
                        *p++ = ':';
                p = stpcpy(p, names[i]);
        }
        ck_assert_int_eq(child_env_build(NULL, NULL, 0, s, 16, &env), 0);
        ck_assert_str_eq(entry_of(env.envp, "LISTEN_FDNAMES"), want);
        ck_assert_str_eq(entry_of(env.envp, "LISTEN_FDS"), "LISTEN_FDS=16");
        child_env_done(&env);
        free(want);
}
END_TEST

START_TEST(test_set_pid) {
        struct child_env env;

        ck_assert_int_eq(child_env_build(STRV("A=1"), NULL, 0, two_sockets, 2, &env), 0);
        child_env_set_pid(&env, 1234);
        check_envp(&env, STRV("A=1", "LISTEN_FDS=2", "LISTEN_FDNAMES=web:unknown", "LISTEN_PID=1234"));
        /* The slot is the one in the vector: writing it again updates envp. */
        child_env_set_pid(&env, 2147483647);
        ck_assert_str_eq(entry_of(env.envp, "LISTEN_PID"), "LISTEN_PID=2147483647");
        ck_assert_ptr_eq(env.envp[env.n - 1], env.listen_pid);
        child_env_set_pid(&env, 1);
        ck_assert_str_eq(env.listen_pid, "LISTEN_PID=1");
        ck_assert_str_eq(entry_of(env.envp, "LISTEN_PID"), "LISTEN_PID=1");
        child_env_done(&env);
}
END_TEST

/* ---- inherited variables ------------------------------------------------- */

START_TEST(test_inherited_protocol_removed) {
        struct child_env env;

        ck_assert_int_eq(child_env_build(STRV("LISTEN_FDS=7", "PATH=/bin", "LISTEN_PID=1", "LISTEN_FDNAMES=a:b",
                                              "LISTEN_PIDFDID=99", "NOTIFY_SOCKET=/run/systemd/notify", "HOME=/"),
                                         NULL, 0, two_sockets, 2, &env),
                         0);
        check_envp(&env, STRV("PATH=/bin", "HOME=/", "LISTEN_FDS=2", "LISTEN_FDNAMES=web:unknown", "LISTEN_PID="));
        ck_assert_uint_eq(count_name(env.envp, "LISTEN_PIDFDID"), 0);
        ck_assert_uint_eq(count_name(env.envp, "NOTIFY_SOCKET"), 0);
        child_env_done(&env);
}
END_TEST

START_TEST(test_inherited_lookalikes_kept) {
        /* Only the exact names go (with any value, or none): a longer
         * name, a prefix or another case is someone else's. */
        struct child_env env;

        ck_assert_int_eq(child_env_build(STRV("LISTEN_FDS_EXTRA=1", "XLISTEN_FDS=2", "NOTIFY_SOCKETS=3",
                                              "listen_fds=4", "LISTEN_FDS", "NOTIFY_SOCKET=", "LISTEN_FD=5"),
                                         NULL, 0, two_sockets, 2, &env),
                         0);
        check_envp(&env, STRV("LISTEN_FDS_EXTRA=1", "XLISTEN_FDS=2", "NOTIFY_SOCKETS=3", "listen_fds=4", "LISTEN_FD=5",
                              "LISTEN_FDS=2", "LISTEN_FDNAMES=web:unknown", "LISTEN_PID="));
        child_env_done(&env);
}
END_TEST

START_TEST(test_environ_null_or_empty) {
        struct child_env env;

        ck_assert_int_eq(child_env_build(NULL, NULL, 0, two_sockets, 2, &env), 0);
        check_envp(&env, STRV("LISTEN_FDS=2", "LISTEN_FDNAMES=web:unknown", "LISTEN_PID="));
        child_env_done(&env);

        ck_assert_int_eq(child_env_build((char *const[]) { NULL }, NULL, 0, two_sockets, 2, &env), 0);
        check_envp(&env, STRV("LISTEN_FDS=2", "LISTEN_FDNAMES=web:unknown", "LISTEN_PID="));
        child_env_done(&env);

        /* -E NAME has nothing to copy from. */
        ck_assert_int_eq(child_env_build(NULL, STRV("HOME"), 1, two_sockets, 2, &env), 0);
        check_envp(&env, STRV("LISTEN_FDS=2", "LISTEN_FDNAMES=web:unknown", "LISTEN_PID="));
        child_env_done(&env);

        /* -E NAME=VALUE needs no environ. */
        ck_assert_int_eq(child_env_build(NULL, STRV("A=1"), 1, two_sockets, 2, &env), 0);
        check_envp(&env, STRV("A=1", "LISTEN_FDS=2", "LISTEN_FDNAMES=web:unknown", "LISTEN_PID="));
        child_env_done(&env);
}
END_TEST

START_TEST(test_done_resets) {
        struct child_env env;

        ck_assert_int_eq(child_env_build(STRV("A=1"), STRV("B=2"), 1, two_sockets, 2, &env), 0);
        child_env_done(&env);
        ck_assert_ptr_null(env.envp);
        ck_assert_ptr_null(env.owned);
        ck_assert_ptr_null(env.listen_pid);
        ck_assert_uint_eq(env.n, 0);
        ck_assert_uint_eq(env.n_owned, 0);
        /* Twice is harmless. */
        child_env_done(&env);
}
END_TEST

/* ---- -E ------------------------------------------------------------------ */

START_TEST(test_setenv_adds) {
        struct child_env env;

        ck_assert_int_eq(child_env_build(STRV("PATH=/bin"), STRV("A=1", "B=", "C=x=y"), 3, two_sockets, 2, &env), 0);
        check_envp(&env, STRV("PATH=/bin", "A=1", "B=", "C=x=y", "LISTEN_FDS=2", "LISTEN_FDNAMES=web:unknown",
                              "LISTEN_PID="));
        child_env_done(&env);
}
END_TEST

START_TEST(test_setenv_overrides_inherited) {
        struct child_env env;

        ck_assert_int_eq(
                child_env_build(STRV("FOO=old", "BAR=b", "FOOBAR=keep"), STRV("FOO=new"), 1, two_sockets, 2, &env), 0);
        check_envp(&env, STRV("BAR=b", "FOOBAR=keep", "FOO=new", "LISTEN_FDS=2", "LISTEN_FDNAMES=web:unknown",
                              "LISTEN_PID="));
        ck_assert_str_eq(entry_of(env.envp, "FOO"), "FOO=new");
        child_env_done(&env);

        /* Also an inherited entry without '='. */
        ck_assert_int_eq(child_env_build(STRV("FOO"), STRV("FOO=new"), 1, two_sockets, 2, &env), 0);
        check_envp(&env, STRV("FOO=new", "LISTEN_FDS=2", "LISTEN_FDNAMES=web:unknown", "LISTEN_PID="));
        child_env_done(&env);
}
END_TEST

START_TEST(test_setenv_last_wins) {
        struct child_env env;

        ck_assert_int_eq(child_env_build(STRV("A=0"), STRV("A=1", "B=1", "A=2", "A=3"), 4, two_sockets, 2, &env), 0);
        check_envp(&env, STRV("B=1", "A=3", "LISTEN_FDS=2", "LISTEN_FDNAMES=web:unknown", "LISTEN_PID="));
        child_env_done(&env);

        /* A later -E NAME copies the inherited value over an earlier -E NAME=VALUE… */
        ck_assert_int_eq(child_env_build(STRV("A=env"), STRV("A=1", "A"), 2, two_sockets, 2, &env), 0);
        ck_assert_str_eq(entry_of(env.envp, "A"), "A=env");
        child_env_done(&env);

        /* …and a later NAME=VALUE wins over an earlier -E NAME. */
        ck_assert_int_eq(child_env_build(STRV("A=env"), STRV("A", "A=2"), 2, two_sockets, 2, &env), 0);
        ck_assert_str_eq(entry_of(env.envp, "A"), "A=2");
        child_env_done(&env);
}
END_TEST

START_TEST(test_setenv_copy) {
        struct child_env env;

        /* -E NAME alone copies from the given environ: the deliberate way
         * to pass NOTIFY_SOCKET on. */
        ck_assert_int_eq(child_env_build(STRV("HOME=/h", "NOTIFY_SOCKET=/run/n", "LISTEN_FDS=9"),
                                         STRV("HOME", "NOTIFY_SOCKET"), 2, two_sockets, 2, &env),
                         0);
        check_envp(&env, STRV("HOME=/h", "NOTIFY_SOCKET=/run/n", "LISTEN_FDS=2", "LISTEN_FDNAMES=web:unknown",
                              "LISTEN_PID="));
        child_env_done(&env);

        /* An explicit NOTIFY_SOCKET=VALUE replaces the inherited one. */
        ck_assert_int_eq(
                child_env_build(STRV("NOTIFY_SOCKET=/run/n"), STRV("NOTIFY_SOCKET=/x"), 1, two_sockets, 2, &env), 0);
        check_envp(&env, STRV("NOTIFY_SOCKET=/x", "LISTEN_FDS=2", "LISTEN_FDNAMES=web:unknown", "LISTEN_PID="));
        child_env_done(&env);
}
END_TEST

START_TEST(test_setenv_copy_unset) {
        struct child_env env;

        /* Unset (or set without '='): dropped, nothing else changes. */
        ck_assert_int_eq(child_env_build(STRV("PATH=/bin", "FOOBAR=1", "BARE"), STRV("MISSING", "FOO", "BARE"), 3,
                                         two_sockets, 2, &env),
                         0);
        check_envp(&env, STRV("PATH=/bin", "FOOBAR=1", "LISTEN_FDS=2", "LISTEN_FDNAMES=web:unknown", "LISTEN_PID="));
        child_env_done(&env);

        ck_assert_int_eq(child_env_build(STRV("PATH=/bin"), STRV("NOTIFY_SOCKET"), 1, two_sockets, 2, &env), 0);
        check_envp(&env, STRV("PATH=/bin", "LISTEN_FDS=2", "LISTEN_FDNAMES=web:unknown", "LISTEN_PID="));
        child_env_done(&env);

        /* The last -E is "copy A", and A is unset: A is not set at all. */
        ck_assert_int_eq(child_env_build(STRV("PATH=/bin"), STRV("A=1", "A"), 2, two_sockets, 2, &env), 0);
        ck_assert_uint_eq(count_name(env.envp, "A"), 0);
        child_env_done(&env);
}
END_TEST

START_TEST(test_setenv_copy_empty_value) {
        struct child_env env;

        ck_assert_int_eq(child_env_build(STRV("EMPTY="), STRV("EMPTY"), 1, two_sockets, 2, &env), 0);
        check_envp(&env, STRV("EMPTY=", "LISTEN_FDS=2", "LISTEN_FDNAMES=web:unknown", "LISTEN_PID="));
        child_env_done(&env);
}
END_TEST

static Suite *env_suite(void) {
        Suite *s = suite_create("env");
        TCase *tc;

        tc = tcase_create("protocol");
        tcase_add_checked_fixture(tc, setup, NULL);
        tcase_add_test(tc, test_protocol_exactly_once);
        tcase_add_test(tc, test_listen_fds_count);
        tcase_add_test(tc, test_fdnames_all_unknown);
        tcase_add_test(tc, test_fdnames_long);
        tcase_add_test(tc, test_set_pid);
        suite_add_tcase(s, tc);

        tc = tcase_create("inherited");
        tcase_add_checked_fixture(tc, setup, NULL);
        tcase_add_test(tc, test_inherited_protocol_removed);
        tcase_add_test(tc, test_inherited_lookalikes_kept);
        tcase_add_test(tc, test_environ_null_or_empty);
        tcase_add_test(tc, test_done_resets);
        suite_add_tcase(s, tc);

        tc = tcase_create("setenv");
        tcase_add_checked_fixture(tc, setup, NULL);
        tcase_add_test(tc, test_setenv_adds);
        tcase_add_test(tc, test_setenv_overrides_inherited);
        tcase_add_test(tc, test_setenv_last_wins);
        tcase_add_test(tc, test_setenv_copy);
        tcase_add_test(tc, test_setenv_copy_unset);
        tcase_add_test(tc, test_setenv_copy_empty_value);
        suite_add_tcase(s, tc);

        return s;
}

int main(void) {
        return unit_run(env_suite());
}
