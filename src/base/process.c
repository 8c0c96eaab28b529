/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exitcode.h"
#include "macro.h"
#include "process.h"
#include "raw.h"

/* Linux 5.3, on every architecture (the unified syscall table). */
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

int exit_status_of(int wait_status) {
        if (WIFEXITED(wait_status))
                return WEXITSTATUS(wait_status);
        if (WIFSIGNALED(wait_status))
                return 128 + WTERMSIG(wait_status);
        return EXIT_PREBIND_FAILED;
}

int reap_one(pid_t *ret_pid, int *ret_status) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);

        if (pid < 0)
                return -errno;
        if (pid == 0)
                return 0;
        *ret_pid = pid;
        *ret_status = exit_status_of(status);
        return 1;
}

int signal_process(pid_t pid, bool group, int sig) {
        if (pid <= 0)
                return 0;
        if (kill(group ? -pid : pid, sig) < 0 && errno != ESRCH)
                return -errno;
        return 0;
}

int open_pidfd(pid_t pid) {
        int fd = (int) syscall(SYS_pidfd_open, pid, 0U);

        return fd >= 0 ? fd : -errno;
}

/* The parent of pid, from /proc/PID/stat. */
static int read_ppid(pid_t pid, pid_t *ret) {
        char path[64], buf[1024], *p;
        size_t n;
        FILE *f;
        int ppid;

        snprintf(path, sizeof path, "/proc/%d/stat", (int) pid);
        f = fopen(path, "re");
        if (!f)
                return -errno;
        /* The name in parentheses is the process's own choice
         * (prctl(PR_SET_NAME)) and may hold anything, ')' and '\n' too:
         * read the whole record, not a line, and take the last ')'. A
         * line would end inside a name such as "x) S 1234\n" and give any
         * process the parent it names. Nothing after the name holds a
         * ')'. */
        n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = '\0';
        p = strrchr(buf, ')');
        /* NOLINTNEXTLINE(cert-err34-c): the kernel wrote this number */
        if (!p || sscanf(p, ") %*c %d", &ppid) != 1)
                return -EBADMSG;
        *ret = ppid;
        return 0;
}

/* The whole of a /proc file into buf (NUL-terminated). */
static int read_proc_file(const char *path, char *buf, size_t size) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        size_t len = 0;

        if (fd < 0)
                return -errno;
        while (len < size - 1) {
                ssize_t n = read(fd, buf + len, size - 1 - len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        break;
                len += (size_t) n;
        }
        buf[len] = '\0';
        return 0;
}

/* The number of pidfd's process now, in our pid namespace (fdinfo's
 * "Pid:", Linux 5.3): -1 once it has been reaped, 0 when it is outside
 * our namespace. */
static pid_t pidfd_pid(int pidfd) {
        char path[64], buf[1024];
        const char *line;
        int pid;

        snprintf(path, sizeof path, "/proc/self/fdinfo/%d", pidfd);
        if (read_proc_file(path, buf, sizeof buf) < 0 || !(line = strstr(buf, "\nPid:")))
                return -1;
        /* NOLINTNEXTLINE(cert-err34-c): the kernel wrote this number */
        return sscanf(line, "\nPid: %d", &pid) == 1 ? (pid_t) pid : -1;
}

/* Is id one of a "Uid:" or "Gid:" line's real, effective, saved ids? */
static bool among_ids(const char *status, const char *key, unsigned id) {
        const char *line = strstr(status, key);
        unsigned ids[4];

        /* NOLINTNEXTLINE(cert-err34-c): the kernel wrote these numbers */
        if (!line || sscanf(line + strlen(key), "%u %u %u %u", &ids[0], &ids[1], &ids[2], &ids[3]) != 4)
                return false;
        return id == ids[0] || id == ids[1] || id == ids[2];
}

/* Could pid claim uid and gid (SCM_CREDENTIALS allows its real,
 * effective and saved ids; SO_PEERCRED reports its effective ones)? The
 * name in /proc/PID/status is escaped: no line of its own can be
 * forged there, unlike in stat. */
static bool has_ids(pid_t pid, uid_t uid, gid_t gid) {
        char path[64], buf[4096];

        snprintf(path, sizeof path, "/proc/%d/status", (int) pid);
        return read_proc_file(path, buf, sizeof buf) == 0 && among_ids(buf, "\nUid:", (unsigned) uid) &&
               among_ids(buf, "\nGid:", (unsigned) gid);
}

