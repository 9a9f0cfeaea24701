'use strict';
// Warden's offline evidence bundles, verified in pure JavaScript (node:crypto and node:fs only;
// the native addon is never loaded).
//
// The Rust verifier (src/evidence/bundle.rs, `warden verify-bundle`) is the definition: this file
// makes the same checks in the same order and names the same reason on every bundle
// (docs/EVIDENCE.md lists them). Where the Rust side leans on a library, the library's rules are
// mirrored here too: serde_json (with the `arbitrary_precision` and `raw_value` features Warden
// builds it with) for every JSON file, the `signed_note` crate for notes, ed25519-dalek's
// `verify_strict` for signatures, `tlog_tiles` (RFC 9162) for proofs and the `time` crate for
// timestamps. Sizes and seqs are u64 in Rust; here they are BigInts, so every value a u64 holds
// is handled exactly.
//
// Run directly: node lib/evidence.js DIR [--key VKEY_OR_FILE ...] [--json]
// (exit 0: sound, 1: refused, naming the reason, 2: usage, 3: internal error).

const crypto = require('node:crypto');
const fs = require('node:fs');
const util = require('node:util');

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

// ---- JSON, as serde_json reads it ---------------------------------------------------------------
//
// JSON.parse accepts what serde_json refuses (unpaired surrogate escapes, numbers out of a field's
// range, duplicate struct fields) and reads some documents differently (serde_json's
// `arbitrary_precision` and `raw_value` features give two object keys a meaning). So the text is
// first parsed to a syntax tree (iteratively: an ignored field may nest arbitrarily deep), then
// read either as a serde_json::Value or as one of the typed structs of bundle.rs.

/** A JSON document serde_json would refuse. */
class JsonRefusal extends Error {}

function refuseJson(message) {
  throw new JsonRefusal(message);
}

/** serde_json's recursion limit: a container nested this deep is refused (in a Value). */
const JSON_DEPTH_LIMIT = 128;
const NUMBER_TOKEN = '$serde_json::private::Number';
const RAW_VALUE_TOKEN = '$serde_json::private::RawValue';
const NUMBER_GRAMMAR = /^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?$/;
const UNSIGNED_INTEGER = /^(?:0|[1-9][0-9]*)$/;

/** The syntax tree of JSON text; containers record their nesting depth (1 at the top). */
class JsonParser {
  constructor(text) {
    this.text = text;
    this.at = 0;
  }

  /** Parse the whole text: one value, then only whitespace. */
  parse() {
    const open = [];
    for (;;) {
      let node = this.openValue(open);
      if (node === null) continue;
      for (;;) {
        if (open.length === 0) {
          this.skipWhitespace();
          if (this.at < this.text.length) refuseJson('trailing characters after the JSON value');
          return node;
        }
        const parent = open[open.length - 1];
        if (parent.kind === 'array') parent.items.push(node);
        else parent.entries.push([parent.key, node]);
        if (!this.continues(parent)) {
          open.pop();
          node = parent;
          continue;
        }
        break;
      }
    }
  }

  /** Read the start of a value: a scalar (returned), or a container pushed onto `open` (null). */
  openValue(open) {
    this.skipWhitespace();
    const c = this.text[this.at];
    if (c !== '{' && c !== '[') return this.scalar();
    this.at++;
    const depth = open.length + 1;
    const node = c === '{' ? { kind: 'object', entries: [], depth } : { kind: 'array', items: [], depth };
    this.skipWhitespace();
    if (this.text[this.at] === (c === '{' ? '}' : ']')) {
      this.at++;
      return node;
    }
    if (node.kind === 'object') node.key = this.key();
    open.push(node);
    return null;
  }

  /** After a member of `parent`: true when another follows (its key read), false at the close. */
  continues(parent) {
    this.skipWhitespace();
    const c = this.text[this.at];
    if (c === ',') {
      this.at++;
      if (parent.kind === 'object') parent.key = this.key();
      return true;
    }
    if (c === (parent.kind === 'array' ? ']' : '}')) {
      this.at++;
      delete parent.key;
      return false;
    }
    return refuseJson(c === undefined ? 'EOF inside a JSON container' : `expected , or the end of the ${parent.kind}`);
  }

  /** An object key and its colon. */
  key() {
    this.skipWhitespace();
    if (this.text[this.at] !== '"') refuseJson('a JSON object key must be a string');
    this.at++;
    const key = this.string();
    this.skipWhitespace();
    if (this.text[this.at] !== ':') refuseJson('expected : after an object key');
    this.at++;
    return key;
  }

