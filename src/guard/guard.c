/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "fd.h"
#include "guard.h"
#include "log.h"
#include "macro.h"
#include "parse.h"
#include "process.h"
#include "signals.h"

/* How long prebind waits, on a clean exit, for the guard to be gone. */
#define GUARD_EXIT_WAIT_MS 2000
/* While COMMAND has its grace, how often the guard looks whether it (and
 * its group, for which there is no event) is gone. */
#define GUARD_POLL_MS 10
/* How long the guard waits for a lock file (GUARD_FILE_LOCK) that
 * another process holds. */
#define LOCK_WAIT_USEC (2 * USEC_PER_SEC)

enum guard_request {
        GUARD_WATCH = 1, /* pid, group; COMMAND's pidfd attached, if it has one */
        GUARD_UNWATCH,   /* pid */
        GUARD_FILE,      /* kind, path; an fd on the file once it exists */
        GUARD_FORGET,    /* path */
        GUARD_DONE,      /* prebind exits cleanly: so does the guard, doing nothing */
};

struct guard_header {
        uint32_t request; /* enum guard_request */
        uint32_t kind;    /* GUARD_FILE: enum guard_file_kind */
        int32_t pid;      /* GUARD_WATCH, GUARD_UNWATCH */
        uint32_t group;   /* GUARD_WATCH: pid leads a process group of its own */
};

/* One message: the header, then a NUL-terminated path for the file
 * requests. */
struct guard_message {
        struct guard_header h;
        char path[PATH_MAX + 16];
};

struct guard {
        int fd;    /* prebind's end of the socket pair */
        bool lost; /* a message could not be sent: said once, none sent after */
        const char *command_name;
};

/* ---- the guard process ------------------------------------------------------ */

struct guarded_file {
        char *path;
        enum guard_file_kind kind;
        int fd; /* on the file prebind made; -1 while only expected */
};

/* A COMMAND the guard stops: every generation alive (the serving one,
 * one starting beside it, those told to stop and still running). */
struct watched {
        pid_t pid;
        bool group; /* pid leads a process group of its own */
        int pidfd;  /* -1: none */
};

struct guard_state {
        pid_t prebind;
        const char *command_name;
        uint64_t grace_usec;
        struct watched *watched;
        size_t n_watched;
        struct guarded_file *files;
        size_t n_files;
};

static struct guarded_file *file_find(struct guard_state *st, const char *path) {
        for (size_t i = 0; i < st->n_files; i++)
                if (strcmp(st->files[i].path, path) == 0)
                        return &st->files[i];
        return NULL;
}

static void file_forget(struct guard_state *st, const char *path) {
        struct guarded_file *f = file_find(st, path);

        if (!f)
                return;
        if (f->fd >= 0)
                close(f->fd);
        free(f->path);
        *f = st->files[--st->n_files];
}

/* The array with room for one more element of size; or NULL, out of
 * memory in the guard: fd (what the new element would hold) is closed,
 * and the guard goes on with what it has (a file stays, a COMMAND has its
 * death signal alone). */
static void *grow_or_close(void *array, size_t n, size_t size, int fd) {
        void *grown = realloc(array, (n + 1) * size);

        if (!grown && fd >= 0)
                close(fd);
        return grown;
}

static void file_set(struct guard_state *st, enum guard_file_kind kind, const char *path, int fd) {
        struct guarded_file *f = file_find(st, path), *grown;

        if (!f) {
                grown = grow_or_close(st->files, st->n_files, sizeof *grown, fd);
                if (!grown)
                        return;
                st->files = grown;
                f = &st->files[st->n_files];
                *f = (struct guarded_file) { .path = strdup(path), .fd = -1 };
                if (!f->path) {
                        if (fd >= 0)
                                close(fd);
                        return;
                }
                st->n_files++;
        }
        if (f->fd >= 0)
                close(f->fd);
        f->kind = kind;
        f->fd = fd;
}

static struct watched *watched_find(struct guard_state *st, pid_t pid) {
        for (size_t i = 0; i < st->n_watched; i++)
                if (st->watched[i].pid == pid)
                        return &st->watched[i];
        return NULL;
}

static void unwatch(struct guard_state *st, pid_t pid) {
        struct watched *w = watched_find(st, pid);

        if (!w)
                return;
        if (w->pidfd >= 0)
                close(w->pidfd);
        *w = st->watched[--st->n_watched];
}

