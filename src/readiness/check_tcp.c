/* SPDX-License-Identifier: MIT */
/* Every port of a list accepts a TCP connection on loopback (--netns
 * forwarding: each intercepted port, inside the namespace, before its
 * connections are forwarded there). Each port is tried with back-off
 * (sockets/connect.h) until it accepts; the timeout bounds the wait. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "ready_check.h"
#include "log.h"

struct tcp_port {
        struct tcp_check *owner;
        uint16_t port;
        struct connect_backoff *connect; /* while it does not accept */
        bool accepts;
};

struct tcp_check {
        struct ready_check check;
        struct check_tcp_params params; /* ports: ours */
        struct tcp_port *ports;
        size_t n_waiting;
};

#define TCP_OF(c) ((struct tcp_check *) (c))

static void port_done(void *userdata, int result) {
        struct tcp_port *p = userdata;
        struct tcp_check *t = p->owner;
        char what[96];

        connect_backoff_free(p->connect);
        p->connect = NULL;
        if (result < 0) {
                /* Sockets cannot be made there (the namespace's keeper is
                 * gone): the port cannot accept; the timeout says so. */
                log_error_errno(result, "cannot connect to port %u %s: %m", (unsigned) p->port, t->params.where);
                return;
        }
        p->accepts = true;
        t->params.accepted(t->params.userdata, (size_t) (p - t->ports), result);
        if (--t->n_waiting > 0)
                return;
        snprintf(what, sizeof what, "every port accepts %s", t->params.where);
        ready_check_met(&t->check, what);
}

static void tcp_stop(struct ready_check *c) {
        struct tcp_check *t = TCP_OF(c);

        for (size_t k = 0; k < t->params.n_ports; k++) {
                connect_backoff_free(t->ports[k].connect);
                t->ports[k].connect = NULL;
        }
        t->n_waiting = 0;
}

static int tcp_start(struct ready_check *c) {
        struct tcp_check *t = TCP_OF(c);

        tcp_stop(c);
        for (size_t k = 0; k < t->params.n_ports; k++) {
                struct tcp_port *p = &t->ports[k];
                int r = connect_backoff_start(c->loop, p->port, t->params.make_socket, t->params.userdata, port_done,
                                              p, &p->connect);

                if (r < 0)
                        return log_error_errno(r, "cannot check port %u %s: %m", (unsigned) p->port, t->params.where);
                p->accepts = false;
                t->n_waiting++;
        }
        return 0;
}

static size_t tcp_describe(const struct ready_check *c, char *buf, size_t size) {
        const struct tcp_check *t = TCP_OF(c);

        return (size_t) snprintf(buf, size, "did not accept a connection on its --intercept port %s", t->params.where);
}

static void tcp_free(struct ready_check *c) {
        struct tcp_check *t = TCP_OF(c);

        tcp_stop(c);
        free(t->ports);
        free(t);
}

static const struct ready_check_kind tcp_kind = {
        .name = "tcp",
        .start = tcp_start,
        .stop = tcp_stop,
        .describe = tcp_describe,
        .free = tcp_free,
};

int check_tcp_new(const struct check_tcp_params *params, struct ready_check **ret) {
        struct tcp_check *t = calloc(1, sizeof *t);

        if (!t || !(t->ports = calloc(params->n_ports + 1, sizeof *t->ports))) {
                free(t);
                return -ENOMEM;
        }
        t->check.kind = &tcp_kind;
        t->params = *params;
        t->params.ports = NULL;
        for (size_t k = 0; k < params->n_ports; k++)
                t->ports[k] = (struct tcp_port) { .owner = t, .port = params->ports[k] };
        *ret = &t->check;
        return 0;
}