  skipWhitespace() {
    const { text } = this;
    while (this.at < text.length) {
      const c = text.charCodeAt(this.at);
      if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) break;
      this.at++;
    }
  }

  /** A string, number or literal. */
  scalar() {
    const c = this.text[this.at];
    if (c === '"') {
      this.at++;
      return this.string();
    }
    if (c === '-' || (c >= '0' && c <= '9')) return this.number();
    for (const [word, kind] of [
      ['true', 'true'],
      ['false', 'false'],
      ['null', 'null'],
    ]) {
      if (this.text.startsWith(word, this.at)) {
        this.at += word.length;
        return { kind };
      }
    }
    return refuseJson(c === undefined ? 'EOF while parsing a JSON value' : 'expected a JSON value');
  }

  /** A number, kept as its text (serde_json's arbitrary precision). */
  number() {
    const match = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
    match.lastIndex = this.at;
    const found = match.exec(this.text);
    if (found === null) refuseJson('invalid number');
    this.at += found[0].length;
    const next = this.text[this.at];
    if (next !== undefined && /[0-9.eE+-]/.test(next)) refuseJson('invalid number');
    return { kind: 'number', text: found[0] };
  }

  /** The rest of a string after its opening quote; `wellFormed` is false when it holds an unpaired surrogate. */
  string() {
    const { text } = this;
    let value = '';
    let surrogates = false;
    let start = this.at;
    for (;;) {
      if (this.at >= text.length) refuseJson('EOF while parsing a string');
      const c = text.charCodeAt(this.at);
      if (c === 0x22) {
        value += text.slice(start, this.at);
        this.at++;
        return { kind: 'string', value, wellFormed: !surrogates || isWellFormed(value) };
      }
      if (c < 0x20) refuseJson('a control character inside a string');
      if (c !== 0x5c) {
        this.at++;
        continue;
      }
      value += text.slice(start, this.at);
      const unit = this.escape();
      if (unit >= 0xd800 && unit <= 0xdfff) surrogates = true;
      value += String.fromCharCode(unit);
      start = this.at;
    }
  }

  /** One escape after its backslash: the UTF-16 code unit it stands for. */
  escape() {
    const simple = { '"': 0x22, '\\': 0x5c, '/': 0x2f, b: 0x08, f: 0x0c, n: 0x0a, r: 0x0d, t: 0x09 };
    const c = this.text[this.at + 1];
    if (c === 'u') {
      const digits = this.text.slice(this.at + 2, this.at + 6);
      if (!/^[0-9a-fA-F]{4}$/.test(digits)) refuseJson('invalid \\u escape');
      this.at += 6;
      return parseInt(digits, 16);
    }
    if (c === undefined || !Object.hasOwn(simple, c)) refuseJson('invalid escape');
    this.at += 2;
    return simple[c];
  }
}

/** The syntax tree of `text`, or a JsonRefusal. */
function parseJsonSyntax(text) {
  return new JsonParser(text).parse();
}

/** A JSON number of a serde_json::Value, kept as its text. */
class JsonNumber {
  constructor(text) {
    this.text = text;
  }

  /** `Value::as_u64`: the number as a BigInt when it is an integer a u64 holds, else null. */
  asU64() {
    if (!UNSIGNED_INTEGER.test(this.text)) return null;
    const value = BigInt(this.text);
    return value <= U64_MAX ? value : null;
  }
}

/** A string node's text, refused when it is not a Rust String. */
function stringOf(node) {
  if (!node.wellFormed) refuseJson('a string holds an unpaired surrogate');
  return node.value;
}

/**
 * A syntax tree read as serde_json::Value: objects are Maps (a repeated key: the last wins),
 * numbers JsonNumbers. Mirrors serde_json's recursion limit and its two private object keys.
 */
function toValue(node) {
  switch (node.kind) {
    case 'null':
      return null;
    case 'true':
      return true;
    case 'false':
      return false;
    case 'number':
      return new JsonNumber(node.text);
    case 'string':
      return stringOf(node);
    case 'array':
      if (node.depth >= JSON_DEPTH_LIMIT) refuseJson('recursion limit exceeded');
      return node.items.map(toValue);
    case 'object':
      if (node.depth >= JSON_DEPTH_LIMIT) refuseJson('recursion limit exceeded');
      return objectValue(node);
    default:
      throw new Error(`unknown JSON node ${node.kind}`);
  }
}

