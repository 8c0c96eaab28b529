/* SPDX-License-Identifier: MIT */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "claims.h"
#include "log.h"

const char *claims_type_name(int type) {
        return type == SOCK_DGRAM ? "udp" : type == SOCK_STREAM ? "tcp" : "other";
}

void claims_note(struct claims_notes *notes, int family, int type, unsigned port, const char *address) {
        struct claims_note *n = &notes->ring[notes->n++ % CLAIMS_NOTES_MAX];

        *n = (struct claims_note) { .family = family, .type = type, .port = port };
        snprintf(n->address, sizeof n->address, "%s", address);
}

size_t claims_append(char *buf, size_t size, size_t len, const char *format, ...) {
        va_list ap;
        int n;

        if (len + 1 >= size)
                return len;
        va_start(ap, format);
        n = vsnprintf(buf + len, size - len, format, ap);
        va_end(ap);
        if (n < 0)
                return len;
        return len + (size_t) n < size ? len + (size_t) n : size - 1;
}

void claims_init(struct claims *c, const struct intercept_target *targets, size_t n) {
        *c = (struct claims) { .n = n };
        for (size_t i = 0; i < n; i++)
                c->port[i] = (struct intercept_port) { .port = targets[i].port, .type = targets[i].type };
}

void claims_restart(struct claims *c) {
        memset(c->claimed, 0, sizeof c->claimed);
        c->notes.n = 0;
        c->refused = 0;
}

const char *claims_refusal(pid_t command, const struct peer *peer) {
        if (peer_exited(peer))
                return "had exited since it connected";
        if (!command)
                return "came after COMMAND exited";
        if (!peer_descends_from(peer, command))
                return "does not descend from COMMAND";
        return NULL;
}

static struct log_ratelimit refused_claims = LOG_RATELIMIT_INIT("refused claims");

void claims_refuse(struct claims *c, unsigned port, pid_t pid, const char *why) {
        log_ratelimited(&refused_claims, LOG_LEVEL_INFO, "refused port %u to pid %d, which %s", port, (int) pid, why);
        c->refused++;
        c->refused_pid = pid;
        c->refused_why = why;
}

bool claims_all_claimed(const struct claims *c) {
        for (size_t i = 0; i < c->n; i++)
                if (!c->claimed[i])
                        return false;
        return true;
}

size_t claims_describe(const struct claims *c, char *buf, size_t size) {
        const struct claims_notes *notes = &c->notes;
        size_t first = notes->n > CLAIMS_NOTES_MAX ? notes->n - CLAIMS_NOTES_MAX : 0, len = 0, listed = 0, shown = 0;

        if (size == 0)
                return 0;
        buf[0] = '\0';
        if (claims_all_claimed(c))
                return 0;
        for (size_t i = 0; i < c->n; i++)
                if (!c->claimed[i])
                        len = claims_append(buf, size, len, "%s%u/%s", listed++ ? " or " : "did not claim port ",
                                            c->port[i].port, claims_type_name(c->port[i].type));
        for (size_t k = first; k < notes->n; k++) {
                const struct claims_note *note = &notes->ring[k % CLAIMS_NOTES_MAX];
                bool v6 = note->family == AF_INET6;

                len = claims_append(buf, size, len, "%s", shown++ ? ", " : " (it bound ");
                if (note->family == AF_UNIX)
                        len = claims_append(buf, size, len, "unix socket '%s'", note->address);
                else
                        len = claims_append(buf, size, len, "%s%s%s:%u/%s", v6 ? "[" : "", note->address,
                                            v6 ? "]" : "", note->port, claims_type_name(note->type));
        }
        if (shown)
                len = claims_append(buf, size, len, " instead)");
        if (c->refused)
                len = claims_append(buf, size, len, " (%u claim%s refused to pid %d, which %s)", c->refused,
                                    c->refused == 1 ? "" : "s", (int) c->refused_pid, c->refused_why);
        return len;
}
