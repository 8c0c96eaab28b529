/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lines.h"
#include "log.h"
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

/* The relay's state is one value: what it waits for. relay_next() holds
 * every transition, and every effect of one is an action it returns; the
 * relay carries them out in the order of enum relay_action. relay_open()
 * makes a relay idle and relay_close() closed; nothing else changes the
 * state but relay_next(). */
enum relay_state {
        RELAY_CLOSED,      /* not open (or closed) */
        RELAY_IDLE,        /* open, on no loop: not attached, detached, or draining */
        RELAY_READING,     /* the pipe is watched (LOOP_IN) */
        RELAY_WAITING_OUT, /* bytes wait for the output: it is watched (LOOP_OUT), the pipe is not */
        RELAY_NAPPING,     /* a little moved: the pipe rests RELAY_NAP_USEC, its timer is watched */
        RELAY_ENDED,       /* the pipe said EOF (or broke): nothing more comes, nothing is watched */
        _RELAY_STATE_MAX,
};

enum relay_event {
        RELAY_ATTACH,       /* relay_attach() */
        RELAY_DETACH,       /* relay_detach(), and relay_drain() before it reads */
        RELAY_PASSED,       /* a wake-up passed on all it took (or took nothing) */
        RELAY_TRICKLED,     /* …by splice, and little: more is on its way (relay_splice_event()) */
        RELAY_HELD,         /* bytes are left that the output does not take now */
        RELAY_EOF,          /* the pipe said EOF, or broke */
        RELAY_NAP_OVER,     /* the nap's timer expired */
        RELAY_WATCH_FAILED, /* the loop refused what a transition from this state watches: nothing is watched now */
        _RELAY_EVENT_MAX,
};

/* What the relay does on a transition, in this order. */
enum relay_action {
        RELAY_ACT_UNWATCH_IN = 1 << 0,  /* the pipe off the loop */
        RELAY_ACT_UNWATCH_OUT = 1 << 1, /* the output off the loop */
        RELAY_ACT_STOP_NAP = 1 << 2,    /* the nap's timer stopped */
        RELAY_ACT_LAST_LINE = 1 << 3,   /* the stream ended: a last line without a newline is a line (if fed) */
        RELAY_ACT_WATCH_IN = 1 << 4,    /* the pipe on the loop (LOOP_IN) */
        RELAY_ACT_WATCH_OUT = 1 << 5,   /* the output on the loop (LOOP_OUT) */
        RELAY_ACT_NAP = 1 << 6,         /* a timer of RELAY_NAP_USEC */
        RELAY_ACT_DRAIN = 1 << 7,       /* nothing could be watched: relay_drain(), which watches the pipe again */
};

struct relay_transition {
        enum relay_state state;
        unsigned actions; /* enum relay_action bits */
};

/* The next state and the actions to take. An event that means nothing in
 * a state leaves it as it is, with no action. Pure: no fd, no loop. */
struct relay_transition relay_next(enum relay_state state, enum relay_event event);

/* What a wake-up of splice(2) came to: eof (the pipe ended), full (bytes
 * wait that the output does not take), moved (bytes moved), splicing (the
 * output still takes splice(2): it may have fallen back to write(), or be
 * gone). */
enum relay_event relay_splice_event(bool eof, bool full, uint64_t moved, bool splicing);

const char *relay_state_name(enum relay_state state);
const char *relay_event_name(enum relay_event event);

/* How bytes leave, from the output's file type. It only degrades: a file
 * that refuses splice(2) (EINVAL: O_APPEND…) is written, and an output
 * whose reader went away (EPIPE; EIO from a hung-up terminal…) is gone. */
enum relay_output {
        RELAY_OUT_WRITE,  /* write(2): a terminal, /dev/null… */
        RELAY_OUT_SEND,   /* send(MSG_DONTWAIT): a socket */
        RELAY_OUT_SPLICE, /* a pipe or a regular file: splice(2) once no line is wanted, write(2) before */
        RELAY_OUT_GONE,   /* what is read is dropped (and counted in dropped) */
};

struct relay {
        enum relay_state state;
        enum relay_output output;
        int target_fd;                    /* prebind's fd: 1 or 2 */
        int in_fd;                        /* the read end of COMMAND's pipe */
        int child_fd;                     /* the write end, for COMMAND's fd 1 or 2 */
        int out_fd;                       /* where bytes go: target_fd, or a non-blocking reopen of it (ours) */
        struct loop_timer nap;            /* the nap's timer, armed while napping */
        struct loop *loop;                /* while attached */
        struct line_matcher *lines;       /* NULL: bytes only */
        bool lines_wanted;                /* feed lines (while readiness waits) */
        void (*on_lines)(void *userdata); /* after lines were fed */
        void *userdata;
        char *buffer;      /* RELAY_BUFFER bytes */
        size_t start, end; /* bytes read, not yet written */
        uint64_t relayed;  /* bytes written (or dropped) so far */
        uint64_t dropped;  /* bytes dropped: the output was gone */
};

/* A relay not opened, which relay_close() and relay_drain() take. */
#define RELAY_UNOPENED                                                                                                \
        { .state = RELAY_CLOSED, .target_fd = -1, .in_fd = -1, .child_fd = -1, .out_fd = -1 }

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
#define RELAY_STALL_MS LOG_STALL_MS /* one patience for COMMAND's bytes and prebind's lines */
void relay_drain(struct relay *r);
void relay_close(struct relay *r);
