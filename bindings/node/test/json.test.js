'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');

const warden = require('..');

const { parseJson, stringifyJson } = warden;

test('integers beyond 2^53 parse as BigInt, and safe ones as numbers', () => {
  assert.equal(parseJson('9007199254740991'), Number.MAX_SAFE_INTEGER);
  assert.equal(parseJson('9007199254740992'), 2n ** 53n);
  assert.equal(parseJson('-9007199254740992'), -(2n ** 53n));
  assert.equal(parseJson('1180591620717411303424'), 2n ** 70n);
  assert.deepEqual(parseJson('{"a":[1,-0,2.5,1e3,18446744073709551616]}'), { a: [1, -0, 2.5, 1000, 2n ** 64n] });
});

test('BigInt serializes to its exact digits', () => {
  assert.equal(stringifyJson({ big: 2n ** 70n, neg: -(2n ** 64n), small: 1n }), '{"big":1180591620717411303424,"neg":-18446744073709551616,"small":1}');
});

test('BigInt 2n**70n round-trips through JSON and through the library', () => {
  const value = { amount: 2n ** 70n, list: [2n ** 70n, -(2n ** 70n)] };
  assert.deepEqual(parseJson(stringifyJson(value)), value);
  const text = warden.canonical(value);
  assert.equal(text, '{"amount":1180591620717411303424,"list":[1180591620717411303424,-1180591620717411303424]}');
  assert.deepEqual(parseJson(text), value);
});

test('parse agrees with JSON.parse on ordinary documents', () => {
  const samples = [
    '{"a":"\\u00e9\\n\\"x\\"","b":[true,false,null],"c":{"d":{}},"e":[]}',
    '  [ 1 , "two" , { "three" : 3 } ]  ',
    '"\\ud83d\\ude00"',
    '{"__proto__":{"polluted":true}}',
    '-12.5e-3',
  ];
  for (const text of samples) assert.deepEqual(parseJson(text), JSON.parse(text), text);
  const proto = parseJson('{"__proto__":{"polluted":true}}');
  assert.equal(Object.getPrototypeOf(proto), Object.prototype, '__proto__ stays a plain key');
  assert.deepEqual(Object.keys(proto), ['__proto__']);
});

test('malformed JSON is a SyntaxError', () => {
  for (const text of ['', '{', '[1,]', '{"a" 1}', '01', '1 2', 'nul', '"\u0001"', '{"a":1,}']) {
    assert.throws(() => parseJson(text), SyntaxError, JSON.stringify(text));
  }
});

test('stringify behaves like JSON.stringify for everything but BigInt and non-finite numbers', () => {
  const date = new Date(0);
  const value = { s: 'é"\n', n: 1.5, u: undefined, f() {}, arr: [undefined, () => 1, null], date, nested: { toJSON: () => 'custom' } };
  assert.equal(stringifyJson(value), JSON.stringify(value));
  assert.equal(stringifyJson(undefined), 'null');
  assert.equal(stringifyJson(NaN), 'NaN', 'so the library refuses it');
  const circular = {};
  circular.self = circular;
  assert.throws(() => stringifyJson(circular), TypeError);
  const original = BigInt.prototype.toJSON;
  BigInt.prototype.toJSON = function toJSON() {
    return `${this}`;
  };
  try {
    assert.equal(stringifyJson({ big: 5n }), '{"big":5}', 'a patched BigInt.prototype.toJSON is ignored');
  } finally {
    if (original === undefined) delete BigInt.prototype.toJSON;
    else BigInt.prototype.toJSON = original;
  }
});

test('canonical sorts keys and refuses floats', () => {
  assert.equal(warden.canonical({ b: 1, a: [true, null, 'x'] }), '{"a":[true,null,"x"],"b":1}');
  const refused = (() => {
    try {
      warden.canonical({ amount: 12.5 });
    } catch (error) {
      return error;
    }
    return null;
  })();
  assert.ok(refused instanceof warden.InvalidInput, `got ${refused}`);
  assert.equal(refused.code, 'WARDEN_RESULT_INVALID_INPUT');
});
