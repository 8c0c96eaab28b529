/*
 * prebind example: a tiny HTTP/1.0 (and datagram echo) server that takes its
 * sockets by socket activation, the way a systemd service does.
 *
 * It never binds anything itself: the sockets arrive as fds 3, 4, ... with
 * LISTEN_FDS, LISTEN_PID and LISTEN_FDNAMES (sd_listen_fds(3)), from prebind,
 * systemd or systemd-socket-activate.
 *
 *   prebind --print=url -l web=127.0.0.1:0 -- ./server --expect web:stream
 *
 * Exit status: 0 on SIGTERM/SIGINT, 2 on bad usage or when the sockets
 * received are not the ones expected, 1 on any other failure.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#define EXIT_USAGE 2

/* Bounds for one client, so that a silent client cannot stall the server. */
#define REQUEST_MAX 8192
#define CLIENT_TIMEOUT_MS 5000
#define LINGER_TIMEOUT_MS 200

/* Longest delay accepted by --notify-after and --delay-accept: one day. */
#define DELAY_MAX_SEC 86400.0

/* A family wildcard for --expect NAME:TYPE:inet (IPv4 or IPv6). */
#define FAMILY_INET (-1)

struct expectation {
        const char *text; /* as given, for messages */
        char *name;       /* "*" matches any name */
        int type;         /* SOCK_STREAM or SOCK_DGRAM */
        int family;       /* AF_UNSPEC (any), AF_INET, AF_INET6, AF_UNIX or FAMILY_INET */
};

struct listener {
        int fd;
        const char *name;
        int type;
};

struct options {
        struct expectation *expect;
        size_t n_expect;
        double notify_after; /* < 0: do not notify */
        double delay_accept; /* 0: serve at once */
};

static void log_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void log_msg(const char *fmt, ...) {
        int saved_errno = errno; /* callers may still read errno after logging */
        va_list ap;

        fprintf(stderr, "%s: ", program_invocation_short_name);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
        errno = saved_errno;
}

static void help(void) {
        printf("Usage: %s [OPTION]...\n"
               "Serve HTTP/1.0 on every stream socket and echo datagrams on every\n"
               "datagram socket received by socket activation (LISTEN_FDS).\n"
               "\n"
               "      --expect=NAME:TYPE[:FAMILY]  require the next received fd to be a\n"
               "                          socket named NAME ('*': any name) of TYPE\n"
               "                          (stream|dgram) and FAMILY (ipv4|ipv6|inet|unix);\n"
               "                          repeat once per fd, in fd order\n"
               "      --notify-after=SECONDS  send READY=1 to $NOTIFY_SOCKET after SECONDS\n"
               "      --delay-accept=SECONDS  wait SECONDS before serving the first client\n"
               "  -h, --help              show this help and exit\n"
               "\n"
               "Exit status: 0 on SIGTERM/SIGINT, 2 on bad usage or unexpected sockets,\n"
               "1 on other failures.\n",
               program_invocation_short_name);
}

static const char *type_to_string(int type) {
        switch (type) {
        case SOCK_STREAM:
                return "stream";
        case SOCK_DGRAM:
                return "dgram";
        case SOCK_SEQPACKET:
                return "seqpacket";
        default:
                return "other";
        }
}

static const char *family_to_string(int family) {
        switch (family) {
        case AF_INET:
                return "ipv4";
        case AF_INET6:
                return "ipv6";
        case AF_UNIX:
                return "unix";
        default:
                return "other";
        }
}

/* Seconds as a non-negative decimal number ("2", "0.25"), range-checked. */
static int parse_seconds(const char *s, double *ret) {
        char *end;
        double v;

        errno = 0;
        v = strtod(s, &end);
        if (errno != 0 || end == s || *end != '\0' || !isfinite(v) || v < 0 || v > DELAY_MAX_SEC)
                return -EINVAL;
        *ret = v;
        return 0;
}

