/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "address.h"
#include "claims.h"
#include "intercept/match.h"
#include "log.h"
#include "macro.h"
#include "process.h"
#include "seccomp.h"

/* The kernel's ABI (<linux/seccomp.h>, <linux/filter.h>, <linux/audit.h>),
 * spelled out: musl's include path, which builds prebind-static, has no
 * <linux/…> headers. These values are fixed by the kernel's ABI. */
#define SC_SET_MODE_FILTER 1
#define SC_GET_NOTIF_SIZES 3                 /* 5.0 */
#define SC_FLAG_SPEC_ALLOW (1U << 2)         /* 4.17 */
#define SC_FLAG_NEW_LISTENER (1U << 3)       /* 5.0 */
#define SC_FLAG_WAIT_KILLABLE_RECV (1U << 5) /* 5.19 */
#define SC_RET_ALLOW 0x7fff0000U
#define SC_RET_USER_NOTIF 0x7fc00000U
#define SC_NOTIF_FLAG_CONTINUE (1U << 0) /* 5.5 */
#define SC_ADDFD_FLAG_SETFD (1U << 0)    /* 5.9 */

struct sc_data {
        int32_t nr;
        uint32_t arch;
        uint64_t instruction_pointer;
        uint64_t args[6];
};

struct sc_notif {
        uint64_t id;
        uint32_t pid;
        uint32_t flags;
        struct sc_data data;
};

struct sc_notif_resp {
        uint64_t id;
        int64_t val;
        int32_t error;
        uint32_t flags;
};

struct sc_notif_addfd {
        uint64_t id;
        uint32_t flags;
        uint32_t srcfd;
        uint32_t newfd;
        uint32_t newfd_flags;
};

/* SECCOMP_IOCTL_NOTIF_*: _IOWR('!', 0, …), _IOWR('!', 1, …), _IOW('!',
 * 2, __u64), _IOW('!', 3, …) (the asm-generic encoding of x86, arm and
 * riscv). */
#define SC_IOC(dir, nr, size) (((unsigned long) (dir) << 30) | ((unsigned long) (size) << 16) | ('!' << 8) | (nr))
#define SC_IOCTL_NOTIF_RECV SC_IOC(3, 0, sizeof(struct sc_notif))
#define SC_IOCTL_NOTIF_SEND SC_IOC(3, 1, sizeof(struct sc_notif_resp))
#define SC_IOCTL_NOTIF_ID_VALID SC_IOC(1, 2, sizeof(uint64_t))
#define SC_IOCTL_NOTIF_ADDFD SC_IOC(1, 3, sizeof(struct sc_notif_addfd))

struct sc_sock_filter {
        uint16_t code;
        uint8_t jt;
        uint8_t jf;
        uint32_t k;
};

struct sc_sock_fprog {
        unsigned short len;
        struct sc_sock_filter *filter;
};

#define BPF_LD_W_ABS 0x20 /* BPF_LD | BPF_W | BPF_ABS */
#define BPF_JEQ_K 0x15    /* BPF_JMP | BPF_JEQ | BPF_K */
#define BPF_RET_K 0x06    /* BPF_RET | BPF_K */

#if defined(__x86_64__) && !defined(__ILP32__)
#define SC_AUDIT_ARCH 0xc000003eU /* AUDIT_ARCH_X86_64 */
#elif defined(__aarch64__) && !defined(__AARCH64EB__)
#define SC_AUDIT_ARCH 0xc00000b7U /* AUDIT_ARCH_AARCH64 */
#elif defined(__riscv) && __riscv_xlen == 64
#define SC_AUDIT_ARCH 0xc00000f3U /* AUDIT_ARCH_RISCV64 */
#endif

/* Where the kernel's headers are at hand (not under musl), they must
 * agree. */
#if __has_include(<linux/seccomp.h>)
#include <linux/seccomp.h>
_Static_assert(SC_IOCTL_NOTIF_RECV == SECCOMP_IOCTL_NOTIF_RECV, "RECV");
_Static_assert(SC_IOCTL_NOTIF_SEND == SECCOMP_IOCTL_NOTIF_SEND, "SEND");
_Static_assert(SC_IOCTL_NOTIF_ID_VALID == SECCOMP_IOCTL_NOTIF_ID_VALID, "ID_VALID");
_Static_assert(SC_IOCTL_NOTIF_ADDFD == SECCOMP_IOCTL_NOTIF_ADDFD, "ADDFD");
_Static_assert(sizeof(struct sc_notif) == sizeof(struct seccomp_notif), "notif");
_Static_assert(SC_RET_USER_NOTIF == SECCOMP_RET_USER_NOTIF && SC_FLAG_NEW_LISTENER == SECCOMP_FILTER_FLAG_NEW_LISTENER,
               "flags");
_Static_assert(SC_FLAG_SPEC_ALLOW == SECCOMP_FILTER_FLAG_SPEC_ALLOW, "SPEC_ALLOW");
#endif

