/* SPDX-License-Identifier: MIT */
/* --intercept: the interposer's pure logic (src/intercept/match.c), the
 * checks on COMMAND and the LD_PRELOAD entry (src/preload.c), and the
 * broker (src/broker.c) against the real libprebind-intercept.so loaded
 * into tests/helpers/intercept-client, a process that binds as a server
 * would: both families, UDP, flags kept, a second bind, a retry, a
 * refusal, and what is said when nothing is claimed. */
#include <arpa/inet.h>
#include <check.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "broker.h"
#include "claiming.h"
#include "loop.h"
#include "ready.h"
#include "intercept/match.h"
#include "intercept/protocol.h"
#include "preload.h"
#include "unit.h"

/* ---- the PREBIND_INTERCEPT list ---------------------------------------- */

START_TEST(test_ports_parse) {
        struct intercept_port p[4];
        size_t n = 99;

        ck_assert_int_eq(intercept_ports_parse("6379/tcp", p, 4, &n), 0);
        ck_assert_uint_eq(n, 1);
        ck_assert_uint_eq(p[0].port, 6379);
        ck_assert_int_eq(p[0].type, SOCK_STREAM);
        ck_assert_int_eq(intercept_ports_parse("1/udp,65535/tcp,53/udp", p, 4, &n), 0);
        ck_assert_uint_eq(n, 3);
        ck_assert_uint_eq(p[0].port, 1);
        ck_assert_int_eq(p[0].type, SOCK_DGRAM);
        ck_assert_uint_eq(p[1].port, 65535);
        ck_assert_int_eq(p[2].type, SOCK_DGRAM);
}
END_TEST

START_TEST(test_ports_parse_invalid) {
        static const char *const bad[] = {
                "",          "6379",         "6379/",           "/tcp",      "0/tcp",
                "65536/tcp", "99999999/tcp", "-1/tcp",          "6379/sctp", "6379/TCP",
                "6379/tcp,", ",6379/tcp",    "6379/tcp,,1/udp", " 6379/tcp", "6379 /tcp",
                "6379/tcpx", "123456/tcp",   "6379/tcp;1/udp",
        };
        struct intercept_port p[4];
        size_t n = 7;

        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                ck_assert_msg(intercept_ports_parse(bad[i], p, 4, &n) == -EINVAL, "accepted '%s'", bad[i]);
                ck_assert_uint_eq(n, 7);
        }
        ck_assert_int_eq(intercept_ports_parse(NULL, p, 4, &n), -EINVAL);
        ck_assert_int_eq(intercept_ports_parse("1/tcp,2/tcp,3/tcp", p, 2, &n), -E2BIG);
}
END_TEST

START_TEST(test_ports_format) {
        const struct intercept_port p[] = { { 6379, SOCK_STREAM }, { 53, SOCK_DGRAM }, { 65535, SOCK_STREAM } };
        struct intercept_port back[4];
        char buf[64];
        size_t n;

        ck_assert_int_eq(intercept_ports_format(p, 3, buf, sizeof buf), (int) strlen("6379/tcp,53/udp,65535/tcp"));
        ck_assert_str_eq(buf, "6379/tcp,53/udp,65535/tcp");
        ck_assert_int_eq(intercept_ports_parse(buf, back, 4, &n), 0);
        ck_assert_uint_eq(n, 3);
        for (size_t i = 0; i < 3; i++) {
                ck_assert_uint_eq(back[i].port, p[i].port);
                ck_assert_int_eq(back[i].type, p[i].type);
        }
        /* Too small: an error, never a cut list. */
        ck_assert_int_eq(intercept_ports_format(p, 3, buf, 10), -ENOBUFS);
        ck_assert_int_eq(intercept_ports_format(p, 1, buf, 9), 8);
        ck_assert_int_eq(intercept_ports_format(p, 1, buf, 8), -ENOBUFS);
        ck_assert_int_eq(intercept_ports_format(p, 0, buf, 1), 0);
        ck_assert_str_eq(buf, "");
}
END_TEST

/* ---- which bind() matches ---------------------------------------------- */