/* One more COMMAND to stop (or the same pid, told again). */
static void watch(struct guard_state *st, pid_t pid, bool group, int pidfd) {
        struct watched *grown;

        unwatch(st, pid);
        grown = grow_or_close(st->watched, st->n_watched, sizeof *grown, pidfd);
        if (!grown)
                return;
        st->watched = grown;
        st->watched[st->n_watched++] = (struct watched) { .pid = pid, .group = group, .pidfd = pidfd };
}

/* COMMAND's process group is signalled as a group only while it can be
 * no other: its number stays taken while it has a member, and Linux hands
 * out pids in turn (cyclically), so it comes back only after every other
 * pid has been given out. COMMAND alone is signalled through its pidfd,
 * which no reuse of its pid can fool. */
static void signal_command(const struct watched *w, int sig) {
        if (w->group)
                (void) kill(-w->pid, sig);
        else if (w->pidfd >= 0)
                (void) syscall(SYS_pidfd_send_signal, w->pidfd, sig, NULL, 0U);
        else
                (void) kill(w->pid, sig);
}

/* Has process group pgid a member that is not a zombie? kill(-pgid, 0)
 * counts zombies too, and those of a killed prebind wait for init to reap
 * them — for ever, where PID 1 does not reap (some containers). So the
 * members are looked up in /proc, each one's state and group from its
 * stat line (proc(5): after the ')' that ends the name). */
