'use strict';
// The pure-JavaScript bundle verifier (lib/evidence.js), required directly: no addon needed.
// Every bundle gets the reason the committed corpus expects; each tampered or crafted bundle
// below also goes to the Rust verifier (`warden verify-bundle --json`) when a built CLI is found
// under the repository's target/ directory (or $WARDEN_CLI), and both verdicts must agree on
// everything but the wording of the detail.

const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const evidence = require('../lib/evidence');

const repo = path.resolve(__dirname, '..', '..', '..');
const corpus = path.join(repo, 'tests', 'evidence', 'corpus');
const TRUSTED = fs.readFileSync(path.join(corpus, 'trusted.vkey'), 'utf8').trim();
const EXPECTED = JSON.parse(fs.readFileSync(path.join(corpus, 'expected.json'), 'utf8'));

// ---- the Rust verifier, when built ------------------------------------------------------------

/** The newest built `warden` CLI, or null. */
function findRustCli() {
  if (process.env.WARDEN_CLI) return process.env.WARDEN_CLI;
  const built = ['release', 'debug']
    .map((profile) => path.join(repo, 'target', profile, 'warden'))
    .filter((file) => fs.existsSync(file))
    .sort((a, b) => fs.statSync(b).mtimeMs - fs.statSync(a).mtimeMs);
  return built[0] ?? null;
}

const RUST_CLI = findRustCli();

/** The Rust verdict of `dir` with `keys` pinned, or null when no CLI is built. */
function rustVerdict(dir, keys) {
  if (RUST_CLI === null) return null;
  const args = ['verify-bundle', dir, '--json', ...keys.flatMap((key) => ['--key', key])];
  const run = spawnSync(RUST_CLI, args, { encoding: 'utf8' });
  assert.ok(!run.error, `cannot run ${RUST_CLI}: ${run.error?.message}`);
  assert.ok(run.status === 0 || run.status === 1, `${RUST_CLI} exited ${run.status}: ${run.stdout}${run.stderr}`);
  return JSON.parse(run.stdout);
}

const COMPARED = [
  'ok',
  'reason',
  'receipts',
  'checkpoints',
  'keys_pinned',
  'open_at_end',
  'closed_without_receipt',
  'anchors',
  'anchors_checked',
  'policies_carried',
  'policies_missing',
];

/** Verify `dir`: the JS verdict has `reason` (null: sound) and, when the CLI is built, agrees with Rust's. */
function assertVerdict(dir, keys, reason) {
  const verdict = evidence.verifyBundle(dir, { keys });
  assert.equal(verdict.reason, reason, `JS verdict: ${JSON.stringify(verdict)}`);
  assert.equal(verdict.ok, reason === null);
  assert.equal(typeof verdict.detail, 'string');
  assert.ok(verdict.detail.length > 0);
  if (reason !== null) assert.ok(evidence.REASONS.includes(reason));
  const rust = rustVerdict(dir, keys);
  if (rust !== null) {
    const pick = (v) => Object.fromEntries(COMPARED.map((field) => [field, v[field]]));
    assert.deepEqual(pick(verdict), pick(rust), `JS: ${verdict.detail}\nRust: ${rust.detail}`);
  }
  return verdict;
}

