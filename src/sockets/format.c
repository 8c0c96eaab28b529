/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"

static const char *const format_names[_FORMAT_MAX] = {
        [FORMAT_PORT] = "port", [FORMAT_ADDR] = "addr", [FORMAT_URL] = "url",
        [FORMAT_JSON] = "json", [FORMAT_ENV] = "env",
};

enum output_format output_format_from_string(const char *s) {
        for (int f = 0; f < _FORMAT_MAX; f++)
                if (s && strcmp(s, format_names[f]) == 0)
                        return (enum output_format) f;
        return _FORMAT_INVALID;
}

const char *output_format_to_string(enum output_format f) {
        return f >= 0 && f < _FORMAT_MAX ? format_names[f] : NULL;
}

static const char *const field_names[_FIELD_MAX] = {
        [FIELD_PORT] = "port", [FIELD_HOST] = "host", [FIELD_ADDR] = "addr",
        [FIELD_URL] = "url",   [FIELD_FD] = "fd",     [FIELD_NAME] = "name",
};

enum socket_field socket_field_from_string(const char *s, size_t len) {
        for (int f = 0; f < _FIELD_MAX; f++)
                if (strlen(field_names[f]) == len && strncmp(s, field_names[f], len) == 0)
                        return (enum socket_field) f;
        return _FIELD_INVALID;
}

/* A URL is for a local client: a wildcard address (0.0.0.0, ::) is not
 * something to connect to, so it is shown as the loopback address of the
 * same family, which reaches the same socket. */
static void url_address(const union sockaddr_any *addr, socklen_t len, union sockaddr_any *ret) {
        *ret = *addr;
        if (addr->sa.sa_family == AF_INET && addr->in.sin_addr.s_addr == htonl(INADDR_ANY))
                ret->in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        else if (addr->sa.sa_family == AF_INET6 && IN6_IS_ADDR_UNSPECIFIED(&addr->in6.sin6_addr))
                ret->in6.sin6_addr = in6addr_loopback;
        (void) len;
}

const char *socket_field_format(const struct bound_socket *sockets, size_t index, enum socket_field field, char *buf,
                                size_t size) {
        const struct bound_socket *s = &sockets[index];
        char addr[ADDRESS_STRING_MAX];
        union sockaddr_any url_addr;
        int family = s->addr.sa.sa_family;

        /* Sockets are IP or unix (sockets_inherit() refuses the rest); an
         * address that cannot be shown is "?", never NULL. */
        if (family != AF_INET && family != AF_INET6 && family != AF_UNIX) {
                snprintf(buf, size, "?");
                return buf;
        }
        switch (field) {
        case FIELD_PORT:
                if (family == AF_UNIX)
                        return sockaddr_host_to_string(&s->addr, s->addr_len, buf, size);
                snprintf(buf, size, "%d", sockaddr_port(&s->addr));
                return buf;
        case FIELD_HOST:
                return sockaddr_host_to_string(&s->addr, s->addr_len, buf, size);
        case FIELD_ADDR:
                return sockaddr_to_string(&s->addr, s->addr_len, buf, size);
        case FIELD_URL:
                if (family == AF_UNIX) {
                        snprintf(buf, size, "unix:%s",
                                 sockaddr_host_to_string(&s->addr, s->addr_len, addr, sizeof addr));
                        return buf;
                }
                url_address(&s->addr, s->addr_len, &url_addr);
                snprintf(buf, size, "%s://%s", s->type == SOCK_DGRAM ? "udp" : "http",
                         sockaddr_to_string(&url_addr, s->addr_len, addr, sizeof addr));
                return buf;
        case FIELD_FD:
                snprintf(buf, size, "%zu", 3 + index);
                return buf;
        case FIELD_NAME:
                snprintf(buf, size, "%s", s->name);
                return buf;
        default:
                snprintf(buf, size, "?");
                return buf;
        }
}