#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
/* pidfd_open()'s PIDFD_THREAD (Linux 6.9): O_EXCL. */
#define SC_PIDFD_THREAD O_EXCL
/* kcmp(2)'s KCMP_FILES: do two tasks share a descriptor table? */
#define SC_KCMP_FILES 2
#if __has_include(<linux/kcmp.h>)
#include <linux/kcmp.h>
_Static_assert(SC_KCMP_FILES == KCMP_FILES, "KCMP_FILES");
#endif

/* Decoys handed out lately: a bind restarted on one is answered 0. */
#define DECOYS_MAX 8
/* Hand-overs of a target remembered for the decoy rule. */
#define HANDED_MAX 8

/* The interposer remembers one hand-over per process, its own last one,
 * or its parent's, copied by fork(): here, by thread group. */
struct handed {
        pid_t tgid;
        struct intercept_held held;
};

struct target_state {
        struct intercept_target target;
        dev_t dev;
        ino_t ino;
};

/* One COMMAND's filter: its listener, and what that COMMAND claimed and
 * was handed. Every generation alive keeps its own (the serving one
 * beside a new one, the one that serves again after a new one failed,
 * one told to stop): closed, it would leave every later bind() of that
 * generation, a unix socket's too, failing with ENOSYS. Its own claims:
 * a replaced generation that binds again neither makes the new one look
 * ready nor gets a decoy for the new one's hand-overs. */
struct generation {
        struct intercept_seccomp *s;
        int listener;         /* -1: hung up (no process is left under the filter), or none was sent */
        pid_t command;        /* 0 once reaped: nobody may claim */
        struct claims claims; /* of targets[], and the binds that got nothing of prebind's */
        /* Of target i, the last hand-overs, newest at (n_handed[i] - 1) % HANDED_MAX. */
        struct handed handed[INTERCEPT_TARGETS_MAX][HANDED_MAX];
        size_t n_handed[INTERCEPT_TARGETS_MAX];
        unsigned unreadable;  /* binds whose caller could not be inspected */
        int unreadable_error; /* the last one's -errno */
};

struct intercept_seccomp {
        unsigned flags;    /* extra filter flags (WAIT_KILLABLE_RECV) */
        int sock[2];       /* [0] prebind's end, [1] the child's */
        struct loop *loop; /* watches the listeners; NULL: not attached */
        intercept_seccomp_callback callback;
        void *userdata;
        struct target_state targets[INTERCEPT_TARGETS_MAX];
        size_t n_targets;
        struct claims unclaimed;         /* the targets' ports, none claimed: each generation's start */
        struct generation **generations; /* the newest last: its claims are readiness's */
        size_t n_generations;
        ino_t decoys[DECOYS_MAX];
        size_t n_decoys;
};

/* The filter: bind() of this architecture goes to the listener, every
 * other system call is allowed (an architecture check first: the same
 * number is another call under another ABI). */
static int install_filter(unsigned flags) {
#ifdef SC_AUDIT_ARCH
        struct sc_sock_filter code[] = {
                { BPF_LD_W_ABS, 0, 0, (uint32_t) offsetof(struct sc_data, arch) },
                { BPF_JEQ_K, 0, 3, SC_AUDIT_ARCH },
                { BPF_LD_W_ABS, 0, 0, (uint32_t) offsetof(struct sc_data, nr) },
                { BPF_JEQ_K, 0, 1, (uint32_t) SYS_bind },
                { BPF_RET_K, 0, 0, SC_RET_USER_NOTIF },
                { BPF_RET_K, 0, 0, SC_RET_ALLOW },
        };
        struct sc_sock_fprog prog = { .len = (unsigned short) ELEMENTSOF(code), .filter = code };
        long fd;

        /* Without it an unprivileged process may not install a filter
         * (EACCES); it also keeps setuid programs from gaining privileges. */
        if (syscall(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1L, 0L, 0L, 0L) < 0)
                return -errno;
        /* SPEC_ALLOW: the filter only asks prebind about bind(), it is
         * no sandbox; without it kernels whose Speculative Store Bypass
         * mitigation is "seccomp" (the default before 5.16) would slow
         * the whole server down by turning the mitigation on for it. */
        fd = syscall(SYS_seccomp, SC_SET_MODE_FILTER, SC_FLAG_NEW_LISTENER | SC_FLAG_SPEC_ALLOW | flags, &prog);
        return fd < 0 ? -errno : (int) fd;
#else
        (void) flags;
        return -EOPNOTSUPP;
#endif
}

/* The probe child's exit status when the filter works without the
 * killable wait; 0 with it; else the errno (EPERM is 1: not this). */
#define PROBE_PLAIN 254

/* The probe's child: the filter with the killable wait, else without,
 * then ADDFD (5.9) on a notification that does not exist: ENOENT where
 * the kernel knows the ioctl. Exit status: 0, PROBE_PLAIN, or the
 * errno. It shares prebind's memory (CLONE_VM, prebind waits): raw
 * system calls only. */
