/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "address.h"
#include "fd.h"

bool fdname_is_valid(const char *name) {
        size_t n = 0;

        if (!name || !*name)
                return false;
        for (const char *p = name; *p; p++, n++) {
                /* Printable ASCII only; ':' is LISTEN_FDNAMES' separator. */
                if (*p < ' ' || *p > '~' || *p == ':')
                        return false;
        }
        return n <= FDNAME_MAX;
}

static int parse_port(const char *text, uint16_t *ret) {
        unsigned long port;
        int r = parse_uint(text, 0, 65535, &port);

        if (r < 0)
                return r;
        *ret = htons((uint16_t) port);
        return 0;
}

static int parse_unix(const char *path, int type, struct listen_spec *ret) {
        size_t len = strlen(path);

        /* "@name" is abstract: sun_path starts with NUL, and the length
         * counts exactly the name's bytes (no trailing NUL). */
        if (len <= 1)
                return -EINVAL;
        if (len > sizeof(ret->addr.un.sun_path) - (path[0] == '@' ? 0 : 1))
                return -ENAMETOOLONG;

        memset(ret, 0, sizeof *ret);
        ret->type = type;
        ret->addr_len = unix_address(&ret->addr.un, path, path[0] == '@');
        return 0;
}

static int parse_inet6(const char *text, int type, struct listen_spec *ret) {
        /* "[ADDR]:PORT" or "[ADDR%IFACE]:PORT" */
        const char *close = strchr(text, ']');
        char host[INET6_ADDRSTRLEN + IF_NAMESIZE + 1];
        struct sockaddr_in6 in6 = { .sin6_family = AF_INET6 };
        char *scope;
        size_t len;
        int r;

        if (!close || close[1] != ':')
                return -EINVAL;
        len = (size_t) (close - text - 1);
        if (!text_piece(host, sizeof host, text + 1, len))
                return -EINVAL;

        scope = strchr(host, '%');
        if (scope) {
                unsigned long index;

                *scope++ = '\0';
                if (parse_uint(scope, 1, UINT32_MAX, &index) >= 0)
                        in6.sin6_scope_id = (uint32_t) index;
                else if (*scope && (in6.sin6_scope_id = if_nametoindex(scope)) == 0)
                        return -ENODEV;
                else if (!*scope)
                        return -EINVAL;
        }
        if (inet_pton(AF_INET6, host, &in6.sin6_addr) != 1)
                return -EINVAL;
        r = parse_port(close + 2, &in6.sin6_port);
        if (r < 0)
                return r;

        memset(ret, 0, sizeof *ret);
        ret->type = type;
        ret->addr.in6 = in6;
        ret->addr_len = sizeof in6;
        return 0;
}

/* The len bytes at text are word. */
static bool word_is(const char *text, size_t len, const char *word) {
        return strlen(word) == len && memcmp(text, word, len) == 0;
}

static int parse_inet(const char *text, int type, struct listen_spec *ret) {
        struct sockaddr_in in = { .sin_family = AF_INET };
        const char *colon, *port;
        int r;

        if (text[0] == '[')
                return parse_inet6(text, type, ret);

        colon = strrchr(text, ':');
        if (!colon) {
                /* A bare PORT stays on loopback: a test server must never be
                 * exposed by accident. */
                in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
                port = text;
        } else {
                size_t len = (size_t) (colon - text);
                char host[INET_ADDRSTRLEN];

                /* The default address too: without inet_pton(), a default
                 * run does not page in that part of libc. */
                if (word_is(text, len, "localhost") || word_is(text, len, "127.0.0.1"))
                        in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
                else if (word_is(text, len, "*"))
                        in.sin_addr.s_addr = htonl(INADDR_ANY);
                else if (!text_piece(host, sizeof host, text, len) || inet_pton(AF_INET, host, &in.sin_addr) != 1)
                        return -EINVAL;
                port = colon + 1;
        }
        r = parse_port(port, &in.sin_port);
        if (r < 0)
                return r;

        memset(ret, 0, sizeof *ret);
        ret->type = type;
        ret->addr.in = in;
        ret->addr_len = sizeof in;
        return 0;
}

/* Split "NAME=ADDRESS". The prefix is a name only if it could not be the
 * start of an address: no ':' (protocols, IPv6, HOST:PORT), no '/' (paths)
 * and no leading '@' (abstract sockets). So "/tmp/a=b" stays a path. */
static const char *split_name(const char *text, const char **ret_name, size_t *ret_len) {
        const char *eq = strchr(text, '=');

        *ret_name = NULL;
        *ret_len = 0;
        if (!eq || text[0] == '@')
                return text;
        for (const char *p = text; p < eq; p++)
                if (*p == ':' || *p == '/')
                        return text;
        *ret_name = text;
        *ret_len = (size_t) (eq - text);
        return eq + 1;
}

