/* SPDX-License-Identifier: MIT */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "log.h"

static enum log_level current_level = LOG_LEVEL_INFO;

void log_set_level(enum log_level level) {
        current_level = level;
}

enum log_level log_get_level(void) {
        return current_level;
}

static void log_va(enum log_level level, int err, const char *format, va_list ap) {
        int saved_errno = errno;
        char line[1024];

        if (level > current_level)
                return;
        if (err != 0)
                errno = abs(err);
        /* One write(2)-sized line, so concurrent writers on a shared stderr
         * never interleave within a message. */
        vsnprintf(line, sizeof line, format, ap);
        fprintf(stderr, "prebind: %s\n", line);
        fflush(stderr);
        errno = saved_errno;
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
