/* propose → permit_info → commit → the retry is refused as a duplicate, with its error object. */
#include "common.h"

static const char REQUEST[] = "{\"name\":\"stripe.refund\",\"arguments\":{\"payment_id\":\"pay_c1\",\"amount\":1200},"
                              "\"principal\":{\"agent\":\"refund-agent\",\"user\":\"ada\"}}";

int main(int argc, char **argv) {
    CHECK(argc == 2);
    CHECK(warden_abi_version() == WARDEN_ABI_VERSION);
    warden_handle *h = open_with_policy(argv[1]);
    warden_buf err = NO_BUF;

    warden_permit *p = NULL;
    EXPECT(warden_propose(h, LIT(REQUEST), &p, &err), WARDEN_RESULT_OK, &err);
    CHECK(p != NULL);

    warden_buf info = NO_BUF;
    EXPECT(warden_permit_info(p, &info, &err), WARDEN_RESULT_OK, &err);
    CHECK(buf_contains(&info, "\"action\":\"stripe.refund\""));
    CHECK(buf_contains(&info, "\"effect_key\":\"refund:pay_c1\""));
    CHECK(buf_contains(&info, "\"attempt\":1"));
    CHECK(buf_contains(&info, "\"decision\":\"allow\""));
    CHECK(buf_contains(&info, "\"arguments\":{\"amount\":1200,\"payment_id\":\"pay_c1\"}"));
    char token[256];
    CHECK(json_string_field(&info, "idempotency_token", token, sizeof token));
    CHECK(info.ptr[info.len] == '\0'); /* one NUL follows the data */
    warden_buf_free(info);

    EXPECT(warden_permit_commit(p, LIT("{\"refund_id\":\"re_1\"}"), &err), WARDEN_RESULT_OK, &err);
    /* One outcome per permit: a second is refused and the permit stays as it was. */
    EXPECT(warden_permit_commit(p, LIT("{}"), &err), WARDEN_RESULT_INVALID_INPUT, &err);
    reset(&err);
    warden_permit_free(p);

    /* The retry: refused, nothing written to `again`, the error object says why. */
    warden_permit *again = NULL;
    EXPECT(warden_propose(h, LIT(REQUEST), &again, &err), WARDEN_RESULT_DUPLICATE, &err);
    CHECK(again == NULL);
    CHECK(err.ptr != NULL && err.len > 0);
    CHECK(buf_contains(&err, "\"code\":\"WARDEN_RESULT_DUPLICATE\""));
    CHECK(buf_contains(&err, "\"state\":\"committed\""));
    CHECK(buf_contains(&err, "\"effect_key\":\"refund:pay_c1\""));
    CHECK(buf_contains(&err, "\"reason\":\"duplicate\""));
    char message[1024];
    CHECK(json_string_field(&err, "message", message, sizeof message));
    reset(&err);

    /* Without an error object the code alone still comes back. */
    EXPECT(warden_propose(h, LIT(REQUEST), &again, NULL), WARDEN_RESULT_DUPLICATE, NULL);
    CHECK(again == NULL);

    warden_buf effect = NO_BUF;
    EXPECT(warden_effect_get(h, LIT("refund:pay_c1"), &effect, &err), WARDEN_RESULT_OK, &err);
    CHECK(buf_contains(&effect, "\"state\":\"committed\""));
    CHECK(buf_contains(&effect, "\"result\":{\"refund_id\":\"re_1\"}"));
    warden_buf_free(effect);

    warden_buf chain = NO_BUF;
    EXPECT(warden_chain_verify(h, &chain, &err), WARDEN_RESULT_OK, &err);
    CHECK(buf_contains(&chain, "\"ok\":true"));
    warden_buf_free(chain);

    warden_close(h);
    puts("reserve_commit_retry: ok");
    return 0;
}
