'use strict';
// Scoped grants through the C ABI: approveScoped grants a request and lets the next proposals of
// its shape run without a human until its uses run out; revokeScopedGrant ends one early;
// scopedGrants lists them. Every refusal names what was wrong and changes nothing.
const test = require('node:test');
const assert = require('node:assert/strict');

const warden = require('..');
const { open } = require('./helpers');

// Refunds of at most 10000 ask a human and allow a scoped grant of at most 3 uses and 30
// minutes; larger ones ask a human and allow none.
const POLICY = `schema: warden/v1
environment: test
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    rules:
      - when: { amount_lte: 10000 }
        decision: approve
        approval: { scoped: { max_uses: 3, max_minutes: 30 } }
      - decision: approve
`;

// The customer fixed, the amount at most 5000.
const SCOPE = { uses: 2, minutes: 30, fixed: ['/customer_id'], atMost: { '/amount': 5000 } };

const asAda = (fn) => warden.withContext({ agent: 'refund-agent', user: 'ada' }, fn);

function setup(t) {
  const { w } = open(t, POLICY);
  const ran = [];
  const refund = w.protect('stripe.refund', ({ payment_id }) => {
    ran.push(payment_id);
    return payment_id;
  });
  const call = (payment, amount) => asAda(() => refund({ payment_id: payment, customer_id: 'cus_1', amount }));
  const asks = async (payment, amount) => {
    const refused = await call(payment, amount).catch((e) => e);
    assert.ok(refused instanceof warden.ApprovalRequired, `${payment}: expected ApprovalRequired, got ${refused}`);
    return refused.requestId;
  };
  // Runs the refund with no approval presented; the grant its receipt names.
  const coveredBy = async (payment, amount) => {
    assert.equal(await call(payment, amount), payment);
    const receipts = await w.receipts();
    const last = receipts[receipts.length - 1];
    assert.equal(last.arguments.payment_id, payment);
    assert.equal(last.approval_id, null);
    return last.scoped_grant_id;
  };
  const approved = (id, payment, amount) => asAda(() => warden.withApproval(id, () => refund({ payment_id: payment, customer_id: 'cus_1', amount })));
  return { w, ran, asks, coveredBy, approved };
}

test('a scoped grant covers the next refunds until used up, and a revoked one covers none', async (t) => {
  const { w, ran, asks, coveredBy, approved } = setup(t);
  const first = await asks('p0', 2000);
  const done = await w.approveScoped(first, { by: 'ops:bob', scope: SCOPE });
  assert.equal(done.approval.status, 'granted');
  const { grant } = done;
  assert.deepEqual([grant.uses_left, grant.approver, grant.state], [2, 'ops:bob', 'live']);
  assert.deepEqual(grant.fixed_values, { '/customer_id': 'cus_1' });
  assert.deepEqual(grant.scope.at_most, { '/amount': '5000' });
  assert.deepEqual((await w.scopedGrants()).map((g) => g.grant_id), [grant.grant_id]);

  await approved(first, 'p0', 2000);
  assert.equal(await coveredBy('p1', 4000), grant.grant_id);
  await asks('p2', 6000); // past the bound: a human is asked, no use spent
  assert.equal(await coveredBy('p3', 5000), grant.grant_id);
  const asked = await asks('p4', 3000); // used up: asks again
  assert.deepEqual(await w.scopedGrants(), []);
  const [used] = await w.scopedGrants({ liveOnly: false });
  assert.deepEqual([used.state, used.uses_left], ['used_up', 0]);

  const second = (await w.approveScoped(asked, { by: 'ops:bob', scope: SCOPE })).grant;
  const revoked = await w.revokeScopedGrant(second.grant_id, { by: 'ops:carol', reason: 'the customer complained' });
  assert.equal(revoked.approval, null);
  assert.deepEqual([revoked.grant.state, revoked.grant.uses_left, revoked.grant.revoked.by], ['revoked', 2, 'ops:carol']);
  await approved(asked, 'p4', 3000);
  await asks('p5', 3000); // revoked: asks again
  assert.deepEqual(ran, ['p0', 'p1', 'p3', 'p4']);
  assert.deepEqual((await w.scopedGrants({ liveOnly: false })).map((g) => g.state).sort(), ['revoked', 'used_up']);
});

