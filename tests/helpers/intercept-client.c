/* SPDX-License-Identifier: MIT */
/* A server's bind() as the interposer sees it, for tests/unit/test-intercept.c:
 * run with LD_PRELOAD=libprebind-intercept.so and prebind's broker in the
 * environment, it binds as a scenario says and checks what it got.
 *
 *   intercept-client SCENARIO WANTED_PORT HANDED_TCP_PORT HANDED_UDP_PORT
 *
 * Exits 0 if every check held, else 1 after one line on stderr.
 *
 * As COMMAND of prebind --intercept={port} --subst (tests/integration,
 * either mechanism), a server that binds in an unusual shape:
 *
 *   intercept-client serve SHAPE PORT
 *   intercept-client leftover PORT REPORT
 *
 * serve binds PORT (prebind's own port: only its socket can have it),
 * listens, and answers each connection with "pid=P tid=T\n" until it is
 * killed; it exits 1 at once if the bind failed or got another port
 * (fork-reclaim: or if a bind that should get a decoy got PORT).
 * leftover claims PORT, leaves a detached process behind and exits; that
 * process binds PORT once COMMAND has exited and writes what it got to
 * REPORT ("pid=P port=N" or "pid=P errno=E").
 *
 * Built without sanitizers (meson.build): the orphan-thread shape leaves
 * the process without its main thread, which LeakSanitizer's exit-time
 * scan would take for a failure; the process ends by prebind's signal. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static int failures;

#define CHECK(cond, ...)                                                                                              \
        do {                                                                                                          \
                if (!(cond)) {                                                                                        \
                        fprintf(stderr, "intercept-client: %s:%d: ", __FILE__, __LINE__);                             \
                        fprintf(stderr, __VA_ARGS__);                                                                 \
                        fputc('\n', stderr);                                                                          \
                        failures++;                                                                                   \
                }                                                                                                     \
        } while (0)

static int bind_any(int fd, int family, unsigned port) {
        struct sockaddr_in in = { .sin_family = AF_INET, .sin_port = htons((uint16_t) port) };
        struct sockaddr_in6 in6 = { .sin6_family = AF_INET6,
                                    .sin6_port = htons((uint16_t) port),
                                    .sin6_addr = IN6ADDR_ANY_INIT };

        if (family == AF_INET)
                return bind(fd, (struct sockaddr *) &in, sizeof in);
        return bind(fd, (struct sockaddr *) &in6, sizeof in6);
}

static unsigned local_port(int fd) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;

        if (getsockname(fd, (struct sockaddr *) &ss, &len) < 0)
                return 0;
        if (ss.ss_family == AF_INET)
                return ntohs(((struct sockaddr_in *) &ss)->sin_port);
        if (ss.ss_family == AF_INET6)
                return ntohs(((struct sockaddr_in6 *) &ss)->sin6_port);
        return 0;
}

static int domain_of(int fd) {
        int v = -1;
        socklen_t l = sizeof v;
        getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &l);
        return v;
}

/* Put the socket at a high fd number, as a server with many files open
 * would have it: the handed socket must land at that same number. */
static int socket_at(int family, int type, int at) {
        int s = socket(family, type, 0), fd;

        if (s < 0)
                return -1;
        fd = fcntl(s, (type & SOCK_CLOEXEC) ? F_DUPFD_CLOEXEC : F_DUPFD, at);
        close(s);
        return fd;
}

/* The first bind of the port, in IPv6 with both flags; then the same port
 * in IPv4 with neither: the first gets the socket, the second a decoy. */
