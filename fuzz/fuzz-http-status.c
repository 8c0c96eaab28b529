/* SPDX-License-Identifier: MIT */
/* libFuzzer target: --ready-http's parser of a server's answer,
 * http_response_status(), on any bytes, in a buffer of exactly their
 * size (AddressSanitizer sees any read past the end). Its promises: a
 * status is a three-digit code from 100 to 599 and never an interim 1xx
 * (but 101); and every prefix of the answer is either "need more" or the
 * verdict of the whole, so that an answer read in pieces is judged as one
 * read whole. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "http_attempt.h"

static int parse(const uint8_t *data, size_t len, int *status) {
        char *buf = malloc(len ? len : 1);
        int r;

        if (!buf)
                abort();
        memcpy(buf, data, len);
        r = http_response_status(buf, len, status);
        free(buf);
        return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        int whole = -1, r_whole;

        if (size > HTTP_RESPONSE_MAX)
                size = HTTP_RESPONSE_MAX;
        r_whole = parse(data, size, &whole);
        if (r_whole != 0 && r_whole != -EAGAIN && r_whole != -EBADMSG)
                FUZZ_FAIL("unexpected result %d", r_whole);
        if (r_whole == 0 && (whole < 100 || whole > 599 || (whole < 200 && whole != 101)))
                FUZZ_FAIL("status %d", whole);
        for (size_t k = 0; k < size; k++) {
                int status = -1, r = parse(data, k, &status);

                if (r == -EAGAIN)
                        continue;
                if (r == -EBADMSG && r_whole != -EBADMSG)
                        FUZZ_FAIL("garbage at %zu bytes, but %d whole", k, r_whole);
                if (r == 0 && (r_whole != 0 || status != whole))
                        FUZZ_FAIL("status %d at %zu bytes, but %d (%d) whole", status, k, whole, r_whole);
        }
        return 0;
}
