/* A scoped grant from C: refused scopes change nothing; a grant of 2 uses covers the next two
   refunds of its shape without a human, the third asks again; a revocation is refused without a
   reason or twice, and the revoked grant covers nothing. */
#include "common.h"

static const char SCOPED[] =
    "schema: warden/v1\n"
    "environment: production\n"
    "actions:\n"
    "  stripe.refund:\n"
    "    effect: \"refund:{payment_id}\"\n"
    "    rules:\n"
    "      - when: { amount_lte: 10000 }\n"
    "        decision: approve\n"
    "        approval: { scoped: { max_uses: 2, max_minutes: 30 } }\n"
    "      - decision: approve\n";

#define ADA "\"principal\":{\"agent\":\"refund-agent\",\"user\":\"ada\"}"

/* Proposes ada's refund of `amount` as `payment`, presenting `approval` when not NULL. */
static warden_result refund(warden_handle *h, const char *payment, int amount, const char *approval,
                            warden_permit **p, warden_buf *err) {
    char request[512];
    CHECK((size_t)snprintf(request, sizeof request,
                           "{\"name\":\"stripe.refund\",\"arguments\":{\"payment_id\":\"%s\",\"customer_id\":\"cus_1\","
                           "\"amount\":%d}," ADA "%s%s%s}",
                           payment, amount, approval ? ",\"approval_id\":\"" : "", approval ? approval : "",
                           approval ? "\"" : "") < sizeof request);
    return warden_propose(h, STR(request), p, err);
}

/* The refund asks a human: its request id into `id`. */
static void asks(warden_handle *h, const char *payment, int amount, char *id, size_t cap) {
    warden_permit *p = NULL;
    warden_buf err = NO_BUF;
    EXPECT(refund(h, payment, amount, NULL, &p, &err), WARDEN_RESULT_APPROVAL_REQUIRED, &err);
    CHECK(p == NULL);
    CHECK(json_string_field(&err, "request_id", id, cap));
    reset(&err);
}

/* The refund runs (no human) and its permit names `grant`; committed. */
static void covered(warden_handle *h, const char *payment, int amount, const char *approval, const char *grant) {
    warden_permit *p = NULL;
    warden_buf err = NO_BUF;
    EXPECT(refund(h, payment, amount, approval, &p, &err), WARDEN_RESULT_OK, &err);
    warden_buf info = NO_BUF;
    EXPECT(warden_permit_info(p, &info, &err), WARDEN_RESULT_OK, &err);
    CHECK(grant == NULL || buf_contains(&info, grant));
    warden_buf_free(info);
    EXPECT(warden_permit_commit(p, NULL, 0, &err), WARDEN_RESULT_OK, &err);
    warden_permit_free(p);
}

/* The grants listed (all, or live only) are exactly `want`. */
static void grants_are(warden_handle *h, bool live_only, const char *want) {
    warden_buf out = NO_BUF, err = NO_BUF;
    EXPECT(warden_scoped_grants(h, live_only, &out, &err), WARDEN_RESULT_OK, &err);
    CHECK(out.len == strlen(want) && memcmp(out.ptr, want, out.len) == 0);
    warden_buf_free(out);
}

int main(int argc, char **argv) {
    CHECK(argc == 2);
    warden_handle *h = open_with_document(argv[1], SCOPED);
    warden_buf err = NO_BUF;
    char first[64], grant[64], second[64], answer[512];
    asks(h, "p0", 2000, first, sizeof first);

    /* Refused: bad JSON, an unknown field, past the document's caps; nothing is made. */
    const char *refused[][2] = {
        {"{\"approval_id\":", "answer"},
        {"{\"approval_id\":\"%s\",\"approver\":\"ops:bob\",\"scope\":{\"uses\":1,\"minutes\":1},\"ttl\":1}",
         "unknown field \\\"ttl\\\""},
        {"{\"approval_id\":\"%s\",\"approver\":\"ops:bob\",\"scope\":{\"uses\":3,\"minutes\":1}}",
         "scope uses must be 1..=2"},
        {"{\"approval_id\":\"%s\",\"approver\":\"ops:bob\",\"scope\":{\"uses\":1,\"minutes\":31}}",
         "scope minutes must be 1..=30"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        CHECK((size_t)snprintf(answer, sizeof answer, refused[i][0], first) < sizeof answer);
        EXPECT(warden_approval_grant_scoped(h, STR(answer), NULL, &err), WARDEN_RESULT_INVALID_INPUT, &err);
        CHECK(buf_contains(&err, refused[i][1]));
        reset(&err);
    }
    grants_are(h, false, "[]");

    CHECK((size_t)snprintf(answer, sizeof answer,
                           "{\"approval_id\":\"%s\",\"approver\":\"ops:bob\",\"scope\":{\"uses\":2,\"minutes\":30,"
                           "\"fixed\":[\"/customer_id\"],\"at_most\":{\"/amount\":5000}}}",
                           first) < sizeof answer);
    warden_buf done = NO_BUF;
    EXPECT(warden_approval_grant_scoped(h, STR(answer), &done, &err), WARDEN_RESULT_OK, &err);
    CHECK(json_string_field(&done, "grant_id", grant, sizeof grant));
    CHECK(strncmp(grant, "sgr_", 4) == 0 && strlen(grant) == 36);
    CHECK(buf_contains(&done, "\"uses_left\":2"));
    warden_buf_free(done);

    covered(h, "p0", 2000, first, NULL); /* the approved one */
    covered(h, "p1", 4000, NULL, grant);
    covered(h, "p2", 5000, NULL, grant);
    asks(h, "p3", 3000, second, sizeof second); /* used up: a human again */
    grants_are(h, true, "[]");

    CHECK((size_t)snprintf(answer, sizeof answer,
                           "{\"approval_id\":\"%s\",\"approver\":\"ops:bob\",\"scope\":{\"uses\":2,\"minutes\":30}}",
                           second) < sizeof answer);
    EXPECT(warden_approval_grant_scoped(h, STR(answer), &done, &err), WARDEN_RESULT_OK, &err);
    CHECK(json_string_field(&done, "grant_id", grant, sizeof grant));
    warden_buf_free(done);
    EXPECT(warden_scoped_grant_revoke(h, STR(grant), LIT("ops:bob"), LIT(""), NULL, &err),
           WARDEN_RESULT_INVALID_INPUT, &err);
    CHECK(buf_contains(&err, "reason must be a non-empty name"));
    reset(&err);
    EXPECT(warden_scoped_grant_revoke(h, LIT("sgr_00000000000000000000000000000000"), LIT("ops:bob"), LIT("x"), NULL,
                                      &err),
           WARDEN_RESULT_NOT_FOUND, &err);
    reset(&err);
    warden_buf revoked = NO_BUF;
    EXPECT(warden_scoped_grant_revoke(h, STR(grant), LIT("ops:bob"), LIT("done"), &revoked, &err), WARDEN_RESULT_OK,
           &err);
    CHECK(buf_contains(&revoked, "\"state\":\"revoked\""));
    warden_buf_free(revoked);
    EXPECT(warden_scoped_grant_revoke(h, STR(grant), LIT("ops:bob"), LIT("again"), NULL, &err),
           WARDEN_RESULT_INVALID_INPUT, &err);
    CHECK(buf_contains(&err, "revoked already"));
    reset(&err);
    covered(h, "p3", 3000, second, NULL);
    char third[64];
    asks(h, "p4", 3000, third, sizeof third); /* revoked: a human again */
    grants_are(h, true, "[]");

    warden_close(h);
    puts("scoped_grants: ok");
    return 0;
}