START_TEST(test_sockaddr_port) {
        struct sockaddr_in in = { .sin_family = AF_INET, .sin_port = htons(6379) };
        struct sockaddr_in6 in6 = { .sin6_family = AF_INET6, .sin6_port = htons(8080) };
        struct sockaddr_un un = { .sun_family = AF_UNIX, .sun_path = "/x" };
        uint16_t port = 1;

        ck_assert(intercept_sockaddr_port((struct sockaddr *) &in, sizeof in, &port));
        ck_assert_uint_eq(port, 6379);
        ck_assert(intercept_sockaddr_port((struct sockaddr *) &in6, sizeof in6, &port));
        ck_assert_uint_eq(port, 8080);
        /* RFC 2133's sockaddr_in6, without sin6_scope_id: the kernel takes it. */
        ck_assert(intercept_sockaddr_port((struct sockaddr *) &in6, 24, &port));
        port = 1;
        ck_assert(!intercept_sockaddr_port((struct sockaddr *) &in6, 23, &port));
        ck_assert(!intercept_sockaddr_port((struct sockaddr *) &in, sizeof in - 1, &port));
        ck_assert(!intercept_sockaddr_port((struct sockaddr *) &un, sizeof un, &port));
        ck_assert(!intercept_sockaddr_port(NULL, sizeof in, &port));
        ck_assert(!intercept_sockaddr_port((struct sockaddr *) &in, 1, &port));
        ck_assert_uint_eq(port, 1);
}
END_TEST

/* The address as Linux binds it: what both mechanisms decide on. */
START_TEST(test_bind_address) {
        struct sockaddr_in in = { .sin_family = AF_INET, .sin_port = htons(6379) };
        struct sockaddr_in unspec = { .sin_family = AF_UNSPEC, .sin_port = htons(6379) };
        struct sockaddr_in6 in6 = { .sin6_family = AF_INET6, .sin6_port = htons(8080) };
        struct sockaddr_un un = { .sun_family = AF_UNIX, .sun_path = "/x" };
        struct sockaddr_storage ss;
        uint16_t port = 0;

        ck_assert_uint_eq(intercept_bind_address(AF_INET, (struct sockaddr *) &in, sizeof in, &ss), sizeof in);
        ck_assert_int_eq(ss.ss_family, AF_INET);
        /* sin_family 0 with INADDR_ANY: inet_bind() binds 0.0.0.0. */
        ck_assert_uint_eq(intercept_bind_address(AF_INET, (struct sockaddr *) &unspec, sizeof unspec, &ss),
                          sizeof unspec);
        ck_assert_int_eq(ss.ss_family, AF_INET);
        ck_assert(intercept_sockaddr_port((struct sockaddr *) &ss, sizeof unspec, &port));
        ck_assert_uint_eq(port, 6379);
        /* Any other address with sin_family 0 is EAFNOSUPPORT. */
        unspec.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ck_assert_uint_eq(intercept_bind_address(AF_INET, (struct sockaddr *) &unspec, sizeof unspec, &ss), 0);
        /* Only on an AF_INET socket: inet6_bind() refuses AF_UNSPEC. */
        unspec.sin_addr.s_addr = htonl(INADDR_ANY);
        ck_assert_uint_eq(intercept_bind_address(AF_INET6, (struct sockaddr *) &unspec, sizeof unspec, &ss), 0);
        ck_assert_uint_eq(intercept_bind_address(AF_INET, (struct sockaddr *) &unspec, sizeof unspec - 1, &ss), 0);
        ck_assert_uint_eq(intercept_bind_address(AF_INET6, (struct sockaddr *) &in6, sizeof in6, &ss), sizeof in6);
        ck_assert_int_eq(ss.ss_family, AF_INET6);
        ck_assert_uint_eq(intercept_bind_address(AF_INET6, (struct sockaddr *) &in6, 24, &ss), sizeof in6);
        ck_assert_uint_eq(intercept_bind_address(AF_INET6, (struct sockaddr *) &in6, 23, &ss), 0);
        /* The other family's address: the kernel refuses it. */
        ck_assert_uint_eq(intercept_bind_address(AF_INET, (struct sockaddr *) &in6, sizeof in6, &ss), 0);
        ck_assert_uint_eq(intercept_bind_address(AF_INET6, (struct sockaddr *) &in, sizeof in, &ss), 0);
        ck_assert_uint_eq(intercept_bind_address(AF_UNIX, (struct sockaddr *) &un, sizeof un, &ss), 0);
        ck_assert_uint_eq(intercept_bind_address(-1, (struct sockaddr *) &in, sizeof in, &ss), 0);
        ck_assert_uint_eq(intercept_bind_address(AF_INET, NULL, sizeof in, &ss), 0);
}
END_TEST

/* Held: the socket is still at the fd it was handed at, and the new bind
 * is on another fd. */
START_TEST(test_held_family) {
        struct intercept_held h = { .fd = 5, .family = AF_INET6, .dev = 7, .ino = 42 };
        struct stat same = { .st_dev = 7, .st_ino = 42 }, other = { .st_dev = 7, .st_ino = 43 };

        ck_assert_int_eq(intercept_held_family(&h, 6, &same), AF_INET6);
        /* Closed (nothing there, or another file there): a bind anew. */
        ck_assert_int_eq(intercept_held_family(&h, 6, NULL), 0);
        ck_assert_int_eq(intercept_held_family(&h, 6, &other), 0);
        /* The same fd: a retry on it. */
        ck_assert_int_eq(intercept_held_family(&h, 5, &same), 0);
        h.fd = -1;
        ck_assert_int_eq(intercept_held_family(&h, 6, &same), 0);
}
END_TEST

