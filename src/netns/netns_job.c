/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "forward.h"
#include "log.h"
#include "loop.h"
#include "netns.h"
#include "netns_job.h"

struct intercepted {
        struct netns_job *job;
        size_t socket; /* index into the sockets */
        uint16_t port;
        struct forwarder *forwarder;
};

struct netns_job {
        const struct bound_socket *sockets;
        unsigned max_connections; /* per forwarded socket */
        uint64_t wait_usec;       /* for a connection inside */
        struct loop *loop;        /* while attached */
        struct netns netns;
        struct intercepted *intercepts;
        size_t n_intercepts;
};

static int make_socket(void *userdata, int family, int type, int *ret_fd) {
        const struct netns_job *j = userdata;

        return netns_socket(&j->netns, family, type, ret_fd);
}

int netns_job_new(const struct bound_socket *sockets, struct netns_job **ret) {
        struct netns_job *j = calloc(1, sizeof *j);

        if (!j)
                return log_oom();
        *j = (struct netns_job) { .sockets = sockets, .netns = NETNS_INIT };
        *ret = j;
        return 0;
}

/* The supervisor's child joins through this façade, not netns.h. */
int netns_job_enter(int net_fd, int user_fd) {
        return netns_enter(net_fd, user_fd);
}

int netns_job_forward(struct netns_job *j, const struct netns_forward *forwards, size_t n, unsigned max_connections,
                      uint64_t wait_usec) {
        const struct bound_socket *sockets = j->sockets;

        j->intercepts = calloc(n + 1, sizeof *j->intercepts);
        if (!j->intercepts)
                return log_oom();
        j->max_connections = max_connections;
        j->wait_usec = wait_usec;
        for (size_t k = 0; k < n; k++) {
                struct intercepted *in = &j->intercepts[k];
                int type = 0, listening = 0;
                socklen_t len = sizeof type;

                *in = (struct intercepted) { .job = j, .socket = forwards[k].socket, .port = forwards[k].port };
                j->n_intercepts++;
                (void) getsockopt(sockets[in->socket].fd, SOL_SOCKET, SO_TYPE, &type, &len);
                len = sizeof listening;
                (void) getsockopt(sockets[in->socket].fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len);
                if (type != SOCK_STREAM || !listening) {
                        log_error("--netns --intercept forwards stream connections: socket '%s' (fd %zu) is %s; "
                                  "UDP forwarding is not supported",
                                  sockets[in->socket].name, 3 + in->socket,
                                  type == SOCK_DGRAM ? "a datagram socket" : "not a listening stream socket");
                        return -EINVAL;
                }
        }
        return 0;
}

int netns_job_attach(struct netns_job *j, struct loop *loop) {
        j->loop = loop;
        for (size_t k = 0; k < j->n_intercepts; k++) {
                struct intercepted *in = &j->intercepts[k];
                int r = forwarder_new(loop,
                                      &(struct forward_params) {
                                              .listen_fd = j->sockets[in->socket].fd,
                                              .port = in->port,
                                              .max_connections = j->max_connections,
                                              .wait_usec = j->wait_usec,
                                              /* As systemd-socket-proxyd: fewer, larger
                                               * splices; 2 × 256 KiB per connection. */
                                              .pipe_size = 256 * 1024,
                                              .make_socket = make_socket,
                                              .userdata = j,
                                      },
                                      &in->forwarder);
                if (r < 0)
                        return log_error_errno(r, "cannot forward socket '%s': %m", j->sockets[in->socket].name);
        }
        return 0;
}

void netns_job_detach(struct netns_job *j) {
        if (!j)
                return;
        for (size_t k = 0; k < j->n_intercepts; k++) {
                forwarder_free(j->intercepts[k].forwarder);
                j->intercepts[k].forwarder = NULL;
        }
        j->loop = NULL;
}

void netns_job_free(struct netns_job *j) {
        if (!j)
                return;
        netns_job_detach(j);
        free(j->intercepts);
        netns_close(&j->netns);
        free(j);
}

int netns_job_prepare(struct netns_job *j, struct netns_join *ret) {
        enum netns_step step;
        char why[512];
        int r;

        netns_close(&j->netns);
        r = netns_open(&j->netns, &step);
        if (r < 0) {
                log_error("%s", netns_explain(step, r, geteuid() == 0, "/proc/sys", why, sizeof why));
                return r;
        }
        *ret = (struct netns_join) { .net_fd = j->netns.net_fd, .user_fd = j->netns.user_fd };
        return 0;
}

int netns_job_socket(const struct netns_job *j, int family, int type, int *ret_fd) {
        return netns_socket(&j->netns, family, type, ret_fd);
}

size_t netns_job_ports(const struct netns_job *j, uint16_t *ret_ports, size_t max) {
        for (size_t k = 0; k < j->n_intercepts && k < max; k++)
                ret_ports[k] = j->intercepts[k].port;
        return j->n_intercepts;
}

int netns_job_port_accepts(struct netns_job *j, size_t k, int family) {
        struct intercepted *in = &j->intercepts[k];
        int r;

        log_debug("port %u accepts in the namespace (%s): forwarding", (unsigned) in->port,
                  family == AF_INET6 ? "[::1]" : "127.0.0.1");
        forwarder_prefer_family(in->forwarder, family);
        r = forwarder_start(in->forwarder);
        if (r < 0)
                return log_error_errno(r, "cannot accept on the intercepted socket: %m");
        return 0;
}

void netns_job_stopped(struct netns_job *j) {
        for (size_t k = 0; k < j->n_intercepts; k++) {
                struct intercepted *in = &j->intercepts[k];

                /* New clients wait in the backlog for the next COMMAND;
                 * those connected to this one see its sockets close. */
                forwarder_stop(in->forwarder);
        }
        netns_close(&j->netns);
}
