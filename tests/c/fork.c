/*
 * fork() after warden_open. In a child, every call on a handle or permit from before the fork
 * returns WARDEN_RESULT_INVALID_INPUT and touches nothing (no write, no descriptor of the
 * parent's store kept); a handle the child opens itself works, as a client of the parent,
 * which owns the store. The parent and its children then race for the same keys: each key
 * runs exactly once (counted in an O_APPEND log, one write(2) per execution), and the receipt
 * chain verifies afterwards. A grandchild (a fork of a fork) follows the same rule.
 */
#define _POSIX_C_SOURCE 200809L
#include "common.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define RACERS 3 /* children racing the parent */
#define KEYS 24

/* Globals, so that what a child deliberately never frees stays reachable for valgrind. */
static warden_handle *inherited_handle;
static warden_permit *inherited_permit;
static char store_path[4096], config_path[4096], lock_path[4096], log_path[4096];

static void request_for(char *dst, size_t cap, const char *payment, int amount, const char *agent) {
    CHECK((size_t)snprintf(dst, cap,
                           "{\"name\":\"stripe.refund\",\"arguments\":{\"payment_id\":\"%s\",\"amount\":%d},"
                           "\"principal\":{\"agent\":\"%s\",\"user\":null}}",
                           payment, amount, agent) < cap);
}

static size_t count_of(const warden_buf *buf, const char *needle) {
    size_t n = strlen(needle), found = 0;
    for (size_t i = 0; buf->ptr != NULL && i + n <= buf->len; i++) {
        if (memcmp(buf->ptr + i, needle, n) == 0) {
            found++;
        }
    }
    return found;
}

static size_t events_in(warden_handle *h) {
    warden_buf events = NO_BUF, err = NO_BUF;
    EXPECT(warden_events_list(h, 0, 0, &events, &err), WARDEN_RESULT_OK, &err);
    size_t n = count_of(&events, "\"event_id\":");
    warden_buf_free(events);
    return n;
}

static int state_is(warden_handle *h, const char *key, const char *state) {
    warden_buf effect = NO_BUF, err = NO_BUF;
    EXPECT(warden_effect_get(h, STR(key), &effect, &err), WARDEN_RESULT_OK, &err);
    char want[64];
    CHECK((size_t)snprintf(want, sizeof want, "\"state\":\"%s\"", state) < sizeof want);
    int is = buf_contains(&effect, want);
    warden_buf_free(effect);
    return is;
}

static warden_handle *open_fresh(void) {
    warden_handle *h = NULL;
    warden_buf err = NO_BUF;
    EXPECT(warden_open(STR(store_path), STR(config_path), LIT(OPTIONS), &h, &err), WARDEN_RESULT_OK, &err);
    CHECK(h != NULL);
    return h;
}

/* A refusal for a handle from before a fork: INVALID_INPUT, naming the fork, nothing written. */
static void expect_forked(warden_result got, warden_buf *err, const warden_buf *out, int line) {
    if (got != WARDEN_RESULT_INVALID_INPUT) {
        fprintf(stderr, "line %d: a call on a pre-fork handle returned %s\n", line, warden_result_name(got));
        exit(1);
    }
    if (!buf_contains(err, "before a fork") || !buf_contains(err, "open its own")) {
        fprintf(stderr, "line %d: the refusal does not name the fork: %.*s\n", line, (int)err->len,
                (const char *)err->ptr);
        exit(1);
    }
    CHECK(out == NULL || out->ptr == NULL);
    reset(err);
}
#define FORKED(call) expect_forked((call), &err, &out, __LINE__)

