'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');

const warden = require('..');
const { open, ada, scratch } = require('./helpers');

/** What `fn` throws, or null when it returns. */
function thrown(fn) {
  try {
    fn();
  } catch (e) {
    return e;
  }
  return null;
}

test('every error carries code, reason, message and the refusal fields', async (t) => {
  const { w } = open(t);
  const write = w.protect('ledger.write', () => 'ok');
  await ada(() => write({ entry: 'e' }));
  const duplicate = await ada(() => write({ entry: 'e' })).catch((e) => e);
  assert.equal(duplicate.name, 'Duplicate');
  assert.equal(duplicate.code, 'WARDEN_RESULT_DUPLICATE');
  assert.equal(duplicate.reason, 'duplicate');
  assert.equal(duplicate.state, 'committed');
  assert.equal(duplicate.effectKey, 'ledger:e');
  assert.match(duplicate.message, /ledger:e/);
  assert.equal(duplicate.details.code, 'WARDEN_RESULT_DUPLICATE');
  assert.equal(duplicate.details.effect_key, 'ledger:e');
  assert.ok(Object.isFrozen(duplicate.details));
  assert.ok(duplicate.stack.includes('Duplicate'));
});

test('the error tree: refusals and faults', () => {
  const refusals = [
    warden.Denied,
    warden.ApprovalRequired,
    warden.ApprovalMismatch,
    warden.Duplicate,
    warden.Ambiguous,
    warden.AttemptCeiling,
    warden.NotResolvable,
    warden.LateOutcome,
    warden.NotFound,
    warden.OutOfWindow,
  ];
  const faults = [
    warden.InvalidInput,
    warden.StoreFault,
    warden.ConfigError,
    warden.FetchFault,
    warden.Panic,
    warden.Poisoned,
    warden.AbiMismatch,
  ];
  for (const Class of refusals) assert.ok(Class.prototype instanceof warden.Refused, Class.name);
  for (const Class of faults) assert.ok(Class.prototype instanceof warden.Fault, Class.name);
  assert.ok(warden.Refused.prototype instanceof warden.WardenError);
  assert.ok(warden.Fault.prototype instanceof warden.WardenError);
  assert.ok(!(warden.NotExecuted.prototype instanceof warden.WardenError), 'NotExecuted is the caller’s, not Warden’s');
});

test('an error made by the binding has its class\'s code and reason', () => {
  const made = new warden.InvalidInput('made here');
  assert.equal(made.code, 'WARDEN_RESULT_INVALID_INPUT');
  assert.equal(made.reason, 'invalid_input');
  assert.equal(made.message, 'made here');
  assert.equal(new warden.Duplicate('x').code, 'WARDEN_RESULT_DUPLICATE');
  assert.equal(new warden.Panic('x').reason, 'panic');
  assert.equal(new warden.OutOfWindow('x').code, 'WARDEN_RESULT_OUT_OF_WINDOW');
  assert.equal(new warden.FetchFault('x').code, 'WARDEN_RESULT_FETCH');
  assert.equal(new warden.WardenError('x').code, 'WARDEN_RESULT_UNKNOWN');
});

test('an attempt ceiling is refused with attempts and maxAttempts', async (t) => {
  const { w } = open(t);
  const refund = w.protect('stripe.refund', () => {
    throw new warden.NotExecuted('declined');
  });
  const args = { payment_id: 'pay_ceiling', amount: 5 };
  for (let i = 0; i < 3; i++) await assert.rejects(ada(() => refund(args)), warden.NotExecuted);
  const ceiling = await ada(() => refund(args)).catch((e) => e);
  assert.ok(ceiling instanceof warden.AttemptCeiling, `got ${ceiling}`);
  assert.equal(ceiling.code, 'WARDEN_RESULT_ATTEMPT_CEILING');
  assert.equal(ceiling.reason, 'attempt_ceiling');
  assert.equal(ceiling.attempts, 3);
  assert.equal(ceiling.maxAttempts, 3);
  assert.equal(ceiling.effectKey, 'refund:pay_ceiling');
});

