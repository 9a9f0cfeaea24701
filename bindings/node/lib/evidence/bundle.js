'use strict';
// Part of the pure-JavaScript bundle verifier (lib/evidence.js says what it checks and how): the
// bundle walk: each check in order, with the reason it gives (verifyBundle).

const fs = require('node:fs');

const {
  BUNDLE_FORMAT,
  COMPANION_FORMAT,
  GENESIS_HASH,
  ANCHORS_FILE,
  FILE_LINE_FORMAT,
  U32_MAX,
  Failure,
  fail,
  utf8OrNull,
  compareUtf8,
  quoted,
  pad6,
  inc,
  dec,
  decodeBase64,
} = require('./common');
const {
  JsonRefusal,
  parseJsonValue,
  member,
  asStr,
  asU64,
  MANIFEST,
  START,
  CONSISTENCY_FILE,
  COMPANION,
  ANCHOR_LINE,
  parseTyped,
} = require('./json');
const { sha256, leafHash, checkConsistency, Frontier } = require('./merkle');
const { parseVerifierKey, trustedKey, NoteRefusal, openNote, parseCheckpoint } = require('./notes');
const { joinPath, ioMessage, readText, parseFile, hashes, fileLines } = require('./files');

// ---- the verifier -----------------------------------------------------------------------------------

/** bundle.json, the keys, and the checkpoint numbers' order (check 1). */
function readManifest(dir, trusted) {
  const manifest = parseFile(dir, 'bundle.json', MANIFEST);
  if (manifest.format !== BUNDLE_FORMAT) {
    fail('bundle_malformed', `bundle.json says format ${quoted(manifest.format)}, not ${quoted(BUNDLE_FORMAT)}`);
  }
  let keys = trusted;
  if (trusted.length === 0) {
    keys = manifest.keys.map((name) => {
      const text = readText(dir, name);
      try {
        return parseVerifierKey(text);
      } catch (error) {
        return fail('bundle_malformed', `${name}: ${error.message}`);
      }
    });
  }
  if (manifest.checkpoints.length === 0) fail('bundle_malformed', 'bundle.json lists no checkpoint');
  for (let at = 1; at < manifest.checkpoints.length; at++) {
    if (!(manifest.checkpoints[at - 1] < manifest.checkpoints[at])) {
      fail('bundle_malformed', 'bundle.json lists its checkpoints out of number order');
    }
  }
  listedPolicies(manifest);
  return { manifest, keys };
}

/** The policies bundle.json lists: each once, and those it says are missing among them (check 1). */
function listedPolicies(manifest) {
  const listed = new Set();
  for (const hash of manifest.policies) {
    if (listed.has(hash)) fail('bundle_malformed', `bundle.json lists policy ${quoted(hash)} twice`);
    listed.add(hash);
  }
  const missing = new Set();
  for (const hash of manifest.policies_missing) {
    if (missing.has(hash)) fail('bundle_malformed', `bundle.json lists policy ${quoted(hash)} as missing twice`);
    missing.add(hash);
    if (!listed.has(hash)) {
      fail('bundle_malformed', `bundle.json lists policy ${quoted(hash)} as missing but not among the policies`);
    }
  }
  return listed;
}

/** A policy's file name under policies/: the hex of its `sha256:` hash; null for a hash of another form. */
function policyFile(hash) {
  const match = /^sha256:([0-9a-f]{64})$/.exec(hash);
  return match === null ? null : `policies/${match[1]}.json`;
}

/**
 * The line the file anchor appends for checkpoint `number` of `size` receipts whose signed note
 * is `note`, without its newline: what a `file` anchor receipt must be.
 */
function fileAnchorLine(number, size, note) {
  const line = {
    format: FILE_LINE_FORMAT,
    checkpoint: Number(number),
    size: Number(size),
    sha256: sha256(Buffer.from(note, 'utf8')).toString('hex'),
    note,
  };
  // Checkpoint numbers and sizes past 2^53 do not round-trip through a JavaScript number.
  return JSON.stringify(line).replace(/"checkpoint":\d+,"size":\d+,/, `"checkpoint":${number},"size":${size},`);
}

