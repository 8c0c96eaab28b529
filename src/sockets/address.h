/* SPDX-License-Identifier: MIT */
#pragma once

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "parse.h"

/* systemd's FileDescriptorName= limit (sd_listen_fds_with_names(3)). */
#define FDNAME_MAX 255

union sockaddr_any {
        struct sockaddr sa;
        struct sockaddr_in in;
        struct sockaddr_in6 in6;
        struct sockaddr_un un;
        struct sockaddr_storage storage;
};

/* One socket to listen on, as parsed from -l/--listen. */
struct listen_spec {
        const char *text;        /* as given, for messages */
        char *name;              /* NULL: "unknown" in LISTEN_FDNAMES */
        int type;                /* SOCK_STREAM or SOCK_DGRAM */
        union sockaddr_any addr; /* family in addr.sa.sa_family */
        socklen_t addr_len;
};

/* Parse "[NAME=][tcp:|udp:|unix:]ADDRESS" (see prebind(1), ADDRESSES).
 * Returns 0 and fills *ret, or -EINVAL (bad syntax), -ERANGE (port out
 * of range), -ENAMETOOLONG (unix path too long), -ENODEV (unknown
 * interface in an IPv6 scope) or -ENOMEM. *ret is untouched on failure. */
int listen_spec_parse(const char *text, struct listen_spec *ret);
void listen_spec_done(struct listen_spec *spec);

/* systemd's fdname_is_valid(): 1..255 printable ASCII chars, no ':'. */
bool fdname_is_valid(const char *name);

/* The address as printed by --format=addr: "127.0.0.1:80", "[::1]:80",
 * "/path", "@name". buf must hold ADDRESS_STRING_MAX bytes. */
#define ADDRESS_STRING_MAX (sizeof(struct sockaddr_un) + 64)
const char *sockaddr_to_string(const union sockaddr_any *addr, socklen_t len, char *buf, size_t size);
/* Only the host part: "127.0.0.1", "::1", "/path", "@name". */
const char *sockaddr_host_to_string(const union sockaddr_any *addr, socklen_t len, char *buf, size_t size);
/* Port of an inet address, or -1 for unix sockets. */
int sockaddr_port(const union sockaddr_any *addr);
/* An abstract unix socket address (sun_path starts with NUL). */
bool sockaddr_is_abstract(const union sockaddr_any *addr, socklen_t len);