static int probe_child_main(void *unused) {
        struct sc_notif_addfd addfd = { .id = 0, .flags = SC_ADDFD_FLAG_SETFD, .srcfd = 0, .newfd = 0 };
        int status = 0, fd = install_filter(SC_FLAG_WAIT_KILLABLE_RECV);

        if (fd == -EINVAL) {
                fd = install_filter(0);
                status = PROBE_PLAIN;
        }
        if (fd < 0)
                status = -fd & 0xff;
        else if (syscall(SYS_ioctl, fd, SC_IOCTL_NOTIF_ADDFD, &addfd) == 0 || errno != ENOENT)
                status = errno == ENOENT || errno == 0 ? EINVAL : errno & 0xff;
        syscall(SYS_exit, status);
        return status;
}

int intercept_seccomp_probe_child(unsigned *ret_flags) {
        int status;
        pid_t pid;

#ifndef SC_AUDIT_ARCH
        return -EOPNOTSUPP;
#endif
        /* prebind is suspended until the child exits: no page tables
         * to copy, as fork() would. */
        pid = clone_vfork(probe_child_main, NULL, SIGCHLD);
        if (pid < 0)
                return pid;
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        if (!WIFEXITED(status))
                return -ECHILD;
        if (WEXITSTATUS(status) != 0 && WEXITSTATUS(status) != PROBE_PLAIN)
                return -WEXITSTATUS(status);
        *ret_flags = WEXITSTATUS(status) == 0 ? SC_FLAG_WAIT_KILLABLE_RECV : 0;
        return 0;
}

int intercept_seccomp_release_flags(const char *release, unsigned *ret_flags) {
        unsigned long version[2];
        const char *p = release;

        /* "MAJOR.MINOR", then anything ("6.1.0-28-amd64", "5.19-rc1"). */
        for (size_t i = 0; i < ELEMENTSOF(version); i++) {
                char *end;

                if (*p < '0' || *p > '9')
                        return -EINVAL;
                errno = 0;
                version[i] = strtoul(p, &end, 10);
                if (errno != 0 || end == p || (i == 0 && *end != '.'))
                        return -EINVAL;
                p = end + 1;
        }
        if (version[0] < 5 || (version[0] == 5 && version[1] < 9))
                return -EINVAL;
        *ret_flags = version[0] > 5 || version[1] >= 19 ? SC_FLAG_WAIT_KILLABLE_RECV : 0;
        return 0;
}

int intercept_seccomp_probe(unsigned *ret_flags) {
        uint16_t sizes[3];
        struct utsname u;

        /* Without a child where nothing can say no: prebind runs under no
         * filter (so no outer listener, no policy filter refusing
         * seccomp()), the kernel knows user notification, and its version
         * has ADDFD (5.9; the killable wait from 5.19). A probe child costs
         * 0.1-0.25 ms at each start, most of it cold: the filter's
         * compilation and the child's first faults. Older version numbers
         * (distributions backport) and every other case: the child. */
#ifdef SC_AUDIT_ARCH
        if (prctl(PR_GET_SECCOMP) == 0 && syscall(SYS_seccomp, SC_GET_NOTIF_SIZES, 0, sizes) == 0 && uname(&u) == 0 &&
            intercept_seccomp_release_flags(u.release, ret_flags) == 0)
                return 0;
#else
        (void) sizes;
        (void) u;
#endif
        return intercept_seccomp_probe_child(ret_flags);
}

const char *intercept_seccomp_why_not(int r) {
        switch (r) {
        case -EBUSY:
                return "another seccomp supervisor already listens in this process tree (an outer prebind "
                       "--intercept, or a container runtime)";
        case -EINVAL:
        case -ENOTTY:
                return "the kernel is too old (seccomp user notification with ADDFD needs Linux 5.9)";
        case -ENOSYS:
                return "seccomp() is not available (a kernel without seccomp filters, or an emulator that lacks "
                       "it, such as valgrind)";
        case -EACCES:
        case -EPERM:
                return "a security policy refuses seccomp()";
        case -EOPNOTSUPP:
                return "prebind does not know the system call numbers of this architecture";
        default:
                return strerror(-r);
        }
}

int intercept_seccomp_new(const struct intercept_target *targets, size_t n, unsigned flags,
                          struct intercept_seccomp **ret) {
        _cleanup_free_ struct intercept_seccomp *s = NULL;

        if (n == 0 || n > INTERCEPT_TARGETS_MAX)
                return -EINVAL;
        s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        s->flags = flags;
        s->sock[0] = s->sock[1] = -1;
        for (size_t i = 0; i < n; i++) {
                struct stat st;

                if (fstat(targets[i].fd, &st) < 0)
                        return -errno;
                s->targets[i] = (struct target_state) {
                        .target = targets[i],
                        .dev = st.st_dev,
                        .ino = st.st_ino,
                };
        }
        s->n_targets = n;
        claims_init(&s->unclaimed, targets, n);
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, s->sock) < 0)
                return -errno;
        *ret = TAKE_PTR(s);
        return 0;
}

