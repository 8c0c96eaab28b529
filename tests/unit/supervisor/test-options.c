/* SPDX-License-Identifier: MIT */
/* The one option table (options.c), walked: every option is in getopt's
 * table and --help, in the man page (PREBIND_MAN_PAGE, the scdoc source),
 * in the bash completion made from the table (PREBIND_COMPLETION), and
 * has its place for --share: an option of the server's changes the
 * description two callers must agree on (config_describe()), so a caller
 * that differs by it is refused, a caller's own does not; and the rules
 * between options (options_conflict()) are each kept. A new option must
 * get an example here, or this fails. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "options.h"
#include "unit-describe.h"
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

/* The description of "prebind --share=x WORDS -- srv" (words split at
 * spaces), freed by the caller; NULL when it is refused. */
static char *describe_words(const char *before, const char *words) {
        struct unit_argv a = {};

        unit_argv_add_words(&a, "prebind --share=x");
        unit_argv_add_words(&a, before);
        unit_argv_add_words(&a, words);
        unit_argv_add_words(&a, "-- srv");
        return unit_describe(&a);
}

static char *describe_accepted(const char *before, const char *words) {
        char *text = describe_words(before, words);

        ck_assert_msg(text != NULL, "'%s %s' is refused", before, words);
        return text;
}

/* The whole of the file at the path in the variable name, freed by the
 * caller. */
static char *read_file_of(const char *name) {
        const char *path = getenv(name);
        char *text = NULL;
        size_t size = 0;
        FILE *f;

        ck_assert_msg(path != NULL, "%s is not set (meson test sets it)", name);
        f = fopen(path, "re");
        ck_assert_msg(f != NULL, "cannot read '%s'", path);
        ck_assert_int_ge(getdelim(&text, &size, '\0', f), 1000);
        fclose(f);
        return text;
}

/* Whether the bash array assigned on a line "array=(...)" of script has
 * word among its words. */
