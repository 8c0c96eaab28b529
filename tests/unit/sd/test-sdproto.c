/* SPDX-License-Identifier: MIT */
/* The sd-daemon protocols as prebind speaks them without libsystemd
 * (sdproto.c): LISTEN_PID/LISTEN_FDS counting and LISTEN_FDNAMES splitting
 * on every edge (garbage, overflow, empty names, count mismatch); taking
 * real fds from the environment in a child process (close-on-exec set,
 * variables unset, a closed fd refused); NOTIFY_SOCKET addresses; and real
 * datagrams to path and abstract sockets. Where Debian's libsystemd0 is
 * installed, the same environments and datagrams go through libsystemd
 * too, and both must agree: that is the contract of -Dlibsystemd=disabled. */
#include <check.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sdproto.h"
#include "unit.h"

static void names_free(char **names) {
        for (size_t i = 0; names && names[i]; i++)
                free(names[i]);
        free(names);
}

/* "a|b|" for {"a", "b", ""}: one string to compare. */
static void names_join(char **names, int n, char *buf, size_t size) {
        size_t len = 0;

        buf[0] = '\0';
        for (int i = 0; i < n && len < size; i++)
                len += (size_t) snprintf(buf + len, size - len, "%s%s", i ? "|" : "", names[i]);
}

/* ---- counting ------------------------------------------------------------ */

static const struct {
        const char *pid; /* "SELF" is the test's pid */
        const char *fds;
        int expected;
} counts[] = {
        { NULL, "1", 0 },    /* not activated */
        { "SELF", NULL, 0 }, /* LISTEN_FDS unset */
        { "1", "1", 0 },     /* another process's */
        { "0", "1", 0 },
        { "", "1", 0 },
        { "abc", "1", 0 }, /* garbage: not ours either */
        { "-1", "1", 0 },
        { "SELF ", "1", 0 }, /* trailing space: not our pid */
        { "SELF", "1", 1 },
        { "SELF", "2", 2 },
        { "SELF", "01", 1 },
        { "SELF", "010", 8 }, /* libsystemd's rule (safe_atoi): octal */
        { "SELF", "0x0a", 10 },
        { "SELF", "0o10", 8 },
        { "SELF", "0b10", 2 },
        { "SELF", "+1", 1 },
        { "SELF", " 1", 1 },
        { "+SELF", "1", 1 }, /* and for LISTEN_PID (parse_pid) */
        { " SELF", "1", 1 },
        { "0SELFOCT", "1", 1 },
        { "0xSELFHEX", "1", 1 },
        { "0oSELFOCT", "1", 1 },
        { "SELF\n", "1", 0 }, /* trailing: not a pid */
        { "0", "1", 0 },
        { "-SELF", "1", 0 },
        { "99999999999999999999", "1", 0 },
        { "SELF", "2147483644", INT_MAX - 3 }, /* the last fd number still fits */
        { "SELF", "2147483645", -EINVAL },
        { "SELF", "2147483647", -EINVAL },
        { "SELF", "2147483648", -ERANGE }, /* more than an int */
        { "SELF", "99999999999", -ERANGE },
        { "SELF", "0", -EINVAL },
        { "SELF", "00", -EINVAL },
        { "SELF", "-1", -EINVAL },
        { "SELF", "", -EINVAL },
        { "SELF", "abc", -EINVAL },
        { "SELF", "1a", -EINVAL },
        { "SELF", "1 ", -EINVAL },
        { "SELF", "0x", -EINVAL },
        { "SELF", "08", -EINVAL },
        { "SELF", "2147483648x", -EINVAL },           /* a long: the garbage counts first */
        { "SELF", "99999999999999999999x", -ERANGE }, /* no long: strtol()'s ERANGE first */
};