/**
 * Check 8: each line of anchors.jsonl names a checkpoint of the bundle and carries what its kind
 * needs; a `file` receipt is that checkpoint's line. An `rfc3161` token is carried unchecked here
 * (it is CMS: `warden verify-bundle --tsa-cert FILE` checks it).
 */
function checkAnchors(dir, checked, verdict) {
  let bytes;
  try {
    bytes = fs.readFileSync(joinPath(dir, ANCHORS_FILE));
  } catch (error) {
    if (error.code === 'ENOENT') return; // a bundle exported before anchors were wired
    fail('bundle_malformed', `cannot read ${ANCHORS_FILE}: ${ioMessage(error)}`);
  }
  const text = utf8OrNull(bytes);
  if (text === null) fail('bundle_malformed', `cannot read ${ANCHORS_FILE}: stream did not contain valid UTF-8`);
  const byNumber = new Map(checked.map((cp) => [String(cp.number), cp]));
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  // Counted into the verdict only when every line passed, as the Rust verifier does.
  let carried = 0;
  let verified = 0;
  lines.forEach((raw, index) => {
    const at = index + 1;
    let line;
    try {
      line = parseTyped(raw.endsWith('\r') ? raw.slice(0, -1) : raw, ANCHOR_LINE);
    } catch (error) {
      if (!(error instanceof JsonRefusal)) throw error;
      fail('bundle_malformed', `${ANCHORS_FILE} line ${at} is not an anchor line: ${error.message}`);
    }
    const number = line.checkpoint;
    const cp = byNumber.get(String(number));
    if (cp === undefined) {
      fail('bundle_malformed', `${ANCHORS_FILE} line ${at} anchors checkpoint ${number}, which the bundle does not hold`);
    }
    let receipt = null;
    if (line.receipt !== null) {
      receipt = decodeBase64(line.receipt);
      if (receipt === null) fail('bundle_malformed', `${ANCHORS_FILE} line ${at}'s receipt is not base64`);
    }
    carried += 1;
    if ((line.kind === 'file' || line.kind === 'rfc3161') && receipt === null) {
      fail('bundle_malformed', `${ANCHORS_FILE} line ${at} is a ${line.kind} anchor without its receipt`);
    }
    if (line.kind === 'file' && receipt !== null) {
      if (!receipt.equals(Buffer.from(fileAnchorLine(number, cp.size, cp.note), 'utf8'))) {
        fail('anchor_invalid', `${ANCHORS_FILE} line ${at}: the line ${line.sink} wrote is not checkpoint ${number}'s`);
      }
      verified += 1;
    }
  });
  verdict.anchors = carried;
  verdict.anchors_checked = verified;
}

/**
 * Every policy listed is named by a receipt the bundle holds; each one not listed as missing is
 * carried as policies/<hex>.json, whose bytes hash to its name (the last check).
 */
function checkPolicies(dir, manifest, named, verdict) {
  const unnamed = manifest.policies.find((hash) => !named.has(hash));
  if (unnamed !== undefined) fail('bundle_malformed', `bundle.json lists policy ${quoted(unnamed)}, which no receipt names`);
  const carried = [];
  for (const hash of manifest.policies) {
    if (manifest.policies_missing.includes(hash)) continue;
    const name = policyFile(hash);
    if (name === null) {
      fail('bundle_malformed', `bundle.json lists policy ${quoted(hash)} as carried, but no file can carry a hash of that form`);
    }
    let bytes;
    try {
      bytes = fs.readFileSync(joinPath(dir, name));
    } catch (error) {
      fail('bundle_malformed', `cannot read ${name}: ${ioMessage(error)}`);
    }
    if (`sha256:${sha256(bytes).toString('hex')}` !== hash) {
      fail('policy_altered', `${name} does not hash to ${hash}: it is not the policy the receipts name`);
    }
    carried.push(hash);
  }
  verdict.policies_carried = carried;
  verdict.policies_missing = [...manifest.policies_missing];
}

