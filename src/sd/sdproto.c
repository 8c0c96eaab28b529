/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sdproto.h"

/* What libsystemd (v252, src/basic/parse-util.c) reads in LISTEN_FDS and
 * LISTEN_PID, written again: its safe_atoi() and safe_atolu() skip blanks
 * (" \t\n\r"), take Python's "0b" and "0o" prefixes themselves, then
 * hand the rest to strtol() or strtoul() with base 0 (2 or 8 after a
 * prefix), which skips isspace() again, takes a sign, "0x" (base 0
 * only) and a leading 0 as octal. This is strtol()'s rule in the C
 * locale, without calling it: the static build's libc need not agree.
 * Returns 0, or -EINVAL when no digit was read or something follows the
 * digits; *ret is filled in either way (strtol()'s ERANGE comes first). */
struct number {
        unsigned long magnitude; /* saturated at ULONG_MAX */
        bool negative;
        bool overflow;    /* more than an unsigned long */
        const char *rest; /* after systemd's blanks and prefix: its check for '-' */
};

static int digit_value(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'z')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'Z')
                return c - 'A' + 10;
        return 99;
}

static int parse_systemd_number(const char *s, struct number *ret) {
        struct number n = {};
        unsigned base = 0;
        const char *digits;

        s += strspn(s, " \t\n\r");
        if (s[0] == '0' && (s[1] == 'b' || s[1] == 'B'))
                base = 2, s += 2;
        else if (s[0] == '0' && (s[1] == 'o' || s[1] == 'O'))
                base = 8, s += 2;
        n.rest = s;
        /* strtol() from here. */
        s += strspn(s, " \t\n\v\f\r");
        if (*s == '+' || *s == '-')
                n.negative = *s++ == '-';
        if (base == 0 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && digit_value(s[2]) < 16)
                base = 16, s += 2;
        else if (base == 0)
                base = s[0] == '0' ? 8 : 10;
        for (digits = s; digit_value(*s) < (int) base; s++) {
                unsigned long d = (unsigned long) digit_value(*s);

                if (n.magnitude > (ULONG_MAX - d) / base)
                        n.overflow = true, n.magnitude = ULONG_MAX;
                else if (!n.overflow)
                        n.magnitude = n.magnitude * base + d;
        }
        *ret = n;
        return s == digits || *s != '\0' ? -EINVAL : 0;
}

int sdproto_parse_listen_fds(const char *s, int *ret) {
        struct number n;
        int r = parse_systemd_number(s, &n);

        /* safe_atoi(): strtol()'s ERANGE (beyond a long) comes before
         * anything after the digits; a long that is no int is -ERANGE. */
        if (n.overflow || n.magnitude > (unsigned long) LONG_MAX + n.negative)
                return -ERANGE;
        if (r < 0)
                return r;
        if (n.magnitude > (unsigned long) INT_MAX + n.negative)
                return -ERANGE;
        *ret = n.negative ? (int) -(long) (n.magnitude - 1) - 1 : (int) n.magnitude;
        return 0;
}

int sdproto_parse_pid(const char *s, pid_t *ret) {
        struct number n;
        unsigned long value;
        int r = parse_systemd_number(s, &n);

        /* safe_atolu() then parse_pid(): strtoul() wraps a negative
         * number, refused only when systemd's own '-' check sees it. */
        if (n.overflow)
                return -ERANGE;
        if (r < 0)
                return r;
        value = n.negative ? 0UL - n.magnitude : n.magnitude;
        if (value != 0 && n.rest[0] == '-')
                return -ERANGE;
        if ((unsigned long) (pid_t) value != value || (pid_t) value <= 0)
                return -ERANGE;
        *ret = (pid_t) value;
        return 0;
}

int sdproto_listen_fds_count(const char *listen_pid, const char *listen_fds, pid_t self) {
        pid_t pid;
        int n, r;

        /* A LISTEN_PID that is not a number is "not ours", as one of
         * another process (libsystemd would say -EINVAL; src/sd.c never
         * asks it then). */
        if (!listen_pid || sdproto_parse_pid(listen_pid, &pid) < 0 || pid != self)
                return 0;
        if (!listen_fds)
                return 0;
        r = sdproto_parse_listen_fds(listen_fds, &n);
        if (r < 0)
                return r;
        /* As libsystemd: the last fd number must still fit an int. */
        if (n <= 0 || n > INT_MAX - SDPROTO_LISTEN_FDS_START)
                return -EINVAL;
        return n;
}

