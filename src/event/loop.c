/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "clock.h"
#include "loop.h"

struct source {
        loop_handler handler; /* NULL: no source on this fd */
        void *userdata;
        uint32_t serial; /* which loop_add() made this source */
};

/* Sources are indexed by fd, and each event carries the fd and the serial
 * number of the loop_add() that watched it. One epoll_wait() may return
 * events for A and B; if A's handler closes B and a new source (a timerfd)
 * gets B's number, B's event is stale: its serial is not the new source's,
 * and it is dropped. Without that, the kill timer of --kill-after fired at
 * once on a stale pidfd event. Handlers must still bear a
 * spurious call (every fd here is non-blocking; level-triggered epoll
 * reports what is really ready again). */
struct loop {
        int epoll_fd;
        struct source *sources;
        size_t n_sources;
        uint32_t next_serial;
        struct loop_timer *timers; /* armed, unordered: a handful at most */
};

_Static_assert((unsigned) LOOP_IN == (unsigned) EPOLLIN && (unsigned) LOOP_OUT == (unsigned) EPOLLOUT &&
                       (unsigned) LOOP_ERR == (unsigned) EPOLLERR && (unsigned) LOOP_HUP == (unsigned) EPOLLHUP,
               "the loop's flags are epoll's bits: no translation");

static uint64_t event_data(int fd, uint32_t serial) {
        return (uint64_t) serial << 32 | (uint32_t) fd;
}

int loop_new(struct loop **ret) {
        struct loop *l = calloc(1, sizeof *l);

        if (!l)
                return -ENOMEM;
        l->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
        if (l->epoll_fd < 0) {
                int r = -errno;
                free(l);
                return r;
        }
        *ret = l;
        return 0;
}

void loop_free(struct loop *l) {
        if (!l)
                return;
        close(l->epoll_fd);
        free(l->sources);
        free(l);
}

int loop_add(struct loop *l, int fd, uint32_t events, loop_handler handler, void *userdata) {
        struct epoll_event ev = { .events = events };
        uint32_t serial;

        if (fd < 0 || !handler)
                return -EINVAL;
        if ((size_t) fd >= l->n_sources) {
                size_t n = (size_t) fd + 16;
                struct source *s = realloc(l->sources, n * sizeof *s);

                if (!s)
                        return -ENOMEM;
                memset(s + l->n_sources, 0, (n - l->n_sources) * sizeof *s);
                l->sources = s;
                l->n_sources = n;
        }
        if (l->sources[fd].handler)
                return -EEXIST;
        serial = ++l->next_serial;
        ev.data.u64 = event_data(fd, serial);
        if (epoll_ctl(l->epoll_fd, EPOLL_CTL_ADD, fd, &ev) < 0)
                return -errno;
        l->sources[fd] = (struct source) { handler, userdata, serial };
        return 0;
}

int loop_modify(struct loop *l, int fd, uint32_t events) {
        struct epoll_event ev = { .events = events };

        if (fd < 0 || (size_t) fd >= l->n_sources || !l->sources[fd].handler)
                return -ENOENT;
        ev.data.u64 = event_data(fd, l->sources[fd].serial);
        return epoll_ctl(l->epoll_fd, EPOLL_CTL_MOD, fd, &ev) < 0 ? -errno : 0;
}

void loop_remove(struct loop *l, int fd) {
        if (fd < 0 || (size_t) fd >= l->n_sources || !l->sources[fd].handler)
                return;
        (void) epoll_ctl(l->epoll_fd, EPOLL_CTL_DEL, fd, NULL);
        l->sources[fd] = (struct source) { NULL, NULL, 0 };
}

void loop_timer_stop(struct loop *l, struct loop_timer *t) {
        if (!t->armed)
                return;
        if (t->prev)
                t->prev->next = t->next;
        else
                l->timers = t->next;
        if (t->next)
                t->next->prev = t->prev;
        t->prev = t->next = NULL;
        t->armed = t->running = false;
}

void loop_timer_start(struct loop *l, struct loop_timer *t, uint64_t usec, loop_timer_handler handler,
                      void *userdata) {
        loop_timer_stop(l, t);
        t->due = now_usec() + usec;
        t->handler = handler;
        t->userdata = userdata;
        t->prev = NULL;
        t->next = l->timers;
        if (l->timers)
                l->timers->prev = t;
        l->timers = t;
        t->armed = true;
}

uint64_t loop_timer_left(const struct loop_timer *t) {
        uint64_t now = now_usec();

        return t->armed && t->due > now ? t->due - now : 0;
}

static struct loop_timer *first_due(struct loop *l) {
        struct loop_timer *first = NULL;

        for (struct loop_timer *t = l->timers; t; t = t->next)
                if (!first || t->due < first->due)
                        first = t;
        return first;
}

/* timeout_ms, shortened to when the first timer is due (rounded up: a
 * timer is never early). */
static int wait_ms(struct loop *l, int timeout_ms) {
        struct loop_timer *t = first_due(l);
        uint64_t left, ms;

        if (!t)
                return timeout_ms;
        left = loop_timer_left(t);
        ms = (left + USEC_PER_MSEC - 1) / USEC_PER_MSEC;
        if (ms > INT_MAX)
                ms = INT_MAX;
        return timeout_ms >= 0 && (uint64_t) timeout_ms < ms ? timeout_ms : (int) ms;
}

/* Run the timers due now, earliest first. Those armed meanwhile (again
 * for 0 µs too) wait for the next turn, so a timer cannot starve the fds. */
static int run_timers(struct loop *l) {
        uint64_t now;
        int dispatched = 0;

        /* No clock read without a timer: a run that arms none never pages
         * in clock_gettime(). */
        if (!l->timers)
                return 0;
        now = now_usec();

        for (struct loop_timer *t = l->timers; t; t = t->next)
                t->running = t->due <= now;
        for (;;) {
                struct loop_timer *t = NULL;
                int r;

                for (struct loop_timer *u = l->timers; u; u = u->next)
                        if (u->running && (!t || u->due < t->due))
                                t = u;
                if (!t)
                        return dispatched;
                loop_timer_stop(l, t);
                if ((r = t->handler(l, t, t->userdata)) < 0)
                        return r;
                dispatched++;
        }
}

int loop_dispatch_once(struct loop *l, int timeout_ms) {
        struct epoll_event events[32];
        int n, t, dispatched = 0;

        n = epoll_wait(l->epoll_fd, events, 32, wait_ms(l, timeout_ms));
        if (n < 0)
                return errno == EINTR ? 0 : -errno;
        for (int i = 0; i < n; i++) {
                int fd = (int) (uint32_t) events[i].data.u64;
                uint32_t serial = (uint32_t) (events[i].data.u64 >> 32);
                struct source s;
                int r;

                /* Removed, or removed and its number reused, earlier in
                 * this batch: the event was for the old source. */
                if ((size_t) fd >= l->n_sources || !l->sources[fd].handler || l->sources[fd].serial != serial)
                        continue;
                s = l->sources[fd];
                r = s.handler(l, fd, events[i].events, s.userdata);
                if (r < 0)
                        return r;
                dispatched++;
        }
        if ((t = run_timers(l)) < 0)
                return t;
        return dispatched + t;
}
