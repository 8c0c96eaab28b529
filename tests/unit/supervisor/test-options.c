/* SPDX-License-Identifier: MIT */
/* The one option table (options.c), walked: every option is in getopt's
 * table and --help, in the man page (PREBIND_MAN_PAGE, the scdoc source),
 * and has its place for --share: an option of the server's changes the
 * description two callers must agree on (config_describe()), a caller's
 * own does not. A new option must get an example here, or this fails. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "options.h"
#include "unit.h"

/* What each option adds to "--share=x ... -- srv", and what it is
 * compared with (what the option needs besides, without it). NULL for
 * the options --share refuses or that are no server's at all. */
struct example {
        const char *name;
        const char *with, *without;
};

static const struct example examples[] = {
        { "listen", "-l 127.0.0.1:1234", "" },
        { "backlog", "--backlog=16", "" },
        { "reuseport", "--reuseport", "" },
        { "v6only", "--v6only", "" },
        { "socket-mode", "-l /tmp/prebind-unit.sock --socket-mode=0600", "-l /tmp/prebind-unit.sock" },
        { "print", "--print=json", "" },
        { "port-file", "--port-file=/tmp/prebind-unit-port", "" },
        { "port-fd", "--port-fd=", "" }, /* and an open fd of the test's */
        { "format", "--format=url", "" },
        { "setenv", "-E A=1", "" },
        { "subst", "--subst", "" },
        { "exec", NULL, NULL },
        { "ready", "--ready", "" },
        { "ready-log", "--ready-log=up", "" },
        { "ready-exec", "--ready-exec=true", "" },
        { "ready-http", "--ready-http", "" },
        { "ready-interval", "--ready-http --ready-interval=1s", "--ready-http" },
        { "ready-timeout", "--ready --ready-timeout=5s", "--ready" },
        { "restart", "--restart=always", "" },
        { "restart-delay", "--restart=always --restart-delay=1s", "--restart=always" },
        { "restart-limit", "--restart=always --restart-limit=2/10s", "--restart=always" },
        { "reload", "--ready --reload=overlap", "--ready" },
        { "watch", "--watch=/etc", "" },
        { "watch-delay", "--watch=/etc --watch-delay=1s", "--watch=/etc" },
        { "watch-ignore", "--watch=/etc --watch-ignore=*.log", "--watch=/etc" },
        { "accept", NULL, NULL },
        { "max-connections", "--netns --intercept=80 --max-connections=8", "--netns --intercept=80" },
        { "inetd", NULL, NULL },
        { "intercept", "--intercept=80", "" },
        { "intercept-via", "--intercept=80 --intercept-via=seccomp", "--intercept=80" },
        { "netns", "--netns", "" },
        { "group", "--group", "" },
        { "kill-after", "--kill-after=5s", "" },
        { "die-with-parent", "--die-with-parent", "" },
        { "no-die-with-supervisor", "--no-die-with-supervisor", "" },
        { "subreaper", "--subreaper", "" },
        { "success-status", "--success-status=143", "" },
        { "share", NULL, NULL },
        { "share-linger", "--share-linger=5s", "" },
        { "status", NULL, NULL },
        { "stop", NULL, NULL },
        { "quiet", "-q", "" },
        { "verbose", "-v", "" },
        { "help", NULL, NULL },
        { "version", NULL, NULL },
};

static const struct example *example_of(const char *name) {
        for (size_t i = 0; i < ARRAY_SIZE(examples); i++)
                if (strcmp(examples[i].name, name) == 0)
                        return &examples[i];
        return NULL;
}

/* The description of "prebind --share=x WORDS -- srv", freed by the caller. */
static char *describe_words(const char *words) {
        char copy[256], *argv[32], *save = NULL, *text = NULL;
        int argc = 0;
        struct config c;

        snprintf(copy, sizeof copy, "%s", words);
        argv[argc++] = (char *) "prebind";
        argv[argc++] = (char *) "--share=x";
        for (char *w = strtok_r(copy, " ", &save); w; w = strtok_r(NULL, " ", &save))
                argv[argc++] = w;
        argv[argc++] = (char *) "--";
        argv[argc++] = (char *) "srv";
        argv[argc] = NULL;
        ck_assert_msg(config_parse_argv(argc, argv, &c) == 1, "'%s' is refused", words);
        ck_assert_int_eq(config_describe(&c, &text), 0);
        config_done(&c);
        return text;
}