/** A fresh temporary directory, removed when the test ends. */
function tempDir(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'warden-evidence-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

// ---- the committed corpus ---------------------------------------------------------------------

test('every corpus bundle gets the reason expected.json names, with the trusted key pinned', () => {
  assert.ok(Object.keys(EXPECTED).length >= 10);
  for (const [name, { reason }] of Object.entries(EXPECTED)) {
    const verdict = evidence.verifyBundle(path.join(corpus, name), { keys: [TRUSTED] });
    assert.equal(verdict.ok, reason === null, `${name}: ${verdict.detail}`);
    assert.equal(verdict.reason, reason, `${name}: ${verdict.detail}`);
    assert.equal(verdict.keys_pinned, true);
  }
});

test('the sound bundles state what they proved', () => {
  const sound = evidence.verifyBundle(path.join(corpus, 'sound'), { keys: [TRUSTED] });
  assert.deepEqual(
    { ...sound, detail: undefined },
    {
      ok: true,
      reason: null,
      detail: undefined,
      receipts: 28,
      checkpoints: 3,
      keys_pinned: true,
      open_at_end: 1,
      closed_without_receipt: 1,
      anchors: 6,
      anchors_checked: 3,
      policies_carried: [`sha256:${crypto.createHash('sha256').update(fs.readFileSync(carriedPolicy(path.join(corpus, 'sound')))).digest('hex')}`],
      policies_missing: ['sha256:test'],
    },
  );
  assert.match(sound.detail, /^28 receipts hash to the roots of 3 checkpoint\(s\)/);
  const later = evidence.verifyBundle(path.join(corpus, 'from_checkpoint_1'), { keys: [TRUSTED] });
  assert.equal(later.receipts, 8);
  assert.deepEqual([later.policies_carried, later.policies_missing], [sound.policies_carried, sound.policies_missing]);
  const edited = evidence.verifyBundle(path.join(corpus, 'edited_policy'), { keys: [TRUSTED] });
  assert.deepEqual([edited.reason, edited.policies_carried, edited.policies_missing], ['policy_altered', [], []]);
});

/** A copy of the corpus's swapped_key bundle without its anchors (which show the notes re-signed). */
function unanchoredSwappedKey(t) {
  const dir = path.join(tempDir(t), 'swapped_key');
  fs.cpSync(path.join(corpus, 'swapped_key'), dir, { recursive: true });
  fs.rmSync(path.join(dir, 'anchors.jsonl'));
  return dir;
}

test('a swapped key verifies when the keys are not pinned and the notes were not anchored, and says so', (t) => {
  const anchored = assertVerdict(path.join(corpus, 'swapped_key'), [], 'anchor_invalid');
  assert.equal(anchored.keys_pinned, false);
  const dir = unanchoredSwappedKey(t);
  const verdict = assertVerdict(dir, [], null);
  assert.equal(verdict.keys_pinned, false);
  assert.equal(evidence.verifyBundle(dir, { keys: [] }).keys_pinned, false);
});

test('a key may be given as a file holding it; an unreadable key throws', (t) => {
  const verdict = evidence.verifyBundle(path.join(corpus, 'sound'), { keys: [path.join(corpus, 'trusted.vkey')] });
  assert.equal(verdict.ok, true);
  assert.throws(() => evidence.verifyBundle(path.join(corpus, 'sound'), { keys: ['nokey+00000000+AA=='] }), /neither a verifier key/);
  const file = path.join(tempDir(t), 'bad.vkey');
  fs.writeFileSync(file, 'not a key\n');
  assert.throws(() => evidence.verifyBundle(path.join(corpus, 'sound'), { keys: [file] }), /not a signed-note Ed25519 verifier key/);
});

test('every corpus bundle gets the Rust verdict, pinned and unpinned', (t) => {
  if (RUST_CLI === null) {
    t.skip('no built warden CLI under target/');
    return;
  }
  for (const name of Object.keys(EXPECTED)) {
    for (const keys of [[TRUSTED], []]) {
      const dir = path.join(corpus, name);
      assertVerdict(dir, keys, evidence.verifyBundle(dir, { keys }).reason);
    }
  }
});

// ---- signed notes and keys ----------------------------------------------------------------------

// The example of golang.org/x/mod/sumdb/note.
const PETER = 'PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW';
const PETER_TEXT = "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n";
const PETER_NOTE = `${PETER_TEXT}\n\u2014 PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n`;

/** A directory holding one bundle whose only checkpoint note is `note`, pinned to `key`. */
function noteOnlyBundle(t, note, origin = 'x') {
  const dir = tempDir(t);
  fs.mkdirSync(path.join(dir, 'checkpoints'));
  fs.writeFileSync(
    path.join(dir, 'bundle.json'),
    JSON.stringify({ format: 'warden.bundle/v1', origin, checkpoints: [1], start_size: 0, keys: [], policies: [], policies_missing: [] }),
  );
  fs.writeFileSync(path.join(dir, 'checkpoints', '000001.note'), note);
  return dir;
}

test('the sumdb/note example verifies; an altered text or another key does not', (t) => {
  const key = evidence.parseVerifierKey(PETER);
  assert.equal(key.name, 'PeterNeumann');
  assert.equal(key.id, 0xc74f20a3);
  assert.equal(key.encoded(), PETER);
  // The text is no checkpoint, so a verified note is refused one step later: checkpoint_altered.
  const sound = evidence.verifyBundle(noteOnlyBundle(t, PETER_NOTE), { keys: [PETER] });
  assert.equal(sound.reason, 'checkpoint_altered', sound.detail);
  assert.match(sound.detail, /a checkpoint has 5 lines/);
  const altered = evidence.verifyBundle(noteOnlyBundle(t, PETER_NOTE.replace('answer', 'Answer')), { keys: [PETER] });
  assert.equal(altered.reason, 'signature_invalid');
  assert.match(altered.detail, /PeterNeumann\+c74f20a3/);
  const enoch = 'EnochRoot+af0cfe78+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop';
  const untrusted = evidence.verifyBundle(noteOnlyBundle(t, PETER_NOTE), { keys: [enoch] });
  assert.equal(untrusted.reason, 'key_untrusted');
  assert.match(untrusted.detail, /PeterNeumann\+c74f20a3/);
  const unsigned = evidence.verifyBundle(noteOnlyBundle(t, PETER_TEXT), { keys: [PETER] });
  assert.equal(unsigned.reason, 'bundle_malformed');
});

test('malformed verifier keys are refused, saying why', () => {
  const cases = [
    ['PeterNeumann+c74f20a4+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW', /id does not match/],
    ['PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10T', /not base64/],
    ['Peter Neumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW', /name/],
    ['PeterNeumann+c74f20a3+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW', /0x01 followed by/],
    ['PeterNeumann+c74f20a+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW', /8 hex digits/],
    ['PeterNeumann', /NAME\+ID\+KEY/],
    [`${'n'.repeat(129)}+00000000+AA==`, /name/],
  ];
  for (const [text, why] of cases) assert.throws(() => evidence.parseVerifierKey(text), why, text);
  // Rust's str::trim: U+0085 is whitespace, U+FEFF is not.
  assert.equal(evidence.parseVerifierKey(`\n ${PETER}\u0085\r\n`).encoded(), PETER);
  assert.throws(() => evidence.parseVerifierKey(`\ufeff${PETER}`), /id does not match/);
  assert.equal(evidence.parseVerifierKey(PETER.replace('c74f20a3', 'C74F20A3')).id, 0xc74f20a3);
});

// ---- the Merkle tree ----------------------------------------------------------------------------

/** RFC 9162's MTH and proofs written out as the RFC defines them, over `leaves`. */
function rfcTree(leaves) {
  const memo = new Map();
  const split = (n) => {
    let k = 1;
    while (k * 2 < n) k *= 2;
    return k;
  };
  const mth = (lo, hi) => {
    const id = `${lo}:${hi}`;
    if (!memo.has(id)) {
      memo.set(id, hi - lo === 1 ? leaves[lo] : evidence.nodeHash(mth(lo, lo + split(hi - lo)), mth(lo + split(hi - lo), hi)));
    }
    return memo.get(id);
  };
  const auditPath = (m, lo, hi) => {
    if (hi - lo === 1) return [];
    const k = split(hi - lo);
    return m < k ? [...auditPath(m, lo, lo + k), mth(lo + k, hi)] : [...auditPath(m - k, lo + k, hi), mth(lo, lo + k)];
  };
  const subproof = (m, lo, hi, complete) => {
    if (m === hi - lo) return complete ? [] : [mth(lo, hi)];
    const k = split(hi - lo);
    return m <= k
      ? [...subproof(m, lo, lo + k, complete), mth(lo + k, hi)]
      : [...subproof(m - k, lo + k, hi, false), mth(lo, lo + k)];
  };
  return {
    root: (n) => (n === 0 ? crypto.createHash('sha256').digest() : mth(0, n)),
    inclusion: (index, n) => auditPath(index, 0, n),
    consistency: (m, n) => subproof(m, 0, n, true),
  };
}

const LEAVES = Array.from({ length: 70 }, (_, i) => evidence.leafHash(Buffer.from(`{"seq":${i + 1}}`)));
const TREE = rfcTree(LEAVES);
const flipped = (hash) => {
  const copy = Buffer.from(hash);
  copy[7] ^= 0x20;
  return copy;
};

test('the leaf and node hashes are RFC 9162 and domain separated', () => {
  const doc = Buffer.from('{"seq":1}');
  assert.deepEqual(evidence.leafHash(doc), crypto.createHash('sha256').update(Buffer.from([0])).update(doc).digest());
  const [a, b] = [Buffer.alloc(32, 1), Buffer.alloc(32, 2)];
  const node = crypto.createHash('sha256').update(Buffer.from([1])).update(a).update(b).digest();
  assert.deepEqual(evidence.nodeHash(a, b), node);
  assert.notDeepEqual(evidence.leafHash(Buffer.concat([a, b])), node);
  assert.throws(() => evidence.nodeHash(a, Buffer.alloc(31)), TypeError);
});

test('every audit path of trees of 1 to 70 leaves verifies, and wrong ones do not', () => {
  for (let n = 1; n <= 70; n++) {
    const root = TREE.root(n);
    for (let index = 0; index < n; index++) {
      const proof = TREE.inclusion(index, n);
      assert.ok(evidence.checkInclusion(proof, n, root, index, LEAVES[index]), `leaf ${index} of ${n}`);
      assert.ok(evidence.checkInclusion(proof, BigInt(n), root, BigInt(index), LEAVES[index]));
      assert.ok(!evidence.checkInclusion(proof, n, root, index, flipped(LEAVES[index])));
      assert.ok(!evidence.checkInclusion(proof, n, flipped(root), index, LEAVES[index]));
      assert.ok(!evidence.checkInclusion([...proof, root], n, root, index, LEAVES[index]), 'a hash too many');
      if (proof.length > 0) {
        assert.ok(!evidence.checkInclusion(proof.slice(1), n, root, index, LEAVES[index]), 'a hash too few');
        assert.ok(!evidence.checkInclusion([flipped(proof[0]), ...proof.slice(1)], n, root, index, LEAVES[index]));
      }
      if (n > 1) assert.ok(!evidence.checkInclusion(proof, n, root, (index + 1) % n, LEAVES[index]), 'another index');
    }
    assert.ok(!evidence.checkInclusion([], n, root, n, LEAVES[0]), 'an index past the tree');
  }
});

test('every consistency proof between trees of 1 to 70 leaves verifies, and wrong ones do not', () => {
  for (let n = 1; n <= 70; n++) {
    const root = TREE.root(n);
    for (let m = 1; m <= n; m++) {
      const old = TREE.root(m);
      const proof = TREE.consistency(m, n);
      assert.ok(evidence.checkConsistency(proof, m, old, n, root), `${m} -> ${n}`);
      assert.ok(!evidence.checkConsistency(proof, m, flipped(old), n, root), `${m} -> ${n} forked`);
      assert.ok(!evidence.checkConsistency(proof, m, old, n, flipped(root)));
      assert.ok(!evidence.checkConsistency([...proof, root], m, old, n, root), 'a hash too many');
      if (proof.length > 0) {
        assert.ok(!evidence.checkConsistency(proof.slice(1), m, old, n, root), 'a hash too few');
        assert.ok(!evidence.checkConsistency([flipped(proof[0]), ...proof.slice(1)], m, old, n, root));
      }
      if (m < n) assert.ok(!evidence.checkConsistency(proof, m + 1, TREE.root(m + 1), n, root) || m + 1 === n);
    }
    assert.ok(!evidence.checkConsistency([], 0, TREE.root(0), n, root), 'the empty tree takes no proof here');
    assert.ok(!evidence.checkConsistency([], n, root, n - 1, TREE.root(n - 1)), 'a tree does not shrink');
  }
  assert.ok(evidence.checkConsistency([], 0, TREE.root(0), 0, TREE.root(0)));
});

// ---- a bundle builder: a log of our own, signed with our own key -----------------------------------

/** An Ed25519 signing key from a fixed seed, with its signed-note name, id and verifier key. */
function noteKey(name, seedByte) {
  const seed = Buffer.alloc(32, seedByte);
  const privateKey = crypto.createPrivateKey({
    key: Buffer.concat([Buffer.from('302e020100300506032b657004220420', 'hex'), seed]),
    format: 'der',
    type: 'pkcs8',
  });
  const raw = crypto.createPublicKey(privateKey).export({ format: 'der', type: 'spki' }).subarray(12);
  return keyOf(name, Buffer.from(raw), privateKey);
}

/** The signed-note identity of a raw public key. */
function keyOf(name, raw, privateKey = null) {
  const encoded = Buffer.concat([Buffer.from([1]), raw]);
  const id = crypto.createHash('sha256').update(`${name}\n`).update(encoded).digest().readUInt32BE(0);
  const idHex = id.toString(16).padStart(8, '0');
  return { name, id, idHex, privateKey, vkey: `${name}+${idHex}+${encoded.toString('base64')}` };
}

/** A signature line by `key` over `text`, or with the raw signature `signature`. */
function signatureLine(key, text, signature = crypto.sign(null, Buffer.from(text), key.privateKey)) {
  const id = Buffer.alloc(4);
  id.writeUInt32BE(key.id);
  return `\u2014 ${key.name} ${Buffer.concat([id, signature]).toString('base64')}\n`;
}

const SIGNER = noteKey('warden.test/js', 7);
const OTHER = noteKey('warden.test/js', 9);
const ORIGIN = 'warden.test/js';
const sha256hex = (text) => crypto.createHash('sha256').update(text).digest('hex');
const b64 = (bytes) => Buffer.from(bytes).toString('base64');
const pretty = (value) => `${JSON.stringify(value, null, 2)}\n`;
const time = (second) => `2025-11-24T16:00:${String(second).padStart(2, '0')}.000Z`;

/** Receipt `seq` of the default log: a committed outcome of its own effect, finished at `seq` seconds. */
function receiptDoc(seq, prevHash) {
  return {
    action: 'stripe.refund',
    action_hash: `sha256:${sha256hex(`action ${seq}`)}`,
    approval_id: null,
    approver: null,
    attempt: 1,
    effect_key: `refund:${seq}`,
    execution: null,
    finished_at: time(seq),
    prev_hash: prevHash,
    result: 'committed',
    seq,
  };
}

/**
 * Write a bundle to `dir`. `spec`: `receipts` (how many), `line(seq, prevHash)` (the text of a
 * receipt, default JSON of receiptDoc), `checkpoints` ([{size, time, open, closed}]),
 * `startSize`, `approvals` (lines), and hooks that rewrite one file's text:
 * `companion(number, object)`, `note(number, text)`, `signatures(number, text)` (signature lines),
 * `proof(number, object)`, `manifest(object)`, `start(object)`, `receiptsText(text)`.
 */
function writeBundle(dir, spec) {
  const s = { receipts: 4, startSize: 0, approvals: [], signer: SIGNER, ...spec };
  s.checkpoints ??= [{ size: s.receipts, time: time(59), open: [], closed: [] }];
  const lines = [];
  let prev = 'sha256:0000000000000000000000000000000000000000000000000000000000000000';
  for (let seq = 1; seq <= s.receipts; seq++) {
    const line = s.line ? s.line(seq, prev) : JSON.stringify(receiptDoc(seq, prev));
    lines.push(line);
    prev = `sha256:${sha256hex(line)}`;
  }
  const leaves = lines.map((line) => evidence.leafHash(Buffer.from(line)));
  const tree = rfcTree(leaves);
  for (const sub of ['checkpoints', 'keys', 'proofs']) fs.mkdirSync(path.join(dir, sub), { recursive: true });
  s.checkpoints.forEach((cp, at) => {
    const number = at + 1;
    const companion = {
      format: 'warden.checkpoint/v1',
      checkpoint: number,
      origin: ORIGIN,
      size: cp.size,
      time: cp.time,
      open: cp.open ?? [],
      closed_without_receipt: cp.closed ?? [],
    };
    const companionText = s.companion ? s.companion(number, companion) : pretty(companion);
    const root = cp.root ?? (cp.size <= s.receipts ? tree.root(cp.size) : Buffer.alloc(32, 3));
    const defaultText = `${ORIGIN}\n${cp.size}\n${b64(root)}\nwarden-time ${cp.time}\nwarden-open ${companion.open.length} ${b64(crypto.createHash('sha256').update(companionText).digest())}\n`;
    const text = s.note ? s.note(number, defaultText) : defaultText;
    const signatures = s.signatures ? s.signatures(number, text) : [signatureLine(s.signer, text)];
    const name = String(number).padStart(6, '0');
    fs.writeFileSync(path.join(dir, 'checkpoints', `${name}.json`), companionText);
    fs.writeFileSync(path.join(dir, 'checkpoints', `${name}.note`), `${text}\n${signatures.join('')}`);
    if (at === 0) return;
    const old = s.checkpoints[at - 1];
    const proof = old.size === 0 || old.size >= cp.size || cp.size > s.receipts ? [] : tree.consistency(old.size, cp.size);
    const file = { old_checkpoint: number - 1, new_checkpoint: number, old_size: old.size, new_size: cp.size, proof: proof.map(b64) };
    const before = String(number - 1).padStart(6, '0');
    fs.writeFileSync(path.join(dir, 'proofs', `consistency-${before}-${name}.json`), s.proof ? s.proof(number, file) : pretty(file));
  });
  fs.writeFileSync(path.join(dir, 'keys', `${s.signer.idHex}.vkey`), `${s.signer.vkey}\n`);
  if (s.startSize > 0) {
    const frontier = [];
    let first = 0;
    for (let level = 63; level >= 0; level--) {
      if (Math.floor(s.startSize / 2 ** level) % 2 === 1) {
        frontier.push(b64(first + 2 ** level <= leaves.length ? rfcTree(leaves.slice(first)).root(2 ** level) : Buffer.alloc(32)));
        first += 2 ** level;
      }
    }
    const start = { size: s.startSize, last_hash: `sha256:${sha256hex(lines[s.startSize - 1])}`, frontier };
    fs.writeFileSync(path.join(dir, 'start.json'), s.start ? s.start(start) : pretty(start));
  }
  const receiptsText = lines.slice(s.startSize).map((line) => `${line}\n`).join('');
  fs.writeFileSync(path.join(dir, 'receipts.jsonl'), s.receiptsText ? s.receiptsText(receiptsText) : receiptsText);
  fs.writeFileSync(path.join(dir, 'approvals.jsonl'), s.approvals.map((line) => `${line}\n`).join(''));
  const manifest = {
    format: 'warden.bundle/v1',
    origin: ORIGIN,
    checkpoints: s.checkpoints.map((_, at) => at + 1),
    start_size: s.startSize,
    keys: [`keys/${s.signer.idHex}.vkey`],
    policies: [],
    policies_missing: [],
  };
  fs.writeFileSync(path.join(dir, 'bundle.json'), s.manifest ? s.manifest(manifest) : pretty(manifest));
  return dir;
}

// ---- tampered copies of the sound corpus bundle --------------------------------------------------

const edit = (file, change) => (dir) => fs.writeFileSync(path.join(dir, file), change(fs.readFileSync(path.join(dir, file), 'utf8')));
const editJson = (file, change) => edit(file, (text) => pretty(change(JSON.parse(text))));
const remove = (file) => (dir) => fs.rmSync(path.join(dir, file));
/** Rewrite receipt line `n` (1-based) of receipts.jsonl. */
const editLine = (n, change) =>
  edit('receipts.jsonl', (text) => {
    const lines = text.split('\n');
    lines[n - 1] = change(lines[n - 1]);
    return lines.join('\n');
  });
/** Flip one base64 character in the middle of the signature of checkpoint 2. */
const flipSignature = edit('checkpoints/000002.note', (text) => {
  const at = text.lastIndexOf(' ') + 30;
  return text.slice(0, at) + (text[at] === 'A' ? 'B' : 'A') + text.slice(at + 1);
});
const SPEND = (line) => line.replace('"approval_id":null,"approver":null', '"approval_id":"apr_x","approver":"ops:bob"');
const approval = (fields) => JSON.stringify({ approval_id: 'apr_x', action_hash: 'sha256:x', approver: 'ops:bob', ...fields });
/** The action hash of receipt 28 of the sound bundle. */
const actionHash28 = (dir) => JSON.parse(fs.readFileSync(path.join(dir, 'receipts.jsonl'), 'utf8').split('\n')[27]).action_hash;
const nested = (depth) => `${'['.repeat(depth)}${']'.repeat(depth)}`;
/** The one policy file the corpus's bundles carry. */
function carriedPolicy(dir) {
  const manifest = JSON.parse(fs.readFileSync(path.join(dir, 'bundle.json'), 'utf8'));
  const carried = manifest.policies.filter((hash) => !manifest.policies_missing.includes(hash));
  assert.equal(carried.length, 1);
  return path.join(dir, evidence.policyFile(carried[0]));
}
/** The key file the bundle in `dir` lists first. */
const keyFile = (dir) => path.join(dir, JSON.parse(fs.readFileSync(path.join(dir, 'bundle.json'), 'utf8')).keys[0]);
/** Consistency proof 1→2 of the sound bundle with its first hash rewritten by `change`. */
const firstProofHash = (change) =>
  editJson('proofs/consistency-000001-000002.json', (p) => ({ ...p, proof: [change(p.proof[0]), ...p.proof.slice(1)] }));
/** Consistency proof 1→2 with the first hash that ends in `=` written without it. */
const unpaddedProofHash = editJson('proofs/consistency-000001-000002.json', (p) => {
  const at = p.proof.findIndex((hash) => hash.endsWith('='));
  assert.ok(at >= 0);
  return { ...p, proof: p.proof.map((hash, i) => (i === at ? hash.replace(/=+$/, '') : hash)) };
});
/** One base64 character of `hash` changed to another valid one. */
const otherBase64 = (hash) => `${hash[0] === 'A' ? 'B' : 'A'}${hash.slice(1)}`;

/** The first line of anchors.jsonl of `kind`, rewritten by `change` (then, with `raw`, its text). */
const editAnchor = (kind, change, raw = (text) => text) =>
  edit('anchors.jsonl', (text) => {
    const lines = text.split('\n').slice(0, -1);
    const at = lines.findIndex((line) => JSON.parse(line).kind === kind);
    assert.ok(at >= 0, `no ${kind} anchor`);
    lines[at] = raw(JSON.stringify(change(JSON.parse(lines[at]))));
    return lines.map((line) => `${line}\n`).join('');
  });
/** An anchor line's change: its receipt's text edited. */
const receiptText = (change) => (a) => ({ ...a, receipt: Buffer.from(change(Buffer.from(a.receipt, 'base64').toString('utf8'))).toString('base64') });

const TAMPERED = [
  ['bundle.json missing a field', editJson('bundle.json', ({ policies, ...rest }) => rest), 'bundle_malformed'],
  ['bundle.json of another format', editJson('bundle.json', (m) => ({ ...m, format: 'warden.bundle/v2' })), 'bundle_malformed'],
  ['a flipped signature character', flipSignature, 'signature_invalid'],
  ['an edited companion', edit('checkpoints/000002.json', (text) => text.replace('"attempt": 1', '"attempt": 2')), 'checkpoint_altered'],
  ['an edited consistency proof', firstProofHash(otherBase64), 'proof_invalid'],
  ['a receipt line that is not JSON', editLine(5, (line) => line.slice(0, -1)), 'receipt_malformed'],
  ['approvals.jsonl missing a spent approval', editLine(28, SPEND), 'bundle_malformed'],
  // More of the same kinds.
  ['bundle.json that is not JSON', edit('bundle.json', (text) => text.replace('{', '')), 'bundle_malformed'],
  ['bundle.json naming a field twice', edit('bundle.json', (text) => text.replace('{', '{"format": "warden.bundle/v1",')), 'bundle_malformed'],
  ['bundle.json written as an array of its fields', editJson('bundle.json', (m) => Object.values(m)), null],
  ['bundle.json with a field too many in its array', editJson('bundle.json', (m) => [...Object.values(m), 1]), 'bundle_malformed'],
  ['bundle.json with an unknown field', edit('bundle.json', (text) => text.replace('{', '{"later": [{"deep": 1e400, "\\udc00": "\\ud800"}],')), null],
  ['bundle.json with a lone surrogate in an unknown field', edit('bundle.json', (text) => text.replace('{', '{"x": "\\ud800",')), null],
  ['bundle.json with a lone surrogate in a key', edit('bundle.json', (text) => text.replace('{', '{"\\ud800": 1,')), 'bundle_malformed'],
  ['bundle.json with a start_size of 0.0', edit('bundle.json', (text) => text.replace('"start_size": 0', '"start_size": 0.0')), 'bundle_malformed'],
  ['bundle.json with a start_size of -0', edit('bundle.json', (text) => text.replace('"start_size": 0', '"start_size": -0')), 'bundle_malformed'],
  ['bundle.json with a key that is no string', editJson('bundle.json', (m) => ({ ...m, keys: [1] })), 'bundle_malformed'],
  ['bundle.json listing no checkpoint', editJson('bundle.json', (m) => ({ ...m, checkpoints: [] })), 'bundle_malformed'],
  ['bundle.json listing checkpoints out of order', editJson('bundle.json', (m) => ({ ...m, checkpoints: [1, 3, 2] })), 'bundle_malformed'],
  ['bundle.json of another origin', editJson('bundle.json', (m) => ({ ...m, origin: 'warden.test/other' })), 'checkpoint_altered'],
  ['a checkpoint note missing', remove('checkpoints/000003.note'), 'bundle_malformed'],
  ['a note with CRLF line ends', edit('checkpoints/000001.note', (text) => text.replace(/\n/g, '\r\n')), 'bundle_malformed'],
  ['a companion missing', remove('checkpoints/000002.json'), 'bundle_malformed'],
  ['a consistency proof missing', remove('proofs/consistency-000002-000003.json'), 'bundle_malformed'],
  ['a proof hash that is not base64', firstProofHash((hash) => `${hash.slice(0, 5)}-${hash.slice(6)}`), 'bundle_malformed'],
  ['a proof hash without its padding', unpaddedProofHash, 'bundle_malformed'],
  ['a proof one hash short', editJson('proofs/consistency-000001-000002.json', (p) => ({ ...p, proof: p.proof.slice(1) })), 'proof_invalid'],
  ['a proof naming other sizes', editJson('proofs/consistency-000001-000002.json', (p) => ({ ...p, old_size: 21 })), 'proof_invalid'],
  ['a proof naming other checkpoints', editJson('proofs/consistency-000001-000002.json', (p) => ({ ...p, old_checkpoint: 7 })), null],
  ['the last receipt without its newline', edit('receipts.jsonl', (text) => text.slice(0, -1)), 'receipt_malformed'],
  ['a receipt with a lone surrogate', editLine(9, (line) => line.replace('"action":', '"x":"\\udc00","action":')), 'receipt_malformed'],
  ['a receipt whose seq is 5.0', editLine(5, (line) => line.replace('"seq":5', '"seq":5.0')), 'receipt_malformed'],
  ['a receipt whose seq is a string', editLine(5, (line) => line.replace('"seq":5', '"seq":"5"')), 'receipt_malformed'],
  ['a receipt starting with a BOM', editLine(5, (line) => `\ufeff${line}`), 'receipt_malformed'],
  ['the last receipt nested 127 deep', editLine(28, (line) => line.replace('"action":', `"x":${nested(126)},"action":`)), 'root_mismatch'],
  ['the last receipt nested 128 deep', editLine(28, (line) => line.replace('"action":', `"x":${nested(127)},"action":`)), 'receipt_malformed'],
  ['the last receipt with a seq serde_json reads from its private number key', editLine(28, (line) => line.replace('"seq":28', '"seq":{"$serde_json::private::Number":"28"}')), 'root_mismatch'],
  ['the last receipt naming its seq twice', editLine(28, (line) => line.replace('"seq":28', '"seq":1,"seq":28')), 'root_mismatch'],
  ['the last receipt with a number out of f64 range', editLine(28, (line) => line.replace('"seq":28', '"seq":28,"big":1e400')), 'root_mismatch'],
  ['a spent approval on another approver', (dir) => {
    editLine(28, SPEND)(dir);
    fs.writeFileSync(path.join(dir, 'approvals.jsonl'), `${approval({ action_hash: actionHash28(dir), approver: 'ops:eve' })}\n`);
  }, 'receipt_altered'],
  ['a spent approval that matches', (dir) => {
    editLine(28, SPEND)(dir);
    fs.writeFileSync(path.join(dir, 'approvals.jsonl'), `${approval({ action_hash: actionHash28(dir) })}\n`);
  }, 'root_mismatch'],
  ['approvals.jsonl with a line that is not JSON', (dir) => fs.writeFileSync(path.join(dir, 'approvals.jsonl'), '{\n'), 'bundle_malformed'],
  ['approvals.jsonl with an empty line', (dir) => fs.writeFileSync(path.join(dir, 'approvals.jsonl'), '\n'), 'bundle_malformed'],
  ['approvals.jsonl with CRLF line ends', (dir) => fs.writeFileSync(path.join(dir, 'approvals.jsonl'), `${approval({})}\r\n`), null],
  ['approvals.jsonl missing', remove('approvals.jsonl'), 'bundle_malformed'],
  ['receipts.jsonl missing', remove('receipts.jsonl'), 'bundle_malformed'],
  // The policies.
  ['the carried policy file missing', (dir) => fs.rmSync(carriedPolicy(dir)), 'bundle_malformed'],
  ['the carried policy file with a newline added', (dir) => fs.appendFileSync(carriedPolicy(dir), '\n'), 'policy_altered'],
  ['the carried policy file emptied', (dir) => fs.writeFileSync(carriedPolicy(dir), ''), 'policy_altered'],
  ['the missing policy claimed carried', editJson('bundle.json', (m) => ({ ...m, policies_missing: [] })), 'bundle_malformed'],
  ['the carried policy claimed missing', editJson('bundle.json', (m) => ({ ...m, policies_missing: [...m.policies] })), null],
  ['a missing policy not among the policies', editJson('bundle.json', (m) => ({ ...m, policies_missing: [...m.policies_missing, 'sha256:other'] })), 'bundle_malformed'],
  ['a policy listed missing twice', editJson('bundle.json', (m) => ({ ...m, policies_missing: [...m.policies_missing, 'sha256:test'] })), 'bundle_malformed'],
  ['a policy listed twice', editJson('bundle.json', (m) => ({ ...m, policies: [...m.policies, m.policies[0]] })), 'bundle_malformed'],
  ['a named policy not listed', editJson('bundle.json', (m) => ({ ...m, policies: ['sha256:test'] })), 'bundle_malformed'],
  ['a listed policy no receipt names', editJson('bundle.json', (m) => ({ ...m, policies: [...m.policies, 'sha256:unnamed'] })), 'bundle_malformed'],
  ['bundle.json without policies_missing', editJson('bundle.json', ({ policies_missing, ...rest }) => rest), 'bundle_malformed'],
  // The anchors.
  ['anchors.jsonl missing', remove('anchors.jsonl'), null],
  ['anchors.jsonl that is not JSON', (dir) => fs.writeFileSync(path.join(dir, 'anchors.jsonl'), '{\n'), 'bundle_malformed'],
  ['anchors.jsonl with an empty line', (dir) => fs.appendFileSync(path.join(dir, 'anchors.jsonl'), '\n'), 'bundle_malformed'],
  ['anchors.jsonl with CRLF line ends', edit('anchors.jsonl', (text) => text.replace(/\n/g, '\r\n')), null],
  ['an anchor with an unknown field', editAnchor('file', (a) => ({ ...a, extra: 1 })), 'bundle_malformed'],
  ['an anchor without its sink', editAnchor('file', ({ sink, ...rest }) => rest), 'bundle_malformed'],
  ['an anchor whose checkpoint is 1.0', editAnchor('file', (a) => a, (text) => text.replace('"checkpoint":1,', '"checkpoint":1.0,')), 'bundle_malformed'],
  ['an anchor of a checkpoint the bundle does not hold', editAnchor('file', (a) => ({ ...a, checkpoint: 9 })), 'bundle_malformed'],
  ['an anchor receipt that is not base64', editAnchor('cosignature', (a) => ({ ...a, receipt: 'AAA' })), 'bundle_malformed'],
  ['an anchor receipt in non-canonical base64', editAnchor('cosignature', (a) => ({ ...a, receipt: 'AB==' })), 'bundle_malformed'],
  ['a file anchor without its receipt', editAnchor('file', (a) => ({ ...a, receipt: null })), 'bundle_malformed'],
  ['a file anchor line edited', editAnchor('file', receiptText((r) => r.replace('"size":20', '"size":21'))), 'anchor_invalid'],
  ['a file anchor line with its newline', editAnchor('file', receiptText((r) => `${r}\n`)), 'anchor_invalid'],
  ['a file anchor moved to another checkpoint', editAnchor('file', (a) => ({ ...a, checkpoint: 2 })), 'anchor_invalid'],
  ['a witness receipt edited', editAnchor('cosignature', receiptText((r) => `${r}!`)), null],
  ['an anchor without a kind', editAnchor('file', ({ kind, ...rest }) => rest), null],
];

test('tampered copies of the sound bundle are refused by name, as the Rust verifier refuses them', async (t) => {
  for (const [name, change, reason] of TAMPERED) {
    await t.test(name, (t) => {
      const dir = path.join(tempDir(t), 'bundle');
      fs.cpSync(path.join(corpus, 'sound'), dir, { recursive: true });
      change(dir);
      assertVerdict(dir, [TRUSTED], reason);
    });
  }
});

const UNPINNED = [
  ['the bundle key file missing', (dir) => fs.rmSync(keyFile(dir)), 'bundle_malformed'],
  ['the bundle key file ending in U+0085 (whitespace to Rust)', (dir) => fs.writeFileSync(keyFile(dir), `${fs.readFileSync(keyFile(dir), 'utf8').trim()}\u0085`), null],
  ['the bundle key file starting with a BOM (not whitespace to Rust)', (dir) => fs.writeFileSync(keyFile(dir), `\ufeff${fs.readFileSync(keyFile(dir), 'utf8')}`), 'bundle_malformed'],
  ['the bundle key file not UTF-8', (dir) => fs.writeFileSync(keyFile(dir), Buffer.from([0xff])), 'bundle_malformed'],
];

test('unpinned, the bundle keys are read as the Rust verifier reads them', async (t) => {
  for (const [name, change, reason] of UNPINNED) {
    await t.test(name, (t) => {
      const dir = path.join(tempDir(t), 'bundle');
      fs.cpSync(path.join(corpus, 'sound'), dir, { recursive: true });
      change(dir);
      const verdict = assertVerdict(dir, [], reason);
      assert.equal(verdict.keys_pinned, false);
    });
  }
});

// ---- crafted bundles: what needs a signature the corpus key cannot make ----------------------------

/** A small-order key (the identity point) and its "signature" R = identity, s = 0, which OpenSSL accepts on any message. */
const WEAK = keyOf('warden.test/js', Buffer.concat([Buffer.from([1]), Buffer.alloc(31)]));
const WEAK_SIGNATURE = Buffer.concat([Buffer.from([1]), Buffer.alloc(63)]);
const L = (1n << 252n) + 27742317777372353535851937790883648493n;
/** `signature` with s replaced by s + L (the same point equation, a non-canonical scalar). */
function nonCanonical(signature) {
  let s = 0n;
  for (let at = 63; at >= 32; at--) s = (s << 8n) | BigInt(signature[at]);
  s += L;
  const out = Buffer.from(signature);
  for (let at = 32; at < 64; at++) {
    out[at] = Number(s & 0xffn);
    s >>= 8n;
  }
  return out;
}
const OPEN_1 = { effect_key: 'refund:held', attempt: 1, state: 'executing' };
/** Receipts of the default log, with receipt 3 recording an outcome for OPEN_1 in `fields`. */
const closingLine = (fields) => (seq, prev) =>
  JSON.stringify(seq === 3 ? { ...receiptDoc(seq, prev), effect_key: 'refund:held', result: null, ...fields } : receiptDoc(seq, prev));
/** Receipt `seq` of the default log with `fields` changed (a function of seq for one receipt). */
const receiptWith = (fields) => (seq, prev) => JSON.stringify({ ...receiptDoc(seq, prev), ...fields(seq) });
/** Receipt 3 of the default log with its seq written as `text`. */
const seqThreeAs = (text) => (seq, prev) => JSON.stringify(receiptDoc(seq, prev)).replace(`"seq":${seq}`, `"seq":${seq === 3 ? text : seq}`);
/** One checkpoint over the 4 default receipts, dated `at`, with `fields`. */
const oneCheckpoint = (at, fields = {}) => ({ checkpoints: [{ size: 4, time: at, ...fields }] });
/** One checkpoint of 4 receipts whose note text is rewritten from `from` to `to`. */
const noteEdit = (from, to) => ({ note: (_, text) => text.replace(from, to) });
/** Checkpoint 1 of 2 receipts sees OPEN_1; checkpoint 2 of 4 receipts, with `fields`. */
const twoCheckpoints = (fields = {}) => [
  { size: 2, time: time(30), open: [OPEN_1] },
  { size: 4, time: time(59), open: [], ...fields },
];
/** A log of 5 receipts exported from checkpoint 1 (3 receipts). */
const FROM_3 = { receipts: 5, startSize: 3, checkpoints: [{ size: 3, time: time(30) }, { size: 5, time: time(59) }] };
/** Signature lines made by `make(text)`. */
const signedBy = (...make) => ({ signatures: (_, text) => make.map((line) => line(text)) });
const bySigner = (text) => signatureLine(SIGNER, text);
const byOther = (text) => signatureLine(OTHER, text);
const ZERO_HASH = b64(Buffer.alloc(32));

const CRAFTED = [
  ['a sound log of our own', {}, null],
  ['a log with no receipt and one checkpoint of size 0', { receipts: 0, checkpoints: [{ size: 0, time: time(1) }] }, null],
  ['checkpoints of size 0, 0 and 4', { checkpoints: [{ size: 0, time: time(0) }, { size: 0, time: time(1) }, { size: 4, time: time(59) }] }, null],
  [
    'a checkpoint of size 0 with another root',
    { checkpoints: [{ size: 0, time: time(0), root: Buffer.alloc(32, 1) }, { size: 4, time: time(59) }] },
    'root_mismatch',
  ],
  ['a checkpoint that shrinks', { checkpoints: [{ size: 4, time: time(58) }, { size: 2, time: time(59) }] }, 'log_forked'],
  ['a checkpoint of 2^60 receipts', { checkpoints: [{ size: 2 ** 60, time: time(59) }] }, 'truncated'],
  [
    'a checkpoint of 2^64 - 1 receipts',
    {
      ...noteEdit('\n4\n', '\n18446744073709551615\n'),
      companion: (_, c) => pretty(c).replace('"size": 4', '"size": 18446744073709551615'),
    },
    'truncated',
  ],
  ['a checkpoint of 2^64 receipts', noteEdit('\n4\n', '\n18446744073709551616\n'), 'checkpoint_altered'],
  ['a checkpoint whose size has a leading zero', noteEdit('\n4\n', '\n04\n'), 'checkpoint_altered'],
  ['a checkpoint whose size has a plus sign', noteEdit('\n4\n', '\n+4\n'), 'checkpoint_altered'],
  ['a checkpoint dated February 30', oneCheckpoint('2025-02-30T16:00:59.000Z'), 'checkpoint_altered'],
  ['a checkpoint dated 2026-02-29', oneCheckpoint('2026-02-29T16:00:59.000Z'), 'checkpoint_altered'],
  ['a checkpoint dated 2024-02-29 (before its receipts)', oneCheckpoint('2024-02-29T16:00:59.000Z'), 'checkpoint_backdated'],
  ['a checkpoint dated 2100-02-29', oneCheckpoint('2100-02-29T16:00:59.000Z'), 'checkpoint_altered'],
  ['a checkpoint dated in the year 0 on February 29', oneCheckpoint('0000-02-29T00:00:00.000Z'), 'checkpoint_backdated'],
  ['a checkpoint dated at a leap second', oneCheckpoint('2025-12-31T23:59:60.000Z'), 'checkpoint_altered'],
  ['a checkpoint dated with microseconds', oneCheckpoint('2025-11-24T16:00:59.000000Z'), 'checkpoint_altered'],
  ['a checkpoint dated with an offset', oneCheckpoint('2025-11-24T16:00:59.000+00:00'), 'checkpoint_altered'],
  ['a checkpoint dated with a lowercase z', oneCheckpoint('2025-11-24T16:00:59.000z'), 'checkpoint_altered'],
  ['a checkpoint with a sixth line', { note: (_, text) => `${text}extra\n` }, 'checkpoint_altered'],
  ['a checkpoint with two spaces before its time', noteEdit('warden-time ', 'warden-time  '), 'checkpoint_altered'],
  ['a checkpoint whose origin has a plus', noteEdit(`${ORIGIN}\n`, 'warden+x\n'), 'checkpoint_altered'],
  ['a companion written as an array of its fields', { companion: (_, c) => pretty(Object.values(c)) }, null],
  ['a companion with an unknown field', { companion: (_, c) => pretty({ ...c, extra: true }) }, 'checkpoint_altered'],
  [
    'a companion naming a field twice',
    { companion: (_, c) => pretty(c).replace('{', '{\n  "format": "warden.checkpoint/v1",') },
    'checkpoint_altered',
  ],
  ['a companion of another format', { companion: (_, c) => pretty({ ...c, format: 'warden.checkpoint/v2' }) }, 'checkpoint_altered'],
  [
    'a companion counting another open effect',
    { ...oneCheckpoint(time(59), { open: [OPEN_1] }), ...noteEdit('warden-open 1', 'warden-open 2') },
    'checkpoint_altered',
  ],
  ['an open effect with an unknown field', oneCheckpoint(time(59), { open: [{ ...OPEN_1, since: 'x' }] }), null],
  ['an open effect with an attempt of 2^32', oneCheckpoint(time(59), { open: [{ ...OPEN_1, attempt: 2 ** 32 }] }), 'checkpoint_altered'],
  ['an open effect with an attempt of 2^32 - 1', oneCheckpoint(time(59), { open: [{ ...OPEN_1, attempt: 2 ** 32 - 1 }] }), null],
  ['an open effect written as an array', oneCheckpoint(time(59), { open: [Object.values(OPEN_1)] }), null],
  ['a closure with no resolved_by', oneCheckpoint(time(59), { closed: [{ effect_key: 'k', attempt: 1, state: 'committed' }] }), null],
  ['a closure as an array without resolved_by', oneCheckpoint(time(59), { closed: [['k', 1, 'committed']] }), 'checkpoint_altered'],
  [
    'a closure resolved_by a number',
    oneCheckpoint(time(59), { closed: [{ effect_key: 'k', attempt: 1, state: 'committed', resolved_by: 1 }] }),
    'checkpoint_altered',
  ],
  ['a note signed by an untrusted key, then the trusted one', signedBy(byOther, bySigner), null],
  ['a note signed by the trusted key twice', signedBy(bySigner, bySigner), null],
  ['a note signed by an untrusted key only', signedBy(byOther), 'key_untrusted'],
  ['a note whose second signature by the trusted key fails', signedBy(bySigner, (text) => bySigner(`${text}x`)), 'signature_invalid'],
  ['a note with 101 signatures', signedBy(...Array(101).fill(bySigner)), 'bundle_malformed'],
  ['a note with 100 signatures', signedBy(...Array(100).fill(bySigner)), null],
  [
    'a note with a signature of 3 bytes',
    signedBy((text) => signatureLine(SIGNER, text, Buffer.alloc(0)).replace(/ \S+\n$/, ' AAAA\n')),
    'bundle_malformed',
  ],
  ['a note with a short signature by the trusted key', signedBy((text) => signatureLine(SIGNER, text, Buffer.alloc(10))), 'signature_invalid'],
  [
    'a note signed with a non-canonical s',
    signedBy((text) => signatureLine(SIGNER, text, nonCanonical(crypto.sign(null, Buffer.from(text), SIGNER.privateKey)))),
    'signature_invalid',
  ],
  ['a note whose signer name has a space', signedBy((text) => signatureLine({ ...SIGNER, name: 'a b' }, text)), 'bundle_malformed'],
  ['a note with a tab in its text', noteEdit('warden-time ', 'warden-time\t'), 'bundle_malformed'],
  [
    "a receipt document given through serde_json's raw-value key",
    { line: (seq, prev) => JSON.stringify({ '$serde_json::private::RawValue': JSON.stringify(receiptDoc(seq, prev)) }) },
    null,
  ],
  [
    'a raw-value key beside another key',
    { line: (seq, prev) => JSON.stringify({ '$serde_json::private::RawValue': JSON.stringify(receiptDoc(seq, prev)), x: 1 }) },
    'receipt_malformed',
  ],
  ['a private number key holding no number', { line: receiptWith((seq) => ({ seq: { '$serde_json::private::Number': ` ${seq}` } })) }, 'receipt_malformed'],
  [
    'a private number key not first in its object',
    { line: receiptWith((seq) => ({ seq: { a: 1, '$serde_json::private::Number': `${seq}` } })) },
    'receipt_malformed',
  ],
  ['receipts with \\r before their newlines', { receiptsText: (text) => text.replace(/\n/g, '\r\n') }, 'receipt_altered'],
  ['receipts whose lines end in \\r, chained over it', { line: (seq, prev) => `${JSON.stringify(receiptDoc(seq, prev))}\r` }, null],
  [
    'a receipt finished after the checkpoint',
    { line: receiptWith((seq) => ({ finished_at: seq === 2 ? '2025-11-24T16:01:00.000Z' : time(seq) })) },
    'checkpoint_backdated',
  ],
  [
    'a receipt finished at a non-ASCII time',
    { line: receiptWith((seq) => ({ finished_at: seq === 2 ? '\u00e9' : time(seq) })) },
    'checkpoint_backdated',
  ],
  ['a receipt with seq 2^64 - 1', { line: seqThreeAs('18446744073709551615') }, 'receipt_dropped'],
  ['a receipt with seq 2^64', { line: seqThreeAs('18446744073709551616') }, 'receipt_malformed'],
  ['a receipt with seq -0', { line: seqThreeAs('-0') }, 'receipt_malformed'],
  ['a receipt with seq 3e0', { line: seqThreeAs('3e0') }, 'receipt_malformed'],
  ['an open effect closed by a committed receipt', { checkpoints: twoCheckpoints(), line: closingLine({ result: 'committed' }) }, null],
  ['an open effect closed by a failed execution', { checkpoints: twoCheckpoints(), line: closingLine({ execution: 'failed' }) }, null],
  [
    'an open effect closed by a receipt of another attempt',
    { checkpoints: twoCheckpoints(), line: closingLine({ result: 'committed', attempt: 2 }) },
    'outcome_missing',
  ],
  [
    'an open effect closed by a receipt with an attempt of 1.0',
    { checkpoints: twoCheckpoints(), line: (seq, prev) => closingLine({ result: 'committed' })(seq, prev).replace('"attempt":1,', '"attempt":1.0,') },
    'outcome_missing',
  ],
  ['an open effect whose receipt is ambiguous', { checkpoints: twoCheckpoints(), line: closingLine({ result: 'ambiguous' }) }, 'outcome_missing'],
  [
    'an open effect attested closed without a receipt',
    { checkpoints: twoCheckpoints({ closed: [{ ...OPEN_1, state: 'committed', resolved_by: 'ops:bob' }] }) },
    null,
  ],
  ['an open effect still open', { checkpoints: twoCheckpoints({ open: [OPEN_1] }) }, null],
  ['a bundle from checkpoint 1 of a log of 5', FROM_3, null],
  ['a bundle from a checkpoint of 2^0 receipts', { receipts: 5, startSize: 1, checkpoints: [{ size: 1, time: time(30) }, { size: 5, time: time(59) }] }, null],
  ['a start.json with a hash too few', { ...FROM_3, start: (s) => pretty({ ...s, frontier: s.frontier.slice(1) }) }, 'bundle_malformed'],
  ['a start.json of another size', { ...FROM_3, start: (s) => pretty({ ...s, size: 5 }) }, 'bundle_malformed'],
  [
    'a start.json whose frontier is not the checkpoint root',
    { ...FROM_3, start: (s) => pretty({ ...s, frontier: [s.frontier[1], s.frontier[0]] }) },
    'root_mismatch',
  ],
  ['a start.json naming another previous hash', { ...FROM_3, start: (s) => pretty({ ...s, last_hash: 'sha256:x' }) }, 'receipt_altered'],
  ['an empty start.json', { ...FROM_3, start: () => '' }, 'bundle_malformed'],
  [
    'a checkpoint older than the start',
    { ...FROM_3, checkpoints: [{ size: 2, time: time(20) }, ...FROM_3.checkpoints] },
    'bundle_malformed',
  ],
  [
    'two checkpoints at the start, the second counting an effect of the first closed',
    { ...FROM_3, checkpoints: [{ size: 3, time: time(20), open: [OPEN_1] }, ...FROM_3.checkpoints] },
    'outcome_missing',
  ],
  [
    'two checkpoints at the start, the second attesting a closure',
    {
      ...FROM_3,
      checkpoints: [
        { size: 3, time: time(20), open: [OPEN_1] },
        { size: 3, time: time(30), closed: [{ ...OPEN_1, state: 'failed', resolved_by: 'ops:bob' }] },
        { size: 5, time: time(59), closed: [{ effect_key: 'k', attempt: 1, state: 'committed', resolved_by: null }] },
      ],
    },
    null,
  ],
  [
    'a consistency proof between checkpoints of one size with a hash',
    { checkpoints: [{ size: 4, time: time(58) }, { size: 4, time: time(59) }], proof: (_, p) => pretty({ ...p, proof: [ZERO_HASH] }) },
    'proof_invalid',
  ],
  [
    'a consistency proof from size 0 holding anything',
    { checkpoints: [{ size: 0, time: time(0) }, { size: 4, time: time(59) }], proof: (_, p) => pretty({ ...p, proof: [ZERO_HASH] }) },
    null,
  ],
  [
    'a bundle key named with a U+0085 (whitespace to Rust), unpinned',
    { unpinned: true, signer: noteKey('warden.test/js\u0085', 5) },
    'bundle_malformed',
  ],
  ['a bundle key named with a U+FEFF (not whitespace to Rust), unpinned', { unpinned: true, signer: noteKey('\ufeffwarden.test/js', 5) }, null],
];

test('crafted bundles signed with our own key get the Rust verdict', async (t) => {
  for (const [name, spec, reason] of CRAFTED) {
    await t.test(name, (t) => {
      const dir = writeBundle(path.join(tempDir(t), 'bundle'), spec);
      assertVerdict(dir, spec.unpinned ? [] : [(spec.signer ?? SIGNER).vkey], reason);
    });
  }
});

test('a small-order key is refused as ed25519-dalek verify_strict refuses it (OpenSSL alone would accept)', async (t) => {
  const prefix = Buffer.from('302a300506032b6570032100', 'hex');
  const identity = crypto.createPublicKey({ key: Buffer.concat([prefix, Buffer.from([1]), Buffer.alloc(31)]), format: 'der', type: 'spki' });
  assert.ok(crypto.verify(null, Buffer.from('any message'), identity, WEAK_SIGNATURE), 'OpenSSL accepts it');
  await t.test('pinned', (t) => {
    const dir = writeBundle(path.join(tempDir(t), 'bundle'), { signatures: (_, text) => [signatureLine(WEAK, text, WEAK_SIGNATURE)] });
    assertVerdict(dir, [WEAK.vkey], 'signature_invalid');
  });
});

test('bundle keys at absolute paths are read where they are, as Path::join reads them', (t) => {
  const dir = path.join(tempDir(t), 'bundle');
  writeBundle(dir, { manifest: (m) => pretty({ ...m, keys: [path.join(dir, m.keys[0])] }) });
  assertVerdict(dir, [], null);
  writeBundle(dir, { manifest: (m) => pretty({ ...m, keys: [`${m.keys[0]}/`] }) });
  assertVerdict(dir, [], 'bundle_malformed');
});

// ---- the command line ---------------------------------------------------------------------------

test('run directly, it prints the verdict and exits 0 sound, 1 refused, 2 usage', (t) => {
  const script = path.join(__dirname, '..', 'lib', 'evidence.js');
  const run = (...args) => spawnSync(process.execPath, [script, ...args], { encoding: 'utf8' });
  const sound = run(path.join(corpus, 'sound'), '--key', TRUSTED, '--json');
  assert.equal(sound.status, 0, sound.stderr);
  assert.equal(JSON.parse(sound.stdout).ok, true);
  const refused = run(path.join(corpus, 'truncated'), '--key', path.join(corpus, 'trusted.vkey'));
  assert.equal(refused.status, 1);
  assert.match(refused.stdout, /^bundle refused: truncated: /);
  const unpinned = run(unanchoredSwappedKey(t));
  assert.equal(unpinned.status, 0);
  assert.match(unpinned.stdout, /the keys were taken from the bundle itself/);
  assert.equal(run().status, 2);
  assert.equal(run(path.join(corpus, 'sound'), '--key').status, 2);
  assert.equal(run(path.join(corpus, 'sound'), '--bogus').status, 2);
  assert.equal(run(path.join(corpus, 'sound'), '--key', 'not-a-key-or-file').status, 2);
});

test('the verifier does not load the native addon', () => {
  const code = `require(${JSON.stringify(path.join(__dirname, '..', 'lib', 'evidence.js'))});
    const loaded = Object.keys(require.cache).filter((f) => f.endsWith('.node') || f.endsWith('index.js'));
    process.stdout.write(JSON.stringify(loaded));`;
  const run = spawnSync(process.execPath, ['-e', code], { encoding: 'utf8' });
  assert.equal(run.status, 0, run.stderr);
  assert.deepEqual(JSON.parse(run.stdout), []);
});
