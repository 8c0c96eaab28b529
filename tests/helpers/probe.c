/*
 * probe: the COMMAND of prebind's integration tests. It reports, as one line
 * of JSON, what it inherited from whoever executed it: pids, open fds (with
 * FD_CLOEXEC, kind, listening state), the socket-activation environment, the
 * blocked and ignored signal masks, and its argv. Then it may sleep, log the
 * signals it receives, and exit with a chosen status.
 *
 * Usage: probe [--sleep SECONDS] [--exit N] [--env NAME]... [--signal-log FILE] [--] [ARG]...
 *
 * Output goes to stdout, or to $PROBE_OUT (written to a temporary file in the
 * same directory, then renamed, so a reader never sees half a line).
 * Exit status: N from --exit (default 0); 2 on bad usage; 1 when the report
 * cannot be written.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define EXIT_USAGE 2

/* Variables always reported, set or not: the socket-activation protocol. */
static const char *const protocol_env[] = {
        "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "LISTEN_PIDFDID", "NOTIFY_SOCKET",
};

struct fd_info {
        int fd;
        bool cloexec;
        const char *type; /* sock-stream|sock-dgram|pipe|file|chr|other */
        bool listening;
        const char *family;     /* ipv4|ipv6|unix|other, NULL if not a socket */
        char address[PATH_MAX]; /* local address of a socket, "" if none */
        int port;               /* -1 unless ipv4/ipv6 */
        char target[PATH_MAX];  /* readlink of /proc/self/fd/N */
};

struct options {
        double sleep_sec;
        int exit_code;
        const char *signal_log;
        const char **env;
        size_t n_env;
};

/* Read by the signal handler. */
static int signal_log_fd = -1;
static int exit_code_on_term;

static void die(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));

static void die(int status, const char *fmt, ...) {
        va_list ap;

        fputs("probe: ", stderr);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
        exit(status);
}

static void parse_argv(int argc, char *argv[], struct options *o) {
        enum { ARG_SLEEP = 0x100, ARG_EXIT, ARG_ENV, ARG_SIGNAL_LOG };
        static const struct option long_options[] = {
                { "sleep", required_argument, NULL, ARG_SLEEP },
                { "exit", required_argument, NULL, ARG_EXIT },
                { "env", required_argument, NULL, ARG_ENV },
                { "signal-log", required_argument, NULL, ARG_SIGNAL_LOG },
                { NULL, 0, NULL, 0 },
        };
        char *end;
        long l;
        int c;

        o->env = calloc((size_t) argc, sizeof(*o->env));
        if (!o->env)
                die(EXIT_FAILURE, "out of memory");

        /* '+': stop at the first non-option, so that ARGs (e.g. prebind --subst output) are only reported. */
        while ((c = getopt_long(argc, argv, "+", long_options, NULL)) >= 0) {
                switch (c) {
                case ARG_SLEEP:
                        errno = 0;
                        o->sleep_sec = strtod(optarg, &end);
                        if (errno != 0 || end == optarg || *end != '\0' || !isfinite(o->sleep_sec) ||
                            o->sleep_sec < 0 || o->sleep_sec > 86400)
                                die(EXIT_USAGE, "invalid --sleep '%s': want seconds, 0..86400", optarg);
                        break;
                case ARG_EXIT:
                        errno = 0;
                        l = strtol(optarg, &end, 10);
                        if (errno != 0 || end == optarg || *end != '\0' || l < 0 || l > 255)
                                die(EXIT_USAGE, "invalid --exit '%s': want 0..255", optarg);
                        o->exit_code = (int) l;
                        break;
                case ARG_ENV:
                        if (optarg[0] == '\0' || strchr(optarg, '='))
                                die(EXIT_USAGE, "invalid --env '%s': want a variable name", optarg);
                        o->env[o->n_env++] = optarg;
                        break;
                case ARG_SIGNAL_LOG:
                        o->signal_log = optarg;
                        break;
                default:
                        die(EXIT_USAGE, "usage: probe [--sleep SECONDS] [--exit N] [--env NAME]... "
                                        "[--signal-log FILE] [--] [ARG]...");
                }
        }
}

static int compare_int(const void *a, const void *b) {
        int x = *(const int *) a, y = *(const int *) b;
        return (x > y) - (x < y);
}

