/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fd.h"
#include "relay.h"

/* A bigger pipe than the default 64 KiB absorbs COMMAND's bursts while
 * prebind is busy elsewhere, and halves the wake-ups of a steady stream.
 * The default limit for anyone (fs/pipe-max-size) is 1 MiB. */
#define RELAY_PIPE_SIZE (1024 * 1024)

static void size_pipe(struct relay *r, bool small);

/* Our own non-blocking way to write to target_fd (see relay.h); without
 * /proc, blocking writes, as COMMAND's own. */
static void open_output(struct relay *r) {
        struct fd_writer w;

        fd_writer_open(r->target_fd, &w);
        r->out_fd = w.fd;
        r->out_owned = w.owned;
        r->out_socket = S_ISSOCK(w.type);
        r->can_splice = S_ISFIFO(w.type) || S_ISREG(w.type);
}

int relay_open(struct relay *r, int target_fd, struct line_matcher *lines) {
        int fds[2];

        *r = (struct relay) {
                .target_fd = target_fd, .in_fd = -1, .child_fd = -1, .out_fd = -1, .nap_fd = -1, .lines = lines
        };
        r->buffer = malloc(RELAY_BUFFER);
        if (!r->buffer)
                return -ENOMEM;
        if (pipe2(fds, O_CLOEXEC) < 0) {
                int e = -errno;
                free(r->buffer);
                r->buffer = NULL;
                return e;
        }
        r->in_fd = fds[0];
        r->child_fd = fds[1];
        /* Only prebind's end is non-blocking: COMMAND gets an ordinary
         * blocking stdout, as it would without prebind. */
        (void) fcntl(r->in_fd, F_SETFL, O_NONBLOCK);
        size_pipe(r, lines != NULL);
        open_output(r);
        return 0;
}