// [why, what changes in the call, the error class, what its message (or reason) says]
const GRANT_REFUSALS = [
  ['an unknown scope field', { scope: { uses: 1, minutes: 1, max: 3 } }, warden.InvalidInput, 'scope has no field "max"'],
  ['a scope that is not an object', { scope: 'all' }, TypeError, 'scope must be an object'],
  ['no minutes', { scope: { uses: 1 } }, warden.InvalidInput, 'scope.minutes must be an integer'],
  ['uses as text', { scope: { uses: 'two', minutes: 1 } }, warden.InvalidInput, 'scope.uses must be an integer'],
  ['a bound as text', { scope: { uses: 1, minutes: 1, atMost: { '/amount': '5000' } } }, warden.InvalidInput, 'maps JSON pointers to numbers'],
  ['more uses than the document allows', { scope: { uses: 4, minutes: 30 } }, warden.InvalidInput, 'scope uses must be 1..=3'],
  ['longer than the document allows', { scope: { uses: 1, minutes: 31 } }, warden.InvalidInput, 'scope minutes must be 1..=30'],
  ['a bound below the approved value', { scope: { uses: 1, minutes: 1, atMost: { '/amount': 1999 } } }, warden.InvalidInput, "below the approved action's own value"],
  ['a pointer the action lacks', { scope: { uses: 1, minutes: 1, fixed: ['/merchant'] } }, warden.InvalidInput, 'not an argument of the approved action'],
  ['the requester', { by: 'refund-agent:ada' }, warden.ApprovalMismatch, 'approver_is_requester'],
  ['another action hash', { actionHash: `sha256:${'0'.repeat(64)}` }, warden.ApprovalMismatch, 'mismatch'],
  ['an unknown request', { id: `apr_${'0'.repeat(32)}` }, warden.NotFound, 'no approval apr_0000'],
];

for (const [why, change, error, says] of GRANT_REFUSALS) {
  test(`a refused scoped grant names why and changes nothing: ${why}`, async (t) => {
    const { w, asks } = setup(t);
    const pending = await asks('p0', 2000);
    const { id = pending, ...options } = { by: 'ops:bob', scope: SCOPE, ...change };
    const refused = await w.approveScoped(id, options).catch((e) => e);
    assert.ok(refused instanceof error, `${why}: got ${refused}`);
    assert.ok(refused.message.includes(says) || refused.reason === says, `${why}: ${refused.message}`);
    assert.deepEqual(await w.scopedGrants({ liveOnly: false }), []);
    assert.equal((await w.approval(pending)).status, 'pending');
  });
}

test('a rule without scoped grants refuses one', async (t) => {
  const { w, asks } = setup(t);
  const large = await asks('p9', 20_000);
  const refused = await w.approveScoped(large, { by: 'ops:bob', scope: { uses: 1, minutes: 1 } }).catch((e) => e);
  assert.ok(refused instanceof warden.InvalidInput, `got ${refused}`);
  assert.match(refused.message, /does not allow scoped grants/);
  assert.equal((await w.approval(large)).status, 'pending');
});

test('refused revocations name why and change nothing', async (t) => {
  const { w, asks } = setup(t);
  const pending = await asks('p0', 2000);
  const grantId = (await w.approveScoped(pending, { by: 'ops:bob', scope: SCOPE })).grant.grant_id;
  const before = await w.scopedGrants({ liveOnly: false });
  const cases = [
    ['an unknown grant', `sgr_${'0'.repeat(32)}`, 'ops:bob', 'x', warden.NotFound, 'no scoped grant sgr_0000'],
    ['a malformed id', 'sgr_1', 'ops:bob', 'x', warden.InvalidInput, 'sgr_ followed by 32'],
    ['an empty reason', grantId, 'ops:bob', '', TypeError, 'reason must be a non-empty string'],
    ['a blank reason', grantId, 'ops:bob', '   ', warden.InvalidInput, 'reason must be a non-empty name'],
    ['no reason', grantId, 'ops:bob', undefined, TypeError, 'reason must be a non-empty string'],
    ['an empty by', grantId, '', 'x', TypeError, 'by must be a non-empty string'],
    ['a two-line reason', grantId, 'ops:bob', 'a\nb', warden.InvalidInput, 'one plain line'],
  ];
  for (const [why, target, by, reason, error, says] of cases) {
    const refused = await w.revokeScopedGrant(target, { by, reason }).catch((e) => e);
    assert.ok(refused instanceof error, `${why}: got ${refused}`);
    assert.ok(refused.message.includes(says), `${why}: ${refused.message}`);
    assert.deepEqual(await w.scopedGrants({ liveOnly: false }), before, why);
  }
  await w.revokeScopedGrant(grantId, { by: 'ops:bob', reason: 'done' });
  const revoked = await w.scopedGrants({ liveOnly: false });
  const twice = await w.revokeScopedGrant(grantId, { by: 'ops:bob', reason: 'again' }).catch((e) => e);
  assert.ok(twice instanceof warden.InvalidInput, `got ${twice}`);
  assert.match(twice.message, /was revoked already, by ops:bob/);
  assert.deepEqual(await w.scopedGrants({ liveOnly: false }), revoked);
  await assert.rejects(() => w.scopedGrants({ liveOnly: 1 }), TypeError);
});
