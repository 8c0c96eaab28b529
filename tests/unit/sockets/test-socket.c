/* SPDX-License-Identifier: MIT */
/* prebind's own sockets (socket.c) on loopback and in a temporary
 * directory: the socket options (backlog, SO_REUSEADDR on TCP, reuseport,
 * v6only), unix socket files (their mode whatever the umask, stale-socket
 * detection, abstract names), socket_release() removing only its own
 * file, and sockets_inherit() with prebind's own LISTEN_PID or another's.
 * accept_each() and the accept(2) policy on a loopback listener. Port 0
 * everywhere; each test in check's own process. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "socket.h"
#include "unit.h"

static const struct socket_options defaults = { .backlog = 128, .socket_mode = 0666 };

/* Specs (and their texts) live until the test ends: a bound socket's
 * name points into its spec. */
static struct listen_spec specs[16];
static char *texts[16];
static size_t n_specs;

static void free_specs(void) {
        for (size_t i = 0; i < n_specs; i++) {
                listen_spec_done(&specs[i]);
                free(texts[i]);
        }
        n_specs = 0;
}

static void teardown(void) {
        free_specs();
        unit_dir_remove();
}

static struct listen_spec *spec_of(const char *text) {
        ck_assert_uint_lt(n_specs, 16);
        texts[n_specs] = strdup(text);
        ck_assert_msg(listen_spec_parse(texts[n_specs], &specs[n_specs]) == 0, "%s", text);
        return &specs[n_specs++];
}

/* "unix:<the scratch directory>/<name>" */
static struct listen_spec *unix_spec(const char *name, char *path, size_t size) {
        char text[160];

        snprintf(path, size, "%s/%s", unit_dir, name);
        snprintf(text, sizeof text, "unix:%s", path);
        return spec_of(text);
}

static int int_option(int fd, int level, int option) {
        int v = -1;
        socklen_t len = sizeof v;

        ck_assert_int_eq(getsockopt(fd, level, option, &v, &len), 0);
        return v;
}

static struct bound_socket bind_ok(const char *text, const struct socket_options *o) {
        struct listen_spec *spec = spec_of(text);
        struct bound_socket s;
        int r = socket_bind(spec, o, &s);

        ck_assert_msg(r == 0, "%s: %s", text, strerror(-r));
        return s;
}

static bool have_ipv6_loopback(void) {
        int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in6 a = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT };
        bool ok = fd >= 0 && bind(fd, (struct sockaddr *) &a, sizeof a) == 0;

        if (fd >= 0)
                close(fd);
        return ok;
}

/* ---- inet ---------------------------------------------------------------- */