/* NAME:TYPE[:FAMILY]. NAME cannot contain ':' (sd_listen_fds(3)), so the split is unambiguous. */
static int parse_expectation(const char *s, struct expectation *ret) {
        const char *colon = strchr(s, ':'), *type, *family;
        size_t type_len;

        if (!colon || colon == s)
                return -EINVAL;
        type = colon + 1;
        family = strchr(type, ':');
        type_len = family ? (size_t) (family - type) : strlen(type);

        if (type_len == strlen("stream") && strncmp(type, "stream", type_len) == 0)
                ret->type = SOCK_STREAM;
        else if (type_len == strlen("dgram") && strncmp(type, "dgram", type_len) == 0)
                ret->type = SOCK_DGRAM;
        else
                return -EINVAL;

        if (!family)
                ret->family = AF_UNSPEC;
        else if (strcmp(family + 1, "ipv4") == 0)
                ret->family = AF_INET;
        else if (strcmp(family + 1, "ipv6") == 0)
                ret->family = AF_INET6;
        else if (strcmp(family + 1, "inet") == 0)
                ret->family = FAMILY_INET;
        else if (strcmp(family + 1, "unix") == 0)
                ret->family = AF_UNIX;
        else
                return -EINVAL;

        ret->name = strndup(s, (size_t) (colon - s));
        if (!ret->name)
                return -ENOMEM;
        ret->text = s;
        return 0;
}

/* Returns 1 to run, 0 when --help was printed, -EINVAL on bad usage (already reported). */
static int parse_argv(int argc, char *argv[], struct options *o) {
        enum { ARG_EXPECT = 0x100, ARG_NOTIFY_AFTER, ARG_DELAY_ACCEPT };
        static const struct option long_options[] = {
                { "expect", required_argument, NULL, ARG_EXPECT },
                { "notify-after", required_argument, NULL, ARG_NOTIFY_AFTER },
                { "delay-accept", required_argument, NULL, ARG_DELAY_ACCEPT },
                { "help", no_argument, NULL, 'h' },
                { NULL, 0, NULL, 0 },
        };
        int c, r;

        o->expect = calloc((size_t) argc, sizeof(*o->expect));
        if (!o->expect) {
                log_msg("out of memory");
                return -ENOMEM;
        }

        while ((c = getopt_long(argc, argv, "+h", long_options, NULL)) >= 0) {
                switch (c) {
                case 'h':
                        help();
                        return 0;
                case ARG_EXPECT:
                        r = parse_expectation(optarg, &o->expect[o->n_expect]);
                        if (r == -ENOMEM) {
                                log_msg("out of memory");
                                return r;
                        }
                        if (r < 0) {
                                log_msg("invalid --expect '%s': want NAME:stream|dgram[:ipv4|ipv6|inet|unix]", optarg);
                                return r;
                        }
                        o->n_expect++;
                        break;
                case ARG_NOTIFY_AFTER:
                        if (parse_seconds(optarg, &o->notify_after) < 0) {
                                log_msg("invalid --notify-after '%s': want seconds, 0..%.0f", optarg, DELAY_MAX_SEC);
                                return -EINVAL;
                        }
                        break;
                case ARG_DELAY_ACCEPT:
                        if (parse_seconds(optarg, &o->delay_accept) < 0) {
                                log_msg("invalid --delay-accept '%s': want seconds, 0..%.0f", optarg, DELAY_MAX_SEC);
                                return -EINVAL;
                        }
                        break;
                case '?':
                        /* getopt has printed the reason */
                        fprintf(stderr, "Try '%s --help' for more information.\n", program_invocation_short_name);
                        return -EINVAL;
                default:
                        abort();
                }
        }
        if (optind < argc) {
                log_msg("unexpected argument '%s'", argv[optind]);
                return -EINVAL;
        }
        return 1;
}

static int socket_option(int fd, int option) {
        int v = -1;
        socklen_t len = sizeof(v);

        if (getsockopt(fd, SOL_SOCKET, option, &v, &len) < 0)
                return -1;
        return v;
}

static bool family_matches(int fd, int family, int type) {
        if (family == FAMILY_INET)
                return sd_is_socket_inet(fd, AF_UNSPEC, type, -1, 0) > 0;
        return sd_is_socket(fd, family, type, -1) > 0;
}

/*
 * Check one received fd: a stream socket must already listen (that is the
 * point of socket activation: clients queue before we run), a datagram socket
 * is served as it is, anything else is refused. Returns 0 or -EINVAL, reported.
 */