static void names_free(char **names) {
        for (size_t i = 0; names && names[i]; i++)
                free(names[i]);
        free(names);
}

int sdproto_listen_fdnames_split(const char *listen_fdnames, int n, char ***ret_names) {
        char **names;
        const char *p = listen_fdnames;
        int count = 1;

        if (n <= 0)
                return -EINVAL;
        if (listen_fdnames) {
                for (const char *c = listen_fdnames; *c; c++)
                        count += *c == ':';
                if (count != n)
                        return -EINVAL;
        }
        names = calloc((size_t) n + 1, sizeof *names);
        if (!names)
                return -ENOMEM;
        for (int i = 0; i < n; i++) {
                size_t len = p ? strcspn(p, ":") : 0;

                names[i] = p ? strndup(p, len) : strdup("unknown");
                if (!names[i]) {
                        names_free(names);
                        return -ENOMEM;
                }
                if (p)
                        p += len + 1; /* past the ':', or the NUL after the last name */
        }
        *ret_names = names;
        return 0;
}

int sdproto_listen_fds(char ***ret_names) {
        char **names = NULL;
        int n, r = 0;

        n = sdproto_listen_fds_count(getenv("LISTEN_PID"), getenv("LISTEN_FDS"), getpid());
        /* In libsystemd's order: every fd is checked before the names are
         * counted, so LISTEN_FDS=2147483644 is -EBADF, not a 16 GiB
         * allocation of "unknown"s. */
        for (int fd = SDPROTO_LISTEN_FDS_START; n > 0 && fd < SDPROTO_LISTEN_FDS_START + n; fd++) {
                int flags = fcntl(fd, F_GETFD);

                if (flags < 0 || (!(flags & FD_CLOEXEC) && fcntl(fd, F_SETFD, flags | FD_CLOEXEC) < 0)) {
                        r = -errno;
                        break;
                }
        }
        if (n > 0 && r == 0)
                r = sdproto_listen_fdnames_split(getenv("LISTEN_FDNAMES"), n, &names);
        unsetenv("LISTEN_PID");
        unsetenv("LISTEN_FDS");
        unsetenv("LISTEN_FDNAMES");
        if (n < 0 || r < 0) {
                *ret_names = NULL;
                return n < 0 ? n : r;
        }
        *ret_names = names;
        return n;
}

int sdproto_notify_address(const char *value, struct sockaddr_un *ret, socklen_t *ret_len) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        size_t len = value ? strlen(value) : 0;

        /* sd_notify(3): an absolute path or an abstract name; at least one
         * character after the '@' or '/'. */
        if (len < 2 || (value[0] != '/' && value[0] != '@') || len > sizeof sa.sun_path)
                return -EINVAL;
        memcpy(sa.sun_path, value, len);
        if (value[0] == '@') {
                /* The name is exactly the bytes after the NUL: no
                 * terminator counts in its length. */
                sa.sun_path[0] = '\0';
                *ret_len = (socklen_t) (offsetof(struct sockaddr_un, sun_path) + len);
        } else
                *ret_len = (socklen_t) (offsetof(struct sockaddr_un, sun_path) + len +
                                        (len < sizeof sa.sun_path ? 1 : 0));
        *ret = sa;
        return 0;
}

int sdproto_notify(const char *message) {
        const char *address = getenv("NOTIFY_SOCKET");
        struct sockaddr_un sa;
        socklen_t sa_len;
        int fd, r;

        if (!address)
                return 0;
        r = sdproto_notify_address(address, &sa, &sa_len);
        if (r < 0)
                return r;
        fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        /* MSG_NOSIGNAL: a manager that went away must not kill prebind
         * with SIGPIPE. No credentials are attached: the kernel adds the
         * sender's pid for a receiver with SO_PASSCRED, as for sd_notify(0, …). */
        r = sendto(fd, message, strlen(message), MSG_NOSIGNAL, (const struct sockaddr *) &sa, sa_len) < 0 ? -errno : 1;
        close(fd);
        return r;
}
