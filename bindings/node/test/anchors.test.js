'use strict';
// addAnchor (warden_anchor_add / warden_anchor_put): a JavaScript function receives each
// checkpoint the handle's automatic-checkpoint thread signs, on the event loop; what it
// returns (or resolves to) is kept beside the checkpoint and exported in the bundle, and what it
// throws is kept as a failure and retried, never failing an action. A handle closes at once
// even while its checkpoint thread waits on an anchor.
//
// The signing key is written with the `warden` CLI (`warden keygen`), which also reads the
// store back (`doctor --json`, `export`); without one these tests are skipped.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');

const warden = require('..');
const { POLICY, scratch, ada, findCli, cliJson } = require('./helpers');

const CLI = findCli('anchor');
const needsCli = CLI === null ? { skip: 'no built warden CLI (cargo build --release --bin warden)' } : {};
const cli = (store, ...args) => cliJson(CLI, store, ...args);

async function eventually(what, check, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    assert.ok(Date.now() < deadline, `never happened: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** A Warden whose document signs a checkpoint after every receipt. */
async function withEvidence(t) {
  const { dir, config, store } = scratch(t);
  const key = path.join(dir, 'evidence.key');
  await cli(store, 'keygen', '--out', key, '--name', 'warden.test');
  fs.writeFileSync(
    config,
    `${POLICY}evidence:\n  key_file: ${key}\n  origin: warden.test/node-anchors\n  every_receipts: 1\n  every: PT1S\n`,
  );
  const w = new warden.Warden({ store, config, environment: 'test' });
  t.after(() => w.close());
  const read = w.protect('customer.read', ({ id }) => ({ id }));
  const reads = async (n) => {
    for (let i = 0; i < n; i += 1) await ada(() => read({ id: `c_${i}` }));
  };
  return { w, store, dir, reads };
}

test('a JavaScript anchor gets each checkpoint and what it resolves to is exported', needsCli, async (t) => {
  const { w, store, dir, reads } = await withEvidence(t);
  const seen = [];
  w.addAnchor('witness.example/log', async (checkpoint) => {
    seen.push(checkpoint);
    await new Promise((resolve) => setTimeout(resolve, 5));
    return { kind: 'cosignature', receipt: Buffer.from(`sig-${checkpoint.number}`), description: 'ok' };
  });
  let left = 1;
  w.addAnchor('flaky', () => {
    if (left > 0) {
      left -= 1;
      throw new RangeError('the witness is down');
    }
    return null;
  });
  await reads(2);
  await eventually('the witness got a checkpoint', () => seen.length > 0);
  assert.deepEqual(Object.keys(seen[0]).sort(), ['note', 'number', 'origin', 'size']);
  assert.equal(seen[0].origin, 'warden.test/node-anchors');
  const listed = await w.checkpoints({ limit: 0 });
  assert.equal(listed.find((cp) => cp.number === seen[0].number).note, seen[0].note, 'the note exactly as signed');
  const sinkOf = async (name) => (await cli(store, 'doctor')).anchors.find((row) => row.sink === name);
  await eventually('the failure recorded, then the retry taken', async () => (await sinkOf('host flaky'))?.last_anchored != null, 30_000);
  w.close();

  const bundle = path.join(dir, 'bundle');
  await cli(store, 'export', '--out', bundle);
  const lines = fs.readFileSync(path.join(bundle, 'anchors.jsonl'), 'utf8').trim().split('\n').map((line) => JSON.parse(line));
  const kept = lines.filter((line) => line.sink === 'host witness.example/log');
  assert.ok(kept.length > 0, JSON.stringify(lines));
  for (const line of kept) {
    assert.equal(line.kind, 'cosignature');
    assert.equal(Buffer.from(line.receipt, 'base64').toString(), `sig-${line.checkpoint}`);
  }
  const verdict = await cli(store, 'verify-bundle', bundle);
  assert.equal(verdict.ok, true);
  assert.equal(verdict.anchors, lines.length);
});

test('a failing anchor is kept with its message and never fails an action', needsCli, async (t) => {
  const { w, store, reads } = await withEvidence(t);
  w.addAnchor('broken', () => {
    throw new TypeError('no route to the witness');
  });
  w.addAnchor('wrong-shape', () => ({ kind: 'x', receipt: 'not bytes' }));
  await reads(3);
  assert.ok((await w.receipts({ limit: 0 })).length >= 3, 'every action went through');
  const failing = async () => {
    const rows = (await cli(store, 'doctor')).anchors;
    return Object.fromEntries(rows.filter((row) => row.failing).map((row) => [row.sink, row.failing]));
  };
  await eventually('both failures recorded', async () => Object.keys(await failing()).length === 2);
  const now = await failing();
  assert.equal(now['host broken'].code, 'host_error');
  assert.equal(now['host broken'].message, 'TypeError: no route to the witness');
  assert.match(now['host wrong-shape'].message, /receipt is a Buffer or Uint8Array/);
});

test('a handle closes at once while its checkpoint thread waits on an anchor', needsCli, async (t) => {
  const { w, reads } = await withEvidence(t);
  let asked = false;
  w.addAnchor('never-answers', () => {
    asked = true;
    return new Promise(() => {});
  });
  await reads(1);
  await eventually('the anchor was asked', () => asked);
  const started = Date.now();
  w.close();
  assert.ok(Date.now() - started < 10_000, 'close did not wait for the event loop it runs on');
});

test('addAnchor refuses what it cannot use', needsCli, async (t) => {
  const { dir, config, store } = scratch(t);
  const plain = new warden.Warden({ store, config, environment: 'test' });
  t.after(() => plain.close());
  assert.throws(() => plain.addAnchor('witness', () => null), (error) => error instanceof warden.ConfigError && /makes no checkpoints/.test(error.message));
  assert.throws(() => plain.addAnchor('witness', 'not a function'), TypeError);
  plain.close();
  fs.rmSync(path.join(dir, 'state.redb'), { force: true });
  const { w } = await withEvidence(t);
  for (const bad of ['', 'two words', 'x'.repeat(65)]) {
    assert.throws(() => w.addAnchor(bad, () => null), (error) => error instanceof warden.InvalidInput, bad);
  }
  w.addAnchor('once', () => null);
  assert.throws(() => w.addAnchor('once', () => null), /already sends checkpoints to an anchor named/);
});