/** One checkpoint: signed by a trusted key, a checkpoint of this origin, its companion the one it hashes (check 2). */
function checkCheckpoint(dir, number, manifest, keys) {
  const name = `checkpoints/${pad6(number)}.note`;
  const note = readText(dir, name);
  let text;
  try {
    text = openNote(note, keys);
  } catch (error) {
    if (!(error instanceof NoteRefusal)) throw error;
    if (error.kind === 'malformed') fail('bundle_malformed', `${name} is not a signed note: ${error.message}`);
    if (error.kind === 'untrusted') {
      fail('key_untrusted', `${name} is signed only by keys not trusted here (${error.seen.join(', ')})`);
    }
    fail('signature_invalid', `${name}'s signature by ${error.message} does not verify`);
  }
  let body;
  try {
    body = parseCheckpoint(text);
  } catch (error) {
    fail('checkpoint_altered', `${name}: ${error.message}`);
  }
  if (body.origin !== manifest.origin) {
    fail('checkpoint_altered', `${name} is of the log ${quoted(body.origin)}, not ${quoted(manifest.origin)}`);
  }
  const companionName = `checkpoints/${pad6(number)}.json`;
  const companionText = readText(dir, companionName);
  if (!sha256(Buffer.from(companionText, 'utf8')).equals(body.companionHash)) {
    fail('checkpoint_altered', `${companionName} is not the document ${name} signed`);
  }
  let companion;
  try {
    companion = parseTyped(companionText, COMPANION);
  } catch (error) {
    if (!(error instanceof JsonRefusal)) throw error;
    fail('checkpoint_altered', `${companionName} does not parse: ${error.message}`);
  }
  const agrees =
    companion.format === COMPANION_FORMAT &&
    companion.checkpoint === number &&
    companion.origin === body.origin &&
    companion.size === body.size &&
    companion.time === body.time &&
    BigInt(companion.open.length) === body.open;
  if (!agrees) fail('checkpoint_altered', `${companionName} does not state what ${name} states`);
  return { number, size: body.size, root: body.root, time: body.time, companion, note };
}

/** The checkpoints against each other: one root per size, sizes and times never going back (check 3). */
function checkHistory(checked) {
  const roots = new Map();
  for (const cp of checked) {
    const other = roots.get(cp.size);
    if (other !== undefined && !other.root.equals(cp.root)) {
      fail('log_forked', `checkpoints ${other.number} and ${cp.number} both sign ${cp.size} receipts with different roots`);
    }
    roots.set(cp.size, cp);
  }
  for (let at = 1; at < checked.length; at++) {
    const [old, next] = [checked[at - 1], checked[at]];
    if (next.size < old.size) {
      fail(
        'log_forked',
        `checkpoint ${next.number} signs ${next.size} receipts, fewer than checkpoint ${old.number}'s ${old.size}`,
      );
    }
    if (compareUtf8(next.time, old.time) < 0) {
      fail(
        'checkpoint_backdated',
        `checkpoint ${next.number} is dated ${next.time}, before checkpoint ${old.number} (${old.time})`,
      );
    }
  }
}

/** The consistency proofs between consecutive checkpoints (check 4). */
function checkProofs(dir, checked) {
  for (let at = 1; at < checked.length; at++) {
    const [old, next] = [checked[at - 1], checked[at]];
    const name = `proofs/consistency-${pad6(old.number)}-${pad6(next.number)}.json`;
    const file = parseFile(dir, name, CONSISTENCY_FILE);
    const proof = hashes(file.proof, name);
    const sound =
      file.old_size === old.size &&
      file.new_size === next.size &&
      (old.size === 0n || checkConsistency(proof, old.size, old.root, next.size, next.root));
    if (!sound) {
      fail('proof_invalid', `${name} does not prove checkpoint ${next.number} extends checkpoint ${old.number}`);
    }
  }
}

/** Where the receipts pick the log up: the frontier and the previous receipt's hash. */
function startingPoint(dir, manifest) {
  if (manifest.start_size === 0n) return { frontier: new Frontier(), prevHash: GENESIS_HASH };
  const start = parseFile(dir, 'start.json', START);
  const subtrees = hashes(start.frontier, 'start.json');
  const levels = [];
  for (let level = 63; level >= 0; level--) {
    if ((start.size >> BigInt(level)) & 1n) levels.push(level);
  }
  if (start.size !== manifest.start_size || levels.length !== subtrees.length) {
    fail('bundle_malformed', "start.json's frontier does not fit its size");
  }
  const stack = levels.map((level, at) => ({ level, hash: subtrees[at] }));
  return { frontier: new Frontier(start.size, stack), prevHash: start.last_hash };
}

