/* SPDX-License-Identifier: MIT */
#pragma once

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "address.h"
#include "format.h"
#include "intercept.h"
#include "publish.h"
#include "ready.h"
#include "share.h"
#include "socket.h"

/* --intercept=[NAME=]PORT: COMMAND's own bind() of PORT gets socket NAME. */
struct intercept_spec {
        char *name;                /* NULL: the first socket */
        uint16_t port;             /* 1-65535; 0 with a template */
        const char *port_template; /* "{port}", "{NAME.port}": expanded with the sockets; NULL */
};

enum restart_mode {
        RESTART_NO,
        RESTART_ON_FAILURE,
        RESTART_ALWAYS,
};

/* What a reload request (SIGHUP, --watch) does. */
enum reload_mode {
        RELOAD_RESTART, /* stop COMMAND, then start it again (the default) */
        RELOAD_OVERLAP, /* start the new one beside it; stop the old one once the new one is ready */
};

/* At most this many --watch and --watch-ignore arguments, and this long a
 * glob: fnmatch() stays bounded. */
#define WATCH_ARGS_MAX 64
#define WATCH_GLOB_MAX 255

/* Everything the command line asked for: parsed once, then read-only
 * (the fd that --port-fd names is closed by publish_addresses(), once it
 * has been written). A subsystem's options are a struct of its own here,
 * defined in its header. */
struct config {
        struct listen_spec *listens;
        size_t n_listens;
        bool listen_default; /* no -l: 127.0.0.1:0, unless sockets were inherited */

        struct socket_options socket_options; /* --backlog, --reuseport, --v6only, --socket-mode */

        struct publish_options publish; /* --print, --port-file, --port-fd, --format */

        char **setenv; /* raw "NAME[=VALUE]" arguments of -E */
        size_t n_setenv;
        bool subst;

        bool exec;
        struct ready_options ready; /* --ready, --ready-*: publish once COMMAND is ready */
        enum restart_mode restart;
        bool restart_set; /* --restart given: SIGHUP restarts COMMAND */
        uint64_t restart_delay_usec;
        unsigned restart_burst;         /* at most this many restarts… (0: no limit) */
        uint64_t restart_interval_usec; /* …within this interval */
        enum reload_mode reload;        /* --reload= */
        bool reload_set;
        const char **watch; /* --watch=PATH */
        size_t n_watch;
        const char **watch_ignore; /* --watch-ignore=GLOB, after the defaults unless an empty one cleared them */
        size_t n_watch_ignore;
        bool watch_ignore_defaults; /* the default globs apply */
        uint64_t watch_delay_usec;  /* --watch-delay= */
        struct intercept_spec *intercepts;
        size_t n_intercepts;
        enum intercept_via intercept_via;
        bool accept; /* one COMMAND per connection */
        bool inetd;  /* sockets on stdin/stdout instead of fd 3 */
        unsigned max_connections;
        bool group;               /* COMMAND in its own process group; signal the group */
        uint64_t kill_after_usec; /* SIGKILL this long after SIGTERM/SIGINT; 0: never */
        bool die_with_parent;
        bool no_die_with_supervisor; /* COMMAND may outlive a killed prebind: no death signal, no guard */
        bool subreaper;
        bool success_status[256];   /* exit statuses reported as 0 */
        bool netns;                 /* COMMAND in a new network namespace; --intercept forwards into it */
        struct share_options share; /* --share=NAME, --share-linger, --status, --stop */
        bool share_linger_set;
        char **command; /* points into argv; NULL-terminated */
};

/* prebind publishes only once COMMAND is ready: --ready or a --ready-*
 * check. */
static inline bool config_waits_ready(const struct config *c) {
        return ready_options_wait(&c->ready);
}

/* The kernel's parent-death signal for COMMAND (and each --accept
 * handler): SIGTERM, as for a shutdown, unless COMMAND may outlive
 * prebind. With --exec there is no parent to die. */
static inline int config_death_signal(const struct config *c) {
        return c->exec || c->no_die_with_supervisor ? 0 : SIGTERM;
}

/* A reload request (SIGHUP, --watch) reloads COMMAND: --restart,
 * --reload or --watch was given. Otherwise SIGHUP is forwarded. */
static inline bool config_reloads(const struct config *c) {
        return c->restart_set || c->reload_set || c->n_watch > 0;
}

/* What must be the same for two callers to share a server (--share), as a
 * command line with one spelling per option ("-l 127.0.0.1:0
 * --ready-log='x' -- redis-server --port 0"): the sockets, COMMAND, its
 * environment options, readiness, restarts, supervision. Output options
 * (--print, --port-file, --port-fd, --format, -q, -v) and --share-linger
 * are each caller's own. Returns 0 or -ENOMEM. */
int config_describe(const struct config *config, char **ret);

/* Returns 1 when there is work to do, 0 when --help or --version was
 * printed, or a negative errno after logging the problem (usage errors
 * are -EINVAL). */
int config_parse_argv(int argc, char *argv[], struct config *ret);
void config_done(struct config *config);
