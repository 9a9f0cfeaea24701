/* A refusal's error object read and freed; every code's name; NULL and bad input; a permit
 * freed without an outcome leaves the effect AMBIGUOUS until a human resolves it. */
#include "common.h"

static const struct {
    warden_result code;
    const char *name;
} CODES[] = {
    {WARDEN_RESULT_OK, "WARDEN_RESULT_OK"},
    {WARDEN_RESULT_DENIED, "WARDEN_RESULT_DENIED"},
    {WARDEN_RESULT_APPROVAL_REQUIRED, "WARDEN_RESULT_APPROVAL_REQUIRED"},
    {WARDEN_RESULT_APPROVAL_MISMATCH, "WARDEN_RESULT_APPROVAL_MISMATCH"},
    {WARDEN_RESULT_DUPLICATE, "WARDEN_RESULT_DUPLICATE"},
    {WARDEN_RESULT_IN_PROGRESS, "WARDEN_RESULT_IN_PROGRESS"},
    {WARDEN_RESULT_AMBIGUOUS, "WARDEN_RESULT_AMBIGUOUS"},
    {WARDEN_RESULT_ATTEMPT_CEILING, "WARDEN_RESULT_ATTEMPT_CEILING"},
    {WARDEN_RESULT_NOT_RESOLVABLE, "WARDEN_RESULT_NOT_RESOLVABLE"},
    {WARDEN_RESULT_LATE_OUTCOME, "WARDEN_RESULT_LATE_OUTCOME"},
    {WARDEN_RESULT_NOT_FOUND, "WARDEN_RESULT_NOT_FOUND"},
    {WARDEN_RESULT_OUT_OF_WINDOW, "WARDEN_RESULT_OUT_OF_WINDOW"},
    {WARDEN_RESULT_AUTHORITY_ESCALATION, "WARDEN_RESULT_AUTHORITY_ESCALATION"},
    {WARDEN_RESULT_INVALID_INPUT, "WARDEN_RESULT_INVALID_INPUT"},
    {WARDEN_RESULT_STORE, "WARDEN_RESULT_STORE"},
    {WARDEN_RESULT_CONFIG, "WARDEN_RESULT_CONFIG"},
    {WARDEN_RESULT_FETCH, "WARDEN_RESULT_FETCH"},
    {WARDEN_RESULT_PANIC, "WARDEN_RESULT_PANIC"},
    {WARDEN_RESULT_POISONED, "WARDEN_RESULT_POISONED"},
    {WARDEN_RESULT_ABI_MISMATCH, "WARDEN_RESULT_ABI_MISMATCH"},
};

