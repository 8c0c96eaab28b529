/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "compat.h"
#include "fd.h"
#include "log.h"

static enum log_level current_level = LOG_LEVEL_INFO;

/* How lines reach stderr. Blocking until the event loop starts (a usage
 * error waits for its reader, as any tool's); from then on a write that
 * would block is dropped and counted (another user's flood,
 * with stderr a stalled pipe, froze the loop). O_NONBLOCK lives on the
 * open file description, which COMMAND shares: it is never set on fd 2
 * itself. */
static struct {
        enum {
                STDERR_BLOCKING,
                STDERR_UNDECIDED, /* non-blocking; how is chosen at the first line */
                STDERR_WRITE,     /* write() does not wait: our own open of it, or a file */
                STDERR_SOCKET,    /* send(MSG_DONTWAIT) */
                STDERR_POLL,      /* poll(POLLOUT, 0) before each write */
        } mode;
        struct fd_writer writer;
        unsigned long dropped;
        uint64_t patience_usec; /* log_stderr_patient(): what is left of its LOG_STALL_MS; 0: none */
        bool stalled;           /* a wait ran out: none until a line gets through */
} sink = { .mode = STDERR_BLOCKING, .writer = { .fd = STDERR_FILENO } };

static struct log_ratelimit *ratelimits; /* used so far, for log_flush() */

void log_set_level(enum log_level level) {
        current_level = level;
}

enum log_level log_get_level(void) {
        return current_level;
}

/* Messages quote what users, activators and COMMAND said ('%s'): a
 * newline there would split the one line of an error, and an escape
 * sequence would reach the terminal. Control characters are written as
 * C escapes instead (\n, \t, \r, \xHH); other bytes are kept. */
void log_escape_controls(const char *in, char *out, size_t size) {
        static const char hex[] = "0123456789abcdef";
        size_t o = 0;

        for (const unsigned char *p = (const unsigned char *) in; *p && o + 5 < size; p++) {
                if (*p >= ' ' && *p != 0x7f) {
                        out[o++] = (char) *p;
                        continue;
                }
                out[o++] = '\\';
                if (*p == '\n')
                        out[o++] = 'n';
                else if (*p == '\t')
                        out[o++] = 't';
                else if (*p == '\r')
                        out[o++] = 'r';
                else {
                        out[o++] = 'x';
                        out[o++] = hex[*p >> 4];
                        out[o++] = hex[*p & 0xf];
                }
        }
        out[o] = '\0';
}

void log_stderr_nonblocking(void) {
        if (sink.mode == STDERR_BLOCKING)
                sink.mode = STDERR_UNDECIDED;
}

void log_stderr_patient(bool patient) {
        sink.patience_usec = patient ? LOG_STALL_MS * USEC_PER_MSEC : 0;
}

void log_stderr_stalled(void) {
        sink.stalled = true;
}

/* At the first line, not at the start of the loop: a run that logs
 * nothing costs no fd (at ulimit -n 6, --accept still gets as far as
 * saying that accept() has none left), and one that is out of fds
 * polls. */
static void choose_nonblocking(void) {
        fd_writer_open(STDERR_FILENO, &sink.writer);
        if (S_ISSOCK(sink.writer.type))
                sink.mode = STDERR_SOCKET;
        else if (sink.writer.owned || S_ISREG(sink.writer.type))
                sink.mode = STDERR_WRITE;
        else
                sink.mode = STDERR_POLL; /* which another writer of the pipe can race */
}

/* Room for a line within timeout_ms. No event at all: it would block.
 * POLLERR, POLLHUP: the write fails at once, as it would have. */
static bool room(int timeout_ms) {
        struct pollfd p = { .fd = sink.writer.fd, .events = POLLOUT };
        int k;

        /* EINTR is no answer: ask again (the loop's signals are blocked,
         * read from a signalfd, so it hardly comes). */
        while ((k = poll(&p, 1, timeout_ms)) < 0 && errno == EINTR)
                ;
        return k > 0;
}

/* One write of the line, as the mode says: -1 with EAGAIN if it would
 * block. */
static ssize_t write_once(const char *s, size_t n) {
        ssize_t k;

        for (;;) {
                if (sink.mode == STDERR_POLL && !room(0)) {
                        errno = EAGAIN;
                        return -1;
                }
                do {
                        if (sink.mode == STDERR_SOCKET)
                                k = send(sink.writer.fd, s, n, MSG_DONTWAIT | MSG_NOSIGNAL);
                        else
                                k = write(sink.writer.fd, s, n);
                } while (k < 0 && errno == EINTR);
                if (!(k < 0 && errno == ENOTSOCK && sink.mode == STDERR_SOCKET))
                        return k;
                sink.mode = STDERR_POLL; /* not a socket after all: the same line again, polled */
        }
}

/* A line may wait: patient, with time left, a reader not known to have
 * stalled, and a write that cannot block (a pipe that is polled is
 * written blocking: after the poll, another writer may take the room). */
static bool may_wait(void) {
        return sink.patience_usec > 0 && !sink.stalled && sink.mode != STDERR_POLL;
}

/* One whole line, or nothing: false if it would have blocked. Lines are
 * at most PIPE_BUF bytes, so a pipe takes all of one or none of it.
 * While patient, a line waits for room, out of one LOG_STALL_MS for the
 * whole window; a wait that runs out means the reader stalled, and no
 * line waits again before one gets through. */
