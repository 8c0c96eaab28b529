/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fd.h"
#include "netns.h"
#include "process.h"
#include "signals.h"

/* What the keeper says once it is set up, and what it answers per socket. */
struct keeper_report {
        int32_t err;  /* positive errno, 0 */
        int32_t step; /* enum netns_step */
};

struct keeper_request {
        int32_t family;
        int32_t type;
};

static int send_with_fds(int sock, const void *data, size_t len, const int *fds, size_t n_fds) {
        return fd_send_message(sock, data, len, fds, n_fds, 0);
}

/* Receive one message of exactly len bytes and up to max_fds fds (set
 * close-on-exec). Returns the number of fds, or -errno (-ECONNRESET: the
 * other end is gone). */
static int recv_with_fds(int sock, void *data, size_t len, int *fds, size_t max_fds) {
        size_t k;
        int n = fd_recv_message(sock, data, len, fds, max_fds, &k);

        if (n >= 0 && k != len) {
                for (int i = 0; i < n; i++)
                        close(fds[i]);
                return k == 0 ? -ECONNRESET : -EBADMSG;
        }
        return n;
}

static int write_file(const char *path, const char *text) {
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        ssize_t len = (ssize_t) strlen(text), k;

        if (fd < 0)
                return -errno;
        k = write(fd, text, (size_t) len);
        k = k == len ? 0 : k < 0 ? -errno : -EIO;
        close(fd);
        return (int) k;
}

/* Map the caller's own uid and gid to themselves: COMMAND runs as the
 * same user, inside as outside (user_namespaces(7): an unprivileged
 * process may map its own ids, after setgroups is denied). */
static int map_ids(uid_t uid, gid_t gid) {
        char line[64];
        int r;

        snprintf(line, sizeof line, "%u %u 1\n", (unsigned) uid, (unsigned) uid);
        r = write_file("/proc/self/uid_map", line);
        if (r < 0)
                return r;
        r = write_file("/proc/self/setgroups", "deny");
        if (r < 0 && r != -ENOENT)
                return r;
        snprintf(line, sizeof line, "%u %u 1\n", (unsigned) gid, (unsigned) gid);
        return write_file("/proc/self/gid_map", line);
}

static int loopback_up(void) {
        struct ifreq ifr = { 0 };
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), r = 0;

        if (fd < 0)
                return -errno;
        strcpy(ifr.ifr_name, "lo");
        if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
                r = -errno;
        else {
                ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
                if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
                        r = -errno;
        }
        close(fd);
        return r;
}

static void keeper_fail(int sock, enum netns_step step, int r) {
        struct keeper_report report = { .err = -r, .step = step };

        (void) send_with_fds(sock, &report, sizeof report, NULL, 0);
        _exit(1);
}