START_TEST(test_match) {
        const struct intercept_port p[] = { { 6379, SOCK_STREAM }, { 53, SOCK_DGRAM }, { 53, SOCK_STREAM } };

        ck_assert_ptr_eq(intercept_match(p, 3, 6379, SOCK_STREAM), &p[0]);
        /* The flags a server may pass to socket() are not the type. */
        ck_assert_ptr_eq(intercept_match(p, 3, 6379, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC), &p[0]);
        ck_assert_ptr_null(intercept_match(p, 3, 6379, SOCK_DGRAM));
        ck_assert_ptr_eq(intercept_match(p, 3, 53, SOCK_DGRAM | SOCK_CLOEXEC), &p[1]);
        ck_assert_ptr_eq(intercept_match(p, 3, 53, SOCK_STREAM), &p[2]);
        ck_assert_ptr_null(intercept_match(p, 3, 6380, SOCK_STREAM));
        ck_assert_ptr_null(intercept_match(p, 3, 0, SOCK_STREAM));
        ck_assert_ptr_null(intercept_match(p, 3, 6379, SOCK_SEQPACKET));
        ck_assert_ptr_null(intercept_match(p, 0, 6379, SOCK_STREAM));
}
END_TEST

START_TEST(test_decoy_address) {
        struct sockaddr_storage ss;
        char text[64];

        ck_assert_uint_eq(intercept_decoy_address(AF_INET, &ss), sizeof(struct sockaddr_in));
        ck_assert_uint_eq(ntohs(((struct sockaddr_in *) &ss)->sin_port), 0);
        intercept_address_text((struct sockaddr *) &ss, sizeof(struct sockaddr_in), text, sizeof text);
        ck_assert_str_eq(text, "127.0.0.1");
        ck_assert_uint_eq(intercept_decoy_address(AF_INET6, &ss), sizeof(struct sockaddr_in6));
        ck_assert_uint_eq(ntohs(((struct sockaddr_in6 *) &ss)->sin6_port), 0);
        intercept_address_text((struct sockaddr *) &ss, sizeof(struct sockaddr_in6), text, sizeof text);
        ck_assert_str_eq(text, "::1");
        ck_assert_uint_eq(intercept_decoy_address(AF_UNIX, &ss), 0);
}
END_TEST

START_TEST(test_address_text) {
        struct sockaddr_in in = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(0x0a000001) };
        struct sockaddr_in6 in6 = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_ANY_INIT };
        struct sockaddr_un un = { .sun_family = AF_UNIX, .sun_path = "/run/x.sock" };
        struct sockaddr_un abs = { .sun_family = AF_UNIX, .sun_path = "\0name\x01" };
        char text[INTERCEPT_ADDRESS_MAX], tiny[4];

        intercept_address_text((struct sockaddr *) &in, sizeof in, text, sizeof text);
        ck_assert_str_eq(text, "10.0.0.1");
        intercept_address_text((struct sockaddr *) &in6, sizeof in6, text, sizeof text);
        ck_assert_str_eq(text, "::");
        intercept_address_text((struct sockaddr *) &un, sizeof un, text, sizeof text);
        ck_assert_str_eq(text, "/run/x.sock");
        intercept_address_text((struct sockaddr *) &abs, (socklen_t) (offsetof(struct sockaddr_un, sun_path) + 6),
                               text, sizeof text);
        ck_assert_str_eq(text, "@name?");
        intercept_address_text((struct sockaddr *) &un, sizeof un, tiny, sizeof tiny);
        ck_assert_str_eq(tiny, "/ru");
        intercept_address_text(NULL, 0, text, sizeof text);
        ck_assert_str_eq(text, "");
}
END_TEST

/* ---- COMMAND and LD_PRELOAD (preload.c) -------------------------------- */

START_TEST(test_relative_path) {
        static const struct {
                const char *from, *to, *want;
        } cases[] = {
                { "/usr/bin", "/usr/lib/x86_64-linux-gnu/prebind", "../lib/x86_64-linux-gnu/prebind" },
                { "/usr/local/bin", "/usr/local/lib/prebind", "../lib/prebind" },
                { "/opt/p/bin", "/opt/p/lib64/prebind", "../lib64/prebind" },
                { "/usr/bin", "/usr/bin/prebind", "prebind" },
                { "/usr/binx", "/usr/bin/prebind", "../bin/prebind" },
                { "/a/b/c", "/x/y", "../../../x/y" },
        };
        char buf[256];

        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                preload_relative_path(cases[i].from, cases[i].to, buf, sizeof buf);
                ck_assert_str_eq(buf, cases[i].want);
        }
}
END_TEST

