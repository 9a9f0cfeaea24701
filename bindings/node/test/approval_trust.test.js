'use strict';
// Approvals a person can trust, from Node: the request shows the arguments, every spelling of
// the requester is refused, M-of-N with verified roles, preconditions, the hook, and waiting in
// the library.
const test = require('node:test');
const assert = require('node:assert/strict');

const warden = require('..');
const { open, ada } = require('./helpers');

const MN_POLICY = `schema: warden/v1
environment: test
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    rules:
      - when: { amount_lte: 1000 }
        decision: allow
      - when: { amount_lte: 100000 }
        decision: approve
      - decision: approve
        approval: { required: 2, roles: [finance, risk] }
`;

async function ask(call) {
  const refused = await ada(call).catch((e) => e);
  assert.ok(refused instanceof warden.ApprovalRequired, `expected ApprovalRequired, got ${refused}`);
  return refused.requestId;
}

const verified = (...roles) => ({ issuer: 'https://id.example', claims: { roles } });

test('the request shows the arguments it binds from approval() and pending()', async (t) => {
  const { w } = open(t);
  const refund = w.protect('stripe.refund', () => assert.fail('must not run'));
  const id = await ask(() => refund({ payment_id: 'pay_9', amount: 200_000 }));
  for (const record of [await w.approval(id), (await w.pending())[0]]) {
    assert.deepEqual(record.arguments, { amount: 200_000, payment_id: 'pay_9' });
    assert.equal(record.requested_by.user, 'ada');
    assert.equal(record.requester_identity.verified, false);
    assert.equal(record.environment, 'test');
    assert.equal(record.rule, 'rule[1]');
    assert.deepEqual(record.when, { amount_gte: 0, amount_lte: 500000 });
    assert.match(record.policy_hash, /^sha256:/);
    assert.equal(record.required, 1);
  }
});

test('every spelling of the requester is refused', async (t) => {
  const { w } = open(t);
  const refund = w.protect('stripe.refund', () => assert.fail('must not run'));
  const id = await ask(() => refund({ payment_id: 'pay_s', amount: 200_000 }));
  for (const by of ['ada', 'ADA', 'ada ', 'cli:ada', 'ａｄａ', 'support-agent']) {
    const refused = await w.approve(id, { by }).catch((e) => e);
    assert.ok(refused instanceof warden.ApprovalMismatch, `${by}: got ${refused}`);
    assert.equal(refused.reason, 'approver_is_requester', by);
  }
  const viaHost = await w.approve(id, { by: 'ADA', agent: 'slack', verified: verified() }).catch((e) => e);
  assert.equal(viaHost.reason, 'approver_is_requester');
  assert.deepEqual((await w.approval(id)).votes, []);
});

test('the requester is refused under every principal form and look-alike; unreadable names by name', async (t) => {
  const { w } = open(t);
  const refund = w.protect('stripe.refund', () => assert.fail('must not run'));
  const id = await ask(() => refund({ payment_id: 'pay_f', amount: 200_000 }));
  const spellings = [
    'ada:',
    'support-agent:',
    'support-agent/ada',
    'ada/support-agent',
    'support\u2011agent:',
    'ad\u0430',
  ];
  for (const by of spellings) {
    // Asserted (the C grant and deny), and through the answer call (verified, no agent given).
    const answers = [
      () => w.approve(id, { by }),
      () => w.deny(id, { by }),
      () => w.approve(id, { by, verified: verified() }),
    ];
    for (const answer of answers) {
      const refused = await answer().catch((e) => e);
      assert.equal(refused.reason, 'approver_is_requester', `${by}: ${refused}`);
    }
  }
  for (const by of ['ops:bob:x', 'b\u034fob', 'ops\uff1abob']) {
    for (const options of [{ by }, { by, verified: verified() }]) {
      const refused = await w.approve(id, options).catch((e) => e);
      assert.equal(refused.code, 'WARDEN_RESULT_INVALID_INPUT', `${by}: ${refused}`);
      assert.match(refused.message, /AGENT:USER/, by);
    }
  }
  assert.deepEqual((await w.approval(id)).votes, []);
});

test('M-of-N counts one verified identity once under any name', async (t) => {
  const { w } = open(t, `schema: warden/v1
environment: test
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    rules:
      - decision: approve
        approval: { required: 2 }
`);
  const refund = w.protect('stripe.refund', () => 'refunded');
  const id = await ask(() => refund({ payment_id: 'pay_two', amount: 50 }));
  const identity = (sub) => ({ issuer: 'https://idp.test', claims: { sub } });
  const first = await w.approve(id, { by: 'bob', agent: 'slack', verified: identity('u-123') });
  assert.deepEqual([first.status, first.grants], ['pending', 1]);
  const again = await w.approve(id, { by: 'robert', agent: 'teams', verified: identity('u-123') }).catch((e) => e);
  assert.equal(again.reason, 'already_answered');
  const second = await w.approve(id, { by: 'slack:carol', verified: identity('u-456') });
  assert.deepEqual([second.status, second.grants], ['granted', 2]);
});

