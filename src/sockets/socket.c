/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "clock.h"
#include "sd.h"
#include "fd.h"
#include "socket.h"

static int set_int_option(int fd, int level, int option, int value) {
        return setsockopt(fd, level, option, &value, sizeof value) < 0 ? -errno : 0;
}

/* A unix socket path in the way: remove it only if it is a socket nobody
 * listens on any more (connect() is refused). A live socket, a regular
 * file, a directory or a symlink are never touched (unlike
 * systemd-socket-activate, which unlinks whatever is there). */
static int remove_stale_socket(const struct listen_spec *spec) {
        struct stat st;

        if (lstat(spec->addr.un.sun_path, &st) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (!S_ISSOCK(st.st_mode))
                return -EEXIST;
        if (!unix_socket_is_stale(spec->addr.un.sun_path))
                return -EADDRINUSE;
        return unlink(spec->addr.un.sun_path) < 0 && errno != ENOENT ? -errno : 0;
}

static int bind_unix_file(int fd, const struct listen_spec *spec, mode_t mode, struct bound_socket *s) {
        struct stat st;
        mode_t old_umask;
        int r;

        r = remove_stale_socket(spec);
        if (r < 0)
                return r;

        /* bind() creates the file with 0777 & ~umask: set the umask so the
         * file is born with the requested mode, with no window in which it
         * is more open (as systemd does for SocketMode=). */
        old_umask = umask(~mode & 0777);
        r = bind(fd, &spec->addr.sa, spec->addr_len) < 0 ? -errno : 0;
        umask(old_umask);
        if (r < 0)
                return r;

        if (lstat(spec->addr.un.sun_path, &st) < 0)
                return -errno;
        s->created_path = strdup(spec->addr.un.sun_path);
        if (!s->created_path) {
                unlink(spec->addr.un.sun_path);
                return -ENOMEM;
        }
        s->created_dev = st.st_dev;
        s->created_ino = st.st_ino;
        return 0;
}

int socket_bind(const struct listen_spec *spec, const struct socket_options *options, struct bound_socket *ret) {
        struct bound_socket s = {
                .fd = -1,
                .name = spec->name ? spec->name : "unknown",
                .type = spec->type,
        };
        int family = spec->addr.sa.sa_family;
        int r;

        s.fd = socket(family, spec->type | SOCK_CLOEXEC, 0);
        if (s.fd < 0)
                return -errno;

        if (family == AF_INET || family == AF_INET6) {
                /* SO_REUSEADDR on TCP, as systemd does: a restarted server
                 * is not locked out of its port by TIME_WAIT connections. */
                if (spec->type == SOCK_STREAM && (r = set_int_option(s.fd, SOL_SOCKET, SO_REUSEADDR, 1)) < 0)
                        goto fail;
                if (options->reuseport && (r = set_int_option(s.fd, SOL_SOCKET, SO_REUSEPORT, 1)) < 0)
                        goto fail;
                if (family == AF_INET6 && options->v6only &&
                    (r = set_int_option(s.fd, IPPROTO_IPV6, IPV6_V6ONLY, 1)) < 0)
                        goto fail;
        }

        if (family == AF_UNIX && !sockaddr_is_abstract(&spec->addr, spec->addr_len))
                r = bind_unix_file(s.fd, spec, options->socket_mode, &s);
        else
                r = bind(s.fd, &spec->addr.sa, spec->addr_len) < 0 ? -errno : 0;
        if (r < 0)
                goto fail;

        if (spec->type == SOCK_STREAM && listen(s.fd, options->backlog) < 0) {
                r = -errno;
                goto fail;
        }

        /* The real address: with port 0 this is where the kernel's choice
         * becomes visible. */
        s.addr_len = sizeof s.addr;
        if (getsockname(s.fd, &s.addr.sa, &s.addr_len) < 0) {
                r = -errno;
                goto fail;
        }
        *ret = s;
        return 0;

fail:
        socket_release(&s);
        return r;
}

static int socket_adopt(int fd, char *name, struct bound_socket *ret) {
        struct bound_socket s = { .fd = fd, .name_owned = name, .name = name ? name : "unknown", .inherited = true };
        socklen_t len = sizeof s.type;

        /* Ours now, and like every fd of prebind, close-on-exec: only the
         * child's fd layout passes it on. */
        if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0 || getsockopt(fd, SOL_SOCKET, SO_TYPE, &s.type, &len) < 0)
                return -errno;
        s.addr_len = sizeof s.addr;
        if (getsockname(fd, &s.addr.sa, &s.addr_len) < 0)
                return -errno;
        /* Only what prebind can publish and COMMAND can take as a listening
         * socket: a netlink or packet socket has no address to print. */
        if (s.addr.sa.sa_family != AF_INET && s.addr.sa.sa_family != AF_INET6 && s.addr.sa.sa_family != AF_UNIX)
                return -EAFNOSUPPORT;
        *ret = s;
        return 0;
}

