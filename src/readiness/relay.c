/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fd.h"
#include "macro.h"
#include "relay.h"

/* A bigger pipe than the default 64 KiB absorbs COMMAND's bursts while
 * prebind is busy elsewhere, and halves the wake-ups of a steady stream.
 * The default limit for anyone (fs/pipe-max-size) is 1 MiB. */
#define RELAY_PIPE_SIZE (1024 * 1024)

/* ---- the state machine ---------------------------------------------------- */

struct relay_transition relay_next(enum relay_state state, enum relay_event event) {
        struct relay_transition same = { state, 0 };

        /* A watch the loop refused leaves nothing watched (what the state
         * watched is off the loop already): pass on what there is now,
         * waiting for the output, and watch the pipe again (relay_drain()).
         * Only relay_attach() itself answers with its error. */
        if (event == RELAY_WATCH_FAILED && state != RELAY_IDLE && state != RELAY_CLOSED && state != RELAY_ENDED)
                return (struct relay_transition) { RELAY_IDLE, RELAY_ACT_DRAIN };
        switch (state) {
        case RELAY_IDLE:
                if (event == RELAY_ATTACH)
                        return (struct relay_transition) { RELAY_READING, RELAY_ACT_WATCH_IN };
                return same;
        case RELAY_READING:
                switch (event) {
                case RELAY_DETACH:
                        return (struct relay_transition) { RELAY_IDLE, RELAY_ACT_UNWATCH_IN };
                case RELAY_TRICKLED:
                        return (struct relay_transition) { RELAY_NAPPING, RELAY_ACT_UNWATCH_IN | RELAY_ACT_NAP };
                case RELAY_HELD:
                        return (struct relay_transition) { RELAY_WAITING_OUT,
                                                           RELAY_ACT_UNWATCH_IN | RELAY_ACT_WATCH_OUT };
                case RELAY_EOF:
                        return (struct relay_transition) { RELAY_ENDED, RELAY_ACT_UNWATCH_IN | RELAY_ACT_LAST_LINE };
                default:
                        return same;
                }
        case RELAY_WAITING_OUT:
                if (event == RELAY_DETACH)
                        return (struct relay_transition) { RELAY_IDLE, RELAY_ACT_UNWATCH_OUT };
                if (event == RELAY_PASSED)
                        return (struct relay_transition) { RELAY_READING, RELAY_ACT_UNWATCH_OUT | RELAY_ACT_WATCH_IN };
                return same;
        case RELAY_NAPPING:
                if (event == RELAY_DETACH)
                        return (struct relay_transition) { RELAY_IDLE, RELAY_ACT_STOP_NAP };
                if (event == RELAY_NAP_OVER)
                        return (struct relay_transition) { RELAY_READING, RELAY_ACT_STOP_NAP | RELAY_ACT_WATCH_IN };
                return same;
        default:
                /* Closed and ended: nothing comes any more. */
                return same;
        }
}

enum relay_event relay_splice_event(bool eof, bool full, uint64_t moved, bool splicing) {
        if (eof)
                return RELAY_EOF;
        if (full)
                return RELAY_HELD;
        /* A little moved: more is on its way, let it gather. */
        if (moved > 0 && moved < RELAY_BATCH && splicing)
                return RELAY_TRICKLED;
        return RELAY_PASSED;
}

const char *relay_state_name(enum relay_state state) {
        static const char *const names[_RELAY_STATE_MAX] = {
                [RELAY_CLOSED] = "closed",           [RELAY_IDLE] = "idle",       [RELAY_READING] = "reading",
                [RELAY_WAITING_OUT] = "waiting-out", [RELAY_NAPPING] = "napping", [RELAY_ENDED] = "ended",
        };
        return state >= 0 && state < _RELAY_STATE_MAX ? names[state] : "?";
}

const char *relay_event_name(enum relay_event event) {
        static const char *const names[_RELAY_EVENT_MAX] = {
                [RELAY_ATTACH] = "attach",     [RELAY_DETACH] = "detach",
                [RELAY_PASSED] = "passed",     [RELAY_TRICKLED] = "trickled",
                [RELAY_HELD] = "held",         [RELAY_EOF] = "eof",
                [RELAY_NAP_OVER] = "nap-over", [RELAY_WATCH_FAILED] = "watch-failed",
        };
        return event >= 0 && event < _RELAY_EVENT_MAX ? names[event] : "?";
}