/* pidfd's process, whose number is pid: root, or below it? Every process
 * on the way up is pinned before it is trusted: its parent's number is
 * read, that parent pidfd_open()ed, and the number read again while the
 * child still has its own (its pidfd says so). A parent that dies leaves
 * its children to an older process, never to a new one with its number:
 * so the parent's pidfd is that parent, and no number on the chain can
 * turn into a later process while the chain is read (pid reuse, issue
 * 19). The walk stops below pid 1: nobody descends from it in prebind's
 * sense. */
static bool pidfd_descends_from(int pidfd, pid_t pid, pid_t root) {
        _cleanup_close_ int held = -EBADF;
        int current = pidfd;

        for (int depth = 0; depth < 64 && pid > 1; depth++) {
                _cleanup_close_ int parent = -EBADF;
                pid_t ppid = 0, again = 0;

                if (pid == root)
                        return true;
                if (read_ppid(pid, &ppid) < 0 || ppid <= 1)
                        return false;
                parent = open_pidfd(ppid);
                /* Without pidfd_open() (ENOSYS), by number from here on. */
                if ((parent < 0 && parent != -ENOSYS) || read_ppid(pid, &again) < 0 || again != ppid ||
                    (current >= 0 && pidfd_pid(current) != pid))
                        return false;
                closep(&held);
                held = TAKE_FD(parent);
                current = held;
                pid = ppid;
        }
        return false;
}

void peer_init(struct peer *ret, pid_t pid, uid_t uid, gid_t gid, int pidfd) {
        *ret = (struct peer) { .pidfd = -1, .pid = pid, .uid = uid, .gid = gid };
        if (pidfd >= 0)
                ret->pidfd = pidfd;
        else if (pidfd == -ENOPROTOOPT && pid > 0) {
                int fd = open_pidfd(pid);

                ret->pidfd = fd >= 0 ? fd : -1;
                ret->by_number = fd == -ENOSYS;
        }
}

void peer_done(struct peer *p) {
        closep(&p->pidfd);
        p->pidfd = -1;
}

bool peer_exited(const struct peer *p) {
        struct pollfd pfd = { .fd = p->pidfd, .events = POLLIN };

        if (p->by_number)
                return kill(p->pid, 0) < 0 && errno == ESRCH;
        /* A pidfd is readable once its process has exited. */
        return p->pidfd < 0 || poll(&pfd, 1, 0) != 0;
}

/* root as /proc numbers it. root comes from fork(), in prebind's PID
 * namespace; the walk reads /proc, whose numbers are those of the
 * namespace it was mounted in: under `unshare --pid --fork` without
 * --mount-proc the two differ, and COMMAND was never found to be itself.
 * Its pidfd's fdinfo says. 0 or -1: not visible in /proc at all.
 * Without pidfd_open(), root as it is. */
static pid_t pid_as_proc_sees_it(pid_t root) {
        _cleanup_close_ int fd = open_pidfd(root);

        if (fd < 0)
                return fd == -ENOSYS ? root : -1;
        return pidfd_pid(fd);
}

bool peer_descends_from(const struct peer *p, pid_t root) {
        pid_t pid;

        if (p->pidfd < 0 && !p->by_number)
                return false;
        if (root > 0 && !p->by_number)
                root = pid_as_proc_sees_it(root);
        if (root <= 0)
                return false;
        pid = p->by_number ? p->pid : pidfd_pid(p->pidfd);
        /* The ids are read first: the walk's first step checks that pid
         * was still the peer's after that. */
        return pid > 1 && has_ids(pid, p->uid, p->gid) && pidfd_descends_from(p->pidfd, pid, root);
}

/* 0 if path is a regular file we may execute; -ENOENT or -EACCES. */
static int executable(const char *path) {
        struct stat st;

        if (stat(path, &st) < 0)
                return errno == EACCES ? -EACCES : -ENOENT;
        if (!S_ISREG(st.st_mode) || access(path, X_OK) < 0)
                return -EACCES;
        return 0;
}

