'use strict';
// The defaults (list limit, first receipt, environment, caps) are the library's, read through
// warden_defaults; the binding's sources never restate them.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');

const warden = require('..');
const { open, ada, bindingSources } = require('./helpers');

test('the defaults are the library’s', () => {
  const defaults = warden.defaults();
  assert.deepEqual(
    [defaults.environment, defaults.list_limit, defaults.from_seq, defaults.after_id],
    ['production', 100, 1, 0],
  );
  assert.equal(defaults.limits.max_message_bytes, 4096);
  assert.equal(defaults.limits.max_result_bytes, 1024 * 1024);
  assert.equal(defaults.max_wait_ms, 86_400_000);
});

test('list calls use the library’s limit when none is given', async (t) => {
  const { w } = open(t);
  const { list_limit: limit } = warden.defaults();
  const read = w.protect('ledger.write', () => null);
  for (let i = 0; i < limit + 2; i += 1) await ada(() => read({ entry: `e${i}` }));
  assert.equal((await w.effects()).length, limit);
  assert.equal((await w.effects({ limit: 0 })).length, limit + 2);
  assert.equal((await w.receipts()).length, limit);
  assert.equal((await w.events()).length, limit);
});

test('the binding restates no default', () => {
  const sources = bindingSources().map((file) => path.join(__dirname, '..', file));
  for (const file of sources) {
    const text = fs.readFileSync(file, 'utf8');
    assert.doesNotMatch(text, /'production'|DEFAULT_LIMIT|MAX_MESSAGE_CHARS|MAX_WAIT_MS|86_400_000/, file);
    assert.doesNotMatch(text, /optionalCount\('(limit|fromSeq|after)', \w+, \d/, file);
  }
});