/* ---- the pipes ------------------------------------------------------------ */

static void size_pipe(struct relay *r, bool small);
static int in_handler(struct loop *l, int fd, uint32_t revents, void *userdata);
static int out_handler(struct loop *l, int fd, uint32_t revents, void *userdata);
static int nap_handler(struct loop *l, struct loop_timer *t, void *userdata);

static bool feeding(const struct relay *r) {
        return r->lines && r->lines_wanted;
}

/* Carry out event e: the transition's actions, then its state. A watch
 * the loop refuses is an event of its own, in the state left. Returns 0,
 * or the loop's -errno when a watch failed. */
/* Bounded recursion: a refused watch is one event more (idle, drain), and the drain's detach and
 * re-attach from idle never drain again: a few levels at most. */
/* NOLINTNEXTLINE(misc-no-recursion): bounded, see above */
static int relay_on(struct relay *r, enum relay_event e) {
        struct relay_transition t = relay_next(r->state, e);
        int k = 0;

        if (t.actions & RELAY_ACT_UNWATCH_IN)
                loop_remove(r->loop, r->in_fd);
        if (t.actions & RELAY_ACT_UNWATCH_OUT)
                loop_remove(r->loop, r->out_fd);
        if (t.actions & RELAY_ACT_STOP_NAP)
                loop_timer_stop(r->loop, &r->nap);
        if ((t.actions & RELAY_ACT_LAST_LINE) && feeding(r))
                (void) line_matcher_flush(r->lines);
        if (t.actions & RELAY_ACT_WATCH_IN)
                k = loop_add(r->loop, r->in_fd, LOOP_IN, in_handler, r);
        if (k == 0 && (t.actions & RELAY_ACT_WATCH_OUT))
                k = loop_add(r->loop, r->out_fd, LOOP_OUT, out_handler, r);
        if (k == 0 && (t.actions & RELAY_ACT_NAP))
                loop_timer_start(r->loop, &r->nap, RELAY_NAP_USEC, nap_handler, r);
        if (k < 0) {
                (void) relay_on(r, RELAY_WATCH_FAILED);
                return k;
        }
        r->state = t.state;
        if (t.actions & RELAY_ACT_DRAIN)
                relay_drain(r);
        return 0;
}

/* Our own non-blocking way to write to target_fd (see relay.h); without
 * /proc, blocking writes, as COMMAND's own. */
static void open_output(struct relay *r) {
        struct fd_writer w;

        fd_writer_open(r->target_fd, &w);
        r->out_fd = w.fd;
        if (S_ISSOCK(w.type))
                r->output = RELAY_OUT_SEND;
        else if (S_ISFIFO(w.type) || S_ISREG(w.type))
                r->output = RELAY_OUT_SPLICE;
        else
                r->output = RELAY_OUT_WRITE;
}

int relay_open(struct relay *r, int target_fd, struct line_matcher *lines) {
        _cleanup_free_ char *buffer = malloc(RELAY_BUFFER);
        int fds[2];

        *r = (struct relay) RELAY_UNOPENED;
        if (!buffer)
                return -ENOMEM;
        if (pipe2(fds, O_CLOEXEC) < 0)
                // cppcheck-suppress memleak ; buffer is _cleanup_free_, which cppcheck does not follow
                return -errno;
        r->target_fd = target_fd;
        r->lines = lines;
        r->buffer = TAKE_PTR(buffer);
        r->in_fd = fds[0];
        r->child_fd = fds[1];
        /* Only prebind's end is non-blocking: COMMAND gets an ordinary
         * blocking stdout, as it would without prebind. */
        (void) fcntl(r->in_fd, F_SETFL, O_NONBLOCK);
        size_pipe(r, lines != NULL);
        open_output(r);
        r->state = RELAY_IDLE;
        return 0;
}

/* Write without blocking: bytes written, or -errno (-EAGAIN: full). */
static ssize_t write_out(struct relay *r, const char *data, size_t len) {
        ssize_t k;

        if (r->output == RELAY_OUT_GONE) {
                r->dropped += len;
                return (ssize_t) len;
        }
        do
                k = r->output == RELAY_OUT_SEND ? send(r->out_fd, data, len, MSG_DONTWAIT | MSG_NOSIGNAL)
                                                : write(r->out_fd, data, len);
        while (k < 0 && errno == EINTR);
        if (k >= 0)
                return k;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
                return -EAGAIN;
        /* EPIPE (the reader is gone), EIO (a hung-up terminal)…: COMMAND
         * goes on, its output is dropped. */
        r->output = RELAY_OUT_GONE;
        return (ssize_t) len;
}

