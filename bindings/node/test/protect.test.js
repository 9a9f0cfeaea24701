'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');

const warden = require('..');
const { open, ada } = require('./helpers');

test('a committed refund is refused on retry as a duplicate', async (t) => {
  const { w } = open(t);
  let calls = 0;
  const refund = w.protect('stripe.refund', async ({ payment_id, amount }) => {
    calls += 1;
    return { refund: `re_${payment_id}`, amount };
  });
  const first = await ada(() => refund({ payment_id: 'pay_1', amount: 1200 }));
  assert.deepEqual(first, { refund: 're_pay_1', amount: 1200 });
  const retry = await ada(() => refund({ payment_id: 'pay_1', amount: 1200 })).catch((e) => e);
  assert.ok(retry instanceof warden.Duplicate, `expected Duplicate, got ${retry}`);
  assert.ok(retry instanceof warden.Refused);
  assert.ok(retry instanceof warden.WardenError);
  assert.equal(retry.state, 'committed');
  assert.equal(retry.code, 'WARDEN_RESULT_DUPLICATE');
  assert.equal(retry.reason, 'duplicate');
  assert.equal(retry.effectKey, 'refund:pay_1');
  assert.equal(calls, 1);
  const effect = await w.effect('refund:pay_1');
  assert.equal(effect.state, 'committed');
  assert.deepEqual(effect.result, { refund: 're_pay_1', amount: 1200 });
});

test('NotExecuted records FAILED and the retry runs as attempt 2', async (t) => {
  const { w } = open(t);
  const tokens = [];
  let calls = 0;
  const refund = w.protect('stripe.refund', async () => {
    calls += 1;
    tokens.push(warden.idempotencyToken());
    if (calls === 1) throw new warden.NotExecuted('card network said no before charging');
    return 'ok';
  });
  const failed = await ada(() => refund({ payment_id: 'pay_2', amount: 10 })).catch((e) => e);
  assert.ok(failed instanceof warden.NotExecuted, `the NotExecuted is rethrown, got ${failed}`);
  assert.equal((await w.effect('refund:pay_2')).state, 'failed');
  assert.equal(await ada(() => refund({ payment_id: 'pay_2', amount: 10 })), 'ok');
  const effect = await w.effect('refund:pay_2');
  assert.equal(effect.state, 'committed');
  assert.equal(effect.attempt, 2);
  assert.equal(calls, 2);
  assert.equal(tokens.length, 2);
  assert.notEqual(tokens[0], tokens[1], 'each attempt has its own idempotency token');
});

test('any other throw records AMBIGUOUS, is rethrown unchanged, and the retry is refused', async (t) => {
  const { w } = open(t);
  const lost = new Error('connection reset after the request was sent');
  let calls = 0;
  const refund = w.protect('stripe.refund', async () => {
    calls += 1;
    throw lost;
  });
  const thrown = await ada(() => refund({ payment_id: 'pay_3', amount: 10 })).catch((e) => e);
  assert.equal(thrown, lost, 'the very same error object');
  assert.equal((await w.effect('refund:pay_3')).state, 'ambiguous');
  const retry = await ada(() => refund({ payment_id: 'pay_3', amount: 10 })).catch((e) => e);
  assert.ok(retry instanceof warden.Ambiguous, `expected Ambiguous, got ${retry}`);
  assert.equal(retry.code, 'WARDEN_RESULT_AMBIGUOUS');
  assert.equal(retry.reason, 'ambiguous');
  assert.equal(retry.effectKey, 'refund:pay_3');
  assert.equal(calls, 1);
});

test('a thrown non-Error value is rethrown unchanged too', async (t) => {
  const { w } = open(t);
  const write = w.protect('ledger.write', () => {
    throw 'plain string'; // eslint-disable-line no-throw-literal
  });
  await assert.rejects(ada(() => write({ entry: 'e1' })), (e) => e === 'plain string');
  assert.equal((await w.effect('ledger:e1')).state, 'ambiguous');
});

test('a human resolution of an AMBIGUOUS effect decides the retry', async (t) => {
  const { w } = open(t);
  const write = w.protect('ledger.write', async ({ entry }) => {
    if (entry !== 'ok') throw new Error('timeout');
    return null;
  });
  await assert.rejects(ada(() => write({ entry: 'e2' })), /timeout/);
  const resolved = await w.resolve('ledger:e2', 'failed', { by: 'ops:bob' });
  assert.equal(resolved.state, 'failed');
  assert.equal(resolved.resolved_by, 'ops:bob');
  const again = await w.resolve('ledger:e2', 'committed', { by: 'ops:bob' }).catch((e) => e);
  assert.ok(again instanceof warden.NotResolvable, `only AMBIGUOUS moves, got ${again}`);
  assert.equal(again.code, 'WARDEN_RESULT_NOT_RESOLVABLE');
});

