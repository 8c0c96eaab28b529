/* SPDX-License-Identifier: MIT */
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>

#include "macro.h"
#include "options.h"

#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)

/* Messages that two rows share. */
#define RELOAD_NEEDS_SUPERVISOR                                                                                       \
        "--reload and --watch need one supervised COMMAND: they cannot be combined with --exec or --accept"
#define STATUS_NEEDS_SHARE "--status and --stop need --share=NAME"

/* In --help's order, which is also the order the rules are checked in:
 * the first one broken is told. */
/* clang-format off */
const struct option_def option_defs[] = {
        { .name = "listen", .key = 'l', .has_arg = required_argument, .arg = "[NAME=]ADDRESS", .section = "Sockets", .flags = OPTION_IDENTITY, .help = "listen on ADDRESS (repeatable; default 127.0.0.1:0):\n" "PORT, HOST:PORT, [IPV6]:PORT, tcp:/udp: prefixes,\n" "/path or unix:/path, @name or unix:@name" },
        { .name = "backlog", .key = ARG_BACKLOG, .has_arg = required_argument, .arg = "N", .flags = OPTION_IDENTITY, .help = "listen backlog (default " STRINGIFY(SOMAXCONN) ")" },
        { .name = "reuseport", .key = ARG_REUSEPORT, .has_arg = no_argument, .flags = OPTION_IDENTITY, .help = "set SO_REUSEPORT on IP sockets" },
        { .name = "v6only", .key = ARG_V6ONLY, .has_arg = no_argument, .flags = OPTION_IDENTITY, .help = "set IPV6_V6ONLY on IPv6 sockets" },
        { .name = "socket-mode", .key = ARG_SOCKET_MODE, .has_arg = required_argument, .arg = "MODE", .flags = OPTION_IDENTITY, .help = "mode of unix socket files (octal, default 0666)" },
        { .name = "print", .key = ARG_PRINT, .has_arg = optional_argument, .arg = "[=FORMAT]", .section = "Publishing", .flags = OPTION_CALLER, .help = "write the addresses to stdout", .value = VALUE_WORDS, .words = "port addr url json env" },
        { .name = "port-file", .key = ARG_PORT_FILE, .has_arg = required_argument, .arg = "PATH", .flags = OPTION_CALLER, .help = "write them to PATH atomically; removed on exit", .value = VALUE_FILE },
        { .name = "port-fd", .key = ARG_PORT_FD, .has_arg = required_argument, .arg = "N", .flags = OPTION_CALLER, .help = "write them to inherited fd N, then close it" },
        { .name = "format", .key = ARG_FORMAT, .has_arg = required_argument, .arg = "FORMAT", .flags = OPTION_CALLER, .help = "port, addr, url, json or env (default port)", .value = VALUE_WORDS, .words = "port addr url json env" },
        { .name = "setenv", .key = 'E', .has_arg = required_argument, .arg = "NAME[=VALUE]", .section = "Running COMMAND", .flags = OPTION_IDENTITY, .help = "set NAME for COMMAND; {port}, {addr}, {url},\n" "{NAME.port}... in VALUE expand to the addresses", .value = VALUE_VARIABLE },
        { .name = "subst", .key = ARG_SUBST, .has_arg = no_argument, .flags = OPTION_IDENTITY, .help = "expand the same templates in COMMAND's arguments" },
        { .name = "exec", .key = ARG_EXEC, .has_arg = no_argument, .help = "replace prebind by COMMAND instead of supervising", .conflicts = OPTION_RULES(EXCLUDES("--exec leaves no supervisor: it cannot be combined with --ready, --group, --kill-after, --die-with-parent, --no-die-with-supervisor, --subreaper or --success-status", ARG_READY, ARG_READY_LOG, ARG_READY_EXEC, ARG_READY_HTTP, ARG_GROUP, ARG_KILL_AFTER, ARG_DIE_WITH_PARENT, ARG_NO_DIE_WITH_SUPERVISOR, ARG_SUBREAPER, ARG_SUCCESS_STATUS)) },
        { .name = "ready", .key = ARG_READY, .has_arg = optional_argument, .arg = "[=TIMEOUT]", .flags = OPTION_IDENTITY, .help = "give COMMAND a NOTIFY_SOCKET and publish only once it\n" "sends READY=1 (default timeout 90s; 'infinity')", .value = VALUE_WORDS, .words = "infinity" },
        { .name = "ready-log", .key = ARG_READY_LOG, .has_arg = required_argument, .arg = "REGEX", .flags = OPTION_IDENTITY, .help = "publish once a line of COMMAND's stdout or stderr\n" "matches REGEX (POSIX extended); both are relayed", .check = &ready_check_log },
        { .name = "ready-exec", .key = ARG_READY_EXEC, .has_arg = required_argument, .arg = "COMMAND", .flags = OPTION_IDENTITY, .help = "publish once COMMAND (sh -c, templates expanded)\n" "exits 0; run every --ready-interval", .check = &ready_check_exec },
        { .name = "ready-http", .key = ARG_READY_HTTP, .has_arg = optional_argument, .arg = "[=PATH]", .flags = OPTION_IDENTITY, .help = "publish once GET PATH (default /) on the first TCP\n" "socket answers 2xx or 3xx", .check = &ready_check_http },
        { .name = "ready-interval", .key = ARG_READY_INTERVAL, .has_arg = required_argument, .arg = "DURATION", .flags = OPTION_IDENTITY, .help = "between two probes (default 100ms)" },
        { .name = "ready-timeout", .key = ARG_READY_TIMEOUT, .has_arg = required_argument, .arg = "DURATION", .flags = OPTION_IDENTITY, .help = "stop COMMAND and exit 124 if it is not ready in time\n" "(every --ready* condition, --intercept; default 90s;\n" "'infinity'); all conditions must hold", .value = VALUE_WORDS, .words = "infinity" },
        { .name = "restart", .key = ARG_RESTART, .has_arg = required_argument, .arg = "WHEN", .flags = OPTION_IDENTITY, .help = "run COMMAND again when it exits: no, on-failure,\n" "always; SIGHUP then restarts it on demand", .value = VALUE_WORDS, .words = "no on-failure always", .conflicts = OPTION_RULES(EXCLUDES("--restart needs the supervisor: it cannot be combined with --exec", ARG_EXEC)) },
        { .name = "restart-delay", .key = ARG_RESTART_DELAY, .has_arg = required_argument, .arg = "DURATION", .flags = OPTION_IDENTITY, .help = "wait before a restart (default 100ms)" },
        { .name = "restart-limit", .key = ARG_RESTART_LIMIT, .has_arg = required_argument, .arg = "N[/DURATION]", .flags = OPTION_IDENTITY, .help = "give up after N restarts within DURATION\n" "(default 5/10s; 0: no limit)" },
        { .name = "reload", .key = ARG_RELOAD, .has_arg = required_argument, .arg = "HOW", .flags = OPTION_IDENTITY, .help = "what SIGHUP and --watch do: restart (stop, then\n" "start; the default) or overlap (start the new\n" "COMMAND first, stop the old one once it is ready)", .value = VALUE_WORDS, .words = "restart overlap", .conflicts = OPTION_RULES(EXCLUDES(RELOAD_NEEDS_SUPERVISOR, ARG_EXEC, ARG_ACCEPT)) },
        { .name = "watch", .key = ARG_WATCH, .has_arg = required_argument, .arg = "PATH", .flags = OPTION_IDENTITY, .help = "reload when a file under PATH changes (repeatable)", .value = VALUE_FILE, .conflicts = OPTION_RULES(EXCLUDES(RELOAD_NEEDS_SUPERVISOR, ARG_EXEC, ARG_ACCEPT)) },
        { .name = "watch-delay", .key = ARG_WATCH_DELAY, .has_arg = required_argument, .arg = "DURATION", .flags = OPTION_IDENTITY, .help = "wait for changes to settle (default 100ms)" },
        { .name = "watch-ignore", .key = ARG_WATCH_IGNORE, .has_arg = required_argument, .arg = "GLOB", .flags = OPTION_IDENTITY, .help = "changes to matching names do not count (repeatable;\n" "added to the defaults: .git, __pycache__, *.swp...;\n" "an empty GLOB drops the defaults)" },
        { .name = "accept", .key = ARG_ACCEPT, .has_arg = no_argument, .help = "run COMMAND once per connection, the connection as fd 3", .conflicts = OPTION_RULES(EXCLUDES("--accept runs a COMMAND per connection: it cannot be combined with --ready or --restart", ARG_READY, ARG_READY_LOG, ARG_READY_EXEC, ARG_READY_HTTP, ARG_RESTART), EXCLUDES("--accept needs the supervisor: it cannot be combined with --exec", ARG_EXEC)) },
        { .name = "max-connections", .key = ARG_MAX_CONNECTIONS, .has_arg = required_argument, .arg = "N", .flags = OPTION_IDENTITY, .help = "with --accept, at most N COMMANDs at once (default 64);\n" "with --intercept, N forwarded connections per socket" },
        { .name = "inetd", .key = ARG_INETD, .has_arg = no_argument, .help = "pass the connection (--accept) or the listening socket\n" "on stdin/stdout instead of fd 3" },
        { .name = "intercept", .key = ARG_INTERCEPT, .has_arg = required_argument, .arg = "[NAME=]PORT", .section = "Servers that bind their own port", .flags = OPTION_IDENTITY, .help = "COMMAND's own bind() of PORT (any IPv4/IPv6 address)\n" "gets socket NAME (default: the first) instead; publish\n" "once it is claimed. PORT may be a template ({port})", .conflicts = OPTION_RULES(EXCLUDES("--intercept needs the supervisor and a server that binds: it cannot be combined with --accept, --exec or --inetd", ARG_ACCEPT, ARG_EXEC, ARG_INETD)) },
        { .name = "intercept-via", .key = ARG_INTERCEPT_VIA, .has_arg = required_argument, .arg = "auto|seccomp|preload|forward", .flags = OPTION_IDENTITY, .help = "\n" "how: seccomp user notification (any program, Linux\n" "5.9), the LD_PRELOAD library (dynamic programs),\n" "forward (--netns only: each connection to socket\n" "NAME spliced to PORT inside, the slow path), or\n" "seccomp where the kernel allows it, else preload\n" "(with --netns: else forward)", .value = VALUE_WORDS, .words = "auto seccomp preload forward" },
        { .name = "netns", .key = ARG_NETNS, .has_arg = no_argument, .flags = OPTION_IDENTITY, .help = "run COMMAND in a new network namespace (loopback up)", .conflicts = OPTION_RULES(EXCLUDES("--netns needs one supervised COMMAND: it cannot be combined with --exec or --accept", ARG_EXEC, ARG_ACCEPT)) },
        { .name = "group", .key = ARG_GROUP, .has_arg = no_argument, .section = "Supervision", .flags = OPTION_IDENTITY, .help = "run COMMAND in its own process group and signal\n" "the whole group" },
        { .name = "kill-after", .key = ARG_KILL_AFTER, .has_arg = required_argument, .arg = "DURATION", .flags = OPTION_IDENTITY, .help = "send SIGKILL if COMMAND is still running DURATION\n" "after a SIGTERM or SIGINT (e.g. 10s, 500ms)" },
        { .name = "die-with-parent", .key = ARG_DIE_WITH_PARENT, .has_arg = no_argument, .flags = OPTION_CALLER, .help = "stop COMMAND and clean up when prebind's parent dies" },
        { .name = "no-die-with-supervisor", .key = ARG_NO_DIE_WITH_SUPERVISOR, .has_arg = no_argument, .flags = OPTION_IDENTITY, .help = "let COMMAND outlive prebind if prebind is killed\n" "(by default it is stopped, and the files removed)" },
        { .name = "subreaper", .key = ARG_SUBREAPER, .has_arg = no_argument, .flags = OPTION_IDENTITY, .help = "adopt and reap orphaned descendants (as PID 1 does)" },
        { .name = "success-status", .key = ARG_SUCCESS_STATUS, .has_arg = required_argument, .arg = "CODE", .flags = OPTION_IDENTITY, .help = "report exit status CODE as 0 (repeatable; e.g. 143)" },
        { .name = "share", .key = ARG_SHARE, .has_arg = required_argument, .arg = "NAME", .section = "Sharing one server", .help = "start COMMAND once for every caller with this NAME,\n" "or attach to the one that runs; hold it until exit", .conflicts = OPTION_RULES(EXCLUDES("--share needs one supervised COMMAND that no caller owns: it cannot be combined with --exec, --accept or --inetd", ARG_EXEC, ARG_ACCEPT, ARG_INETD)) },
        { .name = "share-linger", .key = ARG_SHARE_LINGER, .has_arg = required_argument, .arg = "DURATION", .flags = OPTION_CALLER, .help = "stop the server this long after the last holder\n" "is gone (default 1s; 'infinity': until --stop)", .value = VALUE_WORDS, .words = "infinity", .conflicts = OPTION_RULES(NEEDS("--share-linger needs --share=NAME", ARG_SHARE)) },
        { .name = "status", .key = ARG_STATUS, .has_arg = no_argument, .help = "with --share: say whether it runs (exit 0, or 3)", .conflicts = OPTION_RULES(NEEDS(STATUS_NEEDS_SHARE, ARG_SHARE)) },
        { .name = "stop", .key = ARG_STOP, .has_arg = no_argument, .help = "with --share: stop it", .conflicts = OPTION_RULES(NEEDS(STATUS_NEEDS_SHARE, ARG_SHARE)) },
        { .name = "quiet", .key = 'q', .has_arg = no_argument, .section = "", .flags = OPTION_CALLER, .help = "print errors only" },
        { .name = "verbose", .key = 'v', .has_arg = no_argument, .flags = OPTION_CALLER, .help = "print details" },
        { .name = "help", .key = 'h', .has_arg = no_argument, .help = "show this help and exit" },
        { .name = "version", .key = ARG_VERSION, .has_arg = no_argument, .help = "show the version and exit" },
};
/* clang-format on */
const size_t n_option_defs = ELEMENTSOF(option_defs);
_Static_assert(ELEMENTSOF(option_defs) <= 64, "option_set has a bit per option");

