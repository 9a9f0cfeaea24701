'use strict';
// Behaviour under stress that held up and must keep holding: a process that exits mid-call
// never records a commit, handles dropped without close() leak no descriptors, and worker
// threads sharing one store run each key once. Every wait is bounded; nothing is timed.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { Worker } = require('node:worker_threads');

const warden = require('..');
const { scratch } = require('./helpers');

const BINDING = path.resolve(__dirname, '..');
/** How long a child process may run before it counts as hung (it is then killed). */
const CHILD_BOUND_MS = 120_000;

function runChild(t, script, env) {
  const child = spawnSync(process.execPath, ['--expose-gc', '-e', script], {
    env: { ...process.env, WARDEN_BINDING: BINDING, ...env },
    encoding: 'utf8',
    timeout: CHILD_BOUND_MS,
  });
  assert.equal(child.error, undefined, `the child ran and exited in time: ${child.error}`);
  return child;
}

test('process.exit() while a protected function runs never records a commit', async (t) => {
  const { store, config } = scratch(t);
  const script = `
    const warden = require(process.env.WARDEN_BINDING);
    const w = new warden.Warden({ store: process.env.STORE, config: process.env.CONFIG, environment: 'test' });
    const pending = w.protect('ledger.write', async () => {
      setImmediate(() => process.exit(0)); // the process ends while the function waits
      await new Promise(() => {});
    });
    // A function that finished, with a result large enough to be written in steps: the
    // process ends between two steps, before the commit could be sent.
    const rows = Array.from({ length: 200000 }, (_, i) => ({ i, s: 'row'.repeat(20) }));
    const finishing = w.protect('ledger.write', () => {
      setImmediate(() => process.exit(0));
      return rows;
    });
    const which = process.env.WHICH === 'pending' ? pending : finishing;
    warden.withContext({ agent: 'exiting', user: null }, () => which({ entry: process.env.WHICH }));
  `;
  for (const which of ['pending', 'finishing']) {
    const child = runChild(t, script, { STORE: store, CONFIG: config, WHICH: which });
    assert.equal(child.status, 0, child.stderr);
  }
  const w = new warden.Warden({ store, config, environment: 'test' });
  t.after(() => w.close());
  for (const which of ['pending', 'finishing']) {
    const effect = await w.effect(`ledger:${which}`);
    assert.ok(effect !== null, `the ${which} call was proposed`);
    assert.equal(effect.state, 'executing', `nothing was recorded for ${which}: it stays in flight until its lease lapses`);
    assert.equal(effect.result, null);
  }
  const receipts = await w.receipts({ limit: 0 });
  assert.equal(receipts.length, 0, 'no outcome, so no receipt');
  assert.equal((await w.verifyChain()).ok, true);
});

test('10,000 handles dropped without close() leave no descriptor open', async (t) => {
  const { store, config } = scratch(t);
  const script = `
    const fs = require('node:fs');
    const warden = require(process.env.WARDEN_BINDING);
    const count = () => fs.readdirSync('/proc/self/fd').length;
    const turn = () => new Promise((resolve) => setImmediate(resolve));
    (async () => {
      const before = count();
      let peak = 0;
      for (let i = 0; i < 10000; i++) {
        const w = new warden.Warden({ store: process.env.STORE, config: process.env.CONFIG, environment: 'test' });
        if (i % 1000 === 0) {
          await warden.withContext({ agent: 'a', user: null }, () => w.effects({ limit: 1 }));
          peak = Math.max(peak, count());
          await turn();
        }
      }
      // Dropped, never closed: collected, and each handle's finalizer closes it.
      let after = count();
      for (let round = 0; round < 500 && after > before; round++) {
        global.gc();
        await turn();
        after = count();
      }
      console.log(JSON.stringify({ before, peak, after }));
    })().catch((error) => { console.error(error); process.exit(1); });
  `;
  const child = runChild(t, script, { STORE: store, CONFIG: config });
  assert.equal(child.status, 0, child.stderr);
  const { before, peak, after } = JSON.parse(child.stdout.trim().split('\n').pop());
  assert.ok(peak > before, `the handles held descriptors while open (${before} → ${peak})`);
  assert.equal(after, before, `descriptors before ${before}, after ${after}`);
  t.diagnostic(`descriptors: ${before} before, ${peak} at most while open, ${after} after`);
});

test('4 worker threads with their own handles on one store run each key exactly once', async (t) => {
  const { store, config, dir } = scratch(t);
  const log = path.join(dir, 'executions.log');
  const keys = 50;
  const source = `
    const fs = require('node:fs');
    const { workerData, parentPort } = require('node:worker_threads');
    const warden = require(workerData.binding);
    (async () => {
      const w = new warden.Warden({ store: workerData.store, config: workerData.config, environment: 'test' });
      const write = w.protect('ledger.write', ({ entry }) => {
        fs.appendFileSync(workerData.log, entry + ' ' + workerData.n + '\\n'); // one O_APPEND write
        return { by: workerData.n };
      });
      let wins = 0;
      await warden.withContext({ agent: 'worker-' + workerData.n, user: null }, async () => {
        for (let k = 0; k < workerData.keys; k++) {
          try {
            await write({ entry: 'key' + k });
            wins += 1;
          } catch (error) {
            if (!(error instanceof warden.Duplicate)) throw error;
          }
        }
      });
      w.close();
      parentPort.postMessage(wins);
    })().catch((error) => { throw error; });
  `;
  const workers = Array.from(
    { length: 4 },
    (_, n) => new Worker(source, { eval: true, workerData: { binding: BINDING, store, config, log, keys, n } }),
  );
  const wins = await Promise.all(
    workers.map(
      (worker) =>
        new Promise((resolve, reject) => {
          const bound = setTimeout(() => {
            worker.terminate();
            reject(new Error('a worker did not finish in time'));
          }, CHILD_BOUND_MS);
          worker.once('message', (n) => {
            clearTimeout(bound);
            resolve(n);
          });
          worker.once('error', (error) => {
            clearTimeout(bound);
            reject(error);
          });
        }),
    ),
  );
  assert.equal(wins.reduce((a, b) => a + b, 0), keys);
  const runs = new Map();
  for (const line of fs.readFileSync(log, 'utf8').trim().split('\n')) {
    const key = line.split(' ')[0];
    runs.set(key, (runs.get(key) ?? 0) + 1);
  }
  assert.equal(runs.size, keys);
  assert.deepEqual([...runs.values()].filter((n) => n !== 1), [], 'every key ran exactly once');
  const w = new warden.Warden({ store, config, environment: 'test' });
  t.after(() => w.close());
  assert.equal((await w.effects({ state: 'committed', limit: 0 })).length, keys);
  const report = await w.verifyChain();
  assert.equal(report.ok, true, JSON.stringify(report));
});
