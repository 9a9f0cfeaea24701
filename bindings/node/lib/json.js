'use strict';
// JSON that keeps every integer exact.
//
// Warden's integers are unbounded (they hash as written), and JavaScript numbers are not: an
// integer outside Number.MAX_SAFE_INTEGER parses to a BigInt, and a BigInt serializes back to
// its exact digits. Everything else is what JSON.parse / JSON.stringify do.

const INTEGER = /^-?(0|[1-9][0-9]*)$/;

class JsonSyntaxError extends SyntaxError {}

/** Parse JSON text; integers beyond 2^53 - 1 become BigInt. */
function parse(text) {
  let pos = 0;
  const fail = (what) => {
    throw new JsonSyntaxError(`invalid JSON at position ${pos}: ${what}`);
  };
  const ws = () => {
    while (pos < text.length) {
      const c = text.charCodeAt(pos);
      if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) pos++;
      else break;
    }
  };
  const literal = (word, value) => {
    if (text.startsWith(word, pos)) {
      pos += word.length;
      return value;
    }
    return fail('unexpected character');
  };
  const string = () => {
    // The text between quotes is valid JSON string syntax; JSON.parse decodes it exactly.
    const start = pos;
    pos++;
    while (pos < text.length) {
      const c = text.charCodeAt(pos);
      if (c === 0x22) {
        pos++;
        return JSON.parse(text.slice(start, pos));
      }
      if (c === 0x5c) pos += 2;
      else if (c < 0x20) fail('control character in string');
      else pos++;
    }
    return fail('unterminated string');
  };
  const number = () => {
    const match = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/.exec(text.slice(pos, pos + 4096));
    if (!match || match[0] === '' || match[0] === '-') fail('bad number');
    const raw = match[0];
    pos += raw.length;
    if (INTEGER.test(raw)) {
      const n = Number(raw);
      return Number.isSafeInteger(n) ? n : BigInt(raw);
    }
    return Number(raw);
  };
  const value = (depth) => {
    if (depth > 512) fail('nested too deeply');
    ws();
    const c = text[pos];
    if (c === '{') {
      pos++;
      const object = {};
      ws();
      if (text[pos] === '}') {
        pos++;
        return object;
      }
      for (;;) {
        ws();
        if (text[pos] !== '"') fail('expected a string key');
        const key = string();
        ws();
        if (text[pos] !== ':') fail("expected ':'");
        pos++;
        // defineProperty, so a "__proto__" key is data (as with JSON.parse), never a prototype.
        Object.defineProperty(object, key, { value: value(depth + 1), enumerable: true, writable: true, configurable: true });
        ws();
        if (text[pos] === ',') {
          pos++;
          continue;
        }
        if (text[pos] === '}') {
          pos++;
          return object;
        }
        fail("expected ',' or '}'");
      }
    }
    if (c === '[') {
      pos++;
      const array = [];
      ws();
      if (text[pos] === ']') {
        pos++;
        return array;
      }
      for (;;) {
        array.push(value(depth + 1));
        ws();
        if (text[pos] === ',') {
          pos++;
          continue;
        }
        if (text[pos] === ']') {
          pos++;
          return array;
        }
        fail("expected ',' or ']'");
      }
    }
    if (c === '"') return string();
    if (c === 't') return literal('true', true);
    if (c === 'f') return literal('false', false);
    if (c === 'n') return literal('null', null);
    if (c === '-' || (c >= '0' && c <= '9')) return number();
    return fail(pos >= text.length ? 'unexpected end' : 'unexpected character');
  };
  const result = value(0);
  ws();
  if (pos !== text.length) fail('trailing characters');
  return result;
}

/** Strings longer than this are escaped a slice at a time when writing in steps. */
const STRING_SLICE = 1 << 20;

const ARRAY = 0;
const OBJECT = 1;
const STRING = 2;

const CLOSER = [']', '}', '"'];

/**
 * One open container (or long string) on the encoder's stack, one shape for all kinds. Its
 * text is `head` (what precedes its first item: a separator, its member name and its opening
 * bracket), then `parts`, then its closing bracket. It joins its parts when it closes, as a
 * recursive encoder would, so the output is built from short-lived strings.
 */
class Frame {
  constructor(kind, value, keys, length, head) {
    this.kind = kind;
    this.value = value;
    this.keys = keys;
    this.length = length;
    this.at = 0;
    this.count = 0;
    this.head = head;
    this.parts = [];
  }
}

/**
 * Serializes one value, a bounded amount of work at a time: an explicit stack instead of
 * recursion. `stringify` runs it to the end at once; `stringifyInSteps` pauses between steps
 * so that the event loop keeps turning while a large result is written. Both produce the same
 * text.
 */
class Encoder {
  constructor(value, sliceStrings) {
    this.top = [];
    this.written = 0;
    this.stack = [];
    this.seen = new Set();
    this.sliceStrings = sliceStrings;
    this.emit(value, '', '', true);
  }

  get done() {
    return this.stack.length === 0;
  }

  /** One finished piece of text, into the innermost open container (or the top level). */
  put(text) {
    this.written += text.length;
    const stack = this.stack;
    if (stack.length === 0) this.top.push(text);
    else stack[stack.length - 1].parts.push(text);
  }

