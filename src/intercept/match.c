/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <string.h>
#include <sys/un.h>

#include "match.h"

static int type_from_name(const char *s, size_t len) {
        if (len == 3 && memcmp(s, "tcp", 3) == 0)
                return SOCK_STREAM;
        if (len == 3 && memcmp(s, "udp", 3) == 0)
                return SOCK_DGRAM;
        return -1;
}

int intercept_ports_parse(const char *text, struct intercept_port *ports, size_t max, size_t *ret_n) {
        size_t n = 0;
        const char *p = text;

        if (!text || !*text)
                return -EINVAL;
        for (;;) {
                unsigned long port = 0;
                const char *type_start;
                size_t digits = 0;
                int type;

                while (*p >= '0' && *p <= '9' && digits < 6) {
                        port = port * 10 + (unsigned long) (*p++ - '0');
                        digits++;
                }
                if (digits == 0 || digits > 5 || port == 0 || port > 65535 || *p != '/')
                        return -EINVAL;
                type_start = ++p;
                while (*p && *p != ',')
                        p++;
                type = type_from_name(type_start, (size_t) (p - type_start));
                if (type < 0)
                        return -EINVAL;
                if (n == max)
                        return -E2BIG;
                ports[n].port = (uint16_t) port;
                ports[n].type = type;
                n++;
                if (!*p)
                        break;
                p++; /* ',' */
        }
        *ret_n = n;
        return 0;
}

int intercept_ports_format(const struct intercept_port *ports, size_t n, char *buf, size_t size) {
        size_t len = 0;

        if (size == 0)
                return -ENOBUFS;
        buf[0] = '\0';
        for (size_t i = 0; i < n; i++) {
                char entry[16];
                size_t elen = 0;
                char digits[6];
                size_t nd = 0;

                for (unsigned v = ports[i].port; v > 0 || nd == 0; v /= 10)
                        digits[nd++] = (char) ('0' + v % 10);
                if (i > 0)
                        entry[elen++] = ',';
                while (nd > 0)
                        entry[elen++] = digits[--nd];
                const char *suffix = ports[i].type == SOCK_DGRAM ? "/udp" : "/tcp";

                if (elen + 4 > sizeof entry)
                        return -ENOBUFS;
                for (size_t k = 0; k < 4; k++)
                        entry[elen++] = suffix[k];
                if (len + elen + 1 > size)
                        return -ENOBUFS;
                memcpy(buf + len, entry, elen);
                len += elen;
                buf[len] = '\0';
        }
        return (int) len;
}

bool intercept_sockaddr_port(const struct sockaddr *sa, socklen_t len, uint16_t *ret_port) {
        if (!sa || len < (socklen_t) sizeof(sa_family_t))
                return false;
        if (sa->sa_family == AF_INET && len >= (socklen_t) sizeof(struct sockaddr_in)) {
                struct sockaddr_in in;
                memcpy(&in, sa, sizeof in);
                *ret_port = ntohs(in.sin_port);
                return true;
        }
        /* The kernel takes a sockaddr_in6 without sin6_scope_id (24
         * bytes, RFC 2133) too. */
        if (sa->sa_family == AF_INET6 && len >= (socklen_t) offsetof(struct sockaddr_in6, sin6_scope_id)) {
                struct sockaddr_in6 in6 = { 0 };
                memcpy(&in6, sa, offsetof(struct sockaddr_in6, sin6_scope_id));
                *ret_port = ntohs(in6.sin6_port);
                return true;
        }
        return false;
}