START_TEST(test_env_entry) {
        char *e = NULL;

        ck_assert_int_eq(preload_env_entry(NULL, "/lib/p.so", &e), 0);
        ck_assert_str_eq(e, "LD_PRELOAD=/lib/p.so");
        free(e);
        ck_assert_int_eq(preload_env_entry("", "/lib/p.so", &e), 0);
        ck_assert_str_eq(e, "LD_PRELOAD=/lib/p.so");
        free(e);
        /* The user's libraries stay first. */
        ck_assert_int_eq(preload_env_entry("/a.so /b.so", "/lib/p.so", &e), 0);
        ck_assert_str_eq(e, "LD_PRELOAD=/a.so /b.so:/lib/p.so");
        free(e);
        e = NULL;
        ck_assert_int_eq(preload_env_entry(NULL, "/my lib/p.so", &e), -EINVAL);
        ck_assert_int_eq(preload_env_entry(NULL, "/a:b/p.so", &e), -EINVAL);
        ck_assert_ptr_null(e);
}
END_TEST

static char scratch[64];

static void scratch_setup(void) {
        strcpy(scratch, "/tmp/prebind-test-intercept-XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(scratch));
}

static void scratch_teardown(void) {
        char cmd[128];

        snprintf(cmd, sizeof cmd, "rm -rf '%s'", scratch);
        ck_assert_int_eq(system(cmd), 0);
}

static void write_file(const char *path, const void *data, size_t len, mode_t mode) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, data, len), (ssize_t) len);
        close(fd);
        ck_assert_int_eq(chmod(path, mode), 0);
}

START_TEST(test_check_program) {
        const char *reason = NULL;
        unsigned char elf[64] = { 0x7f, 'E', 'L', 'F', 2 /* 64-bit */, 1, 1 };
        char path[128], script[128], wrapper[128], text[256];

        /* Dynamically linked programs and scripts run by them pass. */
        ck_assert_int_eq(preload_check_program("/bin/sh", &reason), 0);
        ck_assert_int_eq(preload_check_program("/nonexistent", &reason), 0);
        ck_assert_ptr_null(reason);

        /* An ELF file without PT_INTERP: statically linked. */
        snprintf(path, sizeof path, "%s/static", scratch);
        elf[16] = 2; /* ET_EXEC */
        write_file(path, elf, sizeof elf, 0755);
        ck_assert_int_eq(preload_check_program(path, &reason), -EPERM);
        ck_assert_ptr_nonnull(strstr(reason, "statically linked"));

        /* A script is judged by its interpreter, through a second script. */
        snprintf(script, sizeof script, "%s/script", scratch);
        snprintf(text, sizeof text, "#!%s -x\n", path);
        write_file(script, text, strlen(text), 0755);
        snprintf(wrapper, sizeof wrapper, "%s/wrapper", scratch);
        snprintf(text, sizeof text, "#!  %s\n", script);
        write_file(wrapper, text, strlen(text), 0755);
        reason = NULL;
        ck_assert_int_eq(preload_check_program(wrapper, &reason), -EPERM);
        ck_assert_ptr_nonnull(strstr(reason, "statically linked"));
        snprintf(text, sizeof text, "#!/bin/sh\nexit 0\n");
        write_file(script, text, strlen(text), 0755);
        ck_assert_int_eq(preload_check_program(wrapper, &reason), 0);

        /* setuid to another user: secure-execution mode ignores LD_PRELOAD. */
        if (geteuid() == 0) {
                snprintf(path, sizeof path, "%s/setuid", scratch);
                write_file(path, "#!/bin/sh\n", 10, 0755);
                ck_assert_int_eq(chown(path, 65534, 65534), 0);
                ck_assert_int_eq(chmod(path, 04755), 0);
                ck_assert_int_eq(preload_check_program(path, &reason), -EPERM);
                ck_assert_ptr_nonnull(strstr(reason, "setuid"));
                ck_assert_int_eq(chmod(path, 02755), 0);
                ck_assert_int_eq(preload_check_program(path, &reason), -EPERM);
                /* setuid to ourselves changes nothing. */
                ck_assert_int_eq(chown(path, 0, 0), 0);
                ck_assert_int_eq(chmod(path, 06755), 0);
                ck_assert_int_eq(preload_check_program(path, &reason), 0);
        }
}
END_TEST

/* A 64-bit ELF file with a PT_INTERP program header (dynamically linked)
 * and, if section is given, a section of that name. */