int command_resolve(const char *name, char *const *envp, char **ret) {
        const char *path = "/usr/local/bin:/usr/bin:/bin";
        int r, err = -ENOENT;

        if (strchr(name, '/')) {
                r = executable(name);
                if (r < 0)
                        return r;
                return (*ret = strdup(name)) ? 0 : -ENOMEM;
        }
        for (char *const *e = envp; e && *e; e++)
                if (strncmp(*e, "PATH=", 5) == 0)
                        path = *e + 5;
        /* As execvp(3): the first executable file along PATH; if there is
         * none, but one that exists, it could not be run (126). */
        for (const char *dir = path;; dir++) {
                const char *end = strchrnul(dir, ':');
                char *candidate;

                if (asprintf(&candidate, "%.*s%s%s", (int) (end - dir), dir, end == dir ? "" : "/", name) < 0)
                        return -ENOMEM;
                r = executable(candidate);
                if (r == 0) {
                        *ret = candidate;
                        return 0;
                }
                if (r == -EACCES)
                        err = r;
                free(candidate);
                if (!*end)
                        break;
                dir = end;
        }
        return err;
}

/* Room left below this function's frame pointer for the rest of its
 * frame and for clone()'s on the parent's side: 88 bytes with glibc on
 * x86-64, 208 with musl 1.2.3, ~440 with later musl (its clone() is a C
 * function with a frame of its own), up to ~530 on arm64. The child's
 * stack starts below; these pages are touched at start-up anyway. */
#define CLONE_VFORK_GAP 2048

/* The kernel's signal set: 64 signals, 128 on MIPS (_NSIG - 1 of them). */
#define KERNEL_SIGSET_WORDS ((_NSIG - 1 + 63) / 64)

#if defined(__SANITIZE_ADDRESS__)
#define CLONE_VFORK_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CLONE_VFORK_ASAN 1
#endif
#endif
#ifdef CLONE_VFORK_ASAN
/* sanitizer/asan_interface.h's */
void __asan_handle_no_return(void);
#endif

__attribute__((noinline)) pid_t clone_vfork(int (*fn)(void *), void *arg, int flags) {
        /* The frame address, not a local's: under AddressSanitizer a local
         * may live on a fake stack of its own. */
        uintptr_t top = ((uintptr_t) __builtin_frame_address(0) - CLONE_VFORK_GAP) & ~(uintptr_t) 15;
        /* The kernel's masks, not sigprocmask()'s: musl's leaves its own
         * signals (32-34) out of the mask it returns, and restoring that
         * would unblock them where prebind blocks them. */
        uint64_t all[KERNEL_SIGSET_WORDS], mask[KERNEL_SIGSET_WORDS] = { 0 };
        pid_t pid;
        int err;

        /* No signal handler's frame may land on the child's stack (below
         * ours) until clone() returns: prebind has none, and blocks every
         * signal all the same, as posix_spawn() does. The child starts
         * with the mask blocked: each one sets its own, or execs or exits
         * without a handler. */
        memset(all, 0xff, sizeof all);
        (void) raw(SYS_rt_sigprocmask, SIG_BLOCK, all, mask, sizeof mask);
        // NOLINTNEXTLINE(performance-no-int-to-ptr): a stack address, below the frames in use
        pid = clone(fn, (void *) top, CLONE_VM | CLONE_VFORK | flags, arg);
        err = errno;
        (void) raw(SYS_rt_sigprocmask, SIG_SETMASK, mask, NULL, sizeof mask);

#ifdef CLONE_VFORK_ASAN
        /* The child's frames left their redzones poisoned below ours
         * (it exec'd or exited, never returned): cleared, as before any
         * function that does not return. */
        __asan_handle_no_return();
#endif
        return pid < 0 ? -err : pid;
}

/* -1: not known yet; 0: such a clone is a fork(); 1: it shares. */
static int clone_vm_shares = -1;

void clone_vm_learned(bool shares) {
        clone_vm_shares = shares;
}

static int clone_vm_probe(void *arg) {
        *(volatile int *) arg = 1;
        _exit(0);
}

bool clone_vm_shares_memory(void) {
        if (clone_vm_shares < 0) {
                volatile int written = 0;
                pid_t pid = clone_vfork(clone_vm_probe, (void *) &written, SIGCHLD);

                while (pid > 0 && waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                        ;
                clone_vm_shares = pid > 0 && written;
        }
        return clone_vm_shares == 1;
}