/** An object node as a Value: a Map, or what serde_json's private first keys make of it. */
function objectValue(node) {
  const map = new Map();
  if (node.entries.length === 0) return map;
  const [first, value] = node.entries[0];
  const key = stringOf(first);
  if (key === NUMBER_TOKEN || key === RAW_VALUE_TOKEN) {
    if (value.kind !== 'string') refuseJson(`${key} holds no string`);
    const text = stringOf(value);
    if (node.entries.length !== 1) refuseJson(`${key} is not alone in its object`);
    if (key === RAW_VALUE_TOKEN) return toValue(parseJsonSyntax(text));
    if (!NUMBER_GRAMMAR.test(text)) refuseJson(`${quoted(text)} is not a number`);
    return new JsonNumber(text);
  }
  for (const [name, member] of node.entries) map.set(stringOf(name), toValue(member));
  return map;
}

/** JSON text read as a serde_json::Value (serde_json::from_str::<Value>). */
function parseJsonValue(text) {
  return toValue(parseJsonSyntax(text));
}

/** `value.get(name)` of a Value: the member of an object, else undefined. */
function member(value, name) {
  return value instanceof Map ? value.get(name) : undefined;
}

/** `Value::as_str`: the string, else null. */
function asStr(value) {
  return typeof value === 'string' ? value : null;
}

/** `Value::as_u64`: the u64 as a BigInt, else null. */
function asU64(value) {
  return value instanceof JsonNumber ? value.asU64() : null;
}

// ---- typed JSON: the serde-derived structs of bundle.rs and checkpoint.rs ------------------------
//
// A struct reads from an object (unknown keys skipped unless denied, a repeated field refused, a
// missing Option field null) or, as serde allows, from an array of exactly its fields in order.

/** A type: `read(node)` gives the value or throws a JsonRefusal; `optional` types may be absent. */
const Types = {
  string: { read: (node) => (node.kind === 'string' ? stringOf(node) : refuseJson('expected a string')) },
  u64: { read: (node) => unsignedOf(node, U64_MAX) },
  u32: { read: (node) => Number(unsignedOf(node, U32_MAX)) },
  optionalString: {
    optional: true,
    read: (node) => (node.kind === 'null' ? null : Types.string.read(node)),
  },
  /** A Vec of `item`. */
  vec(item) {
    return { read: (node) => (node.kind === 'array' ? node.items.map((n) => item.read(n)) : refuseJson('expected an array')) };
  },
  /** A struct of `fields` ([name, type] pairs, in declaration order). */
  struct(name, fields, { denyUnknown = false } = {}) {
    return { read: (node) => readStruct(node, name, fields, denyUnknown) };
  },
};

/** An unsigned integer node at most `max`, as a BigInt. */
function unsignedOf(node, max) {
  if (node.kind !== 'number' || !UNSIGNED_INTEGER.test(node.text)) refuseJson('expected an unsigned integer');
  const value = BigInt(node.text);
  if (value > max) refuseJson(`${node.text} is out of range`);
  return value;
}

/** A struct from an object or an array node. */
function readStruct(node, name, fields, denyUnknown) {
  if (node.kind === 'array') {
    if (node.items.length !== fields.length) refuseJson(`struct ${name} has ${fields.length} fields`);
    return Object.fromEntries(fields.map(([field, type], at) => [field, type.read(node.items[at])]));
  }
  if (node.kind !== 'object') refuseJson(`expected struct ${name}`);
  const types = new Map(fields);
  const out = {};
  for (const [keyNode, value] of node.entries) {
    const key = stringOf(keyNode);
    if (!types.has(key)) {
      if (denyUnknown) refuseJson(`unknown field \`${key}\``);
      continue;
    }
    if (Object.hasOwn(out, key)) refuseJson(`duplicate field \`${key}\``);
    out[key] = types.get(key).read(value);
  }
  for (const [field, type] of fields) {
    if (Object.hasOwn(out, field)) continue;
    if (!type.optional) refuseJson(`missing field \`${field}\``);
    out[field] = null;
  }
  return out;
}

const MANIFEST = Types.struct('Manifest', [
  ['format', Types.string],
  ['origin', Types.string],
  ['checkpoints', Types.vec(Types.u64)],
  ['start_size', Types.u64],
  ['keys', Types.vec(Types.string)],
  ['policies', Types.vec(Types.string)],
  ['policies_missing', Types.vec(Types.string)],
]);

const START = Types.struct('Start', [
  ['size', Types.u64],
  ['last_hash', Types.string],
  ['frontier', Types.vec(Types.string)],
]);

const CONSISTENCY_FILE = Types.struct('ConsistencyFile', [
  ['old_checkpoint', Types.u64],
  ['new_checkpoint', Types.u64],
  ['old_size', Types.u64],
  ['new_size', Types.u64],
  ['proof', Types.vec(Types.string)],
]);