START_TEST(test_count) {
        char self[32];
        const char *pid = counts[_i].pid;

        snprintf(self, sizeof self, "%d", (int) getpid());
        if (pid && strstr(pid, "SELF")) {
                static char buf[64];
                const char *at = strstr(pid, "SELF"), *after = at + 4;

                /* SELF is the pid in decimal, SELFOCT in octal, SELFHEX in hex. */
                if (strncmp(after, "OCT", 3) == 0)
                        snprintf(self, sizeof self, "%o", (unsigned) getpid()), after += 3;
                else if (strncmp(after, "HEX", 3) == 0)
                        snprintf(self, sizeof self, "%x", (unsigned) getpid()), after += 3;
                snprintf(buf, sizeof buf, "%.*s%s%s", (int) (at - pid), pid, self, after);
                pid = buf;
        }
        ck_assert_msg(sdproto_listen_fds_count(pid, counts[_i].fds, getpid()) == counts[_i].expected,
                      "LISTEN_PID=%s LISTEN_FDS=%s: %d, expected %d", pid ? pid : "(unset)",
                      counts[_i].fds ? counts[_i].fds : "(unset)",
                      sdproto_listen_fds_count(pid, counts[_i].fds, getpid()), counts[_i].expected);
}
END_TEST

/* ---- names --------------------------------------------------------------- */

static const struct {
        const char *fdnames;
        int n;
        int expected;
        const char *joined;
} splits[] = {
        { NULL, 1, 0, "unknown" },
        { NULL, 3, 0, "unknown|unknown|unknown" },
        { "web", 1, 0, "web" },
        { "web:admin", 2, 0, "web|admin" },
        { "", 1, 0, "" }, /* one empty name: the caller refuses it */
        { "a:", 2, 0, "a|" },
        { ":", 2, 0, "|" },
        { "::", 3, 0, "||" },
        { "a::b", 3, 0, "a||b" },
        { "a\nb", 1, 0, "a\nb" },    /* not judged here */
        { "web", 2, -EINVAL, NULL }, /* the count must match */
        { "a:b", 1, -EINVAL, NULL },
        { "", 2, -EINVAL, NULL },
        { "a:b:c", 2, -EINVAL, NULL },
        { NULL, 0, -EINVAL, NULL },
        { "a", -1, -EINVAL, NULL },
};

START_TEST(test_split) {
        char **names = (char **) 0x1, joined[256];
        int r = sdproto_listen_fdnames_split(splits[_i].fdnames, splits[_i].n, &names);

        ck_assert_int_eq(r, splits[_i].expected);
        if (r < 0) {
                ck_assert_ptr_eq(names, (char **) 0x1); /* untouched on failure */
                return;
        }
        ck_assert_ptr_null(names[splits[_i].n]);
        names_join(names, splits[_i].n, joined, sizeof joined);
        ck_assert_str_eq(joined, splits[_i].joined);
        names_free(names);
}
END_TEST

START_TEST(test_split_long_names_whole) {
        char text[1100], **names;

        memset(text, 'x', 1000);
        strcpy(text + 1000, ":y");
        ck_assert_int_eq(sdproto_listen_fdnames_split(text, 2, &names), 0);
        ck_assert_uint_eq(strlen(names[0]), 1000);
        ck_assert_str_eq(names[1], "y");
        names_free(names);
}
END_TEST

/* ---- the environment, with real fds, against libsystemd -------------------- */

typedef int (*sd_listen_fds_with_names_fn)(int, char ***);
typedef int (*sd_notify_fn)(int, const char *);

static void *libsystemd(void) {
        static void *handle;

        if (!handle)
                handle = dlopen("libsystemd.so.0", RTLD_NOW | RTLD_LOCAL);
        return handle;
}

/* What a child that got `sockets` sockets at fds 3… (and, with
 * closed_at >= 3, nothing at that fd) and this environment sees. */
struct outcome {
        int r;
        char joined[512];
        bool cloexec; /* every fd 3..3+r-1 close-on-exec after the call */
        bool unset;   /* LISTEN_* unset after the call */
};

