'use strict';
// Part of the pure-JavaScript bundle verifier (lib/evidence.js says what it checks and how): the
// constants, the failure a check throws, and the text and base64 helpers every part uses.

// ---- constants ----------------------------------------------------------------------------------

/** The `format` member of `bundle.json`. */
const BUNDLE_FORMAT = 'warden.bundle/v1';

/** The `format` member of every checkpoint companion document. */
const COMPANION_FORMAT = 'warden.checkpoint/v1';

/** The `prev_hash` the first receipt of a log names. */
const GENESIS_HASH = 'sha256:0000000000000000000000000000000000000000000000000000000000000000';

/** Every reason a verifier may give, in the order the checks run. */
const REASONS = Object.freeze([
  'bundle_malformed',
  'key_untrusted',
  'signature_invalid',
  'checkpoint_altered',
  'log_forked',
  'checkpoint_backdated',
  'proof_invalid',
  'receipt_malformed',
  'receipts_reordered',
  'receipt_dropped',
  'receipt_altered',
  'root_mismatch',
  'outcome_missing',
  'truncated',
  'anchor_invalid',
  'policy_altered',
]);

/** The bundle's file of anchor receipts. */
const ANCHORS_FILE = 'anchors.jsonl';
/** The `format` member of every line the file anchor writes. */
const FILE_LINE_FORMAT = 'warden.anchor/v1';

const U64_MAX = (1n << 64n) - 1n;
const U32_MAX = 0xffffffffn;
const TIME_LINE = 'warden-time';
const OPEN_LINE = 'warden-open';
/** signed_note's limits: the most bytes and signature lines of a note it parses. */
const MAX_NOTE_SIZE = 1_000_000;
const MAX_NOTE_SIGNATURES = 100;
/** The longest key name NoteVerifier::parse accepts, in bytes. */
const MAX_KEY_NAME = 128;
/** The signed-note algorithm byte for Ed25519. */
const ALG_ED25519 = 0x01;
/** Bytes read from receipts.jsonl at a time. */
const CHUNK = 64 * 1024;

// ---- failures -----------------------------------------------------------------------------------

/** A check that failed: one of REASONS and what exactly failed. */
class Failure extends Error {
  constructor(reason, detail) {
    super(detail);
    this.reason = reason;
    this.detail = detail;
  }
}

/** Throw a Failure. */
function fail(reason, detail) {
  throw new Failure(reason, detail);
}

// ---- text helpers -------------------------------------------------------------------------------

const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** `bytes` as UTF-8 text, or null when they are not (a BOM is kept, as Rust keeps it). */
function utf8OrNull(bytes) {
  try {
    return UTF8.decode(bytes);
  } catch (error) {
    if (error instanceof TypeError) return null;
    throw error;
  }
}

/** Rust's `char::is_whitespace` (the Unicode White_Space property). */
const WHITE_SPACE = '\\t\\n\\v\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';
const RUST_WHITESPACE = new RegExp(`[${WHITE_SPACE}]`);
const RUST_TRIM = new RegExp(`^[${WHITE_SPACE}]+|[${WHITE_SPACE}]+$`, 'g');

/** Rust's `str::trim` (which differs from String.prototype.trim on U+0085 and U+FEFF). */
function rustTrim(text) {
  return text.replace(RUST_TRIM, '');
}

/** Compare two strings by their UTF-8 bytes, as Rust compares `str`s: -1, 0 or 1. */
function compareUtf8(a, b) {
  if (a === b) return 0;
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

/** Whether a JavaScript string has no unpaired surrogate (so it is a Rust `String`). */
function isWellFormed(text) {
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit >= 0xd800 && unit <= 0xdbff) {
      const next = text.charCodeAt(i + 1);
      if (!(next >= 0xdc00 && next <= 0xdfff)) return false;
      i++;
    } else if (unit >= 0xdc00 && unit <= 0xdfff) {
      return false;
    }
  }
  return true;
}

/**
 * A string quoted the way Rust's `{:?}` shows it in a detail message: control characters and the
 * common invisible ones escaped (Rust escapes every character it deems unprintable).
 */
function quoted(text) {
  const escaped = String(text).replace(/[\\"\u0000-\u001f\u007f-\u009f\u00ad\u200b-\u200f\u2028-\u202e\u2060-\u2064\ufeff]/g, (c) => {
    switch (c) {
      case '\\':
        return '\\\\';
      case '"':
        return '\\"';
      case '\n':
        return '\\n';
      case '\r':
        return '\\r';
      case '\t':
        return '\\t';
      case '\0':
        return '\\0';
      default:
        return `\\u{${c.charCodeAt(0).toString(16)}}`;
    }
  });
  return `"${escaped}"`;
}

/** A checkpoint number as its file names spell it (`{:06}`). */
function pad6(number) {
  return number.toString().padStart(6, '0');
}

/** A u32 key id as eight hex digits. */
function hex8(id) {
  return id.toString(16).padStart(8, '0');
}

/** `n + 1` in u64 arithmetic (wrapping, as a release build of the Rust verifier computes it). */
function inc(n) {
  return (n + 1n) & U64_MAX;
}

/** `n - 1` in u64 arithmetic (wrapping). */
function dec(n) {
  return (n - 1n) & U64_MAX;
}

// ---- base64 (the base64 crate's STANDARD engine: padded, canonical) -------------------------------

const BASE64_ALPHABET = /^[A-Za-z0-9+/]*={0,2}$/;

/** Decode standard base64 strictly (canonical padding, no stray bits), or null. */
function decodeBase64(text) {
  if (!BASE64_ALPHABET.test(text)) return null;
  const bytes = Buffer.from(text, 'base64');
  return bytes.toString('base64') === text ? bytes : null;
}

/** A base64 SHA-256 (exactly 32 bytes), decoded, or null (checkpoint::decode_hash). */
function decodeHash(text) {
  const bytes = decodeBase64(text);
  return bytes !== null && bytes.length === 32 ? bytes : null;
}

module.exports = {
  BUNDLE_FORMAT,
  COMPANION_FORMAT,
  GENESIS_HASH,
  REASONS,
  ANCHORS_FILE,
  FILE_LINE_FORMAT,
  U64_MAX,
  U32_MAX,
  TIME_LINE,
  OPEN_LINE,
  MAX_NOTE_SIZE,
  MAX_NOTE_SIGNATURES,
  MAX_KEY_NAME,
  ALG_ED25519,
  CHUNK,
  Failure,
  fail,
  utf8OrNull,
  RUST_WHITESPACE,
  rustTrim,
  compareUtf8,
  isWellFormed,
  quoted,
  pad6,
  hex8,
  inc,
  dec,
  decodeBase64,
  decodeHash,
};