/* Write what is held; -EAGAIN if some is left. */
static int flush_held(struct relay *r) {
        while (r->start < r->end) {
                ssize_t k = write_out(r, r->buffer + r->start, r->end - r->start);

                if (k < 0)
                        return (int) k;
                r->start += (size_t) k;
                r->relayed += (uint64_t) k;
        }
        r->start = r->end = 0;
        return 0;
}

/* The most one wake-up reads: while lines are matched, what the matcher
 * takes at a time (its work is bounded by that, see lines.h), so that a
 * wake-up never keeps signals and timers waiting, whatever COMMAND
 * writes. */
static size_t read_max(const struct relay *r) {
        size_t max = RELAY_BUFFER;

        if (feeding(r) && line_matcher_feed_max(r->lines) < max)
                max = line_matcher_feed_max(r->lines);
        return max;
}

/* One read of at most max bytes, fed to the lines. Returns bytes read, 0
 * at EOF, -EAGAIN. */
static ssize_t read_once(struct relay *r, size_t max) {
        ssize_t n;

        if (max > read_max(r))
                max = read_max(r);
        do
                n = read(r->in_fd, r->buffer, max);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return errno == EAGAIN ? -EAGAIN : -errno;
        if (n == 0)
                return 0;
        r->start = 0;
        r->end = (size_t) n;
        if (feeding(r))
                line_matcher_feed(r->lines, r->buffer, (size_t) n);
        return n;
}

/* Pipe to output with no copy: 1 when bytes moved (or the relay falls
 * back to write()), 0 at EOF, -EAGAIN when nothing can move now (*full:
 * because bytes wait that the output does not take). */