int options_index(int key) {
        for (size_t i = 0; i < n_option_defs; i++)
                if (option_defs[i].key == key)
                        return (int) i;
        return -1;
}

static bool rule_broken(const struct option_rule *rule, option_set given) {
        bool any = false;

        for (const int *k = rule->with; *k; k++) {
                int i = options_index(*k);

                any = any || (i >= 0 && (given & ((option_set) 1 << i)));
        }
        return rule->needs ? !any : any;
}

const char *options_conflict(option_set given) {
        for (size_t i = 0; i < n_option_defs; i++) {
                if (!(given & ((option_set) 1 << i)) || !option_defs[i].conflicts)
                        continue;
                for (const struct option_rule *rule = option_defs[i].conflicts; rule->with; rule++)
                        if (rule_broken(rule, given))
                                return rule->message;
        }
        return NULL;
}

const struct option *options_getopt_table(void) {
        static struct option table[ELEMENTSOF(option_defs) + 1];

        if (!table[0].name)
                for (size_t i = 0; i < n_option_defs; i++)
                        table[i] = (struct option) { option_defs[i].name, option_defs[i].has_arg, NULL,
                                                     option_defs[i].key };
        return table;
}

const char *options_optstring(void) {
        /* '+': options stop at COMMAND; ':': a missing argument is ':',
         * not '?'. Two characters a short option at most. */
        static char optstring[2 + 2 * ELEMENTSOF(option_defs) + 1];

        if (!optstring[0]) {
                char *p = optstring;

                *p++ = '+';
                *p++ = ':';
                for (size_t i = 0; i < n_option_defs; i++)
                        if (option_defs[i].key < 0x100) {
                                *p++ = (char) option_defs[i].key;
                                if (option_defs[i].has_arg == required_argument)
                                        *p++ = ':';
                        }
                *p = '\0';
        }
        return optstring;
}