const OPEN_EFFECT = Types.struct('OpenEffect', [
  ['effect_key', Types.string],
  ['attempt', Types.u32],
  ['state', Types.string],
]);

const CLOSED_WITHOUT_RECEIPT = Types.struct('ClosedWithoutReceipt', [
  ['effect_key', Types.string],
  ['attempt', Types.u32],
  ['state', Types.string],
  ['resolved_by', Types.optionalString],
]);

const COMPANION = Types.struct(
  'Companion',
  [
    ['format', Types.string],
    ['checkpoint', Types.u64],
    ['origin', Types.string],
    ['size', Types.u64],
    ['time', Types.string],
    ['open', Types.vec(OPEN_EFFECT)],
    ['closed_without_receipt', Types.vec(CLOSED_WITHOUT_RECEIPT)],
  ],
  { denyUnknown: true },
);

const ANCHOR_LINE = Types.struct(
  'AnchorLine',
  [
    ['checkpoint', Types.u64],
    ['sink', Types.string],
    ['kind', Types.optionalString],
    ['receipt', Types.optionalString],
    ['description', Types.string],
    ['anchored_at', Types.string],
  ],
  { denyUnknown: true },
);

/** JSON text read as `type` (serde_json::from_str::<T>). */
function parseTyped(text, type) {
  return type.read(parseJsonSyntax(text));
}

// ---- time (src/clock.rs: exactly what `render` writes) --------------------------------------------

const TIME_FORM = /^([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})\.[0-9]{3}Z$/;

/** Whether `text` is a valid instant written `YYYY-MM-DDTHH:MM:SS.mmmZ` (clock::parse succeeds). */
function isClockTime(text) {
  const found = TIME_FORM.exec(text);
  if (found === null) return false;
  const [year, month, day, hour, minute, second] = found.slice(1).map(Number);
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  const days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1];
  return days !== undefined && day >= 1 && day <= days && hour <= 23 && minute <= 59 && second <= 59;
}

// ---- the Merkle tree (RFC 9162 §2.1) --------------------------------------------------------------

function sha256(...parts) {
  const hash = crypto.createHash('sha256');
  for (const part of parts) hash.update(part);
  return hash.digest();
}

const LEAF_PREFIX = Buffer.from([0x00]);
const NODE_PREFIX = Buffer.from([0x01]);
const EMPTY_ROOT = sha256();

/** The leaf hash of one receipt document: SHA-256(0x00 ‖ data). */
function leafHash(data) {
  return sha256(LEAF_PREFIX, bytesOf('leafHash(data)', data));
}

/** The hash of an interior node: SHA-256(0x01 ‖ left ‖ right). */
function nodeHash(left, right) {
  return sha256(NODE_PREFIX, hashOf('nodeHash(left)', left), hashOf('nodeHash(right)', right));
}

/** `value` as bytes (a Buffer, a Uint8Array or a string's UTF-8), else a TypeError. */
function bytesOf(what, value) {
  if (typeof value === 'string') return Buffer.from(value, 'utf8');
  if (value instanceof Uint8Array) return value;
  throw new TypeError(`${what} must be a Buffer, a Uint8Array or a string`);
}

/** `value` as a 32-byte hash, else a TypeError. */
function hashOf(what, value) {
  if (!(value instanceof Uint8Array) || value.length !== 32) throw new TypeError(`${what} must be 32 bytes`);
  return value;
}

/** `value` (a number or a bigint) as a u64 BigInt, else a TypeError. */
function u64Of(what, value) {
  const big = typeof value === 'bigint' ? value : Number.isSafeInteger(value) ? BigInt(value) : null;
  if (big === null || big < 0n || big > U64_MAX) throw new TypeError(`${what} must be an integer from 0 to 2^64 - 1`);
  return big;
}

/** A proof: an array of 32-byte hashes, else a TypeError. */
function proofOf(what, proof) {
  if (!Array.isArray(proof)) throw new TypeError(`${what} must be an array of 32-byte hashes`);
  return proof.map((hash, at) => hashOf(`${what}[${at}]`, hash));
}

/**
 * Whether `proof` (an RFC 9162 audit path) shows the leaf hash `leaf` at `index` in the tree of
 * `size` leaves with root `root` (RFC 9162 §2.1.3.2).
 */