static const struct activation {
        int sockets;
        const char *fds;
        const char *fdnames; /* NULL: unset */
        int expected;
        const char *joined;
} activations[] = {
        { 1, "1", NULL, 1, "unknown" },
        { 2, "2", "web:admin", 2, "web|admin" },
        { 2, "2", "a:", 2, "a|" },
        { 1, "1", "", 1, "" },
        { 1, "1", "a\nb", 1, "a\nb" },
        { 3, "2", "a:b", 2, "a|b" }, /* fewer than passed: the rest is not ours */
        { 1, "1", "a:b", -EINVAL, NULL },
        { 2, "2", "a", -EINVAL, NULL },
        { 1, "2", NULL, -EBADF, NULL },  /* fd 4 is not open */
        { 1, "2", "a:b", -EBADF, NULL }, /* the fds are checked before the names */
        { 1, "2147483644", NULL, -EBADF, NULL },
        { 1, "2147483645", NULL, -EINVAL, NULL },
        { 1, "0", NULL, -EINVAL, NULL },
        { 1, "-1", NULL, -EINVAL, NULL },
        { 1, "abc", NULL, -EINVAL, NULL },
        { 1, "99999999999", NULL, -ERANGE, NULL },
};

/* form with its one %d, %o, %x or %X filled in with pid. */
static void pid_text(const char *form, pid_t pid, char *buf, size_t size) {
        const char *conversion = strchr(form, '%');
        char number[32];

        switch (conversion[1]) {
        case 'o':
                snprintf(number, sizeof number, "%o", (unsigned) pid);
                break;
        case 'x':
                snprintf(number, sizeof number, "%x", (unsigned) pid);
                break;
        case 'X':
                snprintf(number, sizeof number, "%X", (unsigned) pid);
                break;
        default:
                snprintf(number, sizeof number, "%d", (int) pid);
        }
        ck_assert_int_lt(snprintf(buf, size, "%.*s%s%s", (int) (conversion - form), form, number, conversion + 2),
                         (int) size);
}

/* ---- the number rule, against libsystemd ---------------------------------- */

/* sdproto_listen_fds() in sd_listen_fds_with_names()'s shape (it always
 * unsets the variables, as prebind asks libsystemd to). */
static int sdproto_listen_fds_with_unset(int unset_environment, char ***ret_names) {
        (void) unset_environment;
        return sdproto_listen_fds(ret_names);
}

/* LISTEN_FDS and LISTEN_PID in every form, with 12 sockets at fds 3-14. */
static const struct number_case {
        const char *fds;
        const char *pid_format; /* LISTEN_PID from the taker's pid (NULL: "%d") */
        int expected;
} numbers[] = {
        /* Every number form: libsystemd 252 reads them all (safe_atoi()). */
        { "010", NULL, 8 },
        { "0x0a", NULL, 10 },
        { "0X0A", NULL, 10 },
        { "0o10", NULL, 8 },
        { "0O10", NULL, 8 },
        { "0b10", NULL, 2 },
        { "0B11", NULL, 3 },
        { "+1", NULL, 1 },
        { " 1", NULL, 1 },
        { "\t\n\r 2", NULL, 2 },
        { "\v\f3", NULL, 3 }, /* strtol()'s own blanks */
        { " +0x1", NULL, 1 },
        { "0b 1", NULL, 1 }, /* strtol() after the prefix: blanks, sign */
        { "0o+10", NULL, 8 },
        { "0x", NULL, -EINVAL },
        { "0b", NULL, -EINVAL },
        { "0o", NULL, -EINVAL },
        { "0x+1", NULL, -EINVAL },
        { "+0b1", NULL, -EINVAL },
        { "0b2", NULL, -EINVAL },
        { "0o8", NULL, -EINVAL },
        { "08", NULL, -EINVAL },
        { "0b0b1", NULL, -EINVAL },
        { "1 ", NULL, -EINVAL },
        { "1\n", NULL, -EINVAL },
        { "", NULL, -EINVAL },
        { " ", NULL, -EINVAL },
        { "+", NULL, -EINVAL },
        { "-0", NULL, -EINVAL },
        { "-0x1", NULL, -EINVAL },
        { "0b-1", NULL, -EINVAL },
        { "00", NULL, -EINVAL },
        { "0x0", NULL, -EINVAL },
        { "1e1", NULL, -EINVAL },
        { "\xef\xbc\x91", NULL, -EINVAL }, /* a fullwidth 1 */
        { "0x7ffffffc", NULL, -EBADF },
        { "0x7ffffffd", NULL, -EINVAL },
        { "0x80000000", NULL, -ERANGE },
        { "-2147483648", NULL, -EINVAL },
        { "-2147483649", NULL, -ERANGE },
        { "2147483648x", NULL, -EINVAL },
        { "9223372036854775807", NULL, -ERANGE },
        { "9223372036854775808", NULL, -ERANGE },
        { "99999999999999999999x", NULL, -ERANGE },
        { "0b11111111111111111111111111111111111111111111111111111111111111111", NULL, -ERANGE },
        /* LISTEN_PID in every form that names the taker (parse_pid()). */
        { "2", "+%d", 2 },
        { "2", " %d", 2 },
        { "2", "\t\v%d", 2 },
        { "2", "0%o", 2 },
        { "2", "0o%o", 2 },
        { "2", "0x%x", 2 },
        { "2", "0X%X", 2 },
        { "2", "1%d", 0 }, /* another process's */
};

