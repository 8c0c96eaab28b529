/* SPDX-License-Identifier: MIT */
/* --ready: READY=1 (sd_notify) from COMMAND or a descendant, on a
 * notification socket of COMMAND's own. The socket stays for the whole
 * run: STATUS= and ERRNO= are relayed while COMMAND runs. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ready_check.h"
#include "clock.h"
#include "log.h"
#include "notify.h"
#include "process.h"

struct notify_check {
        struct ready_check check;
        struct notify_socket notify;
        char *entry; /* "NOTIFY_SOCKET=…" */
};

#define NOTIFY_OF(c) ((struct notify_check *) (c))

/* A notification counts if it comes from COMMAND, or from a process
 * descended from it at the time it is read (a server whose worker reports
 * for it). Anyone else, even with a guessed socket name, is ignored. */
static void hear_one(struct notify_check *n, const struct peer *from, const struct notify_message *m) {
        /* Anyone may send them, as fast as they like. */
        static struct log_ratelimit ignored = LOG_RATELIMIT_INIT("ignored notifications");
        struct ready_check *c = &n->check;
        /* The sender's pidfd, not its pid: by the time the message is
         * read, its number may be another process's. During an
         * overlapping reload the serving generation (also) may still
         * report its status; only the new one's READY=1 counts. */
        bool counts = peer_descends_from(from, c->child);

        if (!counts && !(c->also > 0 && peer_descends_from(from, c->also))) {
                log_ratelimited(&ignored, LOG_LEVEL_INFO,
                                "ignoring a notification from pid %d, which is not '%s' (pid %d)", (int) from->pid,
                                c->command, (int) c->child);
                return;
        }
        if (m->status)
                log_info("%s: %.*s", c->command, (int) m->status_len, m->status);
        if (m->errno_value >= 0)
                log_info("%s: reports error %d (%s)", c->command, m->errno_value, strerror(m->errno_value));
        if (m->stopping)
                log_debug("%s is stopping", c->command);
        if (m->reloading)
                log_debug("%s is reloading", c->command);
        /* The generation being replaced: its READY=1 says nothing of the new one. */
        if (!counts)
                return;
        if (m->extend_usec && c->waiting)
                ready_check_extend(c, m->extend_usec);
        /* Said each time, ready already or not: a READY=1 after a restart
         * of COMMAND's own is news to whoever reads -v. */
        if (m->ready) {
                log_debug("READY=1 from pid %d", (int) from->pid);
                ready_check_met(c, "READY=1");
        }
}

/* At most LOOP_WAKE_BUDGET_USEC of messages per wake-up. */
static void notify_hear(struct ready_check *c) {
        struct notify_check *n = NOTIFY_OF(c);
        char buf[NOTIFY_MESSAGE_MAX + 1];
        struct notify_message m;
        struct peer sender;
        uint64_t deadline = now_usec() + LOOP_WAKE_BUDGET_USEC;
        int k = 0;

        if (n->notify.fd < 0)
                return;
        while (now_usec() < deadline && (k = notify_socket_receive(&n->notify, buf, sizeof buf, &sender, &m)) >= 0)
                if (k > 0) {
                        hear_one(n, &sender, &m);
                        peer_done(&sender);
                }
        if (k < 0 && k != -EAGAIN && k != -EWOULDBLOCK)
                log_error_errno(k, "cannot read a notification: %m");
}

static int on_notify(struct loop *l, int fd, uint32_t revents, void *userdata) {
        notify_hear(userdata);
        return 0;
}

static int notify_attach(struct ready_check *c) {
        struct notify_check *n = NOTIFY_OF(c);

        return n->notify.fd >= 0 ? loop_add(c->loop, n->notify.fd, LOOP_IN, on_notify, c) : 0;
}

static void notify_detach(struct ready_check *c) {
        struct notify_check *n = NOTIFY_OF(c);

        if (c->loop && n->notify.fd >= 0)
                loop_remove(c->loop, n->notify.fd);
}

static int notify_start(struct ready_check *c) {
        return 0;
}

static void notify_stop(struct ready_check *c) {
}

static size_t notify_describe(const struct ready_check *c, char *buf, size_t size) {
        return (size_t) snprintf(buf, size, "did not send READY=1");
}

static void notify_free(struct ready_check *c) {
        struct notify_check *n = NOTIFY_OF(c);

        notify_socket_close(&n->notify);
        free(n->entry);
        free(n);
}

static const struct ready_check_kind notify_kind = {
        .name = "notify",
        .start = notify_start,
        .stop = notify_stop,
        .describe = notify_describe,
        .free = notify_free,
        .attach = notify_attach,
        .detach = notify_detach,
        .hear = notify_hear,
};

int check_notify_new(struct ready_check **ret) {
        struct notify_check *n = calloc(1, sizeof *n);
        int k;

        if (!n)
                return -ENOMEM;
        *n = (struct notify_check) { .check.kind = &notify_kind, .notify = { .fd = -1 } };
        k = notify_socket_open(&n->notify);
        if (k >= 0 && asprintf(&n->entry, "NOTIFY_SOCKET=%s", n->notify.address) < 0) {
                n->entry = NULL;
                k = -ENOMEM;
        }
        if (k < 0) {
                notify_free(&n->check);
                return k;
        }
        *ret = &n->check;
        return 0;
}

const char *check_notify_entry(const struct ready_check *c) {
        return NOTIFY_OF(c)->entry;
}

int check_notify_move(struct ready_check *c, int fd) {
        struct notify_check *n = NOTIFY_OF(c);
        int k, w;

        if (n->notify.fd < 0) {
                close(fd);
                return 0;
        }
        notify_detach(c);
        k = notify_socket_move(&n->notify, fd);
        /* On failure the old socket stays, and is watched again. */
        if (c->loop && (w = notify_attach(c)) < 0 && k == 0)
                k = w;
        return k;
}
