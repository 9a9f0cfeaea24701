'use strict';
// The shared result vectors (tests/vectors/results.json): what a protected function returns is
// committed and stored by the library's one rule, never refused, never AMBIGUOUS. The same
// file is run from C (tests/c/results.c) and Python (tests/test_results.py).
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const util = require('node:util');

const warden = require('..');
const { open, ada } = require('./helpers');

const VECTORS = path.join(__dirname, '..', '..', '..', 'tests', 'vectors', 'results.json');
const { cases } = JSON.parse(fs.readFileSync(VECTORS, 'utf8'));

/** A value with no JSON form (it refers to itself) whose util.inspect text is `text`. */
function textValue(text) {
  const value = { [util.inspect.custom]: () => text };
  value.self = value;
  return value;
}

function nested(depth) {
  let value = [];
  for (let i = 1; i < depth; i += 1) value = [value];
  return value;
}

function resultOf(vector) {
  if ('json_text' in vector) return warden.parseJson(vector.json_text);
  if ('nested' in vector) return nested(vector.nested);
  if ('string_of_x' in vector) return 'x'.repeat(vector.string_of_x);
  return textValue(vector.text);
}

for (const vector of cases) {
  test(`result vector ${vector.name}`, async (t) => {
    const { w } = open(t);
    if (vector.cancelled_before_run) {
      // The caller aborts while its proposal is on the way (the library asks the reconcile
      // hook about a lost first attempt, then retries); the permit arrives after.
      const lost = w.protect('stripe.refund', () => {
        throw new Error('the reply was lost');
      });
      await assert.rejects(ada(() => lost({ payment_id: `vec_${vector.name}`, amount: 1 })), /the reply was lost/);
      const controller = new AbortController();
      let ran = false;
      const reconcile = () => {
        controller.abort();
        return 'not_executed';
      };
      const refund = w.protect('stripe.refund', () => { ran = true; }, { reconcile });
      await assert.rejects(
        ada(() => refund({ payment_id: `vec_${vector.name}`, amount: 1 }, { signal: controller.signal })),
        (error) => error === controller.signal.reason,
      );
      assert.equal(ran, false, 'the function never ran');
      const effect = await w.effect(`refund:vec_${vector.name}`);
      assert.equal(effect.state, vector.state);
      assert.equal(effect.error, vector.error);
      return;
    }
    const value = resultOf(vector);
    const refund = w.protect('stripe.refund', () => value);
    const returned = await ada(() => refund({ payment_id: `vec_${vector.name}`, amount: 1 }));
    assert.ok(returned === value, "the caller gets its function's own value back");
    const effect = await w.effect(`refund:vec_${vector.name}`);
    assert.equal(effect.state, vector.state);
    if (vector.stored === 'whole') {
      assert.deepEqual(effect.result, resultOf(vector));
    } else {
      assert.ok([vector.stored, vector.stored_or].includes(effect.result.warden_result), effect.result.warden_result);
      assert.ok(effect.result.sha256.startsWith('sha256:'));
      assert.equal(typeof effect.result.bytes, 'number');
      if (vector.stored === 'text') assert.equal(effect.result.excerpt, vector.text);
    }
  });
}
