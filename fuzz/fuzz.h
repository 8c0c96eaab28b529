/* SPDX-License-Identifier: MIT */
/* What the libFuzzer targets share. */
#pragma once

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A broken promise is a crash, so that libFuzzer keeps the input. */
#define FUZZ_FAIL(...)                                                                                                \
        do {                                                                                                          \
                fprintf(stderr, "fuzz: " __VA_ARGS__);                                                                \
                fputc('\n', stderr);                                                                                  \
                abort();                                                                                              \
        } while (0)

/* The input as a C string, cut at the first NUL, in a buffer of exactly
 * its size, so that AddressSanitizer sees any read past the end. */
static inline char *fuzz_string(const uint8_t *data, size_t size) {
        size_t len = strnlen((const char *) data, size);
        char *s = malloc(len + 1);

        if (!s)
                abort();
        memcpy(s, data, len);
        s[len] = '\0';
        return s;
}
