'use strict';
// Part of the pure-JavaScript bundle verifier (lib/evidence.js says what it checks and how): JSON
// read as serde_json reads it, and the serde-derived structs of bundle.rs and checkpoint.rs.

const { U64_MAX, U32_MAX, isWellFormed, quoted } = require('./common');

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

module.exports = {
  JsonRefusal,
  UNSIGNED_INTEGER,
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
};