/* Write without blocking: bytes written, or -errno (-EAGAIN: full). */
static ssize_t write_out(struct relay *r, const char *data, size_t len) {
        ssize_t k;

        if (r->out_gone) {
                r->dropped += len;
                return (ssize_t) len;
        }
        do
                k = r->out_socket ? send(r->out_fd, data, len, MSG_DONTWAIT | MSG_NOSIGNAL)
                                  : write(r->out_fd, data, len);
        while (k < 0 && errno == EINTR);
        if (k >= 0)
                return k;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
                return -EAGAIN;
        /* EPIPE (the reader is gone), EIO (a hung-up terminal)…: COMMAND
         * goes on, its output is dropped. */
        r->out_gone = true;
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

static int relay_handler(struct loop *l, int fd, uint32_t revents, void *userdata);

/* Watch the pipe, or the output, whichever is the relay's bottleneck. */
static int watch(struct relay *r) {
        bool held = r->start < r->end || r->out_full;
        int k = 0;

        if (!r->loop)
                return 0;
        if (held && !r->watching_out) {
                loop_remove(r->loop, r->in_fd);
                k = loop_add(r->loop, r->out_fd, EPOLLOUT, relay_handler, r);
                r->watching_out = k == 0;
        } else if (!held && r->watching_out) {
                loop_remove(r->loop, r->out_fd);
                r->watching_out = false;
                if (!r->in_eof)
                        k = loop_add(r->loop, r->in_fd, EPOLLIN, relay_handler, r);
        }
        return k;
}

/* The most one wake-up reads: while lines are matched, what the matcher
 * takes at a time (its work is bounded by that, see lines.h), so that a
 * wake-up never keeps signals and timers waiting (issue 19). */
static size_t read_max(const struct relay *r) {
        size_t max = RELAY_BUFFER;

        if (r->lines && r->lines_wanted && line_matcher_feed_max(r->lines) < max)
                max = line_matcher_feed_max(r->lines);
        return max;
}

/* One read of at most max bytes, passed on at once. Returns bytes read,
 * 0 at EOF, -EAGAIN. */
static ssize_t read_once(struct relay *r, size_t max) {
        ssize_t n;

        if (max > read_max(r))
                max = read_max(r);
        do
                n = read(r->in_fd, r->buffer, max);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return errno == EAGAIN ? -EAGAIN : -errno;
        if (n == 0) {
                r->in_eof = true;
                return 0;
        }
        r->start = 0;
        r->end = (size_t) n;
        if (r->lines && r->lines_wanted)
                line_matcher_feed(r->lines, r->buffer, (size_t) n);
        return n;
}

/* Pipe to output with no copy: 1 when bytes moved (or the relay must
 * fall back to read()), 0 at EOF, -EAGAIN when nothing can move now. */
static ssize_t splice_once(struct relay *r) {
        ssize_t n;
        int avail = 0;

        n = splice(r->in_fd, NULL, r->out_fd, NULL, RELAY_PIPE_SIZE, SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
        if (n > 0) {
                r->relayed += (uint64_t) n;
                return 1;
        }
        if (n == 0) {
                r->in_eof = true;
                return 0;
        }
        if (errno == EAGAIN) {
                /* Which side? Bytes waiting in the pipe: the output is full. */
                if (ioctl(r->in_fd, FIONREAD, &avail) == 0 && avail > 0)
                        r->out_full = true;
                return -EAGAIN;
        }
        if (errno == EPIPE) {
                r->out_gone = true;
                r->can_splice = false;
                return 1;
        }
        /* EINVAL (an O_APPEND file…): the copying way from now on. */
        r->can_splice = false;
        return 1;
}

static int relay_handler(struct loop *l, int fd, uint32_t revents, void *userdata);

static int nap_handler(struct loop *l, int fd, uint32_t revents, void *userdata) {
        struct relay *r = userdata;

        if (!timer_expired(fd))
                return 0;
        loop_remove(l, fd);
        timer_stop(&r->nap_fd);
        if (loop_add(l, r->in_fd, EPOLLIN, relay_handler, r) < 0) {
                relay_drain(r);
                return 0;
        }
        return relay_handler(l, r->in_fd, EPOLLIN, r);
}

/* Take in_fd off the loop for RELAY_NAP_USEC. Returns 0; -EAGAIN when
 * there is no timer (in_fd is watched as before); or another -errno when
 * in_fd could not be watched again either. */
static int nap(struct relay *r) {
        int k;

        loop_remove(r->loop, r->in_fd);
        if (timer_start(&r->nap_fd, RELAY_NAP_USEC) == 0 && loop_add(r->loop, r->nap_fd, EPOLLIN, nap_handler, r) == 0)
                return 0;
        timer_stop(&r->nap_fd);
        k = loop_add(r->loop, r->in_fd, EPOLLIN, relay_handler, r);
        return k < 0 ? k : -EAGAIN;
}

static int relay_handler(struct loop *l, int fd, uint32_t revents, void *userdata) {
        struct relay *r = userdata;
        bool fed = false;

        if (fd == r->out_fd && r->out_full)
                r->out_full = false;
        if (fd == r->in_fd && !r->watching_out && r->can_splice && !r->out_gone && !(r->lines && r->lines_wanted) &&
            r->start == r->end) {
                uint64_t before = r->relayed;
                ssize_t k;

                /* All there is, until the pipe is empty or the output full,
                 * and no more than RELAY_WAKE_MAX: a writer as fast as the
                 * reader would keep the pipe from ever being empty. */
                while ((k = splice_once(r)) > 0 && r->can_splice && !r->out_gone &&
                       r->relayed - before < RELAY_WAKE_MAX)
                        ;
                if (k == 0) {
                        loop_remove(l, r->in_fd);
                        return 0;
                }
                /* A little moved: more is on its way, let it gather. */
                if (r->relayed > before && r->relayed - before < RELAY_BATCH && !r->out_full && r->can_splice) {
                        k = nap(r);
                        if (k == 0)
                                return 0;
                        if (k != -EAGAIN) {
                                relay_drain(r);
                                return 0;
                        }
                }
                if (watch(r) < 0)
                        relay_drain(r);
                return 0;
        }
        if (fd == r->in_fd && !r->watching_out) {
                ssize_t n = read_once(r, RELAY_BUFFER);

                if (n == 0 || (n < 0 && n != -EAGAIN)) {
                        /* EOF (or a pipe that broke): nothing more comes. */
                        r->in_eof = true;
                        loop_remove(l, r->in_fd);
                        if (r->lines && r->lines_wanted)
                                line_matcher_flush(r->lines);
                        fed = r->lines && r->lines_wanted;
                } else if (n > 0)
                        fed = r->lines && r->lines_wanted;
        }
        if (r->start < r->end)
                (void) flush_held(r);
        if (watch(r) < 0)
                /* Cannot wait for the output: wait inside write instead. */
                relay_drain(r);
        if (fed && r->on_lines)
                r->on_lines(r->userdata);
        return 0;
}

int relay_attach(struct relay *r, struct loop *l, void (*on_lines)(void *userdata), void *userdata) {
        int k;

        r->on_lines = on_lines;
        r->userdata = userdata;
        if (r->loop || r->in_eof)
                return 0;
        k = loop_add(l, r->in_fd, EPOLLIN, relay_handler, r);
        if (k < 0)
                return k;
        r->loop = l;
        return 0;
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
        if (r->in_fd >= 0)
                size_pipe(r, want);
}

void relay_detach(struct relay *r) {
        if (!r->loop)
                return;
        if (r->nap_fd >= 0)
                loop_remove(r->loop, r->nap_fd);
        timer_stop(&r->nap_fd);
        loop_remove(r->loop, r->in_fd);
        if (r->watching_out)
                loop_remove(r->loop, r->out_fd);
        r->watching_out = false;
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
                        r->out_gone = true;
        }
}

void relay_drain(struct relay *r) {
        struct loop *l = r->loop;
        bool fed = false;
        int avail = 0;
        size_t left;

        if (r->in_fd < 0)
                return;
        relay_detach(r);
        flush_waiting(r);
        /* All COMMAND wrote is in the pipe now, and no more than that is
         * read here: a child it left behind may write on as fast as
         * prebind reads ("yes &"), and this loop never ended (issue 19).
         * What comes later the loop relays, as it did before. */
        if (ioctl(r->in_fd, FIONREAD, &avail) < 0 || avail < 0)
                avail = 0;
        for (left = (size_t) avail; left > 0 && !r->in_eof;) {
                ssize_t n = read_once(r, left);

                if (n <= 0)
                        break;
                left -= (size_t) n < left ? (size_t) n : left;
                fed = r->lines && r->lines_wanted;
                flush_waiting(r);
        }
        if (r->lines && r->lines_wanted && line_matcher_flush(r->lines))
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
        if (r->out_owned)
                close(r->out_fd);
        free(r->buffer);
        *r = (struct relay) { .in_fd = -1, .child_fd = -1, .out_fd = -1, .nap_fd = -1 };
}