static void write_elf(const char *path, const char *section) {
        struct {
                Elf64_Ehdr eh;
                Elf64_Phdr ph;
                Elf64_Shdr sh[3];
                char strtab[64];
        } f = { 0 };
        static const char names[] = "\0.shstrtab\0";
        size_t name_at = sizeof names - 1;

        memcpy(f.eh.e_ident, ELFMAG, SELFMAG);
        f.eh.e_ident[EI_CLASS] = ELFCLASS64;
        f.eh.e_ident[EI_DATA] = ELFDATA2LSB;
        f.eh.e_ident[EI_VERSION] = EV_CURRENT;
        f.eh.e_type = ET_DYN;
        f.eh.e_phoff = offsetof(__typeof__(f), ph);
        f.eh.e_phentsize = sizeof f.ph;
        f.eh.e_phnum = 1;
        f.eh.e_shoff = offsetof(__typeof__(f), sh);
        f.eh.e_shentsize = sizeof f.sh[0];
        f.eh.e_shnum = section ? 3 : 2;
        f.eh.e_shstrndx = 1;
        f.ph.p_type = PT_INTERP;
        memcpy(f.strtab, names, sizeof names);
        f.sh[1].sh_name = 1;
        f.sh[1].sh_offset = offsetof(__typeof__(f), strtab);
        if (section) {
                memcpy(f.strtab + name_at, section, strlen(section) + 1);
                f.sh[2].sh_name = (Elf64_Word) name_at;
        }
        write_file(path, &f, sizeof f, 0755);
}

START_TEST(test_check_go_program) {
        const char *reason = NULL;
        char path[128];

        snprintf(path, sizeof path, "%s/dynamic", scratch);
        write_elf(path, ".text");
        ck_assert_int_eq(preload_check_program(path, &reason), 0);
        /* Dynamically linked, but Go: its net package makes raw system calls. */
        write_elf(path, ".note.go.buildid");
        ck_assert_int_eq(preload_check_program(path, &reason), -EPERM);
        ck_assert_ptr_nonnull(strstr(reason, "Go program"));
        reason = NULL;
        write_elf(path, ".go.buildinfo");
        ck_assert_int_eq(preload_check_program(path, &reason), -EPERM);
        ck_assert_ptr_nonnull(strstr(reason, "Go program"));
}
END_TEST

/* ---- the broker and the interposer, end to end ------------------------- */

#define WANTED 48123 /* the port the "server" binds: never bound for real */

struct fixture {
        int tcp, udp; /* prebind's sockets */
        unsigned tcp_port, udp_port;
        struct broker *broker;
        struct loop *loop; /* the broker's, as prebind's main loop is */
};

static struct fixture fx;

static unsigned bound_port(int fd) {
        struct sockaddr_in in;
        socklen_t len = sizeof in;

        ck_assert_int_eq(getsockname(fd, (struct sockaddr *) &in, &len), 0);
        return ntohs(in.sin_port);
}

static void broker_setup(void) {
        struct sockaddr_in lo = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        struct intercept_target targets[2];

        fx.tcp = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        fx.udp = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        ck_assert_int_eq(bind(fx.tcp, (struct sockaddr *) &lo, sizeof lo), 0);
        ck_assert_int_eq(listen(fx.tcp, 8), 0);
        ck_assert_int_eq(bind(fx.udp, (struct sockaddr *) &lo, sizeof lo), 0);
        fx.tcp_port = bound_port(fx.tcp);
        fx.udp_port = bound_port(fx.udp);
        targets[0] = (struct intercept_target) { .port = WANTED, .type = SOCK_STREAM, .fd = fx.tcp, .name = "http" };
        targets[1] = (struct intercept_target) { .port = WANTED, .type = SOCK_DGRAM, .fd = fx.udp, .name = "dns" };
        ck_assert_int_eq(broker_open(targets, 2, &fx.broker), 0);
        ck_assert_int_eq(loop_new(&fx.loop), 0);
        ck_assert_int_eq(broker_attach(fx.broker, fx.loop, NULL, NULL), 0);
}

static void broker_teardown(void) {
        broker_free(fx.broker);
        loop_free(fx.loop);
        close(fx.tcp);
        close(fx.udp);
}

/* Run intercept-client SCENARIO with the interposer, serving the broker
 * until it exits (bounded). Returns its exit status. claimant: who may
 * claim (0: the client itself). */
/* Start intercept-client SCENARIO with the interposer and broker's
 * variables (without PREBIND_BROKER if with_broker is false). */