static void generation_free(struct generation *g) {
        if (g->listener >= 0)
                close(g->listener);
        free(g);
}

void intercept_seccomp_free(struct intercept_seccomp *s) {
        if (!s)
                return;
        intercept_seccomp_detach(s);
        for (size_t i = 0; i < 2; i++)
                if (s->sock[i] >= 0)
                        close(s->sock[i]);
        for (size_t i = 0; i < s->n_generations; i++)
                generation_free(s->generations[i]);
        free(s->generations);
        free(s);
}

int intercept_seccomp_child_socket(const struct intercept_seccomp *s) {
        return s->sock[1];
}

int intercept_seccomp_child(const struct intercept_seccomp *s, int sock) {
        union {
                char buf[CMSG_SPACE(sizeof(int))];
                struct cmsghdr align;
        } control;
        char byte = 0;
        struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
        struct msghdr msg = {
                .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf, .msg_controllen = sizeof control.buf
        };
        struct cmsghdr *c;
        int fd = install_filter(s->flags), r = 0;

        if (fd < 0)
                return fd;
        memset(control.buf, 0, sizeof control.buf);
        c = CMSG_FIRSTHDR(&msg);
        if (!c) {
                close(fd);
                return -EINVAL;
        }
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof fd);
        if (sendmsg(sock, &msg, MSG_NOSIGNAL) < 0)
                r = -errno;
        close(fd);
        return r;
}

/* The listener the newest child sent (an earlier one that sent none
 * died before exec). */
static int receive_listener(struct intercept_seccomp *s) {
        int fd = -1;

        for (;;) {
                union {
                        char buf[CMSG_SPACE(sizeof(int))];
                        struct cmsghdr align;
                } control;
                char byte;
                struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
                struct msghdr msg = { .msg_iov = &iov,
                                      .msg_iovlen = 1,
                                      .msg_control = control.buf,
                                      .msg_controllen = sizeof control.buf };
                struct cmsghdr *c;
                ssize_t n = recvmsg(s->sock[0], &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);

                if (n < 0)
                        return fd >= 0 ? fd : -ENOENT;
                for (c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
                        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
                            c->cmsg_len == CMSG_LEN(sizeof(int))) {
                                if (fd >= 0)
                                        close(fd);
                                memcpy(&fd, CMSG_DATA(c), sizeof fd);
                        }
        }
}

static int on_listener(struct loop *l, int fd, uint32_t revents, void *userdata);

static struct generation *newest(const struct intercept_seccomp *s) {
        return s->n_generations ? s->generations[s->n_generations - 1] : NULL;
}

/* Its filter's listener is of no more use: closed, and the generation
 * forgotten unless it is the newest (whose claims readiness asks for). */
static void drop_listener(struct generation *g) {
        struct intercept_seccomp *s = g->s;

        if (g->listener >= 0) {
                if (s->loop)
                        loop_remove(s->loop, g->listener);
                close(g->listener);
                g->listener = -1;
        }
        if (g == newest(s))
                return;
        for (size_t i = 0; i < s->n_generations; i++)
                if (s->generations[i] == g) {
                        memmove(s->generations + i, s->generations + i + 1,
                                (s->n_generations - i - 1) * sizeof(struct generation *));
                        s->n_generations--;
                        break;
                }
        generation_free(g);
}

int intercept_seccomp_set_command(struct intercept_seccomp *s, pid_t pid) {
        _cleanup_free_ struct generation *g = calloc(1, sizeof *g);
        struct generation **grown, *last = newest(s);
        int fd = receive_listener(s), r = 0;

        if (!g || !(grown = realloc(s->generations, (s->n_generations + 1) * sizeof(struct generation *)))) {
                if (fd >= 0)
                        close(fd);
                return -ENOMEM;
        }
        s->generations = grown;
        /* Nothing claimed, noted or handed: a new process image holds
         * nothing it was handed. */
        g->s = s;
        g->listener = fd;
        g->command = pid;
        g->claims = s->unclaimed;
        s->generations[s->n_generations++] = TAKE_PTR(g);
        /* The one before, if it has no listener left, was kept for its
         * claims alone. */
        if (last && last->listener < 0)
                drop_listener(last);
        if (fd < 0)
                return fd;
        if (s->loop && (r = loop_add(s->loop, fd, LOOP_IN, on_listener, newest(s))) < 0)
                drop_listener(newest(s));
        return r;
}

void intercept_seccomp_forget_command(struct intercept_seccomp *s) {
        struct generation *g = newest(s);

        if (g)
                g->command = 0;
}

void intercept_seccomp_command_exited(struct intercept_seccomp *s, pid_t pid) {
        for (size_t i = 0; i < s->n_generations; i++)
                if (s->generations[i]->command == pid)
                        s->generations[i]->command = 0;
}

bool intercept_seccomp_all_claimed(const struct intercept_seccomp *s) {
        const struct generation *g = newest(s);

        return g && claims_all_claimed(&g->claims);
}

/* The index-th number (0: the first) of the line that starts with key
 * ("Tgid:", "Uid:") in a /proc/PID/status text. */
