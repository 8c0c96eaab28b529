/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fd.h"
#include "guard.h"
#include "log.h"
#include "macro.h"
#include "share-internal.h"
#include "wire.h"

/* How many times a caller starts over when the files it locked were
 * removed under it (a supervisor that was just ending). */
#define CLAIM_ATTEMPTS 50
/* The last lines of output a holder is shown when the server ends. */
#define TAIL_LINES 20
#define TAIL_BYTES 4096

bool share_name_is_valid(const char *name) {
        size_t len = strlen(name);

        /* A file name in the share directory, with room for ".sock" in a
         * sun_path: no '/', no ".." or hidden files, nothing a shell or a
         * message would need to quote. */
        if (len == 0 || len > 64 || name[0] == '.')
                return false;
        return strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == len;
}

/* A parent of the share directory: a real directory (lstat: no symlink
 * that someone could point elsewhere) of the caller's that nobody else
 * may write. Then nobody else can make the share directory in it before
 * the caller does, or rename it away: under /tmp any local user could
 * make /tmp/prebind-UID first, and the caller's --share would fail. */
static bool only_ours(const char *path, uid_t uid) {
        struct stat st;

        return path && path[0] == '/' && lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == uid &&
               (st.st_mode & 022) == 0;
}

/* $HOME/.cache, when $HOME is the caller's alone: made if asked to (a
 * query makes nothing: without it, no server runs). */
static bool home_cache(const char *cache, bool create, uid_t uid) {
        struct stat st;

        if (!only_ours(getenv("HOME"), uid))
                return false;
        if (create)
                (void) mkdir(cache, 0700);
        else if (lstat(cache, &st) < 0 && errno == ENOENT)
                return true;
        return only_ours(cache, uid);
}

/* Where the share directory lives (prebind(1), SHARING): in the first of
 * $XDG_RUNTIME_DIR, /run/user/UID (a login session's, also when the
 * variable was not passed on), /run for root, and $HOME/.cache that is
 * the caller's alone. Never under /tmp. */
static int share_parent(bool create, char **ret) {
        const char *xdg = getenv("XDG_RUNTIME_DIR");
        uid_t uid = geteuid();
        _cleanup_free_ char *run_user = NULL, *cache = NULL;

        if (asprintf(&run_user, "/run/user/%u", (unsigned) uid) < 0 ||
            asprintf(&cache, "%s/.cache", getenv("HOME") ?: "") < 0)
                return log_oom();
        if (only_ours(xdg, uid))
                *ret = strdup(xdg);
        else if (only_ours(run_user, uid))
                *ret = TAKE_PTR(run_user);
        else if (uid == 0 && only_ours("/run", uid))
                *ret = strdup("/run");
        else if (home_cache(cache, create, uid))
                *ret = TAKE_PTR(cache);
        else {
                log_error("--share: no directory that only uid %u can write ($XDG_RUNTIME_DIR, /run/user/%u, "
                          "$HOME/.cache): set XDG_RUNTIME_DIR to one",
                          (unsigned) uid, (unsigned) uid);
                return -EPERM;
        }
        return *ret ? 0 : log_oom();
}

/* PARENT/prebind, made with mode 0700 when create, and never removed:
 * another caller may be about to use it. Made by us or not, it must be
 * a real directory of the caller's with no access for anyone else (root
 * could have made it for us wrongly; a symlink would lead elsewhere). */
static int share_directory(const char *dir, bool create) {
        struct stat st;
        uid_t uid = geteuid();

        if (create && mkdir(dir, 0700) < 0 && errno != EEXIST)
                return log_error_errno(errno, "--share: cannot create '%s': %m", dir);
        if (lstat(dir, &st) < 0) {
                if (errno == ENOENT && !create)
                        return 0; /* nothing shared yet */
                return log_error_errno(errno, "--share: cannot read '%s': %m", dir);
        }
        if (!S_ISDIR(st.st_mode) || st.st_uid != uid || (st.st_mode & 077) != 0) {
                log_error("--share: '%s' is not a directory of uid %u with mode 0700 (another user's, or a "
                          "symlink): refusing to share through it",
                          dir, (unsigned) uid);
                return -EPERM;
        }
        return 0;
}

/* DIR/NAME.SUFFIX (DIR/NAME without a suffix), or NULL when out of memory. */
static char *path_in(const char *dir, const char *name, const char *suffix) {
        char *path;

        return asprintf(&path, "%s/%s%s%s", dir, name, suffix ? "." : "", suffix ?: "") < 0 ? NULL : path;
}