static pid_t spawn_client(const struct broker *broker, const char *scenario, bool with_broker) {
        const char *client = getenv("INTERCEPT_CLIENT"), *library = getenv("PREBIND_INTERCEPT_LIBRARY");
        char wanted[16], tcp[16], udp[16], preload[512];
        pid_t pid;

        ck_assert_msg(client && library, "INTERCEPT_CLIENT and PREBIND_INTERCEPT_LIBRARY must be set (meson test)");
        snprintf(wanted, sizeof wanted, "%d", WANTED);
        snprintf(tcp, sizeof tcp, "%u", fx.tcp_port);
        snprintf(udp, sizeof udp, "%u", fx.udp_port);
        snprintf(preload, sizeof preload, "LD_PRELOAD=%s", library);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                char *env[] = { preload, (char *) broker_env_address(broker), (char *) broker_env_ports(broker),
                                NULL };
                char *argv[] = { (char *) client, (char *) scenario, wanted, tcp, udp, NULL };
                if (!with_broker)
                        env[1] = NULL;
                execve(client, argv, env);
                _exit(127);
        }
        return pid;
}

/* Has pid exited? Without reaping it: as prebind does, what it sent is
 * heard while it is a zombie, whose pidfd still has its number. */
static bool exited_unreaped(pid_t pid) {
        siginfo_t info = { 0 };

        ck_assert_int_eq(waitid(P_PID, (id_t) pid, &info, WEXITED | WNOHANG | WNOWAIT), 0);
        return info.si_pid == pid;
}

static int run_client(const char *scenario, bool with_broker, pid_t claimant) {
        struct timespec start, now;
        int status = -1;
        pid_t pid = spawn_client(fx.broker, scenario, with_broker);

        broker_set_command(fx.broker, claimant ? claimant : pid);
        clock_gettime(CLOCK_MONOTONIC, &start);
        for (;;) {
                ck_assert_int_ge(loop_dispatch_once(fx.loop, 20), 0);
                if (exited_unreaped(pid))
                        break;
                clock_gettime(CLOCK_MONOTONIC, &now);
                if (now.tv_sec - start.tv_sec > 20) {
                        kill(pid, SIGKILL);
                        waitpid(pid, &status, 0);
                        ck_abort_msg("intercept-client %s did not finish within 20s", scenario);
                }
        }
        /* Reports sent just before exit are read now, then it is reaped. */
        broker_dispatch(fx.broker);
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert(WIFEXITED(status));
        return WEXITSTATUS(status);
}

START_TEST(test_claim_tcp_both_families) {
        char why[512];

        ck_assert_int_eq(run_client("tcp", true, 0), 0);
        ck_assert(!broker_all_claimed(fx.broker)); /* the udp one was not */
        broker_describe_unmet(fx.broker, why, sizeof why);
        ck_assert_msg(strstr(why, "did not claim port 48123/udp") && !strstr(why, "48123/tcp"), "%s", why);
}
END_TEST

START_TEST(test_claim_keeps_flags) {
        ck_assert_int_eq(run_client("plain", true, 0), 0);
        /* The server's blocking mode is now that of the shared description. */
        ck_assert(!(fcntl(fx.tcp, F_GETFL) & O_NONBLOCK));
}
END_TEST

START_TEST(test_claim_again_after_close) {
        ck_assert_int_eq(run_client("retry", true, 0), 0);
}
END_TEST

START_TEST(test_claim_udp) {
        char why[512];

        ck_assert_int_eq(run_client("udp", true, 0), 0);
        broker_describe_unmet(fx.broker, why, sizeof why);
        ck_assert_msg(strstr(why, "48123/tcp") && !strstr(why, "48123/udp"), "%s", why);
}
END_TEST

START_TEST(test_all_claimed) {
        char why[64] = "x";

        ck_assert_int_eq(run_client("both", true, 0), 0);
        ck_assert(broker_all_claimed(fx.broker));
        broker_describe_unmet(fx.broker, why, sizeof why);
        ck_assert_str_eq(why, "");
        /* A new COMMAND (a restart) must claim again. */
        broker_set_command(fx.broker, getpid());
        ck_assert(!broker_all_claimed(fx.broker));
}
END_TEST

START_TEST(test_other_port_is_named) {
        char why[512];

        ck_assert_int_eq(run_client("other", true, 0), 0);
        ck_assert(!broker_all_claimed(fx.broker));
        broker_describe_unmet(fx.broker, why, sizeof why);
        ck_assert_msg(strcmp(why, "did not claim port 48123/tcp or 48123/udp (it bound 0.0.0.0:48124/tcp instead)") ==
                              0,
                      "%s", why);
        /* Port 0 binds are not reported. */
        ck_assert_msg(!strstr(why, ":0/"), "%s", why);
}
END_TEST

START_TEST(test_nothing_bound) {
        char why[512];

        ck_assert_int_eq(run_client("nothing", true, 0), 0);
        broker_describe_unmet(fx.broker, why, sizeof why);
        ck_assert_msg(strstr(why, "(no bind() of a port reached the interposer; static and Go programs bypass it"),
                      "%s", why);
}
END_TEST

