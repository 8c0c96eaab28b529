/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lines.h"
#include "loop.h"

/* --ready-log: COMMAND's stdout or stderr goes through a pipe that prebind
 * reads, so that it sees the lines, and every byte is passed on to
 * prebind's own fd (1 or 2) at once, unchanged and in order.
 *
 * COMMAND never waits on prebind more than it would on prebind's fd
 * itself: the pipe is read as soon as it is readable, and what was read is
 * written at once. Writes never block prebind (it must go on hearing
 * signals and timers): pipes and terminals are reopened for prebind alone
 * with O_NONBLOCK (/proc/self/fd/N, a new open file description, so the
 * flag does not change the fd prebind shares with others), sockets get
 * MSG_DONTWAIT. While the output is full, prebind stops reading and
 * COMMAND fills the pipe and waits, as it would on a full fd of its own.
 * If the reader of prebind's output goes away (EPIPE), what COMMAND
 * writes is still read and matched, and dropped. Once no line is wanted
 * (COMMAND is ready), bytes move from pipe to pipe (or file) by splice(2),
 * without a copy through prebind; and a wake-up that moved a little (less
 * than RELAY_BATCH) is followed by a nap of RELAY_NAP_USEC before the pipe
 * is read again, so that a steady stream moves in batches instead of one
 * wake-up of prebind per write of COMMAND (the first bytes after a quiet
 * spell still go at once). */
#define RELAY_BUFFER (128 * 1024)
#define RELAY_BATCH (256 * 1024)
#define RELAY_NAP_USEC 1000
/* One wake-up splices at most this much: the loop serves its other
 * sources in between, whatever COMMAND writes. */
#define RELAY_WAKE_MAX (4 * 1024 * 1024)

struct relay {
        int target_fd;   /* prebind's fd: 1 or 2 */
        int in_fd;       /* the read end of COMMAND's pipe */
        int child_fd;    /* the write end, for COMMAND's fd 1 or 2 */
        int out_fd;      /* where bytes go: target_fd or a non-blocking reopen of it */
        bool out_owned;  /* out_fd was opened here */
        bool out_socket; /* send(MSG_DONTWAIT) */
        bool out_gone;   /* EPIPE: drop from now on */
        bool in_eof;
        bool can_splice;                  /* out_fd takes splice(2): a pipe or a regular file */
        bool out_full;                    /* splice said EAGAIN with bytes waiting: wait for out_fd */
        struct loop *loop;                /* while attached */
        bool watching_out;                /* out_fd is on the loop for EPOLLOUT */
        int nap_fd;                       /* a timer while the relay naps (in_fd is off the loop); -1 */
        struct line_matcher *lines;       /* NULL: bytes only */
        bool lines_wanted;                /* feed lines (while readiness waits) */
        void (*on_lines)(void *userdata); /* after lines were fed */
        void *userdata;
        char *buffer;      /* RELAY_BUFFER bytes */
        size_t start, end; /* bytes read, not yet written */
        uint64_t relayed;  /* bytes written (or dropped) so far */
        uint64_t dropped;  /* bytes dropped: the output was gone */
};

/* Create the pipe for target_fd (1 or 2); lines (may be NULL) sees every
 * byte. Returns 0 or -errno. */
int relay_open(struct relay *r, int target_fd, struct line_matcher *lines);
/* Watch the pipe on loop l. on_lines (may be NULL) is called with
 * userdata after bytes were read and fed to the lines, so that the owner
 * can see whether one matched. Returns 0 or -errno. */
int relay_attach(struct relay *r, struct loop *l, void (*on_lines)(void *userdata), void *userdata);
void relay_detach(struct relay *r);
/* Feed the lines, or not: once COMMAND is ready, no line needs matching
 * or keeping, and the relay only moves bytes. */
void relay_want_lines(struct relay *r, bool want);
/* COMMAND has exited: everything it wrote is in the pipe. Read what the
 * pipe holds now (not what a child left behind writes after that: the
 * loop relays it) and write it all out, waiting for the output if it
 * must: nothing COMMAND wrote is lost, unless the output does not take a
 * byte for RELAY_STALL_MS (then the rest is dropped, and counted in
 * dropped). While lines are wanted the pipe is small (lines.h's
 * line_matcher_feed_max()), so the matching done here is bounded too. */
#define RELAY_STALL_MS 3000
void relay_drain(struct relay *r);
void relay_close(struct relay *r);
