/* Sights from C: the catalog and tool schema, a query whose credential comes from a host
 * callback, hostile queries refused before any I/O, snapshots with history and diff, a
 * cancelled query, a callback with no value. argv[2] is the port of the recording server the
 * Rust harness runs; it asserts afterwards what the server saw. */
#include "common.h"

static const char TOKEN[] = "tok-c-2b7e151628aed2a6";

static int calls = 0;

/* The host's resolver: one reference has a value; `user_data` says whether to answer. */
static int32_t resolve(void *user_data, const uint8_t *reference, size_t len, warden_credential_sink *sink) {
    calls++;
    if (*(const int *)user_data == 0) {
        return 1;
    }
    if (len == strlen("STATUS_TOKEN") && memcmp(reference, "STATUS_TOKEN", len) == 0) {
        CHECK(warden_credential_put(sink, LIT(TOKEN)) == WARDEN_RESULT_OK);
        return 0;
    }
    return 1;
}

static void expect_reason(const warden_buf *err, const char *reason) {
    char got[64];
    if (!json_string_field(err, "reason", got, sizeof got) || strcmp(got, reason) != 0) {
        fprintf(stderr, "expected reason %s in %.*s\n", reason, (int)err->len, (const char *)err->ptr);
        exit(1);
    }
}