/* Every row of numbers[], taken in one child of its own (12 sockets at
 * fds 3-14, without close-on-exec again before each row): what prebind's
 * code or libsystemd's sd_listen_fds_with_names() says, into ret. */
static void take_numbers(bool with_libsystemd, int ret[]) {
        int pipefd[2], status;
        pid_t pid;

        ck_assert_int_eq(pipe2(pipefd, O_CLOEXEC), 0);
        pid = unit_fork();
        if (pid == 0) {
                sd_listen_fds_with_names_fn fn =
                        with_libsystemd ? (sd_listen_fds_with_names_fn) dlsym(libsystemd(), "sd_listen_fds_with_names")
                                        : sdproto_listen_fds_with_unset;
                int report = fcntl(pipefd[1], F_DUPFD_CLOEXEC, 100), got[ARRAY_SIZE(numbers)];

                if (report < 0)
                        exit(1);
                for (int fd = 3; fd < 100; fd++)
                        if (fd != report)
                                close(fd);
                for (int i = 0; i < 12; i++)
                        if (socket(AF_UNIX, SOCK_STREAM, 0) != 3 + i)
                                exit(1);
                for (size_t i = 0; i < ARRAY_SIZE(numbers); i++) {
                        char self[64], **names = NULL;

                        for (int fd = 3; fd < 15; fd++)
                                fcntl(fd, F_SETFD, 0);
                        pid_text(numbers[i].pid_format ? numbers[i].pid_format : "%d", getpid(), self, sizeof self);
                        setenv("LISTEN_PID", self, 1);
                        setenv("LISTEN_FDS", numbers[i].fds, 1);
                        unsetenv("LISTEN_FDNAMES");
                        got[i] = fn(1, &names);
                        names_free(names);
                }
                exit(write(report, got, sizeof got) == sizeof got ? 0 : 1);
        }
        close(pipefd[1]);
        ck_assert_int_eq(read(pipefd[0], ret, sizeof(int) * ARRAY_SIZE(numbers)),
                         (ssize_t) (sizeof(int) * ARRAY_SIZE(numbers)));
        close(pipefd[0]);
        status = unit_wait_bounded(pid);
        ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

START_TEST(test_numbers) {
        int ours[ARRAY_SIZE(numbers)], theirs[ARRAY_SIZE(numbers)];
        bool compare = libsystemd() && dlsym(libsystemd(), "sd_listen_fds_with_names");

        take_numbers(false, ours);
        if (compare)
                take_numbers(true, theirs);
        else
                fprintf(stderr, "# libsystemd0 not installed: no comparison\n");
        for (size_t i = 0; i < ARRAY_SIZE(numbers); i++) {
                const char *form = numbers[i].pid_format ? numbers[i].pid_format : "%d";

                ck_assert_msg(ours[i] == numbers[i].expected, "LISTEN_FDS='%s' LISTEN_PID='%s': %d, expected %d",
                              numbers[i].fds, form, ours[i], numbers[i].expected);
                ck_assert_msg(!compare || ours[i] == theirs[i],
                              "LISTEN_FDS='%s' LISTEN_PID='%s': libsystemd %d, "
                              "prebind %d",
                              numbers[i].fds, form, theirs[i], ours[i]);
        }
}
END_TEST

/* In a child of its own: the test runner's fds above 2 are not touched. */
static struct outcome take_in_child(const struct activation *a, bool with_libsystemd) {
        struct outcome o;
        int pipefd[2];
        pid_t pid;

        memset(&o, 0, sizeof o);
        ck_assert_int_eq(pipe2(pipefd, O_CLOEXEC), 0);
        pid = unit_fork();
        if (pid == 0) {
                char self[32], **names = NULL;
                int report = fcntl(pipefd[1], F_DUPFD_CLOEXEC, 100);

                if (report < 0)
                        exit(1);
                for (int fd = 3; fd < 100; fd++)
                        if (fd != report)
                                close(fd);
                for (int i = 0; i < a->sockets; i++) {
                        int s = socket(AF_UNIX, SOCK_STREAM, 0); /* lowest free: 3, 4, … without CLOEXEC */

                        if (s != 3 + i)
                                exit(1);
                }
                snprintf(self, sizeof self, "%d", (int) getpid());
                setenv("LISTEN_PID", self, 1);
                setenv("LISTEN_FDS", a->fds, 1);
                if (a->fdnames)
                        setenv("LISTEN_FDNAMES", a->fdnames, 1);
                else
                        unsetenv("LISTEN_FDNAMES");
                if (with_libsystemd) {
                        sd_listen_fds_with_names_fn fn =
                                (sd_listen_fds_with_names_fn) dlsym(libsystemd(), "sd_listen_fds_with_names");

                        o.r = fn(1, &names);
                } else
                        o.r = sdproto_listen_fds(&names);
                if (o.r > 0) {
                        names_join(names, o.r, o.joined, sizeof o.joined);
                        names_free(names);
                } else if (names)
                        exit(1); /* no names unless fds */
                o.cloexec = true;
                for (int fd = 3; fd < 3 + (o.r > 0 ? o.r : 0); fd++)
                        o.cloexec = o.cloexec && (fcntl(fd, F_GETFD) & FD_CLOEXEC);
                o.unset = !getenv("LISTEN_PID") && !getenv("LISTEN_FDS") && !getenv("LISTEN_FDNAMES");
                exit(write(report, &o, sizeof o) == sizeof o ? 0 : 1);
        }
        close(pipefd[1]);
        ck_assert_int_eq(read(pipefd[0], &o, sizeof o), (ssize_t) sizeof o);
        close(pipefd[0]);
        {
                int status = unit_wait_bounded(pid);

                ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        }
        return o;
}

START_TEST(test_take) {
        const struct activation *a = &activations[_i];
        struct outcome o = take_in_child(a, false);

        ck_assert_msg(o.r == a->expected, "LISTEN_FDS=%s LISTEN_FDNAMES=%s: %d, expected %d", a->fds,
                      a->fdnames ? a->fdnames : "(unset)", o.r, a->expected);
        if (a->joined)
                ck_assert_str_eq(o.joined, a->joined);
        ck_assert(o.cloexec);
        ck_assert(o.unset);
}
END_TEST

START_TEST(test_take_agrees_with_libsystemd) {
        const struct activation *a = &activations[_i];
        struct outcome ours, theirs;

        if (!libsystemd() || !dlsym(libsystemd(), "sd_listen_fds_with_names")) {
                fprintf(stderr, "# libsystemd0 not installed: no comparison\n");
                return;
        }
        ours = take_in_child(a, false);
        theirs = take_in_child(a, true);
        ck_assert_msg(ours.r == theirs.r, "LISTEN_FDS=%s LISTEN_FDNAMES=%s: libsystemd %d, prebind %d", a->fds,
                      a->fdnames ? a->fdnames : "(unset)", theirs.r, ours.r);
        ck_assert_str_eq(ours.joined, theirs.joined);
        ck_assert(ours.cloexec == theirs.cloexec);
        ck_assert(ours.unset == theirs.unset);
}
END_TEST

START_TEST(test_take_not_ours_unsets) {
        pid_t pid = unit_fork();
        int status;

        if (pid == 0) {
                char **names = (char **) 0x1;

                setenv("LISTEN_PID", "1", 1);
                setenv("LISTEN_FDS", "1", 1);
                setenv("LISTEN_FDNAMES", "x", 1);
                exit(sdproto_listen_fds(&names) == 0 && !names && !getenv("LISTEN_PID") && !getenv("LISTEN_FDS") &&
                                     !getenv("LISTEN_FDNAMES")
                             ? 0
                             : 1);
        }
        status = unit_wait_bounded(pid);
        ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}
END_TEST

/* ---- NOTIFY_SOCKET addresses --------------------------------------------- */

static const struct {
        const char *value;
        int expected;
        size_t path_len; /* the bytes of sun_path the address covers */
} addresses[] = {
        { "/run/notify", 0, sizeof "/run/notify" }, /* with its NUL */
        { "/x", 0, 3 },
        { "@name", 0, 5 }, /* "\0name": no NUL counted */
        { "@prebind/1234/abc", 0, 17 },
        { "@\001\002", 0, 3 }, /* abstract names are bytes */
        { "", -EINVAL, 0 },
        { "@", -EINVAL, 0 },
        { "/", -EINVAL, 0 },
        { "relative/path", -EINVAL, 0 },
        { "x@y", -EINVAL, 0 },
        { " /run/notify", -EINVAL, 0 },
        { "vsock:2:1234", -EINVAL, 0 }, /* libsystemd 253; not 252, nor us */
};

START_TEST(test_address) {
        struct sockaddr_un sa;
        socklen_t len = 0;
        int r = sdproto_notify_address(addresses[_i].value, &sa, &len);

        ck_assert_int_eq(r, addresses[_i].expected);
        if (r < 0)
                return;
        ck_assert_int_eq(sa.sun_family, AF_UNIX);
        ck_assert_uint_eq(len, offsetof(struct sockaddr_un, sun_path) + addresses[_i].path_len);
        if (addresses[_i].value[0] == '@') {
                ck_assert_int_eq(sa.sun_path[0], '\0');
                ck_assert(memcmp(sa.sun_path + 1, addresses[_i].value + 1, addresses[_i].path_len - 1) == 0);
        } else
                ck_assert_str_eq(sa.sun_path, addresses[_i].value);
}
END_TEST

START_TEST(test_address_lengths) {
        struct sockaddr_un sa;
        char value[sizeof sa.sun_path + 2];
        socklen_t len;

        /* A path filling sun_path exactly has no room for its NUL; the
         * kernel takes it so. One more byte is too long. */
        value[0] = '/';
        memset(value + 1, 'p', sizeof sa.sun_path - 1);
        value[sizeof sa.sun_path] = '\0';
        ck_assert_int_eq(sdproto_notify_address(value, &sa, &len), 0);
        ck_assert_uint_eq(len, sizeof sa);
        value[0] = '@';
        ck_assert_int_eq(sdproto_notify_address(value, &sa, &len), 0);
        ck_assert_uint_eq(len, sizeof sa);
        value[sizeof sa.sun_path] = 'p';
        value[sizeof sa.sun_path + 1] = '\0';
        ck_assert_int_eq(sdproto_notify_address(value, &sa, &len), -EINVAL);
        value[0] = '/';
        ck_assert_int_eq(sdproto_notify_address(value, &sa, &len), -EINVAL);
        ck_assert_int_eq(sdproto_notify_address(NULL, &sa, &len), -EINVAL);
}
END_TEST

/* ---- datagrams ------------------------------------------------------------ */

static int receiver = -1;
static char receiver_address[sizeof((struct sockaddr_un *) 0)->sun_path + 1];
static char receiver_dir[64];

/* _i: 0 an abstract socket, 1 a socket file. */
static void receiver_open(int kind) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        socklen_t len;
        int one = 1;

        receiver = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(receiver, 0);
        ck_assert_int_eq(setsockopt(receiver, SOL_SOCKET, SO_PASSCRED, &one, sizeof one), 0);
        if (kind == 0) {
                snprintf(receiver_address, sizeof receiver_address, "@prebind-test-sdproto/%d/%d", (int) getpid(),
                         rand());
                len = (socklen_t) (offsetof(struct sockaddr_un, sun_path) + strlen(receiver_address));
                memcpy(sa.sun_path + 1, receiver_address + 1, strlen(receiver_address) - 1);
        } else {
                strcpy(receiver_dir, "/tmp/prebind-test-sdproto-XXXXXX");
                ck_assert_ptr_nonnull(mkdtemp(receiver_dir));
                snprintf(receiver_address, sizeof receiver_address, "%s/notify", receiver_dir);
                strcpy(sa.sun_path, receiver_address);
                len = sizeof sa;
        }
        ck_assert_int_eq(bind(receiver, (struct sockaddr *) &sa, len), 0);
}