  /** Take what was written so far: the top level's text, then each open container's. */
  drain() {
    let text = this.top.join('');
    this.top = [];
    for (const frame of this.stack) {
      text += frame.head + frame.parts.join('');
      frame.head = '';
      frame.parts = [];
    }
    return text;
  }

  /**
   * Write `value` after `head` (a separator, and a member name for an object member). Returns
   * false when JSON skips it: an object member that is undefined, a function or a symbol
   * (`orNull`: an array element, or the whole value, is then written as null).
   */
  emit(value, key, head, orNull) {
    if (value !== null && typeof value === 'object') {
      // Objects only: a BigInt prints its digits even where BigInt.prototype.toJSON was patched.
      if (typeof value.toJSON === 'function') value = value.toJSON(key);
      if (value instanceof Number || value instanceof String || value instanceof Boolean) value = value.valueOf();
    }
    switch (typeof value) {
      case 'string':
        if (this.sliceStrings && value.length > STRING_SLICE) {
          this.open(new Frame(STRING, value, null, value.length, `${head}"`));
        } else {
          this.put(head + JSON.stringify(value));
        }
        return true;
      case 'number':
        this.put(head + (Number.isFinite(value) ? JSON.stringify(value) : String(value)));
        return true;
      case 'bigint':
        this.put(head + value.toString());
        return true;
      case 'boolean':
        this.put(head + (value ? 'true' : 'false'));
        return true;
      case 'undefined':
      case 'function':
      case 'symbol':
        if (orNull) this.put(`${head}null`);
        return false;
      default:
        break;
    }
    if (value === null) {
      this.put(`${head}null`);
      return true;
    }
    if (this.seen.has(value)) throw new TypeError('cannot serialize a circular structure to JSON');
    this.seen.add(value);
    if (Array.isArray(value)) {
      this.open(new Frame(ARRAY, value, null, value.length, `${head}[`));
    } else {
      const keys = Object.keys(value);
      this.open(new Frame(OBJECT, value, keys, keys.length, `${head}{`));
    }
    return true;
  }

  open(frame) {
    this.written += frame.head.length;
    this.stack.push(frame);
  }

  /** Work until done, or until about `budget` characters were written (or values visited). */
  run(budget) {
    const stack = this.stack;
    const limit = this.written + budget;
    let visits = 0;
    while (stack.length > 0 && this.written + visits < limit) {
      visits += 1;
      const frame = stack[stack.length - 1];
      const at = frame.at;
      if (at >= frame.length) {
        stack.pop();
        if (frame.kind !== STRING) this.seen.delete(frame.value);
        const text = frame.head + frame.parts.join('') + CLOSER[frame.kind];
        this.written -= text.length - 1; // the rest was counted when it was written
        this.put(text);
        continue;
      }
      frame.at = at + 1;
      if (frame.kind === ARRAY) {
        this.emit(frame.value[at], String(at), frame.count > 0 ? ',' : '', true);
        frame.count += 1;
      } else if (frame.kind === OBJECT) {
        const name = frame.keys[at];
        const prefix = `${frame.count > 0 ? ',' : ''}${JSON.stringify(name)}:`;
        if (this.emit(frame.value[name], name, prefix, false)) frame.count += 1;
      } else {
        let end = Math.min(at + STRING_SLICE, frame.length);
        // Never split a surrogate pair between two slices.
        const last = frame.value.charCodeAt(end - 1);
        if (end < frame.length && last >= 0xd800 && last <= 0xdbff) end -= 1;
        frame.at = end;
        this.put(JSON.stringify(frame.value.slice(at, end)).slice(1, -1));
      }
    }
  }
}

/**
 * Serialize like JSON.stringify (toJSON, undefined/functions/symbols skipped in objects and
 * null in arrays, holes included), except that a BigInt prints as its exact digits and a
 * non-finite number prints as itself (NaN, Infinity) so Warden refuses it instead of silently
 * storing null. A circular structure is a TypeError.
 */
function stringify(value) {
  const encoder = new Encoder(value, false);
  encoder.run(Infinity);
  return encoder.drain();
}

/** How much is written between two pauses: a few milliseconds of work. */
const STEP = 1 << 18;

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

/**
 * `stringify` for a value that may be large, without holding the event loop: the value is
 * written about `budget` characters at a time, and `pause()` (by default, the next turn of
 * the event loop) is awaited between steps. A value that fits in one step comes back as a
 * string; a larger one as UTF-8 Buffers, one per step, for the addon to join off the event
 * loop. The value is read as it is at each step, so a caller must not change it meanwhile.
 */
async function stringifyInSteps(value, { budget = STEP, pause = nextTurn } = {}) {
  const encoder = new Encoder(value, true);
  encoder.run(budget);
  if (encoder.done) return encoder.drain();
  const pieces = [];
  while (!encoder.done) {
    pieces.push(Buffer.from(encoder.drain(), 'utf8'));
    await pause();
    encoder.run(budget);
  }
  pieces.push(Buffer.from(encoder.drain(), 'utf8'));
  return pieces;
}

module.exports = { parse, stringify, stringifyInSteps, JsonSyntaxError };
