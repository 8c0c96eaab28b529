/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "config.h"
#include "env.h"
#include "log.h"
#include "macro.h"
#include "options.h"
#include "share.h"
#include "version.h"

/* One line that says what was wrong and where to look. */
static int usage_error(const char *option, const char *arg, const char *detail) {
        char quoted[LOG_QUOTE_SIZE];

        if (option)
                log_error("%s: '%s': %s (see --help)", option, log_shorten(arg, quoted), detail);
        else
                log_error("%s (see --help)", detail);
        return -EINVAL;
}

static const char *listen_error(int r) {
        switch (r) {
        case -ERANGE:
                return "port out of range 0-65535";
        case -ENAMETOOLONG:
                return "unix socket path too long";
        case -ENODEV:
                return "no such network interface";
        default:
                return "invalid address";
        }
}

static int add_listen(struct config *c, const char *arg) {
        struct listen_spec spec, *grown;
        int r;

        r = listen_spec_parse(arg, &spec);
        if (r == -ENOMEM)
                return log_oom();
        if (r < 0)
                return usage_error("--listen", arg, listen_error(r));
        grown = realloc(c->listens, (c->n_listens + 1) * sizeof *grown);
        if (!grown) {
                listen_spec_done(&spec);
                return log_oom();
        }
        c->listens = grown;
        c->listens[c->n_listens++] = spec;
        return 0;
}

static int add_setenv(struct config *c, char *arg) {
        const char *eq = strchr(arg, '=');
        size_t len = eq ? (size_t) (eq - arg) : strlen(arg);
        char **grown;

        if (len == 0)
                return usage_error("--setenv", arg, "missing variable name");
        if (protocol_variable_of(arg, len) == PROTOCOL_LISTEN)
                return usage_error("--setenv", arg, "this variable is set by prebind");
        grown = realloc(c->setenv, (c->n_setenv + 1) * sizeof *grown);
        if (!grown)
                return log_oom();
        c->setenv = grown;
        c->setenv[c->n_setenv++] = arg;
        return 0;
}

/* One more --watch or --watch-ignore argument, bounded. */
static int add_watch_arg(const char *option, const char ***list, size_t *n, const char *arg) {
        const char **grown;

        if (*n >= WATCH_ARGS_MAX)
                return usage_error(option, arg, "too many (at most 64)");
        grown = realloc(*list, (*n + 1) * sizeof *grown);
        if (!grown)
                return log_oom();
        *list = grown;
        (*list)[(*n)++] = arg;
        return 0;
}

/* "[NAME=]PORT". NAME must name a socket: checked once the sockets,
 * inherited ones too, are known. */
static int add_intercept(struct config *c, const char *arg) {
        const char *eq = strrchr(arg, '=');
        struct intercept_spec *grown;
        _cleanup_free_ char *name = NULL;
        const char *value = eq ? eq + 1 : arg;
        unsigned long port = 0;

        /* A template ("{port}") is expanded once the sockets are bound. */
        if (!strchr(value, '{') && parse_uint(value, 1, 65535, &port) < 0)
                return usage_error("--intercept", arg,
                                   "expected [NAME=]PORT with a port from 1 to 65535, or a "
                                   "template such as {port}");
        if (eq && !(name = strndup(arg, (size_t) (eq - arg))))
                return log_oom();
        if (name && !fdname_is_valid(name))
                return usage_error("--intercept", arg, "invalid socket name");
        grown = realloc(c->intercepts, (c->n_intercepts + 1) * sizeof *grown);
        if (!grown)
                return log_oom();
        c->intercepts = grown;
        c->intercepts[c->n_intercepts++] = (struct intercept_spec) {
                .name = TAKE_PTR(name),
                .port = (uint16_t) port,
                .port_template = port ? NULL : value,
        };
        return 0;
}

static int parse_format(const char *option, const char *arg, enum output_format *ret) {
        enum output_format f = output_format_from_string(arg);

        if (f < 0)
                return usage_error(option, arg, "expected port, addr, url, json or env");
        *ret = f;
        return 0;
}