/* Every export that takes a handle or a permit, on ones from before the fork. */
static void every_call_is_refused(warden_handle *h, warden_permit *p) {
    warden_buf out = NO_BUF, err = NO_BUF;
    char request[512];
    request_for(request, sizeof request, "pay_child", 100, "child-agent");
    warden_permit *permit = NULL;
    FORKED(warden_propose(h, STR(request), &permit, &err));
    CHECK(permit == NULL);
    FORKED(warden_propose_described(h, STR(request), &permit, &out, &err));
    CHECK(permit == NULL);
    FORKED(warden_flush(h, &err));
    FORKED(warden_approval_request(h, STR(request), &out, &err));
    FORKED(warden_approval_grant(h, LIT("apr_0"), LIT("bob"), 0, &out, &err));
    FORKED(warden_approval_deny(h, LIT("apr_0"), LIT("bob"), NULL, 0, &out, &err));
    FORKED(warden_approval_get(h, LIT("apr_0"), &out, &err));
    FORKED(warden_approvals_pending(h, &out, &err));
    FORKED(warden_effect_reconcile(h, LIT("refund:pay_before"), LIT("stripe.refund"), LIT("committed"), &err));
    FORKED(warden_effect_resolve(h, LIT("refund:pay_before"), LIT("committed"), LIT("bob"), &out, &err));
    FORKED(warden_effect_get(h, LIT("refund:pay_before"), &out, &err));
    FORKED(warden_effects_list(h, NULL, 0, 0, &out, &err));
    FORKED(warden_receipts_list(h, 1, 0, &out, &err));
    FORKED(warden_chain_verify(h, &out, &err));
    FORKED(warden_events_list(h, 0, 0, &out, &err));
    FORKED(warden_store_reserve(h, LIT("{\"name\":\"x\",\"arguments\":{},\"principal\":{\"agent\":\"a\",\"user\":null}}"),
                                LIT("k:child"), NULL, 0, 60000, &out, &err));
    FORKED(warden_store_begin(h, LIT("k:child"), LIT("act_0"), 1, &out, &err));
    FORKED(warden_store_complete(h, LIT("k:child"), LIT("act_0"), 1, LIT("{\"committed\":true}"), &out, &err));
    FORKED(warden_store_mark_ambiguous(h, LIT("refund:pay_before"), NULL, 0, 0, LIT("x"), &out, &err));
    FORKED(warden_store_extend_lease(h, LIT("k:child"), LIT("act_0"), 1, 60000, &out, &err));
    FORKED(warden_store_consume_approval(h, LIT("{\"name\":\"x\",\"arguments\":{},\"principal\":{\"agent\":\"a\",\"user\":null}}"),
                                         LIT("apr_0"), &out, &err));
    FORKED(warden_sight_credentials_set(h, NULL, NULL, &err));
    FORKED(warden_sight_sources(h, &out, &err));
    FORKED(warden_sight_tool_schema(h, &out, &err));
    FORKED(warden_sight_query(h, LIT("{\"source\":\"s\",\"endpoint\":\"e\"}"), NULL, &out, &err));
    FORKED(warden_sight_history(h, LIT("{\"source\":\"s\",\"endpoint\":\"e\"}"), &out, &err));
    FORKED(warden_sight_diff(h, LIT("{\"a\":\"x\",\"b\":\"y\"}"), &out, &err));
    /* The permit: reading it and every outcome. */
    FORKED(warden_permit_info(p, &out, &err));
    FORKED(warden_permit_extend_lease(p, 60000, &err));
    FORKED(warden_permit_commit(p, LIT("{\"by\":\"child\"}"), &err));
    FORKED(warden_permit_not_executed(p, LIT("child"), &err));
    FORKED(warden_permit_ambiguous(p, LIT("child"), &err));
    /* Pure functions need no handle and keep working. */
    EXPECT(warden_canonical(LIT("{\"b\":1,\"a\":2}"), &out, &err), WARDEN_RESULT_OK, &err);
    CHECK(out.len == 13 && memcmp(out.ptr, "{\"a\":2,\"b\":1}", 13) == 0);
    reset(&out);
}

/* No descriptor of the parent's store survived into this process: not the store file, not its
 * lock file, not the owner's listening socket (this program opens no socket of its own). */
static void holds_nothing_of_the_store(void) {
    DIR *fds = opendir("/proc/self/fd");
    CHECK(fds != NULL);
    struct dirent *entry;
    while ((entry = readdir(fds)) != NULL) {
        if (entry->d_name[0] == '.') {
            continue;
        }
        char link[64], target[4096];
        CHECK((size_t)snprintf(link, sizeof link, "/proc/self/fd/%s", entry->d_name) < sizeof link);
        ssize_t n = readlink(link, target, sizeof target - 1);
        if (n < 0) {
            continue; /* the directory's own descriptor, closed meanwhile */
        }
        target[n] = '\0';
        if (strcmp(target, store_path) == 0 || strcmp(target, lock_path) == 0 ||
            strncmp(target, "socket:", 7) == 0) {
            fprintf(stderr, "descriptor %s still refers to %s after the fork\n", entry->d_name, target);
            exit(1);
        }
    }
    CHECK(closedir(fds) == 0);
}