START_TEST(test_refused_to_a_stranger) {
        char why[512];

        /* Only pid 1's descendants may claim: nobody, as the walk stops
         * below pid 1. */
        ck_assert_int_eq(run_client("refused", true, 1), 0);
        ck_assert(!broker_all_claimed(fx.broker));
        broker_describe_unmet(fx.broker, why, sizeof why);
        ck_assert_msg(strstr(why, "refused to pid"), "%s", why);
}
END_TEST

START_TEST(test_inert_without_broker) {
        /* No PREBIND_BROKER: the real bind(), nothing claimed. The refused
         * scenario checks exactly that it did not get prebind's socket. */
        ck_assert_int_eq(run_client("refused", false, 0), 0);
        ck_assert(!broker_all_claimed(fx.broker));
}
END_TEST

START_TEST(test_broker_env) {
        ck_assert_str_eq(broker_env_ports(fx.broker), "PREBIND_INTERCEPT=48123/tcp,48123/udp");
        ck_assert(strncmp(broker_env_address(fx.broker), "PREBIND_BROKER=@prebind/broker/", 31) == 0);
        broker_dispatch(fx.broker);
}
END_TEST

/* A connection that sends garbage, or nothing, is dropped: the broker
 * neither blocks nor answers. */
START_TEST(test_broker_garbage) {
        const char *name = strchr(broker_env_address(fx.broker), '@');
        struct sockaddr_un addr = { .sun_family = AF_UNIX };
        socklen_t len = (socklen_t) (offsetof(struct sockaddr_un, sun_path) + strlen(name));
        int silent = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        int noisy = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        char buf[64];

        memcpy(addr.sun_path + 1, name + 1, strlen(name) - 1);
        ck_assert_int_eq(connect(silent, (struct sockaddr *) &addr, len), 0);
        ck_assert_int_eq(connect(noisy, (struct sockaddr *) &addr, len), 0);
        ck_assert_int_eq(send(noisy, "hello", 5, 0), 5);
        broker_dispatch(fx.broker);
        broker_dispatch(fx.broker);
        ck_assert_int_eq(recv(noisy, buf, sizeof buf, 0), 0); /* closed, no answer */
        ck_assert(!broker_all_claimed(fx.broker));
        close(silent);
        close(noisy);
        broker_dispatch(fx.broker);
}
END_TEST

/* A connection that never sends its request is closed after 1 to 2 s
 * (issue 19): nobody keeps one open to claim from later, once the
 * process that connected is gone. */
START_TEST(test_broker_closes_a_silent_connection) {
        const char *name = strchr(broker_env_address(fx.broker), '@');
        struct sockaddr_un addr = { .sun_family = AF_UNIX };
        socklen_t len = (socklen_t) (offsetof(struct sockaddr_un, sun_path) + strlen(name));
        int silent = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        struct timespec start, now;
        double waited = 0;
        char buf[64];

        memcpy(addr.sun_path + 1, name + 1, strlen(name) - 1);
        ck_assert_int_eq(connect(silent, (struct sockaddr *) &addr, len), 0);
        clock_gettime(CLOCK_MONOTONIC, &start);
        for (;;) {
                ck_assert_int_ge(loop_dispatch_once(fx.loop, 50), 0);
                clock_gettime(CLOCK_MONOTONIC, &now);
                waited = (double) (now.tv_sec - start.tv_sec) + (double) (now.tv_nsec - start.tv_nsec) / 1e9;
                if (recv(silent, buf, sizeof buf, 0) == 0)
                        break;
                ck_assert_int_eq(errno, EAGAIN);
                ck_assert_msg(waited < 5, "still open after %.1fs", waited);
        }
        ck_assert_msg(waited > 0.9 && waited < 2.9, "closed after %.2fs", waited);
        close(silent);
}
END_TEST

/* ---- a claim as a readiness check (check_claims.c) ------------------------ */

struct readiness_calls {
        int met, timed_out;
};

static void on_readiness(enum ready_event event, void *userdata) {
        struct readiness_calls *calls = userdata;

        if (event == READY_MET)
                calls->met++;
        else
                calls->timed_out++;
}

/* intercept-client SCENARIO as COMMAND of a readiness with the broker,
 * through a real loop, until the readiness is decided or the client is
 * gone and heard (bounded). */