test('a resolution bound to an attempt moves only that attempt', async (t) => {
  const { w } = open(t);
  const write = w.protect('ledger.write', async () => {
    throw new Error('timeout');
  });
  await assert.rejects(ada(() => write({ entry: 'e7' })), /timeout/);
  await w.resolve('ledger:e7', 'failed', { by: 'ops:bob', attempt: 1 });
  await assert.rejects(ada(() => write({ entry: 'e7' })), /timeout/);
  const before = await w.effect('ledger:e7');
  assert.deepEqual([before.state, before.attempt], ['ambiguous', 2]);
  const stale = await w.resolve('ledger:e7', 'committed', { by: 'ops:bob', attempt: 1 }).catch((e) => e);
  assert.ok(stale instanceof warden.InvalidInput, `expected InvalidInput, got ${stale}`);
  assert.match(stale.message, /at attempt 2, not at attempt 1/);
  assert.deepEqual(await w.effect('ledger:e7'), before);
  for (const bad of [0, -1, 1.5, '2', 2 ** 32, true]) {
    await assert.rejects(w.resolve('ledger:e7', 'committed', { by: 'ops:bob', attempt: bad }), TypeError);
  }
  assert.equal((await w.resolve('ledger:e7', 'committed', { by: 'ops:bob', attempt: 2 })).state, 'committed');
});

test('reconcile answers for an AMBIGUOUS effect: not_executed lets the call run again', async (t) => {
  const { w } = open(t);
  let calls = 0;
  const asked = [];
  const flaky = w.protect(
    'ledger.write',
    async () => {
      calls += 1;
      if (calls === 1) throw new Error('lost reply');
      return 'written';
    },
    {
      reconcile: async (key) => {
        asked.push(key);
        return 'not_executed';
      },
    },
  );
  await assert.rejects(ada(() => flaky({ entry: 'e3' })), /lost reply/);
  assert.equal(await ada(() => flaky({ entry: 'e3' })), 'written');
  assert.deepEqual(asked, ['ledger:e3']);
  assert.equal(calls, 2);
});

test('reconcile answering unknown leaves the refusal standing', async (t) => {
  const { w } = open(t);
  let calls = 0;
  const flaky = w.protect(
    'ledger.write',
    async () => {
      calls += 1;
      throw new Error('lost reply');
    },
    { reconcile: () => 'unknown' },
  );
  await assert.rejects(ada(() => flaky({ entry: 'e4' })), /lost reply/);
  await assert.rejects(ada(() => flaky({ entry: 'e4' })), warden.Ambiguous);
  assert.equal(calls, 1);
});

test('a reconcile answer the library does not know is InvalidInput and moves nothing', async (t) => {
  const { w } = open(t);
  let calls = 0;
  const flaky = w.protect(
    'ledger.write',
    async () => {
      calls += 1;
      throw new Error('lost reply');
    },
    { reconcile: () => 'maybe' },
  );
  await assert.rejects(ada(() => flaky({ entry: 'e6' })), /lost reply/);
  await assert.rejects(ada(() => flaky({ entry: 'e6' })), warden.InvalidInput);
  assert.equal((await w.effect('ledger:e6')).state, 'ambiguous');
  assert.equal(calls, 1);
});

test('reconcile answering committed turns the retry into a duplicate', async (t) => {
  const { w } = open(t);
  const flaky = w.protect(
    'ledger.write',
    async () => {
      throw new Error('lost reply');
    },
    { reconcile: () => 'committed' },
  );
  await assert.rejects(ada(() => flaky({ entry: 'e5' })), /lost reply/);
  const retry = await ada(() => flaky({ entry: 'e5' })).catch((e) => e);
  assert.ok(retry instanceof warden.Duplicate, `got ${retry}`);
  assert.equal(retry.state, 'committed');
  assert.equal((await w.effect('ledger:e5')).resolved_by, 'reconcile:ledger.write');
});

