'use strict';
// Authority from Node: delegate, the escalation refused with its dimension, revocation denying
// the delegate (AuthorityDenied, a Denied), sweeps, the listing, task and hop in withContext,
// and a budget exhausted while earlier calls still run.
const test = require('node:test');
const assert = require('node:assert/strict');

const warden = require('..');
const { open } = require('./helpers');

const DOCUMENT = `schema: warden/v1
environment: test
actions:
  stripe.refund:
    effect: "refund:{payment_id}"
    rules:
      - decision: allow
authority:
  grants:
    - id: cfo
      subject: { agent: console, user: alice }
      actions: ["stripe.refund"]
      constraints: { amount_lte: 10000000 }
      expires_at: "2099-01-01T00:00:00Z"
      delegable: true
`;

const HUMAN = { agent: 'console', user: 'alice' };
const FINANCE = { agent: 'finance-agent', user: 'alice' };

function link(agent, cap, extra = {}) {
  return {
    subject: { agent, user: 'alice' },
    actions: ['stripe.refund'],
    constraints: { amount_lte: cap },
    expires_at: '2098-01-01T00:00:00Z',
    delegable: true,
    ...extra,
  };
}

const as = (agent, fn, extra = {}) => warden.withContext({ agent, user: 'alice', ...extra }, fn);

test('a delegation authorises its grantee and revoking it denies with AuthorityDenied', async (t) => {
  const { w } = open(t, DOCUMENT);
  const refund = w.protect('stripe.refund', async ({ payment_id }) => `refunded ${payment_id}`);
  const finance = await w.delegate('cfo', link('finance-agent', 2_500_000), { by: HUMAN });
  assert.match(finance, /^dlg_[0-9a-f]{32}$/);
  const support = await w.delegate(finance, link('support-agent', 200_000), { by: FINANCE });
  assert.equal(await as('support-agent', () => refund({ payment_id: 'pay_1', amount: 150_000 })), 'refunded pay_1');
  assert.equal(await w.revoke(finance, { by: 'ciso' }), true);
  assert.equal(await w.revoke(finance, { by: { agent: 'ciso' } }), false);
  const unknown = await w.revoke('dlg_00000000000000000000000000000000').catch((e) => e);
  assert.ok(unknown instanceof warden.NotFound, `${unknown}`);
  const denied = await as('support-agent', () => refund({ payment_id: 'pay_2', amount: 100 })).catch((e) => e);
  assert.ok(denied instanceof warden.AuthorityDenied, `${denied}`);
  assert.ok(denied instanceof warden.Denied);
  assert.equal(denied.code, 'WARDEN_RESULT_DENIED');
  assert.equal(denied.reason, 'authority_revoked');
  assert.equal(denied.grantId, support);
  const listed = Object.fromEntries((await w.delegations()).map((d) => [d.delegation_id, d]));
  assert.equal(listed[finance].revoked, true);
  assert.equal(listed[finance].revoked_by, 'ciso');
  assert.equal(listed[support].depth, 2);
  assert.equal(listed[support].created_via, 'api');
});

test('an escalation is refused with its reason and dimension, and nothing is written', async (t) => {
  const { w } = open(t, DOCUMENT);
  const finance = await w.delegate('cfo', link('finance-agent', 2_500_000), { by: HUMAN });
  const refused = await w.delegate(finance, link('support-agent', 5_000_000), { by: FINANCE }).catch((e) => e);
  assert.ok(refused instanceof warden.AuthorityEscalation, `${refused}`);
  assert.ok(!(refused instanceof warden.Denied));
  assert.equal(refused.code, 'WARDEN_RESULT_AUTHORITY_ESCALATION');
  assert.deepEqual([refused.reason, refused.dimension, refused.parentId], ['containment', 'constraints', finance]);
  const omitted = link('support-agent', 100);
  delete omitted.expires_at;
  delete omitted.delegable;
  const dropped = await w.delegate(finance, omitted, { by: FINANCE }).catch((e) => e);
  assert.equal(dropped.dimension, 'expires_at');
  assert.deepEqual(
    (await w.delegations()).map((d) => d.delegation_id),
    [finance],
  );
});

test('task and hop travel in withContext', async (t) => {
  const { w } = open(t, DOCUMENT);
  const refund = w.protect('stripe.refund', async ({ payment_id }) => payment_id);
  const finance = await w.delegate('cfo', link('finance-agent', 2_500_000), { by: HUMAN });
  const tasked = await w.delegate(finance, link('support-agent', 200_000, { tasks: ['ticket:*'] }), { by: FINANCE });
  const untasked = await as('support-agent', () => refund({ payment_id: 'p1', amount: 1 })).catch((e) => e);
  assert.equal(untasked.reason, 'authority_task');
  assert.equal(await as('support-agent', () => refund({ payment_id: 'p1', amount: 1 }), { task: 'ticket:3', hop: tasked }), 'p1');
  const hopped = await as('finance-agent', () => refund({ payment_id: 'p2', amount: 1 }), { hop: tasked }).catch((e) => e);
  assert.deepEqual([hopped.reason, hopped.hop], ['authority_hop', tasked]);
});

test('sweeps revoke by creator and beneath a root grant', async (t) => {
  const { w } = open(t, DOCUMENT);
  const finance = await w.delegate('cfo', link('finance-agent', 2_500_000), { by: HUMAN });
  const first = await w.delegate(finance, link('support-agent', 100), { by: FINANCE });
  const swept = await w.revokeSweep({ createdBy: FINANCE, by: 'ciso' });
  assert.deepEqual(swept, [{ delegation_id: first, revoked: true }]);
  const under = await w.revokeSweep({ under: 'cfo' });
  assert.deepEqual(
    Object.fromEntries(under.map((s) => [s.delegation_id, s.revoked])),
    { [finance]: true, [first]: false },
  );
});

test('the third refund in the hour is refused while the first two still run', async (t) => {
  const { w } = open(t, DOCUMENT);
  const finance = await w.delegate('cfo', link('finance-agent', 2_500_000), { by: HUMAN });
  const budgeted = link('support-agent', 200_000, { budgets: [{ metric: 'amount', limit: 500_000, window: 'PT1H' }] });
  delete budgeted.delegable;
  await w.delegate(finance, budgeted, { by: FINANCE });
  let release;
  const gate = new Promise((resolve) => {
    release = resolve;
  });
  const refund = w.protect('stripe.refund', async ({ payment_id }) => {
    await gate;
    return payment_id;
  });
  const first = as('support-agent', () => refund({ payment_id: 'p1', amount: 200_000 }));
  const second = as('support-agent', () => refund({ payment_id: 'p2', amount: 200_000 }));
  // Both are reserved (and held) before the third is proposed.
  for (;;) {
    const effects = await w.effects();
    if (effects.filter((e) => e.state === 'executing').length === 2) break;
    await new Promise((resolve) => setImmediate(resolve));
  }
  const third = await as('support-agent', () => refund({ payment_id: 'p3', amount: 200_000 })).catch((e) => e);
  assert.ok(third instanceof warden.AuthorityDenied, `${third}`);
  assert.equal(third.reason, 'budget_exhausted');
  release();
  assert.deepEqual(await Promise.all([first, second]), ['p1', 'p2']);
});