int share_paths(const char *name, bool create, struct share_paths *ret) {
        _cleanup_free_ char *parent = NULL;
        struct share_paths p = {};
        int r = share_parent(create, &parent);

        if (r < 0)
                return r;
        p.dir = path_in(parent, "prebind", NULL);
        p.sock = p.dir ? path_in(p.dir, name, "sock") : NULL;
        p.lock = p.dir ? path_in(p.dir, name, "lock") : NULL;
        p.log = p.dir ? path_in(p.dir, name, "log") : NULL;
        if (!p.sock || !p.lock || !p.log) {
                share_paths_done(&p);
                /* Not "return log_oom()": the analyzer cannot see that it
                 * is negative, and would follow NULL paths on. */
                log_oom();
                return -ENOMEM;
        }
        /* Before the directory is made: a name refused leaves nothing. */
        if (strlen(p.sock) >= sizeof(((struct sockaddr_un *) NULL)->sun_path)) {
                log_error("--share: '%s' is too long for a unix socket path", p.sock);
                share_paths_done(&p);
                return -ENAMETOOLONG;
        }
        if ((r = share_directory(p.dir, create)) < 0) {
                share_paths_done(&p);
                return r;
        }
        *ret = p;
        return 0;
}

void share_paths_done(struct share_paths *p) {
        free(p->dir);
        free(p->sock);
        free(p->lock);
        free(p->log);
        *p = (struct share_paths) {};
}

int share_connect(const char *path, int *ret) {
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        struct sockaddr_un sa;
        socklen_t len = unix_address(&sa, path, false);
        int r;

        if (fd < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *) &sa, len) < 0)
                return -errno;
        if ((r = share_check_peer(fd)) < 0)
                return r;
        *ret = TAKE_FD(fd);
        return 0;
}

/* flock(2) NAME.lock: the one claim, so that callers that arrive together
 * decide one after the other whether a server runs. The file may have
 * been removed by an ending supervisor while we waited (it removes it
 * under the lock): then the lock is on a file nobody else will see, so
 * start over. Returns 1 with the locked fd, 0 to start over, or -errno. */
