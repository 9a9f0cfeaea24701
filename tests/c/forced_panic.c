/* Built only against a library with the `test-exports` feature: a panic forced inside the
 * library comes back as WARDEN_RESULT_PANIC, then the handle answers WARDEN_RESULT_POISONED
 * until it is closed and reopened. */
#include "common.h"

/* Test-only, deliberately absent from warden.h. */
warden_result warden_test_panic(warden_handle *h, warden_buf *err);

static const char REQUEST[] = "{\"name\":\"customer.read\",\"arguments\":{},\"principal\":{\"agent\":\"a\"}}";

int main(int argc, char **argv) {
    CHECK(argc == 2);
    warden_handle *h = open_with_policy(argv[1]);
    warden_buf err = NO_BUF;

    warden_permit *held = NULL;
    EXPECT(warden_propose(h, LIT(REQUEST), &held, &err), WARDEN_RESULT_OK, &err);

    EXPECT(warden_test_panic(h, &err), WARDEN_RESULT_PANIC, &err);
    CHECK(buf_contains(&err, "\"code\":\"WARDEN_RESULT_PANIC\""));
    reset(&err);

    warden_permit *p = NULL;
    EXPECT(warden_propose(h, LIT(REQUEST), &p, &err), WARDEN_RESULT_POISONED, &err);
    CHECK(p == NULL);
    CHECK(buf_contains(&err, "\"code\":\"WARDEN_RESULT_POISONED\""));
    reset(&err);
    EXPECT(warden_permit_commit(held, NULL, 0, &err), WARDEN_RESULT_POISONED, &err);
    reset(&err);
    warden_permit_free(held);
    warden_close(h);

    h = open_with_policy(argv[1]);
    EXPECT(warden_propose(h, LIT(REQUEST), &p, &err), WARDEN_RESULT_OK, &err);
    EXPECT(warden_permit_commit(p, NULL, 0, &err), WARDEN_RESULT_OK, &err);
    warden_permit_free(p);
    warden_close(h);
    puts("forced_panic: ok");
    return 0;
}