function checkInclusion(proof, size, root, index, leaf) {
  const path = proofOf('checkInclusion(proof)', proof);
  const n = u64Of('checkInclusion(size)', size);
  const m = u64Of('checkInclusion(index)', index);
  hashOf('checkInclusion(root)', root);
  let r = hashOf('checkInclusion(leaf)', leaf);
  if (m >= n) return false;
  let fn = m;
  let sn = n - 1n;
  for (const p of path) {
    if (sn === 0n) return false;
    if ((fn & 1n) === 1n || fn === sn) {
      r = nodeHash(p, r);
      while ((fn & 1n) === 0n && fn !== 0n) {
        fn >>= 1n;
        sn >>= 1n;
      }
    } else {
      r = nodeHash(r, p);
    }
    fn >>= 1n;
    sn >>= 1n;
  }
  return sn === 0n && Buffer.from(r).equals(root);
}

/**
 * Whether `proof` shows the tree of `oldSize` leaves with root `oldRoot` is a prefix of the tree
 * of `newSize` leaves with root `newRoot` (tree::check_consistency: equal sizes need an empty
 * proof and equal roots; otherwise RFC 9162 §2.1.4.2, with 1 <= oldSize < newSize).
 */
function checkConsistency(proof, oldSize, oldRoot, newSize, newRoot) {
  const path = proofOf('checkConsistency(proof)', proof);
  const first = u64Of('checkConsistency(oldSize)', oldSize);
  const second = u64Of('checkConsistency(newSize)', newSize);
  const firstHash = hashOf('checkConsistency(oldRoot)', oldRoot);
  const secondHash = hashOf('checkConsistency(newRoot)', newRoot);
  if (first === second) return path.length === 0 && Buffer.from(firstHash).equals(secondHash);
  if (first < 1n || first > second || path.length === 0) return false;
  const hashes = (first & (first - 1n)) === 0n ? [firstHash, ...path] : path;
  let fn = first - 1n;
  let sn = second - 1n;
  while ((fn & 1n) === 1n) {
    fn >>= 1n;
    sn >>= 1n;
  }
  let fr = hashes[0];
  let sr = hashes[0];
  for (const c of hashes.slice(1)) {
    if (sn === 0n) return false;
    if ((fn & 1n) === 1n || fn === sn) {
      fr = nodeHash(c, fr);
      sr = nodeHash(c, sr);
      while ((fn & 1n) === 0n && fn !== 0n) {
        fn >>= 1n;
        sn >>= 1n;
      }
    } else {
      sr = nodeHash(sr, c);
    }
    fn >>= 1n;
    sn >>= 1n;
  }
  return sn === 0n && Buffer.from(fr).equals(firstHash) && Buffer.from(sr).equals(secondHash);
}

/** A tree built one leaf at a time in constant memory: its complete subtrees, largest first. */
class Frontier {
  /** @param {bigint} size @param {{level: number, hash: Buffer}[]} subtrees */
  constructor(size = 0n, subtrees = []) {
    this.size = size;
    this.stack = subtrees;
  }

  /** Append one leaf hash. */
  push(leaf) {
    let hash = leaf;
    let level = 0;
    while (this.stack.length > 0 && this.stack[this.stack.length - 1].level === level) {
      hash = nodeHash(this.stack.pop().hash, hash);
      level++;
    }
    this.stack.push({ level, hash });
    this.size = inc(this.size);
  }

  /** The root of the leaves so far (the empty tree's is SHA-256 of nothing). */
  root() {
    if (this.stack.length === 0) return EMPTY_ROOT;
    let hash = this.stack[this.stack.length - 1].hash;
    for (let at = this.stack.length - 2; at >= 0; at--) hash = nodeHash(this.stack[at].hash, hash);
    return hash;
  }
}

// ---- Ed25519, as ed25519-dalek's verify_strict decides -------------------------------------------
//
// node:crypto (OpenSSL) checks the signature equation; verify_strict also refuses a non-canonical
// s, an R that is not a point, and a small-order R or public key (OpenSSL accepts, for example,
// the identity key with R = identity and s = 0 on any message). Those checks are made here.

const P = (1n << 255n) - 19n;
const L = (1n << 252n) + 27742317777372353535851937790883648493n;

function modP(a) {
  const r = a % P;
  return r < 0n ? r + P : r;
}

function powP(base, exponent) {
  let result = 1n;
  let b = modP(base);
  let e = exponent;
  while (e > 0n) {
    if (e & 1n) result = (result * b) % P;
    b = (b * b) % P;
    e >>= 1n;
  }
  return result;
}

const invP = (a) => powP(a, P - 2n);
const EDWARDS_D = modP(-121665n * invP(121666n));
const SQRT_M1 = powP(2n, (P - 1n) / 4n);

/** A little-endian integer. */
function littleEndian(bytes) {
  let value = 0n;
  for (let at = bytes.length - 1; at >= 0; at--) value = (value << 8n) | BigInt(bytes[at]);
  return value;
}