static int lock_name(const struct share_paths *p, int *ret) {
        _cleanup_close_ int fd = open(p->lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        struct stat held, named;

        if (fd < 0)
                return errno == ENOENT ? 0 : log_error_errno(errno, "--share: cannot open '%s': %m", p->lock);
        while (flock(fd, LOCK_EX) < 0)
                if (errno != EINTR)
                        return log_error_errno(errno, "--share: cannot lock '%s': %m", p->lock);
        if (fstat(fd, &held) < 0)
                return log_error_errno(errno, "--share: cannot read '%s': %m", p->lock);
        if (lstat(p->lock, &named) < 0 || held.st_dev != named.st_dev || held.st_ino != named.st_ino)
                return 0;
        *ret = TAKE_FD(fd);
        return 1;
}

/* NAME.sock, bound while we hold the lock: anything left there is a
 * supervisor's that is gone (nobody accepts). */
static int bind_name(struct share *s) {
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        struct sockaddr_un sa;
        socklen_t len = unix_address(&sa, s->paths.sock, false);
        struct stat st;

        if (fd < 0)
                return log_error_errno(errno, "--share: cannot create a socket: %m");
        if (lstat(s->paths.sock, &st) == 0) {
                if (!S_ISSOCK(st.st_mode)) {
                        log_error("--share: '%s' exists and is not a socket (left alone)", s->paths.sock);
                        return -EEXIST;
                }
                if (unlink(s->paths.sock) < 0)
                        return log_error_errno(errno, "--share: cannot remove the stale '%s': %m", s->paths.sock);
        }
        if (bind(fd, (struct sockaddr *) &sa, len) < 0 || listen(fd, SOMAXCONN) < 0 || lstat(s->paths.sock, &st) < 0)
                return log_error_errno(errno, "--share: cannot listen on '%s': %m", s->paths.sock);
        s->sock_dev = st.st_dev;
        s->sock_ino = st.st_ino;
        s->listen_fd = TAKE_FD(fd);
        return 0;
}

/* NAME.log, new for each server: the supervisor's stdout and stderr. */
static int open_log(struct share *s) {
        struct stat st;

        if (unlink(s->paths.log) < 0 && errno != ENOENT)
                return log_error_errno(errno, "--share: cannot remove '%s': %m", s->paths.log);
        s->log_fd = open(s->paths.log, O_RDWR | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (s->log_fd < 0 || fstat(s->log_fd, &st) < 0)
                return log_error_errno(errno, "--share: cannot create '%s': %m", s->paths.log);
        s->log_dev = st.st_dev;
        s->log_ino = st.st_ino;
        return 0;
}

/* Close every fd but ours: the caller's pipes (its --port-fd, a test
 * runner's) must not be held open by a supervisor that outlives it. */
static int close_inherited(const struct share *s) {
        int keep[] = { s->lock_fd, s->log_fd, s->listen_fd };
        unsigned next = 3;
        int r;

        /* In order, then close the gaps. */
        for (size_t i = 0; i < ELEMENTSOF(keep); i++)
                for (size_t j = i + 1; j < ELEMENTSOF(keep); j++)
                        if (keep[j] < keep[i]) {
                                int t = keep[i];
                                keep[i] = keep[j];
                                keep[j] = t;
                        }
        for (size_t i = 0; i < ELEMENTSOF(keep); i++) {
                if (keep[i] < (int) next)
                        continue;
                if (keep[i] > (int) next && (r = fd_range(next, (unsigned) keep[i] - 1, FD_CLOSE)) < 0)
                        return r;
                next = (unsigned) keep[i] + 1;
        }
        return fd_range(next, ~0U, FD_CLOSE);
}

/* The supervisor, in its own session, with the log as its output and
 * nothing of its caller's: no terminal, no pipe a caller waits on. */
static int become_supervisor(struct share *s, int *lock_fd) {
        _cleanup_close_ int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
        /* Each failed open's errno is kept at once: the open and the
         * closes after it may set errno again before it is logged. */
        int r = null < 0 ? -errno : 0;

        close(s->conn_fd);
        s->conn_fd = -1;
        /* Our own open of the lock file (the caller's lock goes with the
         * caller's fd): it still names the same file, which is removed
         * only under the lock the caller holds. */
        s->lock_fd = open(s->paths.lock, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        if (s->lock_fd < 0 && r == 0)
                r = -errno;
        close(TAKE_FD(*lock_fd));
        if (r == 0 &&
            (dup2(null, STDIN_FILENO) < 0 || dup2(s->log_fd, STDOUT_FILENO) < 0 || dup2(s->log_fd, STDERR_FILENO) < 0))
                r = -errno;
        if (r < 0)
                return log_error_errno(r, "--share: cannot set up the supervisor: %m");
        close(TAKE_FD(null));
        /* A manager of the caller's (systemd Type=notify) hears the
         * holder, which publishes; not the supervisor, which outlives it. */
        unsetenv("NOTIFY_SOCKET");
        r = close_inherited(s);
        if (r < 0)
                return log_error_errno(r, "--share: cannot close the caller's fds: %m");
        s->supervisor_pid = getpid();
        return SHARE_ROLE_SUPERVISOR;
}

/* Start the supervisor: bind the name, connect to it (the connection
 * waits in the backlog), then fork twice, so that the supervisor is
 * nobody's child here and leaves no zombie to the caller. */
static int start_supervisor(struct share *s, int *lock_fd) {
        pid_t pid;
        int r, status;

        if ((r = bind_name(s)) < 0 || (r = open_log(s)) < 0)
                return r;
        r = share_connect(s->paths.sock, &s->conn_fd);
        if (r < 0)
                return log_error_errno(r, "--share: cannot connect to '%s': %m", s->paths.sock);
        pid = fork();
        if (pid < 0)
                return log_error_errno(errno, "--share: cannot fork the supervisor: %m");
        if (pid == 0) {
                pid_t grandchild;

                if (setsid() < 0)
                        _exit(1);
                grandchild = fork();
                if (grandchild != 0)
                        _exit(grandchild < 0);
                return become_supervisor(s, lock_fd);
        }
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return log_error_errno(errno, "--share: cannot wait for the supervisor's start: %m");
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                log_error("--share: cannot start the supervisor");
                return -ECHILD;
        }
        close(s->listen_fd);
        s->listen_fd = -1;
        close(s->log_fd);
        s->log_fd = -1;
        return SHARE_ROLE_HOLDER;
}

/* Under the lock: attach to a server that runs, else start one. */
static int claim_locked(struct share *s, int *lock_fd) {
        int r = share_connect(s->paths.sock, &s->conn_fd);

        if (r == 0)
                return SHARE_ROLE_HOLDER;
        if (r == -EPERM) {
                log_error("--share: '%s' is served by another user: refusing it", s->paths.sock);
                return r;
        }
        if (r != -ENOENT && r != -ECONNREFUSED)
                return log_error_errno(r, "--share: cannot connect to '%s': %m", s->paths.sock);
        return start_supervisor(s, lock_fd);
}

int share_enter(const struct share_options *options, const char *description, struct share **ret) {
        _cleanup_(share_freep) struct share *s = calloc(1, sizeof *s);
        int r;

        if (!s)
                return log_oom();
        *s = (struct share) {
                .options = *options,
                .lock_fd = -1,
                .listen_fd = -1,
                .conn_fd = -1,
                .log_fd = -1,
        };
        s->description = strdup(description);
        if (!s->description)
                // cppcheck-suppress memleak ; s is _cleanup_(share_freep), which cppcheck does not follow
                return log_oom();
        for (int attempt = 0; attempt < CLAIM_ATTEMPTS; attempt++) {
                _cleanup_close_ int lock_fd = -EBADF;

                share_paths_done(&s->paths);
                if ((r = share_paths(options->name, true, &s->paths)) < 0)
                        return r;
                r = lock_name(&s->paths, &lock_fd);
                if (r < 0)
                        return r;
                if (r == 0)
                        continue;
                r = claim_locked(s, &lock_fd);
                if (r < 0)
                        return r;
                *ret = TAKE_PTR(s);
                return r;
        }
        log_error("--share=%s: the name was taken and given up %d times in a row", options->name, CLAIM_ATTEMPTS);
        return -EAGAIN;
}

/* The last lines of the log, for the holders: what COMMAND said before
 * it ended, and prebind's own message if it failed. */
static const char *log_tail(const struct share *s, char buf[static TAIL_BYTES + 1]) {
        off_t size = lseek(s->log_fd, 0, SEEK_END);
        off_t from = size > TAIL_BYTES ? size - TAIL_BYTES : 0;
        ssize_t k;
        char *start;
        int lines = 0;

        buf[0] = '\0';
        if (size < 0 || (k = pread(s->log_fd, buf, (size_t) (size - from), from)) < 0)
                return buf;
        buf[k] = '\0';
        start = buf + k;
        /* Back from the end to the start of the TAIL_LINES-th line. */
        if (start > buf && start[-1] == '\n')
                start--;
        while (start > buf && lines < TAIL_LINES)
                if (*--start == '\n')
                        lines++;
        if (*start == '\n')
                start++;
        return start;
}

void share_free(struct share *s) {
        if (!s)
                return;
        share_serve_end(s);
        for (size_t i = 0; i < s->n_conns; i++)
                close(s->conns[i].fd);
        free(s->conns);
        closep(&s->lock_fd);
        closep(&s->listen_fd);
        closep(&s->conn_fd);
        closep(&s->log_fd);
        free(s->sockets);
        free(s->description);
        share_paths_done(&s->paths);
        free(s);
}

void share_freep(struct share **s) {
        share_free(*s);
}

void share_guard(const struct share *s, struct guard *guard) {
        guard_file_created_at(guard, GUARD_FILE_SOCKET, s->paths.sock, s->sock_dev, s->sock_ino);
        if (s->log_fd >= 0)
                guard_file_created(guard, GUARD_FILE_REGULAR, s->paths.log, s->log_fd);
        if (s->lock_fd >= 0)
                guard_file_created(guard, GUARD_FILE_LOCK, s->paths.lock, s->lock_fd);
}

/* Read what a holder sent and we never read (its SHARE_HOLD, when it
 * connected as the job ended): a unix socket closed with unread data
 * resets its peer, which would then lose our SHARE_ENDED. */
static void drain(int fd) {
        char buf[512];

        while (recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0)
                ;
}

void share_finish(struct share *s, int status) {
        struct share_wire ended = { .kind = SHARE_ENDED, .status = status, .pid = (int32_t) getpid() };
        char buf[TAIL_BYTES + 1];
        const char *tail = log_tail(s, buf);
        struct stat st;

        share_lock(s);
        /* Whoever connected before we took the lock is told too. */
        share_accept_pending(s);
        share_give_up_name(s);
        for (size_t i = 0; i < s->n_conns; i++) {
                drain(s->conns[i].fd);
                (void) share_send(s->conns[i].fd, &ended, NULL, tail);
        }
        if (lstat(s->paths.log, &st) == 0 && st.st_dev == s->log_dev && st.st_ino == s->log_ino)
                unlink(s->paths.log);
        /* The lock file goes only with no server under the name: a new
         * supervisor's claim must stay the one every caller locks. The
         * directory stays: made again, it could be made by another user
         * first where its parent lets them. */
        if (lstat(s->paths.sock, &st) < 0 && errno == ENOENT)
                unlink(s->paths.lock);
        share_unlock(s);
}
