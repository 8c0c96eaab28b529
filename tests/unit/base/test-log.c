/* SPDX-License-Identifier: MIT */
/* The log (issue 19): the rate limiter for lines a peer can trigger, on
 * a clock the test sets; and stderr that stops taking lines, as a pipe
 * whose reader stalls: log calls return at once, the lines that did not
 * fit are counted and said once it drains, and fd 2's open file
 * description (COMMAND's too) stays blocking; while patient (COMMAND
 * has exited), a line waits for a late reader, and once for one that
 * stalled. Cases that change fd 2 run
 * in a forked child. */
#include <check.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "unit.h"

#define SEC 1000000ULL

static bool check_at(struct log_ratelimit *rl, uint64_t now, unsigned *held, uint64_t *elapsed) {
        return log_ratelimit_check(rl, now, held, elapsed);
}

START_TEST(test_first_burst_then_held) {
        struct log_ratelimit rl = LOG_RATELIMIT_INIT("things");
        unsigned held;
        uint64_t elapsed;

        for (unsigned i = 0; i < LOG_RATELIMIT_BURST; i++) {
                ck_assert(check_at(&rl, 100 * SEC + i, &held, &elapsed));
                ck_assert_uint_eq(held, 0);
        }
        for (unsigned i = 0; i < 1000; i++) {
                ck_assert(!check_at(&rl, 100 * SEC + 9 * SEC, &held, &elapsed));
                ck_assert_uint_eq(held, 0);
        }
        ck_assert_uint_eq(rl.held, 1000);
}
END_TEST

START_TEST(test_summary_when_the_interval_ends) {
        struct log_ratelimit rl = LOG_RATELIMIT_INIT("things");
        uint64_t t0 = 5 * SEC, elapsed;
        unsigned held;

        for (unsigned i = 0; i < LOG_RATELIMIT_BURST + 7; i++)
                (void) check_at(&rl, t0 + i * SEC / 10, &held, &elapsed);
        /* Just before the end: still held. */
        ck_assert(!check_at(&rl, t0 + LOG_RATELIMIT_INTERVAL_USEC - 1, &held, &elapsed));
        ck_assert_uint_eq(held, 0);
        /* The first line after it: printed, and the count of the interval
         * (7 + the one above) comes with it. */
        ck_assert(check_at(&rl, t0 + LOG_RATELIMIT_INTERVAL_USEC + 3 * SEC, &held, &elapsed));
        ck_assert_uint_eq(held, 8);
        ck_assert_uint_eq(elapsed, LOG_RATELIMIT_INTERVAL_USEC + 3 * SEC);
        /* A new interval from there: a full burst again. */
        for (unsigned i = 1; i < LOG_RATELIMIT_BURST; i++)
                ck_assert(check_at(&rl, t0 + LOG_RATELIMIT_INTERVAL_USEC + 4 * SEC, &held, &elapsed));
        ck_assert(!check_at(&rl, t0 + LOG_RATELIMIT_INTERVAL_USEC + 4 * SEC, &held, &elapsed));
}
END_TEST

START_TEST(test_quiet_interval_has_no_summary) {
        struct log_ratelimit rl = LOG_RATELIMIT_INIT("things");
        uint64_t elapsed;
        unsigned held;

        /* Fewer lines than the burst: nothing held, nothing to say. */
        for (unsigned i = 0; i < LOG_RATELIMIT_BURST; i++)
                ck_assert(check_at(&rl, i * 3 * SEC, &held, &elapsed));
        ck_assert(check_at(&rl, 100 * SEC, &held, &elapsed));
        ck_assert_uint_eq(held, 0);
        ck_assert_uint_eq(log_ratelimit_take(&rl, 101 * SEC, &elapsed), 0);
}
END_TEST

START_TEST(test_take_ends_the_interval) {
        struct log_ratelimit rl = LOG_RATELIMIT_INIT("things");
        uint64_t elapsed;
        unsigned held;

        for (unsigned i = 0; i < LOG_RATELIMIT_BURST + 3; i++)
                (void) check_at(&rl, 10 * SEC, &held, &elapsed);
        ck_assert_uint_eq(log_ratelimit_take(&rl, 12 * SEC, &elapsed), 3);
        ck_assert_uint_eq(elapsed, 2 * SEC);
        ck_assert_uint_eq(log_ratelimit_take(&rl, 13 * SEC, &elapsed), 0);
        /* And the next line begins a fresh one. */
        ck_assert(check_at(&rl, 13 * SEC, &held, &elapsed));
        ck_assert_uint_eq(held, 0);
}
END_TEST

/* ---- stderr as a pipe (forked children) ---- */

/* fd 2 becomes the write end of a new pipe; its read end is returned,
 * non-blocking. */
static int stderr_to_pipe(void) {
        int p[2];

        if (pipe2(p, O_CLOEXEC) < 0 || dup2(p[1], STDERR_FILENO) < 0)
                exit(90);
        close(p[1]);
        if (fcntl(p[0], F_SETFL, O_NONBLOCK) < 0)
                exit(91);
        return p[0];
}

