'use strict';
// Warden's offline evidence bundles, verified in pure JavaScript (node:crypto and node:fs only;
// the native addon is never loaded).
//
// The Rust verifier (src/evidence/bundle.rs, `warden verify-bundle`) is the definition: this file
// and its parts under lib/evidence/ make the same checks in the same order and name the same
// reason on every bundle (docs/EVIDENCE.md lists them). Where the Rust side leans on a library, the
// library's rules are mirrored here too: serde_json (with the `arbitrary_precision` and `raw_value`
// features Warden builds it with) for every JSON file, the `signed_note` crate for notes,
// ed25519-dalek's `verify_strict` for signatures, `tlog_tiles` (RFC 9162) for proofs and the `time`
// crate for timestamps. Sizes and seqs are u64 in Rust; here they are BigInts, so every value a u64
// holds is handled exactly.
//
// The parts, by concept: common.js (constants, failures, text and base64), json.js (JSON as
// serde_json reads it, and the typed structs), merkle.js (RFC 9162 tree and proofs), ed25519.js
// (verify_strict), notes.js (verifier keys, signed notes, checkpoint texts), files.js (reading the
// bundle's files) and bundle.js (the checks in order: verifyBundle). This file is the command line
// and the exports.
//
// Run directly: node lib/evidence.js DIR [--key VKEY_OR_FILE ...] [--json]
// (exit 0: sound, 1: refused, naming the reason, 2: usage, 3: internal error).

const { BUNDLE_FORMAT, COMPANION_FORMAT, REASONS, ANCHORS_FILE, FILE_LINE_FORMAT } = require('./evidence/common');
const { leafHash, nodeHash, checkInclusion, checkConsistency } = require('./evidence/merkle');
const { parseVerifierKey, trustedKey } = require('./evidence/notes');
const { policyFile, fileAnchorLine, verifyBundle } = require('./evidence/bundle');

// ---- the command line --------------------------------------------------------------------------------

const USAGE = 'usage: node evidence.js DIR [--key VERIFIER_KEY_OR_FILE ...] [--json]';

/** The command line's arguments, or a thrown Error with the usage. */
function parseArguments(args) {
  const options = { dir: null, keys: [], json: false };
  for (let at = 0; at < args.length; at++) {
    const arg = args[at];
    if (arg === '--json') options.json = true;
    else if (arg === '--key') {
      if (at + 1 >= args.length) throw new Error(`--key needs a value\n${USAGE}`);
      options.keys.push(args[++at]);
    } else if (arg.startsWith('--key=')) options.keys.push(arg.slice('--key='.length));
    else if (arg.startsWith('-') && arg !== '-') throw new Error(`unknown option ${arg}\n${USAGE}`);
    else if (options.dir === null) options.dir = arg;
    else throw new Error(`one bundle directory at a time\n${USAGE}`);
  }
  if (options.dir === null) throw new Error(USAGE);
  return options;
}

/** A verdict as `warden verify-bundle --json` prints it (keys sorted). */
function verdictJson(verdict) {
  const sorted = Object.fromEntries(Object.keys(verdict).sort().map((key) => [key, verdict[key]]));
  return `${JSON.stringify(sorted, null, 2)}\n`;
}

/** A verdict in words. */
function verdictText(verdict) {
  if (!verdict.ok) return `bundle refused: ${verdict.reason}: ${verdict.detail}\n`;
  const pinned = verdict.keys_pinned
    ? ''
    : '\nthe keys were taken from the bundle itself; pass --key VERIFIER_KEY to pin the signer';
  return (
    `bundle ok: ${verdict.detail}\nopen at the last checkpoint: ${verdict.open_at_end}; ` +
    `closed without a receipt (attested by the signer): ${verdict.closed_without_receipt}\n` +
    `${policiesLine(verdict)}${anchorsLine(verdict)}${pinned}\n`
  );
}

/** The verdict's line about the anchor receipts, as every verifier prints it. */
function anchorsLine(verdict) {
  const unchecked = verdict.anchors - verdict.anchors_checked;
  if (verdict.anchors === 0) return '\nno anchor receipts in the bundle';
  if (unchecked === 0) return `\nanchor receipts: ${verdict.anchors}, every one checked`;
  return (
    `\nanchor receipts: ${verdict.anchors}, ${unchecked} not checked (an RFC 3161 token needs its TSA's certificate: ` +
    'warden verify-bundle --tsa-cert FILE; other kinds are carried as they came)'
  );
}

/** The verdict's line about the policies, as every verifier prints it. */
function policiesLine(verdict) {
  const listed = (hashes) => (hashes.length === 0 ? 'none' : hashes.join(', '));
  return (
    `policies carried: ${listed(verdict.policies_carried)}; ` +
    `not carried (nothing shows what they said): ${listed(verdict.policies_missing)}`
  );
}

/** Run the command line: the exit code (0 sound, 1 refused, 2 usage, 3 internal error, as `warden` exits). */
function main(args) {
  let options;
  let keys;
  try {
    options = parseArguments(args);
    keys = options.keys.map(trustedKey);
  } catch (error) {
    process.stderr.write(`evidence: ${error.message}\n`);
    return 2;
  }
  let verdict;
  try {
    verdict = verifyBundle(options.dir, { keys });
  } catch (error) {
    process.stderr.write(`evidence: internal error (a bug in this verifier): ${error.stack}\n`);
    return 3;
  }
  process.stdout.write(options.json ? verdictJson(verdict) : verdictText(verdict));
  if (!verdict.ok) process.stderr.write(`evidence: the bundle does not verify (${verdict.reason}): ${verdict.detail}\n`);
  return verdict.ok ? 0 : 1;
}

if (require.main === module) process.exitCode = main(process.argv.slice(2));

module.exports = {
  ANCHORS_FILE,
  FILE_LINE_FORMAT,
  fileAnchorLine,
  BUNDLE_FORMAT,
  COMPANION_FORMAT,
  REASONS,
  verifyBundle,
  checkInclusion,
  checkConsistency,
  leafHash,
  nodeHash,
  parseVerifierKey,
  policyFile,
};
