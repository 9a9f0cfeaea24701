/* The C quickstart: propose a refund under a policy, commit it, and see the retry refused.
 *
 *   cargo build --release --lib
 *   gcc -std=c11 -Wall -Wextra -Werror -pedantic -I include bindings/c/quickstart.c \
 *       -L target/release -lwarden -Wl,-rpath,"$PWD/target/release" -o quickstart
 *   ./quickstart /tmp/quickstart.redb src/bin/warden/starter.yaml
 */
#include <stdio.h>
#include <string.h>

#include "warden.h"

#define STR(s) (const uint8_t *)(s), strlen(s)

static void show(const char *what, warden_result code, warden_buf *err) {
    printf("%-28s %s\n", what, warden_result_name(code));
    if (code != WARDEN_RESULT_OK && err->ptr != NULL) {
        printf("%-28s %.*s\n", "  error object", (int)err->len, (const char *)err->ptr);
        warden_buf_free(*err);
        err->ptr = NULL;
        err->len = 0;
    }
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: quickstart STORE CONFIG\n");
        return 2;
    }
    warden_buf err = {NULL, 0};
    warden_handle *h = NULL;
    warden_result code = warden_open(STR(argv[1]), STR(argv[2]), NULL, 0, &h, &err);
    show("open", code, &err);
    if (code != WARDEN_RESULT_OK) return 1;

    const char *request = "{\"name\":\"stripe.refund\",\"arguments\":{\"payment_id\":\"pay_c\",\"amount\":4200},"
                          "\"principal\":{\"agent\":\"refund-agent\",\"user\":\"ada\"}}";
    warden_permit *permit = NULL;
    code = warden_propose(h, STR(request), &permit, &err);
    show("propose refund pay_c", code, &err);
    if (code == WARDEN_RESULT_OK) {
        warden_buf info = {NULL, 0};
        if (warden_permit_info(permit, &info, NULL) == WARDEN_RESULT_OK) {
            printf("%-28s %.*s\n", "  permit", (int)info.len, (const char *)info.ptr);
            warden_buf_free(info);
        }
        /* ... call the provider here, with the permit's idempotency_token ... */
        show("commit", warden_permit_commit(permit, STR("{\"refund_id\":\"re_1\"}"), &err), &err);
        warden_permit_free(permit);
    }
    permit = NULL;
    show("propose the same refund", warden_propose(h, STR(request), &permit, &err), &err);
    warden_close(h);
    return 0;
}