/* Fills the pipe to the last byte through a private non-blocking open of
 * it, as another writer of the same pipe might. */
static void fill(void) {
        int fd = open("/proc/self/fd/2", O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        char page[4096];

        if (fd < 0)
                exit(92);
        memset(page, '\n', sizeof page);
        while (write(fd, page, sizeof page) > 0)
                ;
        while (write(fd, page, 1) > 0)
                ;
        close(fd);
}

static size_t drain(int fd, char *buf, size_t size) {
        size_t n = 0;
        ssize_t k;

        while (n + 1 < size && (k = read(fd, buf + n, size - 1 - n)) > 0)
                n += (size_t) k;
        buf[n] = '\0';
        return n;
}

/* The pipe drains: the next line says first how many lines were
 * dropped (count), and then itself. */
static bool dropped_lines_said(int r, unsigned count) {
        static char buf[1 << 17];
        char want[128];

        (void) drain(r, buf, sizeof buf);
        log_error("the pipe drained");
        (void) drain(r, buf, sizeof buf);
        snprintf(want, sizeof want,
                 "prebind: %u log lines dropped: stderr was not writable\nprebind: the pipe drained\n", count);
        return strcmp(buf, want) == 0;
}

static void child_dropped_then_said(void) {
        static char buf[1 << 17];
        int r = stderr_to_pipe(), flags;

        log_stderr_nonblocking();
        fill();
        /* These would block forever on a blocking write: check's timeout
         * of the child (unit_wait_bounded) ends the test then. */
        for (int i = 0; i < 3; i++)
                log_error("a line that does not fit %d", i);
        flags = fcntl(STDERR_FILENO, F_GETFL);
        if (flags < 0 || (flags & O_NONBLOCK))
                exit(10); /* the shared file description changed */
        if (!dropped_lines_said(r, 3))
                exit(11);
        log_error("and then");
        (void) drain(r, buf, sizeof buf);
        if (strcmp(buf, "prebind: and then\n") != 0)
                exit(12);
        exit(0);
}

/* A reader of the pipe (read end r) that comes after delay_usec, makes
 * room for a line (two pages read: one freed at least) and goes. */
static pid_t late_reader(int r, useconds_t delay_usec) {
        char page[8192];
        pid_t pid = fork();

        if (pid < 0)
                exit(60);
        if (pid == 0) {
                usleep(delay_usec);
                _exit(read(r, page, sizeof page) > 0 ? 0 : 1);
        }
        return pid;
}

/* The pipe full, a reader that comes 200 ms later: a line logged while
 * patient waits for it. True if that line is the last of what the pipe
 * held, all of which is left in buf. */
static bool patient_line_reaches_a_late_reader(int r, const char *text, char *buf, size_t size) {
        char want[128];
        size_t n, len;
        pid_t reader;

        fill();
        reader = late_reader(r, 200 * 1000);
        log_stderr_patient(true);
        log_error("%s", text);
        log_stderr_patient(false);
        if (waitpid(reader, NULL, 0) != reader)
                exit(61);
        n = drain(r, buf, size);
        len = (size_t) snprintf(want, sizeof want, "prebind: %s\n", text);
        return n >= len && strcmp(buf + n - len, want) == 0;
}

/* While patient, a line waits for a reader that is late but reads: it
 * gets through, and nothing is said dropped. */
static void child_patient_line_waits_for_the_reader(void) {
        static char buf[1 << 17];
        int r = stderr_to_pipe();

        log_stderr_nonblocking();
        if (!patient_line_reaches_a_late_reader(r, "worth the wait", buf, sizeof buf) || strstr(buf, "dropped"))
                exit(62);
        exit(0);
}

static double seconds_since(const struct timespec *t0) {
        struct timespec t;

        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double) (t.tv_sec - t0->tv_sec) + (double) (t.tv_nsec - t0->tv_nsec) / 1e9;
}

/* Nobody reads: the first line waits LOG_STALL_MS and is dropped; the
 * reader has stalled, and the next ones are dropped at once, in this
 * window and in the next one. One wait in all, not five. */
static void child_patience_ends_when_the_reader_stalls(void) {
        const double stall = LOG_STALL_MS / 1000.0;
        struct timespec t0;
        int r = stderr_to_pipe();
        double waited;

        log_stderr_nonblocking();
        fill();
        clock_gettime(CLOCK_MONOTONIC, &t0);
        log_stderr_patient(true);
        for (int i = 0; i < 4; i++)
                log_error("a line nobody waits for %d", i);
        log_stderr_patient(false);
        log_stderr_patient(true); /* the next exit */
        log_error("nor for this one");
        log_stderr_patient(false);
        waited = seconds_since(&t0);
        if (waited < stall * 0.9)
                exit(71); /* did not wait */
        if (waited > stall * 1.5)
                exit(72); /* waited more than once */
        if (!dropped_lines_said(r, 5))
                exit(70);
        exit(0);
}

