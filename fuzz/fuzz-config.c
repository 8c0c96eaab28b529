/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the command line, config_parse_argv(). The input is
 * split on NUL bytes into arguments after "prebind", so every option,
 * every value and every order can be tried. What a parse that succeeds
 * returns must be consistent: COMMAND within argv, at least one socket,
 * the values within their documented ranges. (Run with
 * -close_fd_mask=3: usage errors go to stderr, --help to stdout.) */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "fuzz.h"

#define MAX_ARGS 256

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *copy = malloc(size + 1), *argv[MAX_ARGS + 2];
        struct config c;
        int argc = 0, r;

        if (!copy)
                abort();
        memcpy(copy, data, size);
        copy[size] = '\0';
        argv[argc++] = (char *) "prebind";
        for (char *p = copy; p <= copy + size && argc <= MAX_ARGS; p += strlen(p) + 1)
                argv[argc++] = p;
        argv[argc] = NULL;

        memset(&c, 0x5a, sizeof c);
        r = config_parse_argv(argc, argv, &c);
        if (r == 1) {
                if (c.command < argv + 1 || c.command >= argv + argc || !c.command[0])
                        FUZZ_FAIL("COMMAND is not in argv");
                if (c.n_listens == 0 || !c.listens)
                        FUZZ_FAIL("no socket to listen on");
                if (c.socket_options.backlog < 1 || c.socket_options.socket_mode > 0777 || c.publish.port_fd < -1 ||
                    (c.publish.port_fd >= 0 && c.publish.port_fd <= 2))
                        FUZZ_FAIL("a value out of range");
                if (c.publish.format < 0 || c.publish.format >= _FORMAT_MAX || c.publish.print_format < 0 ||
                    c.publish.print_format >= _FORMAT_MAX)
                        FUZZ_FAIL("an unknown format");
                if (c.max_connections < 1 || c.kill_after_usec > 30 * 86400 * USEC_PER_SEC)
                        FUZZ_FAIL("a value out of range");
                if (c.exec && (c.accept || c.restart_set || c.ready.notify || c.group || c.kill_after_usec ||
                               c.die_with_parent || c.subreaper))
                        FUZZ_FAIL("--exec with an option that needs the supervisor");
                if (c.accept && (c.ready.notify || c.restart_set))
                        FUZZ_FAIL("--accept with --ready or --restart");
                for (size_t i = 0; i < c.n_setenv; i++)
                        if (!c.setenv[i] || c.setenv[i][0] == '=' || c.setenv[i][0] == '\0')
                                FUZZ_FAIL("-E without a name");
                config_done(&c);
        } else if (r < 0 && r != -EINVAL && r != -ENOMEM) {
                FUZZ_FAIL("unexpected error %d", r);
        }
        free(copy);
        return 0;
}