/* The keeper: set up, report, then make sockets until prebind hangs up. */
static void __attribute__((noreturn)) keeper_main(int sock, pid_t parent) {
        struct keeper_report report = { 0 };
        int fds[2], n_fds = 1, r;
        uid_t uid = geteuid();
        gid_t gid = getegid();

        /* prebind blocks every signal (it reads them from a signalfd): the
         * keeper takes the defaults, and dies with prebind. */
        signals_reset(true);
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
                _exit(1);
        /* Nothing of prebind's stays open here: not its sockets (clients
         * would not see them close), not its stdout (a reader would wait
         * for the keeper's exit to see EOF), and above all not prebind's
         * end of the control socket (the keeper would never see EOF). */
        if (sock > 0)
                (void) fd_range(0, (unsigned) sock - 1, FD_CLOSE);
        (void) fd_range((unsigned) sock + 1, ~0U, FD_CLOSE);

        /* Root makes a network namespace only. Without CAP_SYS_ADMIN (not
         * root, or root in a container), a user namespace as well, which
         * then owns the network namespace. */
        if (uid != 0 || unshare(CLONE_NEWNET) < 0) {
                if (unshare(CLONE_NEWUSER | CLONE_NEWNET) < 0)
                        keeper_fail(sock, uid == 0 ? NETNS_STEP_UNSHARE_NET : NETNS_STEP_UNSHARE_USER, -errno);
                r = map_ids(uid, gid);
                if (r < 0)
                        keeper_fail(sock, NETNS_STEP_ID_MAP, r);
                n_fds = 2;
        }
        r = loopback_up();
        if (r < 0)
                keeper_fail(sock, NETNS_STEP_LOOPBACK, r);
        fds[0] = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        if (n_fds == 2)
                fds[1] = open("/proc/self/ns/user", O_RDONLY | O_CLOEXEC);
        if (fds[0] < 0 || (n_fds == 2 && fds[1] < 0))
                keeper_fail(sock, NETNS_STEP_REPORT, -errno);
        if (send_with_fds(sock, &report, sizeof report, fds, (size_t) n_fds) < 0)
                _exit(1);
        close(fds[0]);
        if (n_fds == 2)
                close(fds[1]);

        for (;;) {
                struct keeper_request req;
                struct keeper_report answer = { 0 };
                ssize_t k = recv(sock, &req, sizeof req, 0);
                int fd;

                if (k < 0 && errno == EINTR)
                        continue;
                if (k != sizeof req)
                        _exit(0);
                fd = socket(req.family, req.type | SOCK_CLOEXEC, 0);
                answer.err = fd < 0 ? errno : 0;
                (void) send_with_fds(sock, &answer, sizeof answer, &fd, fd < 0 ? 0 : 1);
                if (fd >= 0)
                        close(fd);
        }
}

int netns_open(struct netns *ret, enum netns_step *ret_step) {
        struct netns n = NETNS_INIT;
        struct keeper_report report;
        int pair[2], fds[2], r;
        pid_t parent = getpid();

        *ret_step = NETNS_STEP_NONE;
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
                return -errno;
        n.pid = fork();
        if (n.pid < 0) {
                r = -errno;
                close(pair[0]);
                close(pair[1]);
                return r;
        }
        if (n.pid == 0)
                keeper_main(pair[1], parent);
        close(pair[1]);
        n.control_fd = pair[0];
        n.pidfd = open_pidfd(n.pid);

        r = recv_with_fds(n.control_fd, &report, sizeof report, fds, 2);
        if (r < 0) {
                *ret_step = NETNS_STEP_REPORT;
                netns_close(&n);
                return r == -ECONNRESET ? -ECHILD : r;
        }
        if (report.err != 0 || r < 1) {
                for (int i = 0; i < r; i++)
                        close(fds[i]);
                *ret_step = report.err ? (enum netns_step) report.step : NETNS_STEP_REPORT;
                netns_close(&n);
                return report.err ? -report.err : -EBADMSG;
        }
        n.net_fd = fds[0];
        n.user_fd = r > 1 ? fds[1] : -1;
        *ret = n;
        return 0;
}

void netns_close(struct netns *n) {
        if (n->control_fd >= 0)
                close(n->control_fd);
        if (n->pid > 0) {
                /* The keeper exits on EOF; SIGKILL makes sure, as it holds
                 * nothing worth a clean exit. Through the pidfd, a keeper
                 * that prebind's reaper collected already (its pid may be
                 * reused) is neither signalled (ESRCH) nor waited for
                 * (ECHILD). */
                if (n->pidfd >= 0) {
                        siginfo_t info;

                        (void) syscall(SYS_pidfd_send_signal, n->pidfd, SIGKILL, NULL, 0U);
                        while (waitid((idtype_t) P_PIDFD, (id_t) n->pidfd, &info, WEXITED) < 0 && errno == EINTR)
                                ;
                } else
                        (void) waitpid(n->pid, NULL, 0);
        }
        if (n->pidfd >= 0)
                close(n->pidfd);
        if (n->net_fd >= 0)
                close(n->net_fd);
        if (n->user_fd >= 0)
                close(n->user_fd);
        *n = (struct netns) NETNS_INIT;
}

