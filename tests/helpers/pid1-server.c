/*
 * pid1-server: the server of the container test (tests/integration/
 * test_container.py), linked statically so that it runs in an empty root
 * next to prebind-static, with no loader, no libc.so, no /proc, no /dev.
 *
 * It takes one listening socket by socket activation (fd 3, LISTEN_PID
 * must be its own pid, LISTEN_FDS=1) and answers each HTTP request with
 * one line: "pid=P ppid=Q" (in its PID namespace: prebind as PID 1 makes
 * ppid=1). GET /orphan first leaves an orphan behind: a grandchild whose
 * parent exits at once, so it is re-parented to PID 1, and that exits
 * itself ORPHAN_LIFE_MS later: PID 1 must reap it. On SIGTERM it says so
 * on stderr and exits 0.
 *
 * Exit status: 0 on SIGTERM, 2 when the socket it got is not one
 * listening socket for it, 1 on any other failure.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ORPHAN_LIFE_MS 1000

static volatile sig_atomic_t terminated;

static void on_sigterm(int sig) {
        terminated = sig;
}

static int take_socket(void) {
        char self[32];
        const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
        int listening = 0;
        socklen_t len = sizeof listening;

        snprintf(self, sizeof self, "%d", (int) getpid());
        if (!pid || strcmp(pid, self) != 0 || !fds || strcmp(fds, "1") != 0) {
                fprintf(stderr, "pid1-server: expected LISTEN_PID=%s LISTEN_FDS=1, got %s %s\n", self,
                        pid ? pid : "(unset)", fds ? fds : "(unset)");
                return -1;
        }
        if (getsockopt(3, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) < 0 || !listening) {
                fprintf(stderr, "pid1-server: fd 3 is not a listening socket\n");
                return -1;
        }
        return 3;
}

/* A child that exits at once, leaving its own child to PID 1. The orphan
 * holds neither the socket nor the connection. */
static int leave_orphan(int conn) {
        pid_t child = fork();

        if (child < 0)
                return -1;
        if (child == 0) {
                pid_t grandchild = fork();

                if (grandchild == 0) {
                        struct timespec t = { .tv_sec = ORPHAN_LIFE_MS / 1000,
                                              .tv_nsec = (ORPHAN_LIFE_MS % 1000) * 1000000L };

                        close(3);
                        close(conn);
                        nanosleep(&t, NULL);
                }
                _exit(grandchild < 0 ? 1 : 0);
        }
        return waitpid(child, NULL, 0) == child ? 0 : -1;
}

static void serve(int conn) {
        char request[4096], body[128], response[512];
        ssize_t n = read(conn, request, sizeof request - 1);
        int len;

        if (n <= 0)
                return;
        request[n] = '\0';
        if (strncmp(request, "GET /orphan ", 12) == 0 && leave_orphan(conn) < 0)
                snprintf(body, sizeof body, "error: %s\n", strerror(errno));
        else
                snprintf(body, sizeof body, "pid=%d ppid=%d\n", (int) getpid(), (int) getppid());
        len = snprintf(response, sizeof response,
                       "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n\r\n%s", strlen(body),
                       body);
        if (write(conn, response, (size_t) len) != len)
                fprintf(stderr, "pid1-server: short write\n");
}

int main(void) {
        struct sigaction sa = { .sa_handler = on_sigterm };
        int fd = take_socket();

        if (fd < 0)
                return 2;
        /* No SA_RESTART: accept() returns EINTR on SIGTERM. */
        sigaction(SIGTERM, &sa, NULL);
        while (!terminated) {
                int conn = accept4(fd, NULL, NULL, SOCK_CLOEXEC);

                if (conn < 0) {
                        if (errno == EINTR)
                                continue;
                        perror("pid1-server: accept");
                        return 1;
                }
                serve(conn);
                close(conn);
        }
        fprintf(stderr, "pid1-server: SIGTERM, stopping\n");
        return 0;
}