int main(int argc, char **argv) {
    CHECK(argc == 3);
    char store[4096], config[4096];
    CHECK((size_t)snprintf(store, sizeof store, "%s/state.redb", argv[1]) < sizeof store);
    CHECK((size_t)snprintf(config, sizeof config, "%s/warden.yaml", argv[1]) < sizeof config);
    FILE *file = fopen(config, "w");
    CHECK(file != NULL);
    CHECK(fprintf(file,
                  "schema: warden/v1\n"
                  "actions: {}\n"
                  "sources:\n"
                  "  - id: status\n"
                  "    base_url: http://127.0.0.1:%s/v2\n"
                  "    auth: { mode: bearer, credential: STATUS_TOKEN }\n"
                  "    timeout_ms: 20000\n"
                  "    endpoints:\n"
                  "      - id: summary\n"
                  "        path: /summary\n"
                  "        params:\n"
                  "          - { name: region, type: enum, values: [eu, us], default: eu }\n"
                  "        fields:\n"
                  "          state: /status/indicator\n"
                  "          debug: /debug\n",
                  argv[2]) > 0);
    CHECK(fclose(file) == 0);

    warden_handle *h = NULL;
    warden_buf err = NO_BUF, out = NO_BUF;
    EXPECT(warden_open(STR(store), STR(config), NULL, 0, &h, &err), WARDEN_RESULT_OK, &err);

    /* The catalog and the tool schema name windows, never a way out of them. */
    EXPECT(warden_sight_sources(h, &out, &err), WARDEN_RESULT_OK, &err);
    CHECK(buf_contains(&out, "\"id\":\"summary\"") && !buf_contains(&out, "127.0.0.1") && !buf_contains(&out, "STATUS_TOKEN"));
    reset(&out);
    EXPECT(warden_sight_tool_schema(h, &out, &err), WARDEN_RESULT_OK, &err);
    CHECK(buf_contains(&out, "\"name\":\"warden_query\"") && buf_contains(&out, "\"additionalProperties\":false"));
    CHECK(!buf_contains(&out, "\"url\"") && !buf_contains(&out, "\"headers\"") && !buf_contains(&out, "\"method\""));
    reset(&out);

    /* The credential comes from the host's callback. */
    int answer = 1;
    EXPECT(warden_sight_credentials_set(h, resolve, &answer, &err), WARDEN_RESULT_OK, &err);
    EXPECT(warden_sight_query(h, LIT("{\"source\":\"status\",\"endpoint\":\"summary\",\"params\":{\"region\":\"us\"}}"), NULL,
                              &out, &err),
           WARDEN_RESULT_OK, &err);
    CHECK(buf_contains(&out, "\"state\":\"s1\"") && buf_contains(&out, "[REDACTED]") && !buf_contains(&out, TOKEN));
    CHECK(calls == 1);
    reset(&out);

    /* Hostile queries: refused before any I/O (the harness counts the server's requests). */
    static const char *const hostile[] = {
        "{\"source\":\"status\",\"endpoint\":\"summary\",\"url\":\"https://evil.com\"}",
        "{\"source\":\"status\",\"endpoint\":\"summary\",\"host\":\"evil.com\"}",
        "{\"source\":\"status\",\"endpoint\":\"summary\",\"port\":443}",
        "{\"source\":\"status\",\"endpoint\":\"summary\",\"protocol\":\"https\"}",
        "{\"source\":\"status\",\"endpoint\":\"summary\",\"path\":\"/admin\"}",
        "{\"source\":\"status\",\"endpoint\":\"summary\",\"method\":\"POST\"}",
        "{\"source\":\"status\",\"endpoint\":\"summary\",\"headers\":{\"X\":\"y\"}}",
        "{\"source\":\"status\",\"endpoint\":\"summary\",\"credentials\":\"x\"}",
        "{\"source\":\"status\",\"endpoint\":\"summary\",\"base_url\":\"https://evil.com\"}",
        "{\"source\":\"https://evil.com\",\"endpoint\":\"summary\"}",
        "{\"source\":\"status\",\"endpoint\":\"//evil.com\"}",
        "{\"source\":\"status\",\"endpoint\":\"../../etc/passwd\"}",
        "{\"source\":\"status\",\"endpoint\":\"summary\",\"params\":{\"region\":\"eu\\r\\nHost: evil.com\"}}",
        "{\"source\":\"status\",\"endpoint\":\"summary\",\"params\":{\"q\":\"x\"}}",
        "{\"source\":\"status\",\"endpoint\":\"summary\",\"fields\":[\"/debug\"]}",
    };
    static const char *const reasons[] = {
        "invalid_params", "invalid_params", "invalid_params", "invalid_params", "invalid_params",
        "invalid_params", "invalid_params", "invalid_params", "invalid_params", "unknown_source",
        "unknown_endpoint", "unknown_endpoint", "invalid_params", "invalid_params", "unknown_field",
    };
    for (size_t i = 0; i < sizeof hostile / sizeof hostile[0]; i++) {
        warden_buf untouched = {(uint8_t *)&answer, 7};
        EXPECT(warden_sight_query(h, STR(hostile[i]), NULL, &untouched, &err), WARDEN_RESULT_OUT_OF_WINDOW, &err);
        CHECK(untouched.ptr == (uint8_t *)&answer && untouched.len == 7);
        expect_reason(&err, reasons[i]);
        CHECK(buf_contains(&err, "\"refusal\":true") && !buf_contains(&err, "evil.com"));
        reset(&err);
    }
    CHECK(calls == 1);

    /* Snapshots, history, diff. */
    char a[64], b[64];
    EXPECT(warden_sight_query(h, LIT("{\"source\":\"status\",\"endpoint\":\"summary\",\"snapshot\":true}"), NULL, &out, &err),
           WARDEN_RESULT_OK, &err);
    CHECK(json_string_field(&out, "snapshotId", a, sizeof a));
    reset(&out);
    EXPECT(warden_sight_query(h, LIT("{\"source\":\"status\",\"endpoint\":\"summary\",\"snapshot\":true}"), NULL, &out, &err),
           WARDEN_RESULT_OK, &err);
    CHECK(json_string_field(&out, "snapshotId", b, sizeof b));
    reset(&out);
    EXPECT(warden_sight_history(h, LIT("{\"source\":\"status\",\"endpoint\":\"summary\",\"limit\":1}"), &out, &err),
           WARDEN_RESULT_OK, &err);
    CHECK(buf_contains(&out, b) && !buf_contains(&out, a) && buf_contains(&out, "\"hasMore\":true"));
    reset(&out);
    char request[256];
    CHECK((size_t)snprintf(request, sizeof request, "{\"a\":\"%s\",\"b\":\"%s\"}", a, b) < sizeof request);
    EXPECT(warden_sight_diff(h, STR(request), &out, &err), WARDEN_RESULT_OK, &err);
    CHECK(buf_contains(&out, "\"path\":\"/state\"") && buf_contains(&out, "\"before\":\"s2\"") &&
          buf_contains(&out, "\"after\":\"s3\""));
    reset(&out);
    CHECK((size_t)snprintf(request, sizeof request, "{\"a\":\"%s\",\"b\":\"snp_0123456789abcdef0123456789abcdef\"}", a) <
          sizeof request);
    EXPECT(warden_sight_diff(h, STR(request), &out, &err), WARDEN_RESULT_NOT_FOUND, &err);
    expect_reason(&err, "snapshot_not_found");
    reset(&err);
    EXPECT(warden_sight_history(h, LIT("{\"source\":\"status\",\"endpoint\":\"summary\",\"limit\":1000}"), &out, &err),
           WARDEN_RESULT_OUT_OF_WINDOW, &err);
    expect_reason(&err, "invalid_page");
    reset(&err);

    /* One dispatch for an LLM's tool calls: the same answers, the same refusals, no I/O. */
    EXPECT(warden_sight_call_tool(h, LIT("warden_history"),
                                  LIT("{\"source\":\"status\",\"endpoint\":\"summary\",\"limit\":1}"), NULL, &out,
                                  &err),
           WARDEN_RESULT_OK, &err);
    CHECK(buf_contains(&out, b) && !buf_contains(&out, a));
    reset(&out);
    EXPECT(warden_sight_call_tool(h, LIT("warden_sources"), NULL, 0, NULL, &out, &err), WARDEN_RESULT_OK, &err);
    CHECK(buf_contains(&out, "\"sources\""));
    reset(&out);
    EXPECT(warden_sight_call_tool(h, LIT("warden_sources"), LIT("{\"url\":\"http://evil.com\"}"), NULL, &out, &err),
           WARDEN_RESULT_OUT_OF_WINDOW, &err);
    expect_reason(&err, "invalid_params");
    reset(&err);
    EXPECT(warden_sight_call_tool(h, LIT("warden_query"),
                                  LIT("{\"source\":\"status\",\"endpoint\":\"summary\",\"url\":\"http://evil.com\"}"),
                                  NULL, &out, &err),
           WARDEN_RESULT_OUT_OF_WINDOW, &err);
    reset(&err);
    EXPECT(warden_sight_call_tool(h, LIT("http_get"), NULL, 0, NULL, &out, &err), WARDEN_RESULT_INVALID_INPUT, &err);
    reset(&err);

    /* A cancelled token: aborted, nothing sent. */
    warden_cancel *cancel = warden_cancel_new();
    CHECK(cancel != NULL);
    warden_cancel_trigger(cancel);
    EXPECT(warden_sight_query(h, LIT("{\"source\":\"status\",\"endpoint\":\"summary\"}"), cancel, &out, &err),
           WARDEN_RESULT_FETCH, &err);
    expect_reason(&err, "aborted");
    reset(&err);
    warden_cancel_free(cancel);
    warden_cancel_trigger(NULL);
    warden_cancel_free(NULL);

    /* The callback has no value: credential_unavailable naming the reference, nothing sent. */
    answer = 0;
    EXPECT(warden_sight_query(h, LIT("{\"source\":\"status\",\"endpoint\":\"summary\"}"), NULL, &out, &err),
           WARDEN_RESULT_FETCH, &err);
    expect_reason(&err, "credential_unavailable");
    CHECK(buf_contains(&err, "STATUS_TOKEN") && !buf_contains(&err, TOKEN));
    reset(&err);

    /* Back to the default provider (the environment, where STATUS_TOKEN is unset). */
    EXPECT(warden_sight_credentials_set(h, NULL, NULL, &err), WARDEN_RESULT_OK, &err);
    EXPECT(warden_sight_query(h, LIT("{\"source\":\"status\",\"endpoint\":\"summary\"}"), NULL, &out, &err),
           WARDEN_RESULT_FETCH, &err);
    expect_reason(&err, "credential_unavailable");
    reset(&err);

    /* NULL and bad input. */
    CHECK(warden_credential_put(NULL, LIT("x")) == WARDEN_RESULT_INVALID_INPUT);
    EXPECT(warden_sight_query(NULL, LIT("{}"), NULL, &out, &err), WARDEN_RESULT_INVALID_INPUT, &err);
    reset(&err);
    EXPECT(warden_sight_query(h, LIT("{\"source\":\"status\",\"endpoint\":\"summary\"}"), NULL, NULL, &err),
           WARDEN_RESULT_INVALID_INPUT, &err);
    reset(&err);
    EXPECT(warden_sight_query(h, LIT("not json"), NULL, &out, &err), WARDEN_RESULT_INVALID_INPUT, &err);
    reset(&err);

    warden_close(h);
    printf("sight: ok\n");
    return 0;
}