START_TEST(test_tcp_port_0_listens_with_options) {
        struct socket_options o = { .backlog = 7 };
        struct bound_socket s = bind_ok("127.0.0.1:0", &o);
        struct tcp_info info;
        socklen_t len = sizeof info;

        ck_assert_int_ge(s.fd, 0);
        ck_assert_str_eq(s.name, "unknown");
        ck_assert_int_eq(s.type, SOCK_STREAM);
        ck_assert_int_eq(s.addr.sa.sa_family, AF_INET);
        ck_assert_int_ne(sockaddr_port(&s.addr), 0);
        ck_assert_ptr_null(s.created_path);
        ck_assert_int_eq(fcntl(s.fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
        ck_assert_int_eq(int_option(s.fd, SOL_SOCKET, SO_ACCEPTCONN), 1);
        ck_assert_int_eq(int_option(s.fd, SOL_SOCKET, SO_REUSEADDR), 1);
        ck_assert_int_eq(int_option(s.fd, SOL_SOCKET, SO_REUSEPORT), 0);
        /* A listening socket's TCP_INFO holds its backlog in tcpi_sacked. */
        ck_assert_int_eq(getsockopt(s.fd, IPPROTO_TCP, TCP_INFO, &info, &len), 0);
        ck_assert_uint_eq(info.tcpi_sacked, 7);
        socket_release(&s);
        ck_assert_int_eq(s.fd, -1);
}
END_TEST

START_TEST(test_name_is_kept) {
        struct bound_socket s = bind_ok("web=127.0.0.1:0", &defaults);

        ck_assert_str_eq(s.name, "web");
        socket_release(&s);
}
END_TEST

START_TEST(test_udp_has_no_reuseaddr_and_does_not_listen) {
        struct bound_socket s = bind_ok("udp:127.0.0.1:0", &defaults);

        ck_assert_int_eq(s.type, SOCK_DGRAM);
        ck_assert_int_ne(sockaddr_port(&s.addr), 0);
        ck_assert_int_eq(int_option(s.fd, SOL_SOCKET, SO_REUSEADDR), 0);
        ck_assert_int_eq(int_option(s.fd, SOL_SOCKET, SO_ACCEPTCONN), 0);
        socket_release(&s);
}
END_TEST

START_TEST(test_reuseport_lets_two_bind) {
        struct socket_options reuse = defaults, plain = defaults;
        struct bound_socket a, b, c;
        struct listen_spec *spec;
        char text[64];

        reuse.reuseport = true;
        a = bind_ok("127.0.0.1:0", &reuse);
        ck_assert_int_eq(int_option(a.fd, SOL_SOCKET, SO_REUSEPORT), 1);
        snprintf(text, sizeof text, "127.0.0.1:%d", sockaddr_port(&a.addr));
        b = bind_ok(text, &reuse);
        ck_assert_int_eq(sockaddr_port(&b.addr), sockaddr_port(&a.addr));
        /* Without it, the port is taken. */
        spec = spec_of(text);
        ck_assert_int_eq(socket_bind(spec, &plain, &c), -EADDRINUSE);
        socket_release(&a);
        socket_release(&b);
}
END_TEST

START_TEST(test_v6only) {
        struct socket_options v6only = defaults;
        struct bound_socket s;

        if (!have_ipv6_loopback())
                return; /* no IPv6 here: nothing to test */
        v6only.v6only = true;
        s = bind_ok("[::1]:0", &v6only);
        ck_assert_int_eq(s.addr.sa.sa_family, AF_INET6);
        ck_assert_int_eq(int_option(s.fd, IPPROTO_IPV6, IPV6_V6ONLY), 1);
        socket_release(&s);
        /* Without --v6only the kernel's default (bindv6only) stays. */
        s = bind_ok("[::]:0", &defaults);
        {
                FILE *f = fopen("/proc/sys/net/ipv6/bindv6only", "re");
                int def = 0;

                if (f) {
                        ck_assert_int_eq(fscanf(f, "%d", &def), 1);
                        fclose(f);
                }
                ck_assert_int_eq(int_option(s.fd, IPPROTO_IPV6, IPV6_V6ONLY), def);
        }
        socket_release(&s);
}
END_TEST

START_TEST(test_bind_error_is_returned_and_nothing_leaks) {
        struct listen_spec *spec = spec_of("192.0.2.1:0"); /* TEST-NET-1: not ours */
        struct bound_socket s = { .fd = -2 };
        int before, after;

        before = open("/dev/null", O_RDONLY | O_CLOEXEC);
        close(before);
        ck_assert_int_eq(socket_bind(spec, &defaults, &s), -EADDRNOTAVAIL);
        ck_assert_int_eq(s.fd, -2); /* untouched on failure */
        after = open("/dev/null", O_RDONLY | O_CLOEXEC);
        close(after);
        ck_assert_int_eq(before, after); /* the socket was closed */
}
END_TEST

/* ---- unix socket files --------------------------------------------------- */

static mode_t mode_of(const char *path) {
        struct stat st;

        ck_assert_int_eq(lstat(path, &st), 0);
        return st.st_mode;
}

START_TEST(test_unix_mode_whatever_the_umask) {
        static const struct {
                mode_t umask, mode;
        } cases[] = {
                { 0077, 0666 }, { 0022, 0660 }, { 0, 0600 }, { 0777, 0640 }, { 0002, 0777 },
        };

        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
                struct socket_options o = defaults;
                struct listen_spec *spec;
                struct bound_socket s;
                char path[128], name[16];
                mode_t old;

                snprintf(name, sizeof name, "s%zu", i);
                spec = unix_spec(name, path, sizeof path);
                o.socket_mode = cases[i].mode;
                old = umask(cases[i].umask);
                ck_assert_int_eq(socket_bind(spec, &o, &s), 0);
                /* The umask is ours again. */
                ck_assert_int_eq(umask(old), cases[i].umask);
                ck_assert(S_ISSOCK(mode_of(path)));
                ck_assert_int_eq(mode_of(path) & 07777, cases[i].mode);
                ck_assert_str_eq(s.created_path, path);
                socket_release(&s);
                ck_assert_int_eq(access(path, F_OK), -1);
        }
}
END_TEST

START_TEST(test_dead_socket_file_is_replaced) {
        char path[128];
        struct listen_spec *spec = unix_spec("dead", path, sizeof path);
        struct bound_socket s;
        struct stat before, after;
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        /* A socket file whose listener is gone. */
        ck_assert_int_eq(bind(fd, &spec->addr.sa, spec->addr_len), 0);
        close(fd);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_eq(connect(fd, &spec->addr.sa, spec->addr_len), -1);
        ck_assert_int_eq(errno, ECONNREFUSED);
        close(fd);
        ck_assert_int_eq(lstat(path, &before), 0);
        ck_assert_int_eq(socket_bind(spec, &defaults, &s), 0);
        ck_assert_int_eq(lstat(path, &after), 0);
        ck_assert(S_ISSOCK(after.st_mode));
        /* Live now (the inode number may well be reused): a client
         * connects. */
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_eq(connect(fd, &spec->addr.sa, spec->addr_len), 0);
        close(fd);
        socket_release(&s);
}
END_TEST

START_TEST(test_dead_datagram_socket_file_is_replaced) {
        char path[128], text[160];
        struct listen_spec *spec;
        struct bound_socket s;
        int fd;

        snprintf(path, sizeof path, "%s/dgram", unit_dir);
        snprintf(text, sizeof text, "udp:%s", path);
        spec = spec_of(text);
        ck_assert_int_eq(spec->type, SOCK_DGRAM);
        fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        ck_assert_int_eq(bind(fd, &spec->addr.sa, spec->addr_len), 0);
        close(fd);
        ck_assert_int_eq(socket_bind(spec, &defaults, &s), 0);
        ck_assert_int_eq(s.type, SOCK_DGRAM);
        socket_release(&s);
}
END_TEST

START_TEST(test_live_socket_is_eaddrinuse_and_untouched) {
        char path[128];
        struct listen_spec *spec = unix_spec("live", path, sizeof path);
        struct bound_socket live, s = { .fd = -2 };
        struct stat before, after;

        live = bind_ok(spec->text, &defaults);
        ck_assert_int_eq(lstat(path, &before), 0);
        ck_assert_int_eq(socket_bind(spec, &defaults, &s), -EADDRINUSE);
        ck_assert_int_eq(s.fd, -2);
        ck_assert_int_eq(lstat(path, &after), 0);
        ck_assert_uint_eq(after.st_ino, before.st_ino);
        socket_release(&live);
}
END_TEST

START_TEST(test_live_socket_with_full_backlog_does_not_hang) {
        char path[128];
        struct listen_spec *spec = unix_spec("full", path, sizeof path);
        struct socket_options tiny = defaults;
        struct bound_socket live, s;
        int clients[8], n = 0;

        /* A listener that never accepts, its backlog full: a blocking
         * connect() would wait for ever. */
        tiny.backlog = 0;
        live = bind_ok(spec->text, &tiny);
        for (; n < 8; n++) {
                clients[n] = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
                if (connect(clients[n], &spec->addr.sa, spec->addr_len) < 0) {
                        ck_assert_int_eq(errno, EAGAIN);
                        close(clients[n]);
                        break;
                }
        }
        ck_assert_int_lt(n, 8);
        ck_assert_int_eq(socket_bind(spec, &defaults, &s), -EADDRINUSE);
        for (int i = 0; i < n; i++)
                close(clients[i]);
        socket_release(&live);
}
END_TEST

START_TEST(test_regular_file_is_eexist_and_untouched) {
        char path[128], buf[16] = { 0 };
        struct listen_spec *spec = unix_spec("file", path, sizeof path);
        struct bound_socket s;
        FILE *f = fopen(path, "we");

        ck_assert_ptr_nonnull(f);
        fputs("keep me", f);
        fclose(f);
        ck_assert_int_eq(socket_bind(spec, &defaults, &s), -EEXIST);
        f = fopen(path, "re");
        ck_assert_ptr_nonnull(f);
        ck_assert_ptr_nonnull(fgets(buf, sizeof buf, f));
        fclose(f);
        ck_assert_str_eq(buf, "keep me");
}
END_TEST

START_TEST(test_directory_and_symlink_are_eexist) {
        char path[128], target[128];
        struct listen_spec *spec = unix_spec("d", path, sizeof path);
        struct bound_socket s;
        int fd;

        ck_assert_int_eq(mkdir(path, 0700), 0);
        ck_assert_int_eq(socket_bind(spec, &defaults, &s), -EEXIST);
        ck_assert_int_eq(rmdir(path), 0);
        /* A symlink to a dead socket: not followed, not removed. */
        snprintf(target, sizeof target, "%s/target", unit_dir);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        {
                struct sockaddr_un a = { .sun_family = AF_UNIX };
                strcpy(a.sun_path, target);
                ck_assert_int_eq(bind(fd, (struct sockaddr *) &a, sizeof a), 0);
        }
        close(fd);
        ck_assert_int_eq(symlink(target, path), 0);
        ck_assert_int_eq(socket_bind(spec, &defaults, &s), -EEXIST);
        ck_assert(S_ISLNK(mode_of(path)));
        ck_assert(S_ISSOCK(mode_of(target)));
}
END_TEST

START_TEST(test_missing_directory_is_enoent) {
        struct listen_spec *spec;
        struct bound_socket s;
        char text[160];

        snprintf(text, sizeof text, "unix:%s/no/such/dir/s", unit_dir);
        spec = spec_of(text);
        ck_assert_int_eq(socket_bind(spec, &defaults, &s), -ENOENT);
}
END_TEST

START_TEST(test_abstract_socket_has_no_file) {
        char text[96];
        struct bound_socket s, again;
        struct listen_spec *spec;

        snprintf(text, sizeof text, "unix:@prebind-test-socket/%d", (int) getpid());
        s = bind_ok(text, &defaults);
        ck_assert_ptr_null(s.created_path);
        ck_assert_int_eq(s.addr.sa.sa_family, AF_UNIX);
        ck_assert_int_eq(s.addr.un.sun_path[0], '\0');
        ck_assert(sockaddr_is_abstract(&s.addr, s.addr_len));
        /* Abstract names are taken, not stale: the second is refused. */
        spec = spec_of(text);
        ck_assert_int_eq(socket_bind(spec, &defaults, &again), -EADDRINUSE);
        socket_release(&s);
        /* Free again once released. */
        s = bind_ok(text, &defaults);
        socket_release(&s);
}
END_TEST

/* ---- release -------------------------------------------------------------- */

START_TEST(test_release_removes_only_its_own_file) {
        char path[128], moved[160];
        struct listen_spec *spec = unix_spec("mine", path, sizeof path);
        struct bound_socket s, other;
        struct stat st;

        ck_assert_int_eq(socket_bind(spec, &defaults, &s), 0);
        /* Somebody moves ours away and binds a new socket at the path. */
        snprintf(moved, sizeof moved, "%s.moved", path);
        ck_assert_int_eq(rename(path, moved), 0);
        other = bind_ok(spec->text, &defaults);
        ck_assert_int_eq(lstat(path, &st), 0);
        socket_release(&s);
        /* The replacement stays; ours, elsewhere now, is not chased. */
        ck_assert_int_eq(lstat(path, &st), 0);
        ck_assert_uint_eq(st.st_ino, other.created_ino);
        ck_assert_int_eq(access(moved, F_OK), 0);
        socket_release(&other);
        ck_assert_int_eq(access(path, F_OK), -1);
}
END_TEST

START_TEST(test_release_leaves_a_regular_file_in_its_place) {
        char path[128];
        struct listen_spec *spec = unix_spec("gone", path, sizeof path);
        struct bound_socket s;
        FILE *f;

        ck_assert_int_eq(socket_bind(spec, &defaults, &s), 0);
        ck_assert_int_eq(unlink(path), 0);
        f = fopen(path, "we");
        ck_assert_ptr_nonnull(f);
        fclose(f);
        socket_release(&s);
        ck_assert_int_eq(access(path, F_OK), 0);
        ck_assert_ptr_null(s.created_path);
        /* Twice is harmless. */
        socket_release(&s);
}
END_TEST

/* ---- giving up ------------------------------------------------------------ */

static int connect_to(const struct bound_socket *s, int flags) {
        int fd = socket(s->addr.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC | flags, 0);

        ck_assert_int_ge(fd, 0);
        if (connect(fd, &s->addr.sa, s->addr_len) < 0) {
                int err = errno;
                close(fd);
                errno = err;
                return -1;
        }
        return fd;
}

START_TEST(test_give_up_tcp_refuses_new_clients) {
        struct bound_socket s = bind_ok("127.0.0.1:0", &defaults), copy;
        int client;

        /* A copy elsewhere (a daemonized server) keeps the socket open. */
        copy = s;
        copy.fd = dup(s.fd);
        client = connect_to(&s, 0);
        ck_assert_int_ge(client, 0);
        close(client);
        socket_give_up(&s);
        ck_assert_int_eq(connect_to(&copy, 0), -1);
        ck_assert_int_eq(errno, ECONNREFUSED);
        ck_assert_int_eq(int_option(copy.fd, SOL_SOCKET, SO_ACCEPTCONN), 0);
        close(copy.fd);
        socket_release(&s);
}
END_TEST

START_TEST(test_give_up_unix_closes_queued_clients) {
        char path[128];
        struct listen_spec *spec = unix_spec("gu", path, sizeof path);
        struct bound_socket s;
        int client, copy;
        char c;

        ck_assert_int_eq(socket_bind(spec, &defaults, &s), 0);
        copy = dup(s.fd);
        client = connect_to(&s, 0);
        ck_assert_int_ge(client, 0);
        socket_give_up(&s);
        /* The queued client reads EOF, not a wait for ever; new ones are
         * refused. */
        ck_assert_int_eq(read(client, &c, 1), 0);
        close(client);
        ck_assert_int_eq(connect_to(&s, 0), -1);
        ck_assert_int_eq(errno, ECONNREFUSED);
        close(copy);
        socket_release(&s);
}
END_TEST

START_TEST(test_give_up_leaves_inherited_and_datagram_sockets) {
        struct bound_socket tcp = bind_ok("127.0.0.1:0", &defaults), udp = bind_ok("udp:127.0.0.1:0", &defaults);
        int client;

        /* Passed to prebind: its activator still listens on it. */
        tcp.inherited = true;
        socket_give_up(&tcp);
        ck_assert_int_eq(int_option(tcp.fd, SOL_SOCKET, SO_ACCEPTCONN), 1);
        client = connect_to(&tcp, 0);
        ck_assert_int_ge(client, 0);
        close(client);
        /* A datagram socket still receives. */
        socket_give_up(&udp);
        {
                int sender = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
                char buf[4];

                ck_assert_int_eq(sendto(sender, "x", 1, 0, &udp.addr.sa, udp.addr_len), 1);
                ck_assert_int_eq(recv(udp.fd, buf, sizeof buf, MSG_DONTWAIT), 1);
                close(sender);
        }
        /* Closed fds are ignored. */
        socket_release(&tcp);
        socket_give_up(&tcp);
        socket_release(&udp);
}
END_TEST

/* ---- inherited ------------------------------------------------------------ */

START_TEST(test_inherit_without_listen_pid) {
        struct bound_socket *got = (void *) 1;

        unsetenv("LISTEN_PID");
        setenv("LISTEN_FDS", "1", 1);
        ck_assert_int_eq(sockets_inherit(&got), 0);
        ck_assert_ptr_null(got);
        unsetenv("LISTEN_FDS");
}
END_TEST

START_TEST(test_inherit_with_anothers_listen_pid) {
        struct bound_socket *got = (void *) 1;
        char pid[32];

        snprintf(pid, sizeof pid, "%d", (int) getppid());
        setenv("LISTEN_PID", pid, 1);
        setenv("LISTEN_FDS", "1", 1);
        ck_assert_int_eq(sockets_inherit(&got), 0);
        ck_assert_ptr_null(got);
        /* Not ours: left for whoever it was meant for. */
        ck_assert_str_eq(getenv("LISTEN_PID"), pid);
        unsetenv("LISTEN_PID");
        unsetenv("LISTEN_FDS");
}
END_TEST

/* In a child of its own (fd 3 and the environment are the process's):
 * fd is put at 3 with LISTEN_* for this pid, then sockets_inherit(). The
 * child's exit status says what happened. */
enum inherit_result {
        INHERIT_ONE_NAMED = 10,
        INHERIT_ONE_UNKNOWN,
        INHERIT_EBADMSG,
        INHERIT_EAFNOSUPPORT,
        INHERIT_OTHER,
};

static int inherit_in_child(int fd, const char *names) {
        pid_t pid = unit_fork();
        int status;

        if (pid == 0) {
                struct bound_socket *got = NULL;
                char self[32];
                int n;

                if (dup2(fd, 3) < 0)
                        exit(INHERIT_OTHER);
                snprintf(self, sizeof self, "%d", (int) getpid());
                setenv("LISTEN_PID", self, 1);
                setenv("LISTEN_FDS", "1", 1);
                if (names)
                        setenv("LISTEN_FDNAMES", names, 1);
                else
                        unsetenv("LISTEN_FDNAMES");
                n = sockets_inherit(&got);
                if (n == -EBADMSG)
                        exit(INHERIT_EBADMSG);
                if (n == -EAFNOSUPPORT)
                        exit(INHERIT_EAFNOSUPPORT);
                if (n != 1 || got[0].fd != 3 || !(fcntl(3, F_GETFD) & FD_CLOEXEC) || got[0].type != SOCK_STREAM ||
                    got[0].addr.sa.sa_family != AF_INET || getenv("LISTEN_PID") || getenv("LISTEN_FDS"))
                        exit(INHERIT_OTHER);
                if (strcmp(got[0].name, "web") == 0)
                        exit(INHERIT_ONE_NAMED);
                if (strcmp(got[0].name, "unknown") == 0)
                        exit(INHERIT_ONE_UNKNOWN);
                exit(INHERIT_OTHER);
        }
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert(WIFEXITED(status));
        return WEXITSTATUS(status);
}

START_TEST(test_inherit_own_socket) {
        struct bound_socket s = bind_ok("127.0.0.1:0", &defaults);
        int netlink;

        ck_assert_int_eq(inherit_in_child(s.fd, "web"), INHERIT_ONE_NAMED);
        ck_assert_int_eq(inherit_in_child(s.fd, NULL), INHERIT_ONE_UNKNOWN);
        /* Names that must never reach COMMAND's LISTEN_FDNAMES. */
        ck_assert_int_eq(inherit_in_child(s.fd, "bad\001name"), INHERIT_EBADMSG);
        ck_assert_int_eq(inherit_in_child(s.fd, ""), INHERIT_EBADMSG);
        /* A socket with no address prebind could publish. */
        netlink = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
        ck_assert_int_ge(netlink, 0);
        ck_assert_int_eq(inherit_in_child(netlink, "nl"), INHERIT_EAFNOSUPPORT);
        close(netlink);
        socket_release(&s);
}
END_TEST

/* ---- accept_each() and the accept(2) policy ----------------------------- */

/* A non-blocking listener on 127.0.0.1, with n clients in its backlog
 * (their fds in clients[], for the caller to close). */
static int listener_with_clients(int *clients, size_t n) {
        struct sockaddr_in addr = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t len = sizeof addr;
        int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

        ck_assert_int_ge(l, 0);
        ck_assert_int_eq(bind(l, (struct sockaddr *) &addr, len), 0);
        ck_assert_int_eq(listen(l, 16), 0);
        ck_assert_int_eq(getsockname(l, (struct sockaddr *) &addr, &len), 0);
        for (size_t i = 0; i < n; i++) {
                clients[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
                ck_assert_int_ge(clients[i], 0);
                ck_assert_int_eq(connect(clients[i], (struct sockaddr *) &addr, len), 0);
        }
        return l;
}

static void close_all(int *fds, size_t n) {
        for (size_t i = 0; i < n; i++)
                close(fds[i]);
}

struct taken {
        size_t n;
        size_t room; /* connections fn takes before it says no more */
        useconds_t pause;
};

static bool take(int conn, const union sockaddr_any *peer, socklen_t peer_len, void *userdata) {
        struct taken *t = userdata;

        ck_assert_int_eq(peer->sa.sa_family, AF_INET);
        ck_assert_int_eq(peer_len, sizeof(struct sockaddr_in));
        ck_assert(fcntl(conn, F_GETFL) & O_NONBLOCK);
        close(conn);
        if (t->pause)
                usleep(t->pause);
        return ++t->n < t->room;
}

/* accept_each() with budget: it must end well; how many fn took so far. */
static size_t taken_after(int l, uint64_t budget_usec, struct taken *t) {
        ck_assert_int_eq(accept_each(l, SOCK_CLOEXEC | SOCK_NONBLOCK, budget_usec, take, t), 0);
        return t->n;
}

START_TEST(test_accept_each_drains_the_backlog) {
        int clients[3], l = listener_with_clients(clients, 3);
        struct taken t = { .room = SIZE_MAX };

        ck_assert_uint_eq(taken_after(l, 0, &t), 3);
        /* Empty: EAGAIN is the end, not a failure. */
        ck_assert_uint_eq(taken_after(l, 0, &t), 3);
        close_all(clients, 3);
        close(l);
}
END_TEST

START_TEST(test_accept_each_stops_when_fn_has_no_room_or_the_budget_is_spent) {
        int clients[3], l = listener_with_clients(clients, 3);
        struct taken t = { .room = 1 };

        ck_assert_uint_eq(taken_after(l, 0, &t), 1);
        /* 1 ms per connection against a budget of 1 µs: one per call. */
        t = (struct taken) { .room = SIZE_MAX, .pause = 1000 };
        ck_assert_uint_eq(taken_after(l, 1, &t), 1);
        ck_assert_uint_eq(taken_after(l, 1, &t), 2);
        close_all(clients, 3);
        close(l);
}
END_TEST

START_TEST(test_accept_each_out_of_fds_backs_off_and_keeps_the_connection) {
        int clients[1], l = listener_with_clients(clients, 1), lowest = dup(0);
        struct taken t = { .room = SIZE_MAX };
        struct rlimit saved, none;

        if (unit_under_valgrind()) {
                close(lowest);
                close_all(clients, 1);
                close(l);
                return;
        }
        /* No fd free for the connection: EMFILE, and it stays queued. */
        ck_assert_int_ge(lowest, 0);
        close(lowest);
        ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &saved), 0);
        none = (struct rlimit) { .rlim_cur = (rlim_t) lowest, .rlim_max = saved.rlim_max };
        ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &none), 0);
        ck_assert_int_eq(accept_each(l, SOCK_CLOEXEC | SOCK_NONBLOCK, 0, take, &t), -EMFILE);
        ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &saved), 0);
        ck_assert_int_eq(accept_failure_of(EMFILE), ACCEPT_FAILURE_BACK_OFF);
        ck_assert_uint_eq(t.n, 0);
        ck_assert_uint_eq(taken_after(l, 0, &t), 1);
        close_all(clients, 1);
        close(l);
}
END_TEST

