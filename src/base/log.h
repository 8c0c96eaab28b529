/* SPDX-License-Identifier: MIT */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clock.h"

/* Verbosity: LOG_LEVEL_ERROR silences informational lines (-q),
 * LOG_LEVEL_DEBUG adds the details (-v). Errors are always printed. */
enum log_level {
        LOG_LEVEL_ERROR = 0,
        LOG_LEVEL_INFO = 1,
        LOG_LEVEL_DEBUG = 2,
};

void log_set_level(enum log_level level);
enum log_level log_get_level(void);

/* Print "prebind: <message>\n" on stderr if level is enabled. A message may
 * use %m; errno is set from err first, and is preserved across the call. */
void log_full(enum log_level level, int err, const char *format, ...) __attribute__((format(printf, 3, 4)));

/* Log an error and return -err (err may be given positive or negative), so
 * that the caller can write: return log_error_errno(r, "cannot bind '%s': %m", s); */
int log_error_errno(int err, const char *format, ...) __attribute__((format(printf, 2, 3)));

/* A user's string as a message quotes it: whole, or its first
 * LOG_QUOTE_MAX bytes and "...", so that the reason that follows it is
 * never cut off by the length of a line. buf holds LOG_QUOTE_SIZE bytes. */
#define LOG_QUOTE_MAX 200
#define LOG_QUOTE_SIZE (LOG_QUOTE_MAX + 4)
const char *log_shorten(const char *s, char *buf);

/* in as a line quotes it: control characters written as C escapes (\n,
 * \t, \r, \xHH), other bytes kept; at most size - 1 bytes and a NUL in
 * out. Pure (the guard uses it on prebind's memory). */
void log_escape_controls(const char *in, char *out, size_t size);

/* From the start of the event loop on, a line that stderr cannot take
 * at once (a pipe whose reader stalls) is dropped, not waited for, and
 * counted; the next line that gets through is preceded by "N log lines
 * dropped: stderr was not writable". fd 2's open file description, which
 * COMMAND shares, is left as it is (fd_writer_open(): a pipe or terminal
 * is opened again, privately and non-blocking; a socket is written with
 * MSG_DONTWAIT; a pipe that cannot be opened again is polled first).
 * Before that call, writes block (usage errors). */
void log_stderr_nonblocking(void);

/* A process of COMMAND's has exited, and all it wrote has been passed
 * on, waiting for the reader (the --ready-log relay's drain): the lines
 * prebind writes while it handles that (how COMMAND ended, a restart's)
 * are waited for too, or a reader still busy with the last bytes would
 * miss them. While patient, a line that stderr cannot take at once
 * waits for room, LOG_STALL_MS at most in all until patience is given
 * again (the drain's RELAY_STALL_MS). A wait that runs out, or
 * log_stderr_stalled() (a relay had to drop bytes), means the reader
 * stalled: no line waits again, in this window or a later one, until
 * stderr takes one. Never for a pipe polled before a blocking write
 * (fd_writer_open() could not open it again). */
#define LOG_STALL_MS 3000
void log_stderr_patient(bool patient);
void log_stderr_stalled(void);

/* Lines that a peer can make prebind write as often as it likes (another
 * user's notifications, claims over the --intercept broker): the first
 * LOG_RATELIMIT_BURST of each interval, then, with the next one after the
 * interval or at log_flush(), one summary: "N more <what> in the last Ns".
 * One static struct per call site:
 *     static struct log_ratelimit rl = LOG_RATELIMIT_INIT("ignored notifications");
 *     log_ratelimited(&rl, LOG_LEVEL_INFO, "ignoring ...", ...); */
#define LOG_RATELIMIT_BURST 5
#define LOG_RATELIMIT_INTERVAL_USEC (10 * USEC_PER_SEC)
struct log_ratelimit {
        const char *what;
        uint64_t begin_usec;  /* CLOCK_MONOTONIC: when this interval began */
        unsigned printed;     /* lines printed in it */
        unsigned held;        /* lines held back in it */
        enum log_level level; /* of its lines: the summary's too */
        bool used;            /* on the list that log_flush() summarises */
        struct log_ratelimit *next;
};
#define LOG_RATELIMIT_INIT(w)                                                                                         \
        { .what = (w) }

void log_ratelimited(struct log_ratelimit *rl, enum log_level level, const char *format, ...)
        __attribute__((format(printf, 3, 4)));

/* The rate limiter's decision, for a line at now_usec: true to print it.
 * *ret_held is the number of lines held back in an interval that has just
 * ended, and *ret_elapsed_usec how long it lasted (0 and 0 if none). */
bool log_ratelimit_check(struct log_ratelimit *rl, uint64_t now_usec, unsigned *ret_held, uint64_t *ret_elapsed_usec);
/* Ends the interval now: returns the lines held back in it. */
unsigned log_ratelimit_take(struct log_ratelimit *rl, uint64_t now_usec, uint64_t *ret_elapsed_usec);

/* At exit: the summaries still due, and the count of dropped lines if
 * stderr takes it now; closes the private fd of stderr (later lines are
 * still never waited for). */
void log_flush(void);

#define log_error(...) log_full(LOG_LEVEL_ERROR, 0, __VA_ARGS__)
/* The arguments are evaluated only at a level that prints them: a -q run
 * formats no address it would not print. */
#define log_info(...) ((void) (log_get_level() >= LOG_LEVEL_INFO && (log_full(LOG_LEVEL_INFO, 0, __VA_ARGS__), true)))
#define log_debug(...)                                                                                                \
        ((void) (log_get_level() >= LOG_LEVEL_DEBUG && (log_full(LOG_LEVEL_DEBUG, 0, __VA_ARGS__), true)))
/* The one way to say it: return log_oom(); */
#define log_oom() log_error_errno(ENOMEM, "out of memory")