/** approvals.jsonl: approval id → its action hash and approver (load_approvals). */
function loadApprovals(dir) {
  const text = readText(dir, 'approvals.jsonl');
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  const approvals = new Map();
  lines.forEach((line, at) => {
    let value;
    try {
      value = parseJsonValue(line.endsWith('\r') ? line.slice(0, -1) : line);
    } catch (error) {
      if (!(error instanceof JsonRefusal)) throw error;
      fail('bundle_malformed', `approvals.jsonl line ${at + 1} is not JSON: ${error.message}`);
    }
    const id = asStr(member(value, 'approval_id'));
    const hash = asStr(member(value, 'action_hash'));
    if (id === null || hash === null) {
      fail('bundle_malformed', `approvals.jsonl line ${at + 1} has no approval_id or action_hash`);
    }
    approvals.set(id, { hash, approver: asStr(member(value, 'approver')) });
  });
  return approvals;
}

/** A receipt that spent approval `id` agrees with approvals.jsonl on the action and the approver. */
function checkApproval(approvals, id, document, seq) {
  const approval = approvals.get(id);
  if (approval === undefined) {
    fail('bundle_malformed', `receipt ${seq} spent approval ${id}, which approvals.jsonl does not hold`);
  }
  const receiptHash = asStr(member(document, 'action_hash')) ?? '';
  const receiptApprover = asStr(member(document, 'approver'));
  if (approval.hash !== receiptHash || receiptApprover !== approval.approver) {
    fail('receipt_altered', `receipt ${seq} and approval ${id} disagree on the action or the approver`);
  }
}

/** An (effect key, attempt) pair as one Set member. */
function effectId(key, attempt) {
  return JSON.stringify([key, attempt]);
}

/** The effects a companion lists open, as a Set of effectIds. */
function openSet(companion) {
  return new Set(companion.open.map((open) => effectId(open.effect_key, open.attempt)));
}

/** The (effect key, attempt) of a receipt recording a committed or failed outcome, or null. */
function terminalOutcome(document) {
  const key = asStr(member(document, 'effect_key'));
  const attempt = asU64(member(document, 'attempt'));
  if (key === null || attempt === null || attempt > U32_MAX) return null;
  const terminal = (field) => {
    const value = asStr(member(document, field));
    return value === 'committed' || value === 'failed';
  };
  return terminal('result') || terminal('execution') ? effectId(key, Number(attempt)) : null;
}

/** Every effect `old` saw open is open at `next`, closed by a receipt since, or attested closed. */
function outcomesAccounted(old, next, waiting, closed) {
  const sorted = [...waiting].map((id) => JSON.parse(id)).sort(([ka, aa], [kb, ab]) => compareUtf8(ka, kb) || aa - ab);
  const listed = (list) => new Set(list.map((effect) => effectId(effect.effect_key, effect.attempt)));
  const stillOpen = listed(next.companion.open);
  const attested = listed(next.companion.closed_without_receipt);
  for (const [key, attempt] of sorted) {
    const id = effectId(key, attempt);
    if (!(stillOpen.has(id) || closed.has(id) || attested.has(id))) {
      fail(
        'outcome_missing',
        `effect ${quoted(key)} attempt ${attempt} was open at checkpoint ${old.number}; ` +
          `checkpoint ${next.number} counts it closed, but no receipt records its outcome`,
      );
    }
  }
}

/** The state of the receipt stream between lines. */
class ReceiptStream {
  constructor({ checked, frontier, prevHash, approvals, listed, verdict }) {
    this.checked = checked;
    /** The policy hashes bundle.json lists, and those a receipt named. */
    this.listed = listed;
    this.named = new Set();
    this.frontier = frontier;
    this.prevHash = prevHash;
    this.approvals = approvals;
    this.verdict = verdict;
    this.pendingGap = null;
    /** The next checkpoint to reach, and the last one reached (an index, or null). */
    this.next = 0;
    this.previous = null;
    /** The effects the last checkpoint reached saw open, and those of them a receipt since closed. */
    this.waiting = new Set();
    this.closed = new Set();
    /** The latest `finished_at` so far. */
    this.latest = '';
  }

