/* Approvals a person can trust, from C: the request shows its arguments, an answer names a
 * verified principal, the hook hears a new request once on another thread, a precondition
 * callback fingerprints the request and refuses a changed state, waiting is the library's. */
#include <stdatomic.h>

#include "common.h"

#define ARGS "\"arguments\":{\"payment_id\":\"pay_t1\",\"amount\":200000}"
#define ADA "\"principal\":{\"agent\":\"refund-agent\",\"user\":\"ada\"}"

static atomic_int heard = 0;

static int32_t hook(void *user_data, const uint8_t *request, size_t request_len) {
    CHECK(user_data == (void *)&heard);
    CHECK(request != NULL && request_len > 0);
    atomic_fetch_add(&heard, 1);
    return 3; /* a failure the library records; the action never sees it */
}

static int32_t ledger(void *user_data, const uint8_t *action, size_t action_len, warden_precondition_sink *sink) {
    CHECK(action != NULL && action_len > 0);
    const int *balance = (const int *)user_data;
    char state[64];
    int n = snprintf(state, sizeof state, "{\"balance\":%d}", *balance);
    CHECK(n > 0 && (size_t)n < sizeof state);
    return warden_precondition_put(sink, (const uint8_t *)state, (size_t)n) == WARDEN_RESULT_OK ? 0 : 1;
}

static int has_event(warden_handle *h, const char *needle) {
    warden_buf events = NO_BUF, err = NO_BUF;
    EXPECT(warden_events_list(h, 0, 1000, &events, &err), WARDEN_RESULT_OK, &err);
    int found = buf_contains(&events, needle);
    warden_buf_free(events);
    return found;
}

int main(int argc, char **argv) {
    CHECK(argc == 2);
    warden_handle *h = open_with_policy(argv[1]);
    warden_buf err = NO_BUF;
    int balance = 500;

    EXPECT(warden_approval_notify_set(h, hook, (void *)&heard, &err), WARDEN_RESULT_OK, &err);

    warden_permit *p = NULL;
    warden_buf info = NO_BUF;
    const char ask[] = "{\"name\":\"stripe.refund\"," ARGS "," ADA "}";
    EXPECT(warden_propose_checked(h, LIT(ask), ledger, &balance, &p, &info, &err), WARDEN_RESULT_APPROVAL_REQUIRED,
           &err);
    char id[64];
    CHECK(json_string_field(&err, "request_id", id, sizeof id));
    reset(&err);

    /* The request shows the arguments, and the precondition's fingerprint. */
    warden_buf record = NO_BUF;
    EXPECT(warden_approval_wait(h, STR(id), 0, &record, &err), WARDEN_RESULT_OK, &err);
    CHECK(buf_contains(&record, "\"arguments\":{\"amount\":200000,\"payment_id\":\"pay_t1\"}"));
    CHECK(buf_contains(&record, "\"status\":\"pending\""));
    CHECK(buf_contains(&record, "\"precondition\":\"sha256:"));
    warden_buf_free(record);

    /* The hook heard it once, on the library's thread; its failure is only an event. */
    for (int i = 0; i < 100000 && !has_event(h, "APPROVAL_NOTIFY_FAILED"); i++) {
    }
    CHECK(has_event(h, "APPROVAL_NOTIFY_FAILED"));
    EXPECT(warden_approval_notify_set(h, NULL, NULL, &err), WARDEN_RESULT_OK, &err);
    CHECK(atomic_load(&heard) == 1);

    /* The requester, in another spelling, is refused; a verified approver grants. */
    const char self[] = "\"approver\":{\"agent\":\"slack\",\"user\":\"ADA\"}";
    char answer[512];
    CHECK((size_t)snprintf(answer, sizeof answer, "{\"approval_id\":\"%s\",\"decision\":\"grant\",%s}", id, self) <
          sizeof answer);
    EXPECT(warden_approval_answer(h, STR(answer), NULL, &err), WARDEN_RESULT_APPROVAL_MISMATCH, &err);
    CHECK(buf_contains(&err, "\"reason\":\"approver_is_requester\""));
    reset(&err);
    CHECK((size_t)snprintf(answer, sizeof answer,
                           "{\"approval_id\":\"%s\",\"decision\":\"grant\",\"approver\":{\"agent\":\"slack\",\"user\":"
                           "\"bob\"},\"verified\":{\"issuer\":\"https://id.example\",\"claims\":{\"roles\":[\"finance\"]}}}",
                           id) < sizeof answer);
    warden_buf granted = NO_BUF;
    EXPECT(warden_approval_answer(h, STR(answer), &granted, &err), WARDEN_RESULT_OK, &err);
    CHECK(buf_contains(&granted, "\"status\":\"granted\""));
    CHECK(buf_contains(&granted, "\"verified\":true"));
    warden_buf_free(granted);

    /* Presented after the state changed: refused, and the approval stays granted. */
    char present[512];
    CHECK((size_t)snprintf(present, sizeof present, "{\"name\":\"stripe.refund\"," ARGS "," ADA ",\"approval_id\":\"%s\"}",
                           id) < sizeof present);
    balance = 0;
    EXPECT(warden_propose_checked(h, STR(present), ledger, &balance, &p, &info, &err), WARDEN_RESULT_APPROVAL_MISMATCH,
           &err);
    CHECK(buf_contains(&err, "\"reason\":\"precondition_changed\""));
    reset(&err);
    EXPECT(warden_approval_wait(h, STR(id), 0, &record, &err), WARDEN_RESULT_OK, &err);
    CHECK(buf_contains(&record, "\"status\":\"granted\""));
    warden_buf_free(record);

    /* Unchanged: a permit, and the approval is spent. */
    balance = 500;
    EXPECT(warden_propose_checked(h, STR(present), ledger, &balance, &p, &info, &err), WARDEN_RESULT_OK, &err);
    CHECK(p != NULL && info.ptr != NULL);
    warden_buf_free(info);
    EXPECT(warden_permit_commit(p, NULL, 0, &err), WARDEN_RESULT_OK, &err);
    warden_permit_free(p);
    EXPECT(warden_approval_wait(h, STR(id), 1000, &record, &err), WARDEN_RESULT_OK, &err);
    CHECK(buf_contains(&record, "\"status\":\"consumed\""));
    warden_buf_free(record);

    warden_close(h);
    puts("approval_trust: ok");
    return 0;
}
