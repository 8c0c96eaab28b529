/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "compat.h"
#include "exitcode.h"
#include "format.h"
#include "guard.h"
#include "intercept.h"
#include "job.h"
#include "log.h"
#include "macro.h"
#include "netns_job.h"
#include "notify.h"
#include "parse.h"
#include "ready.h"
#include "share.h"
#include "signals.h"
#include "template.h"

static const char *bind_error(const struct listen_spec *spec, int r) {
        int family = spec->addr.sa.sa_family;

        switch (r) {
        case -EEXIST:
                return "the path exists and is not a socket (left alone)";
        case -EADDRINUSE:
                /* For port 0 the kernel says EADDRINUSE when it has no port
                 * left to pick: nothing was "in use" that the user named. */
                if ((family == AF_INET || family == AF_INET6) && sockaddr_port(&spec->addr) == 0)
                        return "no free port left in the local port range (net.ipv4.ip_local_port_range)";
                return "Address already in use";
        default:
                return strerror(-r);
        }
}

static int inherit_error(int r) {
        if (r == -EBADMSG)
                return log_error_errno(r, "cannot take the sockets passed to prebind: LISTEN_FDNAMES holds "
                                          "an invalid name (1-255 printable ASCII characters, no ':')");
        if (r == -EAFNOSUPPORT)
                return log_error_errno(r, "cannot take the sockets passed to prebind: one is neither an IP "
                                          "nor a unix socket");
        return log_error_errno(r, "cannot take the sockets passed to prebind (LISTEN_FDS): %m");
}

/* The guard: COMMAND and the files do not outlive a killed prebind.
 * Started before anything is created that it must take back, and after
 * the inherited sockets are taken (its socket must not take fd 3 where
 * LISTEN_FDS says a socket is). Not with --exec (prebind is COMMAND), nor
 * as PID 1 (the kernel kills every process of the namespace when PID 1
 * dies). SIGTERM, then SIGKILL after --kill-after or this grace. */
#define KILLED_GRACE_USEC (500 * 1000)

static int setup_guard(struct job *job) {
        const struct config *c = job->config;
        int r;

        if (c->exec || c->no_die_with_supervisor || getpid() == 1)
                return 0;
        r = guard_start(c->command[0], c->kill_after_usec ?: KILLED_GRACE_USEC, &job->guard);
        if (r < 0)
                return log_error_errno(r,
                                       "cannot start the guard that stops '%s' if prebind is killed: %m "
                                       "(--no-die-with-supervisor goes without)",
                                       c->command[0]);
        return 0;
}

/* The sockets, in COMMAND's order: those prebind was passed itself
 * (socket activation: they come first, names kept), then its own -l
 * sockets. The default 127.0.0.1:0 applies only when there is neither. */
static int bind_all(struct job *job) {
        const struct config *c = job->config;
        _cleanup_free_ struct bound_socket *inherited = NULL;
        int n_inherited, r;
        size_t n_own;

        n_inherited = sockets_inherit(&inherited);
        if (n_inherited < 0)
                return inherit_error(n_inherited);
        r = setup_guard(job);
        if (r < 0) {
                for (int i = 0; i < n_inherited; i++)
                        socket_release(&inherited[i]);
                return r;
        }
        n_own = c->listen_default && n_inherited > 0 ? 0 : c->n_listens;

        job->sockets = calloc((size_t) n_inherited + n_own + 1, sizeof *job->sockets);
        if (!job->sockets) {
                for (int i = 0; i < n_inherited; i++)
                        socket_release(&inherited[i]);
                return log_oom();
        }
        if (n_inherited > 0)
                memcpy(job->sockets, inherited, (size_t) n_inherited * sizeof *job->sockets);
        job->n_sockets = (size_t) n_inherited;

        for (size_t i = 0; i < n_own; i++) {
                const struct listen_spec *spec = &c->listens[i];
                struct bound_socket *s = &job->sockets[job->n_sockets];
                bool file = spec->addr.sa.sa_family == AF_UNIX && !sockaddr_is_abstract(&spec->addr, spec->addr_len);

                /* A socket file: the guard hears of it before it exists. */
                if (file)
                        guard_file_expected(job->guard, GUARD_FILE_SOCKET, spec->addr.un.sun_path);
                r = socket_bind(spec, &c->socket_options, s);
                if (r < 0) {
                        if (file)
                                guard_file_forget(job->guard, spec->addr.un.sun_path);
                        log_error("cannot listen on '%s': %s", spec->text, bind_error(spec, r));
                        return r;
                }
                if (s->created_path)
                        guard_file_created_at(job->guard, GUARD_FILE_SOCKET, s->created_path, s->created_dev,
                                              s->created_ino);
                job->n_sockets++;
        }
        return 0;
}