static void scenario_tcp(unsigned wanted, unsigned handed) {
        int a = socket_at(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 40);
        int b = socket_at(AF_INET, SOCK_STREAM, 50);

        CHECK(a == 40 && b == 50, "cannot create the sockets");
        errno = 1234;
        CHECK(bind_any(a, AF_INET6, wanted) == 0, "bind [::]:%u: %m", wanted);
        CHECK(errno == 1234, "errno changed by a successful bind: %d", errno);
        CHECK(local_port(a) == handed, "fd 40 has port %u, not prebind's %u", local_port(a), handed);
        CHECK(domain_of(a) == AF_INET, "fd 40 is not prebind's IPv4 socket");
        CHECK(fcntl(a, F_GETFD) & FD_CLOEXEC, "FD_CLOEXEC lost");
        CHECK(fcntl(a, F_GETFL) & O_NONBLOCK, "O_NONBLOCK lost");
        CHECK(listen(a, 16) == 0, "listen on the handed socket: %m");

        CHECK(bind_any(b, AF_INET, wanted) == 0, "second bind 0.0.0.0:%u: %m", wanted);
        CHECK(local_port(b) != handed && local_port(b) != wanted && local_port(b) != 0,
              "second bind got port %u: not a decoy", local_port(b));
        CHECK(!(fcntl(b, F_GETFD) & FD_CLOEXEC), "FD_CLOEXEC appeared on fd 50");
        CHECK(!(fcntl(b, F_GETFL) & O_NONBLOCK), "O_NONBLOCK appeared on fd 50");
        /* fd 40 still holds prebind's socket. */
        CHECK(local_port(a) == handed, "fd 40 changed");
}

/* Neither flag: the handed socket must not get prebind's FD_CLOEXEC, and
 * must be blocking again after a previous user set O_NONBLOCK. */
static void scenario_plain(unsigned wanted, unsigned handed) {
        int a = socket_at(AF_INET, SOCK_STREAM, 60);

        CHECK(bind_any(a, AF_INET, wanted) == 0, "bind 0.0.0.0:%u: %m", wanted);
        CHECK(local_port(a) == handed, "port %u, not %u", local_port(a), handed);
        CHECK(!(fcntl(a, F_GETFD) & FD_CLOEXEC), "FD_CLOEXEC set");
        CHECK(!(fcntl(a, F_GETFL) & O_NONBLOCK), "O_NONBLOCK set");
}

/* A server that binds, closes and binds again claims again. */
static void scenario_retry(unsigned wanted, unsigned handed) {
        int a = socket_at(AF_INET, SOCK_STREAM, 70), b;

        CHECK(bind_any(a, AF_INET, wanted) == 0, "bind: %m");
        close(a);
        b = socket_at(AF_INET6, SOCK_STREAM, 71);
        CHECK(bind_any(b, AF_INET6, wanted) == 0, "bind again: %m");
        CHECK(local_port(b) == handed, "the second bind after a close got %u, not %u", local_port(b), handed);
}

static void scenario_udp(unsigned wanted, unsigned handed_udp) {
        int a = socket_at(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 80);

        CHECK(bind_any(a, AF_INET, wanted) == 0, "bind udp: %m");
        CHECK(local_port(a) == handed_udp, "udp port %u, not %u", local_port(a), handed_udp);
        CHECK(fcntl(a, F_GETFD) & FD_CLOEXEC, "FD_CLOEXEC lost");
}

/* Another port: bound by the kernel as asked (0 here, so that the test
 * needs no free port), and a port of its choosing reported. */
static void scenario_other(unsigned wanted) {
        int a = socket_at(AF_INET, SOCK_STREAM, 90);
        struct sockaddr_in in = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };

        CHECK(bind(a, (struct sockaddr *) &in, sizeof in) == 0, "bind 127.0.0.1:0: %m");
        CHECK(local_port(a) != 0, "no port");
        close(a);
        a = socket_at(AF_INET, SOCK_STREAM, 90);
        /* A port that is surely taken (the handed one is not reported). */
        CHECK(bind_any(a, AF_INET, wanted + 1) == 0 || errno == EADDRINUSE || errno == EACCES, "bind: %m");
}

