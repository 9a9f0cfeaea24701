/* The same keyed no-op action cost.py runs through `@w.protect`, through the C ABI alone: one
 * warden_propose_recovering (the call the Python binding makes, with the request it builds) and
 * one warden_permit_commit per action, in a C loop. Built and run by `cost.py --abi`; prints
 * actions/s and the process's CPU time per action (every thread), as cost.py does.
 *
 *   abi_loop STORE CONFIG ACTIONS OUTCOMES      (OUTCOMES: durable or deferred)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "warden.h"

static double seconds(clockid_t clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int failed(const char *what, warden_buf *err) {
    fprintf(stderr, "abi_loop: %s failed: %.*s\n", what, (int)err->len, err->ptr ? (const char *)err->ptr : "");
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 5 || atoi(argv[3]) < 1) {
        fprintf(stderr, "usage: abi_loop STORE CONFIG ACTIONS OUTCOMES\n");
        return 2;
    }
    const char *store = argv[1], *config = argv[2];
    int actions = atoi(argv[3]);
    char options[128];
    int options_len = snprintf(options, sizeof options, "{\"outcomes\":\"%s\"}", argv[4]);
    warden_handle *h = NULL;
    warden_buf err = {0};
    if (warden_open((const uint8_t *)store, strlen(store), (const uint8_t *)config, strlen(config),
                    (const uint8_t *)options, (size_t)options_len, &h, &err) != WARDEN_RESULT_OK)
        return failed("warden_open", &err);
    warden_propose_options none;
    memset(&none, 0, sizeof none);
    char request[512];
    double wall = 0, cpu = 0;
    for (int i = -1; i < actions; i++) { /* i = -1: one warm-up action, not timed */
        if (i == 0) {
            wall = seconds(CLOCK_MONOTONIC);
            cpu = seconds(CLOCK_PROCESS_CPUTIME_ID);
        }
        int len = snprintf(request, sizeof request,
                           "{\"name\":\"bench.noop\",\"arguments\":{\"n\":\"abi-%d\"},\"principal\":{\"agent\":\"bench-agent\"},"
                           "\"approval_id\":null,\"lease_ms\":null,\"resource\":null,\"principal_expires_at_ms\":null,"
                           "\"task\":null,\"hop\":null,\"traceparent\":null}",
                           i);
        warden_permit *permit = NULL;
        warden_buf info = {0};
        if (warden_propose_recovering(h, (const uint8_t *)request, (size_t)len, &none, &permit, &info, &err) !=
            WARDEN_RESULT_OK)
            return failed("warden_propose_recovering", &err);
        warden_buf_free(info);
        if (warden_permit_commit(permit, (const uint8_t *)"{\"ok\":true}", 11, &err) != WARDEN_RESULT_OK)
            return failed("warden_permit_commit", &err);
        warden_permit_free(permit);
    }
    if (warden_flush(h, &err) != WARDEN_RESULT_OK) return failed("warden_flush", &err);
    wall = seconds(CLOCK_MONOTONIC) - wall;
    cpu = seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu;
    printf("%.1f %.3f\n", actions / wall, cpu / actions * 1e6);
    warden_close(h);
    return 0;
}