static void receiver_close(void) {
        if (receiver >= 0)
                close(receiver);
        receiver = -1;
        if (receiver_dir[0]) {
                unlink(receiver_address);
                rmdir(receiver_dir);
                receiver_dir[0] = '\0';
        }
        unsetenv("NOTIFY_SOCKET");
}

/* One datagram, and the pid the kernel says sent it. */
static ssize_t receive(char *buf, size_t size, pid_t *ret_pid) {
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(struct ucred))];
        } control;
        struct iovec iov = { .iov_base = buf, .iov_len = size };
        struct msghdr msg = {
                .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control, .msg_controllen = sizeof control
        };
        ssize_t n = recvmsg(receiver, &msg, MSG_DONTWAIT);

        *ret_pid = 0;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); n >= 0 && c; c = CMSG_NXTHDR(&msg, c))
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
                        struct ucred cred;

                        memcpy(&cred, CMSG_DATA(c), sizeof cred);
                        *ret_pid = cred.pid;
                }
        return n;
}

START_TEST(test_notify_sends_one_datagram) {
        char buf[256];
        pid_t sender;

        receiver_open(_i);
        setenv("NOTIFY_SOCKET", receiver_address, 1);
        ck_assert_int_eq(sdproto_notify("READY=1\nSTATUS=listening on http://127.0.0.1:1"), 1);
        ck_assert_int_eq(sdproto_notify("STOPPING=1"), 1);
        ck_assert_int_eq(receive(buf, sizeof buf, &sender),
                         (ssize_t) strlen("READY=1\nSTATUS=listening on http://127.0.0.1:1"));
        ck_assert(memcmp(buf, "READY=1\nSTATUS=listening on http://127.0.0.1:1", 46) == 0);
        ck_assert_int_eq(sender, getpid());
        ck_assert_int_eq(receive(buf, sizeof buf, &sender), 10);
        ck_assert(memcmp(buf, "STOPPING=1", 10) == 0);
        ck_assert_int_eq(receive(buf, sizeof buf, &sender), -1);
        receiver_close();
}
END_TEST

