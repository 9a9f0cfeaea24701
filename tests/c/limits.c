/*
 * Every input bound at its edge and one byte past it: the request, the action name, the
 * canonical arguments (refused with INVALID_INPUT naming the limit, nothing written), the
 * result (stored as an excerpt with its SHA-256 past its bound: the effect still commits) and
 * the outcome message (cut and marked past its bound: the outcome is still recorded).
 */
#include "common.h"

static const char LIMITS[] = "{\"environment\":\"production\",\"limits\":{\"max_request_bytes\":600,"
                             "\"max_name_bytes\":13,\"max_arguments_bytes\":120,\"max_result_bytes\":64,"
                             "\"max_message_bytes\":32}}";

/* A request for stripe.refund whose payment_id is `pad` characters long, padded so that the
   whole request is exactly `total` bytes (0: no padding field). */
static size_t request(char *dst, size_t cap, const char *name, size_t pad, size_t total) {
    char id[512];
    CHECK(pad < sizeof id);
    memset(id, 'p', pad);
    id[pad] = '\0';
    int n = snprintf(dst, cap,
                     "{\"name\":\"%s\",\"arguments\":{\"payment_id\":\"%s\",\"amount\":1},"
                     "\"principal\":{\"agent\":\"a\",\"user\":null},\"resource\":\"",
                     name, id);
    CHECK(n > 0 && (size_t)n < cap);
    size_t len = (size_t)n;
    size_t tail = strlen("\"}");
    if (total == 0) {
        total = len + 1 + tail; /* a one-character resource */
    }
    CHECK(total > len + tail && total < cap);
    memset(dst + len, 'r', total - len - tail);
    len = total - tail;
    memcpy(dst + len, "\"}", tail + 1);
    return len + tail;
}

static warden_handle *open_limited(const char *dir) {
    warden_handle *seed = open_with_policy(dir); /* writes warden.yaml */
    warden_close(seed);
    char store[4096], config[4096];
    CHECK((size_t)snprintf(store, sizeof store, "%s/state.redb", dir) < sizeof store);
    CHECK((size_t)snprintf(config, sizeof config, "%s/warden.yaml", dir) < sizeof config);
    warden_handle *h = NULL;
    warden_buf err = NO_BUF;
    EXPECT(warden_open(STR(store), STR(config), LIT(LIMITS), &h, &err), WARDEN_RESULT_OK, &err);
    return h;
}

static void expect_limit(warden_result got, warden_buf *err, const char *limit) {
    EXPECT(got, WARDEN_RESULT_INVALID_INPUT, err);
    if (!buf_contains(err, limit)) {
        fprintf(stderr, "expected %s in: %.*s\n", limit, (int)err->len, (const char *)err->ptr);
    }
    CHECK(buf_contains(err, limit));
    reset(err);
}

int main(int argc, char **argv) {
    CHECK(argc == 2);
    warden_handle *h = open_limited(argv[1]);
    warden_buf err = NO_BUF;
    char text[1024];
    warden_permit *p = NULL;

    /* The name: 13 bytes pass (stripe.refund), 14 do not, and the name is not echoed. */
    size_t len = request(text, sizeof text, "stripe.refundx", 4, 0);
    expect_limit(warden_propose(h, (const uint8_t *)text, len, &p, &err), &err, "max_name_bytes");

    /* The request: exactly 600 bytes pass the request bound, 601 do not. */
    len = request(text, sizeof text, "stripe.refund", 4, 601);
    expect_limit(warden_propose(h, (const uint8_t *)text, len, &p, &err), &err, "max_request_bytes");

    /* The arguments: {"amount":1,"payment_id":"…"} is 28 bytes plus the id. */
    len = request(text, sizeof text, "stripe.refund", 120 - 28 + 1, 0);
    expect_limit(warden_propose(h, (const uint8_t *)text, len, &p, &err), &err, "max_arguments_bytes");
    len = request(text, sizeof text, "stripe.refund", 120 - 28, 600);
    EXPECT(warden_propose(h, (const uint8_t *)text, len, &p, &err), WARDEN_RESULT_OK, &err);

    /* A result one byte over its bound: stored as an excerpt, and the effect commits. */
    char result[128];
    memset(result, 0, sizeof result);
    result[0] = '"';
    memset(result + 1, 'x', 63);
    result[64] = '"'; /* 65 bytes of JSON */
    EXPECT(warden_permit_commit(p, (const uint8_t *)result, 65, &err), WARDEN_RESULT_OK, &err);
    warden_permit_free(p);

    /* A result exactly at its bound is stored whole. */
    len = request(text, sizeof text, "stripe.refund", 5, 0);
    EXPECT(warden_propose(h, (const uint8_t *)text, len, &p, &err), WARDEN_RESULT_OK, &err);
    result[63] = '"'; /* 64 bytes */
    EXPECT(warden_permit_commit(p, (const uint8_t *)result, 64, &err), WARDEN_RESULT_OK, &err);
    warden_permit_free(p);

    /* A message past its bound is cut and marked; the outcome is recorded. */
    len = request(text, sizeof text, "stripe.refund", 6, 0);
    EXPECT(warden_propose(h, (const uint8_t *)text, len, &p, &err), WARDEN_RESULT_OK, &err);
    EXPECT(warden_permit_not_executed(p, LIT("declined: the card issuer refused the charge outright"), &err),
           WARDEN_RESULT_OK, &err);
    warden_permit_free(p);

    warden_buf receipts = NO_BUF;
    EXPECT(warden_receipts_list(h, 1, 0, &receipts, &err), WARDEN_RESULT_OK, &err);
    if (!buf_contains(&receipts, "\"bytes\":65")) {
        fprintf(stderr, "receipts: %.*s\n", (int)receipts.len, (const char *)receipts.ptr);
    }
    CHECK(buf_contains(&receipts, "\"warden_result\":\"truncated\""));
    CHECK(buf_contains(&receipts, "\"bytes\":65"));
    CHECK(buf_contains(&receipts, "\"sha256\":\"sha256:"));
    CHECK(buf_contains(&receipts, "[cut: 53 bytes in all]"));
    CHECK(!buf_contains(&receipts, "stripe.refundx"));
    warden_buf_free(receipts);

    /* Limits themselves are checked when the store is opened. */
    warden_handle *bad = NULL;
    EXPECT(warden_open(LIT("/nonexistent/x.redb"), NULL, 0, LIT("{\"limits\":{\"max_name_bytes\":0}}"), &bad, &err),
           WARDEN_RESULT_INVALID_INPUT, &err);
    CHECK(buf_contains(&err, "max_name_bytes"));
    reset(&err);

    warden_close(h);
    printf("limits: ok\n");
    return 0;
}