/** curve25519-dalek's CompressedEdwardsY::decompress: the affine point, or null. */
function decompress(bytes) {
  const y = modP(littleEndian(bytes) & ((1n << 255n) - 1n));
  const yy = (y * y) % P;
  const u = modP(yy - 1n);
  const v = modP(EDWARDS_D * yy + 1n);
  const v3 = (((v * v) % P) * v) % P;
  const v7 = (((v3 * v3) % P) * v) % P;
  let x = (((u * v3) % P) * powP((u * v7) % P, (P - 5n) / 8n)) % P;
  const check = (((v * x) % P) * x) % P;
  if (check === modP(-u) && check !== u) x = (x * SQRT_M1) % P;
  else if (check !== u) return null;
  if (x & 1n) x = P - x;
  if (bytes[31] >> 7) x = modP(-x);
  return { x, y };
}

/** Twisted Edwards addition (a = -1), affine; complete on this curve. */
function edwardsAdd(p, q) {
  const t = (((((EDWARDS_D * p.x) % P) * q.x) % P) * ((p.y * q.y) % P)) % P;
  const x = modP((p.x * q.y + p.y * q.x) * invP(1n + t));
  const y = modP((p.y * q.y + p.x * q.x) * invP(modP(1n - t)));
  return { x, y };
}

/** Whether 8·point is the identity. */
function isSmallOrder(point) {
  let q = point;
  for (let i = 0; i < 3; i++) q = edwardsAdd(q, q);
  return q.x === 0n && q.y === 1n;
}

const SPKI_ED25519 = Buffer.from('302a300506032b6570032100', 'hex');

/** Whether `signature` is `key`'s Ed25519 signature of `message`, as verify_strict decides. */
function verifyStrict(key, message, signature) {
  if (signature.length !== 64) return false;
  if (littleEndian(signature.subarray(32)) >= L) return false;
  const r = decompress(signature.subarray(0, 32));
  if (r === null || isSmallOrder(r) || key.weak) return false;
  return crypto.verify(null, message, key.publicKey, signature);
}

// ---- verifier keys (src/evidence/key.rs) -----------------------------------------------------------

/** The signed-note key id of `name` and an encoded key: the first 4 bytes of SHA-256, big-endian. */
function keyId(name, encoded) {
  return sha256(Buffer.from(name, 'utf8'), Buffer.from('\n'), encoded).readUInt32BE(0);
}

/** signed_note's is_key_name_valid: non-empty, no Unicode space, no '+'. */
function isNoteName(name) {
  return name !== '' && !RUST_WHITESPACE.test(name) && !name.includes('+');
}

/** A parsed verifier key: `NAME+ID+BASE64(0x01 ‖ public key)`. */
class VerifierKey {
  constructor(name, id, raw, point) {
    this.name = name;
    this.id = id;
    this.raw = raw;
    /** A small-order key: verify_strict refuses every signature by it. */
    this.weak = isSmallOrder(point);
    this.publicKey = crypto.createPublicKey({ key: Buffer.concat([SPKI_ED25519, raw]), format: 'der', type: 'spki' });
  }

  /** The key in its text form. */
  encoded() {
    return `${this.name}+${hex8(this.id)}+${Buffer.concat([Buffer.from([ALG_ED25519]), this.raw]).toString('base64')}`;
  }

  toString() {
    return this.encoded();
  }
}

/**
 * Parse a verifier key (`NAME+ID+BASE64`), checking its id against its key
 * (NoteVerifier::parse). Throws an Error saying what is wrong.
 */
function parseVerifierKey(text) {
  if (typeof text !== 'string') throw new TypeError('a verifier key is a string');
  const trimmed = rustTrim(text);
  const bad = (why) => new Error(`${quoted(trimmed)} is not a signed-note Ed25519 verifier key: ${why}`);
  const first = trimmed.indexOf('+');
  const second = first < 0 ? -1 : trimmed.indexOf('+', first + 1);
  if (second < 0) throw bad('it does not have the fields NAME+ID+KEY');
  const [name, id, key] = [trimmed.slice(0, first), trimmed.slice(first + 1, second), trimmed.slice(second + 1)];
  if (!isNoteName(name) || Buffer.byteLength(name, 'utf8') > MAX_KEY_NAME) {
    throw bad('its name is empty, too long or has a space');
  }
  if (!/^[0-9a-fA-F]{8}$/.test(id)) throw bad('its id is not 8 hex digits');
  const encoded = decodeBase64(key);
  if (encoded === null) throw bad('its key is not base64');
  if (encoded.length !== 33 || encoded[0] !== ALG_ED25519) {
    throw bad('its key is not 0x01 followed by a 32-byte Ed25519 public key');
  }
  if (keyId(name, encoded) !== parseInt(id, 16)) throw bad('its id does not match its key');
  const raw = encoded.subarray(1);
  const point = decompress(raw);
  if (point === null) throw bad('its key is not a point on the curve');
  return new VerifierKey(name, parseInt(id, 16), Buffer.from(raw), point);
}