static struct readiness_calls run_with_readiness(const char *scenario, uint64_t timeout_usec, char *why,
                                                 size_t why_size) {
        struct ready_options options = { .timeout_usec = timeout_usec };
        struct intercept_target targets[] = {
                { .port = WANTED, .type = SOCK_STREAM, .fd = fx.tcp, .name = "http" },
                { .port = WANTED, .type = SOCK_DGRAM, .fd = fx.udp, .name = "dns" },
        };
        struct readiness_calls calls = { 0 };
        struct ready *r;
        struct broker *broker;
        struct loop *loop;
        bool exited = false;
        int status;
        pid_t pid;

        ck_assert_int_eq(loop_new(&loop), 0);
        ck_assert_int_eq(ready_new(&options, "intercept-client", &r), 0);
        ck_assert(!ready_needed(r));
        ck_assert_int_eq(broker_open(targets, 2, &broker), 0);
        ready_add_claims(r, &broker_claims_ops, broker);
        ck_assert(ready_needed(r));
        ck_assert_int_eq(ready_attach(r, loop, on_readiness, &calls), 0);
        pid = spawn_client(broker, scenario, true);
        ck_assert_int_eq(ready_start(r, pid), 0);
        ck_assert(ready_waiting(r));
        for (int i = 0; i < 1000 && !calls.met && !calls.timed_out; i++) {
                ck_assert_int_ge(loop_dispatch_once(loop, 20), 0);
                if (!exited && exited_unreaped(pid)) {
                        exited = true;
                        ready_hear(r); /* as the supervisor does before reaping */
                        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
                        ready_forget_child(r);
                        if (!timeout_usec)
                                break;
                }
        }
        if (!exited)
                waitpid(pid, &status, 0);
        ready_describe_unmet(r, why, why_size);
        ready_free(r);
        loop_free(loop);
        return calls;
}

START_TEST(test_readiness_met_by_claims) {
        char why[512];
        struct readiness_calls calls = run_with_readiness("both", 0, why, sizeof why);

        ck_assert_int_eq(calls.met, 1);
        ck_assert_int_eq(calls.timed_out, 0);
}
END_TEST

START_TEST(test_readiness_not_met_by_half) {
        char why[512];
        struct readiness_calls calls = run_with_readiness("tcp", 0, why, sizeof why);

        ck_assert_int_eq(calls.met, 0);
        ck_assert_msg(strcmp(why, "did not claim port 48123/udp") == 0, "%s", why);
}
END_TEST

START_TEST(test_readiness_times_out_naming_the_port) {
        char why[512];
        struct readiness_calls calls = run_with_readiness("nothing", 200 * 1000, why, sizeof why);

        ck_assert_int_eq(calls.met, 0);
        ck_assert_int_eq(calls.timed_out, 1);
        ck_assert_msg(strstr(why, "did not claim port 48123/tcp or 48123/udp (no bind() of a port reached"), "%s",
                      why);
}
END_TEST

static Suite *intercept_suite(void) {
        Suite *s = suite_create("intercept");
        TCase *tc;

        tc = tcase_create("ports");
        tcase_add_test(tc, test_ports_parse);
        tcase_add_test(tc, test_ports_parse_invalid);
        tcase_add_test(tc, test_ports_format);
        suite_add_tcase(s, tc);

        tc = tcase_create("match");
        tcase_add_test(tc, test_sockaddr_port);
        tcase_add_test(tc, test_bind_address);
        tcase_add_test(tc, test_held_family);
        tcase_add_test(tc, test_match);
        tcase_add_test(tc, test_decoy_address);
        tcase_add_test(tc, test_address_text);
        suite_add_tcase(s, tc);

        tc = tcase_create("preload");
        tcase_add_checked_fixture(tc, scratch_setup, scratch_teardown);
        tcase_add_test(tc, test_relative_path);
        tcase_add_test(tc, test_env_entry);
        tcase_add_test(tc, test_check_program);
        tcase_add_test(tc, test_check_go_program);
        suite_add_tcase(s, tc);

        tc = tcase_create("broker");
        tcase_set_timeout(tc, 30);
        tcase_add_checked_fixture(tc, broker_setup, broker_teardown);
        tcase_add_test(tc, test_broker_env);
        tcase_add_test(tc, test_broker_closes_a_silent_connection);
        tcase_add_test(tc, test_broker_garbage);
        tcase_add_test(tc, test_claim_tcp_both_families);
        tcase_add_test(tc, test_claim_keeps_flags);
        tcase_add_test(tc, test_claim_again_after_close);
        tcase_add_test(tc, test_claim_udp);
        tcase_add_test(tc, test_all_claimed);
        tcase_add_test(tc, test_other_port_is_named);
        tcase_add_test(tc, test_nothing_bound);
        tcase_add_test(tc, test_refused_to_a_stranger);
        tcase_add_test(tc, test_inert_without_broker);
        suite_add_tcase(s, tc);

        tc = tcase_create("readiness");
        tcase_set_timeout(tc, 30);
        tcase_add_checked_fixture(tc, broker_setup, broker_teardown);
        tcase_add_test(tc, test_readiness_met_by_claims);
        tcase_add_test(tc, test_readiness_not_met_by_half);
        tcase_add_test(tc, test_readiness_times_out_naming_the_port);
        suite_add_tcase(s, tc);
        return s;
}

int main(void) {
        return unit_run(intercept_suite());
}
