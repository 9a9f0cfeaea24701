/*
 * The shared result vectors (tests/vectors/results.json) from C: every result handed to
 * warden_permit_commit (or _commit_text) commits, stored whole or marked with why; a permit
 * cancelled before its function ran records NOT_EXECUTED. tests/c_abi.rs reads the vectors and
 * passes each case as five arguments: name, how (json, text or cancel), the expected state,
 * the expected storage (whole, a warden_result tag, or -) and a file holding the bytes.
 */
#include "common.h"

static char *slurp(const char *path, size_t *len) {
    FILE *file = fopen(path, "rb");
    CHECK(file != NULL);
    CHECK(fseek(file, 0, SEEK_END) == 0);
    long size = ftell(file);
    CHECK(size >= 0);
    CHECK(fseek(file, 0, SEEK_SET) == 0);
    char *bytes = malloc((size_t)size + 1);
    CHECK(bytes != NULL);
    CHECK(fread(bytes, 1, (size_t)size, file) == (size_t)size);
    CHECK(fclose(file) == 0);
    bytes[size] = '\0';
    *len = (size_t)size;
    return bytes;
}

static void run_case(warden_handle *h, char **arg) {
    const char *name = arg[0], *how = arg[1], *state = arg[2], *stored = arg[3];
    size_t len = 0;
    char *payload = slurp(arg[4], &len);
    char request[512], key[256], expected[4096];
    CHECK((size_t)snprintf(request, sizeof request,
                           "{\"name\":\"stripe.refund\",\"arguments\":{\"payment_id\":\"vec_%s\",\"amount\":1},"
                           "\"principal\":{\"agent\":\"refund-agent\",\"user\":\"ada\"}}",
                           name) < sizeof request);
    CHECK((size_t)snprintf(key, sizeof key, "refund:vec_%s", name) < sizeof key);
    warden_buf err = NO_BUF;
    warden_permit *p = NULL;
    EXPECT(warden_propose(h, STR(request), &p, &err), WARDEN_RESULT_OK, &err);
    if (strcmp(how, "json") == 0) {
        EXPECT(warden_permit_commit(p, (const uint8_t *)payload, len, &err), WARDEN_RESULT_OK, &err);
    } else if (strcmp(how, "text") == 0) {
        EXPECT(warden_permit_commit_text(p, (const uint8_t *)payload, len, &err), WARDEN_RESULT_OK, &err);
    } else {
        CHECK(strcmp(how, "cancel") == 0);
        EXPECT(warden_permit_cancel(p, &err), WARDEN_RESULT_OK, &err);
    }
    warden_permit_free(p);

    warden_buf effect = NO_BUF;
    EXPECT(warden_effect_get(h, STR(key), &effect, &err), WARDEN_RESULT_OK, &err);
    CHECK((size_t)snprintf(expected, sizeof expected, "\"state\":\"%s\"", state) < sizeof expected);
    if (!buf_contains(&effect, expected)) {
        fprintf(stderr, "%s: expected %s in %.*s\n", name, expected, (int)(effect.len > 400 ? 400 : effect.len),
                (const char *)effect.ptr);
    }
    CHECK(buf_contains(&effect, expected));
    if (strcmp(stored, "whole") == 0) {
        /* The canonical text handed over reads back as itself. */
        char *whole = malloc(len + 16);
        CHECK(whole != NULL);
        memcpy(whole, "\"result\":", 9);
        memcpy(whole + 9, payload, len);
        whole[9 + len] = '\0';
        CHECK(buf_contains(&effect, whole));
        free(whole);
    } else if (strcmp(stored, "-") == 0) {
        /* The message is the payload. */
        CHECK((size_t)snprintf(expected, sizeof expected, "\"error\":\"%s\"", payload) < sizeof expected);
        CHECK(buf_contains(&effect, expected));
    } else {
        CHECK((size_t)snprintf(expected, sizeof expected, "\"warden_result\":\"%s\"", stored) < sizeof expected);
        if (!buf_contains(&effect, expected)) {
            fprintf(stderr, "%s: expected %s in %.*s\n", name, expected, (int)(effect.len > 400 ? 400 : effect.len),
                    (const char *)effect.ptr);
        }
        CHECK(buf_contains(&effect, expected));
        CHECK((size_t)snprintf(expected, sizeof expected, "\"bytes\":%zu", len) < sizeof expected);
        CHECK(buf_contains(&effect, expected));
        CHECK(buf_contains(&effect, "\"sha256\":\"sha256:"));
    }
    warden_buf_free(effect);
    free(payload);
}

int main(int argc, char **argv) {
    CHECK(argc >= 2 && (argc - 2) % 5 == 0);
    warden_handle *h = open_with_policy(argv[1]);
    int cases = 0;
    for (int i = 2; i + 5 <= argc; i += 5) {
        run_case(h, argv + i);
        cases++;
    }
    CHECK(cases >= 10);
    warden_close(h);
    printf("results: ok (%d cases)\n", cases);
    return 0;
}
