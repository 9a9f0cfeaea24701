/*
 * Helpers shared by the C tests of warden.h. Each program takes one argument, a scratch
 * directory, and exits 0 only when every check held.
 */
#ifndef WARDEN_TEST_COMMON_H
#define WARDEN_TEST_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "warden.h"

/* A string literal as a (ptr, len) argument pair. */
#define LIT(s) (const uint8_t *)(s), (sizeof(s) - 1)
/* A NUL-terminated runtime string as a (ptr, len) argument pair. */
#define STR(s) (const uint8_t *)(s), strlen(s)

#define CHECK(cond)                                                                        \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);       \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

/* Checks a call's code; on a mismatch prints both names and the error object. */
#define EXPECT(call, want, err) expect_code((call), (want), (err), #call, __LINE__)

static const warden_buf NO_BUF = {NULL, 0};

static inline void expect_code(warden_result got, warden_result want, const warden_buf *err, const char *what,
                               int line) {
    if (got == want) {
        return;
    }
    fprintf(stderr, "line %d: %s returned %s, expected %s\n", line, what, warden_result_name(got),
            warden_result_name(want));
    if (err != NULL && err->ptr != NULL) {
        fprintf(stderr, "error object: %.*s\n", (int)err->len, (const char *)err->ptr);
    }
    exit(1);
}

/* Whether the buffer's bytes contain `needle` (reading only ptr[0..len]). */
static inline int buf_contains(const warden_buf *buf, const char *needle) {
    size_t n = strlen(needle);
    if (buf->ptr == NULL || n > buf->len) {
        return 0;
    }
    for (size_t i = 0; i + n <= buf->len; i++) {
        if (memcmp(buf->ptr + i, needle, n) == 0) {
            return 1;
        }
    }
    return 0;
}

/* Copies the string value of `"field":"…"` in compact JSON into dst; 1 on success. */
static inline int json_string_field(const warden_buf *buf, const char *field, char *dst, size_t cap) {
    char pattern[128];
    size_t n = (size_t)snprintf(pattern, sizeof pattern, "\"%s\":\"", field);
    if (buf->ptr == NULL || n >= sizeof pattern) {
        return 0;
    }
    for (size_t i = 0; i + n <= buf->len; i++) {
        if (memcmp(buf->ptr + i, pattern, n) == 0) {
            size_t start = i + n, end = start;
            while (end < buf->len && buf->ptr[end] != '"') {
                end++;
            }
            if (end == buf->len || end - start + 1 > cap) {
                return 0;
            }
            memcpy(dst, buf->ptr + start, end - start);
            dst[end - start] = '\0';
            return 1;
        }
    }
    return 0;
}

/* Frees an error object, if any, and resets it for the next call. */
static inline void reset(warden_buf *buf) {
    warden_buf_free(*buf);
    *buf = NO_BUF;
}

/* The refund policy: allow up to 50000, ask a human up to 500000, deny above. */
static const char POLICY[] =
    "schema: warden/v1\n"
    "environment: production\n"
    "actions:\n"
    "  customer.read:\n"
    "    decision: allow\n"
    "  stripe.refund:\n"
    "    effect: \"refund:{payment_id}\"\n"
    "    max_attempts: 3\n"
    "    lease: PT5M\n"
    "    rules:\n"
    "      - when: { amount_gte: 0, amount_lte: 50000 }\n"
    "        decision: allow\n"
    "      - when: { amount_gte: 0, amount_lte: 500000 }\n"
    "        decision: approve\n"
    "      - decision: deny\n";

static const char OPTIONS[] = "{\"environment\":\"production\"}";

/* Writes `document` into `dir` and opens `dir`/state.redb under it. */
static inline warden_handle *open_with_document(const char *dir, const char *document) {
    char store[4096], config[4096];
    CHECK((size_t)snprintf(store, sizeof store, "%s/state.redb", dir) < sizeof store);
    CHECK((size_t)snprintf(config, sizeof config, "%s/warden.yaml", dir) < sizeof config);
    FILE *file = fopen(config, "w");
    CHECK(file != NULL);
    CHECK(fputs(document, file) >= 0);
    CHECK(fclose(file) == 0);
    warden_handle *h = NULL;
    warden_buf err = NO_BUF;
    EXPECT(warden_open(STR(store), STR(config), LIT(OPTIONS), &h, &err), WARDEN_RESULT_OK, &err);
    CHECK(h != NULL);
    CHECK(err.ptr == NULL);
    return h;
}

/* Writes the policy into `dir` and opens `dir`/state.redb under it. */
static inline warden_handle *open_with_policy(const char *dir) { return open_with_document(dir, POLICY); }

#endif /* WARDEN_TEST_COMMON_H */