  /** One line of receipts.jsonl (with its "\n" when it has one). */
  line(line) {
    const expected = inc(this.frontier.size);
    if (line[line.length - 1] !== 0x0a) {
      fail('receipt_malformed', `the line after receipt ${dec(expected)} does not end with a newline`);
    }
    const bytes = line.subarray(0, line.length - 1);
    const document = this.parse(bytes, expected);
    const seq = asU64(member(document, 'seq'));
    if (seq === null) fail('receipt_malformed', `the line for receipt ${expected} has no seq`);
    if (this.pendingGap !== null) {
      const missing = this.pendingGap;
      if (seq === missing) fail('receipts_reordered', `receipt ${missing} comes after receipt ${inc(missing)}`);
      fail('receipt_dropped', `receipt ${missing} is missing: receipt ${inc(missing)} follows receipt ${dec(missing)}`);
    }
    if (seq < expected) fail('receipts_reordered', `receipt ${seq} comes after receipt ${dec(expected)}`);
    if (seq > expected) {
      this.pendingGap = expected;
      return;
    }
    this.accept(bytes, document, seq);
  }

  /** A line's document, or receipt_malformed. */
  parse(bytes, expected) {
    const text = utf8OrNull(bytes);
    if (text === null) fail('receipt_malformed', `the line for receipt ${expected} is not JSON: invalid UTF-8`);
    try {
      return parseJsonValue(text);
    } catch (error) {
      if (!(error instanceof JsonRefusal)) throw error;
      return fail('receipt_malformed', `the line for receipt ${expected} is not JSON: ${error.message}`);
    }
  }

  /** The receipt the frontier expects: chained, hashed in, its approval and outcome noted. */
  accept(bytes, document, seq) {
    const named = asStr(member(document, 'prev_hash')) ?? '';
    if (named !== this.prevHash) {
      fail(
        'receipt_altered',
        `receipt ${seq} names a previous hash that is not receipt ${dec(seq)}'s: receipt ${dec(seq)} was altered`,
      );
    }
    this.prevHash = `sha256:${sha256(bytes).toString('hex')}`;
    this.frontier.push(leafHash(bytes));
    this.verdict.receipts += 1;
    const finished = asStr(member(document, 'finished_at'));
    if (finished !== null && compareUtf8(finished, this.latest) > 0) this.latest = finished;
    // A receipt names the approval it spent with its approver; a refusal may name one it was
    // shown (bound to another action) with no approver.
    const approval = asStr(member(document, 'approval_id'));
    if (asStr(member(document, 'approver')) !== null && approval !== null) {
      checkApproval(this.approvals, approval, document, seq);
    }
    const policy = asStr(member(document, 'policy_hash'));
    if (policy !== null) {
      if (!this.listed.has(policy)) {
        fail('bundle_malformed', `receipt ${seq} names policy ${quoted(policy)}, which bundle.json does not list`);
      }
      this.named.add(policy);
    }
    const outcome = terminalOutcome(document);
    if (outcome !== null && this.waiting.has(outcome)) this.closed.add(outcome);
    this.arrive();
  }

  /**
   * Check every checkpoint whose size the stream has reached (at the start too): its root, its
   * time against the receipts it covers, and every effect the one reached before it saw open.
   */
  arrive() {
    for (;;) {
      const cp = this.checked[this.next];
      if (cp === undefined || cp.size !== this.frontier.size) return;
      if (!cp.root.equals(this.frontier.root())) {
        fail('root_mismatch', `the receipts through ${cp.size} do not hash to checkpoint ${cp.number}'s root`);
      }
      if (compareUtf8(this.latest, cp.time) > 0) {
        fail(
          'checkpoint_backdated',
          `checkpoint ${cp.number} is dated ${cp.time}, before a receipt it covers finished (${this.latest})`,
        );
      }
      if (this.previous !== null) {
        outcomesAccounted(this.checked[this.previous], cp, this.waiting, this.closed);
        this.verdict.closed_without_receipt += cp.companion.closed_without_receipt.length;
      }
      this.waiting = openSet(cp.companion);
      this.closed = new Set();
      this.previous = this.next;
      this.next += 1;
    }
  }