START_TEST(test_accept_each_on_a_broken_socket_is_fatal) {
        int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        struct taken t = { .room = SIZE_MAX };

        /* Not listening: EINVAL, for ever. */
        ck_assert_int_ge(s, 0);
        ck_assert_int_eq(accept_each(s, SOCK_CLOEXEC, 0, take, &t), -EINVAL);
        ck_assert_int_eq(accept_failure_of(EINVAL), ACCEPT_FAILURE_FATAL);
        close(s);
        ck_assert_int_eq(accept_each(s, SOCK_CLOEXEC, 0, take, &t), -EBADF);
        ck_assert_int_eq(accept_failure_of(EBADF), ACCEPT_FAILURE_FATAL);
        ck_assert_uint_eq(t.n, 0);
}
END_TEST

START_TEST(test_accept_failure_of_each_class) {
        static const int next[] = { EAGAIN, EINTR, ECONNABORTED, EPROTO, EPERM, ENETDOWN, ENETUNREACH };
        static const int back_off[] = { EMFILE, ENFILE, ENOBUFS, ENOMEM };
        static const int fatal[] = { EBADF, EINVAL, ENOTSOCK, EFAULT };

        for (size_t i = 0; i < ARRAY_SIZE(next); i++)
                ck_assert_int_eq(accept_failure_of(next[i]), ACCEPT_FAILURE_NEXT);
        for (size_t i = 0; i < ARRAY_SIZE(back_off); i++)
                ck_assert_int_eq(accept_failure_of(back_off[i]), ACCEPT_FAILURE_BACK_OFF);
        for (size_t i = 0; i < ARRAY_SIZE(fatal); i++)
                ck_assert_int_eq(accept_failure_of(fatal[i]), ACCEPT_FAILURE_FATAL);
}
END_TEST

