'use strict';
// proofInclusion, proofConsistency and checkpoints (warden_proof_inclusion,
// warden_proof_consistency, warden_checkpoints): the documents `warden proof … --json` and
// `warden checkpoints --json` print, proofs the pure-JavaScript verifier's own Merkle code
// (lib/evidence.js) checks against the roots the signed notes state (the signatures checked
// here with node:crypto), and each refusal as the package's error class with the library's
// message.
//
// Checkpoints are signed outside the C ABI (no key crosses it), so they are made with the
// `warden` CLI: $WARDEN_CLI, else the one built beside the library the addon links
// ($WARDEN_LIB_DIR), else target/{release,debug}/warden. Without one the tests that need
// checkpoints are skipped (`cargo build --release --bin warden` builds it; run-tests.sh does).

const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');

const warden = require('..');
const { evidence } = warden;
const { open, ada, findCli, cliJson } = require('./helpers');

const UNKNOWN = 'rct_00000000000000000000000000000000';

const CLI = findCli('proof');
const needsCli = CLI === null ? { skip: 'no built warden CLI (cargo build --release --bin warden)' } : {};
const cli = (store, ...args) => cliJson(CLI, store, ...args);

const hash = (text) => {
  const raw = Buffer.from(text, 'base64');
  assert.equal(raw.length, 32, text);
  assert.equal(raw.toString('base64'), text, 'canonical base64');
  return raw;
};
const flipped = (proof, at, byte, bit) => proof.map((h, i) => (i === at ? Buffer.from(h.map((b, j) => (j === byte ? b ^ bit : b))) : h));

/** RFC 9162 §2.1.1's Merkle tree hash of leaf hashes, written out directly. */
function mth(leaves) {
  if (leaves.length === 0) return crypto.createHash('sha256').digest();
  if (leaves.length === 1) return leaves[0];
  let split = 1;
  while (split * 2 < leaves.length) split *= 2;
  return evidence.nodeHash(mth(leaves.slice(0, split)), mth(leaves.slice(split)));
}

/** What a checkpoint's signed note states, its Ed25519 signature checked with node:crypto. */
function opened(note, key) {
  const blank = note.lastIndexOf('\n\n');
  const text = note.slice(0, blank + 1);
  const signatures = note.slice(blank + 2, -1).split('\n');
  const ours = signatures.map((line) => Buffer.from(line.split(' ')[2], 'base64')).filter((raw) => raw.readUInt32BE(0) === key.id);
  assert.equal(ours.length, 1, `one signature by ${key.name}: ${note}`);
  assert.ok(crypto.verify(null, Buffer.from(text, 'utf8'), key.publicKey, ours[0].subarray(4)), 'the signature verifies');
  const [origin, size, root] = text.split('\n');
  return { origin, size: Number(size), root: hash(root) };
}

/** A store with checkpoint 1 at 5 receipts, checkpoints 2 and 3 both at 8, and a ninth receipt no checkpoint covers. */
async function log(t) {
  const { w, store, dir } = open(t);
  const refund = w.protect('stripe.refund', ({ payment_id }) => ({ id: `re_${payment_id}` }));
  const refunds = async (first, last) => {
    for (let n = first; n <= last; n += 1) await ada(() => refund({ payment_id: `pay_pr${n}`, amount: 100 }));
  };
  const keyFile = path.join(dir, 'log.key');
  const made = await cli(store, 'keygen', '--out', keyFile, '--name', 'warden.test');
  const key = evidence.parseVerifierKey(made.verifier_key);
  await refunds(1, 5);
  assert.equal((await cli(store, 'checkpoint', '--key', keyFile, '--origin', 'warden.test/node')).size, 5);
  await refunds(6, 8);
  assert.equal((await cli(store, 'checkpoint', '--key', keyFile)).number, 2);
  assert.equal((await cli(store, 'checkpoint', '--key', keyFile)).size, 8);
  await refunds(9, 9);
  const receipts = await w.receipts({ limit: 0 });
  /** The leaf of receipt `seq`: its document as listed (without the two members kept beside it), canonical; its SHA-256 is the receipt's `hash`. */
  const leaf = (seq) => {
    const { hash: chained, executor_result: _, ...document } = receipts[seq - 1];
    const text = warden.canonical(document);
    assert.equal(`sha256:${crypto.createHash('sha256').update(text).digest('hex')}`, chained);
    return evidence.leafHash(text);
  };
  const signed = async (number) => {
    const listed = await w.checkpoints({ from: number, limit: 1 });
    assert.deepEqual(listed.map((cp) => cp.number), [number]);
    return opened(listed[0].note, key);
  };
  return { w, store, key, receipts, leaf, signed };
}