int netns_socket(const struct netns *n, int family, int type, int *ret_fd) {
        struct keeper_request req = { .family = family, .type = type & ~SOCK_CLOEXEC };
        struct keeper_report answer;
        int fd = -1, r;

        if (n->control_fd < 0)
                return -ECONNRESET;
        r = send_with_fds(n->control_fd, &req, sizeof req, NULL, 0);
        if (r < 0)
                return r == -EPIPE ? -ECONNRESET : r;
        r = recv_with_fds(n->control_fd, &answer, sizeof answer, &fd, 1);
        if (r < 0)
                return r;
        if (answer.err != 0 || r != 1) {
                if (r == 1)
                        close(fd);
                return answer.err ? -answer.err : -EBADMSG;
        }
        *ret_fd = fd;
        return 0;
}

int netns_enter(int net_fd, int user_fd) {
        if (user_fd >= 0 && setns(user_fd, CLONE_NEWUSER) < 0)
                return -errno;
        if (setns(net_fd, CLONE_NEWNET) < 0)
                return -errno;
        return 0;
}

/* The value of a sysctl as a number, or -1 if it is not there. */
static long read_sysctl(const char *dir, const char *name) {
        char path[512], buf[32], *end;
        ssize_t k;
        long v;
        int fd;

        snprintf(path, sizeof path, "%s/%s", dir, name);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -1;
        k = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (k <= 0)
                return -1;
        buf[k] = '\0';
        errno = 0;
        v = strtol(buf, &end, 10);
        return errno == 0 && end != buf && (*end == '\n' || *end == '\0') ? v : -1;
}

static const char *step_name(enum netns_step step) {
        switch (step) {
        case NETNS_STEP_UNSHARE_NET:
                return "unshare(CLONE_NEWNET)";
        case NETNS_STEP_UNSHARE_USER:
                return "unshare(CLONE_NEWUSER|CLONE_NEWNET)";
        case NETNS_STEP_ID_MAP:
                return "mapping the user in a user namespace";
        case NETNS_STEP_LOOPBACK:
                return "bringing the loopback up";
        default:
                return "starting its keeper";
        }
}

const char *netns_explain(enum netns_step step, int err, bool privileged, const char *sysctl_dir, char *buf,
                          size_t size) {
        const char *why = NULL;
        bool denied;

        if (err < 0)
                err = -err;
        denied = err == EPERM || err == EACCES || err == ENOSPC || err == EUSERS || err == EINVAL;
        if (denied && step != NETNS_STEP_REPORT) {
                if (read_sysctl(sysctl_dir, "user/max_user_namespaces") == 0)
                        why = "user namespaces are disabled (sysctl user.max_user_namespaces=0)";
                else if (!privileged && read_sysctl(sysctl_dir, "kernel/unprivileged_userns_clone") == 0)
                        why = "unprivileged user namespaces are disabled (sysctl kernel.unprivileged_userns_clone=0)";
                else if (!privileged && read_sysctl(sysctl_dir, "kernel/apparmor_restrict_unprivileged_userns") == 1)
                        why = "AppArmor restricts unprivileged user namespaces "
                              "(sysctl kernel.apparmor_restrict_unprivileged_userns=1)";
                else if (err == ENOSPC || err == EUSERS)
                        why = "the limit of user namespaces is reached (sysctl user.max_user_namespaces)";
                else if (step == NETNS_STEP_UNSHARE_NET || step == NETNS_STEP_UNSHARE_USER)
                        why = privileged ? "not permitted here (no CAP_SYS_ADMIN, as in a container, or a seccomp "
                                           "filter)"
                                         : "not permitted here (a seccomp filter or a security module)";
        }
        snprintf(buf, size, "cannot create a network namespace (--netns): %s: %s%s%s", step_name(step), strerror(err),
                 why ? ": " : "", why ? why : "");
        return buf;
}
