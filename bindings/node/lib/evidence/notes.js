'use strict';
// Part of the pure-JavaScript bundle verifier (lib/evidence.js says what it checks and how):
// verifier keys, signed notes and the checkpoint texts they carry (with their timestamps).

const crypto = require('node:crypto');
const fs = require('node:fs');

const {
  U64_MAX,
  TIME_LINE,
  OPEN_LINE,
  MAX_NOTE_SIZE,
  MAX_NOTE_SIGNATURES,
  MAX_KEY_NAME,
  ALG_ED25519,
  utf8OrNull,
  RUST_WHITESPACE,
  rustTrim,
  quoted,
  hex8,
  decodeBase64,
  decodeHash,
} = require('./common');
const { UNSIGNED_INTEGER } = require('./json');
const { sha256 } = require('./merkle');
const { decompress, isSmallOrder, SPKI_ED25519, verifyStrict } = require('./ed25519');
const { ioMessage } = require('./files');

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

module.exports = {
  parseVerifierKey,
  trustedKey,
  NoteRefusal,
  openNote,
  parseCheckpoint,
};
