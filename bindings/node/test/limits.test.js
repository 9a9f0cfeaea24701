'use strict';
// Every input bound at its edge and one byte past it, through the binding (the core decides).
const test = require('node:test');
const assert = require('node:assert/strict');

const warden = require('..');
const { scratch, ada } = require('./helpers');

const LIMITS = { max_name_bytes: 13, max_arguments_bytes: 120, max_result_bytes: 64, max_message_bytes: 32 };

function limited(t) {
  const { store, config } = scratch(t);
  const w = new warden.Warden({ store, config, limits: LIMITS });
  t.after(() => w.close());
  return w;
}

test('a name one byte over its bound is refused naming the limit', async (t) => {
  const w = limited(t);
  const call = w.protect('stripe.refundx', async () => 'never');
  const refused = await ada(() => call({ payment_id: 'p', amount: 1 })).catch((e) => e);
  assert.equal(refused.code, 'WARDEN_RESULT_INVALID_INPUT');
  assert.match(refused.message, /max_name_bytes/);
  assert.doesNotMatch(refused.message, /stripe\.refundx/);
});

test('arguments at their bound pass and one byte more is refused', async (t) => {
  const w = limited(t);
  const refund = w.protect('stripe.refund', async () => 'ok');
  assert.equal(await ada(() => refund({ payment_id: 'p'.repeat(92), amount: 1 })), 'ok');
  const refused = await ada(() => refund({ payment_id: 'q'.repeat(93), amount: 1 })).catch((e) => e);
  assert.equal(refused.code, 'WARDEN_RESULT_INVALID_INPUT');
  assert.match(refused.message, /max_arguments_bytes/);
});

test('a result past its bound commits as a marked excerpt; one at it is kept whole', async (t) => {
  const w = limited(t);
  const refund = w.protect('stripe.refund', async ({ payment_id }) => 'x'.repeat(payment_id === 'whole' ? 62 : 63));
  assert.equal(await ada(() => refund({ payment_id: 'whole', amount: 1 })), 'x'.repeat(62));
  assert.equal(await ada(() => refund({ payment_id: 'over', amount: 1 })), 'x'.repeat(63));
  assert.equal((await w.effect('refund:whole')).result, 'x'.repeat(62));
  const over = await w.effect('refund:over');
  assert.equal(over.state, 'committed');
  assert.equal(over.result.warden_result, 'truncated');
  assert.equal(over.result.bytes, 65);
});

test('limits are checked when the store is opened', (t) => {
  const { store, config } = scratch(t);
  assert.throws(() => new warden.Warden({ store, config, limits: { max_name_bytes: 0 } }), /max_name_bytes/);
});