static int check_listener(const struct listener *l, const struct expectation *e) {
        int fd = l->fd;

        if (e && !(strcmp(e->name, "*") == 0 || strcmp(e->name, l->name) == 0)) {
                log_msg("fd %d: expected '%s', got a socket named '%s'", fd, e->text, l->name);
                return -EINVAL;
        }
        if (e && (e->type != l->type || !family_matches(fd, e->family, e->type))) {
                log_msg("fd %d ('%s'): expected '%s', got %s %s", fd, l->name, e->text,
                        family_to_string(socket_option(fd, SO_DOMAIN)), type_to_string(l->type));
                return -EINVAL;
        }
        if (l->type == SOCK_STREAM && sd_is_socket(fd, AF_UNSPEC, SOCK_STREAM, 1) <= 0) {
                log_msg("fd %d ('%s'): stream socket is not listening", fd, l->name);
                return -EINVAL;
        }
        return 0;
}

static void free_strv(char **v) {
        for (char **p = v; p && *p; p++)
                free(*p);
        free(v);
}

/*
 * Receive the sockets, classify and check them. Returns the count, or <0
 * (reported). The listeners point into *ret_names, freed with free_strv().
 */
static int take_listeners(const struct options *o, struct listener **ret, char ***ret_names) {
        struct listener *ls;
        char **names = NULL;
        int n, r = 0;

        /* unset_environment=1: LISTEN_* are ours alone, they must not reach anything we might run. */
        n = sd_listen_fds_with_names(1, &names);
        if (n < 0) {
                log_msg("cannot take the passed sockets (LISTEN_FDS/LISTEN_FDNAMES): %s", strerror(-n));
                return -EINVAL;
        }
        if (n == 0) {
                log_msg("no sockets passed: run me socket-activated, e.g. 'prebind -l web=127.0.0.1:0 -- %s'",
                        program_invocation_short_name);
                return -EINVAL;
        }
        if (o->n_expect > 0 && o->n_expect != (size_t) n) {
                log_msg("expected %zu socket(s), got %d", o->n_expect, n);
                free_strv(names);
                return -EINVAL;
        }

        ls = calloc((size_t) n, sizeof(*ls));
        if (!ls) {
                log_msg("out of memory");
                free_strv(names);
                return -ENOMEM;
        }
        for (int i = 0; i < n; i++) {
                struct listener *l = &ls[i];

                l->fd = SD_LISTEN_FDS_START + i;
                l->name = names[i];
                if (sd_is_socket(l->fd, AF_UNSPEC, SOCK_STREAM, -1) > 0)
                        l->type = SOCK_STREAM;
                else if (sd_is_socket(l->fd, AF_UNSPEC, SOCK_DGRAM, -1) > 0)
                        l->type = SOCK_DGRAM;
                else {
                        log_msg("fd %d ('%s'): not a stream or datagram socket", l->fd, l->name);
                        r = -EINVAL;
                        continue;
                }
                if (check_listener(l, o->n_expect > 0 ? &o->expect[i] : NULL) < 0)
                        r = -EINVAL;
        }
        if (r < 0) {
                free(ls);
                free_strv(names);
                return r;
        }
        *ret = ls;
        *ret_names = names;
        return n;
}

/* A one-shot CLOCK_MONOTONIC timer firing after SECONDS (> 0). */
static int arm_timer(double seconds) {
        struct itimerspec its = { { 0, 0 }, { 0, 0 } };
        int fd;

        fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
        if (fd < 0)
                return -errno;
        its.it_value.tv_sec = (time_t) seconds;
        its.it_value.tv_nsec = (long) ((seconds - (double) its.it_value.tv_sec) * 1e9);
        if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0)
                its.it_value.tv_nsec = 1; /* an all-zero it_value would disarm the timer */
        if (timerfd_settime(fd, 0, &its, NULL) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        return fd;
}

static void notify_ready(void) {
        int r = sd_notify(0, "READY=1");

        if (r < 0)
                log_msg("cannot send READY=1: %s", strerror(-r));
        else if (r == 0)
                log_msg("NOTIFY_SOCKET is not set, READY=1 not sent");
}