/* Refused: the interposer falls back to the real bind(). */
static void scenario_refused(unsigned wanted, unsigned handed) {
        int a = socket_at(AF_INET, SOCK_STREAM, 100);
        int r = bind_any(a, AF_INET, wanted);

        CHECK(r < 0 || local_port(a) == wanted, "bind of a refused port gave %u", local_port(a));
        CHECK(local_port(a) != handed, "a refused claim got prebind's socket");
}

static _Noreturn void die(const char *what, unsigned port) {
        fprintf(stderr, "intercept-client: %s of port %u: %s\n", what, port, errno ? strerror(errno) : "another port");
        exit(1);
}

/* Bind port in shape on a new socket, as the kernel reads it: "plain"
 * 0.0.0.0, "unspec" a sockaddr_in whose sin_family is 0 (AF_UNSPEC with
 * INADDR_ANY, which Linux binds as AF_INET), "reopen" [::] closed, then
 * 0.0.0.0. Dies unless it got port. */
static int bind_shape(const char *shape, unsigned port) {
        int fd;

        errno = 0;
        if (strcmp(shape, "reopen") == 0) {
                fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
                if (fd < 0 || bind_any(fd, AF_INET6, port) < 0 || local_port(fd) != port)
                        die("bind [::]", port);
                close(fd);
        }
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                die("socket", port);
        if (strcmp(shape, "unspec") == 0) {
                struct sockaddr_in in = { .sin_family = AF_UNSPEC, .sin_port = htons((uint16_t) port) };

                if (bind(fd, (struct sockaddr *) &in, sizeof in) < 0)
                        die("bind AF_UNSPEC", port);
        } else if (bind_any(fd, AF_INET, port) < 0)
                die("bind 0.0.0.0", port);
        if (local_port(fd) != port)
                die("bind", port);
        if (listen(fd, 64) < 0)
                die("listen", port);
        return fd;
}

static void serve(int fd) {
        for (;;) {
                char line[64];
                int c = accept4(fd, NULL, NULL, SOCK_CLOEXEC), n;

                if (c < 0)
                        continue;
                n = snprintf(line, sizeof line, "pid=%d tid=%d\n", (int) getpid(), (int) syscall(SYS_gettid));
                (void) !write(c, line, (size_t) n);
                close(c);
        }
}

struct server {
        const char *shape;
        unsigned port;
        pthread_t main_thread;
};

/* A thread that binds: with a file table of its own (unshare(CLONE_FILES)),
 * or once the main thread is gone (pthread_exit(): the thread group's
 * leader is then a zombie, which holds no files). */
static void *server_thread(void *arg) {
        struct server *s = arg;

        if (strcmp(s->shape, "files-thread") == 0 && unshare(CLONE_FILES) < 0)
                die("unshare(CLONE_FILES) before the bind", s->port);
        if (strcmp(s->shape, "orphan-thread") == 0 && pthread_join(s->main_thread, NULL) != 0)
                die("joining the main thread before the bind", s->port);
        serve(bind_shape("plain", s->port));
        return NULL;
}

/* A child claims anew at the parent's fd number, in the other family
 * (it closed its copy): the parent still holds the first socket there, so
 * its own bind of that other family is a second one and gets a decoy,
 * which must not have port. */
static void serve_after_a_child_claimed(unsigned port) {
        int fd = bind_shape("plain", port), done[2], decoy;
        char byte = 0;
        pid_t child;

        if (pipe2(done, O_CLOEXEC) < 0 || (child = fork()) < 0)
                die("fork", port);
        if (child == 0) {
                int s6 = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);

                errno = 0;
                if (s6 < 0 || dup3(s6, fd, O_CLOEXEC) < 0 || bind_any(fd, AF_INET6, port) < 0 ||
                    local_port(fd) != port)
                        die("the child's bind [::]", port);
                _exit(write(done[1], &byte, 1) == 1 ? 0 : 1);
        }
        close(done[1]);
        if (read(done[0], &byte, 1) != 1)
                die("the child's claim", port);
        waitpid(child, NULL, 0);
        decoy = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
        errno = 0;
        if (decoy < 0 || bind_any(decoy, AF_INET6, port) < 0 || local_port(decoy) == port || local_port(decoy) == 0)
                die("a second family's bind (a decoy)", port);
        serve(fd);
}