/* "N" or "N/DURATION": at most N restarts within DURATION. */
static int parse_restart_limit(struct config *c, const char *arg) {
        const char *slash = strchr(arg, '/');
        char count[16];
        unsigned long n;
        size_t len = slash ? (size_t) (slash - arg) : strlen(arg);

        if (len == 0 || len >= sizeof count)
                return usage_error("--restart-limit", arg, "expected N or N/DURATION, such as 5/10s");
        memcpy(count, arg, len);
        count[len] = '\0';
        if (parse_uint(count, 0, 1000, &n) < 0 ||
            (slash && (parse_duration(slash + 1, &c->restart_interval_usec) < 0 || c->restart_interval_usec == 0)))
                return usage_error("--restart-limit", arg, "expected N or N/DURATION, such as 5/10s");
        c->restart_burst = (unsigned) n;
        return 0;
}

/* --ready=TIMEOUT and --ready-timeout=TIMEOUT: one timeout for all. */
static int parse_ready_timeout(struct config *c, const char *option, const char *arg) {
        if (strcmp(arg, "infinity") == 0)
                c->ready.timeout_usec = 0;
        else if (parse_duration(arg, &c->ready.timeout_usec) < 0 || c->ready.timeout_usec == 0)
                return usage_error(option, arg, "expected a duration such as 30s, or infinity");
        return 0;
}

/* An option whose row names a readiness check: readiness takes the
 * argument, and says what is wrong with it. */
static int add_check(struct config *c, const struct option_def *def, const char *arg) {
        char option[64];
        const char *why = ready_options_add(&c->ready, def->check, arg);

        if (!why)
                return 0;
        snprintf(option, sizeof option, "--%s", def->name);
        return usage_error(option, arg ?: "", why);
}

/* What parse_*_option() return for an option that is not theirs. */
#define NOT_MINE 1

/* The sockets, how they are published and accepted on. */
static int parse_socket_option(struct config *c, int opt, char *arg, bool *print_format_set) {
        unsigned long n;

        switch (opt) {
        case 'l':
                return add_listen(c, arg);
        case ARG_BACKLOG:
                if (parse_uint(arg, 1, INT32_MAX, &n) < 0)
                        return usage_error("--backlog", arg, "expected a number from 1");
                c->socket_options.backlog = (int) n;
                return 0;
        case ARG_REUSEPORT:
                c->socket_options.reuseport = true;
                return 0;
        case ARG_V6ONLY:
                c->socket_options.v6only = true;
                return 0;
        case ARG_SOCKET_MODE: {
                char *end;

                errno = 0;
                n = strtoul(arg, &end, 8);
                if (!*arg || arg[strspn(arg, "01234567")] != '\0' || *end || errno || n > 0777)
                        return usage_error("--socket-mode", arg, "expected an octal mode such as 0660");
                c->socket_options.socket_mode = (mode_t) n;
                return 0;
        }
        case ARG_PRINT:
                c->publish.print = true;
                if (arg) {
                        *print_format_set = true;
                        return parse_format("--print", arg, &c->publish.print_format);
                }
                return 0;
        case ARG_PORT_FILE:
                if (!*arg)
                        return usage_error("--port-file", arg, "empty path");
                c->publish.port_file = arg;
                return 0;
        case ARG_PORT_FD:
                if (parse_uint(arg, 0, INT32_MAX, &n) < 0)
                        return usage_error("--port-fd", arg, "expected a file descriptor number");
                if (n <= 2)
                        return usage_error("--port-fd", arg, "use --print for stdout; fds 0-2 are COMMAND's");
                if (fcntl((int) n, F_GETFD) < 0)
                        return usage_error("--port-fd", arg, "not an open file descriptor");
                c->publish.port_fd = (int) n;
                return 0;
        case ARG_FORMAT:
                return parse_format("--format", arg, &c->publish.format);
        case ARG_ACCEPT:
                c->accept = true;
                return 0;
        case ARG_MAX_CONNECTIONS:
                if (parse_uint(arg, 1, 1000000, &n) < 0)
                        return usage_error("--max-connections", arg, "expected a number from 1");
                c->max_connections = (unsigned) n;
                return 0;
        case ARG_INETD:
                c->inetd = true;
                return 0;
        default:
                return NOT_MINE;
        }
}