static bool group_has_live_member(pid_t pgid) {
        DIR *d;
        struct dirent *de;
        bool live = false;

        if (kill(-pgid, 0) < 0 && errno == ESRCH)
                return false;
        d = opendir("/proc");
        if (!d)
                return true;
        while (!live && (de = readdir(d))) {
                char path[64], line[512], *end, state;
                unsigned long pid;
                long ppid, pgrp;
                ssize_t k;
                int fd;

                if (parse_uint(de->d_name, 1, INT32_MAX, &pid) < 0)
                        continue;
                snprintf(path, sizeof path, "/proc/%lu/stat", pid);
                fd = open(path, O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                        continue;
                k = read(fd, line, sizeof line - 1);
                close(fd);
                if (k <= 0)
                        continue;
                line[k] = '\0';
                end = strrchr(line, ')');
                /* NOLINTNEXTLINE(cert-err34-c): the kernel wrote these numbers */
                if (end && sscanf(end + 1, " %c %ld %ld", &state, &ppid, &pgrp) == 3 && pgrp == (long) pgid &&
                    state != 'Z' && state != 'X')
                        live = true;
        }
        closedir(d);
        return live;
}

static bool command_gone(const struct watched *w) {
        struct pollfd p = { .fd = w->pidfd, .events = POLLIN };

        if (w->group)
                return !group_has_live_member(w->pid);
        /* The pidfd is readable once COMMAND has exited, zombie or not. */
        if (w->pidfd >= 0)
                return poll(&p, 1, 0) == 1;
        return kill(w->pid, 0) < 0 && errno == ESRCH;
}

/* Up to the grace for every COMMAND to end after SIGTERM, then SIGKILL
 * to each one left. */
static void wait_or_kill_commands(struct guard_state *st, uint64_t deadline) {
        for (;;) {
                for (size_t i = 0; i < st->n_watched;)
                        if (command_gone(&st->watched[i]))
                                unwatch(st, st->watched[i].pid);
                        else
                                i++;
                if (st->n_watched == 0)
                        return;
                if (now_usec() >= deadline)
                        break;
                (void) poll(NULL, 0, GUARD_POLL_MS);
        }
        for (size_t i = 0; i < st->n_watched; i++)
                signal_command(&st->watched[i], SIGKILL);
}

/* Remove a file prebind made, if it is still that one; or (expected)
 * one it was about to make, if no one else can have made what is there. */
static void file_remove(const struct guarded_file *f, bool expected) {
        struct stat ours, there;

        if ((f->fd < 0) != expected || lstat(f->path, &there) < 0)
                return;
        if (f->fd >= 0) {
                if (fstat(f->fd, &ours) == 0 && ours.st_dev == there.st_dev && ours.st_ino == there.st_ino)
                        (void) unlink(f->path);
                return;
        }
        /* Expected only: prebind died between choosing the name and
         * telling the guard what it made there. A temporary name is
         * prebind's own (random, created with O_EXCL); a socket file is
         * removed only if nobody listens on it, as prebind itself removes
         * a stale one before it binds. */
        if ((f->kind == GUARD_FILE_REGULAR && S_ISREG(there.st_mode)) ||
            (f->kind == GUARD_FILE_SOCKET && S_ISSOCK(there.st_mode) && unix_socket_is_stale(f->path)))
                (void) unlink(f->path);
}

/* The lock files, taken: prebind may have died holding one (then the
 * guard's copy of its open file holds it still, and takes it at once).
 * Bounded: a caller stopped while holding one must not keep COMMAND
 * running; past the bound the files are left to the next caller. */
static bool lock_files(const struct guard_state *st) {
        uint64_t deadline = now_usec() + LOCK_WAIT_USEC;

        for (size_t i = 0; i < st->n_files; i++) {
                const struct guarded_file *f = &st->files[i];

                if (f->kind != GUARD_FILE_LOCK || f->fd < 0)
                        continue;
                while (flock(f->fd, LOCK_EX | LOCK_NB) < 0) {
                        if ((errno != EWOULDBLOCK && errno != EINTR) || now_usec() >= deadline)
                                return false;
                        (void) poll(NULL, 0, GUARD_POLL_MS);
                }
        }
        return true;
}

/* Under the locks, the other files gone: a lock file goes only if no
 * socket file it guards is there (a new owner's would be, claimed
 * under this very lock file). */
static void remove_lock_files(const struct guard_state *st) {
        struct stat there;

        for (size_t i = 0; i < st->n_files; i++)
                if (st->files[i].kind == GUARD_FILE_SOCKET && lstat(st->files[i].path, &there) == 0)
                        return;
        for (size_t i = 0; i < st->n_files; i++)
                if (st->files[i].kind == GUARD_FILE_LOCK)
                        file_remove(&st->files[i], false);
}

/* What prebind made goes at once: no client finds the address of a
 * server that is stopping. Under the lock files, if any. */
static void remove_files(const struct guard_state *st) {
        bool locked = lock_files(st);

        for (size_t i = 0; i < st->n_files; i++) {
                enum guard_file_kind kind = st->files[i].kind;

                /* Without the lock, a socket file is left to the next
                 * caller, who replaces a stale one under it. */
                if (kind == GUARD_FILE_REGULAR || (kind == GUARD_FILE_SOCKET && locked))
                        file_remove(&st->files[i], false);
        }
        if (locked)
                remove_lock_files(st);
        for (size_t i = 0; i < st->n_files; i++)
                if (st->files[i].kind == GUARD_FILE_LOCK && st->files[i].fd >= 0)
                        (void) flock(st->files[i].fd, LOCK_UN);
}

/* prebind is dead: stop COMMAND and take back what prebind published. */
static void prebind_died(struct guard_state *st) {
        uint64_t deadline = now_usec() + st->grace_usec;

        for (size_t i = 0; i < st->n_watched; i++) {
                const struct watched *w = &st->watched[i];

                log_info("prebind (pid %d) was killed: stopping '%s' (pid %d%s)", (int) st->prebind, st->command_name,
                         (int) w->pid, w->group ? " and its process group" : "");
                signal_command(w, SIGTERM);
                /* Stopped members would not see it before SIGCONT. */
                if (w->group)
                        signal_command(w, SIGCONT);
        }
        remove_files(st);
        wait_or_kill_commands(st, deadline);
        /* After COMMAND: an expected socket file is judged by whether
         * anyone still listens on it. */
        for (size_t i = 0; i < st->n_files; i++)
                file_remove(&st->files[i], true);
}

static _Noreturn void guard_main(int sock, pid_t prebind, const char *command_name, uint64_t grace_usec) {
        struct guard_state st = {
                .prebind = prebind,
                .command_name = command_name,
                .grace_usec = grace_usec,
        };
        static struct guard_message m;

        for (;;) {
                size_t len;
                int fd = -1, n = fd_recv_message(sock, &m, sizeof m, &fd, 1, &len);
                const char *path = NULL;

                if (n == -EBADMSG)
                        continue;
                /* EOF (or the socket failing) with no GUARD_DONE first:
                 * prebind is gone. */
                if (n < 0 || len == 0)
                        break;
                if (len > sizeof m.h && ((char *) &m)[len - 1] == '\0')
                        path = m.path;
                switch (len >= sizeof m.h ? m.h.request : 0) {
                case GUARD_DONE:
                        _exit(0);
                case GUARD_WATCH:
                        watch(&st, m.h.pid, m.h.group != 0, fd);
                        fd = -1;
                        break;
                case GUARD_UNWATCH:
                        unwatch(&st, m.h.pid);
                        break;
                case GUARD_FILE:
                        if (path) {
                                file_set(&st, (enum guard_file_kind) m.h.kind, path, fd);
                                fd = -1;
                        }
                        break;
                case GUARD_FORGET:
                        if (path)
                                file_forget(&st, path);
                        break;
                default:
                        break;
                }
                if (fd >= 0)
                        close(fd);
        }
        prebind_died(&st);
        _exit(0);
}

/* In the guard, first: /dev/null for stdin and stdout (a reader of
 * prebind's stdout waits for no guard), stderr kept for the message, the
 * socket at fd 3 and nothing else of prebind's; the signals it answers.
 * Here, not in the intermediate: prebind waits for the intermediate, not
 * for this. */
static void guard_detach(int *sock) {
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);

        if (null >= 0) {
                (void) dup2(null, STDIN_FILENO);
                (void) dup2(null, STDOUT_FILENO);
        }
        if (*sock != 3 && dup2(*sock, 3) == 3)
                *sock = 3;
        (void) fd_range((unsigned) *sock + 1, ~0U, FD_CLOSE);
        signals_reset(false);
        /* The guard writes to stderr, whose reader may be gone; and only a
         * kill() can send it anything else. SIGTERM stays fatal. */
        signal(SIGPIPE, SIG_IGN);
        signal(SIGHUP, SIG_IGN);
        signal(SIGINT, SIG_IGN);
        signal(SIGQUIT, SIG_IGN);
        (void) prctl(PR_SET_NAME, "prebind-guard");
}