static void log_execution(int key) {
    int fd = open(log_path, O_WRONLY | O_APPEND | O_CREAT, 0600);
    CHECK(fd >= 0);
    char line[64];
    int n = snprintf(line, sizeof line, "%d %ld\n", key, (long)getpid());
    CHECK(n > 0 && (size_t)n < sizeof line);
    CHECK(write(fd, line, (size_t)n) == n); /* one write(2) per execution, appended atomically */
    CHECK(close(fd) == 0);
}

/* Propose every key in turn; run (log) and commit the ones this process wins. */
static void race(warden_handle *h, const char *agent) {
    for (int key = 0; key < KEYS; key++) {
        char payment[32], request[512];
        CHECK((size_t)snprintf(payment, sizeof payment, "pay_race_%d", key) < sizeof payment);
        request_for(request, sizeof request, payment, 100 + key, agent);
        warden_permit *p = NULL;
        warden_buf err = NO_BUF;
        warden_result got = warden_propose(h, STR(request), &p, &err);
        if (got == WARDEN_RESULT_OK) {
            log_execution(key);
            EXPECT(warden_permit_commit(p, LIT("{\"refund\":\"re\"}"), &err), WARDEN_RESULT_OK, &err);
            warden_permit_free(p);
        } else if (got == WARDEN_RESULT_DUPLICATE || got == WARDEN_RESULT_IN_PROGRESS) {
            CHECK(p == NULL);
            reset(&err);
        } else {
            EXPECT(got, WARDEN_RESULT_OK, &err);
        }
    }
}

static void wait_for(pid_t child, const char *what) {
    int status = 0;
    CHECK(waitpid(child, &status, 0) == child);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "%s (pid %ld) failed: status %d\n", what, (long)child, status);
        exit(1);
    }
}

/* A grandchild: the handle its parent (a child) opened is refused, as is the original one. */
static void grandchild(warden_handle *from_child) {
    holds_nothing_of_the_store();
    every_call_is_refused(from_child, inherited_permit);
    warden_buf err = NO_BUF, out = NO_BUF;
    FORKED(warden_chain_verify(inherited_handle, &out, &err));
    warden_handle *own = open_fresh();
    char request[512];
    request_for(request, sizeof request, "pay_grandchild", 300, "grandchild-agent");
    warden_permit *p = NULL;
    EXPECT(warden_propose(own, STR(request), &p, &err), WARDEN_RESULT_OK, &err);
    EXPECT(warden_permit_commit(p, LIT("{}"), &err), WARDEN_RESULT_OK, &err);
    warden_permit_free(p);
    warden_close(own);
    exit(0);
}

/* The first child: everything inherited is refused and untouched. */
static void inspecting_child(void) {
    holds_nothing_of_the_store();
    every_call_is_refused(inherited_handle, inherited_permit);
    /* Freeing the inherited permit records nothing (in the parent it would record AMBIGUOUS);
     * closing the inherited handle frees nothing of the parent's. */
    warden_permit_free(inherited_permit);
    warden_close(inherited_handle);
    holds_nothing_of_the_store();
    exit(0);
}

/* The second child: a handle of its own works (a client of the parent), and so does one in
 * a grandchild. */
static void opening_child(void) {
    warden_handle *own = open_fresh();
    CHECK(state_is(own, "refund:pay_before", "executing"));
    /* The parent's permit still holds the key: a proposal here is refused as in progress. */
    char request[512];
    request_for(request, sizeof request, "pay_before", 100, "child-agent");
    warden_permit *p = NULL;
    warden_buf err = NO_BUF;
    EXPECT(warden_propose(own, STR(request), &p, &err), WARDEN_RESULT_IN_PROGRESS, &err);
    reset(&err);
    CHECK(p == NULL);

    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        grandchild(own);
    }
    wait_for(pid, "the grandchild");
    CHECK(state_is(own, "refund:pay_grandchild", "committed"));
    warden_close(own);
    exit(0);
}

static void racing_child(int gate) {
    /* The inherited handle is refused here too; the child opens its own. */
    warden_buf out = NO_BUF, err = NO_BUF;
    FORKED(warden_effect_get(inherited_handle, LIT("refund:pay_before"), &out, &err));
    warden_handle *own = open_fresh();
    char go = 0;
    CHECK(read(gate, &go, 1) == 1);
    CHECK(close(gate) == 0);
    char agent[32];
    CHECK((size_t)snprintf(agent, sizeof agent, "child-%ld", (long)getpid()) < sizeof agent);
    race(own, agent);
    warden_close(own);
    exit(0);
}

