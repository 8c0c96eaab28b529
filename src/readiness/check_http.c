/* SPDX-License-Identifier: MIT */
/* --ready-http[=PATH]: GET PATH on the first TCP socket answers 2xx or
 * 3xx, tried every --ready-interval (attempts.h; each attempt, one
 * connection, in http_attempt.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attempts.h"
#include "ready_check.h"
#include "http_attempt.h"
#include "log.h"

struct http_check {
        struct ready_check check;
        const char *path;
        uint64_t interval_usec;
        struct http_attempt ha;
        struct http_result { /* the last attempt that is over */
                int status, error;
                bool garbage, over;
        } last;
        struct attempts attempts;
        int fd; /* ha.fd as watched on the loop, or -1 */
};

#define HTTP_OF(c) ((struct http_check *) (c))

static void http_begin(struct http_check *h);

/* The attempt is over, not ready: what it got, for the message (the next
 * attempt starts afresh in h->ha). */
static void http_failed(struct http_check *h, bool timed_out) {
        h->last = (struct http_result) { h->ha.status, h->ha.error, h->ha.garbage, true };
        if (timed_out)
                attempt_timed_out(&h->attempts);
        else
                attempt_failed(&h->attempts);
}

static void http_unwatch(struct http_check *h) {
        if (h->fd >= 0)
                loop_remove(h->check.loop, h->fd);
        h->fd = -1;
}

static int http_event(struct loop *l, int fd, uint32_t revents, void *userdata) {
        struct http_check *h = userdata;
        char what[64];
        int r;

        if (fd != h->fd || fd != h->ha.fd)
                return 0;
        r = http_attempt_continue(&h->ha);
        if (r == 0) {
                (void) loop_modify(l, fd, http_attempt_events(&h->ha));
                return 0;
        }
        loop_remove(l, fd);
        h->fd = -1;
        if (r < 0) {
                http_failed(h, false);
                return 0;
        }
        attempts_stop(&h->attempts);
        snprintf(what, sizeof what, "--ready-http answered %d (attempt %u)", h->ha.status, h->attempts.count);
        ready_check_met(&h->check, what);
        return 0;
}

static int http_timer(struct loop *l, struct loop_timer *t, void *userdata) {
        struct http_check *h = userdata;

        if (!h->check.waiting)
                return 0;
        if (!h->attempts.running) {
                http_begin(h);
                return 0;
        }
        /* Not accepted yet: wait on; the --ready timeout bounds it. */
        if (http_attempt_queued(&h->ha)) {
                attempt_extend(&h->attempts);
                return 0;
        }
        /* No answer in time: COMMAND is busy, or does not answer. */
        http_unwatch(h);
        http_attempt_abort(&h->ha);
        h->ha.error = ETIMEDOUT;
        http_failed(h, true);
        return 0;
}

static void http_begin(struct http_check *h) {
        int r = http_attempt_begin(&h->ha);

        attempt_started(&h->attempts);
        if (r < 0) {
                http_failed(h, false);
                return;
        }
        if ((r = loop_add(h->check.loop, h->ha.fd, http_attempt_events(&h->ha), http_event, h)) < 0) {
                log_error_errno(r, "cannot watch the --ready-http connection: %m");
                http_attempt_abort(&h->ha);
                http_failed(h, false);
                return;
        }
        h->fd = h->ha.fd;
}

static int http_start(struct ready_check *c) {
        struct http_check *h = HTTP_OF(c);

        h->last = (struct http_result) { 0 };
        attempts_begin(&h->attempts, c->loop, h->interval_usec, http_timer, h);
        return 0;
}

static void http_stop(struct ready_check *c) {
        struct http_check *h = HTTP_OF(c);

        attempts_stop(&h->attempts);
        http_unwatch(h);
        http_attempt_abort(&h->ha);
}

static size_t http_describe(const struct ready_check *c, char *buf, size_t size) {
        const struct http_check *h = HTTP_OF(c);
        const struct http_result *last = &h->last;
        size_t len = 0;

#define APPEND(...) (len += (size_t) snprintf(len < size ? buf + len : NULL, len < size ? size - len : 0, __VA_ARGS__))
        APPEND("did not pass --ready-http (GET %s ", h->path);
        if (!last->over)
                APPEND("got no answer yet");
        else if (last->status)
                APPEND("answered %d", last->status);
        else if (last->garbage)
                APPEND("got an answer that is not HTTP/1.x");
        else if (last->error == ETIMEDOUT)
                APPEND("got no answer within %.1fs", (double) h->attempts.last_bound / USEC_PER_SEC);
        else if (last->error)
                APPEND("failed: %s", strerror(last->error));
        else
                APPEND("got no answer");
        APPEND(", %u attempt%s)", h->attempts.count, h->attempts.count == 1 ? "" : "s");
#undef APPEND
        return len;
}

static void http_free(struct ready_check *c) {
        struct http_check *h = HTTP_OF(c);

        if (c->loop)
                http_stop(c);
        http_attempt_done(&h->ha);
        free(h);
}

static int http_create(const char *path, const struct ready_check_env *env, struct ready_check **ret) {
        const struct bound_socket *s = http_attempt_socket(env->sockets, env->n_sockets);
        struct http_check *h;
        char quoted[LOG_QUOTE_SIZE];
        int r;

        if (!s) {
                log_error("--ready-http needs a TCP socket (-l PORT or -l HOST:PORT) (see --help)");
                return -EINVAL;
        }
        h = calloc(1, sizeof *h);
        if (!h)
                return log_oom();
        *h = (struct http_check) {
                .check.kind = &ready_check_http, .path = path, .interval_usec = env->interval_usec, .fd = -1
        };
        r = http_attempt_init(&h->ha, s, path);
        if (r < 0) {
                free(h);
                if (r != -EINVAL)
                        return log_oom();
                log_error("--ready-http: '%s': expected a path from '/', without spaces (see --help)",
                          log_shorten(path, quoted));
                return r;
        }
        *ret = &h->check;
        return 0;
}

const struct ready_check_kind ready_check_http = {
        .name = "http",
        .start = http_start,
        .stop = http_stop,
        .describe = http_describe,
        .free = http_free,
        .create = http_create,
        .default_arg = "/",
        .retries = true,
};