static int status_number(const char *status, const char *key, unsigned index, unsigned long long *ret) {
        size_t klen = strlen(key);

        for (const char *line = status; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
                const char *p = line + klen;

                if (strncmp(line, key, klen) != 0)
                        continue;
                for (unsigned i = 0;; i++) {
                        char *end;
                        unsigned long long v;

                        p += strspn(p, " \t");
                        if (*p < '0' || *p > '9')
                                return -EINVAL;
                        errno = 0;
                        v = strtoull(p, &end, 10);
                        if (errno || (*end && !strchr(" \t\n", *end)))
                                return -EINVAL;
                        if (i == index) {
                                *ret = v;
                                return 0;
                        }
                        p = end;
                }
        }
        return -EINVAL;
}

int intercept_seccomp_parse_tgid(const char *status, pid_t *ret) {
        unsigned long long v;

        if (status_number(status, "Tgid:", 0, &v) < 0 || v == 0 || v > INT32_MAX)
                return -EINVAL;
        *ret = (pid_t) v;
        return 0;
}

int intercept_seccomp_parse_ids(const char *status, uid_t *ret_uid, gid_t *ret_gid) {
        unsigned long long uid, gid;

        /* The effective ids: what SO_PEERCRED reports of a broker's peer.
         * As unsigned long long: ids go up to 2^32 - 2, which a 32-bit
         * long cannot hold ((uid_t) -1 is no id). */
        if (status_number(status, "Uid:", 1, &uid) < 0 || status_number(status, "Gid:", 1, &gid) < 0 ||
            uid >= UINT32_MAX || gid >= UINT32_MAX)
                return -EINVAL;
        *ret_uid = (uid_t) uid;
        *ret_gid = (gid_t) gid;
        return 0;
}

int intercept_seccomp_parse_fdinfo_flags(const char *fdinfo, unsigned *ret) {
        for (const char *line = fdinfo; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL)
                if (strncmp(line, "flags:", 6) == 0) {
                        const char *p = line + 6;
                        char *end;
                        unsigned long v;

                        p += strspn(p, " \t");
                        if (*p < '0' || *p > '7')
                                return -EINVAL;
                        errno = 0;
                        v = strtoul(p, &end, 8);
                        if (errno || v > UINT32_MAX || (*end && *end != '\n'))
                                return -EINVAL;
                        *ret = (unsigned) v;
                        return 0;
                }
        return -EINVAL;
}

/* A small /proc file, NUL-terminated, into buf. */
static int read_proc(const char *path, char *buf, size_t size) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t n;

        buf[0] = '\0';
        if (fd < 0)
                return -errno;
        n = read(fd, buf, size - 1);
        if (n < 0)
                return -errno;
        buf[n] = '\0';
        return 0;
}

/* Is the server's fd close-on-exec? The copy pidfd_getfd() makes always
 * is: the server's own flag is in the fdinfo of the thread that binds
 * (/proc/TID: its own file table, and there even when the thread group's
 * leader has exited). */
static bool fd_is_cloexec(pid_t tid, int fd) {
        char path[64], buf[512];
        unsigned flags = 0;

        snprintf(path, sizeof path, "/proc/%d/fdinfo/%d", (int) tid, fd);
        if (read_proc(path, buf, sizeof buf) < 0 || intercept_seccomp_parse_fdinfo_flags(buf, &flags) < 0)
                return false;
        return (flags & O_CLOEXEC) != 0;
}

static int sockopt_int(int fd, int name) {
        int v = -1;
        socklen_t len = sizeof v;

        return getsockopt(fd, SOL_SOCKET, name, &v, &len) < 0 ? -1 : v;
}

static void note(struct generation *g, pid_t pid, const struct sockaddr *sa, socklen_t len, unsigned port, int type) {
        char address[112];

        intercept_address_text(sa, len, address, sizeof address);
        claims_note(&g->claims.notes, sa->sa_family, type, port, address);
        log_debug("pid %d bound %s%s%u/%s (not intercepted)", (int) pid, address, port ? " port " : "", port,
                  claims_type_name(type));
}

/* What the bind gets. */
enum verdict {
        VERDICT_CONTINUE, /* the kernel binds as asked */
        VERDICT_DONE,     /* answer 0: the fd is prebind's socket (or a decoy) now */
};

static bool is_ours(const struct intercept_seccomp *s, const struct stat *st) {
        for (size_t i = 0; i < s->n_targets; i++)
                if (s->targets[i].dev == st->st_dev && s->targets[i].ino == st->st_ino)
                        return true;
        for (size_t i = 0; i < s->n_decoys && i < DECOYS_MAX; i++)
                if (s->decoys[i] == st->st_ino)
                        return true;
        return false;
}

/* A loopback port 0 of the server's own family and type for a bind of
 * the other family (match.h's rule): nobody is told about it. */