START_TEST(test_every_option_once_in_getopts_table) {
        const struct option *table = options_getopt_table();
        const char *optstring = options_optstring();

        for (size_t i = 0; i < n_option_defs; i++) {
                const struct option_def *o = &option_defs[i];

                ck_assert_str_eq(table[i].name, o->name);
                ck_assert_int_eq(table[i].val, o->key);
                for (size_t j = i + 1; j < n_option_defs; j++) {
                        ck_assert_str_ne(o->name, option_defs[j].name);
                        ck_assert_int_ne(o->key, option_defs[j].key);
                }
                if (o->key < 0x100)
                        ck_assert_ptr_nonnull(strchr(optstring, o->key));
                /* A caller's own, or the server's: not both. */
                ck_assert(!((o->flags & OPTION_IDENTITY) && (o->flags & OPTION_CALLER)));
        }
        ck_assert_ptr_null(table[n_option_defs].name);
        ck_assert_str_eq(optstring, "+:l:E:qvh");
}
END_TEST

START_TEST(test_every_option_in_help_and_the_man_page) {
        const char *man_path = getenv("PREBIND_MAN_PAGE");
        char *help = NULL, *man = NULL, word[128];
        size_t help_size = 0, man_size = 0;
        FILE *f = open_memstream(&help, &help_size);

        ck_assert_ptr_nonnull(f);
        options_help(f, "prebind");
        ck_assert_int_eq(fclose(f), 0);
        ck_assert_ptr_nonnull(man_path);
        f = fopen(man_path, "r");
        ck_assert_msg(f != NULL, "cannot read the man page at '%s'", man_path);
        ck_assert_int_ge(getdelim(&man, &man_size, '\0', f), 1000);
        fclose(f);
        for (size_t i = 0; i < n_option_defs; i++) {
                const struct option_def *o = &option_defs[i];

                snprintf(word, sizeof word, "--%s", o->name);
                ck_assert_msg(strstr(help, word), "--help has no %s", word);
                if (o->key < 0x100) {
                        snprintf(word, sizeof word, "-%c, --%s", o->key, o->name);
                        ck_assert_msg(strstr(help, word), "--help has no '%s'", word);
                }
                snprintf(word, sizeof word, "*--%s*", o->name);
                ck_assert_msg(strstr(man, word), "the man page has no %s", word);
        }
        free(help);
        free(man);
}
END_TEST

/* --share: the server's options tell servers apart, a caller's do not. */
START_TEST(test_every_option_has_its_place_for_share) {
        int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);

        ck_assert_int_ge(fd, 3);
        for (size_t i = 0; i < n_option_defs; i++) {
                const struct option_def *o = &option_defs[i];
                const struct example *e = example_of(o->name);
                char *with, *without, words[64];

                ck_assert_msg(e != NULL, "--%s: no example in test-options.c", o->name);
                if (!(o->flags & (OPTION_IDENTITY | OPTION_CALLER))) {
                        ck_assert_msg(e->with == NULL, "--%s: neither the server's nor a caller's", o->name);
                        continue;
                }
                ck_assert_msg(e->with != NULL, "--%s: no example", o->name);
                if (strcmp(o->name, "port-fd") == 0)
                        snprintf(words, sizeof words, "%s%d", e->with, fd);
                else
                        snprintf(words, sizeof words, "%s", e->with);
                with = describe_words(words);
                without = describe_words(e->without);
                if (o->flags & OPTION_IDENTITY)
                        ck_assert_msg(strcmp(with, without) != 0, "--%s is the server's, yet not described: %s",
                                      o->name, with);
                else
                        ck_assert_msg(strcmp(with, without) == 0, "--%s is each caller's own, yet described: %s",
                                      o->name, with);
                free(with);
                free(without);
        }
        close(fd);
}
END_TEST

int main(void) {
        Suite *s = suite_create("options");
        TCase *table = tcase_create("table");

        tcase_add_test(table, test_every_option_once_in_getopts_table);
        tcase_add_test(table, test_every_option_in_help_and_the_man_page);
        tcase_add_test(table, test_every_option_has_its_place_for_share);
        suite_add_tcase(s, table);
        return unit_run(s);
}