int main(int argc, char **argv) {
    CHECK(argc == 2);
    CHECK((size_t)snprintf(store_path, sizeof store_path, "%s/state.redb", argv[1]) < sizeof store_path);
    CHECK((size_t)snprintf(config_path, sizeof config_path, "%s/warden.yaml", argv[1]) < sizeof config_path);
    CHECK((size_t)snprintf(lock_path, sizeof lock_path, "%s/state.redb.lock", argv[1]) < sizeof lock_path);
    CHECK((size_t)snprintf(log_path, sizeof log_path, "%s/executions.log", argv[1]) < sizeof log_path);
    inherited_handle = open_with_policy(argv[1]);
    warden_handle *h = inherited_handle;
    warden_buf err = NO_BUF;

    /* A permit in flight across the fork. */
    char request[512];
    request_for(request, sizeof request, "pay_before", 100, "parent-agent");
    EXPECT(warden_propose(h, STR(request), &inherited_permit, &err), WARDEN_RESULT_OK, &err);
    size_t events_before = events_in(h);

    pid_t inspector = fork();
    CHECK(inspector >= 0);
    if (inspector == 0) {
        inspecting_child();
    }
    wait_for(inspector, "the inspecting child");
    /* Its calls on the inherited handle and permit, and freeing them, wrote nothing. */
    CHECK(events_in(h) == events_before);
    CHECK(state_is(h, "refund:pay_before", "executing"));
    warden_buf receipts = NO_BUF;
    EXPECT(warden_receipts_list(h, 1, 0, &receipts, &err), WARDEN_RESULT_OK, &err);
    CHECK(count_of(&receipts, "\"seq\":") == 0);
    warden_buf_free(receipts);

    pid_t opener = fork();
    CHECK(opener >= 0);
    if (opener == 0) {
        opening_child();
    }
    wait_for(opener, "the opening child");

    /* The permit from before the forks is still the parent's to finish. */
    CHECK(state_is(h, "refund:pay_before", "executing"));
    EXPECT(warden_permit_commit(inherited_permit, LIT("{\"by\":\"parent\"}"), &err), WARDEN_RESULT_OK, &err);
    warden_permit_free(inherited_permit);
    inherited_permit = NULL;
    CHECK(state_is(h, "refund:pay_before", "committed"));

    /* The race: the parent (the owner) and RACERS children, each child with its own handle. */
    int gate[2];
    CHECK(pipe(gate) == 0);
    pid_t racers[RACERS];
    for (int i = 0; i < RACERS; i++) {
        racers[i] = fork();
        CHECK(racers[i] >= 0);
        if (racers[i] == 0) {
            CHECK(close(gate[1]) == 0);
            racing_child(gate[0]);
        }
    }
    CHECK(close(gate[0]) == 0);
    char go[RACERS] = {0};
    CHECK(write(gate[1], go, RACERS) == RACERS);
    CHECK(close(gate[1]) == 0);
    race(h, "parent-racer");
    for (int i = 0; i < RACERS; i++) {
        wait_for(racers[i], "a racing child");
    }

    /* Exactly one execution per key. */
    int runs[KEYS] = {0};
    int lines = 0;
    FILE *log = fopen(log_path, "r");
    CHECK(log != NULL);
    int key = 0;
    long pid = 0;
    while (fscanf(log, "%d %ld", &key, &pid) == 2) {
        CHECK(key >= 0 && key < KEYS);
        runs[key]++;
        lines++;
    }
    CHECK(fclose(log) == 0);
    for (int k = 0; k < KEYS; k++) {
        if (runs[k] != 1) {
            fprintf(stderr, "key %d ran %d times\n", k, runs[k]);
            exit(1);
        }
    }
    CHECK(lines == KEYS);

    /* Every key committed once, and the chain verifies. */
    warden_buf committed = NO_BUF;
    EXPECT(warden_effects_list(h, LIT("committed"), 0, &committed, &err), WARDEN_RESULT_OK, &err);
    CHECK(count_of(&committed, "\"effect_key\":") == KEYS + 2); /* + pay_before, pay_grandchild */
    warden_buf_free(committed);
    warden_buf chain = NO_BUF;
    EXPECT(warden_chain_verify(h, &chain, &err), WARDEN_RESULT_OK, &err);
    if (!buf_contains(&chain, "\"ok\":true")) {
        fprintf(stderr, "chain: %.*s\n", (int)chain.len, (const char *)chain.ptr);
        exit(1);
    }
    warden_buf_free(chain);

    warden_close(h);
    printf("fork: ok (%d keys, %d racing processes)\n", KEYS, RACERS + 1);
    return 0;
}