/* All open fds but the one used to list them, ascending. Opens nothing that survives. */
static int *list_fds(size_t *ret_n) {
        struct dirent *de;
        size_t n = 0, size = 16;
        int *fds = malloc(size * sizeof(*fds));
        DIR *d;

        if (!fds)
                die(EXIT_FAILURE, "out of memory");
        d = opendir("/proc/self/fd");
        if (!d)
                die(EXIT_FAILURE, "cannot open /proc/self/fd: %s", strerror(errno));
        while ((de = readdir(d))) {
                char *end;
                long fd = strtol(de->d_name, &end, 10);

                if (de->d_name[0] < '0' || de->d_name[0] > '9' || *end != '\0' || fd == dirfd(d))
                        continue;
                if (n == size) {
                        size *= 2;
                        fds = realloc(fds, size * sizeof(*fds));
                        if (!fds)
                                die(EXIT_FAILURE, "out of memory");
                }
                fds[n++] = (int) fd;
        }
        closedir(d);
        qsort(fds, n, sizeof(*fds), compare_int);
        *ret_n = n;
        return fds;
}

static int socket_int_option(int fd, int option) {
        int v = -1;
        socklen_t len = sizeof(v);

        if (getsockopt(fd, SOL_SOCKET, option, &v, &len) < 0)
                return -1;
        return v;
}

static void inspect_socket(struct fd_info *fi) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        int type = socket_int_option(fi->fd, SO_TYPE);

        fi->type = type == SOCK_STREAM ? "sock-stream" : type == SOCK_DGRAM ? "sock-dgram" : "other";
        fi->listening = socket_int_option(fi->fd, SO_ACCEPTCONN) == 1;

        memset(&ss, 0, sizeof(ss));
        if (getsockname(fi->fd, (struct sockaddr *) &ss, &len) < 0) {
                fi->family = "other";
                return;
        }
        switch (ss.ss_family) {
        case AF_INET: {
                const struct sockaddr_in *sin = (const struct sockaddr_in *) &ss;
                fi->family = "ipv4";
                inet_ntop(AF_INET, &sin->sin_addr, fi->address, sizeof(fi->address));
                fi->port = ntohs(sin->sin_port);
                break;
        }
        case AF_INET6: {
                const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *) &ss;
                fi->family = "ipv6";
                inet_ntop(AF_INET6, &sin6->sin6_addr, fi->address, sizeof(fi->address));
                fi->port = ntohs(sin6->sin6_port);
                break;
        }
        case AF_UNIX: {
                const struct sockaddr_un *sun = (const struct sockaddr_un *) &ss;
                size_t path_len = len > offsetof(struct sockaddr_un, sun_path)
                                          ? len - offsetof(struct sockaddr_un, sun_path)
                                          : 0;
                fi->family = "unix";
                if (path_len > 0 && sun->sun_path[0] == '\0') /* abstract: shown as @name */
                        snprintf(fi->address, sizeof(fi->address), "@%.*s", (int) (path_len - 1), sun->sun_path + 1);
                else if (path_len > 0)
                        snprintf(fi->address, sizeof(fi->address), "%.*s", (int) strnlen(sun->sun_path, path_len),
                                 sun->sun_path);
                break;
        }
        default:
                fi->family = "other";
        }
}

static void inspect_fd(int fd, struct fd_info *fi) {
        char link[64];
        struct stat st;
        ssize_t k;
        int flags;

        memset(fi, 0, sizeof(*fi));
        fi->fd = fd;
        fi->port = -1;
        flags = fcntl(fd, F_GETFD);
        fi->cloexec = flags >= 0 && (flags & FD_CLOEXEC);

        snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
        k = readlink(link, fi->target, sizeof(fi->target) - 1);
        fi->target[k > 0 ? k : 0] = '\0';

        if (fstat(fd, &st) < 0)
                fi->type = "other";
        else if (S_ISSOCK(st.st_mode))
                inspect_socket(fi);
        else if (S_ISFIFO(st.st_mode))
                fi->type = "pipe";
        else if (S_ISCHR(st.st_mode))
                fi->type = "chr";
        else if (S_ISREG(st.st_mode) && strncmp(fi->target, "anon_inode:", strlen("anon_inode:")) != 0)
                fi->type = "file";
        else
                fi->type = "other"; /* directories, eventfd, pidfd, signalfd, ... */
}

/* The value of "KEY:\t..." in /proc/self/status (SigBlk, SigIgn), or "" if missing. */
static void read_status_field(const char *status, const char *key, char *ret, size_t size) {
        size_t key_len = strlen(key);
        const char *p = status;

        ret[0] = '\0';
        while (p && *p) {
                if (strncmp(p, key, key_len) == 0 && p[key_len] == ':') {
                        p += key_len + 1;
                        p += strspn(p, " \t");
                        snprintf(ret, size, "%.*s", (int) strcspn(p, "\n"), p);
                        return;
                }
                p = strchr(p, '\n');
                if (p)
                        p++;
        }
}

