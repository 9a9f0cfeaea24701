/* approval required → the request id from the error object → granted by ops:bob → consumed. */
#include "common.h"

#define ARGS "\"arguments\":{\"payment_id\":\"pay_c2\",\"amount\":200000}"
#define ADA "\"principal\":{\"agent\":\"refund-agent\",\"user\":\"ada\"}"

int main(int argc, char **argv) {
    CHECK(argc == 2);
    warden_handle *h = open_with_policy(argv[1]);
    warden_buf err = NO_BUF;

    warden_permit *p = NULL;
    EXPECT(warden_propose(h, LIT("{\"name\":\"stripe.refund\"," ARGS "," ADA "}"), &p, &err),
           WARDEN_RESULT_APPROVAL_REQUIRED, &err);
    CHECK(p == NULL);
    CHECK(buf_contains(&err, "\"code\":\"WARDEN_RESULT_APPROVAL_REQUIRED\""));
    char id[64];
    CHECK(json_string_field(&err, "request_id", id, sizeof id));
    CHECK(strncmp(id, "apr_", 4) == 0 && strlen(id) == 36);
    char expires[64];
    CHECK(json_string_field(&err, "expires_at", expires, sizeof expires));
    reset(&err);

    warden_buf pending = NO_BUF;
    EXPECT(warden_approvals_pending(h, &pending, &err), WARDEN_RESULT_OK, &err);
    CHECK(buf_contains(&pending, id));
    warden_buf_free(pending);

    /* The requester cannot approve their own request. */
    EXPECT(warden_approval_grant(h, STR(id), LIT("ada"), 0, NULL, &err), WARDEN_RESULT_APPROVAL_MISMATCH, &err);
    CHECK(buf_contains(&err, "\"reason\":\"approver_is_requester\""));
    reset(&err);

    warden_buf granted = NO_BUF;
    EXPECT(warden_approval_grant(h, STR(id), LIT("ops:bob"), 0, &granted, &err), WARDEN_RESULT_OK, &err);
    CHECK(buf_contains(&granted, "\"status\":\"granted\""));
    CHECK(buf_contains(&granted, "\"approver\":\"ops:bob\""));
    warden_buf_free(granted);

    char request[512];
    CHECK((size_t)snprintf(request, sizeof request, "{\"name\":\"stripe.refund\"," ARGS "," ADA ",\"approval_id\":\"%s\"}",
                           id) < sizeof request);
    EXPECT(warden_propose(h, STR(request), &p, &err), WARDEN_RESULT_OK, &err);
    CHECK(p != NULL);
    warden_buf info = NO_BUF;
    EXPECT(warden_permit_info(p, &info, &err), WARDEN_RESULT_OK, &err);
    CHECK(buf_contains(&info, id));
    CHECK(buf_contains(&info, "\"decision\":\"approve\""));
    warden_buf_free(info);
    EXPECT(warden_permit_commit(p, NULL, 0, &err), WARDEN_RESULT_OK, &err);
    warden_permit_free(p);

    warden_buf record = NO_BUF;
    EXPECT(warden_approval_get(h, STR(id), &record, &err), WARDEN_RESULT_OK, &err);
    CHECK(buf_contains(&record, "\"status\":\"consumed\""));
    warden_buf_free(record);

    /* Replaying the spent approval is refused. */
    warden_permit *replay = NULL;
    warden_result rc = warden_propose(h, STR(request), &replay, &err);
    CHECK(rc == WARDEN_RESULT_APPROVAL_MISMATCH || rc == WARDEN_RESULT_DUPLICATE);
    CHECK(replay == NULL);
    reset(&err);

    warden_close(h);
    puts("approval_flow: ok");
    return 0;
}