/** A `keys` entry: a VerifierKey, a verifier key, or a file holding one (the CLI's `--key`). */
function trustedKey(entry) {
  if (entry instanceof VerifierKey) return entry;
  if (typeof entry !== 'string') throw new TypeError('keys: each entry is a verifier key or a file holding one');
  try {
    return parseVerifierKey(entry);
  } catch (notAKey) {
    let bytes;
    try {
      bytes = fs.readFileSync(entry);
    } catch (error) {
      throw new Error(`--key ${quoted(entry)}: neither a verifier key (NAME+ID+BASE64) nor a readable file (${ioMessage(error)})`, {
        cause: notAKey,
      });
    }
    const text = utf8OrNull(bytes);
    if (text === null) throw new Error(`--key ${quoted(entry)}: the file is not UTF-8 text`);
    try {
      return parseVerifierKey(text);
    } catch (error) {
      throw new Error(`--key ${quoted(entry)}: ${error.message}`);
    }
  }
}

// ---- signed notes (the signed_note crate's Note::from_bytes, and key.rs's open_note) --------------

/** Why a note did not open: `kind` is 'malformed', 'untrusted' or 'bad_signature'. */
class NoteRefusal extends Error {
  constructor(kind, message, seen = []) {
    super(message);
    this.kind = kind;
    this.seen = seen;
  }
}

/** One signature line: `— NAME BASE64(id ‖ signature)`. */
function parseSignatureLine(line) {
  const malformed = () => new NoteRefusal('malformed', 'malformed note');
  if (!line.startsWith('\u2014 ')) throw malformed();
  const rest = line.slice(2);
  const space = rest.indexOf(' ');
  if (space < 0) throw malformed();
  const name = rest.slice(0, space);
  const encoded = rest.slice(space + 1);
  const raw = decodeBase64(encoded);
  if (raw === null || encoded === '' || raw.length < 5 || !isNoteName(name)) throw malformed();
  return { name, id: raw.readUInt32BE(0), signature: raw.subarray(4) };
}

/** A note's text and signature lines, refused as signed_note refuses a malformed one. */
function parseNote(text) {
  const malformed = () => new NoteRefusal('malformed', 'malformed note');
  if (Buffer.byteLength(text, 'utf8') > MAX_NOTE_SIZE) throw malformed();
  if (/[\u0000-\u0009\u000b-\u001f]/.test(text)) throw malformed();
  const blank = text.lastIndexOf('\n\n');
  if (blank < 0) throw malformed();
  const block = text.slice(blank + 2);
  if (!block.endsWith('\n')) throw malformed();
  const lines = block.slice(0, -1).split('\n');
  if (lines.length > MAX_NOTE_SIGNATURES) throw malformed();
  return { text: text.slice(0, blank + 1), signatures: lines.map(parseSignatureLine) };
}

/**
 * Verify a note against `trusted`: its text when at least one trusted key signed it and no
 * trusted key's signature fails; else a NoteRefusal.
 */
function openNote(note, trusted) {
  const parsed = parseNote(note);
  const message = Buffer.from(parsed.text, 'utf8');
  const seen = [];
  let verified = false;
  for (const { name, id, signature } of parsed.signatures) {
    const key = trusted.find((k) => k.name === name && k.id === id);
    if (key === undefined) {
      seen.push(`${name}+${hex8(id)}`);
      continue;
    }
    if (!verifyStrict(key, message, signature)) {
      throw new NoteRefusal('bad_signature', `${name}+${hex8(id)}`);
    }
    verified = true;
  }
  if (!verified) throw new NoteRefusal('untrusted', seen.join(', '), seen);
  return parsed.text;
}

// ---- checkpoint texts (src/evidence/checkpoint.rs) --------------------------------------------------

/** checkpoint::is_origin: 1 to 255 printable ASCII bytes, no space, no '+'. */
function isOrigin(origin) {
  return origin.length > 0 && origin.length < 256 && /^[\x21-\x2a\x2c-\x7e]+$/.test(origin);
}

/** A canonical decimal u64 (`parse::<u64>()` whose `to_string()` is the text), or null. */
function canonicalU64(text) {
  if (!UNSIGNED_INTEGER.test(text)) return null;
  const value = BigInt(text);
  return value <= U64_MAX ? value : null;
}

