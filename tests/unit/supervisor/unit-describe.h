/* SPDX-License-Identifier: MIT */
/* What test-describe and test-options share: a command line through
 * config_parse_argv() and config_describe(). */
#pragma once

#include "config.h"
#include "unit.h"

/* The description two --share callers compare (share/ refuses a caller
 * whose text is not the server's) of the command line a->argv, freed by
 * the caller; NULL when config_parse_argv() refuses it. */
static inline char *unit_describe(struct unit_argv *a) {
        struct config c;
        char *text = NULL;

        if (config_parse_argv(a->argc, a->argv, &c) != 1)
                return NULL;
        ck_assert_int_eq(config_describe(&c, &text), 0);
        config_done(&c);
        return text;
}