size_t utf8_sequence_length(const char *s) {
        const unsigned char *p = (const unsigned char *) s;
        unsigned char low = 0x80, high = 0xbf; /* the second byte's range */
        size_t len;

        /* RFC 3629, section 4: the second byte's range excludes overlong
         * forms (E0, F0), UTF-16 surrogates (ED) and more than U+10FFFF
         * (F4); C0, C1 and F5-FF never start a sequence. */
        if (p[0] < 0x80)
                return p[0] ? 1 : 0;
        if (p[0] >= 0xc2 && p[0] <= 0xdf)
                len = 2;
        else if (p[0] >= 0xe0 && p[0] <= 0xef) {
                len = 3;
                low = p[0] == 0xe0 ? 0xa0 : 0x80;
                high = p[0] == 0xed ? 0x9f : 0xbf;
        } else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
                len = 4;
                low = p[0] == 0xf0 ? 0x90 : 0x80;
                high = p[0] == 0xf4 ? 0x8f : 0xbf;
        } else
                return 0;
        if (p[1] < low || p[1] > high)
                return 0;
        for (size_t i = 2; i < len; i++)
                if (p[i] < 0x80 || p[i] > 0xbf)
                        return 0;
        return len;
}

void json_string(FILE *f, const char *s) {
        fputc('"', f);
        while (*s) {
                unsigned char c = (unsigned char) *s;
                size_t len = utf8_sequence_length(s);

                if (c == '"' || c == '\\')
                        fprintf(f, "\\%c", c);
                else if (c < 0x20 || c == 0x7f)
                        fprintf(f, "\\u%04x", c);
                else if (len == 0)
                        /* Not UTF-8 (a unix path is bytes): a lone low
                         * surrogate per byte, as Python's surrogateescape
                         * writes it; json.loads() and os.fsencode() give
                         * the bytes back. The output stays UTF-8. */
                        fprintf(f, "\\udc%02x", c);
                else {
                        fwrite(s, 1, len, f);
                        s += len;
                        continue;
                }
                s++;
        }
        fputc('"', f);
}

static const char *family_name(int family) {
        return family == AF_INET ? "ipv4" : family == AF_INET6 ? "ipv6" : "unix";
}

static void format_json(FILE *f, const struct bound_socket *sockets, size_t n, pid_t pid, pid_t child_pid) {
        char buf[FIELD_STRING_MAX];

        /* No single COMMAND with --accept: child_pid is null there. */
        if (child_pid > 0)
                fprintf(f, "{\"pid\":%d,\"child_pid\":%d,\"sockets\":[", (int) pid, (int) child_pid);
        else
                fprintf(f, "{\"pid\":%d,\"child_pid\":null,\"sockets\":[", (int) pid);
        for (size_t i = 0; i < n; i++) {
                int port = sockaddr_port(&sockets[i].addr);

                fprintf(f, "%s{\"fd\":%zu,\"name\":", i ? "," : "", 3 + i);
                json_string(f, sockets[i].name);
                fprintf(f,
                        ",\"family\":\"%s\",\"type\":\"%s\",\"address\":", family_name(sockets[i].addr.sa.sa_family),
                        sockets[i].type == SOCK_DGRAM ? "dgram" : "stream");
                json_string(f, socket_field_format(sockets, i, FIELD_HOST, buf, sizeof buf));
                if (port >= 0)
                        fprintf(f, ",\"port\":%d,\"url\":", port);
                else
                        fputs(",\"port\":null,\"url\":", f);
                json_string(f, socket_field_format(sockets, i, FIELD_URL, buf, sizeof buf));
                fputc('}', f);
        }
        fputs("]}\n", f);
}

void shell_quote(FILE *f, const char *value, enum shell_place place) {
        /* '[' and ']' are glob characters in a word, but not in the value
         * of an assignment (no pathname expansion there). */
        const char *safe = place == SHELL_ASSIGNMENT ? "@%+=:,./_-[]" : "@%+=:,./_-";
        bool bare = *value != '\0';

        for (const char *p = value; *p && bare; p++)
                bare = isalnum((unsigned char) *p) || strchr(safe, *p);
        if (bare) {
                fputs(value, f);
                return;
        }
        fputc('\'', f);
        for (const char *p = value; *p; p++) {
                if (*p == '\'')
                        fputs("'\\''", f);
                else
                        fputc(*p, f);
        }
        fputc('\'', f);
}