static int make_decoy(struct intercept_seccomp *s, int family, int type) {
        union sockaddr_any addr;
        socklen_t len = intercept_decoy_address(family, &addr.storage);
        _cleanup_close_ int fd = socket(family, type | SOCK_CLOEXEC, 0);
        struct stat st;
        int one = 1;

        if (len == 0 || fd < 0)
                return -EAFNOSUPPORT;
        if (family == AF_INET6)
                (void) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
        if (bind(fd, &addr.sa, len) < 0 || fstat(fd, &st) < 0)
                return -errno;
        s->decoys[s->n_decoys++ % DECOYS_MAX] = st.st_ino;
        return TAKE_FD(fd);
}

/* The thread that called bind(), pinned: the notification names a
 * thread, whose file table is its own after unshare(CLONE_FILES), and
 * whose thread group's leader may have exited (pthread_exit() in main():
 * a zombie, with no files). */
struct caller {
        pid_t tid;
        int thread;          /* pidfd of the thread: its file table */
        struct peer process; /* its thread group, for claims_refusal() */
        int copy;            /* the bind's fd, copied from the thread */
        struct stat st;      /* of copy */
};

static void caller_done(struct caller *c) {
        closep(&c->thread);
        closep(&c->copy);
        peer_done(&c->process);
}

/* A pidfd of the thread itself (PIDFD_THREAD, Linux 6.9); before, the
 * thread group's, whose table is the thread's unless it unshared it. */
static int open_thread_pidfd(pid_t tid, pid_t tgid) {
        int fd = (int) syscall(SYS_pidfd_open, tid, SC_PIDFD_THREAD);

        if (fd >= 0)
                return fd;
        if (errno != EINVAL)
                return -errno;
        /* Before Linux 6.9 (no PIDFD_THREAD) only the thread group's
         * pidfd: its descriptor table is the binding thread's only when
         * the two share one (not after unshare(CLONE_FILES), nor once
         * the main thread has exited). Deciding on another table's file
         * at that number would be deciding on the wrong file. */
        if (tid != tgid && syscall(SYS_kcmp, tgid, tid, SC_KCMP_FILES, 0, 0) != 0)
                return -EXDEV;
        return open_pidfd(tgid);
}

/* Pin the caller of req and read its sockaddr into addr (want bytes).
 * Returns 0, -ESTALE when the notification is gone (the thread may have
 * gone and its id been reused since it was queued, seccomp_unotify(2)),
 * or -errno: a non-root prebind cannot read a non-dumpable target
 * (EPERM). */
static int pin_caller(const struct generation *g, const struct sc_notif *req, void *addr, size_t want,
                      struct caller *c) {
        struct iovec local = { .iov_base = addr, .iov_len = want };
        /* NOLINTNEXTLINE(performance-no-int-to-ptr): an address in the target, for process_vm_readv() */
        struct iovec remote = { .iov_base = (void *) (uintptr_t) req->data.args[1], .iov_len = want };
        char path[64], status[2048];
        uint64_t id = req->id;
        pid_t tgid;
        uid_t uid;
        gid_t gid;
        int r;

        c->tid = (pid_t) req->pid;
        errno = 0;
        if (process_vm_readv(c->tid, &local, 1, &remote, 1, 0) != (ssize_t) want)
                return errno ? -errno : -EIO;
        snprintf(path, sizeof path, "/proc/%d/status", (int) c->tid);
        if ((r = read_proc(path, status, sizeof status)) < 0 ||
            (r = intercept_seccomp_parse_tgid(status, &tgid)) < 0 ||
            (r = intercept_seccomp_parse_ids(status, &uid, &gid)) < 0 || (r = open_thread_pidfd(c->tid, tgid)) < 0)
                return r;
        c->thread = r;
        if ((r = open_pidfd(tgid)) < 0)
                return r;
        peer_init(&c->process, tgid, uid, gid, r);
        /* Read, then check: what was read is the caller's. */
        if (ioctl(g->listener, SC_IOCTL_NOTIF_ID_VALID, &id) < 0)
                return -ESTALE;
        c->copy = (int) syscall(SYS_pidfd_getfd, c->thread, (int) req->data.args[0], 0U);
        if (c->copy < 0 || fstat(c->copy, &c->st) < 0)
                return -errno;
        return 0;
}

/* Put src at the server's fd number, with its close-on-exec and its
 * O_NONBLOCK (which lives on the open file description: prebind's copy
 * takes the server's choice; prebind never accepts on it). */
static int hand_over(const struct generation *g, const struct sc_notif *req, const struct caller *c, int src) {
        int fd = (int) req->data.args[0];
        struct sc_notif_addfd addfd = {
                .id = req->id,
                .flags = SC_ADDFD_FLAG_SETFD,
                .srcfd = (uint32_t) src,
                .newfd = (uint32_t) fd,
                .newfd_flags = fd_is_cloexec(c->tid, fd) ? O_CLOEXEC : 0,
        };
        int theirs = fcntl(c->copy, F_GETFL), ours = fcntl(src, F_GETFL);

        if (theirs >= 0 && ours >= 0 && (theirs & O_NONBLOCK) != (ours & O_NONBLOCK))
                (void) fcntl(src, F_SETFL, (ours & ~O_NONBLOCK) | (theirs & O_NONBLOCK));
        /* SETFD, never SEND: SEND would answer bind() with the fd number. */
        if (ioctl(g->listener, SC_IOCTL_NOTIF_ADDFD, &addfd) < 0)
                return -errno;
        return 0;
}

