/* SPDX-License-Identifier: MIT */
/* Writes the bash completion: the template (argv[1]) with its @OPTIONS@
 * line replaced by prebind's options as bash arrays, made from the option
 * table (options.c), so that the completion offers each option the
 * program takes, and no other. Built for the build machine and run by
 * meson at build time. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"

/* The long options whose argument is has_arg, each "--name". */
static void put_long_options(const char *array, int has_arg) {
        printf("%s=(", array);
        for (size_t i = 0, n = 0; i < n_option_defs; i++)
                if (option_defs[i].has_arg == has_arg)
                        printf("%s--%s", n++ ? " " : "", option_defs[i].name);
        printf(")\n");
}

static void put_options(void) {
        printf("# Made from prebind's option table (src/supervisor/options.c).\n"
               "# Long options that take a value (\"=\" attached, or as the next word).\n");
        put_long_options("_prebind_opts_with_arg", required_argument);
        printf("# Long options whose value is optional and must be attached with \"=\".\n");
        put_long_options("_prebind_opts_optional_arg", optional_argument);
        put_long_options("_prebind_opts_no_arg", no_argument);
        printf("_prebind_short_opts=(");
        for (size_t i = 0, n = 0; i < n_option_defs; i++)
                if (option_defs[i].key < 0x100)
                        printf("%s-%c", n++ ? " " : "", option_defs[i].key);
        printf(")\n# Short options that take a value (in a cluster: the rest of it), and their long names.\n"
               "_prebind_short_with_arg=");
        for (size_t i = 0; i < n_option_defs; i++)
                if (option_defs[i].key < 0x100 && option_defs[i].has_arg == required_argument)
                        putchar(option_defs[i].key);
        /* -g: the completion is sourced inside a function of
         * bash-completion's, where declare alone makes a local. */
        printf("\ndeclare -gA _prebind_long_of=(");
        for (size_t i = 0, n = 0; i < n_option_defs; i++)
                if (option_defs[i].key < 0x100 && option_defs[i].has_arg == required_argument)
                        printf("%s[-%c]=--%s", n++ ? " " : "", option_defs[i].key, option_defs[i].name);
        printf(")\n# What a value is: one of some words, a file or a variable's name.\n"
               "declare -gA _prebind_value_of=(\n");
        for (size_t i = 0; i < n_option_defs; i++) {
                const struct option_def *o = &option_defs[i];

                if (o->value == VALUE_WORDS)
                        printf("    [--%s]='words:%s'\n", o->name, o->words);
                else if (o->value == VALUE_FILE)
                        printf("    [--%s]=file\n", o->name);
                else if (o->value == VALUE_VARIABLE)
                        printf("    [--%s]=variable\n", o->name);
        }
        printf(")\n");
}

int main(int argc, char *argv[]) {
        char *line = NULL;
        size_t size = 0;
        int found = 0;
        FILE *template;

        if (argc != 2 || !(template = fopen(argv[1], "re"))) {
                fprintf(stderr, "usage: options-to-bash TEMPLATE (a readable file)\n");
                return EXIT_FAILURE;
        }
        while (getline(&line, &size, template) > 0)
                if (strcmp(line, "@OPTIONS@\n") == 0) {
                        put_options();
                        found++;
                } else
                        fputs(line, stdout);
        free(line);
        fclose(template);
        if (found != 1) {
                fprintf(stderr, "options-to-bash: '%s' has %d @OPTIONS@ lines, not one\n", argv[1], found);
                return EXIT_FAILURE;
        }
        return fflush(stdout) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
