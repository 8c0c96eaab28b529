/* SPDX-License-Identifier: MIT */
/* Load for bench/forward_rate: a server and the clients that measure a
 * forwarder between them.
 *
 *   forward_load serve PORT              listen on 0.0.0.0:PORT; a thread
 *                                        per connection
 *   forward_load down PORT BYTES N       N connections at once each receive
 *                                        BYTES/N bytes; prints seconds
 *   forward_load up PORT BYTES N         the same, sending
 *   forward_load connect PORT COUNT      COUNT connections one after the
 *                                        other: connect, 1 byte there and
 *                                        back, close; prints the median and
 *                                        p99 in microseconds
 *   forward_load pingpong PORT COUNT     one connection, COUNT 1-byte round
 *                                        trips; median and p99
 *
 * A connection starts with one byte: 'D' (then 8 bytes: how many to
 * send), 'U' (then 8 bytes: how many to read; answer the count read in
 * 8 bytes) or 'P' (echo
 * each byte). Every client is bounded by SO_RCVTIMEO/SO_SNDTIMEO. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define CHUNK (256 * 1024)

static double now(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static int read_full(int fd, void *buf, size_t len) {
        for (size_t got = 0; got < len;) {
                ssize_t k = read(fd, (char *) buf + got, len - got);
                if (k <= 0)
                        return -1;
                got += (size_t) k;
        }
        return 0;
}

static int write_full(int fd, const void *buf, size_t len) {
        for (size_t put = 0; put < len;) {
                ssize_t k = write(fd, (const char *) buf + put, len - put);
                if (k <= 0)
                        return -1;
                put += (size_t) k;
        }
        return 0;
}

static void *serve_one(void *arg) {
        int fd = (int) (intptr_t) arg;
        char *buf = malloc(CHUNK), cmd;
        uint64_t n = 0;

        if (!buf || read_full(fd, &cmd, 1) < 0)
                goto out;
        if (cmd == 'D') {
                if (read_full(fd, &n, sizeof n) < 0)
                        goto out;
                memset(buf, 'd', CHUNK);
                while (n > 0) {
                        size_t k = n < CHUNK ? (size_t) n : CHUNK;
                        if (write_full(fd, buf, k) < 0)
                                goto out;
                        n -= k;
                }
        } else if (cmd == 'U') {
                uint64_t want, got = 0;
                ssize_t k;

                if (read_full(fd, &want, sizeof want) < 0)
                        goto out;
                while (got < want && (k = read(fd, buf, CHUNK)) > 0)
                        got += (uint64_t) k;
                (void) write_full(fd, &got, sizeof got);
        } else if (cmd == 'P') {
                char c;
                while (read(fd, &c, 1) == 1 && write(fd, &c, 1) == 1)
                        ;
        }
out:
        free(buf);
        close(fd);
        return NULL;
}

static int serve(int port) {
        struct sockaddr_in6 sa = { .sin6_family = AF_INET6, .sin6_port = htons((uint16_t) port) };
        int one = 1, fd = socket(AF_INET6, SOCK_STREAM, 0);

        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (fd < 0 || bind(fd, (struct sockaddr *) &sa, sizeof sa) < 0 || listen(fd, 4096) < 0) {
                perror("forward_load: listen");
                return 1;
        }
        for (;;) {
                pthread_t t;
                int c = accept(fd, NULL, NULL);

                if (c < 0)
                        continue;
                setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                if (pthread_create(&t, NULL, serve_one, (void *) (intptr_t) c) != 0)
                        close(c);
                else
                        pthread_detach(t);
        }
}

static int dial(int port) {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t) port),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        struct timeval tv = { .tv_sec = 30 };
        int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0);

        if (fd < 0)
                return -1;
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (connect(fd, (struct sockaddr *) &sa, sizeof sa) < 0) {
                close(fd);
                return -1;
        }
        return fd;
}

struct stream {
        int port;
        uint64_t bytes;
        int up;
        int failed;
};

static void *stream_run(void *arg) {
        struct stream *s = arg;
        char *buf = malloc(CHUNK);
        int fd = dial(s->port);
        uint64_t n = s->bytes, got = 0;

        s->failed = 1;
        if (fd < 0 || !buf)
                goto out;
        if (!s->up) {
                ssize_t k;
                if (write_full(fd, "D", 1) < 0 || write_full(fd, &n, sizeof n) < 0)
                        goto out;
                while ((k = read(fd, buf, CHUNK)) > 0)
                        got += (uint64_t) k;
                s->failed = got != n;
        } else {
                memset(buf, 'u', CHUNK);
                /* The size first, not a half-close at the end:
                 * systemd-socket-proxyd does not pass half-closes on. */
                if (write_full(fd, "U", 1) < 0 || write_full(fd, &n, sizeof n) < 0)
                        goto out;
                while (n > 0) {
                        size_t k = n < CHUNK ? (size_t) n : CHUNK;
                        if (write_full(fd, buf, k) < 0)
                                goto out;
                        n -= k;
                }
                s->failed = read_full(fd, &got, sizeof got) < 0 || got != s->bytes;
        }
