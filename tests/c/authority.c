/* Delegation from C: a contained delegation is created and authorises a proposal (its id on the
 * permit), an escalation is refused AUTHORITY_ESCALATION with its reason and dimension, a
 * revocation denies the delegate (DENIED with "authority": true and the grant id), revoke is
 * idempotent, an unknown id is NOT_FOUND, a sweep and the listing work, and a hop is carried. */
#include "common.h"

static const char DOCUMENT[] =
    "schema: warden/v1\n"
    "environment: production\n"
    "actions:\n"
    "  stripe.refund:\n"
    "    effect: \"refund:{payment_id}\"\n"
    "    rules:\n"
    "      - decision: allow\n"
    "authority:\n"
    "  grants:\n"
    "    - id: finance\n"
    "      subject: { agent: finance-agent }\n"
    "      actions: [stripe.refund]\n"
    "      constraints: { amount_lte: 2500000 }\n"
    "      expires_at: \"2099-01-01T00:00:00Z\"\n"
    "      delegable: true\n";

#define CHILD(limit)                                                                                   \
    "{\"parent_id\":\"finance\",\"by\":{\"agent\":\"finance-agent\",\"user\":null},\"via\":\"api\","    \
    "\"grant\":{\"subject\":{\"agent\":\"support-agent\"},\"actions\":[\"stripe.refund\"],"             \
    "\"constraints\":{\"amount_lte\":" limit "},\"expires_at\":\"2098-01-01T00:00:00Z\"}}"

#define SUPPORT "\"principal\":{\"agent\":\"support-agent\",\"user\":null}"

int main(int argc, char **argv) {
    CHECK(argc == 2);
    char store[4096], config[4096];
    CHECK((size_t)snprintf(store, sizeof store, "%s/state.redb", argv[1]) < sizeof store);
    CHECK((size_t)snprintf(config, sizeof config, "%s/warden.yaml", argv[1]) < sizeof config);
    FILE *file = fopen(config, "w");
    CHECK(file != NULL);
    CHECK(fputs(DOCUMENT, file) >= 0);
    CHECK(fclose(file) == 0);
    warden_handle *h = NULL;
    warden_buf err = NO_BUF;
    EXPECT(warden_open(STR(store), STR(config), LIT(OPTIONS), &h, &err), WARDEN_RESULT_OK, &err);

    /* €50,000 under €25,000 is an escalation on constraints. */
    EXPECT(warden_delegate(h, LIT(CHILD("5000000")), NULL, &err), WARDEN_RESULT_AUTHORITY_ESCALATION, &err);
    CHECK(buf_contains(&err, "\"code\":\"WARDEN_RESULT_AUTHORITY_ESCALATION\""));
    CHECK(buf_contains(&err, "\"reason\":\"containment\""));
    CHECK(buf_contains(&err, "\"dimension\":\"constraints\""));
    reset(&err);

    warden_buf created = NO_BUF;
    EXPECT(warden_delegate(h, LIT(CHILD("200000")), &created, &err), WARDEN_RESULT_OK, &err);
    char id[64];
    CHECK(json_string_field(&created, "delegation_id", id, sizeof id));
    CHECK(strncmp(id, "dlg_", 4) == 0 && strlen(id) == 36);
    CHECK(buf_contains(&created, "\"created_via\":\"api\""));
    warden_buf_free(created);

    warden_permit *p = NULL;
    EXPECT(warden_propose(h, LIT("{\"name\":\"stripe.refund\",\"arguments\":{\"payment_id\":\"p1\",\"amount\":100}," SUPPORT "}"),
                          &p, &err),
           WARDEN_RESULT_OK, &err);
    warden_buf info = NO_BUF;
    EXPECT(warden_permit_info(p, &info, &err), WARDEN_RESULT_OK, &err);
    CHECK(buf_contains(&info, id));
    warden_buf_free(info);
    EXPECT(warden_permit_commit(p, NULL, 0, &err), WARDEN_RESULT_OK, &err);
    warden_permit_free(p);

    /* A hop presented in the request is the only candidate. */
    char request[512];
    CHECK((size_t)snprintf(request, sizeof request,
                           "{\"name\":\"stripe.refund\",\"arguments\":{\"payment_id\":\"p2\",\"amount\":100}," SUPPORT
                           ",\"hop\":\"%s\",\"task\":\"ticket:1\"}",
                           id) < sizeof request);
    EXPECT(warden_propose(h, STR(request), &p, &err), WARDEN_RESULT_OK, &err);
    EXPECT(warden_permit_commit(p, NULL, 0, &err), WARDEN_RESULT_OK, &err);
    warden_permit_free(p);
    p = NULL;

    warden_buf revoked = NO_BUF;
    EXPECT(warden_revoke(h, STR(id), LIT("ciso"), &revoked, &err), WARDEN_RESULT_OK, &err);
    CHECK(buf_contains(&revoked, "\"revoked\":true"));
    warden_buf_free(revoked);
    revoked = NO_BUF;
    EXPECT(warden_revoke(h, STR(id), NULL, 0, &revoked, &err), WARDEN_RESULT_OK, &err);
    CHECK(buf_contains(&revoked, "\"revoked\":false"));
    warden_buf_free(revoked);
    EXPECT(warden_revoke(h, LIT("dlg_00000000000000000000000000000000"), NULL, 0, NULL, &err), WARDEN_RESULT_NOT_FOUND,
           &err);
    reset(&err);

    EXPECT(warden_propose(h, LIT("{\"name\":\"stripe.refund\",\"arguments\":{\"payment_id\":\"p3\",\"amount\":100}," SUPPORT "}"),
                          &p, &err),
           WARDEN_RESULT_DENIED, &err);
    CHECK(p == NULL);
    CHECK(buf_contains(&err, "\"reason\":\"authority_revoked\""));
    CHECK(buf_contains(&err, "\"authority\":true"));
    CHECK(buf_contains(&err, id));
    reset(&err);

    /* A second delegation, swept by its creator. */
    EXPECT(warden_delegate(h, LIT(CHILD("100")), NULL, &err), WARDEN_RESULT_OK, &err);
    warden_buf swept = NO_BUF;
    EXPECT(warden_revoke_sweep(h, LIT("{\"created_by\":{\"agent\":\"finance-agent\",\"user\":null},\"by\":\"ciso\"}"), &swept,
                               &err),
           WARDEN_RESULT_OK, &err);
    CHECK(buf_contains(&swept, "\"revoked\":true"));
    CHECK(buf_contains(&swept, "\"revoked\":false"));
    warden_buf_free(swept);
    EXPECT(warden_revoke_sweep(h, LIT("{\"under\":\"finance\",\"created_by\":{\"agent\":\"x\"}}"), NULL, &err),
           WARDEN_RESULT_INVALID_INPUT, &err);
    reset(&err);

    warden_buf listed = NO_BUF;
    EXPECT(warden_delegations(h, NULL, 0, 0, &listed, &err), WARDEN_RESULT_OK, &err);
    CHECK(buf_contains(&listed, id));
    CHECK(buf_contains(&listed, "\"revoked_by\":\"ciso\""));
    warden_buf_free(listed);
    listed = NO_BUF;
    EXPECT(warden_delegations(h, STR(id), 1, &listed, &err), WARDEN_RESULT_OK, &err);
    CHECK(!buf_contains(&listed, id));
    warden_buf_free(listed);
    EXPECT(warden_delegations(h, NULL, 0, 0, NULL, &err), WARDEN_RESULT_INVALID_INPUT, &err);
    reset(&err);

    warden_close(h);
    puts("authority: ok");
    return 0;
}
