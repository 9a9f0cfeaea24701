'use strict';
// One measured Node process of the side-by-side harness (started by compare.py, never by hand).
//
//   node node_worker.js <binding dir> <run dir> <durable|deferred> <concurrent> <per-worker> <tag>
//
// Opens a fresh store in <run dir>, runs one warm-up action, prints `ready`, waits for `go` on
// stdin, then runs <concurrent> async loops of <per-worker> keyed no-op protected actions each
// (all in flight at once, awaited with Promise.all), makes deferred outcomes durable (`flush`,
// inside the timed span), prints one JSON line (CLOCK_MONOTONIC start and end in seconds, every
// latency in µs) and waits for `exit` before closing.

const path = require('node:path');
const readline = require('node:readline');

const [bindingDir, runDir, outcomes, concurrentText, perWorkerText, tag] = process.argv.slice(2);
const concurrent = Number.parseInt(concurrentText, 10);
const perWorker = Number.parseInt(perWorkerText, 10);
if (!tag || !(concurrent > 0) || !(perWorker > 0) || !['durable', 'deferred'].includes(outcomes)) {
  console.error('node_worker: <binding dir> <run dir> <durable|deferred> <concurrent> <per-worker> <tag>');
  process.exit(2);
}

const { Warden, withContext } = require(path.resolve(bindingDir));

const lines = readline.createInterface({ input: process.stdin });
const pending = [];
const waiting = [];
lines.on('line', (line) => {
  const next = waiting.shift();
  if (next) next(line.trim());
  else pending.push(line.trim());
});
function nextLine() {
  if (pending.length) return Promise.resolve(pending.shift());
  return new Promise((resolve) => waiting.push(resolve));
}
async function expectLine(word) {
  const line = await nextLine();
  if (line !== word) throw new Error(`node_worker: expected ${JSON.stringify(word)} on stdin, got ${JSON.stringify(line)}`);
}

/** CLOCK_MONOTONIC in seconds: process.hrtime is uv_hrtime, the same clock Python's time.monotonic reads. */
function monotonic() {
  return Number(process.hrtime.bigint()) / 1e9;
}

function checked(result) {
  if (result === null || typeof result !== 'object' || result.ok !== true || Object.keys(result).length !== 1) {
    throw new Error(`node_worker: the protected function returned ${JSON.stringify(result)}`);
  }
}

async function main() {
  const w = new Warden({
    store: path.join(runDir, 'warden.redb'),
    config: path.join(runDir, 'warden.yaml'),
    outcomes,
  });
  const noop = w.protect('bench.noop', async () => ({ ok: true }));
  const agent = { agent: 'bench-agent' };

  checked(await withContext(agent, () => noop({ n: `${tag}-warm` })));
  process.stdout.write('ready\n');
  await expectLine('go');

  const latencies = [];
  const loop = (index) =>
    withContext(agent, async () => {
      for (let n = 0; n < perWorker; n += 1) {
        const began = process.hrtime.bigint();
        checked(await noop({ n: `${tag}-${index}-${n}` }));
        latencies.push(Number((process.hrtime.bigint() - began) / 1000n));
      }
    });
  const start = monotonic();
  await Promise.all(Array.from({ length: concurrent }, (_, i) => loop(i)));
  await w.flush();
  const end = monotonic();
  if (latencies.length !== concurrent * perWorker) {
    throw new Error(`node_worker: ${latencies.length} actions measured, ${concurrent * perWorker} expected`);
  }
  process.stdout.write(`${JSON.stringify({ start, end, latencies_us: latencies })}\n`);
  await expectLine('exit');
  w.close();
  lines.close();
}

main().catch((error) => {
  console.error(error && error.stack ? error.stack : String(error));
  process.exit(1);
});