static void read_status(char *ret_sigblk, char *ret_sigign, size_t size) {
        char buf[16384];
        size_t got = 0;
        ssize_t k;
        int fd;

        fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                die(EXIT_FAILURE, "cannot open /proc/self/status: %s", strerror(errno));
        while (got < sizeof(buf) - 1 &&
               ((k = read(fd, buf + got, sizeof(buf) - 1 - got)) > 0 || (k < 0 && errno == EINTR)))
                if (k > 0)
                        got += (size_t) k;
        buf[got] = '\0';
        close(fd);
        read_status_field(buf, "SigBlk", ret_sigblk, size);
        read_status_field(buf, "SigIgn", ret_sigign, size);
}

static void json_string(FILE *f, const char *s) {
        if (!s) {
                fputs("null", f);
                return;
        }
        fputc('"', f);
        for (const unsigned char *p = (const unsigned char *) s; *p; p++) {
                if (*p == '"' || *p == '\\')
                        fprintf(f, "\\%c", *p);
                else if (*p == '\n')
                        fputs("\\n", f);
                else if (*p == '\t')
                        fputs("\\t", f);
                else if (*p < 0x20 || *p == 0x7f)
                        fprintf(f, "\\u%04x", *p);
                else
                        fputc(*p, f);
        }
        fputc('"', f);
}

static void json_env(FILE *f, const char *name, bool first) {
        if (!first)
                fputc(',', f);
        json_string(f, name);
        fputc(':', f);
        json_string(f, getenv(name));
}

static char *build_report(int argc, char *argv[], const struct options *o, const struct fd_info *fis, size_t n_fds,
                          const char *sigblk, const char *sigign) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);

        if (!f)
                die(EXIT_FAILURE, "out of memory");

        fprintf(f, "{\"pid\":%d,\"ppid\":%d,\"pgid\":%d,\"sid\":%d,\"fds\":[", (int) getpid(), (int) getppid(),
                (int) getpgrp(), (int) getsid(0));
        for (size_t i = 0; i < n_fds; i++) {
                const struct fd_info *fi = &fis[i];

                fprintf(f, "%s{\"fd\":%d,\"cloexec\":%s,\"type\":\"%s\",\"listening\":%s,\"family\":", i ? "," : "",
                        fi->fd, fi->cloexec ? "true" : "false", fi->type, fi->listening ? "true" : "false");
                json_string(f, fi->family);
                fputs(",\"address\":", f);
                json_string(f, fi->family && fi->address[0] ? fi->address : NULL);
                if (fi->port >= 0)
                        fprintf(f, ",\"port\":%d", fi->port);
                else
                        fputs(",\"port\":null", f);
                fputs(",\"target\":", f);
                json_string(f, fi->target);
                fputc('}', f);
        }
        fputs("],\"env\":{", f);
        for (size_t i = 0; i < sizeof(protocol_env) / sizeof(protocol_env[0]); i++)
                json_env(f, protocol_env[i], i == 0);
        for (size_t i = 0; i < o->n_env; i++) {
                bool seen = false;
                for (size_t j = 0; j < sizeof(protocol_env) / sizeof(protocol_env[0]); j++)
                        seen = seen || strcmp(o->env[i], protocol_env[j]) == 0;
                for (size_t j = 0; j < i; j++)
                        seen = seen || strcmp(o->env[i], o->env[j]) == 0;
                if (!seen)
                        json_env(f, o->env[i], false);
        }
        fputs("},\"sigblk\":", f);
        json_string(f, sigblk);
        fputs(",\"sigign\":", f);
        json_string(f, sigign);
        fputs(",\"argv\":[", f);
        for (int i = 0; i < argc; i++) {
                if (i)
                        fputc(',', f);
                json_string(f, argv[i]);
        }
        fputs("]}\n", f);
        if (fclose(f) != 0)
                die(EXIT_FAILURE, "out of memory");
        return buf;
}

