/* SPDX-License-Identifier: MIT */
/* --ready-exec=COMMAND: "/bin/sh -c COMMAND" (templates expanded) exits
 * 0, tried every --ready-interval (attempts.h; each attempt in
 * exec_attempt.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attempts.h"
#include "ready_check.h"
#include "env.h"
#include "exec_attempt.h"
#include "log.h"
#include "template.h"

struct exec_check {
        struct ready_check check;
        uint64_t interval_usec;
        char *command; /* templates expanded */
        struct child_env env;
        struct exec_attempt ea;
        struct attempts attempts;
};

#define EXEC_OF(c) ((struct exec_check *) (c))

static void exec_begin(struct exec_check *e);

/* Before the attempt's fds are closed: the loop indexes sources by fd. */
static void exec_unwatch(struct exec_check *e) {
        if (e->ea.done_fd >= 0)
                loop_remove(e->check.loop, e->ea.done_fd);
        if (e->ea.output_fd >= 0)
                loop_remove(e->check.loop, e->ea.output_fd);
}

static int exec_event(struct loop *l, int fd, uint32_t revents, void *userdata) {
        struct exec_check *e = userdata;
        char what[128];

        if (fd == e->ea.output_fd) {
                /* At EOF the pipe is closed: stop watching it first. */
                loop_remove(l, fd);
                exec_attempt_read(&e->ea);
                if (e->ea.output_fd >= 0)
                        (void) loop_add(l, fd, LOOP_IN, exec_event, e);
                return 0;
        }
        if (fd != e->ea.done_fd || e->ea.pid <= 0)
                return 0;
        exec_unwatch(e);
        if (exec_attempt_finish(&e->ea) <= 0) {
                attempt_failed(&e->attempts);
                return 0;
        }
        attempts_stop(&e->attempts);
        snprintf(what, sizeof what, "--ready-exec exited 0 (attempt %u)", e->attempts.count);
        ready_check_met(&e->check, what);
        return 0;
}

static int exec_timer(struct loop *l, struct loop_timer *t, void *userdata) {
        struct exec_check *e = userdata;

        if (!e->check.waiting)
                return 0;
        if (!e->attempts.running) {
                exec_begin(e);
                return 0;
        }
        /* Its time is up. */
        exec_unwatch(e);
        exec_attempt_kill(&e->ea);
        attempt_timed_out(&e->attempts);
        return 0;
}

static void exec_begin(struct exec_check *e) {
        int r = exec_attempt_begin(&e->ea);

        if (r < 0) {
                log_error_errno(r, "cannot run the --ready-exec command: %m");
                e->attempts.count++;
                e->attempts.started = now_usec();
                attempt_failed(&e->attempts);
                return;
        }
        attempt_started(&e->attempts);
        if ((r = loop_add(e->check.loop, e->ea.done_fd, LOOP_IN, exec_event, e)) < 0 ||
            (r = loop_add(e->check.loop, e->ea.output_fd, LOOP_IN, exec_event, e)) < 0)
                log_error_errno(r, "cannot watch the --ready-exec command: %m");
}

static int exec_start(struct ready_check *c) {
        struct exec_check *e = EXEC_OF(c);

        e->ea.status = -1;
        e->ea.timed_out = false;
        e->ea.last_output[0] = '\0';
        attempts_begin(&e->attempts, c->loop, e->interval_usec, exec_timer, e);
        return 0;
}

static void exec_stop(struct ready_check *c) {
        struct exec_check *e = EXEC_OF(c);

        attempts_stop(&e->attempts);
        if (e->ea.pid > 0) {
                exec_unwatch(e);
                exec_attempt_kill(&e->ea);
        }
}

static const char *last_line(const char *text, char *buf, size_t size) {
        const char *end = text + strlen(text);

        /* The last non-empty line says most: "no response", an error. */
        while (end > text && (end[-1] == '\n' || end[-1] == '\r' || end[-1] == ' '))
                end--;
        for (const char *s = end; s > text; s--)
                if (s[-1] == '\n') {
                        text = s;
                        break;
                }
        snprintf(buf, size, "%.*s", (int) (end - text), text);
        return buf;
}