static int serve_shape(const char *shape, unsigned port) {
        static struct server s;
        pthread_t t;

        if (strcmp(shape, "fork-reclaim") == 0)
                serve_after_a_child_claimed(port);
        s = (struct server) { .shape = shape, .port = port, .main_thread = pthread_self() };
        if (strcmp(shape, "files-thread") != 0 && strcmp(shape, "orphan-thread") != 0)
                serve(bind_shape(shape, port));
        if (pthread_create(&t, NULL, server_thread, &s) != 0)
                return 1;
        if (strcmp(shape, "orphan-thread") == 0)
                pthread_exit(NULL);
        pthread_join(t, NULL);
        return 0;
}

/* COMMAND claims port, then exits leaving a detached process (its own
 * session, reparented) that binds port once COMMAND is gone: with
 * --restart, in the delay before the next COMMAND. */
static int leftover(unsigned port, const char *report) {
        int fd = bind_shape("plain", port), gone[2];
        pid_t child;

        if (pipe2(gone, O_CLOEXEC) < 0 || (child = fork()) < 0)
                return 1;
        if (child == 0) {
                char byte, text[64], tmp[4096];
                int out, n, s;

                close(gone[1]);
                close(fd);
                if (setsid() < 0 || fork() != 0)
                        _exit(0);
                /* EOF: COMMAND has exited (its end closed with it). */
                while (read(gone[0], &byte, 1) < 0 && errno == EINTR)
                        ;
                s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
                if (bind_any(s, AF_INET, port) == 0)
                        n = snprintf(text, sizeof text, "pid=%d port=%u\n", (int) getpid(), local_port(s));
                else
                        n = snprintf(text, sizeof text, "pid=%d errno=%d\n", (int) getpid(), errno);
                /* Whole or not at all: the test reads it once it exists. */
                snprintf(tmp, sizeof tmp, "%s.tmp", report);
                out = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
                if (out >= 0 && write(out, text, (size_t) n) == n)
                        (void) rename(tmp, report);
                _exit(0);
        }
        close(gone[0]);
        waitpid(child, NULL, 0);
        return 0;
}

int main(int argc, char *argv[]) {
        unsigned wanted, tcp, udp;

        if (argc == 4 && strcmp(argv[1], "serve") == 0)
                return serve_shape(argv[2], (unsigned) atoi(argv[3]));
        if (argc == 4 && strcmp(argv[1], "leftover") == 0)
                return leftover((unsigned) atoi(argv[2]), argv[3]);
        if (argc != 5)
                return 2;
        wanted = (unsigned) atoi(argv[2]);
        tcp = (unsigned) atoi(argv[3]);
        udp = (unsigned) atoi(argv[4]);
        if (strcmp(argv[1], "tcp") == 0)
                scenario_tcp(wanted, tcp);
        else if (strcmp(argv[1], "plain") == 0)
                scenario_plain(wanted, tcp);
        else if (strcmp(argv[1], "retry") == 0)
                scenario_retry(wanted, tcp);
        else if (strcmp(argv[1], "both") == 0) {
                scenario_tcp(wanted, tcp);
                scenario_udp(wanted, udp);
        } else if (strcmp(argv[1], "udp") == 0)
                scenario_udp(wanted, udp);
        else if (strcmp(argv[1], "other") == 0)
                scenario_other(wanted);
        else if (strcmp(argv[1], "refused") == 0)
                scenario_refused(wanted, tcp);
        else if (strcmp(argv[1], "nothing") != 0)
                return 2;
        return failures ? 1 : 0;
}
