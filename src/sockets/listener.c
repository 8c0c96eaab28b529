/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stddef.h>

#include "listener.h"
#include "log.h"

/* Anyone allowed to connect can start and end episodes of running out of
 * fds (connect, hold fds, let go), as often as they like: what they make
 * prebind say is rate-limited, for every listener together. */
static struct log_ratelimit short_of_fds = LOG_RATELIMIT_INIT("failed accepts");
static struct log_ratelimit accepting_again = LOG_RATELIMIT_INIT("accepts resumed");

static int on_ready(struct loop *l, int fd, uint32_t revents, void *userdata);
static int on_back_off_over(struct loop *l, struct loop_timer *t, void *userdata);

void listener_init(struct listener *lst, const struct listener_params *params) {
        *lst = (struct listener) { .p = *params, .state = LISTENER_PAUSED };
}

/* Whatever the loop holds of it: the socket, or the back-off's timer. */
static void leave_loop(struct listener *lst) {
        if (lst->state == LISTENER_WATCHING)
                loop_remove(lst->loop, lst->p.fd);
        else if (lst->state == LISTENER_BACKING_OFF)
                loop_timer_stop(lst->loop, &lst->back_off);
        lst->loop = NULL;
}

static void back_off(struct listener *lst, struct loop *l) {
        leave_loop(lst);
        lst->loop = l;
        lst->state = LISTENER_BACKING_OFF;
        loop_timer_start(l, &lst->back_off, LISTENER_BACK_OFF_USEC, on_back_off_over, lst);
}

int listener_watch(struct listener *lst, struct loop *l) {
        int r;

        if (lst->state == LISTENER_WATCHING || lst->state == LISTENER_BROKEN)
                return 0;
        r = loop_add(l, lst->p.fd, LOOP_IN, on_ready, lst);
        if (r < 0) {
                /* The loop is short of memory too: try again later. */
                if (lst->state == LISTENER_BACKING_OFF)
                        back_off(lst, l);
                return r;
        }
        if (lst->state == LISTENER_BACKING_OFF)
                loop_timer_stop(lst->loop, &lst->back_off);
        lst->loop = l;
        lst->state = LISTENER_WATCHING;
        return 0;
}

void listener_pause(struct listener *lst) {
        if (lst->state == LISTENER_BROKEN)
                return;
        leave_loop(lst);
        lst->state = LISTENER_PAUSED;
}

static int on_back_off_over(struct loop *l, struct loop_timer *t, void *userdata) {
        (void) listener_watch(userdata, l);
        return 0;
}

struct batch {
        struct listener *lst;
        enum listener_state state; /* when it began: the owner may change it */
};

static bool take(int conn, const union sockaddr_any *peer, socklen_t peer_len, void *userdata) {
        struct batch *b = userdata;
        struct listener *lst = b->lst;

        if (lst->short_of_fds) {
                lst->short_of_fds = false;
                log_ratelimited(&accepting_again, LOG_LEVEL_INFO, "%s: accepting again", lst->p.name);
        }
        /* Paused by the owner (at its cap) in accepted(): the rest waits. */
        return lst->p.accepted(conn, peer, peer_len, lst->p.userdata) && lst->state == b->state;
}

/* One batch, and what its failure means. */
static void accept_batch(struct listener *lst) {
        struct batch b = { lst, lst->state };
        int r = accept_each(lst->p.fd, lst->p.flags, LOOP_WAKE_BUDGET_USEC, take, &b);

        if (r >= 0)
                return;
        if (accept_failure_of(-r) == ACCEPT_FAILURE_BACK_OFF) {
                if (!lst->short_of_fds) {
                        errno = -r;
                        log_ratelimited(&short_of_fds, LOG_LEVEL_ERROR,
                                        "%s: cannot accept: %m; trying again as fds free up", lst->p.name);
                }
                lst->short_of_fds = true;
                if (lst->state == LISTENER_WATCHING)
                        back_off(lst, lst->loop);
                return;
        }
        /* Trying again would fail again, at every turn. */
        leave_loop(lst);
        lst->state = LISTENER_BROKEN;
        lst->p.broken(lst, r, lst->p.userdata);
}

static int on_ready(struct loop *l, int fd, uint32_t revents, void *userdata) {
        struct listener *lst = userdata;
        listener_woke_fn woke = lst->p.woke;
        void *owner = lst->p.userdata;

        accept_batch(lst);
        if (woke)
                woke(owner);
        return 0;
}

void listener_accept_now(struct listener *lst) {
        if (lst->state != LISTENER_BROKEN)
                accept_batch(lst);
}