static void env_line(FILE *f, const char *prefix, const char *key, const char *value) {
        fprintf(f, "%s%s=", prefix, key);
        /* Bare when a shell and a CI environment file (which takes the
         * rest of the line literally) read the value alike. */
        shell_quote(f, value, SHELL_ASSIGNMENT);
        fputc('\n', f);
}

static const struct {
        enum socket_field field;
        const char *key;
} env_fields[] = {
        { FIELD_PORT, "PORT" }, { FIELD_HOST, "HOST" }, { FIELD_ADDR, "ADDR" },
        { FIELD_URL, "URL" },   { FIELD_FD, "FD" },
};

static void env_socket(FILE *f, const struct bound_socket *sockets, size_t index, const char *prefix) {
        char buf[FIELD_STRING_MAX];

        for (size_t k = 0; k < sizeof env_fields / sizeof env_fields[0]; k++)
                env_line(f, prefix, env_fields[k].key,
                         socket_field_format(sockets, index, env_fields[k].field, buf, sizeof buf));
}

static void format_env(FILE *f, const struct bound_socket *sockets, size_t n, pid_t pid, pid_t child_pid) {
        char prefix[8 + FDNAME_MAX + 2];

        /* The first socket is "the" address: PREBIND_PORT, PREBIND_URL… */
        if (n > 0)
                env_socket(f, sockets, 0, "PREBIND_");
        for (size_t i = 0; i < n; i++) {
                size_t len;

                if (strcmp(sockets[i].name, "unknown") == 0)
                        continue;
                /* PREBIND_<NAME>_PORT, the name upper-cased, and anything a
                 * variable name cannot hold turned into '_'. */
                len = (size_t) snprintf(prefix, sizeof prefix, "PREBIND_%s_", sockets[i].name);
                /* snprintf() returns the length it wanted: never walk past
                 * the buffer, whatever the name (an inherited one is only
                 * as long as LISTEN_FDNAMES says). */
                if (len >= sizeof prefix)
                        len = sizeof prefix - 1;
                for (size_t j = strlen("PREBIND_"); j < len - 1; j++)
                        prefix[j] =
                                isalnum((unsigned char) prefix[j]) ? (char) toupper((unsigned char) prefix[j]) : '_';
                env_socket(f, sockets, i, prefix);
        }
        fprintf(f, "PREBIND_PID=%d\n", (int) pid);
        if (child_pid > 0)
                fprintf(f, "PREBIND_CHILD_PID=%d\n", (int) child_pid);
}

int format_addresses(enum output_format format, const struct bound_socket *sockets, size_t n, pid_t pid,
                     pid_t child_pid, char **ret) {
        static const enum socket_field line_fields[] = {
                [FORMAT_PORT] = FIELD_PORT,
                [FORMAT_ADDR] = FIELD_ADDR,
                [FORMAT_URL] = FIELD_URL,
        };
        char buf[FIELD_STRING_MAX];
        char *text = NULL;
        size_t size = 0;
        FILE *f;

        f = open_memstream(&text, &size);
        if (!f)
                return -ENOMEM;
        switch (format) {
        case FORMAT_JSON:
                format_json(f, sockets, n, pid, child_pid);
                break;
        case FORMAT_ENV:
                format_env(f, sockets, n, pid, child_pid);
                break;
        default:
                for (size_t i = 0; i < n; i++)
                        fprintf(f, "%s\n", socket_field_format(sockets, i, line_fields[format], buf, sizeof buf));
        }
        if (fclose(f) != 0) {
                free(text);
                return -ENOMEM;
        }
        *ret = text;
        return 0;
}