/* What the options ask of the sockets, now that the inherited ones are
 * known too: config_parse_argv() saw only those of -l. */
static int check_sockets(const struct job *job) {
        const struct config *c = job->config;

        if (c->inetd && !c->accept && job->n_sockets != 1) {
                log_error("--inetd without --accept passes one socket, on stdin: there are %zu, with those passed "
                          "to prebind",
                          job->n_sockets);
                return -EINVAL;
        }
        /* config_parse_argv() checked that fd N is open, not what it is:
         * one of the sockets prebind was passed (LISTEN_FDS, fds from 3)
         * would get the addresses written into it, be closed and yet be
         * published and passed on. */
        for (size_t i = 0; c->publish.port_fd >= 0 && i < job->n_sockets; i++)
                if (job->sockets[i].fd == c->publish.port_fd) {
                        log_error("--port-fd=%d: fd %d is a socket passed to prebind (LISTEN_FDS, name '%s'), "
                                  "which prebind passes on: give --port-fd another fd",
                                  c->publish.port_fd, c->publish.port_fd, job->sockets[i].name);
                        return -EINVAL;
                }
        for (size_t i = 0; c->accept && i < job->n_sockets; i++) {
                int listening = 0;
                socklen_t len = sizeof listening;

                /* A datagram or unconnected socket would make accept() fail
                 * at every poll(). */
                if (getsockopt(job->sockets[i].fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) < 0 || !listening) {
                        log_error("--accept takes listening stream sockets only: fd %zu (name '%s') is not one", 3 + i,
                                  job->sockets[i].name);
                        return -EINVAL;
                }
        }
        return 0;
}

static int expand(const struct job *job, const char *what, const char *text, char **ret) {
        char quoted[LOG_QUOTE_SIZE], quoted_at[LOG_QUOTE_SIZE];
        size_t offset = 0;
        int r = template_expand(text, job->sockets, job->n_sockets, TEMPLATE_VERBATIM, ret, &offset);
        const char *t = log_shorten(text, quoted), *at = log_shorten(text + offset, quoted_at);

        switch (r) {
        case 0:
                return 0;
        case -ENOENT:
                log_error("%s '%s': no socket of that name or index at '%s'", what, t, at);
                return -EINVAL;
        case -EBADR:
                log_error("%s '%s': unknown field at '%s' (port, host, addr, url, fd, name)", what, t, at);
                return -EINVAL;
        case -EINVAL:
                log_error("%s '%s': bad template at '%s' (write {{ and }} for braces)", what, t, at);
                return -EINVAL;
        default:
                return log_error_errno(r, "%s '%s': %m", what, t);
        }
}

/* -E values and, with --subst, COMMAND's arguments: the templates are
 * filled in with the bound addresses, so they are known only now. */
static int expand_templates(struct job *job) {
        const struct config *c = job->config;
        size_t argc = 0;
        int r;

        /* More slots: readiness adds NOTIFY_SOCKET, --intercept three. */
        job->setenv = calloc(c->n_setenv + 5, sizeof(char *));
        for (char **a = c->command; *a; a++)
                argc++;
        job->command = calloc(argc + 1, sizeof(char *));
        if (!job->setenv || !job->command)
                return log_oom();

        for (size_t i = 0; i < c->n_setenv; i++) {
                if (!strchr(c->setenv[i], '='))
                        job->setenv[i] = strdup(c->setenv[i]);
                else if ((r = expand(job, "--setenv", c->setenv[i], &job->setenv[i])) < 0)
                        return r;
                if (!job->setenv[i])
                        return log_oom();
                job->n_setenv++;
        }
        for (size_t i = 0; i < argc; i++) {
                if (!c->subst)
                        job->command[i] = strdup(c->command[i]);
                else if ((r = expand(job, "--subst: argument", c->command[i], &job->command[i])) < 0)
                        return r;
                if (!job->command[i])
                        return log_oom();
        }
        return 0;
}

/* --die-with-parent: the kernel sends SIGTERM when the parent dies, which
 * is then handled as any SIGTERM (forwarded, --kill-after armed). The
 * parent may already be gone: compare with the pid seen before prctl(). */