test('a malformed policy document is a ConfigError', (t) => {
  const { config, store } = scratch(t, 'schema: warden/v1\nactions: [\n');
  const error = thrown(() => new warden.Warden({ store, config }));
  assert.ok(error instanceof warden.ConfigError, `got ${error}`);
  assert.equal(error.code, 'WARDEN_RESULT_CONFIG');
});

test('a store fault names its kind', (t) => {
  const { config, store } = scratch(t, 'schema: warden/v1\nactions: {}\n');
  fs.writeFileSync(store, 'these are notes, not a store\n');
  const error = thrown(() => new warden.Warden({ store, config }));
  assert.ok(error instanceof warden.StoreFault, `got ${error}`);
  assert.equal(error.code, 'WARDEN_RESULT_STORE');
  assert.equal(error.kind, 'not_a_store');
  assert.equal(fs.readFileSync(store, 'utf8'), 'these are notes, not a store\n');
  assert.equal(new warden.StoreFault('raised by the binding').kind, null);
});

test('invalid input names its kind and path', async (t) => {
  const { w } = open(t);
  const refund = w.protect('stripe.refund', async () => {
    throw new Error('an over-long call must not run');
  });
  const error = await ada(() => refund({ payment_id: 'p'.repeat(300 * 1024), amount: 1 })).then(
    () => assert.fail('not refused'),
    (e) => e,
  );
  assert.ok(error instanceof warden.InvalidInput, `got ${error}`);
  assert.equal(error.code, 'WARDEN_RESULT_INVALID_INPUT');
  assert.equal(error.kind, 'too_large');
  assert.equal(error.path, 'arguments');
  assert.match(error.message, /max_arguments_bytes/);
  const raised = new warden.InvalidInput('raised by the binding');
  assert.deepEqual([raised.kind, raised.path], [null, null]);
});

test('bad arguments are InvalidInput from the library or TypeError from the binding', async (t) => {
  const { w } = open(t);
  await assert.rejects(w.resolve('no-such-key', 'committed', { by: 'ops:bob' }), (e) => e instanceof warden.WardenError && e.code.startsWith('WARDEN_RESULT_'));
  await assert.rejects(w.approve('apr_x', { by: 'ops:bob\u202e' }), (e) => e instanceof warden.InvalidInput && e.code === 'WARDEN_RESULT_INVALID_INPUT');
  await assert.rejects(w.approve('apr_x', {}), TypeError);
  await assert.rejects(w.resolve('k', 'maybe', { by: 'x' }), TypeError);
  assert.throws(() => new warden.Warden({}), TypeError);
});

test('a native failure crosses napi as a structured error: code, message and fields, no JSON to parse', async (t) => {
  const native = require('../native/warden.node');
  let raw;
  try {
    native.canonical('{"price": 1.5}');
  } catch (error) {
    raw = error;
  }
  assert.ok(raw instanceof Error, 'an Error');
  assert.equal(raw.code, 'WARDEN_RESULT_INVALID_INPUT');
  assert.equal(raw.fields.code, 'WARDEN_RESULT_INVALID_INPUT');
  assert.equal(raw.fields.reason, 'invalid_input');
  assert.equal(raw.message, raw.fields.message);
  assert.throws(() => JSON.parse(raw.message), 'the message is text, not an error object');

  // The same from an async call: a refusal's own fields arrive as properties.
  const { w, store, config } = open(t);
  const handle = native.Handle.open(`${store}.raw`, config, undefined);
  t.after(() => handle.close());
  const duplicate = await handle.effectResolve('refund:none', 'committed', 'ops').catch((e) => e);
  assert.equal(typeof duplicate.code, 'string');
  assert.ok(duplicate.code.startsWith('WARDEN_RESULT_'), duplicate.code);
  assert.equal(duplicate.fields.code, duplicate.code);
  assert.ok(w);
});