socklen_t intercept_bind_address(int domain, const struct sockaddr *sa, socklen_t len, struct sockaddr_storage *ret) {
        memset(ret, 0, sizeof *ret);
        if (!sa || len < (socklen_t) sizeof(sa_family_t))
                return 0;
        if (domain == AF_INET && len >= (socklen_t) sizeof(struct sockaddr_in)) {
                struct sockaddr_in *in = (struct sockaddr_in *) ret;

                memcpy(in, sa, sizeof *in);
                if (in->sin_family == AF_UNSPEC && in->sin_addr.s_addr == htonl(INADDR_ANY))
                        in->sin_family = AF_INET;
                return in->sin_family == AF_INET ? (socklen_t) sizeof *in : 0;
        }
        /* The kernel takes a sockaddr_in6 without sin6_scope_id (24
         * bytes, RFC 2133) too. */
        if (domain == AF_INET6 && sa->sa_family == AF_INET6 &&
            len >= (socklen_t) offsetof(struct sockaddr_in6, sin6_scope_id)) {
                size_t n = (size_t) len < sizeof(struct sockaddr_in6) ? (size_t) len : sizeof(struct sockaddr_in6);

                memcpy(ret, sa, n);
                return (socklen_t) sizeof(struct sockaddr_in6);
        }
        return 0;
}

const struct intercept_port *intercept_match(const struct intercept_port *ports, size_t n, uint16_t port, int type) {
        type &= ~(SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (port == 0)
                return NULL;
        for (size_t i = 0; i < n; i++)
                if (ports[i].port == port && ports[i].type == type)
                        return &ports[i];
        return NULL;
}

enum intercept_action intercept_bind_rule(int held_family, int family) {
        return held_family == 0 || held_family == family ? INTERCEPT_GIVE_SOCKET : INTERCEPT_GIVE_DECOY;
}

int intercept_held_family(const struct intercept_held *h, int fd, const struct stat *at_fd) {
        if (h->fd < 0 || h->fd == fd || !at_fd || at_fd->st_dev != h->dev || at_fd->st_ino != h->ino)
                return 0;
        return h->family;
}

socklen_t intercept_decoy_address(int family, struct sockaddr_storage *ret) {
        memset(ret, 0, sizeof *ret);
        if (family == AF_INET) {
                struct sockaddr_in *in = (struct sockaddr_in *) ret;
                in->sin_family = AF_INET;
                in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
                return sizeof *in;
        }
        if (family == AF_INET6) {
                struct sockaddr_in6 *in6 = (struct sockaddr_in6 *) ret;
                in6->sin6_family = AF_INET6;
                in6->sin6_addr = in6addr_loopback;
                return sizeof *in6;
        }
        return 0;
}

void intercept_address_text(const struct sockaddr *sa, socklen_t len, char *buf, size_t size) {
        if (size == 0)
                return;
        buf[0] = '\0';
        if (!sa || len < (socklen_t) sizeof(sa_family_t))
                return;
        if (sa->sa_family == AF_INET && len >= (socklen_t) sizeof(struct sockaddr_in))
                (void) inet_ntop(AF_INET, &((const struct sockaddr_in *) sa)->sin_addr, buf, (socklen_t) size);
        else if (sa->sa_family == AF_INET6 && len >= (socklen_t) offsetof(struct sockaddr_in6, sin6_scope_id))
                (void) inet_ntop(AF_INET6, &((const struct sockaddr_in6 *) sa)->sin6_addr, buf, (socklen_t) size);
        else if (sa->sa_family == AF_UNIX && len > (socklen_t) offsetof(struct sockaddr_un, sun_path)) {
                const char *path = ((const struct sockaddr_un *) sa)->sun_path;
                size_t plen = (size_t) len - offsetof(struct sockaddr_un, sun_path), out = 0, i = 0;

                if (plen > sizeof(((struct sockaddr_un *) 0)->sun_path))
                        plen = sizeof(((struct sockaddr_un *) 0)->sun_path);
                if (path[0] == '\0') {
                        buf[out++] = '@';
                        i = 1;
                }
                /* Non-printable bytes of an abstract name become '?'. */
                for (; i < plen && out + 1 < size; i++) {
                        if (path[i] == '\0' && path[0] != '\0')
                                break;
                        buf[out++] = (char) (path[i] >= 0x20 && path[i] < 0x7f ? path[i] : '?');
                }
                buf[out] = '\0';
        }
}