/* --share and its queries. */
static int parse_share_option(struct config *c, int opt, char *arg) {
        switch (opt) {
        case ARG_SHARE:
                if (!share_name_is_valid(arg))
                        return usage_error("--share", arg,
                                           "expected a name of 1-64 letters, digits, '.', '_' or "
                                           "'-', not starting with '.'");
                c->share.name = arg;
                return 0;
        case ARG_SHARE_LINGER:
                if (strcmp(arg, "infinity") == 0)
                        c->share.linger_usec = UINT64_MAX;
                else if (parse_duration(arg, &c->share.linger_usec) < 0)
                        return usage_error("--share-linger", arg, "expected a duration such as 1s, or infinity");
                c->share_linger_set = true;
                return 0;
        case ARG_STATUS:
                c->share.action = SHARE_ACTION_STATUS;
                return 0;
        case ARG_STOP:
                c->share.action = SHARE_ACTION_STOP;
                return 0;
        default:
                return NOT_MINE;
        }
}

/* How COMMAND runs: its environment, readiness, interception, its
 * process group and its end. */
static int parse_command_option(struct config *c, int opt, char *arg) {
        unsigned long n;

        switch (opt) {
        case 'E':
                return add_setenv(c, arg);
        case ARG_SUBST:
                c->subst = true;
                return 0;
        case ARG_EXEC:
                c->exec = true;
                return 0;
        case ARG_READY:
                c->ready.notify = true;
                return arg ? parse_ready_timeout(c, "--ready", arg) : 0;
        case ARG_READY_TIMEOUT:
                return parse_ready_timeout(c, "--ready-timeout", arg);
        case ARG_READY_INTERVAL:
                if (parse_duration(arg, &c->ready.interval_usec) < 0 || c->ready.interval_usec == 0)
                        return usage_error("--ready-interval", arg, "expected a duration such as 100ms or 1s");
                return 0;
        case ARG_INTERCEPT:
                return add_intercept(c, arg);
        case ARG_INTERCEPT_VIA:
                if (strcmp(arg, "auto") == 0)
                        c->intercept_via = INTERCEPT_VIA_AUTO;
                else if (strcmp(arg, "seccomp") == 0)
                        c->intercept_via = INTERCEPT_VIA_SECCOMP;
                else if (strcmp(arg, "preload") == 0)
                        c->intercept_via = INTERCEPT_VIA_PRELOAD;
                else if (strcmp(arg, "forward") == 0)
                        c->intercept_via = INTERCEPT_VIA_FORWARD;
                else
                        return usage_error("--intercept-via", arg, "expected auto, seccomp, preload or forward");
                return 0;
        case ARG_NETNS:
                c->netns = true;
                return 0;
        case ARG_GROUP:
                c->group = true;
                return 0;
        case ARG_KILL_AFTER:
                if (parse_duration(arg, &c->kill_after_usec) < 0 || c->kill_after_usec == 0)
                        return usage_error("--kill-after", arg, "expected a duration such as 10s, 1.5m or 500ms");
                return 0;
        case ARG_DIE_WITH_PARENT:
                c->die_with_parent = true;
                return 0;
        case ARG_NO_DIE_WITH_SUPERVISOR:
                c->no_die_with_supervisor = true;
                return 0;
        case ARG_SUBREAPER:
                c->subreaper = true;
                return 0;
        case ARG_SUCCESS_STATUS:
                if (parse_uint(arg, 0, 255, &n) < 0)
                        return usage_error("--success-status", arg, "expected an exit status from 0 to 255");
                c->success_status[n] = true;
                return 0;
        default:
                return NOT_MINE;
        }
}