test('a second call while the first holds the key is a Duplicate in progress', async (t) => {
  const { w } = open(t);
  let release;
  const gate = new Promise((resolve) => {
    release = resolve;
  });
  let entered;
  const inside = new Promise((resolve) => {
    entered = resolve;
  });
  const slow = w.protect('ledger.write', async () => {
    entered();
    await gate;
    return 'done';
  });
  const first = ada(() => slow({ entry: 'held' }));
  await inside;
  const second = await ada(() => slow({ entry: 'held' })).catch((e) => e);
  assert.ok(second instanceof warden.Duplicate, `got ${second}`);
  assert.equal(second.state, 'in_progress');
  assert.equal(second.code, 'WARDEN_RESULT_IN_PROGRESS');
  assert.equal(second.reason, 'in_progress');
  release();
  assert.equal(await first, 'done');
});

test('the protected function receives the canonical arguments and BigInts survive', async (t) => {
  const { w } = open(t);
  let seen;
  const write = w.protect('ledger.write', async (args) => {
    seen = args;
    return { echoed: args.big };
  });
  const big = 2n ** 70n;
  const result = await ada(() => write({ entry: 'big', big, nested: { z: 1, a: [-(2n ** 64n), 3] } }));
  assert.equal(result.echoed, big);
  assert.equal(typeof seen.big, 'bigint');
  assert.equal(seen.big, big);
  assert.deepEqual(seen.nested, { a: [-(2n ** 64n), 3], z: 1 });
  assert.deepEqual(Object.keys(seen), ['big', 'entry', 'nested'], 'canonical key order');
  const stored = await w.effect('ledger:big');
  assert.equal(stored.result.echoed, big);
});

test('idempotencyToken and extendLease work inside a protected call only', async (t) => {
  const { w } = open(t);
  assert.throws(() => warden.idempotencyToken(), (e) => e instanceof warden.InvalidInput && /inside a protected call/.test(e.message));
  await assert.rejects(warden.extendLease(1000), warden.InvalidInput);
  const write = w.protect('ledger.write', async () => {
    const token = warden.idempotencyToken();
    const before = await w.effect('ledger:lease');
    const expires = await warden.extendLease(3_600_000);
    const after = await w.effect('ledger:lease');
    return { token, before: before.lease_expires_at, after: after.lease_expires_at, expires };
  });
  const out = await ada(() => write({ entry: 'lease' }));
  assert.equal(typeof out.token, 'string');
  assert.ok(out.token.length > 0);
  assert.ok(out.after > out.before, `the lease moved on: ${out.before} -> ${out.after}`);
  assert.equal(out.expires, out.after);
});

test('an action without an effect key runs, may repeat, and has no idempotency token', async (t) => {
  const { w } = open(t);
  const read = w.protect('customer.read', async ({ id }) => {
    assert.throws(() => warden.idempotencyToken(), warden.InvalidInput);
    return { id };
  });
  assert.deepEqual(await ada(() => read({ id: 'cus_1' })), { id: 'cus_1' });
  assert.deepEqual(await ada(() => read({ id: 'cus_1' })), { id: 'cus_1' }, 'reads may repeat');
});

test('a result that is not JSON is committed as its inspection, marked as text', async (t) => {
  const { w } = open(t);
  const circular = { name: 'loop' };
  circular.self = circular;
  const write = w.protect('ledger.write', () => circular);
  assert.equal(await ada(() => write({ entry: 'circular' })), circular, 'the caller gets the very value');
  const effect = await w.effect('ledger:circular');
  assert.equal(effect.state, 'committed');
  assert.equal(effect.result.warden_result, 'text');
  assert.match(effect.result.excerpt, /name: 'loop'/);
});

test('a result nested too deep is committed in the marked form with its hash', async (t) => {
  const { w } = open(t);
  let deep = 'bottom';
  for (let i = 0; i < 200; i++) deep = [deep];
  const write = w.protect('ledger.write', () => deep);
  assert.equal(await ada(() => write({ entry: 'deep' })), deep);
  const effect = await w.effect('ledger:deep');
  assert.equal(effect.state, 'committed', 'it ran, so it is COMMITTED, not AMBIGUOUS');
  assert.equal(effect.result.warden_result, 'too_deep');
  assert.ok(effect.result.excerpt.startsWith('[[[['));
});