static ssize_t splice_once(struct relay *r, bool *full) {
        ssize_t n;
        int avail = 0;

        n = splice(r->in_fd, NULL, r->out_fd, NULL, RELAY_PIPE_SIZE, SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
        if (n > 0) {
                r->relayed += (uint64_t) n;
                return 1;
        }
        if (n == 0)
                return 0;
        if (errno == EAGAIN) {
                /* Which side? Bytes waiting in the pipe: the output is full. */
                *full = ioctl(r->in_fd, FIONREAD, &avail) == 0 && avail > 0;
                return -EAGAIN;
        }
        /* EPIPE: the reader is gone; EINVAL (an O_APPEND file…): the
         * copying way from now on. */
        r->output = errno == EPIPE ? RELAY_OUT_GONE : RELAY_OUT_WRITE;
        return 1;
}

/* All the pipe holds, until it is empty or the output full, and no more
 * than RELAY_WAKE_MAX: a writer as fast as the reader would keep the pipe
 * from ever being empty. */
static enum relay_event splice_all(struct relay *r) {
        uint64_t before = r->relayed;
        bool full = false;
        ssize_t k;

        while ((k = splice_once(r, &full)) > 0 && r->output == RELAY_OUT_SPLICE &&
               r->relayed - before < RELAY_WAKE_MAX)
                ;
        return relay_splice_event(k == 0, full, r->relayed - before, r->output == RELAY_OUT_SPLICE);
}

/* The pipe is readable (state: reading). */
static int in_handler(struct loop *l, int fd, uint32_t revents, void *userdata) {
        struct relay *r = userdata;
        enum relay_event e = RELAY_PASSED;
        bool fed = false;

        (void) l, (void) fd, (void) revents;
        if (r->state != RELAY_READING)
                return 0;
        if (r->output == RELAY_OUT_SPLICE && !feeding(r) && r->start == r->end) {
                (void) relay_on(r, splice_all(r));
                return 0;
        }
        /* (Bytes held from before a relay_detach() go first.) */
        if (r->start == r->end) {
                ssize_t n = read_once(r, RELAY_BUFFER);

                /* EOF, or a pipe that broke: nothing more comes. */
                if (n == 0 || (n < 0 && n != -EAGAIN))
                        e = RELAY_EOF;
                fed = n != -EAGAIN && feeding(r);
        }
        if (e != RELAY_EOF && flush_held(r) < 0)
                e = RELAY_HELD;
        (void) relay_on(r, e);
        if (fed && r->on_lines)
                r->on_lines(r->userdata);
        return 0;
}

/* The output takes bytes again (state: waiting-out). */
static int out_handler(struct loop *l, int fd, uint32_t revents, void *userdata) {
        struct relay *r = userdata;

        (void) l, (void) fd, (void) revents;
        if (r->state == RELAY_WAITING_OUT)
                (void) relay_on(r, flush_held(r) < 0 ? RELAY_HELD : RELAY_PASSED);
        return 0;
}

/* The nap is over (state: napping): read what gathered at once. */
static int nap_handler(struct loop *l, struct loop_timer *t, void *userdata) {
        struct relay *r = userdata;

        if (r->state != RELAY_NAPPING)
                return 0;
        if (relay_on(r, RELAY_NAP_OVER) < 0)
                return 0;
        return in_handler(l, r->in_fd, LOOP_IN, r);
}

/* NOLINTNEXTLINE(misc-no-recursion): see relay_on() */
int relay_attach(struct relay *r, struct loop *l, void (*on_lines)(void *userdata), void *userdata) {
        int k;

        r->on_lines = on_lines;
        r->userdata = userdata;
        if (r->state == RELAY_CLOSED)
                return -EBADF;
        if (r->state != RELAY_IDLE)
                return 0;
        r->loop = l;
        k = relay_on(r, RELAY_ATTACH);
        if (k < 0)
                r->loop = NULL;
        return k;
}

/* While lines are matched, the pipe holds what the matcher takes at a
 * time (the kernel rounds it up to a power of two pages): all that
 * relay_drain() must match when COMMAND exits is then bounded too. Once
 * not, a big pipe for throughput. A pipe holding more than the small
 * size keeps its size (EBUSY), and the drain then reads what it holds. */
static void size_pipe(struct relay *r, bool small) {
        size_t size = small && r->lines ? line_matcher_feed_max(r->lines) : RELAY_PIPE_SIZE;

        (void) fcntl(r->in_fd, F_SETPIPE_SZ, (int) size);
}

void relay_want_lines(struct relay *r, bool want) {
        r->lines_wanted = want;
        if (r->state != RELAY_CLOSED)
                size_pipe(r, want);
}

/* NOLINTNEXTLINE(misc-no-recursion): see relay_on() */
void relay_detach(struct relay *r) {
        (void) relay_on(r, RELAY_DETACH);
        r->loop = NULL;
}

/* Write all that is held, waiting for the output while it moves: a
 * reader that stops reading for RELAY_STALL_MS must not keep prebind
 * (and the exit status its caller waits for) for ever. */
static void flush_waiting(struct relay *r) {
        while (flush_held(r) == -EAGAIN) {
                struct pollfd p = { .fd = r->out_fd, .events = POLLOUT };
                int k = poll(&p, 1, RELAY_STALL_MS);

                if (k == 0 || (k < 0 && errno != EINTR))
                        r->output = RELAY_OUT_GONE;
        }
}

/* NOLINTNEXTLINE(misc-no-recursion): see relay_on() */
void relay_drain(struct relay *r) {
        struct loop *l = r->loop;
        bool fed = false;
        int avail = 0;
        size_t left;

        if (r->state == RELAY_CLOSED)
                return;
        relay_detach(r);
        flush_waiting(r);
        /* All COMMAND wrote is in the pipe now, and no more than that is
         * read here: a child it left behind may write on as fast as
         * prebind reads ("yes &"), and this loop never ended.
         * What comes later the loop relays, as it did before. */
        if (ioctl(r->in_fd, FIONREAD, &avail) < 0 || avail < 0)
                avail = 0;
        for (left = (size_t) avail; left > 0 && r->state != RELAY_ENDED;) {
                ssize_t n = read_once(r, left);

                if (n <= 0)
                        break;
                left -= (size_t) n < left ? (size_t) n : left;
                fed = feeding(r);
                flush_waiting(r);
        }
        if (feeding(r) && line_matcher_flush(r->lines))
                fed = true;
        if (l)
                (void) relay_attach(r, l, r->on_lines, r->userdata);
        if (fed && r->on_lines)
                r->on_lines(r->userdata);
}

void relay_close(struct relay *r) {
        relay_detach(r);
        if (r->in_fd >= 0)
                close(r->in_fd);
        if (r->child_fd >= 0)
                close(r->child_fd);
        if (r->out_fd >= 0 && r->out_fd != r->target_fd)
                close(r->out_fd);
        free(r->buffer);
        *r = (struct relay) RELAY_UNOPENED;
}