test('an inclusion proof verifies against the signed root with the pure-JS Merkle code', needsCli, async (t) => {
  const { w, receipts, leaf, signed } = await log(t);
  // [receipt seq, checkpoint asked (undefined: the last), checkpoint answered, tree size]
  for (const [seq, asked, answered, size] of [[1, undefined, 3, 8], [5, 1, 1, 5], [5, 2, 2, 8], [8, 0, 3, 8], [6, 3, 3, 8]]) {
    const id = receipts[seq - 1].receipt_id;
    const got = await w.proofInclusion(id, { checkpoint: asked });
    assert.deepEqual([got.receipt_id, got.seq, got.leaf_index], [id, seq, seq - 1]);
    assert.deepEqual([got.checkpoint, got.tree_size], [answered, size]);
    const proof = got.proof.map(hash);
    assert.equal(got.proof_bytes, 32 * proof.length);
    assert.ok(hash(got.leaf_hash).equals(leaf(seq)), 'the leaf is the receipt document');
    const body = await signed(answered);
    assert.equal(body.size, size);
    assert.ok(body.root.equals(hash(got.root)), 'the root the note signs');
    const leaves = Array.from({ length: size }, (_, i) => leaf(i + 1));
    assert.ok(body.root.equals(mth(leaves)), 'the root of the receipts themselves');
    assert.equal(evidence.checkInclusion(proof, size, body.root, seq - 1, leaf(seq)), true, `receipt ${seq} in ${answered}`);
    for (let at = 0; at < proof.length; at += 1) {
      assert.equal(evidence.checkInclusion(flipped(proof, at, 0, 1), size, body.root, seq - 1, leaf(seq)), false, `hash ${at} flipped`);
    }
    assert.equal(evidence.checkInclusion(proof, size, body.root, seq % size, leaf(seq)), false, 'no other place');
  }
});

test('a consistency proof links the signed roots with the pure-JS Merkle code', needsCli, async (t) => {
  const { w, signed } = await log(t);
  for (const [older, newer, empty] of [[1, 2, false], [1, 3, false], [2, 3, true], [3, 3, true], [1, 1, true]]) {
    const got = await w.proofConsistency(older, newer);
    const [a, b] = [await signed(older), await signed(newer)];
    assert.deepEqual([got.old_checkpoint, got.new_checkpoint, got.old_size, got.new_size], [older, newer, a.size, b.size]);
    assert.ok(hash(got.old_root).equals(a.root) && hash(got.new_root).equals(b.root));
    const proof = got.proof.map(hash);
    assert.equal(proof.length === 0, empty, JSON.stringify(got));
    assert.equal(evidence.checkConsistency(proof, a.size, a.root, b.size, b.root), true, `${older} -> ${newer}`);
    for (let at = 0; at < proof.length; at += 1) {
      assert.equal(evidence.checkConsistency(flipped(proof, at, 31, 0x80), a.size, a.root, b.size, b.root), false, `hash ${at} flipped`);
    }
  }
});

test('the documents are the ones the CLI prints', needsCli, async (t) => {
  const { w, store, receipts } = await log(t);
  const id = receipts[2].receipt_id;
  assert.deepEqual(await w.proofInclusion(id), await cli(store, 'proof', 'inclusion', id));
  assert.deepEqual(await w.proofInclusion(id, { checkpoint: 1 }), await cli(store, 'proof', 'inclusion', id, '--checkpoint', '1'));
  assert.deepEqual(await w.proofConsistency(1, 3), await cli(store, 'proof', 'consistency', '1', '3'));
  assert.deepEqual({ checkpoints: await w.checkpoints() }, await cli(store, 'checkpoints'));
});