static int send_all(int fd, const char *buf, size_t len) {
        while (len > 0) {
                /* MSG_NOSIGNAL: a client that went away must not kill us with SIGPIPE. */
                ssize_t k = send(fd, buf, len, MSG_NOSIGNAL);
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

static void set_timeouts(int fd, int ms) {
        struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };

        (void) setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        (void) setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* Read up to the end of the request header; the request itself does not matter. */
static ssize_t read_request(int fd, char *buf, size_t size) {
        size_t got = 0;

        while (got < size - 1) {
                ssize_t k = recv(fd, buf + got, size - 1 - got, 0);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return got > 0 ? (ssize_t) got : -errno;
                if (k == 0)
                        break;
                got += (size_t) k;
                buf[got] = '\0';
                if (strstr(buf, "\r\n\r\n") || strstr(buf, "\n\n"))
                        break;
        }
        return (ssize_t) got;
}

static void serve_http(const struct listener *l) {
        char request[REQUEST_MAX], body[512], response[1024];
        ssize_t n;
        int cfd, r, body_len, len;

        /*
         * The listening fd stays blocking: it is shared with prebind (and with
         * the next server after a restart), and O_NONBLOCK would change it for
         * all of them. poll() said a connection is queued, and Linux keeps
         * even a reset connection in the queue, so accept() does not block.
         */
        cfd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC);
        if (cfd < 0) {
                if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED)
                        log_msg("fd %d ('%s'): accept failed: %s", l->fd, l->name, strerror(errno));
                return;
        }
        set_timeouts(cfd, CLIENT_TIMEOUT_MS);

        n = read_request(cfd, request, sizeof(request));
        if (n <= 0) /* closed before asking anything, or timed out */
                goto out;

        body_len = snprintf(body, sizeof(body), "hello from prebind example: fd=%d name=%s pid=%d\n", l->fd, l->name,
                            (int) getpid());
        len = snprintf(response, sizeof(response),
                       "HTTP/1.0 200 OK\r\n"
                       "Content-Type: text/plain\r\n"
                       "Content-Length: %d\r\n"
                       "Connection: close\r\n"
                       "\r\n"
                       "%s",
                       body_len, body);
        r = send_all(cfd, response, (size_t) len);
        if (r < 0) {
                log_msg("fd %d ('%s'): cannot send the response: %s", l->fd, l->name, strerror(-r));
                goto out;
        }

        /*
         * Lingering close: closing with unread request bytes makes the kernel
         * send RST, which can destroy the response before the client reads it.
         * Send FIN, then drain briefly until the client closes its side.
         */
        if (shutdown(cfd, SHUT_WR) == 0) {
                set_timeouts(cfd, LINGER_TIMEOUT_MS);
                for (int i = 0; i < 16 && recv(cfd, request, sizeof(request), 0) > 0; i++)
                        ;
        }
out:
        close(cfd);
}

static void serve_datagram(const struct listener *l) {
        static char buf[65536];
        struct sockaddr_storage peer;
        socklen_t peer_len = sizeof(peer);
        const size_t prefix_len = strlen("echo:");
        ssize_t n;

        memcpy(buf, "echo:", prefix_len);
        n = recvfrom(l->fd, buf + prefix_len, sizeof(buf) - prefix_len, MSG_DONTWAIT, (struct sockaddr *) &peer,
                     &peer_len);
        if (n < 0) {
                if (errno != EINTR && errno != EAGAIN)
                        log_msg("fd %d ('%s'): recvfrom failed: %s", l->fd, l->name, strerror(errno));
                return;
        }
        /* An unbound AF_UNIX sender has no address to answer to. */
        if (peer_len <= offsetof(struct sockaddr_un, sun_path) && peer.ss_family == AF_UNIX)
                return;
        if (peer_len == 0)
                return;
        if (sendto(l->fd, buf, prefix_len + (size_t) n, MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *) &peer,
                   peer_len) < 0)
                log_msg("fd %d ('%s'): cannot echo: %s", l->fd, l->name, strerror(errno));
}