test('arguments that are not JSON are InvalidInput before anything is proposed', async (t) => {
  const { w } = open(t);
  const loop = {};
  loop.loop = loop;
  let calls = 0;
  const write = w.protect('ledger.write', () => {
    calls += 1;
  });
  await assert.rejects(ada(() => write({ entry: 'x', loop })), warden.InvalidInput);
  // A non-finite number has no JSON form (a finite float is a number warden/v1 takes).
  const refused = await ada(() => write({ entry: 'x', amount: Infinity })).catch((e) => e);
  assert.ok(refused instanceof warden.InvalidInput, `Infinity is refused by the library: ${refused}`);
  assert.equal(calls, 0);
  assert.equal(await w.effect('ledger:x'), null);
});

test('refusals from the policy are Denied with the reason', async (t) => {
  const { w } = open(t);
  let calls = 0;
  const refund = w.protect('stripe.refund', () => {
    calls += 1;
  });
  const tooBig = await ada(() => refund({ payment_id: 'pay_big', amount: 9_000_000 })).catch((e) => e);
  assert.ok(tooBig instanceof warden.Denied, `got ${tooBig}`);
  assert.equal(tooBig.code, 'WARDEN_RESULT_DENIED');
  const unknown = await ada(() => w.protect('wire.transfer', () => {})({})).catch((e) => e);
  assert.ok(unknown instanceof warden.Denied);
  assert.equal(unknown.reason, 'unknown_action');
  const anonymous = await refund({ payment_id: 'pay_x', amount: 1 }).catch((e) => e);
  // A programming error, not a denial: code that catches Denied does not swallow it.
  assert.ok(anonymous instanceof warden.InvalidInput && !(anonymous instanceof warden.Denied), `got ${anonymous}`);
  assert.equal(anonymous.code, 'WARDEN_RESULT_INVALID_INPUT');
  assert.equal(anonymous.reason, 'no_principal');
  assert.match(anonymous.message, /withContext\(/);
  assert.equal(calls, 0);
});

test('protect checks its own arguments', async (t) => {
  const { w } = open(t);
  assert.throws(() => w.protect('', () => {}), TypeError);
  assert.throws(() => w.protect('ledger.write', 'not a function'), TypeError);
  assert.throws(() => w.protect('ledger.write', () => {}, { leaseMs: -1 }), TypeError);
  const write = w.protect('ledger.write', () => {});
  await assert.rejects(ada(() => write([1, 2])), TypeError);
});

test('a signal aborted before the call proposes nothing; aborted on the way, the retry runs', async (t) => {
  const { w } = open(t);
  let calls = 0;
  const refund = w.protect('stripe.refund', async ({ payment_id }) => {
    calls += 1;
    return `refunded ${payment_id}`;
  });
  const before = new AbortController();
  before.abort(new Error('the user went away'));
  await assert.rejects(ada(() => refund({ payment_id: 'pay_sig', amount: 5 }, { signal: before.signal })), (e) => e === before.signal.reason);
  assert.equal(await w.effect('refund:pay_sig'), null, 'aborted before the call: nothing was proposed');
  await assert.rejects(ada(() => refund({ payment_id: 'pay_sig', amount: 5 }, { signal: 'stop' })), TypeError);
  // Aborted while the proposal is on its way (here: while the library asks the reconcile hook
  // about a lost first attempt, then retries): FAILED (not executed), so a retry runs.
  const lost = w.protect('stripe.refund', () => {
    throw new Error('the reply was lost');
  });
  await assert.rejects(ada(() => lost({ payment_id: 'pay_sig', amount: 5 })), /the reply was lost/);
  const onTheWay = new AbortController();
  const late = w.protect('stripe.refund', () => assert.fail('must not run'), {
    reconcile: () => {
      onTheWay.abort();
      return 'not_executed';
    },
  });
  await assert.rejects(ada(() => late({ payment_id: 'pay_sig', amount: 5 }, { signal: onTheWay.signal })), (e) => e === onTheWay.signal.reason);
  assert.equal((await w.effect('refund:pay_sig')).state, 'failed');
  assert.equal(await ada(() => refund({ payment_id: 'pay_sig', amount: 5 })), 'refunded pay_sig');
  // Aborted once the function runs: the function's business; its return commits.
  const during = new AbortController();
  const running = w.protect('stripe.refund', ({ payment_id }) => {
    during.abort();
    return `ran ${payment_id}`;
  });
  assert.equal(await ada(() => running({ payment_id: 'pay_sig2', amount: 5 }, { signal: during.signal })), 'ran pay_sig2');
  assert.equal((await w.effect('refund:pay_sig2')).state, 'committed');
  assert.equal(calls, 1);
});
