/* The integrator's store calls the kernel's rules guard: extending a lease (only the holder,
 * only an attempt that has begun, never shorter), consuming a granted approval with a key
 * (`warden_store_reserve`) and without one (`warden_store_consume_approval`), and marking a
 * live reservation AMBIGUOUS only when the caller names its holder. */
#include "common.h"

#define ADA "\"principal\":{\"agent\":\"refund-agent\",\"user\":\"ada\"}"
#define REFUND(id, amount) "{\"name\":\"stripe.refund\",\"arguments\":{\"payment_id\":\"" id "\",\"amount\":" amount "}," ADA "}"

/* Reserves `key` for `action` (no approval) and begins it; the holder's action_id into `holder`. */
static void reserve_and_begin(warden_handle *h, const char *action, const char *key, char *holder, size_t cap) {
    warden_buf err = NO_BUF;
    warden_buf reserved = NO_BUF;
    EXPECT(warden_store_reserve(h, STR(action), STR(key), NULL, 0, 60000, &reserved, &err), WARDEN_RESULT_OK, &err);
    CHECK(json_string_field(&reserved, "action_id", holder, cap));
    warden_buf_free(reserved);
    EXPECT(warden_store_begin(h, STR(key), STR(holder), 1, NULL, &err), WARDEN_RESULT_OK, &err);
}

/* Proposes `action` (which the policy sends to a human), grants it as ops:bob; the id into `id`. */
static void granted_approval(warden_handle *h, const char *action, char *id, size_t cap) {
    warden_buf err = NO_BUF;
    warden_permit *p = NULL;
    EXPECT(warden_propose(h, STR(action), &p, &err), WARDEN_RESULT_APPROVAL_REQUIRED, &err);
    CHECK(json_string_field(&err, "request_id", id, cap));
    reset(&err);
    EXPECT(warden_approval_grant(h, STR(id), LIT("ops:bob"), 0, NULL, &err), WARDEN_RESULT_OK, &err);
}

static void expect_approval_status(warden_handle *h, const char *id, const char *status) {
    warden_buf err = NO_BUF;
    warden_buf record = NO_BUF;
    EXPECT(warden_approval_get(h, STR(id), &record, &err), WARDEN_RESULT_OK, &err);
    CHECK(buf_contains(&record, status));
    warden_buf_free(record);
}

static void extend_lease(warden_handle *h) {
    warden_buf err = NO_BUF;
    char holder[64];

    /* A reserved attempt that has not begun is held, not executing: refused in progress, even to its holder. */
    warden_buf reserved = NO_BUF;
    EXPECT(warden_store_reserve(h, LIT(REFUND("pay_l1", "10")), LIT("refund:pay_l1"), NULL, 0, 60000, &reserved, &err),
           WARDEN_RESULT_OK, &err);
    CHECK(json_string_field(&reserved, "action_id", holder, sizeof holder));
    warden_buf_free(reserved);
    EXPECT(warden_store_extend_lease(h, LIT("refund:pay_l1"), STR(holder), 1, 120000, NULL, &err),
           WARDEN_RESULT_IN_PROGRESS, &err);
    reset(&err);
    EXPECT(warden_store_begin(h, LIT("refund:pay_l1"), STR(holder), 1, NULL, &err), WARDEN_RESULT_OK, &err);

    /* The holder extends it; the record shows the new expiry. */
    warden_buf before = NO_BUF, after = NO_BUF;
    EXPECT(warden_effect_get(h, LIT("refund:pay_l1"), &before, &err), WARDEN_RESULT_OK, &err);
    char expiry_before[64], expiry_after[64];
    CHECK(json_string_field(&before, "lease_expires_at", expiry_before, sizeof expiry_before));
    warden_buf_free(before);
    EXPECT(warden_store_extend_lease(h, LIT("refund:pay_l1"), STR(holder), 1, 3600000, &after, &err),
           WARDEN_RESULT_OK, &err);
    CHECK(buf_contains(&after, "\"state\":\"executing\""));
    CHECK(json_string_field(&after, "lease_expires_at", expiry_after, sizeof expiry_after));
    CHECK(strcmp(expiry_after, expiry_before) > 0); /* RFC 3339 UTC: later sorts later */
    warden_buf_free(after);

    /* Never shorter than it is, and 0 is no lease. */
    EXPECT(warden_store_extend_lease(h, LIT("refund:pay_l1"), STR(holder), 1, 1000, NULL, &err),
           WARDEN_RESULT_INVALID_INPUT, &err);
    reset(&err);
    EXPECT(warden_store_extend_lease(h, LIT("refund:pay_l1"), STR(holder), 1, 0, NULL, &err),
           WARDEN_RESULT_INVALID_INPUT, &err);
    reset(&err);

    /* Only the holder: another action id, or another attempt, is refused and changes nothing. */
    EXPECT(warden_store_extend_lease(h, LIT("refund:pay_l1"), LIT("act_00000000000000000000000000000000"), 1, 7200000,
                                     NULL, &err),
           WARDEN_RESULT_IN_PROGRESS, &err);
    CHECK(buf_contains(&err, holder));
    reset(&err);
    EXPECT(warden_store_extend_lease(h, LIT("refund:pay_l1"), STR(holder), 2, 7200000, NULL, &err),
           WARDEN_RESULT_IN_PROGRESS, &err);
    reset(&err);
    warden_buf unchanged = NO_BUF;
    EXPECT(warden_effect_get(h, LIT("refund:pay_l1"), &unchanged, &err), WARDEN_RESULT_OK, &err);
    CHECK(buf_contains(&unchanged, expiry_after));
    warden_buf_free(unchanged);

    /* A committed effect has no lease left to extend. */
    EXPECT(warden_store_complete(h, LIT("refund:pay_l1"), STR(holder), 1, LIT("{\"committed\":{\"id\":\"re_l1\"}}"),
                                 NULL, &err),
           WARDEN_RESULT_OK, &err);
    EXPECT(warden_store_extend_lease(h, LIT("refund:pay_l1"), STR(holder), 1, 7200000, NULL, &err),
           WARDEN_RESULT_DUPLICATE, &err);
    reset(&err);
    /* No record at all. */
    EXPECT(warden_store_extend_lease(h, LIT("refund:nothing"), STR(holder), 1, 60000, NULL, &err),
           WARDEN_RESULT_AMBIGUOUS, &err);
    reset(&err);
}