int main(int argc, char **argv) {
    CHECK(argc == 2);
    for (size_t i = 0; i < sizeof CODES / sizeof CODES[0]; i++) {
        const char *name = warden_result_name(CODES[i].code);
        CHECK(name != NULL && strcmp(name, CODES[i].name) == 0);
        CHECK((CODES[i].code == 0) || (CODES[i].code >= 100 && CODES[i].code <= 111) ||
              (CODES[i].code >= 200 && CODES[i].code <= 206));
    }
    CHECK(strcmp(warden_result_name(1), "WARDEN_RESULT_UNKNOWN") == 0);
    CHECK(strcmp(warden_result_name(112), "WARDEN_RESULT_UNKNOWN") == 0);
    CHECK(strcmp(warden_result_name(207), "WARDEN_RESULT_UNKNOWN") == 0);
    CHECK(strcmp(warden_result_name(UINT32_MAX), "WARDEN_RESULT_UNKNOWN") == 0);

    /* A NULL required pointer: INVALID_INPUT, and `out` is written only on success. */
    warden_buf err = NO_BUF;
    warden_handle *untouched = (warden_handle *)&err;
    EXPECT(warden_open(NULL, 0, NULL, 0, NULL, 0, &untouched, &err), WARDEN_RESULT_INVALID_INPUT, &err);
    CHECK(untouched == (warden_handle *)&err);
    CHECK(buf_contains(&err, "\"code\":\"WARDEN_RESULT_INVALID_INPUT\""));
    reset(&err);
    warden_close(NULL);
    warden_permit_free(NULL);
    warden_buf_free(NO_BUF);

    warden_handle *h = open_with_policy(argv[1]);

    /* A refusal: read every field of the error object, then free it. */
    warden_permit *p = NULL;
    EXPECT(warden_propose(h, LIT("{\"name\":\"db.drop\",\"arguments\":{},\"principal\":{\"agent\":\"a\"}}"), &p, &err),
           WARDEN_RESULT_DENIED, &err);
    CHECK(p == NULL);
    char code[64], reason[64], message[1024];
    CHECK(json_string_field(&err, "code", code, sizeof code));
    CHECK(strcmp(code, "WARDEN_RESULT_DENIED") == 0);
    CHECK(strcmp(code, warden_result_name(WARDEN_RESULT_DENIED)) == 0);
    CHECK(json_string_field(&err, "reason", reason, sizeof reason));
    CHECK(strcmp(reason, "unknown_action") == 0);
    CHECK(json_string_field(&err, "message", message, sizeof message));
    CHECK(strlen(message) > 0);
    CHECK(buf_contains(&err, "\"refusal\":true"));
    reset(&err);

    /* Invalid UTF-8 and bad JSON are faults, with an error object too. */
    EXPECT(warden_propose(h, LIT("{\"name\":\"\xff\"}"), &p, &err), WARDEN_RESULT_INVALID_INPUT, &err);
    CHECK(buf_contains(&err, "UTF-8"));
    reset(&err);
    EXPECT(warden_propose(h, LIT("{\"name\":"), &p, &err), WARDEN_RESULT_INVALID_INPUT, &err);
    CHECK(buf_contains(&err, "\"refusal\":false"));
    reset(&err);
    EXPECT(warden_propose(h, NULL, 5, &p, &err), WARDEN_RESULT_INVALID_INPUT, &err);
    reset(&err);
    CHECK(p == NULL);

    /* A permit freed without an outcome: AMBIGUOUS, and the retry is refused until resolved. */
    static const char LOST[] = "{\"name\":\"stripe.refund\",\"arguments\":{\"payment_id\":\"pay_c3\",\"amount\":10},"
                               "\"principal\":{\"agent\":\"refund-agent\"}}";
    EXPECT(warden_propose(h, LIT(LOST), &p, &err), WARDEN_RESULT_OK, &err);
    warden_permit_free(p);
    p = NULL;
    EXPECT(warden_propose(h, LIT(LOST), &p, &err), WARDEN_RESULT_AMBIGUOUS, &err);
    CHECK(buf_contains(&err, "\"effect_key\":\"refund:pay_c3\""));
    reset(&err);
    warden_buf resolved = NO_BUF;
    EXPECT(warden_effect_resolve(h, LIT("refund:pay_c3"), LIT("failed"), LIT("ops:bob"), &resolved, &err),
           WARDEN_RESULT_OK, &err);
    CHECK(buf_contains(&resolved, "\"state\":\"failed\""));
    warden_buf_free(resolved);
    EXPECT(warden_propose(h, LIT(LOST), &p, &err), WARDEN_RESULT_OK, &err);
    EXPECT(warden_permit_not_executed(p, LIT("card declined before the call"), &err), WARDEN_RESULT_OK, &err);
    warden_permit_free(p);

    /* The pure functions. */
    warden_buf out = NO_BUF;
    EXPECT(warden_canonical(LIT("{\"b\": 1, \"a\": [true, null]}"), &out, &err), WARDEN_RESULT_OK, &err);
    CHECK(out.len == strlen("{\"a\":[true,null],\"b\":1}"));
    CHECK(memcmp(out.ptr, "{\"a\":[true,null],\"b\":1}", out.len) == 0);
    warden_buf_free(out);
    out = NO_BUF;
    EXPECT(warden_action_hash(LIT("{\"name\":\"email.send\",\"arguments\":{},\"principal\":{\"agent\":\"a\",\"user\":"
                                  "\"bob\"},\"environment\":\"staging\"}"),
                              &out, &err),
           WARDEN_RESULT_OK, &err);
    CHECK(out.len == 71);
    CHECK(memcmp(out.ptr, "sha256:8b113a75ca3fee715ffc7c33d687b6805820678eecdf4287ac34610a13dcd097", out.len) == 0);
    warden_buf_free(out);
    out = NO_BUF;
    EXPECT(warden_canonical(LIT("{\"price\": 1.5}"), &out, &err), WARDEN_RESULT_INVALID_INPUT, &err);
    CHECK(out.ptr == NULL);
    CHECK(buf_contains(&err, "price"));
    reset(&err);

    warden_close(h);
    puts("refusal_error: ok");
    return 0;
}
