'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');

const warden = require('..');
const { scratch, ada } = require('./helpers');

test('close is idempotent and a closed Warden refuses calls', async (t) => {
  const { config, store } = scratch(t);
  const w = new warden.Warden({ store, config, environment: 'test' });
  const write = w.protect('ledger.write', () => 'ok');
  assert.equal(await ada(() => write({ entry: 'before-close' })), 'ok');
  assert.equal(w.closed, false);
  w.close();
  w.close();
  assert.equal(w.closed, true);
  const refused = await ada(() => write({ entry: 'after-close' })).catch((e) => e);
  assert.ok(refused instanceof warden.WardenError, `got ${refused}`);
  assert.ok(refused instanceof warden.InvalidInput);
  assert.equal(refused.code, 'WARDEN_RESULT_INVALID_INPUT');
  assert.match(refused.message, /closed/);
  await assert.rejects(w.effects(), (e) => e instanceof warden.InvalidInput && /closed/.test(e.message));
});

test('the store can be opened again once closed, and remembers', async (t) => {
  const { config, store } = scratch(t);
  const first = new warden.Warden({ store, config, environment: 'test' });
  await ada(() => first.protect('ledger.write', () => 'ok')({ entry: 'kept' }));
  first.close();
  const second = new warden.Warden({ store, config, environment: 'test' });
  t.after(() => second.close());
  const retry = await ada(() => second.protect('ledger.write', () => 'again')({ entry: 'kept' })).catch((e) => e);
  assert.ok(retry instanceof warden.Duplicate, `got ${retry}`);
  const chain = await second.verifyChain();
  assert.equal(typeof chain, 'object');
  assert.ok((await second.receipts()).length >= 1);
  assert.ok((await second.events()).length >= 1);
  assert.equal((await second.effects({ state: 'committed' })).length, 1);
  assert.equal((await second.effects({ limit: 0 })).length, 1, 'a limit of 0 is no limit');
  assert.equal((await second.events({ limit: 1 })).length, 1);
  assert.equal((await second.events({ after: Number.MAX_SAFE_INTEGER })).length, 0);
});

test('close waits for a call already running', async (t) => {
  const { config, store } = scratch(t);
  const w = new warden.Warden({ store, config, environment: 'test' });
  let release;
  const gate = new Promise((resolve) => {
    release = resolve;
  });
  let entered;
  const inside = new Promise((resolve) => {
    entered = resolve;
  });
  const slow = w.protect('ledger.write', async () => {
    entered();
    await gate;
    return 'finished';
  });
  const call = ada(() => slow({ entry: 'in-flight' }));
  await inside;
  w.close();
  release();
  assert.equal(await call, 'finished', 'the live permit kept the store open to commit');
  const reopened = new warden.Warden({ store, config, environment: 'test' });
  t.after(() => reopened.close());
  assert.equal((await reopened.effect('ledger:in-flight')).state, 'committed');
});

test('durability is an open option: process keeps what a process crash would, a misspelling names both values', async (t) => {
  const { config, store } = scratch(t);
  const fast = new warden.Warden({ store, config, environment: 'test', durability: 'process' });
  await ada(() => fast.protect('ledger.write', () => 'ok')({ entry: 'kept' }));
  fast.close();
  const again = new warden.Warden({ store, config, environment: 'test' });
  t.after(() => again.close());
  assert.equal((await again.effects({ state: 'committed' })).length, 1);
  assert.throws(
    () => new warden.Warden({ store, config, environment: 'test', durability: 'disk' }),
    (e) => e instanceof warden.InvalidInput && /"power"/.test(e.message) && /"process"/.test(e.message) && /disk/.test(e.message),
  );
});
