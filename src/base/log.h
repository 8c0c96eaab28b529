/* SPDX-License-Identifier: MIT */
#pragma once

#include <errno.h>

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
void log_full(enum log_level level, int err, const char *format, ...)
        __attribute__((format(printf, 3, 4)));

/* Log an error and return -err (err may be given positive or negative), so
 * that the caller can write: return log_error_errno(r, "cannot bind '%s': %m", s); */
int log_error_errno(int err, const char *format, ...) __attribute__((format(printf, 2, 3)));

/* A user's string as a message quotes it: whole, or its first
 * LOG_QUOTE_MAX bytes and "...", so that the reason that follows it is
 * never cut off by the length of a line. buf holds LOG_QUOTE_SIZE bytes. */
#define LOG_QUOTE_MAX 200
#define LOG_QUOTE_SIZE (LOG_QUOTE_MAX + 4)
const char *log_shorten(const char *s, char *buf);

#define log_error(...) log_full(LOG_LEVEL_ERROR, 0, __VA_ARGS__)
#define log_info(...)  log_full(LOG_LEVEL_INFO, 0, __VA_ARGS__)
#define log_debug(...) log_full(LOG_LEVEL_DEBUG, 0, __VA_ARGS__)
/* The one way to say it: return log_oom(); */
#define log_oom() log_error_errno(ENOMEM, "out of memory")