int sockets_inherit(struct bound_socket **ret) {
        struct bound_socket *sockets;
        char **names = NULL;
        int n, r = 0;

        /* Unsets LISTEN_*: they were for prebind, not for anything it runs. */
        n = sd_listen_fds_with_names_lazy(&names);
        if (n <= 0) {
                *ret = NULL;
                return n;
        }
        /* sd_listen_fds_with_names() counts the names but does not check
         * them: an empty one, a control character or a name longer than
         * FDNAME_MAX would go on into COMMAND's LISTEN_FDNAMES (and the
         * env format), where sd_listen_fds_with_names(3) promises none. */
        for (int i = 0; names && i < n; i++)
                if (!fdname_is_valid(names[i]))
                        r = -EBADMSG;
        sockets = r < 0 ? NULL : calloc((size_t) n, sizeof *sockets);
        if (!sockets && r == 0)
                r = -ENOMEM;
        for (int i = 0; r == 0 && i < n; i++) {
                r = socket_adopt(3 + i, names ? names[i] : NULL, &sockets[i]);
                if (r == 0 && names)
                        names[i] = NULL;
        }
        for (int i = 0; names && i < n; i++)
                free(names[i]);
        free(names);
        if (r < 0) {
                /* The names of the sockets adopted before the failure are
                 * theirs now. */
                for (int i = 0; sockets && i < n; i++)
                        free(sockets[i].name_owned);
                free(sockets);
                return r;
        }
        *ret = sockets;
        return n;
}

void socket_give_up(struct bound_socket *s) {
        int listening = 0;
        socklen_t len = sizeof listening;

        if (s->fd < 0 || s->inherited || s->type != SOCK_STREAM ||
            getsockopt(s->fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) < 0 || !listening)
                return;
        if (shutdown(s->fd, SHUT_RDWR) < 0 || s->addr.sa.sa_family != AF_UNIX)
                return;
        /* A unix listening socket that is shut down refuses new clients,
         * but those already queued would wait for the last copy to close:
         * close them now (they read EOF). The backlog bounds the loop. */
        (void) fcntl(s->fd, F_SETFL, fcntl(s->fd, F_GETFL) | O_NONBLOCK);
        for (int fd; (fd = accept4(s->fd, NULL, NULL, SOCK_CLOEXEC)) >= 0;)
                close(fd);
}

void socket_release(struct bound_socket *s) {
        if (s->created_path) {
                struct stat st;

                /* Remove only the file we created, not one that replaced it.
                 * This runs before close(): the bound socket holds the
                 * file's inode, so its number cannot have been reused. */
                if (lstat(s->created_path, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_dev == s->created_dev &&
                    st.st_ino == s->created_ino)
                        unlink(s->created_path);
                free(s->created_path);
                s->created_path = NULL;
        }
        if (s->fd >= 0)
                close(s->fd);
        s->fd = -1;
        free(s->name_owned);
        s->name_owned = NULL;
}

enum accept_failure accept_failure_of(int err) {
        switch (err) {
        case EAGAIN:
        case EINTR:
        case ECONNABORTED:
        case EPROTO:
        case EPERM:
        case ENETDOWN:
        case ENOPROTOOPT:
        case EHOSTDOWN:
        case ENONET:
        case EHOSTUNREACH:
        case EOPNOTSUPP:
        case ENETUNREACH:
                return ACCEPT_FAILURE_NEXT;
        case EMFILE:
        case ENFILE:
        case ENOBUFS:
        case ENOMEM:
                return ACCEPT_FAILURE_BACK_OFF;
        default:
                return ACCEPT_FAILURE_FATAL;
        }
}

int accept_each(int listen_fd, int flags, uint64_t budget_usec, accept_fn fn, void *userdata) {
        uint64_t deadline = budget_usec > 0 ? now_usec() + budget_usec : UINT64_MAX;

        do {
                union sockaddr_any peer;
                socklen_t peer_len = sizeof peer;
                int conn = accept4(listen_fd, &peer.sa, &peer_len, flags);

                if (conn < 0) {
                        if (errno == EAGAIN)
                                return 0;
                        if (accept_failure_of(errno) != ACCEPT_FAILURE_NEXT)
                                return -errno;
                        continue;
                }
                if (!fn(conn, &peer, peer_len, userdata))
                        return 0;
        } while (deadline == UINT64_MAX || now_usec() < deadline);
        return 0;
}