/* Returns the signal that ended the loop, or -errno. */
static int run_loop(const struct listener *ls, int n, int sfd, int notify_fd, int delay_fd) {
        /* poll slots: 0 signalfd, 1 notify timer, 2 delay timer, 3.. sockets */
        struct pollfd *pfd;
        int r;

        pfd = calloc((size_t) n + 3, sizeof(*pfd));
        if (!pfd)
                return -ENOMEM;
        pfd[0] = (struct pollfd) { .fd = sfd, .events = POLLIN };
        pfd[1] = (struct pollfd) { .fd = notify_fd, .events = POLLIN }; /* negative fds are ignored */
        pfd[2] = (struct pollfd) { .fd = delay_fd, .events = POLLIN };
        for (int i = 0; i < n; i++)
                /* While --delay-accept runs, sockets are not polled: clients wait in the backlog. */
                pfd[3 + i] = (struct pollfd) { .fd = delay_fd >= 0 ? -1 : ls[i].fd, .events = POLLIN };

        for (;;) {
                if (poll(pfd, (nfds_t) n + 3, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        r = -errno;
                        break;
                }
                if (pfd[0].revents & POLLIN) {
                        struct signalfd_siginfo si;
                        if (read(sfd, &si, sizeof(si)) == (ssize_t) sizeof(si)) {
                                r = (int) si.ssi_signo;
                                break;
                        }
                }
                if (pfd[1].revents & POLLIN) {
                        notify_ready();
                        pfd[1].fd = -1;
                }
                if (pfd[2].revents & POLLIN) {
                        pfd[2].fd = -1;
                        for (int i = 0; i < n; i++)
                                pfd[3 + i].fd = ls[i].fd;
                        continue;
                }
                for (int i = 0; i < n; i++) {
                        if (!(pfd[3 + i].revents & (POLLIN | POLLERR | POLLHUP)))
                                continue;
                        if (ls[i].type == SOCK_STREAM)
                                serve_http(&ls[i]);
                        else
                                serve_datagram(&ls[i]);
                }
        }
        free(pfd);
        return r;
}

static void free_options(struct options *o) {
        for (size_t i = 0; i < o->n_expect; i++)
                free(o->expect[i].name);
        free(o->expect);
}

/* Returns the exit status; every path below parse_argv() goes through the cleanup at the end. */
static int run(int argc, char *argv[]) {
        struct options o = { .notify_after = -1 };
        struct listener *ls = NULL;
        char **names = NULL;
        int n = 0, r, ret = EXIT_FAILURE, sfd = -1, notify_fd = -1, delay_fd = -1;
        sigset_t mask;

        r = parse_argv(argc, argv, &o);
        if (r <= 0) {
                ret = r == 0 ? EXIT_SUCCESS : r == -ENOMEM ? EXIT_FAILURE : EXIT_USAGE;
                goto out;
        }

        n = take_listeners(&o, &ls, &names);
        if (n < 0) {
                ret = n == -ENOMEM ? EXIT_FAILURE : EXIT_USAGE;
                goto out;
        }

        /* SIGTERM/SIGINT through a signalfd: handled in the poll loop, nothing runs in a handler. */
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0 || (sfd = signalfd(-1, &mask, SFD_CLOEXEC)) < 0) {
                log_msg("cannot set up signal handling: %s", strerror(errno));
                goto out;
        }

        if (o.notify_after == 0)
                notify_ready();
        else if (o.notify_after > 0 && (notify_fd = arm_timer(o.notify_after)) < 0) {
                log_msg("cannot create timer: %s", strerror(-notify_fd));
                goto out;
        }
        if (o.delay_accept > 0 && (delay_fd = arm_timer(o.delay_accept)) < 0) {
                log_msg("cannot create timer: %s", strerror(-delay_fd));
                goto out;
        }

        for (int i = 0; i < n; i++)
                log_msg("serving fd=%d name=%s type=%s family=%s", ls[i].fd, ls[i].name, type_to_string(ls[i].type),
                        family_to_string(socket_option(ls[i].fd, SO_DOMAIN)));

        r = run_loop(ls, n, sfd, notify_fd, delay_fd);
        if (r < 0) {
                log_msg("poll failed: %s", strerror(-r));
                goto out;
        }
        log_msg("received %s, exiting", r == SIGTERM ? "SIGTERM" : "SIGINT");
        ret = EXIT_SUCCESS;
out:
        if (delay_fd >= 0)
                close(delay_fd);
        if (notify_fd >= 0)
                close(notify_fd);
        if (sfd >= 0)
                close(sfd);
        for (int i = 0; ls && i < n; i++)
                close(ls[i].fd);
        free(ls);
        free_strv(names);
        free_options(&o);
        return ret;
}

int main(int argc, char *argv[]) {
        return run(argc, argv);
}