/* Restarts, reloads and what is watched for them. */
static int parse_restart_option(struct config *c, int opt, char *arg) {
        switch (opt) {
        case ARG_RESTART:
                if (strcmp(arg, "no") == 0)
                        c->restart = RESTART_NO;
                else if (strcmp(arg, "on-failure") == 0)
                        c->restart = RESTART_ON_FAILURE;
                else if (strcmp(arg, "always") == 0)
                        c->restart = RESTART_ALWAYS;
                else
                        return usage_error("--restart", arg, "expected no, on-failure or always");
                c->restart_set = true;
                return 0;
        case ARG_RESTART_DELAY:
                if (parse_duration(arg, &c->restart_delay_usec) < 0)
                        return usage_error("--restart-delay", arg, "expected a duration such as 1s or 200ms");
                return 0;
        case ARG_RESTART_LIMIT:
                return parse_restart_limit(c, arg);
        case ARG_RELOAD:
                if (strcmp(arg, "restart") == 0)
                        c->reload = RELOAD_RESTART;
                else if (strcmp(arg, "overlap") == 0)
                        c->reload = RELOAD_OVERLAP;
                else
                        return usage_error("--reload", arg, "expected restart or overlap");
                c->reload_set = true;
                return 0;
        case ARG_WATCH:
                if (!*arg)
                        return usage_error("--watch", arg, "empty path");
                return add_watch_arg("--watch", &c->watch, &c->n_watch, arg);
        case ARG_WATCH_DELAY:
                if (parse_duration(arg, &c->watch_delay_usec) < 0 || c->watch_delay_usec > 60 * USEC_PER_SEC)
                        return usage_error("--watch-delay", arg, "expected a duration up to 60s, such as 100ms");
                return 0;
        case ARG_WATCH_IGNORE:
                if (!*arg) {
                        c->watch_ignore_defaults = false;
                        return 0;
                }
                if (strlen(arg) > WATCH_GLOB_MAX)
                        return usage_error("--watch-ignore", arg, "longer than 255 characters");
                return add_watch_arg("--watch-ignore", &c->watch_ignore, &c->n_watch_ignore, arg);
        default:
                return NOT_MINE;
        }
}

static int parse_one(struct config *c, int opt, char *arg, const char *current, bool *print_format_set) {
        int r;

        for (size_t i = 0; i < n_option_defs; i++)
                if (option_defs[i].key == opt && option_defs[i].check)
                        return add_check(c, &option_defs[i], arg);
        if ((r = parse_socket_option(c, opt, arg, print_format_set)) != NOT_MINE ||
            (r = parse_share_option(c, opt, arg)) != NOT_MINE || (r = parse_command_option(c, opt, arg)) != NOT_MINE ||
            (r = parse_restart_option(c, opt, arg)) != NOT_MINE)
                return r;
        switch (opt) {
        case 'q':
                log_set_level(LOG_LEVEL_ERROR);
                return 0;
        case 'v':
                log_set_level(LOG_LEVEL_DEBUG);
                return 0;
        case ':':
                log_error("option '%s' requires an argument (see --help)", current);
                return -EINVAL;
        default:
                log_error("unknown option '%s' (see --help)", current);
                return -EINVAL;
        }
}

/* Combinations that cannot work for their values, told apart after all
 * options are read (options_conflict() tells those of the options
 * themselves). */
static int check_values(const struct config *c) {
        size_t n_stream = 0;

        for (size_t i = 0; i < c->n_listens; i++)
                n_stream += c->listens[i].type == SOCK_STREAM;
        if (c->accept && n_stream != c->n_listens)
                return usage_error(NULL, NULL, "--accept takes stream sockets only (no udp:)");
        /* What each PORT means is checked once the sockets are bound
         * (job.c's intercept_targets()), the same for every --intercept-via. */
        if (c->intercept_via == INTERCEPT_VIA_FORWARD && !c->netns)
                return usage_error(NULL, NULL,
                                   "--intercept-via=forward needs --netns: it forwards to PORT inside COMMAND's "
                                   "namespace");
        if (c->intercept_via == INTERCEPT_VIA_PRELOAD && c->netns && c->n_intercepts)
                return usage_error(NULL, NULL,
                                   "--intercept-via=preload cannot be combined with --netns: the interposer "
                                   "cannot reach prebind from another network namespace (use auto, seccomp "
                                   "or forward)");
        if (c->inetd && !c->accept && c->n_listens > 1)
                return usage_error(NULL, NULL, "--inetd without --accept passes one socket, on stdin");
        /* The old one is stopped once the new one is ready: without a
         * check, "ready" would mean "forked", and the overlap would only
         * give the new one a head start of nothing. */
        if (c->reload == RELOAD_OVERLAP && !config_waits_ready(c) && c->n_intercepts == 0)
                return usage_error(
                        NULL, NULL,
                        "--reload=overlap needs a readiness condition to know when the new "
                        "COMMAND is ready: --ready, --ready-log, --ready-exec, --ready-http or --intercept");
        /* Each COMMAND has a namespace of its own, and the supervisor one
         * --netns job: two generations at once are not supported. */
        if (c->reload == RELOAD_OVERLAP && c->netns)
                return usage_error(NULL, NULL, "--reload=overlap cannot be combined with --netns");
        return 0;
}