/* A window's patience is one LOG_STALL_MS for all its lines: a line that
 * waited a third of it for a slow reader leaves the next line the rest,
 * not a whole one. */
static void child_patience_is_one_budget_per_window(void) {
        static char buf[1 << 17];
        const double stall = LOG_STALL_MS / 1000.0;
        struct timespec t0;
        int r = stderr_to_pipe();
        pid_t reader;
        double waited;
        size_t n;

        log_stderr_nonblocking();
        fill();
        reader = late_reader(r, LOG_STALL_MS * 1000 / 3);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        log_stderr_patient(true);
        log_error("worth a third of the wait");
        if (waitpid(reader, NULL, 0) != reader)
                exit(81);
        fill();
        log_error("left the rest");
        log_stderr_patient(false);
        waited = seconds_since(&t0);
        if (waited < stall * 0.9)
                exit(82); /* the second line did not wait for the rest */
        if (waited > stall * 1.2)
                exit(83); /* it had a whole LOG_STALL_MS of its own */
        n = drain(r, buf, sizeof buf);
        if (!memmem(buf, n, "prebind: worth a third of the wait\n", 35) || strstr(buf, "left the rest"))
                exit(84);
        exit(0);
}

/* A reader known to have stalled (a relay dropped bytes) is not waited
 * for; a line that gets through shows it reads again, and the next
 * patient line waits for it. */
static void child_stall_is_known_until_a_line_gets_through(void) {
        static char buf[1 << 17];
        const double stall = LOG_STALL_MS / 1000.0;
        struct timespec t0;
        int r = stderr_to_pipe();

        log_stderr_nonblocking();
        fill();
        log_stderr_stalled();
        clock_gettime(CLOCK_MONOTONIC, &t0);
        log_stderr_patient(true);
        log_error("not waited for");
        log_stderr_patient(false);
        if (seconds_since(&t0) > stall / 2)
                exit(90);
        (void) drain(r, buf, sizeof buf);
        log_error("taken");
        (void) drain(r, buf, sizeof buf);
        if (!patient_line_reaches_a_late_reader(r, "waited for again", buf, sizeof buf))
                exit(92);
        exit(0);
}

static void child_ratelimited_and_flushed(void) {
        static struct log_ratelimit rl = LOG_RATELIMIT_INIT("ignored things");
        char buf[8192], *p = buf;
        int r = stderr_to_pipe(), lines = 0;

        log_stderr_nonblocking();
        for (int i = 0; i < 100; i++)
                log_ratelimited(&rl, LOG_LEVEL_INFO, "ignoring thing %d", i);
        log_flush();
        (void) drain(r, buf, sizeof buf);
        for (int i = 0; i < LOG_RATELIMIT_BURST; i++) {
                char want[64];

                snprintf(want, sizeof want, "prebind: ignoring thing %d\n", i);
                if (strncmp(p, want, strlen(want)) != 0)
                        exit(20 + i);
                p += strlen(want);
                lines++;
        }
        if (strcmp(p, "prebind: 95 more ignored things in the last 1s\n") != 0)
                exit(40);
        /* Nothing more to say. */
        log_flush();
        if (drain(r, buf, sizeof buf) != 0)
                exit(41);
        exit(lines == LOG_RATELIMIT_BURST ? 0 : 42);
}

/* A level that is off is neither printed nor counted. */
static void child_disabled_level(void) {
        static struct log_ratelimit rl = LOG_RATELIMIT_INIT("debug things");
        char buf[4096];
        int r = stderr_to_pipe();

        for (int i = 0; i < 50; i++)
                log_ratelimited(&rl, LOG_LEVEL_DEBUG, "debug thing %d", i);
        log_flush();
        exit(drain(r, buf, sizeof buf) == 0 ? 0 : 50);
}

static void (*const children[])(void) = {
        child_dropped_then_said,
        child_patient_line_waits_for_the_reader,
        child_patience_ends_when_the_reader_stalls,
        child_patience_is_one_budget_per_window,
        child_stall_is_known_until_a_line_gets_through,
        child_ratelimited_and_flushed,
        child_disabled_level,
};

START_TEST(test_stderr) {
        unit_child_passes(children, _i);
}
END_TEST

int main(void) {
        Suite *s = suite_create("log");
        TCase *tc = tcase_create("ratelimit");

        tcase_add_test(tc, test_first_burst_then_held);
        tcase_add_test(tc, test_summary_when_the_interval_ends);
        tcase_add_test(tc, test_quiet_interval_has_no_summary);
        tcase_add_test(tc, test_take_ends_the_interval);
        suite_add_tcase(s, tc);
        tc = tcase_create("stderr");
        tcase_add_loop_test(tc, test_stderr, 0, ARRAY_SIZE(children));
        suite_add_tcase(s, tc);
        return unit_run(s);
}
