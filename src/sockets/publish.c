/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "format.h"
#include "guard.h"
#include "log.h"
#include "publish.h"

int write_all(int fd, const char *buf, size_t len) {
        while (len > 0) {
                ssize_t k = write(fd, buf, len);

                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                buf += k;
                len -= (size_t) k;
        }
        return 0;
}

/* path.XXXXXX, with six random letters and digits (as mkostemp(3)), the
 * name chosen before the file exists: the guard hears of it first. */
static char *temporary_name(const char *path) {
        static const char letters[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        unsigned char random[6];
        struct timespec ts;
        char *name;
        size_t len;

        if (getrandom(random, sizeof random, GRND_NONBLOCK) != (ssize_t) sizeof random) {
                clock_gettime(CLOCK_MONOTONIC, &ts);
                for (size_t i = 0; i < sizeof random; i++)
                        random[i] = (unsigned char) (((uint64_t) ts.tv_nsec >> (i * 5)) ^ ((uint64_t) getpid() >> i));
        }
        if (asprintf(&name, "%s.XXXXXX", path) < 0)
                return NULL;
        len = strlen(name);
        for (size_t i = 0; i < sizeof random; i++)
                name[len - sizeof random + i] = letters[random[i] % (sizeof letters - 1)];
        return name;
}

int write_file_atomic(const char *path, const char *content, struct guard *guard, int *ret_fd) {
        struct stat st;
        mode_t mask;
        char *tmp = NULL;
        int fd = -1, r;

        /* rename(2) would replace anything: a device (as root, --port-file
         * =/dev/null would turn it into a file, then delete it), a symlink
         * or a socket. Only a regular file may be replaced. */
        if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode))
                return -EEXIST;
        /* O_EXCL never opens what is there, O_NOFOLLOW never follows a
         * symlink planted at the name; a name taken is chosen again. */
        for (int attempt = 0; fd < 0; attempt++) {
                free(tmp);
                tmp = temporary_name(path);
                if (!tmp)
                        return -ENOMEM;
                guard_file_expected(guard, GUARD_FILE_REGULAR, tmp);
                fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (fd >= 0)
                        break;
                r = -errno;
                guard_file_forget(guard, tmp);
                if (r != -EEXIST || attempt == 100) {
                        free(tmp);
                        return r;
                }
        }
        guard_file_created(guard, GUARD_FILE_REGULAR, tmp, fd);
        /* The file is born 0600; a port file is no secret, and other
         * users' test runners may need to read it: 0666 & ~umask. */
        mask = umask(0);
        umask(mask);
        r = write_all(fd, content, strlen(content));
        if (r == 0 && fchmod(fd, 0666 & ~mask) < 0)
                r = -errno;
        /* Before the rename, after which path is this file. */
        if (r == 0)
                guard_file_created(guard, GUARD_FILE_REGULAR, path, fd);
        if (r == 0 && rename(tmp, path) < 0) {
                r = -errno;
                guard_file_forget(guard, path);
        }
        if (r < 0) {
                unlink(tmp);
                close(fd);
        }
        guard_file_forget(guard, tmp);
        free(tmp);
        if (r < 0)
                return r;
        *ret_fd = fd;
        return 0;
}

bool publish_precedes_command(const struct publish_options *options) {
        return options->print || options->port_file || options->port_fd >= 0 || log_get_level() >= LOG_LEVEL_INFO;
}

static void log_addresses(const struct bound_socket *sockets, size_t n) {
        char url[FIELD_STRING_MAX];

        for (size_t i = 0; i < n; i++)
                log_info("listening on %s (fd %zu, name '%s')",
                         socket_field_format(sockets, i, FIELD_URL, url, sizeof url), 3 + i, sockets[i].name);
}

/* The addresses in each format asked for, formatted once. */
struct texts {
        const struct bound_socket *sockets;
        size_t n;
        pid_t pid, child_pid;
        char *text[_FORMAT_MAX];
};

static int texts_get(struct texts *t, enum output_format format, const char **ret) {
        int r;

        if (!t->text[format]) {
                r = format_addresses(format, t->sockets, t->n, t->pid, t->child_pid, &t->text[format]);
                if (r < 0) {
                        log_error_errno(r, "cannot format the addresses: %m");
                        return r;
                }
        }
        *ret = t->text[format];
        return 0;
}

static int publish_outputs(const struct publish_options *options, struct texts *t, struct guard *guard,
                           struct publication *ret) {
        const char *text;
        int r;

        if (options->port_fd >= 0) {
                if ((r = texts_get(t, options->format, &text)) < 0)
                        return r;
                r = write_all(options->port_fd, text, strlen(text));
                /* COMMAND never sees this fd, and the reader gets EOF now. */
                close(options->port_fd);
                if (r < 0)
                        return log_error_errno(r, "cannot write to --port-fd=%d: %m", options->port_fd);
        }
        if (options->print) {
                if ((r = texts_get(t, options->print_format, &text)) < 0)
                        return r;
                r = write_all(STDOUT_FILENO, text, strlen(text));
                if (r < 0)
                        return log_error_errno(r, "cannot write the addresses to stdout: %m");
        }
        if (options->port_file) {
                if ((r = texts_get(t, options->format, &text)) < 0)
                        return r;
                r = write_file_atomic(options->port_file, text, guard, &ret->port_file_fd);
                if (r == -EEXIST)
                        return log_error_errno(r,
                                               "cannot write port file '%s': it exists and is not a regular "
                                               "file (left alone)",
                                               options->port_file);
                if (r < 0)
                        return log_error_errno(r, "cannot write port file '%s': %m", options->port_file);
                ret->port_file = options->port_file;
        }
        return 0;
}

int publish_addresses(const struct publish_options *options, const struct bound_socket *sockets, size_t n, pid_t pid,
                      pid_t child_pid, struct guard *guard, struct publication *ret) {
        struct texts t = { .sockets = sockets, .n = n, .pid = pid, .child_pid = child_pid };
        int r;

        *ret = (struct publication) { .port_file = NULL, .port_file_fd = -1 };
        if (!options->print && !options->port_file && options->port_fd < 0) {
                log_addresses(sockets, n);
                return 0;
        }
        r = publish_outputs(options, &t, guard, ret);
        for (int f = 0; f < _FORMAT_MAX; f++)
                free(t.text[f]);
        return r;
}

void publication_withdraw(struct publication *p) {
        struct stat ours, there;

        if (!p->port_file)
                return;
        /* Only our file, not one somebody put in its place since. Holding
         * it open keeps its inode number from being reused by the other
         * file, so comparing the two identities is enough. */
        if (fstat(p->port_file_fd, &ours) == 0 && lstat(p->port_file, &there) == 0 && ours.st_dev == there.st_dev &&
            ours.st_ino == there.st_ino)
                unlink(p->port_file);
        close(p->port_file_fd);
        p->port_file = NULL;
        p->port_file_fd = -1;
}
