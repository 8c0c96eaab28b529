/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
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
#include "raw.h"

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
        void *region; /* the guard's mapping, while it runs on prebind's memory */
};

/* ---- the guard process ------------------------------------------------------ */

/* The guard runs on prebind's memory (clone(CLONE_VM): no copy of it to
 * make at every start, none to fault in page by page, none to free at
 * exit), beside prebind and with its thread pointer. So it calls no C
 * library function that keeps state — only string and memory functions
 * —, makes its system calls with raw() (raw.h: errno stays prebind's),
 * and keeps everything in a mapping of its own (struct guard_region),
 * its stack below its state, its tables there or in mappings it grows
 * itself. Where such a clone is not possible (raw.h has no system call sequence,
 * kcmp(2) is refused, valgrind) the same code runs in a fork(). */

struct guarded_file {
        char path[PATH_MAX];
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

/* An array: in room of the guard's region at first (if it has any),
 * then in a mapping of its own, grown by mremap(2). */
struct table {
        void *items;
        size_t n, bytes;
        bool mapped; /* items is a mapping of its own */
};

/* COMMANDs watched at once without a mapping of their own: the serving
 * one and those of a reload or two. */
#define WATCHED_INLINE 4

struct guard_state {
        pid_t prebind;
        bool quiet; /* -q: no message */
        uint64_t grace_usec;
        struct table watched; /* struct watched */
        struct table files;   /* struct guarded_file */
        struct watched watched_inline[WATCHED_INLINE];
        char command_name[LOG_QUOTE_SIZE];
};

/* The guard's stack, below its state in the same mapping. Sized so that
 * its top and what is used at every start (the state up to the first
 * bytes of a message) share one page: a guard that is never needed
 * costs prebind one page of memory. What lies deeper is touched only by
 * a deep call (none while prebind lives). */
#define GUARD_STACK_SIZE (13 * 4096 + 3072)

/* What the guard has: one mapping, its stack at the bottom, growing
 * down from its state. */
struct guard_region {
        char stack[GUARD_STACK_SIZE];
        int sock;       /* the guard's end */
        int result;     /* the intermediate's word: 0, the guard runs; or -errno */
        bool may_share; /* prebind's kernel keeps a guard on its memory alive (guard_may_share()) */
        bool shared;    /* the guard runs on prebind's memory */
        struct guard_state st;
        struct guard_message m;
        char dirents[4096];
};
#define GUARD_REGION_SIZE ((sizeof(struct guard_region) + 4095) & ~(size_t) 4095)
_Static_assert(offsetof(struct guard_region, sock) % 16 == 0, "the guard's stack starts 16-byte aligned");
_Static_assert(offsetof(struct guard_region, m.path) % 4096 < 4096 - 256 &&
                       offsetof(struct guard_region, m.path) / 4096 == offsetof(struct guard_region, sock) / 4096,
               "the guard's state, a message's header and a short path share the page of its stack's top");

/* linux/kcmp.h's, which musl's toolchain does not have. */
#define KCMP_VM_ 1

/* The sanitizers keep each thread's state (AddressSanitizer its stack
 * bounds) at the thread pointer, which the guard would share with
 * prebind: under them, the guard is a fork(). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define GUARD_MAY_SHARE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define GUARD_MAY_SHARE 0
#endif
#endif
#ifndef GUARD_MAY_SHARE
#define GUARD_MAY_SHARE RAW_SYSCALL_INLINE
#endif

static uint64_t guard_now_usec(void) {
        struct timespec ts = { 0 };

        (void) raw(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * USEC_PER_SEC + (uint64_t) ts.tv_nsec / 1000;
}

static void guard_sleep_ms(int ms) {
        struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long) (ms % 1000) * 1000000L };

        (void) raw(SYS_ppoll, NULL, 0, &ts, NULL, 0);
}

static int guard_lstat(const char *path, struct stat *st) {
        return (int) raw(SYS_newfstatat, AT_FDCWD, path, st, AT_SYMLINK_NOFOLLOW);
}

static void guard_close(int fd) {
        if (fd >= 0)
                (void) raw(SYS_close, fd);
}

/* Room for one more item of size in t; false (the guard goes on with
 * what it has: a file stays, a COMMAND has its death signal alone). */
static bool table_grow(struct table *t, size_t size) {
        size_t want = (t->n + 1) * size, bytes;
        long p;

        if (want <= t->bytes)
                return true;
        bytes = t->mapped ? 2 * t->bytes : (size_t) 4096 * ((want + 4095) / 4096);
        if (bytes < want)
                bytes = want;
        p = t->mapped ? raw(SYS_mremap, t->items, t->bytes, bytes, MREMAP_MAYMOVE)
                      : raw(SYS_mmap, NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p < 0 && p > -4096)
                return false;
        /* Out of the region's room: what was there comes along. */
        if (!t->mapped && t->n > 0)
                memcpy((void *) p, t->items, t->n * size); // NOLINT(performance-no-int-to-ptr)
        t->items = (void *) p; // NOLINT(performance-no-int-to-ptr): mmap(2)'s result is an address
        t->bytes = bytes;
        t->mapped = true;
        return true;
}

static void table_free(struct table *t) {
        if (t->mapped)
                (void) raw(SYS_munmap, t->items, t->bytes);
        *t = (struct table) { 0 };
}

/* s (put), or the decimal v (put_int), at out + *at, *at moved past it;
 * bounded by size. */
static void put(char *out, size_t size, size_t *at, const char *s) {
        while (*s && *at + 1 < size)
                out[(*at)++] = *s++;
}

static void put_int(char *out, size_t size, size_t *at, int v) {
        char digits[16];
        size_t i = sizeof digits - 1;
        unsigned u = v < 0 ? 0U - (unsigned) v : (unsigned) v;

        digits[i] = '\0';
        do
                digits[--i] = (char) ('0' + u % 10);
        while ((u /= 10) > 0);
        if (v < 0)
                digits[--i] = '-';
        put(out, size, at, digits + i);
}

#define FILES(st) ((struct guarded_file *) (st)->files.items)
#define WATCHED(st) ((struct watched *) (st)->watched.items)

static struct guarded_file *file_find(struct guard_state *st, const char *path) {
        for (size_t i = 0; i < st->files.n; i++)
                if (strcmp(FILES(st)[i].path, path) == 0)
                        return &FILES(st)[i];
        return NULL;
}

static void file_forget(struct guard_state *st, const char *path) {
        struct guarded_file *f = file_find(st, path);

        if (!f)
                return;
        guard_close(f->fd);
        *f = FILES(st)[--st->files.n];
}

static void file_set(struct guard_state *st, enum guard_file_kind kind, const char *path, int fd) {
        struct guarded_file *f = file_find(st, path);
        size_t n = strlen(path);

        if (!f) {
                if (n >= sizeof f->path || !table_grow(&st->files, sizeof *f)) {
                        guard_close(fd);
                        return;
                }
                f = &FILES(st)[st->files.n++];
                memcpy(f->path, path, n + 1);
                f->fd = -1;
        }
        guard_close(f->fd);
        f->kind = kind;
        f->fd = fd;
}

static struct watched *watched_find(struct guard_state *st, pid_t pid) {
        for (size_t i = 0; i < st->watched.n; i++)
                if (WATCHED(st)[i].pid == pid)
                        return &WATCHED(st)[i];
        return NULL;
}

static void unwatch(struct guard_state *st, pid_t pid) {
        struct watched *w = watched_find(st, pid);

        if (!w)
                return;
        guard_close(w->pidfd);
        *w = WATCHED(st)[--st->watched.n];
}

/* One more COMMAND to stop (or the same pid, told again). */
static void watch(struct guard_state *st, pid_t pid, bool group, int pidfd) {
        unwatch(st, pid);
        if (!table_grow(&st->watched, sizeof(struct watched))) {
                guard_close(pidfd);
                return;
        }
        WATCHED(st)[st->watched.n++] = (struct watched) { .pid = pid, .group = group, .pidfd = pidfd };
}

/* COMMAND's process group is signalled as a group only while it can be
 * no other: its number stays taken while it has a member, and Linux hands
 * out pids in turn (cyclically), so it comes back only after every other
 * pid has been given out. COMMAND alone is signalled through its pidfd,
 * which no reuse of its pid can fool. */
static void signal_command(const struct watched *w, int sig) {
        if (w->group)
                (void) raw(SYS_kill, -w->pid, sig);
        else if (w->pidfd >= 0)
                (void) raw(SYS_pidfd_send_signal, w->pidfd, sig, NULL, 0);
        else
                (void) raw(SYS_kill, w->pid, sig);
}

/* The decimal number at *p (moved past it), after spaces; false if none. */
static bool scan_long(const char **p, long *ret) {
        const char *s = *p;
        bool negative;
        long v = 0;

        while (*s == ' ')
                s++;
        negative = *s == '-';
        s += negative;
        if (*s < '0' || *s > '9')
                return false;
        while (*s >= '0' && *s <= '9' && v < INT32_MAX)
                v = v * 10 + (*s++ - '0');
        *p = s;
        *ret = negative ? -v : v;
        return true;
}

/* Is the process of /proc/<name> a member of pgid that is not a zombie?
 * Its stat line says (proc(5)): after the ')' that ends the name, its
 * state, parent and group. */
static bool is_live_member(const char *name, pid_t pgid) {
        char path[64], line[512];
        const char *p;
        long ppid, pgrp;
        size_t n = strlen(name), at = 0;
        long k;
        int fd;
        char state;

        if (n == 0 || n > 10 || strspn(name, "0123456789") != n)
                return false;
        put(path, sizeof path, &at, "/proc/");
        put(path, sizeof path, &at, name);
        put(path, sizeof path, &at, "/stat");
        path[at] = '\0';
        fd = (int) raw(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return false;
        k = raw(SYS_read, fd, line, sizeof line - 1);
        guard_close(fd);
        if (k <= 0)
                return false;
        line[k] = '\0';
        p = strrchr(line, ')');
        if (!p || p[1] != ' ' || !p[2])
                return false;
        state = p[2];
        p += 3;
        return scan_long(&p, &ppid) && scan_long(&p, &pgrp) && pgrp == (long) pgid && state != 'Z' && state != 'X';
}

/* getdents64(2)'s record: dirent.h's struct dirent64 is not in every C
 * library's default view (musl 1.2.4 on). */
struct linux_dirent64 {
        uint64_t d_ino;
        int64_t d_off;
        unsigned short d_reclen;
        unsigned char d_type;
        char d_name[];
};

/* fn(name, the directory's fd, arg) for each entry of the directory at
 * path until it returns true. Returns 1 if it did, 0 if not, -errno if
 * path could not be opened. buf: size bytes for the records. */
static int dir_each(const char *path, char *buf, size_t size, bool (*fn)(const char *, int, void *), void *arg) {
        int d = (int) raw(SYS_openat, AT_FDCWD, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC), r = 0;
        long k;

        if (d < 0)
                return d;
        while (r == 0 && (k = raw(SYS_getdents64, d, buf, size)) > 0)
                for (long o = 0; o < k && r == 0; o += ((const struct linux_dirent64 *) (buf + o))->d_reclen)
                        r = fn(((const struct linux_dirent64 *) (buf + o))->d_name, d, arg);
        guard_close(d);
        return r;
}

static bool is_live_member_of(const char *name, int dir, void *pgid) {
        return is_live_member(name, *(pid_t *) pgid);
}

/* Has process group pgid a member that is not a zombie? kill(-pgid, 0)
 * counts zombies too, and those of a killed prebind wait for init to reap
 * them — for ever, where PID 1 does not reap (some containers). So the
 * members are looked up in /proc. */
static bool group_has_live_member(pid_t pgid, char *buf, size_t size) {
        if (raw(SYS_kill, -pgid, 0) == -ESRCH)
                return false;
        /* No /proc: alive, for all the guard can tell. */
        return dir_each("/proc", buf, size, is_live_member_of, &pgid) != 0;
}

static bool command_gone(struct guard_region *R, const struct watched *w) {
        struct pollfd p = { .fd = w->pidfd, .events = POLLIN };
        struct timespec zero = { 0 };

        if (w->group)
                return !group_has_live_member(w->pid, R->dirents, sizeof R->dirents);
        /* The pidfd is readable once COMMAND has exited, zombie or not. */
        if (w->pidfd >= 0)
                return raw(SYS_ppoll, &p, 1, &zero, NULL, 0) == 1;
        return raw(SYS_kill, w->pid, 0) == -ESRCH;
}

/* Up to the grace for every COMMAND to end after SIGTERM, then SIGKILL
 * to each one left. */
static void wait_or_kill_commands(struct guard_region *R, uint64_t deadline) {
        struct guard_state *st = &R->st;

        for (;;) {
                for (size_t i = 0; i < st->watched.n;)
                        if (command_gone(R, &WATCHED(st)[i]))
                                unwatch(st, WATCHED(st)[i].pid);
                        else
                                i++;
                if (st->watched.n == 0)
                        return;
                if (guard_now_usec() >= deadline)
                        break;
                guard_sleep_ms(GUARD_POLL_MS);
        }
        for (size_t i = 0; i < st->watched.n; i++)
                signal_command(&WATCHED(st)[i], SIGKILL);
}

/* Remove a file prebind made, if it is still that one; or (expected)
 * one it was about to make, if no one else can have made what is there. */
static void file_remove(const struct guarded_file *f, bool expected) {
        /* Zeroed: the kernel's writes are unseen by the analyzer (raw()). */
        struct stat ours = { 0 }, there = { 0 };

        if ((f->fd < 0) != expected || guard_lstat(f->path, &there) < 0)
                return;
        if (f->fd >= 0) {
                if (raw(SYS_newfstatat, f->fd, "", &ours, AT_EMPTY_PATH) == 0 && ours.st_dev == there.st_dev &&
                    ours.st_ino == there.st_ino)
                        (void) raw(SYS_unlinkat, AT_FDCWD, f->path, 0);
                return;
        }
        /* Expected only: prebind died between choosing the name and
         * telling the guard what it made there. A temporary name is
         * prebind's own (random, created with O_EXCL); a socket file is
         * removed only if nobody listens on it, as prebind itself removes
         * a stale one before it binds. */
        if ((f->kind == GUARD_FILE_REGULAR && S_ISREG(there.st_mode)) ||
            (f->kind == GUARD_FILE_SOCKET && S_ISSOCK(there.st_mode) && unix_socket_is_stale(f->path)))
                (void) raw(SYS_unlinkat, AT_FDCWD, f->path, 0);
}

/* The lock files, taken: prebind may have died holding one (then the
 * guard's copy of its open file holds it still, and takes it at once).
 * Bounded: a caller stopped while holding one must not keep COMMAND
 * running; past the bound the files are left to the next caller. */
static bool lock_files(struct guard_state *st) {
        uint64_t deadline = guard_now_usec() + LOCK_WAIT_USEC;

        for (size_t i = 0; i < st->files.n; i++) {
                const struct guarded_file *f = &FILES(st)[i];
                long r;

                if (f->kind != GUARD_FILE_LOCK || f->fd < 0)
                        continue;
                while ((r = raw(SYS_flock, f->fd, LOCK_EX | LOCK_NB)) < 0) {
                        if ((r != -EWOULDBLOCK && r != -EINTR) || guard_now_usec() >= deadline)
                                return false;
                        guard_sleep_ms(GUARD_POLL_MS);
                }
        }
        return true;
}

/* Under the locks, the other files gone: a lock file goes only if no
 * socket file it guards is there (a new owner's would be, claimed
 * under this very lock file). */
static void remove_lock_files(struct guard_state *st) {
        struct stat there;

        for (size_t i = 0; i < st->files.n; i++)
                if (FILES(st)[i].kind == GUARD_FILE_SOCKET && guard_lstat(FILES(st)[i].path, &there) == 0)
                        return;
        for (size_t i = 0; i < st->files.n; i++)
                if (FILES(st)[i].kind == GUARD_FILE_LOCK)
                        file_remove(&FILES(st)[i], false);
}

/* What prebind made goes at once: no client finds the address of a
 * server that is stopping. Under the lock files, if any. */
static void remove_files(struct guard_state *st) {
        bool locked = lock_files(st);

        for (size_t i = 0; i < st->files.n; i++) {
                enum guard_file_kind kind = FILES(st)[i].kind;

                /* Without the lock, a socket file is left to the next
                 * caller, who replaces a stale one under it. */
                if (kind == GUARD_FILE_REGULAR || (kind == GUARD_FILE_SOCKET && locked))
                        file_remove(&FILES(st)[i], false);
        }
        if (locked)
                remove_lock_files(st);
        for (size_t i = 0; i < st->files.n; i++)
                if (FILES(st)[i].kind == GUARD_FILE_LOCK && FILES(st)[i].fd >= 0)
                        (void) raw(SYS_flock, FILES(st)[i].fd, LOCK_UN);
}

/* As log_info() says it ("prebind: ...", control characters escaped),
 * written only if stderr takes it at once: its reader may be gone or
 * stalled, and COMMAND must be stopped all the same. */
static void say_stopping(const struct guard_state *st, const struct watched *w) {
        char line[LOG_QUOTE_SIZE * 4 + 160];
        size_t at = 0;
        struct pollfd p = { .fd = STDERR_FILENO, .events = POLLOUT };
        /* Bounded, not zero: a terminal is not writable while another
         * writer holds it, and the shell that ran prebind writes its
         * "Killed" line at this very moment (a zero wait lost the line,
         * once in a CI run). A reader that is gone costs 100 ms. */
        struct timespec wait = { .tv_nsec = 100 * 1000 * 1000 };

        if (st->quiet)
                return;
        put(line, sizeof line, &at, "prebind: prebind (pid ");
        put_int(line, sizeof line, &at, (int) st->prebind);
        put(line, sizeof line, &at, ") was killed: stopping '");
        log_escape_controls(st->command_name, line + at, sizeof line - at - 64);
        at += strlen(line + at);
        put(line, sizeof line, &at, "' (pid ");
        put_int(line, sizeof line, &at, (int) w->pid);
        put(line, sizeof line, &at, w->group ? " and its process group)\n" : ")\n");
        if (raw(SYS_ppoll, &p, 1, &wait, NULL, 0) == 1 && !(p.revents & (POLLERR | POLLHUP | POLLNVAL)))
                (void) raw(SYS_write, STDERR_FILENO, line, at);
}

/* prebind is dead: stop COMMAND and take back what prebind published. */
static void prebind_died(struct guard_region *R) {
        struct guard_state *st = &R->st;
        uint64_t deadline = guard_now_usec() + st->grace_usec;

        for (size_t i = 0; i < st->watched.n; i++) {
                const struct watched *w = &WATCHED(st)[i];

                say_stopping(st, w);
                signal_command(w, SIGTERM);
                /* Stopped members would not see it before SIGCONT. */
                if (w->group)
                        signal_command(w, SIGCONT);
        }
        remove_files(st);
        wait_or_kill_commands(R, deadline);
        /* After COMMAND: an expected socket file is judged by whether
         * anyone still listens on it. */
        for (size_t i = 0; i < st->files.n; i++)
                file_remove(&FILES(st)[i], true);
}

/* prebind exited cleanly: nothing to do. What the guard mapped goes
 * (on prebind's memory, prebind unmaps the region once it is gone). */
static _Noreturn void guard_exit(struct guard_region *R) {
        table_free(&R->st.watched);
        table_free(&R->st.files);
        for (;;)
                (void) raw(SYS_exit_group, 0);
}

static _Noreturn void guard_main(struct guard_region *R) {
        struct guard_message *m = &R->m;

        for (;;) {
                size_t len;
                int fd = -1, n = fd_recv_message(R->sock, m, sizeof *m, &fd, 1, &len);
                const char *path = NULL;

                if (n == -EBADMSG)
                        continue;
                /* EOF (or the socket failing) with no GUARD_DONE first:
                 * prebind is gone. */
                if (n < 0 || len == 0)
                        break;
                if (len > sizeof m->h && ((char *) m)[len - 1] == '\0')
                        path = m->path;
                switch (len >= sizeof m->h ? m->h.request : 0) {
                case GUARD_DONE:
                        guard_exit(R);
                case GUARD_WATCH:
                        watch(&R->st, m->h.pid, m->h.group != 0, fd);
                        fd = -1;
                        break;
                case GUARD_UNWATCH:
                        unwatch(&R->st, m->h.pid);
                        break;
                case GUARD_FILE:
                        if (path) {
                                file_set(&R->st, (enum guard_file_kind) m->h.kind, path, fd);
                                fd = -1;
                        }
                        break;
                case GUARD_FORGET:
                        if (path)
                                file_forget(&R->st, path);
                        break;
                default:
                        break;
                }
                guard_close(fd);
        }
        prebind_died(R);
        guard_exit(R);
}

static bool close_above(const char *name, int dir, void *last_kept) {
        long fd = 0;

        if (scan_long(&name, &fd) && !*name && fd > *(int *) last_kept && fd != dir)
                guard_close((int) fd);
        return false;
}

#if RAW_SYSCALL_INLINE
/* The kernel's struct sigaction and mask, x86-64's and arm64's (raw.h's
 * architectures): the guard may be on prebind's memory there. */
struct kernel_sigaction {
        void (*handler)(int);
        unsigned long flags;
        void (*restorer)(void);
        uint64_t mask;
};

static void guard_signal(int sig, void (*handler)(int)) {
        struct kernel_sigaction a = { .handler = handler };

        (void) raw(SYS_rt_sigaction, sig, &a, NULL, sizeof a.mask);
}

static void guard_unblock_all(void) {
        uint64_t none = 0;

        (void) raw(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, sizeof none);
}
#else
/* Elsewhere (MIPS's masks are 128 bits, its struct another) the guard is
 * a fork() (GUARD_MAY_SHARE): the C library's calls are its own. */
static void guard_signal(int sig, void (*handler)(int)) {
        (void) signal(sig, handler);
}

static void guard_unblock_all(void) {
        sigset_t none;

        sigemptyset(&none);
        (void) sigprocmask(SIG_SETMASK, &none, NULL);
}
#endif

/* In the guard, first: /dev/null for stdin and stdout (a reader of
 * prebind's stdout waits for no guard), stderr kept for the message, the
 * socket at fd 3 and nothing else of prebind's; every signal's default
 * (a handler of prebind's would run on prebind's memory), but for those
 * below, and none blocked. Here, not in the intermediate: prebind waits
 * for the intermediate, not for this. */
static void guard_detach(struct guard_region *R) {
        static const int ignored[] = { SIGPIPE, SIGTTOU, SIGTTIN, SIGTSTP, SIGHUP, SIGINT, SIGQUIT };
        int null = (int) raw(SYS_openat, AT_FDCWD, "/dev/null", O_RDWR | O_CLOEXEC);

        if (null >= 0) {
                (void) raw(SYS_dup3, null, STDIN_FILENO, 0);
                (void) raw(SYS_dup3, null, STDOUT_FILENO, 0);
        }
        if (R->sock != 3 && raw(SYS_dup3, R->sock, 3, 0) == 3)
                R->sock = 3;
        /* Kernels before 5.11 (and valgrind before 3.20): each fd listed. */
        if (raw(SYS_close_range, R->sock + 1, ~0U, 0) < 0)
                (void) dir_each("/proc/self/fd", R->dirents, sizeof R->dirents, close_above, &R->sock);
        for (int sig = 1; sig < NSIG; sig++)
                if (sig != SIGKILL && sig != SIGSTOP)
                        guard_signal(sig, SIG_DFL);
        /* The guard writes to stderr, whose reader may be gone, or which
         * may be the terminal of its session, its group a background one
         * (with TOSTOP, the write proceeds only if SIGTTOU is ignored;
         * else it fails, or stops the guard if a subreaper of that
         * session adopted it); a process of the session may make its
         * group the terminal's foreground one (tcsetpgrp()), whose ^Z
         * would stop it. Only a kill() sends it anything else: SIGTERM
         * stays fatal. */
        for (size_t i = 0; i < ELEMENTSOF(ignored); i++)
                guard_signal(ignored[i], SIG_IGN);
        guard_unblock_all();
        (void) raw(SYS_prctl, PR_SET_NAME, "prebind-guard", 0, 0, 0);
}

static int guard_entry(void *arg) {
        struct guard_region *R = arg;

        guard_detach(R);
        guard_main(R);
}

/* The intermediate: on prebind's memory, prebind stopped until it exits.
 * It makes a process group of its own, for the guard to be born in: a
 * kill of prebind's process group misses the guard, and a terminal's
 * signals (its foreground group's) never reach it. Not a session: the
 * kernel gives each one a scheduling group (autogroup), 14 us to make
 * and more to free at every start, for nothing the guard needs (it
 * ignores SIGHUP and SIGTTOU, and reads no terminal). Then it starts the guard,
 * which is thus prebind's grandchild: prebind's only children stay COMMAND
 * (and its probes), and a kill of prebind's process tree does not reach
 * it. The guard runs on prebind's memory where this one does (kcmp(2)
 * says so: not under valgrind, which makes this clone a fork) and may
 * (GUARD_MAY_SHARE); else it is a fork(). */
static int intermediate(void *arg) {
        struct guard_region *R = arg;
        pid_t pid = -1;

        if (setpgid(0, 0) < 0) {
                R->result = -errno;
                _exit(EXIT_FAILURE);
        }
        R->shared = GUARD_MAY_SHARE && R->may_share && raw(SYS_kcmp, getpid(), R->st.prebind, KCMP_VM_, 0, 0) == 0;
        if (R->shared)
                pid = clone(guard_entry, &R->sock, CLONE_VM | SIGCHLD, R);
        else if ((pid = fork()) == 0)
                (void) guard_entry(R);
        R->result = pid < 0 ? -errno : 0;
        _exit(pid < 0 ? EXIT_FAILURE : EXIT_SUCCESS);
}

/* Where a guard on prebind's memory outlives prebind's deaths but one.
 * Before Linux 5.16 a core dump killed every process on the dumping one's
 * memory (zap_threads()): a crash of prebind would take the guard along.
 * The one left, on every kernel: the OOM killer kills every process on
 * its victim's memory (README, "Not even when prebind is killed"). */
static bool guard_may_share(void) {
        static int known = -1;

        if (known < 0) {
                struct utsname u;
                unsigned long major = 0, minor = 0;
                const char *end;

                if (uname(&u) == 0) {
                        major = parse_leading_uint(u.release, &end);
                        if (*end == '.')
                                minor = parse_leading_uint(end + 1, NULL);
                }
                known = major > 5 || (major == 5 && minor >= 16);
        }
        return known;
}

int guard_start(const char *command_name, uint64_t grace_usec, struct guard **ret) {
        _cleanup_free_ struct guard *g = calloc(1, sizeof *g);
        struct guard_region *R;
        const char *quoted;
        int pair[2], r;
        pid_t mid, waited = -1;

        if (!g)
                return -ENOMEM;
        R = mmap(NULL, GUARD_REGION_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
        if (R == MAP_FAILED)
                // cppcheck-suppress memleak ; g is _cleanup_free_, which cppcheck does not follow
                return -errno;
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0) {
                r = -errno;
                munmap(R, GUARD_REGION_SIZE);
                // cppcheck-suppress memleak ; g is _cleanup_free_, which cppcheck does not follow
                return r;
        }
        R->sock = pair[1];
        R->st.watched = (struct table) { .items = R->st.watched_inline, .bytes = sizeof R->st.watched_inline };
        R->result = -ECHILD;
        R->st.prebind = getpid();
        R->st.grace_usec = grace_usec;
        R->st.quiet = log_get_level() < LOG_LEVEL_INFO;
        R->may_share = guard_may_share();
        quoted = log_shorten(command_name, R->st.command_name);
        if (quoted != R->st.command_name)
                memcpy(R->st.command_name, quoted, strlen(quoted) + 1);
        /* No copy of prebind's memory for the intermediate, and no word
         * from the guard to wait for: when clone() returns, the
         * intermediate is gone and the guard holds its end of the socket
         * (what prebind sends meanwhile waits there for it). */
        mid = clone_vfork(intermediate, R, SIGCHLD);
        r = mid < 0 ? mid : R->result;
        close(pair[1]);
        /* ECHILD: SIGCHLD is ignored (inherited), and the kernel reaped it. */
        while (mid > 0 && (waited = waitpid(mid, NULL, 0)) < 0 && errno == EINTR)
                ;
        /* The intermediate's word never came back: it ran on a copy of
         * prebind's memory (valgrind makes such a clone a fork(), and
         * gives it an exit status of its own when that copy leaks). Gone,
         * it holds no end of the socket: whether the guard runs is
         * whether anyone holds the other end. */
        if (mid > 0 && R->result == -ECHILD && waited == mid) {
                struct pollfd p = { .fd = pair[0], .events = POLLIN };

                clone_vm_learned(false);
                r = poll(&p, 1, 0) == 1 && (p.revents & POLLHUP) ? -ECHILD : 0;
        } else if (mid > 0)
                clone_vm_learned(true);
        /* A guard on prebind's memory runs on this mapping until it is
         * gone (guard_free()); a forked one has its own copy. */
        if (r == 0 && R->shared)
                g->region = R;
        else
                munmap(R, GUARD_REGION_SIZE);
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
        /* Its files close after it has let go of the memory (exit_mm()
         * comes before exit_files() in the kernel's do_exit()). Not gone:
         * its mapping stays. */
        if (g->region && !g->lost && (p.revents & POLLHUP))
                munmap(g->region, GUARD_REGION_SIZE);
        close(g->fd);
        free(g);
}