/* The text starts in this column, and goes on in it. */
#define HELP_COLUMN 31

static void help_option(FILE *f, const struct option_def *o) {
        int width;

        if (o->key < 0x100)
                width = fprintf(f, "  -%c, --%s", o->key, o->name);
        else
                width = fprintf(f, "      --%s", o->name);
        if (o->arg)
                width += fprintf(f, "%s%s", o->has_arg == required_argument ? "=" : "", o->arg);
        /* A text that starts with a newline starts on the next line. */
        if (o->help[0] != '\n')
                fprintf(f, "%*s", width < HELP_COLUMN ? HELP_COLUMN - width : 2, "");
        for (const char *line = o->help, *end; *line; line = end + 1) {
                end = strchrnul(line, '\n');
                if (line != o->help)
                        fprintf(f, "%*s", HELP_COLUMN, "");
                fprintf(f, "%.*s\n", (int) (end - line), line);
                if (!*end)
                        break;
        }
}

void options_help(FILE *f, const char *program) {
        fprintf(f,
                "Usage: %s [OPTION]... [--] COMMAND [ARG]...\n"
                "Bind and listen on sockets, publish their addresses, and run COMMAND with\n"
                "them passed by the systemd protocol (LISTEN_FDS, fds from 3).\n",
                program);
        for (size_t i = 0; i < n_option_defs; i++) {
                const struct option_def *o = &option_defs[i];

                if (o->section)
                        fprintf(f, "\n%s%s", o->section, o->section[0] ? ":\n" : "");
                help_option(f, o);
        }
        fputs("\n"
              "Exit status: COMMAND's; 128+N if it was killed by signal N; 124 if it was not\n"
              "ready in time; 125 if prebind failed; 126 if COMMAND could not be run; 127\n"
              "if it was not found.\n"
              "See prebind(1).\n",
              f);
}
