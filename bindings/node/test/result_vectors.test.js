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
    if (vector.cancelled_before_run) {
      // A protected call in Node has no way to be cancelled between its permit and its run.
      t.skip('Node has no cancellation between the permit and the call');
      return;
    }
    const { w } = open(t);
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
