/* SPDX-License-Identifier: MIT */
/* prebind's options, each declared once: its name, its argument, its
 * --help text, whether it belongs to a --share server's identity, what
 * the shell completes as its value and the options it excludes or needs.
 * getopt's table, the optstring, --help, the conflict checks and the bash
 * completion (completion/) are made from it; the unit test walks it
 * against --help, the man page, the completion and config_describe(). */
#pragma once

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "ready.h"

/* getopt_long's value for the long-only options (the others return their
 * short letter). */
enum {
        ARG_BACKLOG = 0x100,
        ARG_REUSEPORT,
        ARG_V6ONLY,
        ARG_SOCKET_MODE,
        ARG_PRINT,
        ARG_PORT_FILE,
        ARG_PORT_FD,
        ARG_FORMAT,
        ARG_SUBST,
        ARG_EXEC,
        ARG_READY,
        ARG_READY_LOG,
        ARG_READY_EXEC,
        ARG_READY_HTTP,
        ARG_READY_INTERVAL,
        ARG_READY_TIMEOUT,
        ARG_INTERCEPT,
        ARG_INTERCEPT_VIA,
        ARG_RESTART,
        ARG_RESTART_DELAY,
        ARG_RESTART_LIMIT,
        ARG_RELOAD,
        ARG_WATCH,
        ARG_WATCH_DELAY,
        ARG_WATCH_IGNORE,
        ARG_ACCEPT,
        ARG_MAX_CONNECTIONS,
        ARG_INETD,
        ARG_GROUP,
        ARG_KILL_AFTER,
        ARG_DIE_WITH_PARENT,
        ARG_NO_DIE_WITH_SUPERVISOR,
        ARG_SUBREAPER,
        ARG_SUCCESS_STATUS,
        ARG_NETNS,
        ARG_SHARE,
        ARG_SHARE_LINGER,
        ARG_STATUS,
        ARG_STOP,
        ARG_VERSION,
};

enum option_flag {
        /* The server's: two --share callers must agree on it
         * (config_describe() describes it). */
        OPTION_IDENTITY = 1 << 0,
        /* Each --share caller's own (its output, its verbosity, its
         * lifetime): never part of the server's description. */
        OPTION_CALLER = 1 << 1,
        /* Neither: refused with --share, or no server at all (--exec,
         * --accept, --inetd, --share itself, --status, --stop, --help,
         * --version). */
};

/* What the shell completion offers as an option's value. */
enum option_value {
        VALUE_ANY,      /* an address, a number, a duration, text: nothing to offer */
        VALUE_WORDS,    /* one of .words */
        VALUE_FILE,     /* a file's name */
        VALUE_VARIABLE, /* an environment variable's name (-E NAME copies it) */
};

/* A rule between options, checked once all of them are read: given
 * together with any option of .with (needs: without all of them), the
 * command line is refused with .message. */
struct option_rule {
        const int *with; /* keys, 0-terminated */
        bool needs;      /* the option needs one of .with (else it excludes them) */
        const char *message;
};

/* The rules of a row: EXCLUDES("message", ARG_EXEC, ARG_ACCEPT), NEEDS(...). */
#define OPTION_KEYS(...) ((const int[]) { __VA_ARGS__, 0 })
#define EXCLUDES(message_, ...)                                                                                       \
        { .with = OPTION_KEYS(__VA_ARGS__), .message = message_ }
#define NEEDS(message_, ...)                                                                                          \
        { .with = OPTION_KEYS(__VA_ARGS__), .needs = true, .message = message_ }
#define OPTION_RULES(...) ((const struct option_rule[]) { __VA_ARGS__, {} })

struct option_def {
        const char *name;    /* the long name, without "--" */
        int key;             /* the short letter, or an ARG_* */
        int has_arg;         /* getopt's no_argument, required_argument, optional_argument */
        const char *arg;     /* the argument's name in --help: "PATH", "[=FORMAT]" */
        const char *section; /* a heading --help puts before it ("": a blank line) */
        unsigned flags;      /* enum option_flag */
        const char *help;    /* --help's text, a line per '\n' */
        enum option_value value;
        const char *words;                   /* VALUE_WORDS: the values, separated by spaces */
        const struct option_rule *conflicts; /* OPTION_RULES(...), NULL: none */
        /* A readiness check of this kind (ready.h), the argument its own:
         * config.c hands both to readiness, nothing else knows the option. */
        const struct ready_check_kind *check;
};

extern const struct option_def option_defs[];
extern const size_t n_option_defs;

/* The options given, as a set: bit i is option_defs[i]. */
typedef uint64_t option_set;

/* The index in option_defs of the option getopt_long() returned as key,
 * or -1. */
int options_index(int key);

/* The message of the first rule that the options given break, in the
 * table's order, or NULL. */
const char *options_conflict(option_set given);

/* getopt_long's table and optstring ("+:" and the short letters), made
 * from option_defs once. */
const struct option *options_getopt_table(void);
const char *options_optstring(void);

/* --help, as prebind prints it. */
void options_help(FILE *f, const char *program);
