/* SPDX-License-Identifier: MIT */
/* A connection-rate client for bench/accept_rate: W worker processes each
 * open N connections to 127.0.0.1:PORT one after the other, read each
 * until EOF and check the answer is not empty. Prints
 * "connections=… failed=… seconds=… per_second=…". Bounded by a deadline. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static int one_connection(int port) {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t) port) };
        struct timeval tv = { .tv_sec = 10 };
        char buf[256];
        ssize_t k, total = 0;
        int fd = socket(AF_INET, SOCK_STREAM, 0);

        if (fd < 0)
                return -1;
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        if (connect(fd, (struct sockaddr *) &sa, sizeof sa) < 0) {
                close(fd);
                return -1;
        }
        while ((k = read(fd, buf, sizeof buf)) > 0)
                total += k;
        close(fd);
        return k == 0 && total > 0 ? 0 : -1;
}

/* The ceiling: the same program started by fork+exec with nothing else
 * (stdout to /dev/null), "PORT" 0. */
static int one_spawn(char **prog) {
        int status;
        pid_t pid = fork();

        if (pid == 0) {
                freopen("/dev/null", "w", stdout);
                execv(prog[0], prog);
                _exit(127);
        }
        return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

static char **spawn_prog;

static int one(int port) {
        return port == 0 ? one_spawn(spawn_prog) : one_connection(port);
}

int main(int argc, char *argv[]) {
        int port, workers, per_worker, failed = 0;
        double deadline, t0;

        if (argc < 5) {
                fprintf(stderr, "usage: conn_client PORT WORKERS CONNECTIONS_PER_WORKER MAX_SECONDS [PROGRAM ARG...]\n"
                                "       (PORT 0: fork+exec PROGRAM instead of connecting)\n");
                return 2;
        }
        spawn_prog = argv + 5;
        port = atoi(argv[1]);
        workers = atoi(argv[2]);
        per_worker = atoi(argv[3]);
        t0 = now();
        deadline = t0 + atof(argv[4]);
        for (int w = 0; w < workers; w++)
                if (fork() == 0) {
                        int bad = 0, done = 0;
                        for (; done < per_worker && now() < deadline; done++)
                                bad += one(port) < 0;
                        /* Unfinished connections (deadline) count as failed. */
                        _exit(bad + (per_worker - done) > 255 ? 255 : bad + (per_worker - done));
                }
        for (int w = 0; w < workers; w++) {
                int status;
                if (wait(&status) > 0 && WIFEXITED(status))
                        failed += WEXITSTATUS(status);
        }
        double seconds = now() - t0;
        int total = workers * per_worker;
        printf("connections=%d failed=%d seconds=%.3f per_second=%.0f\n", total, failed, seconds,
               (total - failed) / seconds);
        return failed ? 1 : 0;
}