START_TEST(test_notify_agrees_with_libsystemd) {
        sd_notify_fn fn;
        char ours[256], theirs[256];
        ssize_t n_ours, n_theirs;
        pid_t sender;

        if (!libsystemd() || !(fn = (sd_notify_fn) dlsym(libsystemd(), "sd_notify"))) {
                fprintf(stderr, "# libsystemd0 not installed: no comparison\n");
                return;
        }
        receiver_open(_i);
        setenv("NOTIFY_SOCKET", receiver_address, 1);
        ck_assert_int_eq(sdproto_notify("READY=1\nSTATUS=a b"), 1);
        ck_assert_int_gt(fn(0, "READY=1\nSTATUS=a b"), 0);
        n_ours = receive(ours, sizeof ours, &sender);
        n_theirs = receive(theirs, sizeof theirs, &sender);
        ck_assert_int_eq(n_ours, n_theirs);
        ck_assert(memcmp(ours, theirs, (size_t) n_ours) == 0);
        receiver_close();
}
END_TEST

START_TEST(test_notify_unset_is_nothing) {
        unsetenv("NOTIFY_SOCKET");
        ck_assert_int_eq(sdproto_notify("READY=1"), 0);
}
END_TEST

START_TEST(test_notify_errors) {
        char path[128];

        setenv("NOTIFY_SOCKET", "relative", 1);
        ck_assert_int_eq(sdproto_notify("READY=1"), -EINVAL);
        setenv("NOTIFY_SOCKET", "@", 1);
        ck_assert_int_eq(sdproto_notify("READY=1"), -EINVAL);
        /* Nobody there: an abstract name nobody bound, a missing file. */
        snprintf(path, sizeof path, "@prebind-test-sdproto/nobody/%d", (int) getpid());
        setenv("NOTIFY_SOCKET", path, 1);
        ck_assert_int_eq(sdproto_notify("READY=1"), -ECONNREFUSED);
        setenv("NOTIFY_SOCKET", "/nonexistent/prebind/notify", 1);
        ck_assert_int_eq(sdproto_notify("READY=1"), -ENOENT);
        unsetenv("NOTIFY_SOCKET");
}
END_TEST