/** A checkpoint's text read (checkpoint::parse), or a thrown message saying what is wrong. */
function parseCheckpoint(text) {
  if (!text.endsWith('\n')) throw new Error('the text does not end with a newline');
  const lines = text.slice(0, -1).split('\n');
  if (lines.length !== 5) {
    throw new Error(`a checkpoint has 5 lines (origin, size, root, ${TIME_LINE}, ${OPEN_LINE}); this has ${lines.length}`);
  }
  const [origin, sizeText, rootText, timeLine, openLine] = lines;
  if (!isOrigin(origin)) throw new Error(`${quoted(origin)} is not an origin`);
  const size = canonicalU64(sizeText);
  if (size === null) throw new Error(`the size ${quoted(sizeText)} is not a decimal number`);
  const root = decodeHash(rootText);
  if (root === null) throw new Error(`the root ${quoted(rootText)} is not a base64 SHA-256`);
  const time = timeLine.startsWith(`${TIME_LINE} `) ? timeLine.slice(TIME_LINE.length + 1) : null;
  if (time === null || !isClockTime(time)) {
    throw new Error(`the fourth line ${quoted(timeLine)} is not \`${TIME_LINE} <RFC 3339 time>\``);
  }
  const badOpen = () => new Error(`the fifth line ${quoted(openLine)} is not \`${OPEN_LINE} <count> <base64 SHA-256>\``);
  if (!openLine.startsWith(`${OPEN_LINE} `)) throw badOpen();
  const rest = openLine.slice(OPEN_LINE.length + 1);
  const space = rest.indexOf(' ');
  if (space < 0) throw badOpen();
  const open = canonicalU64(rest.slice(0, space));
  const companionHash = decodeHash(rest.slice(space + 1));
  if (open === null || companionHash === null) throw badOpen();
  return { origin, size, root, time, open, companionHash };
}

// ---- reading the bundle's files ---------------------------------------------------------------------

/** `dir` joined with `name` as Rust's Path::join joins them (an absolute `name` replaces `dir`). */
function joinPath(dir, name) {
  if (name.startsWith('/') || dir === '') return name;
  return dir.endsWith('/') ? dir + name : `${dir}/${name}`;
}

/** An I/O error in the words Rust's io::Error uses ("No such file or directory (os error 2)"). */
function ioMessage(error) {
  if (typeof error.errno === 'number' && error.errno < 0) {
    const known = util.getSystemErrorMap().get(error.errno);
    if (known) return `${known[1].charAt(0).toUpperCase()}${known[1].slice(1)} (os error ${-error.errno})`;
  }
  return error.message;
}

/** A file of the bundle as text (read_text): a missing or non-UTF-8 file is bundle_malformed. */
function readText(dir, name) {
  let bytes;
  try {
    bytes = fs.readFileSync(joinPath(dir, name));
  } catch (error) {
    return fail('bundle_malformed', `cannot read ${name}: ${ioMessage(error)}`);
  }
  const text = utf8OrNull(bytes);
  if (text === null) fail('bundle_malformed', `cannot read ${name}: stream did not contain valid UTF-8`);
  return text;
}

/** A JSON file of the bundle read as `type` (parse_file): else bundle_malformed. */
function parseFile(dir, name, type) {
  const text = readText(dir, name);
  try {
    return parseTyped(text, type);
  } catch (error) {
    if (error instanceof JsonRefusal) fail('bundle_malformed', `${name} is not what it should be: ${error.message}`);
    throw error;
  }
}

/** Base64 hashes of a bundle file, decoded: else bundle_malformed. */
function hashes(list, name) {
  return list.map((text) => decodeHash(text) ?? fail('bundle_malformed', `${name} holds ${quoted(text)}, not a base64 SHA-256`));
}

/** The lines of receipts.jsonl as Buffers, each with its "\n" when it has one, read in chunks. */
function* fileLines(fd) {
  const chunk = Buffer.alloc(CHUNK);
  let pending = [];
  for (;;) {
    let read;
    try {
      read = fs.readSync(fd, chunk, 0, CHUNK, null);
    } catch (error) {
      fail('bundle_malformed', `cannot read receipts.jsonl: ${ioMessage(error)}`);
    }
    if (read === 0) break;
    let start = 0;
    for (;;) {
      const end = chunk.indexOf(0x0a, start);
      if (end < 0 || end >= read) break;
      pending.push(chunk.subarray(start, end + 1));
      yield Buffer.concat(pending);
      pending = [];
      start = end + 1;
    }
    if (start < read) pending.push(Buffer.from(chunk.subarray(start, read)));
  }
  if (pending.length > 0) yield Buffer.concat(pending);
}

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