static void consume_approval(warden_handle *h) {
    warden_buf err = NO_BUF;
    char id[64];

    /* With a key: the reservation consumes the approval in the same write. */
    granted_approval(h, REFUND("pay_a1", "200000"), id, sizeof id);
    warden_buf reserved = NO_BUF;
    EXPECT(warden_store_reserve(h, LIT(REFUND("pay_a1", "200000")), LIT("refund:pay_a1"), STR(id), 60000, &reserved,
                                &err),
           WARDEN_RESULT_OK, &err);
    CHECK(buf_contains(&reserved, "\"state\":\"reserved\""));
    warden_buf_free(reserved);
    expect_approval_status(h, id, "\"status\":\"consumed\"");
    /* Spent: a second reservation under another key cannot present it again. */
    EXPECT(warden_store_reserve(h, LIT(REFUND("pay_a1", "200000")), LIT("refund:pay_a1_again"), STR(id), 60000, NULL,
                                &err),
           WARDEN_RESULT_APPROVAL_MISMATCH, &err);
    reset(&err);

    /* Without a key: the approval is checked against the exact action, then consumed. */
    granted_approval(h, REFUND("pay_a2", "300000"), id, sizeof id);
    EXPECT(warden_store_consume_approval(h, LIT(REFUND("pay_a2", "300001")), STR(id), NULL, &err),
           WARDEN_RESULT_APPROVAL_MISMATCH, &err);
    reset(&err);
    expect_approval_status(h, id, "\"status\":\"granted\""); /* a refused consume leaves it granted */
    warden_buf consumed = NO_BUF;
    EXPECT(warden_store_consume_approval(h, LIT(REFUND("pay_a2", "300000")), STR(id), &consumed, &err),
           WARDEN_RESULT_OK, &err);
    CHECK(buf_contains(&consumed, id));
    CHECK(buf_contains(&consumed, "\"status\":\"consumed\""));
    warden_buf_free(consumed);
    expect_approval_status(h, id, "\"status\":\"consumed\"");
    EXPECT(warden_store_consume_approval(h, LIT(REFUND("pay_a2", "300000")), STR(id), NULL, &err),
           WARDEN_RESULT_APPROVAL_MISMATCH, &err);
    reset(&err);
    /* Nothing was reserved for it. */
    warden_buf none = NO_BUF;
    EXPECT(warden_effect_get(h, LIT("refund:pay_a2"), &none, &err), WARDEN_RESULT_OK, &err);
    CHECK(none.ptr == NULL || buf_contains(&none, "null"));
    warden_buf_free(none);
}

static void mark_ambiguous(warden_handle *h) {
    warden_buf err = NO_BUF;
    char holder[64];
    reserve_and_begin(h, REFUND("pay_m1", "10"), "refund:pay_m1", holder, sizeof holder);

    /* A live lease: without a holder, or with another one, refused, and the error names the holder. */
    EXPECT(warden_store_mark_ambiguous(h, LIT("refund:pay_m1"), NULL, 0, 0, LIT("worker died"), NULL, &err),
           WARDEN_RESULT_IN_PROGRESS, &err);
    CHECK(buf_contains(&err, holder));
    reset(&err);
    EXPECT(warden_store_mark_ambiguous(h, LIT("refund:pay_m1"), LIT("act_00000000000000000000000000000000"), 1,
                                       LIT("worker died"), NULL, &err),
           WARDEN_RESULT_IN_PROGRESS, &err);
    CHECK(buf_contains(&err, holder));
    reset(&err);
    warden_buf still = NO_BUF;
    EXPECT(warden_effect_get(h, LIT("refund:pay_m1"), &still, &err), WARDEN_RESULT_OK, &err);
    CHECK(buf_contains(&still, "\"state\":\"executing\""));
    warden_buf_free(still);

    /* The holder marks it; marking it again is idempotent. */
    warden_buf marked = NO_BUF;
    EXPECT(warden_store_mark_ambiguous(h, LIT("refund:pay_m1"), STR(holder), 1, LIT("worker died"), &marked, &err),
           WARDEN_RESULT_OK, &err);
    CHECK(buf_contains(&marked, "\"state\":\"ambiguous\""));
    warden_buf_free(marked);
    EXPECT(warden_store_mark_ambiguous(h, LIT("refund:pay_m1"), STR(holder), 1, NULL, 0, NULL, &err),
           WARDEN_RESULT_OK, &err);
    /* A retry is now refused as AMBIGUOUS until a human resolves it. */
    EXPECT(warden_store_reserve(h, LIT(REFUND("pay_m1", "10")), LIT("refund:pay_m1"), NULL, 0, 0, NULL, &err),
           WARDEN_RESULT_AMBIGUOUS, &err);
    reset(&err);
}

int main(int argc, char **argv) {
    CHECK(argc == 2);
    warden_handle *h = open_with_policy(argv[1]);
    extend_lease(h);
    consume_approval(h);
    mark_ambiguous(h);
    warden_close(h);
    puts("store_integrator: ok");
    return 0;
}
