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

/**
 * Serialize like JSON.stringify (toJSON, undefined/functions/symbols skipped in objects and
 * null in arrays), except that a BigInt prints as its exact digits and a non-finite number
 * prints as itself (NaN, Infinity) so Warden refuses it instead of silently storing null.
 */
function stringify(value) {
  const seen = new Set();
  const encode = (value, key) => {
    // Objects only: a BigInt prints its digits even where BigInt.prototype.toJSON was patched.
    if (value !== null && typeof value === 'object' && typeof value.toJSON === 'function') {
      value = value.toJSON(key);
    }
    switch (typeof value) {
      case 'bigint':
        return value.toString();
      case 'number':
        return Number.isFinite(value) ? JSON.stringify(value) : String(value);
      case 'string':
        return JSON.stringify(value);
      case 'boolean':
        return value ? 'true' : 'false';
      case 'undefined':
      case 'function':
      case 'symbol':
        return undefined;
      default:
        break;
    }
    if (value === null) return 'null';
    if (value instanceof Number || value instanceof String || value instanceof Boolean) {
      return encode(value.valueOf(), key);
    }
    if (seen.has(value)) throw new TypeError('cannot serialize a circular structure to JSON');
    seen.add(value);
    try {
      if (Array.isArray(value)) {
        const items = value.map((item, index) => {
          const encoded = encode(item, String(index));
          return encoded === undefined ? 'null' : encoded;
        });
        return `[${items.join(',')}]`;
      }
      const members = [];
      for (const name of Object.keys(value)) {
        const encoded = encode(value[name], name);
        if (encoded !== undefined) members.push(`${JSON.stringify(name)}:${encoded}`);
      }
      return `{${members.join(',')}}`;
    } finally {
      seen.delete(value);
    }
  };
  const text = encode(value, '');
  return text === undefined ? 'null' : text;
}

module.exports = { parse, stringify, JsonSyntaxError };
