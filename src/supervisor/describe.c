/* SPDX-License-Identifier: MIT */
/* config_describe(): the config as the canonical command line that two
 * --share callers must agree on (share/ compares the texts). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "config.h"
#include "macro.h"
#include "options.h"

/* One argument as a shell would need it: bare when it is plain, else in
 * single quotes ('\'' for a quote). */
static void put_word(FILE *f, const char *word) {
        static const char plain[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:=@%+,-{}[]";

        fputc(' ', f);
        if (*word && strspn(word, plain) == strlen(word)) {
                fputs(word, f);
                return;
        }
        fputc('\'', f);
        for (const char *p = word; *p; p++)
                if (*p == '\'')
                        fputs("'\\''", f);
                else
                        fputc(*p, f);
        fputc('\'', f);
}

static void put_option(FILE *f, const char *option, const char *value) {
        _cleanup_free_ char *word = NULL;

        if (!value) {
                put_word(f, option);
                return;
        }
        if (asprintf(&word, "%s=%s", option, value) < 0) {
                /* The stream's own error then says ENOMEM. */
                fputc('\0', f);
                return;
        }
        put_word(f, word);
}

static void put_duration(FILE *f, const char *option, uint64_t usec) {
        char value[32];

        snprintf(value, sizeof value, "%" PRIu64 "ms", usec / 1000);
        put_option(f, option, value);
}

/* -l as a canonical address: "-l 0" and "-l 127.0.0.1:0" are one socket. */
static void put_listen(FILE *f, const struct listen_spec *spec) {
        char addr[ADDRESS_STRING_MAX], value[FDNAME_MAX + ADDRESS_STRING_MAX + 8];
        int family = spec->addr.sa.sa_family;

        snprintf(value, sizeof value, "%s%s%s%s", spec->name ?: "", spec->name ? "=" : "",
                 family == AF_UNIX          ? "unix:"
                 : spec->type == SOCK_DGRAM ? "udp:"
                                            : "",
                 sockaddr_to_string(&spec->addr, spec->addr_len, addr, sizeof addr));
        put_option(f, "--listen", value);
}

static void put_readiness(FILE *f, const struct config *c) {
        if (c->ready.notify)
                put_option(f, "--ready", NULL);
        /* In the option table's order, whatever the command line's. */
        for (size_t i = 0; i < n_option_defs; i++) {
                const char *arg = option_defs[i].check ? ready_options_arg(&c->ready, option_defs[i].check) : NULL;
                char option[64];

                if (!arg)
                        continue;
                snprintf(option, sizeof option, "--%s", option_defs[i].name);
                put_option(f, option, arg);
        }
        if (ready_options_retry(&c->ready))
                put_duration(f, "--ready-interval", c->ready.interval_usec);
        if (config_waits_ready(c) || c->n_intercepts > 0) {
                if (c->ready.timeout_usec == 0)
                        put_option(f, "--ready-timeout", "infinity");
                else
                        put_duration(f, "--ready-timeout", c->ready.timeout_usec);
        }
}

static void put_restart(FILE *f, const struct config *c) {
        static const char *const modes[] = {
                [RESTART_NO] = "no",
                [RESTART_ON_FAILURE] = "on-failure",
                [RESTART_ALWAYS] = "always",
        };
        char limit[48];

        if (!c->restart_set)
                return;
        put_option(f, "--restart", modes[c->restart]);
        put_duration(f, "--restart-delay", c->restart_delay_usec);
        snprintf(limit, sizeof limit, "%u/%" PRIu64 "ms", c->restart_burst, c->restart_interval_usec / 1000);
        put_option(f, "--restart-limit", limit);
}

/* What a reload request does, and what makes one: a server that reloads
 * on changes is not one that never does. */
static void put_reload(FILE *f, const struct config *c) {
        if (c->reload_set)
                put_option(f, "--reload", c->reload == RELOAD_OVERLAP ? "overlap" : "restart");
        for (size_t i = 0; i < c->n_watch; i++)
                put_option(f, "--watch", c->watch[i]);
        if (c->n_watch == 0)
                return;
        put_duration(f, "--watch-delay", c->watch_delay_usec);
        /* An empty glob clears the defaults (config.c). */
        if (!c->watch_ignore_defaults)
                put_option(f, "--watch-ignore", "");
        for (size_t i = 0; i < c->n_watch_ignore; i++)
                put_option(f, "--watch-ignore", c->watch_ignore[i]);
}

static void put_supervision(FILE *f, const struct config *c) {
        char value[32];

        if (c->group)
                put_option(f, "--group", NULL);
        if (c->kill_after_usec)
                put_duration(f, "--kill-after", c->kill_after_usec);
        if (c->subreaper)
                put_option(f, "--subreaper", NULL);
        for (int i = 0; i < 256; i++)
                if (c->success_status[i]) {
                        snprintf(value, sizeof value, "%d", i);
                        put_option(f, "--success-status", value);
                }
        if (c->netns)
                put_option(f, "--netns", NULL);
        if (c->no_die_with_supervisor)
                put_option(f, "--no-die-with-supervisor", NULL);
}

int config_describe(const struct config *c, char **ret) {
        _cleanup_free_ char *text = NULL;
        size_t size = 0;
        char value[FDNAME_MAX + 16];
        FILE *f = open_memstream(&text, &size);
        int failed;

        if (!f)
                return -ENOMEM;
        /* No -l is the default socket, as -l 0 spells it: described as
         * one too, so that the two agree. */
        for (size_t i = 0; i < c->n_listens; i++)
                put_listen(f, &c->listens[i]);
        if (c->socket_options.backlog != SOMAXCONN) {
                snprintf(value, sizeof value, "%d", c->socket_options.backlog);
                put_option(f, "--backlog", value);
        }
        if (c->socket_options.reuseport)
                put_option(f, "--reuseport", NULL);
        if (c->socket_options.v6only)
                put_option(f, "--v6only", NULL);
        if (c->socket_options.socket_mode != 0666) {
                snprintf(value, sizeof value, "%04o", (unsigned) c->socket_options.socket_mode);
                put_option(f, "--socket-mode", value);
        }
        for (size_t i = 0; i < c->n_setenv; i++)
                put_option(f, "--setenv", c->setenv[i]);
        if (c->subst)
                put_option(f, "--subst", NULL);
        for (size_t i = 0; i < c->n_intercepts; i++) {
                const struct intercept_spec *in = &c->intercepts[i];
                _cleanup_free_ char *spec = NULL;
                int k;

                /* A template as written: its expansion is per run. */
                if (in->port_template)
                        k = asprintf(&spec, "%s%s%s", in->name ?: "", in->name ? "=" : "", in->port_template);
                else
                        k = asprintf(&spec, "%s%s%u", in->name ?: "", in->name ? "=" : "", in->port);
                if (k < 0) {
                        fputc('\0', f); /* the mark of a failed asprintf() */
                        continue;
                }
                put_option(f, "--intercept", spec);
        }
        if (c->n_intercepts > 0 && c->intercept_via != INTERCEPT_VIA_AUTO) {
                static const char *const via[] = {
                        [INTERCEPT_VIA_SECCOMP] = "seccomp",
                        [INTERCEPT_VIA_PRELOAD] = "preload",
                        [INTERCEPT_VIA_FORWARD] = "forward",
                };
                put_option(f, "--intercept-via", via[c->intercept_via]);
        }
        if (c->n_intercepts > 0 && c->netns) {
                snprintf(value, sizeof value, "%u", c->max_connections);
                put_option(f, "--max-connections", value);
        }
        put_readiness(f, c);
        put_restart(f, c);
        put_reload(f, c);
        put_supervision(f, c);
        fputs(" --", f);
        for (char **a = c->command; a && *a; a++)
                put_word(f, *a);
        failed = ferror(f);
        /* A '\0' in the text is put_option()'s mark of a failed asprintf(). */
        if (fclose(f) != 0 || failed || !text || memchr(text, '\0', size))
                return -ENOMEM;
        /* Without the leading space. */
        memmove(text, text + 1, size);
        *ret = TAKE_PTR(text);
        return 0;
}
