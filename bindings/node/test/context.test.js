'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { setImmediate: yieldToLoop } = require('node:timers/promises');

const warden = require('..');
const { open } = require('./helpers');

test('concurrent calls each propose as their own principal (AsyncLocalStorage)', async (t) => {
  const { w } = open(t);
  const refund = w.protect('stripe.refund', () => 'ran');
  const agents = ['agent-a', 'agent-b', 'agent-c', 'agent-d'];
  // Interleave: every call yields to the event loop before proposing, so the contexts overlap.
  const refusals = await Promise.all(
    agents.map((agent, i) =>
      warden.withContext({ agent, user: `user-${i}` }, async () => {
        await yieldToLoop();
        return refund({ payment_id: `pay_ctx_${i}`, amount: 200_000 }).catch((e) => e);
      }),
    ),
  );
  for (const [i, refused] of refusals.entries()) {
    assert.ok(refused instanceof warden.ApprovalRequired, `got ${refused}`);
    const record = await w.approval(refused.requestId);
    assert.deepEqual(record.requested_by, { agent: agents[i], user: `user-${i}` });
  }
});

test('concurrent protected calls each see their own token', async (t) => {
  const { w } = open(t);
  const write = w.protect('ledger.write', async ({ entry }) => {
    const before = warden.idempotencyToken();
    await yieldToLoop();
    await new Promise((resolve) => setTimeout(resolve, 5));
    return { entry, before, after: warden.idempotencyToken() };
  });
  const results = await warden.withContext({ agent: 'support-agent' }, () =>
    Promise.all(Array.from({ length: 8 }, (_, i) => write({ entry: `c${i}` }))),
  );
  const tokens = new Set();
  for (const result of results) {
    assert.equal(result.before, result.after);
    tokens.add(result.before);
  }
  assert.equal(tokens.size, 8);
});

test('withContext nests: the inner principal wins and withApproval survives it', async (t) => {
  const { w } = open(t);
  const refund = w.protect('stripe.refund', () => 'ran');
  const unknownApproval = `apr_${'a'.repeat(32)}`;
  const [presented, required] = await warden.withContext({ agent: 'outer' }, () =>
    warden.withApproval(unknownApproval, () =>
      warden.withContext({ agent: 'inner', user: 'ada' }, async () => [
        await refund({ payment_id: 'pay_nest_1', amount: 200_000 }).catch((e) => e),
        await warden.withContext({ agent: 'innermost' }, () =>
          refund({ payment_id: 'pay_nest_2', amount: 200_000 }).catch((e) => e),
        ),
      ]),
    ),
  );
  assert.ok(presented instanceof warden.ApprovalMismatch, `the outer approval was presented: ${presented}`);
  assert.equal(presented.approvalId, unknownApproval);
  assert.ok(required instanceof warden.ApprovalMismatch, `still presented one level deeper: ${required}`);
  const plain = await warden.withContext({ agent: 'inner', user: 'ada' }, () =>
    refund({ payment_id: 'pay_nest_3', amount: 200_000 }).catch((e) => e),
  );
  assert.ok(plain instanceof warden.ApprovalRequired, `got ${plain}`);
  assert.deepEqual((await w.approval(plain.requestId)).requested_by, { agent: 'inner', user: 'ada' });
});

test('withContext and withApproval check their arguments and return what fn returns', () => {
  assert.throws(() => warden.withContext({}, () => {}), TypeError);
  assert.throws(() => warden.withContext({ agent: 'a' }), TypeError);
  assert.throws(() => warden.withApproval('', () => {}), TypeError);
  assert.equal(warden.withContext({ agent: 'a' }, () => 42), 42);
  assert.equal(warden.withApproval('apr_x', () => 7), 7);
});

test('the approval presented by withApproval reaches only the calls inside it', async (t) => {
  const { w } = open(t);
  const refund = w.protect('stripe.refund', () => 'ran');
  const args = { payment_id: 'pay_ctx_apr', amount: 200_000 };
  const ctx = (fn) => warden.withContext({ agent: 'support-agent', user: 'ada' }, fn);
  const required = await ctx(() => refund(args)).catch((e) => e);
  await w.approve(required.requestId, { by: 'ops:bob' });
  const [outside, inside] = await Promise.all([
    ctx(() => refund(args)).catch((e) => e),
    ctx(() => warden.withApproval(required.requestId, async () => {
      await yieldToLoop();
      return refund(args);
    })),
  ]);
  assert.ok(
    outside instanceof warden.ApprovalRequired || outside instanceof warden.Duplicate,
    `without the approval the call is not authorized: ${outside}`,
  );
  assert.equal(inside, 'ran');
});