  /** After the last line: nothing dropped at the end, and the last checkpoint reached. */
  finish() {
    if (this.pendingGap !== null) {
      const missing = this.pendingGap;
      fail('receipt_dropped', `receipt ${missing} is missing: the file ends with receipt ${inc(missing)}`);
    }
    const cp = this.checked[this.next];
    if (cp !== undefined) {
      fail(
        'truncated',
        `checkpoint ${cp.number} signs ${cp.size} receipts; the bundle holds receipts only through ${this.frontier.size}`,
      );
    }
  }
}

/** No checkpoint covers fewer receipts than the bundle starts after. */
function checkNoneBeforeStart(checked, frontier) {
  const cp = checked.find((c) => c.size < frontier.size);
  if (cp !== undefined) {
    fail(
      'bundle_malformed',
      `checkpoint ${cp.number} covers ${cp.size} receipts, fewer than the ${frontier.size} the bundle starts after`,
    );
  }
}

/** The receipts, streamed (checks 5 to 7). */
function checkReceipts(dir, manifest, checked, verdict) {
  const { frontier, prevHash } = startingPoint(dir, manifest);
  checkNoneBeforeStart(checked, frontier);
  const approvals = loadApprovals(dir);
  let fd;
  try {
    fd = fs.openSync(joinPath(dir, 'receipts.jsonl'), 'r');
  } catch (error) {
    fail('bundle_malformed', `cannot read receipts.jsonl: ${ioMessage(error)}`);
  }
  const listed = new Set(manifest.policies);
  const stream = new ReceiptStream({ checked, frontier, prevHash, approvals, listed, verdict });
  try {
    stream.arrive();
    for (const line of fileLines(fd)) stream.line(line);
  } finally {
    fs.closeSync(fd);
  }
  stream.finish();
  return { size: stream.frontier.size, named: stream.named };
}

/** Every check, in order: the success detail, or a thrown Failure. */
function run(dir, trusted, verdict) {
  const { manifest, keys } = readManifest(dir, trusted);
  const checked = manifest.checkpoints.map((number) => checkCheckpoint(dir, number, manifest, keys));
  verdict.checkpoints = checked.length;
  checkHistory(checked);
  checkProofs(dir, checked);
  const { size, named } = checkReceipts(dir, manifest, checked, verdict);
  checkAnchors(dir, checked, verdict);
  checkPolicies(dir, manifest, named, verdict);
  const last = checked[checked.length - 1];
  verdict.open_at_end = last.companion.open.length;
  return (
    `${verdict.receipts} receipts hash to the roots of ${checked.length} checkpoint(s) (last: ${last.number}, ${size} receipts); ` +
    'every effect a checkpoint saw open is open later, closed by a receipt, or attested closed without one'
  );
}

/**
 * Check the bundle in `dir`. `keys`: the verifier keys trusted (each a key, or a file holding
 * one); none means the bundle's own keys are trusted (`keys_pinned: false`: a swapped key is
 * then not detectable). A key that cannot be read throws; every finding about the bundle is in
 * the verdict.
 * @param {string} dir
 * @param {{keys?: (string|VerifierKey)[]}} [options]
 */
function verifyBundle(dir, { keys = [] } = {}) {
  if (typeof dir !== 'string') throw new TypeError('verifyBundle(dir): dir must be a string');
  if (!Array.isArray(keys)) throw new TypeError('verifyBundle(dir, { keys }): keys must be an array');
  const trusted = keys.map(trustedKey);
  const verdict = {
    ok: false,
    reason: null,
    detail: '',
    receipts: 0,
    checkpoints: 0,
    keys_pinned: trusted.length > 0,
    open_at_end: 0,
    closed_without_receipt: 0,
    anchors: 0,
    anchors_checked: 0,
    policies_carried: [],
    policies_missing: [],
  };
  try {
    verdict.detail = run(dir, trusted, verdict);
    verdict.ok = true;
  } catch (error) {
    if (!(error instanceof Failure)) throw error;
    verdict.reason = error.reason;
    verdict.detail = error.detail;
  }
  return verdict;
}

module.exports = {
  policyFile,
  fileAnchorLine,
  verifyBundle,
};