static int write_all(int fd, const char *buf, size_t len) {
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

/* PATH.XXXXXX in the same directory, then rename(2): readers see the whole line or nothing. */
static void write_report_file(const char *path, const char *report) {
        char *tmp;
        int fd, r;

        if (asprintf(&tmp, "%s.XXXXXX", path) < 0)
                die(EXIT_FAILURE, "out of memory");
        fd = mkostemp(tmp, O_CLOEXEC);
        if (fd < 0)
                die(EXIT_FAILURE, "cannot create '%s': %s", tmp, strerror(errno));
        r = write_all(fd, report, strlen(report));
        if (r == 0 && fchmod(fd, 0644) < 0)
                r = -errno;
        if (close(fd) < 0 && r == 0)
                r = -errno;
        if (r == 0 && rename(tmp, path) < 0)
                r = -errno;
        if (r < 0) {
                unlink(tmp);
                die(EXIT_FAILURE, "cannot write '%s': %s", path, strerror(-r));
        }
        free(tmp);
}

/* Async-signal-safe: formats the number by hand and logs it with one write(2) (O_APPEND: lines never mix). */
static void on_signal(int sig, siginfo_t *si, void *ucontext) {
        int saved_errno = errno;
        char buf[16], *p = buf + sizeof(buf);
        ssize_t k;

        (void) ucontext;
        /* A real fault (not a kill()) must not loop on the faulting instruction: let it kill us. */
        if ((sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE) && si->si_code > 0) {
                signal(sig, SIG_DFL);
                return;
        }
        *--p = '\n';
        for (unsigned v = (unsigned) sig; v > 0; v /= 10)
                *--p = (char) ('0' + v % 10);
        k = write(signal_log_fd, p, (size_t) (buf + sizeof(buf) - p));
        (void) k;
        if (sig == SIGTERM)
                _exit(exit_code_on_term);
        errno = saved_errno;
}

static void install_signal_log(const char *path, int exit_code) {
        struct sigaction sa;

        signal_log_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (signal_log_fd < 0)
                die(EXIT_FAILURE, "cannot open '%s': %s", path, strerror(errno));
        exit_code_on_term = exit_code;

        memset(&sa, 0, sizeof(sa));
        sa.sa_sigaction = on_signal;
        sa.sa_flags = SA_SIGINFO;
        sigfillset(&sa.sa_mask); /* one handler at a time: lines stay in arrival order */
        for (int sig = 1; sig <= SIGRTMIN + 2; sig++) {
                if (sig == SIGKILL || sig == SIGSTOP || (sig > 31 && sig < SIGRTMIN))
                        continue; /* uncatchable, or reserved by glibc (32, 33) */
                if (sigaction(sig, &sa, NULL) < 0)
                        die(EXIT_FAILURE, "cannot catch signal %d: %s", sig, strerror(errno));
        }
}

/* Sleep SECONDS on CLOCK_MONOTONIC, across signal handlers; 0 = forever (wait for SIGTERM). */
static void sleep_for(double seconds, bool forever) {
        struct timespec deadline;

        if (forever) {
                for (;;)
                        pause();
        }
        clock_gettime(CLOCK_MONOTONIC, &deadline);
        deadline.tv_sec += (time_t) seconds;
        deadline.tv_nsec += (long) ((seconds - (double) (time_t) seconds) * 1e9);
        if (deadline.tv_nsec >= 1000000000L) {
                deadline.tv_sec++;
                deadline.tv_nsec -= 1000000000L;
        }
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, NULL) == EINTR)
                ;
}

int main(int argc, char *argv[]) {
        struct options o = { .sleep_sec = 0, .exit_code = 0 };
        char sigblk[64], sigign[64], *report;
        struct fd_info *fis;
        const char *out;
        size_t n_fds;
        int *fds, r;

        parse_argv(argc, argv, &o);

        /* Look before touching anything: listing fds first, then the masks, then the handlers. */
        fds = list_fds(&n_fds);
        fis = calloc(n_fds ? n_fds : 1, sizeof(*fis));
        if (!fis)
                die(EXIT_FAILURE, "out of memory");
        for (size_t i = 0; i < n_fds; i++)
                inspect_fd(fds[i], &fis[i]);
        read_status(sigblk, sigign, sizeof(sigblk));
        report = build_report(argc, argv, &o, fis, n_fds, sigblk, sigign);
        free(fis);
        free(fds);

        /* Handlers go in before the report is out: a test that signals us once it has read it must be logged. */
        if (o.signal_log)
                install_signal_log(o.signal_log, o.exit_code);

        out = getenv("PROBE_OUT");
        if (out && out[0])
                write_report_file(out, report);
        else if ((r = write_all(STDOUT_FILENO, report, strlen(report))) < 0)
                die(EXIT_FAILURE, "cannot write the report: %s", strerror(-r));
        free(report);

        /* --signal-log: run until SIGTERM (exit N from the handler); --sleep then bounds the wait. */
        if (o.signal_log || o.sleep_sec > 0)
                sleep_for(o.sleep_sec, o.signal_log && o.sleep_sec == 0);
        free(o.env);
        return o.exit_code;
}