static bool write_line(const char *s, size_t n) {
        uint64_t start = 0, now, spent;
        ssize_t k;
        int err;

        if (sink.mode == STDERR_UNDECIDED)
                choose_nonblocking();
        while ((k = write_once(s, n)) < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && may_wait()) {
                now = now_usec();
                if (start == 0)
                        start = now;
                if (now - start >= sink.patience_usec ||
                    !room((int) ((sink.patience_usec - (now - start) + USEC_PER_MSEC - 1) / USEC_PER_MSEC)))
                        sink.stalled = true;
        }
        err = errno;
        if (start != 0) {
                spent = now_usec() - start;
                sink.patience_usec -= spent < sink.patience_usec ? spent : sink.patience_usec;
        }
        if (k >= 0)
                sink.stalled = false;
        /* Other errors (EPIPE: nobody reads any more) lose the line as
         * they always did; only what would have blocked is counted. */
        return k >= 0 || (err != EAGAIN && err != EWOULDBLOCK);
}

/* Once stderr takes lines again, it first says how many it could not. */
static bool say_dropped(void) {
        char note[96];
        int m;

        if (sink.dropped == 0)
                return true;
        m = snprintf(note, sizeof note, "prebind: %lu log line%s dropped: stderr was not writable\n", sink.dropped,
                     sink.dropped == 1 ? "" : "s");
        if (!write_line(note, (size_t) m))
                return false;
        sink.dropped = 0;
        return true;
}

static void emit(const char *line, size_t n) {
        if (!say_dropped() || !write_line(line, n))
                sink.dropped++;
}

__attribute__((format(printf, 3, 0))) static void log_va(enum log_level level, int err, const char *format,
                                                         va_list ap) {
        static const char prefix[] = "prebind: ";
        int saved_errno = errno;
        char line[1024], escaped[PIPE_BUF];
        size_t n;

        if (level > current_level)
                return;
        if (err != 0)
                errno = abs(err);
#ifdef PREBIND_EXPAND_ERRNO
        char expanded[sizeof line];

        /* The C library's %m would say it in its own words. */
        format = prebind_expand_errno(format, errno, expanded, sizeof expanded);
#endif
        /* One write(2)-sized line, so concurrent writers on a shared stderr
         * never interleave within a message. */
        vsnprintf(line, sizeof line, format, ap);
        memcpy(escaped, prefix, sizeof prefix - 1);
        log_escape_controls(line, escaped + sizeof prefix - 1, sizeof escaped - sizeof prefix);
        n = strlen(escaped);
        escaped[n++] = '\n';
        emit(escaped, n);
        errno = saved_errno;
}

const char *log_shorten(const char *s, char *buf) {
        if (strnlen(s, LOG_QUOTE_MAX + 1) <= LOG_QUOTE_MAX)
                return s;
        memcpy(buf, s, LOG_QUOTE_MAX);
        memcpy(buf + LOG_QUOTE_MAX, "...", 4);
        return buf;
}

void log_full(enum log_level level, int err, const char *format, ...) {
        va_list ap;

        va_start(ap, format);
        log_va(level, err, format, ap);
        va_end(ap);
}

int log_error_errno(int err, const char *format, ...) {
        va_list ap;

        va_start(ap, format);
        log_va(LOG_LEVEL_ERROR, err, format, ap);
        va_end(ap);
        return -abs(err);
}

bool log_ratelimit_check(struct log_ratelimit *rl, uint64_t now_usec, unsigned *ret_held, uint64_t *ret_elapsed_usec) {
        *ret_held = 0;
        *ret_elapsed_usec = 0;
        if (rl->printed == 0 && rl->held == 0)
                rl->begin_usec = now_usec;
        else if (now_usec - rl->begin_usec >= LOG_RATELIMIT_INTERVAL_USEC) {
                *ret_held = log_ratelimit_take(rl, now_usec, ret_elapsed_usec);
                rl->begin_usec = now_usec;
        }
        if (rl->printed < LOG_RATELIMIT_BURST) {
                rl->printed++;
                return true;
        }
        rl->held++;
        return false;
}

unsigned log_ratelimit_take(struct log_ratelimit *rl, uint64_t now_usec, uint64_t *ret_elapsed_usec) {
        unsigned held = rl->held;

        *ret_elapsed_usec = now_usec - rl->begin_usec;
        rl->printed = 0;
        rl->held = 0;
        return held;
}

static void log_held(const struct log_ratelimit *rl, unsigned held, uint64_t elapsed_usec) {
        /* Rounded up: "in the last 0s" would read as nothing. */
        if (held > 0)
                log_full(rl->level, 0, "%u more %s in the last %llus", held, rl->what,
                         (unsigned long long) ((elapsed_usec + USEC_PER_SEC - 1) / USEC_PER_SEC));
}

void log_ratelimited(struct log_ratelimit *rl, enum log_level level, const char *format, ...) {
        unsigned held;
        uint64_t elapsed;
        va_list ap;
        bool print;

        if (level > current_level)
                return;
        if (!rl->used) {
                rl->used = true;
                rl->level = level;
                rl->next = ratelimits;
                ratelimits = rl;
        }
        print = log_ratelimit_check(rl, now_usec(), &held, &elapsed);
        log_held(rl, held, elapsed);
        if (!print)
                return;
        va_start(ap, format);
        log_va(level, 0, format, ap);
        va_end(ap);
}

void log_flush(void) {
        uint64_t now = ratelimits ? now_usec() : 0, elapsed;

        for (struct log_ratelimit *rl = ratelimits; rl; rl = rl->next) {
                unsigned held = log_ratelimit_take(rl, now, &elapsed);

                log_held(rl, held, elapsed);
        }
        (void) say_dropped();
        /* Nothing is left open at exit: the last lines poll fd 2. */
        if (sink.writer.owned) {
                close(sink.writer.fd);
                sink.writer = (struct fd_writer) { .fd = STDERR_FILENO, .type = sink.writer.type };
                sink.mode = STDERR_POLL;
        }
}