static size_t exec_describe(const struct ready_check *c, char *buf, size_t size) {
        const struct exec_check *e = EXEC_OF(c);
        char quoted[LOG_QUOTE_SIZE], line[256];
        size_t len = 0;

#define APPEND(...) (len += (size_t) snprintf(len < size ? buf + len : NULL, len < size ? size - len : 0, __VA_ARGS__))
        APPEND("did not pass --ready-exec '%s' (", log_shorten(e->command, quoted));
        if (e->ea.status < 0)
                APPEND("has not finished yet");
        else if (e->ea.timed_out)
                APPEND("did not finish within %.1fs", (double) e->attempts.last_bound / USEC_PER_SEC);
        else
                APPEND("exited with status %d", e->ea.status);
        APPEND(", %u attempt%s", e->attempts.count, e->attempts.count == 1 ? "" : "s");
        if (e->ea.status >= 0 && e->ea.last_output[0])
                APPEND(": '%s'", last_line(e->ea.last_output, line, sizeof line));
        APPEND(")");
#undef APPEND
        return len;
}

static void exec_free(struct ready_check *c) {
        struct exec_check *e = EXEC_OF(c);

        if (c->loop)
                exec_stop(c);
        free(e->command);
        child_env_done(&e->env);
        free(e);
}

static const char *exec_refuse(const char *arg) {
        return *arg ? NULL : "empty command";
}

/* sh -c reads the command: each value is quoted as one word, so a path
 * with a space or "$(…)" in it is a path, never shell code. */
static int expand(const char *command, const struct bound_socket *sockets, size_t n, char **ret) {
        char quoted[LOG_QUOTE_SIZE];
        size_t offset = 0;
        int r = template_expand(command, sockets, n, TEMPLATE_SHELL, ret, &offset);

        if (r == -ENOMEM)
                return log_oom();
        if (r < 0) {
                log_error("--ready-exec: '%s': %s at '%s'", log_shorten(command, quoted),
                          r == -ENOENT  ? "no socket of that name or index"
                          : r == -EBADR ? "unknown field (port, host, addr, url, fd, name)"
                                        : "bad template (write {{ and }} for braces)",
                          command + offset);
                return -EINVAL;
        }
        return 0;
}

/* The command's environment: COMMAND's, less what is COMMAND's alone
 * (LISTEN_*, its NOTIFY_SOCKET). */
static int build_env(char *const *setenv, size_t n_setenv, struct child_env *ret) {
        char **kept = calloc(n_setenv + 1, sizeof *kept);
        size_t n_kept = 0;
        int r;

        if (!kept)
                return log_oom();
        for (size_t i = 0; i < n_setenv; i++)
                if (strncmp(setenv[i], "NOTIFY_SOCKET=", strlen("NOTIFY_SOCKET=")) != 0)
                        kept[n_kept++] = setenv[i];
        r = child_env_build(environ, kept, n_kept, NULL, 0, ret);
        free(kept);
        return r < 0 ? log_oom() : 0;
}

static int exec_create(const char *command, const struct ready_check_env *env, struct ready_check **ret) {
        struct exec_check *e = calloc(1, sizeof *e);
        int r;

        if (!e)
                return log_oom();
        e->check.kind = &ready_check_exec;
        e->interval_usec = env->interval_usec;
        r = expand(command, env->sockets, env->n_sockets, &e->command);
        if (r >= 0)
                r = build_env(env->setenv, env->n_setenv, &e->env);
        if (r < 0) {
                exec_free(&e->check);
                return r;
        }
        exec_attempt_init(&e->ea, e->command, e->env.envp);
        *ret = &e->check;
        return 0;
}

const struct ready_check_kind ready_check_exec = {
        .name = "exec",
        .start = exec_start,
        .stop = exec_stop,
        .describe = exec_describe,
        .free = exec_free,
        .refuse = exec_refuse,
        .create = exec_create,
        .retries = true,
};