static bool startswith(const char *s, const char *prefix) {
        return strncmp(s, prefix, strlen(prefix)) == 0;
}

int listen_spec_parse(const char *text, struct listen_spec *ret) {
        struct listen_spec spec;
        const char *name, *address;
        char *name_copy = NULL;
        size_t name_len;
        int r;

        if (!text)
                return -EINVAL;
        address = split_name(text, &name, &name_len);
        if (name) {
                name_copy = strndup(name, name_len);
                if (!name_copy)
                        return -ENOMEM;
                if (!fdname_is_valid(name_copy)) {
                        free(name_copy);
                        return -EINVAL;
                }
        }

        if (startswith(address, "unix:"))
                r = address[5] == '/' || address[5] == '@' ? parse_unix(address + 5, SOCK_STREAM, &spec) : -EINVAL;
        else if (startswith(address, "udp:"))
                r = address[4] == '/' || address[4] == '@' ? parse_unix(address + 4, SOCK_DGRAM, &spec)
                                                           : parse_inet(address + 4, SOCK_DGRAM, &spec);
        else if (startswith(address, "tcp:"))
                r = parse_inet(address + 4, SOCK_STREAM, &spec);
        else if (address[0] == '/' || address[0] == '@')
                r = parse_unix(address, SOCK_STREAM, &spec);
        else
                r = parse_inet(address, SOCK_STREAM, &spec);
        if (r < 0) {
                free(name_copy);
                return r;
        }
        spec.name = name_copy;
        spec.text = text;
        *ret = spec;
        return 0;
}

void listen_spec_done(struct listen_spec *spec) {
        free(spec->name);
        spec->name = NULL;
}

bool sockaddr_is_abstract(const union sockaddr_any *addr, socklen_t len) {
        return addr->sa.sa_family == AF_UNIX && len > offsetof(struct sockaddr_un, sun_path) &&
               addr->un.sun_path[0] == '\0';
}

int sockaddr_port(const union sockaddr_any *addr) {
        switch (addr->sa.sa_family) {
        case AF_INET:
                return ntohs(addr->in.sin_port);
        case AF_INET6:
                return ntohs(addr->in6.sin6_port);
        default:
                return -1;
        }
}

const char *sockaddr_host_to_string(const union sockaddr_any *addr, socklen_t len, char *buf, size_t size) {
        switch (addr->sa.sa_family) {
        case AF_INET:
                return inet_ntop(AF_INET, &addr->in.sin_addr, buf, (socklen_t) size);
        case AF_INET6: {
                char ifname[IF_NAMESIZE];
                size_t n;

                if (!inet_ntop(AF_INET6, &addr->in6.sin6_addr, buf, (socklen_t) size))
                        return NULL;
                if (addr->in6.sin6_scope_id == 0)
                        return buf;
                n = strlen(buf);
                if (if_indextoname(addr->in6.sin6_scope_id, ifname))
                        snprintf(buf + n, size - n, "%%%s", ifname);
                else
                        snprintf(buf + n, size - n, "%%%u", (unsigned) addr->in6.sin6_scope_id);
                return buf;
        }
        case AF_UNIX: {
                size_t off = offsetof(struct sockaddr_un, sun_path), n, i;

                if (len <= off) {
                        snprintf(buf, size, "(unnamed)");
                        return buf;
                }
                n = len - off;
                if (!sockaddr_is_abstract(addr, len))
                        n = strnlen(addr->un.sun_path, n);
                if (n + 1 > size)
                        n = size - 1;
                /* Abstract names may hold any byte: show NUL as '@' (as ss(8)
                 * does) and other unprintable bytes as '?'. */
                for (i = 0; i < n; i++) {
                        char c = addr->un.sun_path[i];
                        buf[i] = (char) (c == '\0' ? '@' : ((unsigned char) c < ' ' || c == 0x7f ? '?' : c));
                }
                buf[i] = '\0';
                return buf;
        }
        default:
                return NULL;
        }
}

const char *sockaddr_to_string(const union sockaddr_any *addr, socklen_t len, char *buf, size_t size) {
        char host[ADDRESS_STRING_MAX];

        if (!sockaddr_host_to_string(addr, len, host, sizeof host))
                return NULL;
        switch (addr->sa.sa_family) {
        case AF_INET:
                snprintf(buf, size, "%s:%d", host, sockaddr_port(addr));
                break;
        case AF_INET6:
                snprintf(buf, size, "[%s]:%d", host, sockaddr_port(addr));
                break;
        default:
                snprintf(buf, size, "%s", host);
        }
        return buf;
}
