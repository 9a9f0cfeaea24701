'use strict';
// The shared float vectors (tests/vectors/warden/floats.json) through the addon: JavaScript's
// own numbers, written by JSON.stringify, reach the library intact and get the canonical
// arguments, action hash, effect key and decision the Rust and Python suites check against the
// same file.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');

const warden = require('..');
const path = require('node:path');
const { scratch } = require('./helpers');

const FLOATS = path.resolve(__dirname, '../../../tests/vectors/warden/floats.json');

function vectors() {
  assert.ok(fs.existsSync(FLOATS), `the float vectors are in the repository: ${FLOATS}`);
  return JSON.parse(fs.readFileSync(FLOATS, 'utf8'));
}

/** The arguments as a Node host has them: parsed from the case's text, or a double built from its bits. */
function sent(entry) {
  if (entry.arguments_json !== undefined) return warden.parseJson(entry.arguments_json);
  const view = new DataView(new ArrayBuffer(8));
  view.setBigUint64(0, BigInt(`0x${entry.ieee}`));
  return { case: entry.name, a: view.getFloat64(0) };
}

/** A Warden under the vectors' document, in its environment (the hashes name it). */
function open(t, file) {
  const { config, store } = scratch(t, file.policy_yaml);
  const w = new warden.Warden({ store, config, environment: file.environment });
  t.after(() => w.close());
  return { w };
}

function withPrincipal(file, fn) {
  return warden.withContext({ agent: file.principal.agent, user: file.principal.user }, fn);
}

test('every float case is decided, hashed and keyed as the vectors say', async (t) => {
  const file = vectors();
  const { w } = open(t, file);
  assert.ok(file.cases.length >= 40);
  const seen = [];
  const sum = w.protect(file.action, (args) => {
    seen.push(args);
    return null;
  });
  const checked = { allow: 0, deny: 0 };
  for (const entry of file.cases) {
    const expected = warden.parseJson(entry.canonical_arguments);
    if (entry.decision === 'allow') {
      await withPrincipal(file, () => sum(sent(entry)));
      assert.deepEqual(seen.at(-1), expected, `${entry.name}: the executor gets the canonical arguments`);
      const effect = await w.effect(entry.effect_key);
      assert.equal(effect?.state, 'committed', `${entry.name}: effect ${entry.effect_key}`);
    } else {
      const refused = await withPrincipal(file, () => sum(sent(entry))).catch((e) => e);
      assert.ok(refused instanceof warden.Denied, `${entry.name}: ${refused}`);
      assert.equal(refused.reason, entry.reason, entry.name);
    }
    const receipt = (await w.receipts({ limit: 0 })).at(-1);
    assert.equal(receipt.action_hash, entry.action_hash, entry.name);
    assert.deepEqual(receipt.arguments, expected, entry.name);
    assert.equal(receipt.decision_reason, entry.reason, entry.name);
    checked[entry.decision] += 1;
  }
  assert.ok(checked.allow > 0 && checked.deny > 0, JSON.stringify(checked));
  assert.equal((await w.verifyChain()).ok, true);
});

test('a number with no canonical form is refused', async (t) => {
  const file = vectors();
  const { w } = open(t, file);
  let calls = 0;
  const sum = w.protect(file.action, () => {
    calls += 1;
  });
  const cases = file.refused.map((entry) => JSON.parse(entry.arguments_json));
  cases.push({ case: 'nan', a: NaN }, { case: 'inf', a: -Infinity });
  for (const args of cases) {
    const refused = await withPrincipal(file, () => sum(args)).catch((e) => e);
    assert.ok(refused instanceof warden.InvalidInput, `${JSON.stringify(String(args.a))}: ${refused}`);
  }
  assert.equal(calls, 0);
});

test('the pure functions know no document and keep ctrlrun\'s refusal of floats', () => {
  assert.throws(
    () => warden.actionHash({ name: 'get-sum', arguments: { a: 1.5 }, principal: { agent: 'vector-agent', user: null } }),
    warden.InvalidInput,
  );
  assert.throws(() => warden.canonical({ a: 1.5 }), warden.InvalidInput);
});