/* What the intermediate shares with prebind (CLONE_VM), which waits for
 * it to exit (CLONE_VFORK). */
struct guard_launch {
        int sock; /* the guard's end */
        pid_t prebind;
        const char *command_name;
        uint64_t grace_usec;
        int result; /* 0: the guard runs; or -errno */
};

/* The intermediate: on prebind's memory, prebind stopped until it exits,
 * so only system calls (fork() copies prebind's memory for the guard).
 * It makes the session (it is no group leader): a kill of prebind's
 * process group misses the guard, and no terminal is its controlling one
 * (no SIGTTOU for its one message, no hangup). Then it forks the guard,
 * which is thus prebind's grandchild: prebind's only children stay COMMAND
 * (and its probes), and a kill of prebind's process tree does not reach
 * it. */
static int intermediate(void *arg) {
        struct guard_launch *l = arg;
        pid_t pid;

        if (setsid() < 0) {
                l->result = -errno;
                _exit(EXIT_FAILURE);
        }
        pid = fork();
        if (pid == 0) {
                int sock = l->sock;

                guard_detach(&sock);
                guard_main(sock, l->prebind, l->command_name, l->grace_usec);
        }
        l->result = pid < 0 ? -errno : 0;
        _exit(pid < 0 ? EXIT_FAILURE : EXIT_SUCCESS);
}

int guard_start(const char *command_name, uint64_t grace_usec, struct guard **ret) {
        _cleanup_free_ struct guard *g = calloc(1, sizeof *g);
        /* The intermediate's stack: it calls setsid() and fork() only. */
        char stack[8192] __attribute__((aligned(16)));
        struct guard_launch l = {
                .prebind = getpid(),
                .command_name = command_name,
                .grace_usec = grace_usec,
                .result = -ECHILD,
        };
        int pair[2], r;
        pid_t mid, waited = -1;

        if (!g)
                return -ENOMEM;
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
                // cppcheck-suppress memleak ; g is _cleanup_free_, which cppcheck does not follow
                return -errno;
        l.sock = pair[1];
        /* No copy of prebind's memory for the intermediate, and no word
         * from the guard to wait for: when clone() returns, the
         * intermediate is gone and the guard holds its end of the socket
         * (what prebind sends meanwhile waits there for it). */
        mid = clone(intermediate, stack + sizeof stack, CLONE_VM | CLONE_VFORK | SIGCHLD, &l);
        r = mid < 0 ? -errno : l.result;
        close(pair[1]);
        /* ECHILD: SIGCHLD is ignored (inherited), and the kernel reaped it. */
        while (mid > 0 && (waited = waitpid(mid, NULL, 0)) < 0 && errno == EINTR)
                ;
        /* The intermediate's word never came back: it ran on a copy of
         * prebind's memory (valgrind makes such a clone a fork(), and
         * gives it an exit status of its own when that copy leaks). Gone,
         * it holds no end of the socket: whether the guard runs is
         * whether anyone holds the other end. */
        if (mid > 0 && l.result == -ECHILD && waited == mid) {
                struct pollfd p = { .fd = pair[0], .events = POLLIN };

                clone_vm_learned(false);
                r = poll(&p, 1, 0) == 1 && (p.revents & POLLHUP) ? -ECHILD : 0;
        } else if (mid > 0)
                clone_vm_learned(true);
        if (r < 0) {
                close(pair[0]);
                return r;
        }
        g->fd = pair[0];
        g->command_name = command_name;
        *ret = TAKE_PTR(g);
        return 0;
}