/* getopt_long's loop: each option into c, and into *given. Returns 1, 0
 * once --help or --version is printed, or -EINVAL. */
static int parse_options(int argc, char *argv[], struct config *c, option_set *given) {
        bool print_format_set = false;
        int opt, r;

        /* '+': options stop at COMMAND, so "prebind -- srv -l x" and
         * "prebind srv -l x" both leave "-l x" to srv. */
        optind = 0;
        opterr = 0;
        for (;;) {
                /* The element getopt is about to read (optind is 0 before
                 * the first call): a long option is named as typed, a short
                 * one by optopt, as it may be bundled ("-qx"). */
                int element = optind > 0 ? optind : 1, index;
                char short_option[3] = { '-', 0, '\0' };
                const char *current;

                opt = getopt_long(argc, argv, options_optstring(), options_getopt_table(), NULL);
                if (opt < 0)
                        break;
                short_option[1] = (char) optopt;
                current = element < argc && strncmp(argv[element], "--", 2) == 0 ? argv[element] : short_option;

                if (opt == 'h') {
                        options_help(stdout, program_invocation_short_name);
                        return 0;
                }
                if (opt == ARG_VERSION) {
                        printf("prebind %s\n", PREBIND_VERSION);
                        return 0;
                }
                r = parse_one(c, opt, optarg, current, &print_format_set);
                if (r < 0)
                        return r;
                index = options_index(opt);
                if (index >= 0)
                        *given |= (option_set) 1 << index;
        }
        if (!print_format_set)
                c->publish.print_format = c->publish.format;
        return 1;
}

/* What prebind does without options. */
static const struct config config_defaults = {
        .socket_options = { .backlog = SOMAXCONN, .socket_mode = 0666 },
        .publish = { .format = FORMAT_PORT, .port_fd = -1 },
        .ready = { .timeout_usec = 90 * USEC_PER_SEC, .interval_usec = 100 * 1000 /* testcontainers' poll */ },
        /* systemd's RestartSec=, StartLimitBurst= and
         * StartLimitIntervalSec= defaults, and MaxConnections=. */
        .restart_delay_usec = 100 * 1000,
        .restart_burst = 5,
        .restart_interval_usec = 10 * USEC_PER_SEC,
        .max_connections = 64,
        .share = { .linger_usec = 1 * USEC_PER_SEC },
        .watch_ignore_defaults = true,
        .watch_delay_usec = 100 * 1000,
};

int config_parse_argv(int argc, char *argv[], struct config *ret) {
        _cleanup_(config_done) struct config c = config_defaults;
        option_set given = 0;
        const char *conflict;
        int r;

        r = parse_options(argc, argv, &c, &given);
        if (r <= 0)
                return r;
        conflict = options_conflict(given);
        if (conflict)
                return usage_error(NULL, NULL, conflict);
        if (c.share.action != SHARE_ACTION_HOLD) {
                if (optind < argc)
                        return usage_error(NULL, NULL, "--share=NAME --status or --stop takes no COMMAND");
                *ret = c;
                c = (struct config) {};
                return 1;
        }
        if (optind >= argc)
                return usage_error(NULL, NULL, "missing COMMAND");
        c.command = argv + optind;
        r = check_values(&c);
        if (r < 0)
                return r;

        if (c.n_listens == 0) {
                c.listen_default = true;
                r = add_listen(&c, "127.0.0.1:0");
                if (r < 0)
                        return r;
        }
        *ret = c;
        c = (struct config) {}; /* *ret owns it all now */
        return 1;
}

void config_done(struct config *c) {
        for (size_t i = 0; i < c->n_listens; i++)
                listen_spec_done(&c->listens[i]);
        free(c->listens);
        free(c->setenv);
        free(c->watch);
        free(c->watch_ignore);
        c->watch = c->watch_ignore = NULL;
        c->n_watch = c->n_watch_ignore = 0;
        for (size_t i = 0; i < c->n_intercepts; i++)
                free(c->intercepts[i].name);
        free(c->intercepts);
        c->intercepts = NULL;
        c->n_intercepts = 0;
        c->listens = NULL;
        c->setenv = NULL;
        c->n_listens = c->n_setenv = 0;
}
