'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');

const warden = require('..');
const { open, ada } = require('./helpers');

async function requireApproval(refund, args) {
  const refused = await ada(() => refund(args)).catch((e) => e);
  assert.ok(refused instanceof warden.ApprovalRequired, `expected ApprovalRequired, got ${refused}`);
  return refused;
}

test('approval required, approved by ops:bob, then presented: the refund runs once', async (t) => {
  const { w } = open(t);
  let calls = 0;
  const refund = w.protect('stripe.refund', async ({ payment_id }) => {
    calls += 1;
    return { refund: `re_${payment_id}` };
  });
  const args = { payment_id: 'pay_9', amount: 200_000 };
  const required = await requireApproval(refund, args);
  assert.equal(required.code, 'WARDEN_RESULT_APPROVAL_REQUIRED');
  assert.equal(required.reason, 'approval_required');
  assert.match(required.requestId, /^apr_[0-9a-f]{32}$/);
  assert.equal(typeof required.expiresAt, 'string');
  assert.equal(calls, 0);

  const pending = await w.pending();
  assert.deepEqual(
    pending.map((r) => r.approval_id),
    [required.requestId],
  );
  assert.equal(pending[0].requested_by.agent, 'support-agent');

  const granted = await w.approve(required.requestId, { by: 'ops:bob' });
  assert.equal(granted.status, 'granted');
  assert.equal(granted.approver, 'ops:bob');
  assert.deepEqual(await w.pending(), []);

  const result = await ada(() => warden.withApproval(required.requestId, () => refund(args)));
  assert.deepEqual(result, { refund: 're_pay_9' });
  assert.equal(calls, 1);
  assert.equal((await w.approval(required.requestId)).status, 'consumed');

  const replay = await ada(() => warden.withApproval(required.requestId, () => refund({ ...args, payment_id: 'pay_10' }))).catch((e) => e);
  assert.ok(replay instanceof warden.ApprovalMismatch, `an approval authorizes one exact action, got ${replay}`);
  assert.equal(replay.code, 'WARDEN_RESULT_APPROVAL_MISMATCH');
  assert.equal(replay.approvalId, required.requestId);
});

test('the requester cannot approve its own request', async (t) => {
  const { w } = open(t);
  const refund = w.protect('stripe.refund', () => 'ran');
  const required = await requireApproval(refund, { payment_id: 'pay_11', amount: 200_000 });
  for (const by of ['support-agent', 'ada', 'ADA']) {
    const refused = await w.approve(required.requestId, { by }).catch((e) => e);
    assert.ok(refused instanceof warden.ApprovalMismatch, `${by}: got ${refused}`);
    assert.equal(refused.reason, 'approver_is_requester');
    assert.equal(refused.code, 'WARDEN_RESULT_APPROVAL_MISMATCH');
  }
  assert.equal((await w.approval(required.requestId)).status, 'pending');
});

test('a denied approval refuses the action when presented', async (t) => {
  const { w } = open(t);
  let calls = 0;
  const refund = w.protect('stripe.refund', () => {
    calls += 1;
  });
  const args = { payment_id: 'pay_12', amount: 200_000 };
  const required = await requireApproval(refund, args);
  const denied = await w.deny(required.requestId, { by: 'ops:bob', reason: 'customer already refunded by hand' });
  assert.equal(denied.status, 'denied');
  const refused = await ada(() => warden.withApproval(required.requestId, () => refund(args))).catch((e) => e);
  assert.ok(refused instanceof warden.Denied, `got ${refused}`);
  assert.equal(refused.reason, 'approval_denied');
  assert.equal(calls, 0);
});

test('an approval mutated to another amount is refused', async (t) => {
  const { w } = open(t);
  const refund = w.protect('stripe.refund', () => 'ran');
  const required = await requireApproval(refund, { payment_id: 'pay_13', amount: 200_000 });
  await w.approve(required.requestId, { by: 'ops:bob' });
  const mutated = await ada(() =>
    warden.withApproval(required.requestId, () => refund({ payment_id: 'pay_13', amount: 400_000 })),
  ).catch((e) => e);
  assert.ok(mutated instanceof warden.ApprovalMismatch, `got ${mutated}`);
  assert.equal(mutated.reason, 'mismatch');
  assert.equal((await w.approval(required.requestId)).status, 'granted', 'still usable for what the human saw');
});

test('waitMs waits for the human and proceeds once granted', async (t) => {
  const { w } = open(t);
  let calls = 0;
  const refund = w.protect(
    'stripe.refund',
    async () => {
      calls += 1;
      return 'refunded';
    },
    { waitMs: 60_000 },
  );
  const call = ada(() => refund({ payment_id: 'pay_14', amount: 200_000 }));
  let request;
  while (!request) {
    [request] = await w.pending();
  }
  assert.equal(calls, 0);
  await w.approve(request.approval_id, { by: 'ops:bob' });
  assert.equal(await call, 'refunded');
  assert.equal(calls, 1);
});

test('waitMs ends in the refusal when the human denies', async (t) => {
  const { w } = open(t);
  const refund = w.protect('stripe.refund', () => 'ran', { waitMs: 60_000 });
  const call = ada(() => refund({ payment_id: 'pay_15', amount: 200_000 })).catch((e) => e);
  let request;
  while (!request) {
    [request] = await w.pending();
  }
  await w.deny(request.approval_id, { by: 'ops:bob' });
  const refused = await call;
  assert.ok(refused instanceof warden.Denied, `got ${refused}`);
  assert.equal(refused.reason, 'approval_denied');
});

test('an unanswered approval is still ApprovalRequired when waitMs runs out', async (t) => {
  const { w } = open(t);
  const refund = w.protect('stripe.refund', () => 'ran', { waitMs: 1 });
  const refused = await ada(() => refund({ payment_id: 'pay_16', amount: 200_000 })).catch((e) => e);
  assert.ok(refused instanceof warden.ApprovalRequired, `got ${refused}`);
});

test('approving an unknown request is refused', async (t) => {
  const { w } = open(t);
  const refused = await w.approve(`apr_${'0'.repeat(32)}`, { by: 'ops:bob' }).catch((e) => e);
  assert.ok(refused instanceof warden.Refused, `got ${refused}`);
  assert.equal(await w.approval(`apr_${'0'.repeat(32)}`), null);
});