/* match.h's held family for one hand-over, seen from the caller. */
static int held_at(const struct caller *c, const struct intercept_held *h, int fd) {
        _cleanup_close_ int at = h->fd >= 0 && h->fd != fd ? (int) syscall(SYS_pidfd_getfd, c->thread, h->fd, 0U) : -1;
        struct stat st;

        return intercept_held_family(h, fd, at >= 0 && fstat(at, &st) == 0 ? &st : NULL);
}

/* As the interposer decides: by the caller's own last hand-over of t if
 * it had one; else by one it inherited (the newest of another process's
 * whose socket it holds at that fd). */
static int held_family(const struct caller *c, const struct generation *g, size_t i, int fd) {
        size_t n = g->n_handed[i] < HANDED_MAX ? g->n_handed[i] : HANDED_MAX;
        int inherited = 0;

        for (size_t k = 1; k <= n; k++) {
                const struct handed *h = &g->handed[i][(g->n_handed[i] - k) % HANDED_MAX];

                if (h->tgid == c->process.pid)
                        return held_at(c, &h->held, fd);
                if (!inherited)
                        inherited = held_at(c, &h->held, fd);
        }
        return inherited;
}

static enum verdict give_decoy(struct generation *g, const struct sc_notif *req, const struct caller *c, int family,
                               int type, unsigned port) {
        _cleanup_close_ int decoy = make_decoy(g->s, family, type);

        if (decoy < 0 || hand_over(g, req, c, decoy) < 0)
                return VERDICT_CONTINUE;
        log_debug("pid %d bound port %u/%s of the other family again: given a private port of its own", (int) c->tid,
                  port, claims_type_name(type));
        return VERDICT_DONE;
}

/* An intercepted port: the decoy rule, then who may have it, as the
 * broker asks for the interposer. */
static enum verdict decide_port(struct generation *g, const struct sc_notif *req, const struct caller *c, size_t i,
                                int family, int type, unsigned port) {
        const struct target_state *t = &g->s->targets[i];
        int fd = (int) req->data.args[0];
        const char *why;

        if (intercept_bind_rule(held_family(c, g, i, fd), family) == INTERCEPT_GIVE_DECOY)
                return give_decoy(g, req, c, family, type, port);
        why = claims_refusal(g->command, &c->process);
        if (why) {
                claims_refuse(&g->claims, port, c->process.pid, why);
                return VERDICT_CONTINUE;
        }
        if (hand_over(g, req, c, t->target.fd) < 0)
                return VERDICT_CONTINUE;
        log_debug("handed socket '%s' to pid %d at fd %d for its bind of port %u/%s", t->target.name, (int) c->tid, fd,
                  port, claims_type_name(type));
        g->handed[i][g->n_handed[i]++ % HANDED_MAX] = (struct handed) {
                .tgid = c->process.pid,
                .held = { .fd = fd, .family = family, .dev = t->dev, .ino = t->ino },
        };
        g->claims.claimed[i] = true;
        return VERDICT_DONE;
}

/* The bind of a pinned caller, its address raw (len bytes). */
static enum verdict decide_bind(struct generation *g, const struct sc_notif *req, const struct caller *c,
                                const struct sockaddr *raw, socklen_t len) {
        const struct intercept_seccomp *s = g->s;
        const struct intercept_port *match;
        struct sockaddr_storage bound;
        socklen_t bound_len;
        uint16_t port;
        int type;

        /* A signal between ADDFD and the answer restarts bind() on the
         * swapped fd (Go's SIGURG, without WAIT_KILLABLE_RECV): it is
         * done already. */
        if (is_ours(s, &c->st))
                return VERDICT_DONE;
        type = sockopt_int(c->copy, SO_TYPE);
        if (raw->sa_family == AF_UNIX) {
                note(g, c->tid, raw, len, 0, type);
                return VERDICT_CONTINUE;
        }
        /* As the kernel reads it (match.h), sin_family 0 included. Port 0
         * (Go probes the stack with two at start) passes unnoted. */
        bound_len = intercept_bind_address(sockopt_int(c->copy, SO_DOMAIN), raw, len, &bound);
        if (bound_len == 0 || !intercept_sockaddr_port((struct sockaddr *) &bound, bound_len, &port) || port == 0)
                return VERDICT_CONTINUE;
        match = intercept_match(g->claims.port, s->n_targets, port, type);
        if (!match) {
                note(g, c->tid, (struct sockaddr *) &bound, bound_len, port, type);
                return VERDICT_CONTINUE;
        }
        return decide_port(g, req, c, (size_t) (match - g->claims.port), bound.ss_family, type, port);
}