static int setup_parent_death(const struct config *c) {
        pid_t parent = getppid();

        if (!c->die_with_parent)
                return 0;
        if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0)
                return log_error_errno(errno, "cannot set the parent death signal: %m");
        if (getppid() != parent) {
                log_error("the parent process is already gone (--die-with-parent)");
                return -ESRCH;
        }
        return 0;
}

/* --netns: a namespace for each start of COMMAND; whether the
 * intercepted sockets are forwarded into it is setup_intercept()'s. */
static int setup_netns(struct job *job) {
        job->passed = calloc(job->n_sockets + 1, sizeof *job->passed);
        if (!job->passed)
                return log_oom();
        for (size_t i = 0; i < job->n_sockets; i++)
                job->passed[job->n_passed++] = job->sockets[i];
        return job->config->netns ? netns_job_new(job->sockets, &job->netns) : 0;
}

/* The readiness checks, and COMMAND's NOTIFY_SOCKET for --ready. */
static int setup_readiness(struct job *job) {
        const struct config *c = job->config;
        const char *entry;
        int r = ready_new(&c->ready, c->command[0], &job->readiness);

        if (r < 0)
                return log_error_errno(r, "cannot create the notification socket: %m");
        /* Before NOTIFY_SOCKET joins the -E entries: that one is COMMAND's. */
        r = ready_add_checks(job->readiness, job->sockets, job->n_sockets, job->setenv, job->n_setenv);
        if (r < 0)
                return r;
        entry = ready_notify_entry(job->readiness);
        if (entry && !(job->setenv[job->n_setenv++] = strdup(entry)))
                return log_oom();
        return 0;
}

/* --intercept's PORT: a number, or a template filled in with the bound
 * sockets ("{port}": the server is told its real port with --subst or
 * -E, and its own bind of it gets prebind's socket). */
static int intercept_port(const struct job *job, const struct intercept_spec *spec, uint16_t *ret) {
        _cleanup_free_ char *text = NULL;
        unsigned long port;
        int r;

        if (!spec->port_template) {
                *ret = spec->port;
                return 0;
        }
        if ((r = expand(job, "--intercept", spec->port_template, &text)) < 0)
                return r;
        if (parse_uint(text, 1, 65535, &port) < 0) {
                log_error("--intercept '%s': expands to '%s', not a port from 1 to 65535", spec->port_template, text);
                return -EINVAL;
        }
        *ret = (uint16_t) port;
        return 0;
}

/* --intercept: the socket each PORT gets, the one resolution for every
 * --intercept-via (NAME, the template, an IP socket). */
static int intercept_targets(const struct job *job, struct intercept_target *targets) {
        const struct config *c = job->config;

        for (size_t i = 0; i < c->n_intercepts; i++) {
                const struct intercept_spec *spec = &c->intercepts[i];
                const struct bound_socket *sock = NULL;
                uint16_t port;
                int family, r;

                if ((r = intercept_port(job, spec, &port)) < 0)
                        return r;
                for (size_t k = 0; k < job->n_sockets && !sock; k++)
                        if (!spec->name || strcmp(job->sockets[k].name, spec->name) == 0)
                                sock = &job->sockets[k];
                if (!sock) {
                        log_error("--intercept=%s=%u: no socket is named '%s' (name one with -l NAME=ADDRESS)",
                                  spec->name, port, spec->name);
                        return -EINVAL;
                }
                family = sock->addr.sa.sa_family;
                if (family != AF_INET && family != AF_INET6) {
                        log_error("--intercept=%u: socket '%s' is a unix socket; a server binding an IP port can "
                                  "only be given an IP socket",
                                  port, sock->name);
                        return -EINVAL;
                }
                targets[i] = (struct intercept_target) {
                        .port = port,
                        .type = sock->type,
                        .fd = sock->fd,
                        .name = sock->name,
                };
        }
        return 0;
}

/* The readiness check of --netns forwarding connects inside the
 * namespace, and starts forwarding to each port that accepts. */
static int netns_socket_of(void *userdata, int family, int type, int *ret_fd) {
        return netns_job_socket(userdata, family, type, ret_fd);
}

static void port_accepts(void *userdata, size_t index, int family) {
        (void) netns_job_port_accepts(userdata, index, family);
}

/* --netns without a hand-over: each connection spliced to PORT inside
 * the namespace (netns/forward.c), published once every PORT accepts. */
