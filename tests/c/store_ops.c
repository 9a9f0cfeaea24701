/* The integrator's own pipeline on a handle with no document: reserve → begin → complete, then
 * the retry is refused. */
#include "common.h"

static const char ACTION[] = "{\"name\":\"stripe.refund\",\"arguments\":{\"payment_id\":\"pay_c4\",\"amount\":5},"
                             "\"principal\":{\"agent\":\"worker\"}}";

int main(int argc, char **argv) {
    CHECK(argc == 2);
    char store[4096];
    CHECK((size_t)snprintf(store, sizeof store, "%s/state.redb", argv[1]) < sizeof store);
    warden_handle *h = NULL;
    warden_buf err = NO_BUF;
    EXPECT(warden_open(STR(store), NULL, 0, LIT(OPTIONS), &h, &err), WARDEN_RESULT_OK, &err);

    warden_permit *p = NULL;
    EXPECT(warden_propose(h, LIT(ACTION), &p, &err), WARDEN_RESULT_CONFIG, &err);
    reset(&err);

    warden_buf reserved = NO_BUF;
    EXPECT(warden_store_reserve(h, LIT(ACTION), LIT("refund:pay_c4"), NULL, 0, 60000, &reserved, &err),
           WARDEN_RESULT_OK, &err);
    CHECK(buf_contains(&reserved, "\"state\":\"reserved\""));
    char holder[64];
    CHECK(json_string_field(&reserved, "action_id", holder, sizeof holder));
    warden_buf_free(reserved);

    EXPECT(warden_store_reserve(h, LIT(ACTION), LIT("refund:pay_c4"), NULL, 0, 0, NULL, &err),
           WARDEN_RESULT_IN_PROGRESS, &err);
    CHECK(buf_contains(&err, "\"state\":\"in_progress\""));
    reset(&err);

    EXPECT(warden_store_begin(h, LIT("refund:pay_c4"), STR(holder), 1, NULL, &err), WARDEN_RESULT_OK, &err);
    warden_buf done = NO_BUF;
    EXPECT(warden_store_complete(h, LIT("refund:pay_c4"), STR(holder), 1, LIT("{\"committed\":{\"id\":\"re_4\"}}"),
                                 &done, &err),
           WARDEN_RESULT_OK, &err);
    CHECK(buf_contains(&done, "\"state\":\"committed\""));
    warden_buf_free(done);

    EXPECT(warden_store_reserve(h, LIT(ACTION), LIT("refund:pay_c4"), NULL, 0, 0, NULL, &err),
           WARDEN_RESULT_DUPLICATE, &err);
    CHECK(buf_contains(&err, "\"state\":\"committed\""));
    reset(&err);

    warden_buf list = NO_BUF;
    EXPECT(warden_effects_list(h, LIT("committed"), 0, &list, &err), WARDEN_RESULT_OK, &err);
    CHECK(buf_contains(&list, "\"effect_key\":\"refund:pay_c4\""));
    warden_buf_free(list);
    list = NO_BUF;
    EXPECT(warden_events_list(h, 0, 2, &list, &err), WARDEN_RESULT_OK, &err);
    CHECK(buf_contains(&list, "\"event_id\":1"));
    CHECK(!buf_contains(&list, "\"event_id\":3"));
    warden_buf_free(list);

    warden_close(h);
    puts("store_ops: ok");
    return 0;
}