START_TEST(test_notify_leaks_no_fd) {
        int before = dup(0), after;

        close(before);
        setenv("NOTIFY_SOCKET", "@prebind-test-sdproto/nobody", 1);
        for (int i = 0; i < 100; i++)
                ck_assert_int_lt(sdproto_notify("READY=1"), 0);
        unsetenv("NOTIFY_SOCKET");
        after = dup(0);
        close(after);
        ck_assert_int_eq(after, before);
}
END_TEST

static Suite *sdproto_suite(void) {
        Suite *s = suite_create("sdproto");
        TCase *tc;

        tc = tcase_create("count");
        tcase_add_loop_test(tc, test_count, 0, ARRAY_SIZE(counts));
        suite_add_tcase(s, tc);

        tc = tcase_create("names");
        tcase_add_loop_test(tc, test_split, 0, ARRAY_SIZE(splits));
        tcase_add_test(tc, test_split_long_names_whole);
        suite_add_tcase(s, tc);

        tc = tcase_create("environment");
        tcase_add_loop_test(tc, test_take, 0, ARRAY_SIZE(activations));
        tcase_add_loop_test(tc, test_take_agrees_with_libsystemd, 0, ARRAY_SIZE(activations));
        tcase_add_test(tc, test_numbers);
        tcase_add_test(tc, test_take_not_ours_unsets);
        suite_add_tcase(s, tc);

        tc = tcase_create("address");
        tcase_add_loop_test(tc, test_address, 0, ARRAY_SIZE(addresses));
        tcase_add_test(tc, test_address_lengths);
        suite_add_tcase(s, tc);

        tc = tcase_create("notify");
        tcase_add_loop_test(tc, test_notify_sends_one_datagram, 0, 2);
        tcase_add_loop_test(tc, test_notify_agrees_with_libsystemd, 0, 2);
        tcase_add_test(tc, test_notify_unset_is_nothing);
        tcase_add_test(tc, test_notify_errors);
        tcase_add_test(tc, test_notify_leaks_no_fd);
        suite_add_tcase(s, tc);

        return s;
}

int main(void) {
        return unit_run(sdproto_suite());
}