static int setup_forward(struct job *job, const struct intercept_target *targets, const char *no_seccomp) {
        const struct config *c = job->config;
        struct netns_forward forwards[INTERCEPT_TARGETS_MAX];
        uint16_t ports[INTERCEPT_TARGETS_MAX];
        size_t n;
        int r;

        if ((r = intercept_check_twice(targets, c->n_intercepts, true)) < 0)
                return r;
        for (size_t k = 0; k < c->n_intercepts; k++) {
                forwards[k] = (struct netns_forward) { .port = targets[k].port };
                while (job->sockets[forwards[k].socket].fd != targets[k].fd)
                        forwards[k].socket++;
        }
        r = netns_job_forward(job->netns, forwards, c->n_intercepts, c->max_connections, c->ready.timeout_usec);
        if (r < 0)
                return r;
        n = netns_job_ports(job->netns, ports, ELEMENTSOF(ports));
        r = ready_add_ports(job->readiness, ports, n, netns_socket_of, port_accepts, job->netns);
        if (r < 0)
                return log_oom();
        if (no_seccomp)
                log_info("--netns --intercept: forwarding each connection into the namespace (the slow path): "
                         "seccomp cannot hand the socket over: %s",
                         no_seccomp);
        else
                log_debug("--netns --intercept: forwarding each connection into the namespace");
        return 0;
}

/* --intercept: intercept/ hands the sockets over (its claims join the
 * readiness, its variables COMMAND's environment); where it cannot, with
 * --netns, the forwarder. */
static int setup_intercept(struct job *job) {
        const struct config *c = job->config;
        struct intercept_target targets[INTERCEPT_TARGETS_MAX];
        const struct claim_source_ops *ops;
        const char *no_handover = NULL;
        char *const *env;
        void *object;
        size_t n_env;
        int r;

        if (c->n_intercepts == 0)
                return 0;
        if (c->n_intercepts > INTERCEPT_TARGETS_MAX) {
                log_error("--intercept: at most %d ports", INTERCEPT_TARGETS_MAX);
                return -E2BIG;
        }
        if ((r = intercept_targets(job, targets)) < 0)
                return r;
        /* An intercepted socket reaches COMMAND through its bind() (or
         * the forwarder) only, not in LISTEN_FDS too: a server that uses
         * inherited sockets when there are any (sd_listen_fds(),
         * go-systemd) would serve on it without a bind(), and the claim
         * publishing waits for would never come. */
        job->n_passed = 0;
        for (size_t i = 0; i < job->n_sockets; i++) {
                bool intercepted = false;

                for (size_t k = 0; k < c->n_intercepts; k++)
                        intercepted = intercepted || targets[k].fd == job->sockets[i].fd;
                if (!intercepted)
                        job->passed[job->n_passed++] = job->sockets[i];
        }
        if (c->intercept_via == INTERCEPT_VIA_FORWARD)
                return setup_forward(job, targets, NULL);
        r = intercept_setup(
                &(struct intercept_request) {
                        .targets = targets,
                        .n_targets = c->n_intercepts,
                        .via = c->intercept_via,
                        .can_forward = job->netns,
                        .command = job->command[0],
                        .setenv = job->setenv,
                        .n_setenv = job->n_setenv,
                },
                &job->intercept, &no_handover);
        if (r < 0)
                return r;
        if (!job->intercept)
                return setup_forward(job, targets, no_handover);
        intercept_claims(job->intercept, &ops, &object);
        if (ready_add_claims(job->readiness, ops, object) < 0)
                return log_oom();
        env = intercept_env(job->intercept, &n_env);
        for (size_t k = 0; k < n_env; k++)
                if (!(job->setenv[job->n_setenv++] = strdup(env[k])))
                        return log_oom();
        return 0;
}

int job_setup(const struct config *config, struct job *ret) {
        struct job *job = ret;
        int r;

        *job = (struct job) { .config = config, .signal_fd = -1, .publication = { .port_file_fd = -1 } };
        if ((r = setup_parent_death(config)) < 0 || (r = bind_all(job)) < 0 || (r = check_sockets(job)) < 0 ||
            (r = setup_netns(job)) < 0 || (r = expand_templates(job)) < 0 || (r = setup_readiness(job)) < 0 ||
            (r = setup_intercept(job)) < 0)
                return r;
        /* With --inetd the socket is on stdin: nothing at fd 3, no LISTEN_*.
         * --accept prepares its own, per-connection environment. */
        if (!config->accept && child_env_build(environ, job->setenv, job->n_setenv, job->passed,
                                               config->inetd ? 0 : job->n_passed, &job->env) < 0)
                return log_oom();
        return 0;
}