/* ---- prebind's side ------------------------------------------------------- */

static void guard_send(struct guard *g, enum guard_request request, const struct guard_header *h, const char *path,
                       int fd) {
        static struct guard_message m;
        size_t len = sizeof m.h;
        int r;

        if (!g || g->lost)
                return;
        m.h = h ? *h : (struct guard_header) { 0 };
        m.h.request = request;
        if (path) {
                size_t n = strlen(path);

                /* Longer than PATH_MAX: prebind could not make it either. */
                if (n >= sizeof m.path)
                        return;
                memcpy(m.path, path, n + 1);
                len += n + 1;
        }
        /* Never blocking: a stopped guard must not stop prebind. */
        r = fd_send_message(g->fd, &m, len, &fd, fd >= 0 ? 1 : 0, MSG_DONTWAIT);
        if (r < 0) {
                g->lost = true;
                log_error_errno(r,
                                "the guard that stops '%s' if prebind is killed is not answering (%m): "
                                "'%s' could outlive a killed prebind",
                                g->command_name, g->command_name);
        }
}

void guard_watch(struct guard *g, pid_t pid, int pidfd, bool group) {
        struct guard_header h = { .pid = pid, .group = group };

        guard_send(g, GUARD_WATCH, &h, NULL, pidfd);
}

void guard_watch_self(const struct guard *g, bool group) {
        struct guard_header h = { .request = GUARD_WATCH, .pid = getpid(), .group = group };
        int pidfd;

        if (!g || g->lost)
                return;
        pidfd = (int) syscall(SYS_pidfd_open, h.pid, 0U);
        (void) fd_send_message(g->fd, &h, sizeof h, &pidfd, pidfd >= 0 ? 1 : 0, MSG_DONTWAIT);
        if (pidfd >= 0)
                close(pidfd);
}

void guard_unwatch(struct guard *g, pid_t pid) {
        struct guard_header h = { .pid = pid };

        guard_send(g, GUARD_UNWATCH, &h, NULL, -1);
}

void guard_file_expected(struct guard *g, enum guard_file_kind kind, const char *path) {
        struct guard_header h = { .kind = kind };

        guard_send(g, GUARD_FILE, &h, path, -1);
}

void guard_file_created(struct guard *g, enum guard_file_kind kind, const char *path, int fd) {
        struct guard_header h = { .kind = kind };

        guard_send(g, GUARD_FILE, &h, path, fd);
}

void guard_file_created_at(struct guard *g, enum guard_file_kind kind, const char *path, dev_t dev, ino_t ino) {
        struct stat st;
        int fd;

        if (!g || g->lost)
                return;
        /* An O_PATH fd: it opens a socket file too, and holds the inode,
         * so that its number is not reused while the guard compares. */
        fd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == dev && st.st_ino == ino)
                guard_file_created(g, kind, path, fd);
        else
                guard_file_forget(g, path);
        if (fd >= 0)
                close(fd);
}

void guard_file_forget(struct guard *g, const char *path) {
        guard_send(g, GUARD_FORGET, NULL, path, -1);
}

void guard_free(struct guard *g) {
        struct pollfd p;

        if (!g)
                return;
        guard_send(g, GUARD_DONE, NULL, NULL, -1);
        /* The guard's end closes when it exits: wait for that, so that no
         * guard outlives a prebind that exited. Bounded: a stopped guard
         * exits when it is continued, having GUARD_DONE queued. */
        p = (struct pollfd) { .fd = g->fd, .events = POLLIN };
        if (!g->lost)
                while (poll(&p, 1, GUARD_EXIT_WAIT_MS) < 0 && errno == EINTR)
                        ;
        close(g->fd);
        free(g);
}
