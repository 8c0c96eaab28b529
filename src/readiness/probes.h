/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "loop.h"
#include "parse.h"
#include "ready.h"
#include "socket.h"

/* The readiness conditions for servers that do not speak sd_notify, as
 * event sources on the supervisor's loop: --ready-log (a line of
 * COMMAND's output matches; the output is relayed), --ready-exec (a probe
 * command exits 0) and --ready-http (GET PATH answers 2xx/3xx). ready.c
 * holds them as conditions among its own: each new COMMAND is waited for
 * again (probes_start()), and each condition is reported as it is met. */
struct probes;

enum probe_condition {
        PROBE_LOG = 1u << 0,
        PROBE_EXEC = 1u << 1,
        PROBE_HTTP = 1u << 2,
};

typedef void (*probe_met_callback)(enum probe_condition condition, void *userdata);

/* Nothing to do when the options ask for none of them: *ret is NULL.
 * setenv: the -E entries (expanded), for the probe's environment. Logs
 * what is wrong with the options (a bad regex, no TCP socket, a bad
 * template) and returns -EINVAL, or another -errno (logged). */
int probes_new(const struct readiness_options *options, const struct bound_socket *sockets, size_t n,
               char *const *setenv, size_t n_setenv, struct probes **ret);
void probes_free(struct probes *p);

/* The enum probe_condition bits the options ask for. */
unsigned probes_conditions(const struct probes *p);

/* On the loop: the output relay from now on (it runs as long as prebind
 * does); the probes' sources come and go with probes_start()/_stop().
 * Returns 0 or -errno. */
int probes_attach(struct probes *p, struct loop *l, probe_met_callback callback, void *userdata);
void probes_detach(struct probes *p);

/* --ready-log: the fds COMMAND gets as stdout and stderr (0: prebind's). */
void probes_child_output(const struct probes *p, int *ret_stdout, int *ret_stderr);
/* Before a COMMAND starts: new pipes for it if the current ones belong
 * to a COMMAND that still runs (--reload=overlap). Returns 0 or -errno. */
int probes_prepare_output(struct probes *p);

/* A new COMMAND (child) started: every condition is unmet again, the
 * probes begin; only its own output's lines count. */
void probes_start(struct probes *p, pid_t child);
/* Stop probing (ready, or given up); the output relay goes on. */
void probes_stop(struct probes *p);
/* A COMMAND (child) has exited: pass on all it wrote (logs what it had
 * to drop); pipes of its own that no new COMMAND will get are closed. */
void probes_command_exited(struct probes *p, pid_t child);

/* What is not met, for a one-line message ("no line of its output
 * matched …", "--ready-http GET / answered 503 (12 attempts)"), each
 * pending condition of which after sep. Returns the length written (as
 * snprintf). */
size_t probes_describe_unmet(const struct probes *p, unsigned which, const char *sep, char *buf, size_t size);
/* After that line: the last lines COMMAND wrote (--ready-log), one log
 * line each. */
void probes_log_tail(struct probes *p, const char *command);

/* Scheduling, pure: an attempt may take max(interval, 1s); the next
 * starts interval after the last one started, and never before it
 * ended (attempts never overlap). An attempt that runs out of time
 * doubles the bound of the next, up to PROBE_BOUND_MAX: on a loaded
 * machine (a CI runner at load 30 was measured) `sh -c 'redis-cli ping'`
 * takes more than a second to start, and a fixed bound would kill every
 * attempt. A hung probe still costs at most one bound per attempt. */
#define PROBE_BOUND_MAX (8 * USEC_PER_SEC)
uint64_t probe_attempt_timeout(uint64_t interval_usec);
uint64_t probe_next_bound(uint64_t bound_usec);
uint64_t probe_next_start(uint64_t started_usec, uint64_t ended_usec, uint64_t interval_usec);