test('checkpoints are listed from a number up to a limit, each note signed', needsCli, async (t) => {
  const { w, key } = await log(t);
  const cases = [[undefined, undefined, [1, 2, 3]], [0, 0, [1, 2, 3]], [2, undefined, [2, 3]], [1, 2, [1, 2]], [3, 5, [3]], [4, undefined, []]];
  for (const [from, limit, numbers] of cases) {
    const listed = await w.checkpoints({ from, limit });
    assert.deepEqual(listed.map((cp) => cp.number), numbers, `from ${from}, limit ${limit}`);
  }
  for (const cp of await w.checkpoints()) {
    assert.deepEqual(Object.keys(cp).sort(), ['note', 'number', 'origin', 'root', 'size', 'time', 'verifier_key']);
    assert.deepEqual([cp.origin, cp.verifier_key], ['warden.test/node', key.encoded()]);
    const body = opened(cp.note, key);
    assert.deepEqual([body.origin, body.size], [cp.origin, cp.size]);
    assert.ok(body.root.equals(hash(cp.root)));
    assert.ok(cp.note.includes(`\nwarden-time ${cp.time}\n`));
    assert.doesNotMatch(JSON.stringify(cp), /PRIVATE\+KEY/, 'no signing key is stored or returned');
  }
});

test('each refusal rejects with the package error class and the library message', needsCli, async (t) => {
  const { w, receipts } = await log(t);
  const covered = receipts[0].receipt_id;
  const cases = [
    ['unknown receipt', () => w.proofInclusion(UNKNOWN), warden.NotFound, `no receipt ${UNKNOWN} is on the chain`],
    ['unknown checkpoint', () => w.proofInclusion(covered, { checkpoint: 7 }), warden.NotFound, 'there is no checkpoint 7; `warden checkpoints` lists them'],
    ['after the last checkpoint', () => w.proofInclusion(receipts[8].receipt_id), warden.NotFound, 'came after checkpoint 3 (8 receipts); name a later checkpoint, or make one'],
    ['after the named checkpoint', () => w.proofInclusion(receipts[6].receipt_id, { checkpoint: 1 }), warden.NotFound, 'came after checkpoint 1 (5 receipts)'],
    ['A after B', () => w.proofConsistency(2, 1), warden.InvalidInput, 'checkpoint 2 covers 8 receipts, more than checkpoint 1 (5); name the older one first'],
    ['unknown newer checkpoint', () => w.proofConsistency(1, 9), warden.NotFound, 'there is no checkpoint 9'],
    ['a checkpoint numbered 0', () => w.proofConsistency(0, 2), warden.InvalidInput, 'old_checkpoint is 0'],
  ];
  for (const [what, call, kind, words] of cases) {
    await assert.rejects(call, (error) => {
      assert.ok(error instanceof kind, `${what}: ${error}`);
      assert.ok(error.message.includes(words), `${what}: ${error.message}`);
      return true;
    });
  }
  // Refused here, before any call: what cannot cross as a count or as text.
  for (const call of [
    () => w.proofInclusion(covered, { checkpoint: -1 }),
    () => w.proofInclusion(42),
    () => w.proofConsistency(1),
    () => w.proofConsistency(1, 2 ** 53),
    () => w.checkpoints({ limit: 1.5 }),
  ]) {
    await assert.rejects(call, TypeError);
  }
  assert.equal((await w.proofInclusion(covered)).checkpoint, 3, 'the refusals changed nothing');
});

test('a store with no checkpoint says how to make one', async (t) => {
  const { w } = open(t);
  const write = w.protect('ledger.write', () => 'ok');
  await ada(() => write({ entry: 'one' }));
  const [receipt] = await w.receipts();
  await assert.rejects(w.proofInclusion(receipt.receipt_id), (error) => {
    assert.ok(error instanceof warden.NotFound);
    assert.equal(error.message, 'the store has no checkpoint yet; make one with `warden checkpoint --key FILE`');
    return true;
  });
  await assert.rejects(w.proofConsistency(1, 1), warden.NotFound);
  assert.deepEqual(await w.checkpoints(), []);
});

test('a closed Warden rejects the proof calls', async (t) => {
  const { w } = open(t);
  w.close();
  for (const call of [() => w.proofInclusion(UNKNOWN), () => w.proofConsistency(1, 2), () => w.checkpoints()]) {
    await assert.rejects(call, (error) => error instanceof warden.InvalidInput && /closed/.test(error.message));
  }
});