test('M-of-N counts distinct verified approvers holding a role', async (t) => {
  const { w } = open(t, MN_POLICY);
  const refund = w.protect('stripe.refund', () => 'refunded');
  const args = { payment_id: 'pay_big', amount: 900_000 };
  const id = await ask(() => refund(args));
  const first = await w.approve(id, { by: 'bob', agent: 'slack', verified: verified('finance') });
  assert.deepEqual([first.status, first.grants, first.required], ['pending', 1, 2]);
  const reasons = [];
  for (const options of [
    { by: 'BOB', agent: 'teams', verified: verified('risk') },
    { by: 'ops:dave' },
    { by: 'erin', agent: 'slack', verified: verified('support') },
  ]) {
    reasons.push((await w.approve(id, options).catch((e) => e)).reason);
  }
  assert.deepEqual(reasons, ['already_answered', 'approver_not_verified', 'approver_lacks_role']);
  const second = await w.approve(id, { by: 'carol', agent: 'slack', verified: verified('risk') });
  assert.deepEqual([second.status, second.grants], ['granted', 2]);
  assert.deepEqual(second.votes.map((v) => [v.user, v.verified]), [['bob', true], ['carol', true]]);
  assert.equal(await ada(() => warden.withApproval(id, () => refund(args))), 'refunded');
});

test('a changed precondition refuses and leaves the approval granted', async (t) => {
  const { w } = open(t);
  const world = { balance: 500 };
  const seen = [];
  const refund = w.protect('stripe.refund', () => 'refunded', {
    precondition: async (action) => {
      seen.push(action);
      return { ...world };
    },
  });
  const args = { payment_id: 'pay_p', amount: 200_000 };
  const id = await ask(() => refund(args));
  assert.equal(seen[0].name, 'stripe.refund');
  assert.deepEqual(seen[0].arguments, args);
  assert.match((await w.approval(id)).precondition, /^sha256:/);
  await w.approve(id, { by: 'ops:bob' });
  world.balance = 0;
  const changed = await ada(() => warden.withApproval(id, () => refund(args))).catch((e) => e);
  assert.ok(changed instanceof warden.ApprovalMismatch, `got ${changed}`);
  assert.equal(changed.reason, 'precondition_changed');
  assert.equal((await w.approval(id)).status, 'granted');
  world.balance = 500;
  assert.equal(await ada(() => warden.withApproval(id, () => refund(args))), 'refunded');
  assert.equal((await w.approval(id)).status, 'consumed');
});

test('the hook hears each new request once, and what it throws never fails the action', async (t) => {
  const { w } = open(t);
  const heard = [];
  let resolveHeard;
  const heardOnce = new Promise((resolve) => {
    resolveHeard = resolve;
  });
  const logged = [];
  const original = console.error;
  console.error = (...args) => logged.push(args.join(' '));
  t.after(() => {
    console.error = original;
  });
  w.onApprovalRequest((request) => {
    heard.push(request.approval_id);
    resolveHeard();
    throw new Error('the pager is down');
  });
  const refund = w.protect('stripe.refund', () => assert.fail('must not run'));
  const first = await ask(() => refund({ payment_id: 'pay_h', amount: 200_000 }));
  assert.equal(await ask(() => refund({ payment_id: 'pay_h', amount: 200_000 })), first);
  // The hook is delivered from libwarden's notification thread through a weak handle (an
  // idle hook never keeps the process alive), so the wait keeps the event loop alive itself.
  let bound;
  const waited = new Promise((_, reject) => {
    bound = setTimeout(() => reject(new Error('the hook was not called within 10 s')), 10_000);
  });
  await Promise.race([heardOnce, waited]);
  clearTimeout(bound);
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.deepEqual(heard, [first]);
  assert.ok(logged.some((line) => line.includes('the pager is down')), logged.join('\n'));
  w.onApprovalRequest(null);
});

test('waitForAnswer and waitMs wait in the library', async (t) => {
  const { w } = open(t);
  const refund = w.protect('stripe.refund', () => 'refunded', { waitMs: 30_000 });
  const args = { payment_id: 'pay_w', amount: 200_000 };
  const running = ada(() => refund(args));
  let id;
  while (!id) {
    const pending = await w.pending();
    id = pending[0]?.approval_id;
    if (!id) await new Promise((resolve) => setTimeout(resolve, 5));
  }
  assert.equal((await w.waitForAnswer(id, 0)).status, 'pending');
  await w.approve(id, { by: 'ops:bob' });
  assert.equal(await running, 'refunded');
  assert.equal((await w.waitForAnswer(id, 1000)).status, 'consumed');
  assert.equal(await w.waitForAnswer(`apr_${'0'.repeat(32)}`, 0), null);
  const tooLong = await w.waitForAnswer(id, 86_400_001).catch((e) => e);
  assert.ok(tooLong instanceof warden.InvalidInput, `got ${tooLong}`);
});