static enum verdict decide(struct generation *g, const struct sc_notif *req) {
        union sockaddr_any addr = { 0 };
        struct caller c = { .thread = -1, .process = PEER_NONE, .copy = -1 };
        uint64_t len = req->data.args[2];
        size_t want = len < sizeof addr ? (size_t) len : sizeof addr;
        enum verdict v = VERDICT_CONTINUE;
        int r;

        if (len < sizeof(sa_family_t) || len > INT32_MAX || (int) req->data.args[0] < 0)
                return VERDICT_CONTINUE;
        r = pin_caller(g, req, &addr, want, &c);
        if (r == 0)
                v = decide_bind(g, req, &c, &addr.sa, (socklen_t) want);
        /* EBADF: no such fd in the caller's table; the kernel says so. */
        else if (r != -ESTALE && r != -EBADF) {
                /* It binds by itself; the message at the deadline says. */
                g->unreadable++;
                g->unreadable_error = r;
        }
        caller_done(&c);
        return v;
}

static int answer_one(struct generation *g) {
        struct sc_notif req;
        struct sc_notif_resp resp = { 0 };

        /* The kernel wants it zeroed. */
        memset(&req, 0, sizeof req);
        if (ioctl(g->listener, SC_IOCTL_NOTIF_RECV, &req) < 0)
                /* ENOENT: the caller was interrupted before it was read. */
                return errno == ENOENT || errno == EINTR ? 0 : -errno;
        resp.id = req.id;
        if (req.data.nr != SYS_bind || decide(g, &req) == VERDICT_CONTINUE)
                resp.flags = SC_NOTIF_FLAG_CONTINUE;
        /* ENOENT: the caller is gone (killed) meanwhile. */
        if (ioctl(g->listener, SC_IOCTL_NOTIF_SEND, &resp) < 0 && errno != ENOENT)
                return -errno;
        return 0;
}

/* The listener is readable (a notification waits), or not: then it hung
 * up, as no process is left under the filter (g may be freed then). */
static int serve(struct generation *g, bool readable) {
        int r;

        if (!readable) {
                drop_listener(g);
                return 0;
        }
        r = answer_one(g);
        if (r < 0)
                log_error_errno(r, "cannot answer a bind() of COMMAND's (--intercept): %m");
        return r;
}

static int on_listener(struct loop *l, int fd, uint32_t revents, void *userdata) {
        struct generation *g = userdata;
        struct intercept_seccomp *s = g->s;

        (void) serve(g, revents & LOOP_IN);
        if (s->callback)
                s->callback(s->userdata);
        return 0;
}

int intercept_seccomp_attach(struct intercept_seccomp *s, struct loop *l, intercept_seccomp_callback callback,
                             void *userdata) {
        int r;

        s->loop = l;
        s->callback = callback;
        s->userdata = userdata;
        for (size_t i = 0; i < s->n_generations; i++)
                if (s->generations[i]->listener >= 0 &&
                    (r = loop_add(l, s->generations[i]->listener, LOOP_IN, on_listener, s->generations[i])) < 0)
                        return r;
        return 0;
}

void intercept_seccomp_detach(struct intercept_seccomp *s) {
        if (!s->loop)
                return;
        for (size_t i = 0; i < s->n_generations; i++)
                if (s->generations[i]->listener >= 0)
                        loop_remove(s->loop, s->generations[i]->listener);
        s->loop = NULL;
}

/* The newest generation's: its last claims before it is reaped. */
int intercept_seccomp_dispatch(struct intercept_seccomp *s) {
        struct generation *g = newest(s);
        struct pollfd p = { .fd = g ? g->listener : -1, .events = POLLIN };
        int n;

        if (p.fd < 0)
                return 0;
        n = poll(&p, 1, 0);
        if (n < 0 && errno != EINTR)
                return log_error_errno(errno, "cannot answer a bind() of COMMAND's (--intercept): %m");
        return n <= 0 ? 0 : serve(g, p.revents & POLLIN);
}

/* Why binds could not be inspected, for the message. */
static const char *unreadable_why(int r) {
        if (r == -EPERM && geteuid() != 0)
                return "a non-root prebind cannot read a non-dumpable process";
        if (r == -EXDEV)
                return "before Linux 6.9 a thread with a descriptor table of its own cannot be read";
        return strerror(-r);
}

void intercept_seccomp_describe_unmet(const struct intercept_seccomp *s, char *buf, size_t size) {
        const struct generation *g = newest(s);
        const struct claims *c = g ? &g->claims : &s->unclaimed;
        size_t len = claims_describe(c, buf, size);

        if (len == 0 || c->refused)
                return; /* all claimed, or said why not */
        if (g && g->unreadable)
                (void) claims_append(buf, size, len, " (%u bind%s could not be inspected: %s)", g->unreadable,
                                     g->unreadable == 1 ? "" : "s", unreadable_why(g->unreadable_error));
        else if (c->notes.n == 0)
                (void) claims_append(buf, size, len, " (it bound no IP port)");
}
