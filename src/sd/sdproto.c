/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "parse.h"
#include "sdproto.h"

int sdproto_listen_fds_count(const char *listen_pid, const char *listen_fds, pid_t self) {
        char self_text[32];
        unsigned long n;
        int r;

        snprintf(self_text, sizeof self_text, "%d", (int) self);
        if (!listen_pid || strcmp(listen_pid, self_text) != 0)
                return 0;
        if (!listen_fds)
                return 0;
        /* As libsystemd: more than an int is -ERANGE; then "n <= 0 ||
         * n > INT_MAX - SD_LISTEN_FDS_START" is -EINVAL, so that the last
         * fd number still fits an int. */
        r = parse_uint(listen_fds, 0, INT_MAX, &n);
        if (r < 0)
                return r;
        if (n == 0 || n > INT_MAX - SDPROTO_LISTEN_FDS_START)
                return -EINVAL;
        return (int) n;
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