static bool in_bash_array(const char *script, const char *array, const char *word) {
        char start[64];
        const char *line, *end;
        size_t len = strlen(word);

        snprintf(start, sizeof start, "\n%s=(", array);
        line = strstr(script, start);
        ck_assert_msg(line != NULL, "the completion has no %s", array);
        line += strlen(start);
        end = strchr(line, ')');
        ck_assert_ptr_nonnull(end);
        for (const char *p = line; p < end; p += strcspn(p, " )"), p += *p == ' ')
                if (strncmp(p, word, len) == 0 && (p[len] == ' ' || p[len] == ')'))
                        return true;
        return false;
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
        char *help = NULL, *man = read_file_of("PREBIND_MAN_PAGE"), word[128];
        size_t help_size = 0;
        FILE *f = open_memstream(&help, &help_size);

        ck_assert_ptr_nonnull(f);
        options_help(f, "prebind");
        ck_assert_int_eq(fclose(f), 0);
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

/* The completion offers each option as it is taken (a value after it or
 * not), and each word it offers as a value is one the option takes. */
START_TEST(test_every_option_in_the_completion) {
        static const char *const arrays[] = {
                [no_argument] = "_prebind_opts_no_arg",
                [required_argument] = "_prebind_opts_with_arg",
                [optional_argument] = "_prebind_opts_optional_arg",
        };
        char *script = read_file_of("PREBIND_COMPLETION"), word[128];

        for (size_t i = 0; i < n_option_defs; i++) {
                const struct option_def *o = &option_defs[i];

                snprintf(word, sizeof word, "--%s", o->name);
                for (int has_arg = no_argument; has_arg <= optional_argument; has_arg++)
                        ck_assert_msg(in_bash_array(script, arrays[has_arg], word) == (o->has_arg == has_arg),
                                      "%s in the completion's %s: %d", word, arrays[has_arg], o->has_arg != has_arg);
                snprintf(word, sizeof word, "-%c", o->key);
                ck_assert(in_bash_array(script, "_prebind_short_opts", word) == (o->key < 0x100));
                ck_assert((o->value == VALUE_WORDS) == (o->words != NULL));
                ck_assert(o->value == VALUE_ANY || o->has_arg != no_argument);
                if (o->value != VALUE_WORDS)
                        continue;
                snprintf(word, sizeof word, "[--%s]='words:%s'", o->name, o->words);
                ck_assert_msg(strstr(script, word), "the completion has no %s", word);
                for (const char *w = o->words; *w; w += strcspn(w, " "), w += *w == ' ') {
                        char *text;

                        /* In a company where the value goes: readiness
                         * for --reload=overlap, --netns for
                         * --intercept-via=forward. */
                        snprintf(word, sizeof word, "--%s=%.*s", o->name, (int) strcspn(w, " "), w);
                        text = describe_words("--ready", word) ?: describe_words("--ready --netns", word);
                        ck_assert_msg(text != NULL, "the completion offers '%s', which is refused", word);
                        free(text);
                }
        }
        free(script);
}
END_TEST

/* Each rule between options, as options_conflict() tells it from the
 * options given (config_parse_argv() prints its message). */
START_TEST(test_every_rule_between_options) {
        for (size_t i = 0; i < n_option_defs; i++) {
                const struct option_def *o = &option_defs[i];
                option_set self = (option_set) 1 << i;
                char name[64];

                snprintf(name, sizeof name, "--%s", o->name);
                for (const struct option_rule *rule = o->conflicts; rule && rule->with; rule++) {
                        ck_assert_msg(strstr(rule->message, name), "%s's rule does not name it: %s", name,
                                      rule->message);
                        if (rule->needs)
                                ck_assert_str_eq(options_conflict(self), rule->message);
                        for (const int *k = rule->with; *k; k++) {
                                int j = options_index(*k);

                                ck_assert_int_ge(j, 0);
                                ck_assert_int_ne(j, (int) i);
                                if (rule->needs)
                                        ck_assert_ptr_null(options_conflict(self | (option_set) 1 << j));
                                else
                                        ck_assert_ptr_nonnull(options_conflict(self | (option_set) 1 << j));
                        }
                }
                /* Alone, an option breaks only a rule that needs another. */
                if (!o->conflicts || !o->conflicts[0].needs)
                        ck_assert_ptr_null(options_conflict(self));
        }
        ck_assert_int_eq(options_index(':'), -1);
        ck_assert_int_eq(options_index('?'), -1);
}
END_TEST

/* The default socket (no -l), spelled as a caller may. */
static const char *const default_socket[] = {
        "-l 0", "-l 127.0.0.1:0", "-l tcp:127.0.0.1:0", "--listen=localhost:0", "-l0",
};

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
                with = describe_accepted("", words);
                without = describe_accepted("", e->without);
                /* share/ refuses a caller whose description is not the
                 * server's. */
                if (o->flags & OPTION_IDENTITY)
                        ck_assert_msg(strcmp(with, without) != 0,
                                      "--%s is the server's, yet a caller that differs by it would attach: %s",
                                      o->name, with);
                else
                        ck_assert_msg(strcmp(with, without) == 0,
                                      "--%s is each caller's own, yet a caller that differs by it is refused: %s",
                                      o->name, with);
                /* The default socket, however it is spelled, is one:
                 * with each option, a caller that spells it otherwise
                 * attaches. */
                for (size_t k = 0; k < ARRAY_SIZE(default_socket) && !strstr(words, "-l "); k++) {
                        char *spelled = describe_accepted(default_socket[k], words);

                        ck_assert_msg(strcmp(spelled, with) == 0, "--%s: '%s' is another socket: %s", o->name,
                                      default_socket[k], spelled);
                        free(spelled);
                }
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
        tcase_add_test(table, test_every_option_in_the_completion);
        tcase_add_test(table, test_every_rule_between_options);
        tcase_add_test(table, test_every_option_has_its_place_for_share);
        suite_add_tcase(s, table);
        return unit_run(s);
}