out:
        if (fd >= 0)
                close(fd);
        free(buf);
        return NULL;
}

static int transfer(int port, uint64_t bytes, int n, int up) {
        pthread_t t[64];
        struct stream s[64];
        double start = now();
        int failed = 0;

        if (n < 1 || n > 64)
                return 2;
        for (int i = 0; i < n; i++) {
                s[i] = (struct stream) { .port = port, .bytes = bytes / (uint64_t) n, .up = up };
                pthread_create(&t[i], NULL, stream_run, &s[i]);
        }
        for (int i = 0; i < n; i++) {
                pthread_join(t[i], NULL);
                failed += s[i].failed;
        }
        printf("seconds=%.6f failed=%d\n", now() - start, failed);
        return failed ? 1 : 0;
}

static int cmp(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;
        return x < y ? -1 : x > y;
}

static void report(double *us, int n, int failed) {
        qsort(us, (size_t) n, sizeof *us, cmp);
        printf("median_us=%.1f p99_us=%.1f failed=%d\n", us[n / 2], us[(n * 99) / 100], failed);
}

static int connects(int port, int count) {
        double *us = calloc((size_t) count, sizeof *us);
        int failed = 0;

        for (int i = 0; i < count; i++) {
                double start = now();
                char c = 'x';
                int fd = dial(port);

                if (fd < 0 || write_full(fd, "Px", 2) < 0 || read_full(fd, &c, 1) < 0)
                        failed++;
                if (fd >= 0)
                        close(fd);
                us[i] = (now() - start) * 1e6;
        }
        report(us, count, failed);
        free(us);
        return failed ? 1 : 0;
}

static int pingpong(int port, int count) {
        double *us = calloc((size_t) count, sizeof *us);
        int failed = 0, fd = dial(port);

        if (fd < 0 || write_full(fd, "P", 1) < 0)
                return 1;
        for (int i = 0; i < count; i++) {
                double start = now();
                char c = 'p';

                if (write_full(fd, &c, 1) < 0 || read_full(fd, &c, 1) < 0)
                        failed++;
                us[i] = (now() - start) * 1e6;
        }
        close(fd);
        report(us, count, failed);
        free(us);
        return failed ? 1 : 0;
}

int main(int argc, char *argv[]) {
        if (argc == 3 && strcmp(argv[1], "serve") == 0)
                return serve(atoi(argv[2]));
        if (argc == 5 && (strcmp(argv[1], "down") == 0 || strcmp(argv[1], "up") == 0))
                return transfer(atoi(argv[2]), strtoull(argv[3], NULL, 10), atoi(argv[4]), argv[1][0] == 'u');
        if (argc == 4 && strcmp(argv[1], "connect") == 0)
                return connects(atoi(argv[2]), atoi(argv[3]));
        if (argc == 4 && strcmp(argv[1], "pingpong") == 0)
                return pingpong(atoi(argv[2]), atoi(argv[3]));
        fprintf(stderr, "usage: forward_load serve PORT | down|up PORT BYTES N | connect|pingpong PORT COUNT\n");
        return 2;
}