void job_done(struct job *job) {
        /* Give the sockets up first: clients still queued in the backlog
         * get a reset at once instead of hanging on a server that is gone,
         * even where a leftover process of COMMAND's still holds a copy. */
        for (size_t i = 0; i < job->n_sockets; i++) {
                socket_give_up(&job->sockets[i]);
                socket_release(&job->sockets[i]);
        }
        publication_withdraw(&job->publication);
        free(job->sockets);
        for (size_t i = 0; job->setenv && i < job->n_setenv; i++)
                free(job->setenv[i]);
        free(job->setenv);
        for (char **a = job->command; a && *a; a++)
                free(*a);
        free(job->command);
        child_env_done(&job->env);
        ready_free(job->readiness);
        intercept_free(job->intercept);
        netns_job_free(job->netns);
        free(job->passed);
        if (job->signal_fd >= 0)
                close(job->signal_fd);
        /* Last: what it would take back is gone now. */
        guard_free(job->guard);
        *job = (struct job) { .signal_fd = -1, .publication = { .port_file_fd = -1 } };
}

/* "Everything is listening": the addresses for prebind's own manager.
 * Not inlined: its 4 kB frame would be a start's deepest, paged in by the
 * call to getenv() below it, in every run, manager or not. */
__attribute__((noinline)) static void say_ready_to_manager(const struct job *job) {
        char status[4096], url[FIELD_STRING_MAX];
        size_t len;

        len = (size_t) snprintf(status, sizeof status, "READY=1\nSTATUS=listening on");
        for (size_t i = 0; i < job->n_sockets && len < sizeof status; i++)
                len += (size_t) snprintf(status + len, sizeof status - len, "%s %s", i ? "," : "",
                                         socket_field_format(job->sockets, i, FIELD_URL, url, sizeof url));
        /* Reloads number the generations: the first serves now (later
         * ones say "generation N serving" when they take over). */
        if (config_reloads(job->config) && len < sizeof status)
                (void) snprintf(status + len, sizeof status - len, "; generation 1 serving");
        notify_manager(status);
}

static void tell_manager_ready(const struct job *job) {
        if (getenv("NOTIFY_SOCKET"))
                say_ready_to_manager(job);
}

int job_publish(struct job *job, pid_t child_pid) {
        int r;

        if (job->published) {
                notify_manager("READY=1");
                return 0;
        }
        r = publish_addresses(&job->config->publish, job->sockets, job->n_sockets, getpid(), child_pid, job->guard,
                              &job->publication);
        if (r < 0)
                return r;
        job->published = true;
        share_ready(job->share, job->sockets, job->n_sockets, child_pid);
        tell_manager_ready(job);
        return 0;
}

struct spawn_plan job_spawn_plan(const struct job *job) {
        struct spawn_plan plan = {
                .command = job->command,
                .env = (struct child_env *) &job->env,
                .sockets = job->passed,
                .n_sockets = job->n_passed,
                .new_process_group = job->config->group,
                .passing = job->config->inetd ? PASS_ON_STDIN : PASS_FROM_FD3,
                .intercept = job->intercept,
                .guard = job->guard,
                .death_signal = config_death_signal(job->config),
                /* Published once, and at the exec only without readiness
                 * checks; then before COMMAND runs, unless nothing is. */
                .trial = !job->published && !ready_needed(job->readiness) &&
                         publish_precedes_command(&job->config->publish),
        };

        ready_child_output(job->readiness, &plan.stdout_fd, &plan.stderr_fd);
        return plan;
}

int job_prepare_supervision(struct job *job) {
        const struct config *c = job->config;
        int r;

        r = signals_block_all();
        if (r < 0)
                return log_error_errno(r, "cannot block signals: %m");
        job->signal_fd = r;
        /* From here on, the event loop must not wait for stderr's reader. */
        log_stderr_nonblocking();
        /* --group: the group's orphans come to prebind, whose reaping
         * then tells when the group is gone (LC_DRAINING). */
        if ((c->subreaper || (c->group && !c->accept)) && prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
                return log_error_errno(errno, "cannot become a subreaper: %m");
        return 0;
}

int job_exit_status(const struct config *config, int r, const struct outcome *o) {
        if (r < 0)
                return EXIT_PREBIND_FAILED;
        switch (o->kind) {
        case OUTCOME_NOT_READY:
                return EXIT_TIMEDOUT;
        case OUTCOME_EXEC_FAILED:
                return exec_error_to_status(o->status);
        case OUTCOME_EXITED:
        default:
                return o->status >= 0 && o->status <= 255 && config->success_status[o->status] ? 0 : o->status;
        }
}