int main(void) {
        Suite *s = suite_create("socket");
        TCase *inet = tcase_create("inet"), *unix_files = tcase_create("unix"), *release = tcase_create("release"),
              *give_up = tcase_create("give-up"), *inherit = tcase_create("inherit"),
              *accepting = tcase_create("accept");

        tcase_add_checked_fixture(inet, unit_dir_make, teardown);
        tcase_add_test(inet, test_tcp_port_0_listens_with_options);
        tcase_add_test(inet, test_name_is_kept);
        tcase_add_test(inet, test_udp_has_no_reuseaddr_and_does_not_listen);
        tcase_add_test(inet, test_reuseport_lets_two_bind);
        tcase_add_test(inet, test_v6only);
        tcase_add_test(inet, test_bind_error_is_returned_and_nothing_leaks);
        suite_add_tcase(s, inet);
        tcase_add_checked_fixture(unix_files, unit_dir_make, teardown);
        tcase_add_test(unix_files, test_unix_mode_whatever_the_umask);
        tcase_add_test(unix_files, test_dead_socket_file_is_replaced);
        tcase_add_test(unix_files, test_dead_datagram_socket_file_is_replaced);
        tcase_add_test(unix_files, test_live_socket_is_eaddrinuse_and_untouched);
        tcase_add_test(unix_files, test_live_socket_with_full_backlog_does_not_hang);
        tcase_add_test(unix_files, test_regular_file_is_eexist_and_untouched);
        tcase_add_test(unix_files, test_directory_and_symlink_are_eexist);
        tcase_add_test(unix_files, test_missing_directory_is_enoent);
        tcase_add_test(unix_files, test_abstract_socket_has_no_file);
        suite_add_tcase(s, unix_files);
        tcase_add_checked_fixture(release, unit_dir_make, teardown);
        tcase_add_test(release, test_release_removes_only_its_own_file);
        tcase_add_test(release, test_release_leaves_a_regular_file_in_its_place);
        suite_add_tcase(s, release);
        tcase_add_checked_fixture(give_up, unit_dir_make, teardown);
        tcase_add_test(give_up, test_give_up_tcp_refuses_new_clients);
        tcase_add_test(give_up, test_give_up_unix_closes_queued_clients);
        tcase_add_test(give_up, test_give_up_leaves_inherited_and_datagram_sockets);
        suite_add_tcase(s, give_up);
        tcase_add_checked_fixture(inherit, unit_dir_make, teardown);
        tcase_add_test(inherit, test_inherit_without_listen_pid);
        tcase_add_test(inherit, test_inherit_with_anothers_listen_pid);
        tcase_add_test(inherit, test_inherit_own_socket);
        suite_add_tcase(s, inherit);
        tcase_add_test(accepting, test_accept_each_drains_the_backlog);
        tcase_add_test(accepting, test_accept_each_stops_when_fn_has_no_room_or_the_budget_is_spent);
        tcase_add_test(accepting, test_accept_each_out_of_fds_backs_off_and_keeps_the_connection);
        tcase_add_test(accepting, test_accept_each_on_a_broken_socket_is_fatal);
        tcase_add_test(accepting, test_accept_failure_of_each_class);
        suite_add_tcase(s, accepting);
        return unit_run(s);
}
