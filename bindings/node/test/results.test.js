'use strict';
// What a protected call hands back and records, under values that fight back: a thrown value
// whose prototype trap throws, and results too large to serialize in one go on the event loop.
const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');

const warden = require('..');
const { stringifyJson } = warden;
const { stringifyInSteps } = require('../lib/json');
const { open, ada } = require('./helpers');

/** What the store keeps of a result over its bound: the size and SHA-256 of the bytes sent. */
function sentBytes(value) {
  const bytes = Buffer.from(stringifyJson(value), 'utf8');
  return { bytes: bytes.length, sha256: `sha256:${crypto.createHash('sha256').update(bytes).digest('hex')}` };
}

test('a thrown value whose prototype trap throws is rethrown unchanged and recorded AMBIGUOUS', async (t) => {
  const { w } = open(t);
  const hostile = new Proxy(
    {},
    {
      getPrototypeOf() {
        throw new Error('trap');
      },
    },
  );
  const write = w.protect('ledger.write', () => {
    throw hostile;
  });
  const thrown = await ada(() => write({ entry: 'proxy' })).catch((e) => e);
  assert.ok(thrown === hostile, 'the very value thrown by the function');
  const effect = await w.effect('ledger:proxy');
  assert.equal(effect.state, 'ambiguous');

  // The same through an async function, and for a proxy whose every trap throws.
  const everyTrap = new Proxy(
    {},
    new Proxy(
      {},
      {
        get() {
          return () => {
            throw new Error('every trap');
          };
        },
      },
    ),
  );
  const writeAsync = w.protect('ledger.write', async () => {
    await null;
    throw everyTrap;
  });
  // Caught with try/catch: handing it on through a promise would read its `then` (a trap).
  let thrownAsync;
  try {
    await ada(() => writeAsync({ entry: 'proxy2' }));
  } catch (error) {
    thrownAsync = error;
  }
  assert.ok(thrownAsync === everyTrap, 'the very value thrown by the async function');
  assert.equal((await w.effect('ledger:proxy2')).state, 'ambiguous');
});

test('a large result is serialized in steps: the event loop turns before its last part is read', async (t) => {
  const { w } = open(t);
  const order = [];
  const rows = Array.from({ length: 100_000 }, (_, i) => ({ i, s: 'row'.repeat(30) }));
  rows.push({
    get tail() {
      order.push('the last part was read');
      return 'end';
    },
  });
  const write = w.protect('ledger.write', () => {
    setImmediate(() => order.push('the event loop turned'));
    return rows;
  });
  assert.equal(await ada(() => write({ entry: 'rows' })), rows);
  assert.deepEqual(order, ['the event loop turned', 'the last part was read']);
  // Over its bound the store keeps an excerpt, and the size and hash of all the bytes sent:
  // exactly the text stringifyJson writes in one go.
  const effect = await w.effect('ledger:rows');
  assert.equal(effect.state, 'committed');
  assert.equal(effect.result.warden_result, 'truncated');
  const { bytes, sha256 } = sentBytes(rows);
  assert.equal(effect.result.bytes, bytes);
  assert.equal(effect.result.sha256, sha256);
  assert.ok(effect.result.excerpt.startsWith(stringifyJson(rows.slice(0, 3)).slice(0, -1)));
});

test('a large string result is escaped in steps and stored exactly', async (t) => {
  const { w } = open(t);
  // Multi-byte text, surrogate pairs, quotes, backslashes and control characters, 6 MB long.
  const unit = 'é"\\\n\u0001😀abc€\t';
  const text = unit.repeat(Math.ceil(6_000_000 / unit.length));
  const order = [];
  const result = {
    text,
    get after() {
      order.push('the part after the string was read');
      return 1;
    },
  };
  const write = w.protect('ledger.write', () => {
    setImmediate(() => order.push('the event loop turned'));
    return result;
  });
  await ada(() => write({ entry: 'text' }));
  assert.deepEqual(order, ['the event loop turned', 'the part after the string was read']);
  const effect = await w.effect('ledger:text');
  assert.equal(effect.state, 'committed');
  const { bytes, sha256 } = sentBytes(result);
  assert.equal(effect.result.bytes, bytes);
  assert.equal(effect.result.sha256, sha256, 'the library got the very text');
});

test('stringifyInSteps produces exactly what stringifyJson does, in one piece or in many', async () => {
  const sparse = [1, , 3]; // eslint-disable-line no-sparse-arrays
  const date = new Date(0);
  const samples = [
    null,
    undefined,
    0,
    -0,
    1.5,
    NaN,
    -Infinity,
    2n ** 70n,
    'plain',
    'a😀b\ud800c', // a lone surrogate is escaped
    true,
    [],
    {},
    sparse,
    [undefined, () => 1, Symbol('s'), null],
    { u: undefined, f() {}, s: Symbol('s'), n: null, nested: { toJSON: (key) => `custom:${key}` } },
    { date, boxed: [Object(1), Object('s'), Object(false)], big: -(2n ** 64n) },
    { toJSON: () => undefined },
    { '': 1, 'é"': { a: [[[]]] }, __proto__: null },
    Array.from({ length: 3000 }, (_, i) => ({ i, s: `${i}`.repeat(i % 50) })),
    { long: 'x😀'.repeat(300_000) },
  ];
  for (const value of samples) {
    const expected = stringifyJson(value);
    for (const budget of [Infinity, 1, 64, 100_000]) {
      let turns = 0;
      const pieces = await stringifyInSteps(value, { budget, pause: async () => (turns += 1) });
      const text = typeof pieces === 'string' ? pieces : Buffer.concat(pieces).toString('utf8');
      assert.equal(text, expected, `budget ${budget}`);
      if (budget === Infinity) assert.equal(turns, 0, 'no pause when everything fits in one step');
    }
  }
  // Where JSON.stringify is defined (no BigInt, no non-finite number), the very same text.
  const jsonCompatible = [0, 1, 2, 3, 4, 8, 9, 10, 11, 12, 13, 14, 15, 17, 18, 19, 20].map((i) => samples[i]);
  for (const value of jsonCompatible) {
    assert.equal(stringifyJson(value), JSON.stringify(value) ?? 'null');
  }
  const circular = { a: [] };
  circular.a.push(circular);
  await assert.rejects(stringifyInSteps(circular, { budget: 1, pause: async () => {} }), TypeError);
  assert.throws(() => stringifyJson(circular), TypeError);
});
