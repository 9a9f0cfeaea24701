'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');

const warden = require('..');
const { open, ada } = require('./helpers');

// If the C calls ran on the JavaScript thread, every promise below would already be settled
// when awaited and the loop would run on microtasks alone: no timer could fire until it ended.
// They run as N-API async work, so each await goes around the event loop and timers tick.
test('the event loop keeps ticking while protected calls run', async (t) => {
  const { w } = open(t);
  let ticks = 0;
  const timer = setInterval(() => {
    ticks += 1;
  }, 1);
  t.after(() => clearInterval(timer));
  const write = w.protect('ledger.write', () => 'ok');
  let ticksDuringCalls = 0;
  for (let i = 0; i < 40 && ticksDuringCalls === 0; i++) {
    const before = ticks;
    await ada(() => write({ entry: `tick${i}` }));
    await w.verifyChain();
    ticksDuringCalls += ticks - before;
  }
  assert.ok(ticksDuringCalls > 0, 'a timer fired while a native call was in flight');
});

test('a native call returns a pending promise, settled later from the thread pool', async (t) => {
  const { w } = open(t);
  let settled = false;
  const pending = w.effects().then((effects) => {
    settled = true;
    return effects;
  });
  await Promise.resolve();
  await Promise.resolve();
  assert.equal(settled, false, 'not settled within the same turn');
  assert.deepEqual(await pending, []);
});
