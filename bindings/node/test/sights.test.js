'use strict';
// Sights: confined reads of configured HTTP windows, against a real local HTTP server that
// records every request it sees (method, url, headers, body). No mock of Warden anywhere.
const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const { spawn, spawnSync } = require('node:child_process');
const net = require('node:net');

const warden = require('..');

const REFERENCE = 'STATUS_TOKEN';
const newToken = () => `tok-${crypto.randomBytes(12).toString('hex')}`;

/** A JSON upstream echoing the Authorization header it received (so redaction is tested). */
function defaultHandler(state) {
  return (record, res) => {
    const body =
      state.body ??
      JSON.stringify({ status: { indicator: state.indicator }, count: state.count, debug: { auth: record.headers.authorization ?? null } });
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(body);
  };
}

/** A local HTTP server that records every request and counts every connection. */
async function recorder(t) {
  const requests = [];
  const sockets = new Set();
  const state = { indicator: 'operational', count: 3, body: undefined };
  let connections = 0;
  let handler = defaultHandler(state);
  let waiters = [];
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (chunk) => chunks.push(chunk));
    req.on('end', () => {
      const record = {
        method: req.method,
        url: req.url,
        headers: { ...req.headers },
        rawHeaders: req.rawHeaders.slice(),
        body: Buffer.concat(chunks).toString('latin1'),
      };
      requests.push(record);
      const resolved = waiters;
      waiters = [];
      for (const resolve of resolved) resolve({ record, res });
      handler(record, res);
    });
  });
  server.on('connection', (socket) => {
    connections += 1;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(
    () =>
      new Promise((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  );
  return {
    port: server.address().port,
    requests,
    state,
    get connections() {
      return connections;
    },
    /** Replace how the server answers: (record, res) => void. */
    answer(fn) {
      handler = fn;
    },
    /** Resolves with {record, res} when the next request has been received in full. */
    nextRequest() {
      return new Promise((resolve) => waiters.push(resolve));
    },
  };
}

function sightConfig(port, { timeoutMs = 2000 } = {}) {
  return `schema: warden/v1
actions: {}
sources:
  - id: status
    base_url: http://127.0.0.1:${port}/v2
    auth: { mode: bearer, credential: ${REFERENCE} }
    timeout_ms: ${timeoutMs}
    endpoints:
      - id: summary
        path: /summary
        params:
          - { name: region, type: enum, values: [eu, us], default: eu }
          - { name: limit, type: integer, min: 1, max: 50 }
        fields:
          state: /status/indicator
          count: /count
          secrets: /debug
`;
}

/** A Warden over a fresh store whose sight points at `port`; closed when the test ends. */
function openSight(t, port, { timeoutMs, credentialsDir } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'warden-sight-'));
  const config = path.join(dir, 'warden.yaml');
  fs.writeFileSync(config, sightConfig(port, { timeoutMs }));
  const store = path.join(dir, 'state.redb');
  const w = new warden.Warden({ store, config, credentialsDir });
  t.after(() => {
    w.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return { w, store, dir };
}

/** Run with $STATUS_TOKEN set to `value` (or unset with undefined), restored afterwards. */
function withEnvToken(t, value) {
  const before = process.env[REFERENCE];
  if (value === undefined) delete process.env[REFERENCE];
  else process.env[REFERENCE] = value;
  t.after(() => {
    if (before === undefined) delete process.env[REFERENCE];
    else process.env[REFERENCE] = before;
  });
}

const rejection = (promise) =>
  promise.then(
    (value) => assert.fail(`expected a rejection, got ${JSON.stringify(value, (_, v) => (typeof v === 'bigint' ? `${v}n` : v))}`),
    (error) => error,
  );

function assertSightError(error, Class, reason, label = '') {
  assert.ok(error instanceof Class, `${label}: expected ${Class.name}, got ${error?.name}: ${error?.message}`);
  assert.equal(error.reason, reason, `${label}: ${error.message}`);
  assert.equal(error.code, Class.defaultCode, label);
  assert.equal(error.details.reason, reason, label);
}

/** Exactly the one confined GET: path, method, no body, the configured credential, nothing else. */
function assertConfined(record, token, { query = null } = {}) {
  assert.equal(record.method, 'GET');
  const url = new URL(record.url, 'http://127.0.0.1');
  assert.equal(url.pathname, '/v2/summary');
  if (query !== null) assert.equal(url.search, query);
  assert.equal(record.body, '');
  assert.ok(record.headers['content-length'] === undefined || record.headers['content-length'] === '0', 'no body');
  assert.equal(record.headers['transfer-encoding'], undefined);
  assert.equal(record.headers.authorization, `Bearer ${token}`);
  const names = Object.keys(record.headers).sort();
  for (const name of names) {
    assert.ok(['authorization', 'connection', 'content-length', 'host'].includes(name), `unexpected header ${name}`);
  }
  assert.match(record.headers.host, /^127\.0\.0\.1:\d+$/);
}

// ---- 1. the happy path --------------------------------------------------------------------

test('a query reads the window with the provider\'s credential and redacts its echo', async (t) => {
  const server = await recorder(t);
  const { w } = openSight(t, server.port);
  const token = newToken();
  const asked = [];
  w.setCredentialProvider((reference) => {
    asked.push(reference);
    return token;
  });
  const result = await w.query('status', 'summary', { params: { region: 'us' } });
  assert.deepEqual(asked, [REFERENCE]);
  assert.equal(result.source, 'status');
  assert.equal(result.endpoint, 'summary');
  assert.equal(result.status, 200);
  assert.equal(typeof result.fetchedAt, 'string');
  assert.equal(result.values.state, 'operational');
  assert.equal(result.values.count, 3);
  assert.equal(result.values.secrets.auth, 'Bearer [REDACTED]');
  assert.ok(result.redactions.secrets >= 1);
  assert.equal(result.snapshotId, undefined, 'no snapshot unless asked');
  assert.ok(!JSON.stringify(result).includes(token));
  assert.equal(server.requests.length, 1);
  assertConfined(server.requests[0], token, { query: '?region=us' });
  assert.equal(server.requests[0].url, '/v2/summary?region=us');

  // `fields` narrows the values; an async provider works the same.
  w.setCredentialProvider(async () => token);
  const narrowed = await w.query('status', 'summary', { fields: ['state'], signal: new AbortController().signal });
  assert.deepEqual(Object.keys(narrowed.values), ['state']);
  assertConfined(server.requests[1], token, { query: '?region=eu' });

  // Concurrent queries each wait on their own pool thread for the provider.
  const all = await Promise.all([1, 2, 3].map((limit) => w.query('status', 'summary', { params: { limit } })));
  assert.deepEqual(all.map((r) => r.values.count), [3, 3, 3]);
  for (const record of server.requests) assertConfined(record, token);
});

test('without a provider the credential comes from the environment variable; null restores that default', async (t) => {
  const server = await recorder(t);
  const { w } = openSight(t, server.port);
  const fromEnv = newToken();
  withEnvToken(t, fromEnv);
  await w.query('status', 'summary', { params: { region: 'us' } });
  assertConfined(server.requests[0], fromEnv, { query: '?region=us' });

  const fromProvider = newToken();
  w.setCredentialProvider(() => fromProvider);
  await w.query('status', 'summary');
  assertConfined(server.requests[1], fromProvider);

  w.setCredentialProvider(null);
  await w.query('status', 'summary');
  assertConfined(server.requests[2], fromEnv);
  assert.throws(() => w.setCredentialProvider('token'), TypeError);
});

test('credentialsDir reads the credential from the file named by the reference', async (t) => {
  const server = await recorder(t);
  const secrets = fs.mkdtempSync(path.join(os.tmpdir(), 'warden-creds-'));
  t.after(() => fs.rmSync(secrets, { recursive: true, force: true }));
  const token = newToken();
  fs.writeFileSync(path.join(secrets, REFERENCE), `${token}\n`);
  withEnvToken(t, 'not-this-one');
  const { w } = openSight(t, server.port, { credentialsDir: secrets });
  await w.query('status', 'summary');
  assertConfined(server.requests[0], token);
});

test('integers beyond 2^53 in a result arrive as BigInt', async (t) => {
  const server = await recorder(t);
  const { w } = openSight(t, server.port);
  w.setCredentialProvider(() => 'tok-bigint');
  server.state.body = '{"status":{"indicator":"ok"},"count":1180591620717411303424,"debug":null}';
  const result = await w.query('status', 'summary');
  assert.equal(result.values.count, 2n ** 70n);
});

// ---- 2. the escape test -------------------------------------------------------------------

test('no agent-facing entry point can move the request out of its window', async (t) => {
  const server = await recorder(t);
  const elsewhere = await recorder(t);
  const { w } = openSight(t, server.port);
  const token = newToken();
  w.setCredentialProvider(() => token);
  const long = 'a'.repeat(10_000);
  const unknownId = `snp_${'0'.repeat(32)}`;
  // One real snapshot, so a hostile second id is judged on its own (not after a failed lookup).
  const stored = (await w.query('status', 'summary', { params: { region: 'us' }, snapshot: true })).snapshotId;
  const connectionsBefore = server.connections;
  const hostileNames = ['https://evil.com', '//evil.com', '../../etc/passwd', long, 'nope', ''];
  const { OutOfWindow, NotFound } = warden;
  const cases = [];
  const add = (label, call, Class, reason) => cases.push({ label, call, Class, reason });

  for (const key of ['url', 'host', 'port', 'protocol', 'path', 'method', 'headers', 'credentials', 'base_url', 'body', 'auth']) {
    const value = key === 'port' ? 1 : key === 'headers' ? { 'X-Evil': '1' } : `http://127.0.0.1:${elsewhere.port}/steal`;
    add(`query ${key}`, () => w.query('status', 'summary', { [key]: value }), OutOfWindow, 'invalid_params');
    add(`history ${key}`, () => w.history('status', 'summary', { [key]: value }), OutOfWindow, 'invalid_params');
  }
  for (const name of hostileNames) {
    const label = name.slice(0, 20);
    add(`query source ${label}`, () => w.query(name, 'summary'), OutOfWindow, 'unknown_source');
    add(`query endpoint ${label}`, () => w.query('status', name), OutOfWindow, 'unknown_endpoint');
    add(`history source ${label}`, () => w.history(name, 'summary'), OutOfWindow, 'unknown_source');
    add(`history endpoint ${label}`, () => w.history('status', name), OutOfWindow, 'unknown_endpoint');
    add(`diff a ${label}`, () => w.diff(name, unknownId), OutOfWindow, 'invalid_params');
    add(`diff b ${label}`, () => w.diff(stored, name), OutOfWindow, 'invalid_params');
  }
  for (const wrong of [123, null, { url: 'http://evil.com' }, ['status']]) {
    add(`query source ${JSON.stringify(wrong)}`, () => w.query(wrong, 'summary'), OutOfWindow, 'invalid_params');
    add(`query endpoint ${JSON.stringify(wrong)}`, () => w.query('status', wrong), OutOfWindow, 'invalid_params');
    add(`diff a ${JSON.stringify(wrong)}`, () => w.diff(wrong, unknownId), OutOfWindow, 'invalid_params');
    add(`diff b ${JSON.stringify(wrong)}`, () => w.diff(stored, wrong), OutOfWindow, 'invalid_params');
  }
  const badParams = [
    { region: 'us\r\nX-Evil: 1' },
    { region: 'us\nHost: evil.com' },
    { region: '../' },
    { region: '../../admin' },
    { region: 'us?x=1' },
    { region: 'us#frag' },
    { region: long },
    { region: 1 },
    { region: ['us'] },
    { region: null },
    { path: '/admin' },
    { url: 'http://evil.com' },
    { 'region\r\n': 'us' },
    { limit: '5' },
    { limit: 5.5 },
    { limit: 0 },
    { limit: 51 },
    { limit: -1 },
    { limit: 2n ** 70n },
    { limit: true },
  ];
  for (const params of badParams) {
    const label = `params ${JSON.stringify(params, (_, v) => (typeof v === 'bigint' ? `${v}n` : v)).slice(0, 40)}`;
    add(`query ${label}`, () => w.query('status', 'summary', { params }), OutOfWindow, 'invalid_params');
    add(`history ${label}`, () => w.history('status', 'summary', { params }), OutOfWindow, 'invalid_params');
  }
  add('query params as a list', () => w.query('status', 'summary', { params: ['region=us'] }), OutOfWindow, 'invalid_params');
  add('query params as a string', () => w.query('status', 'summary', { params: 'region=us' }), OutOfWindow, 'invalid_params');
  for (const field of ['/debug', '#/x', '../x', '/status/indicator', 'secrets/auth', 'nope', long, '']) {
    add(`query field ${field.slice(0, 20)}`, () => w.query('status', 'summary', { fields: [field] }), OutOfWindow, 'unknown_field');
  }
  add('query fields as a string', () => w.query('status', 'summary', { fields: 'secrets' }), OutOfWindow, 'invalid_params');
  add('query fields with a non-string', () => w.query('status', 'summary', { fields: [{ pointer: '/debug' }] }), OutOfWindow, 'invalid_params');
  add('query snapshot not a boolean', () => w.query('status', 'summary', { snapshot: 'yes' }), OutOfWindow, 'invalid_params');
  for (const limit of [0, 101, -1, 1.5, '10', long]) {
    add(`history limit ${String(limit).slice(0, 10)}`, () => w.history('status', 'summary', { limit }), OutOfWindow, 'invalid_page');
  }
  for (const cursor of ['../../etc/passwd', 'https://evil.com', long, 'x\r\ny']) {
    add(`history cursor ${cursor.slice(0, 10)}`, () => w.history('status', 'summary', { cursor }), OutOfWindow, 'invalid_page');
  }
  add('diff of unknown snapshots', () => w.diff(unknownId, `snp_${'1'.repeat(32)}`), NotFound, 'snapshot_not_found');

  for (const { label, call, Class, reason } of cases) {
    const error = await rejection(call());
    assertSightError(error, Class, reason, label);
    assert.equal(error.details.refusal, true, label);
    assert.ok(!error.message.includes(token), label);
  }
  assert.equal(server.connections, connectionsBefore, 'every refusal came before any I/O');
  assert.equal(server.requests.length, 1);
  assert.equal(elsewhere.connections, 0);

  // The binding itself refuses ambiguous option objects (source/endpoint are positional).
  await assert.rejects(w.query('status', 'summary', { source: 'other' }), TypeError);
  await assert.rejects(w.history('status', 'summary', { endpoint: 'other' }), TypeError);
  await assert.rejects(w.query('status', 'summary', 'region=us'), TypeError);
  await assert.rejects(w.query('status', 'summary', { signal: 'abort' }), TypeError);

  // A redirect is never followed, wherever it points.
  server.answer((record, res) => {
    res.writeHead(302, { location: `http://127.0.0.1:${elsewhere.port}/steal?token=${token}` });
    res.end();
  });
  const redirected = await rejection(w.query('status', 'summary', { params: { region: 'us' } }));
  assertSightError(redirected, warden.FetchFault, 'redirect_refused', 'redirect');
  assert.equal(redirected.details.refusal, false);
  assert.ok(!redirected.message.includes(String(elsewhere.port)), 'the Location is not surfaced');
  assert.equal(elsewhere.connections, 0, 'the redirect target saw no connection');

  // What the upstream did see: only the confined GETs, never anything the agent chose.
  assert.equal(server.requests.length, 2);
  for (const record of server.requests) assertConfined(record, token, { query: '?region=us' });
  const seen = server.requests.map((r) => `${r.url}\n${r.rawHeaders.join('\n')}\n${r.body}`).join('\n');
  for (const needle of ['evil', 'X-Evil', 'passwd', 'admin', 'steal', '..', long.slice(0, 100)]) {
    assert.ok(!seen.includes(needle), `the upstream saw ${needle.slice(0, 20)}`);
  }
});

// ---- 3. snapshots, history, diff ----------------------------------------------------------

test('snapshots: history newest first with paging, and a diff of what changed', async (t) => {
  const server = await recorder(t);
  const { w } = openSight(t, server.port);
  w.setCredentialProvider(() => 'tok-snapshots');
  const first = await w.query('status', 'summary', { params: { region: 'us' }, snapshot: true });
  assert.match(first.snapshotId, /^snp_[0-9a-f]{32}$/);
  server.state.indicator = 'degraded';
  server.state.count = 4;
  const second = await w.query('status', 'summary', { params: { region: 'us' }, snapshot: true });
  assert.match(second.snapshotId, /^snp_[0-9a-f]{32}$/);
  assert.notEqual(second.snapshotId, first.snapshotId);

  const page1 = await w.history('status', 'summary', { params: { region: 'us' }, limit: 1 });
  assert.equal(page1.source, 'status');
  assert.equal(page1.endpoint, 'summary');
  assert.deepEqual(page1.snapshots.map((s) => s.snapshotId), [second.snapshotId]);
  assert.equal(page1.snapshots[0].values.count, 4);
  assert.deepEqual(page1.snapshots[0].params, { region: 'us' });
  assert.equal(page1.hasMore, true);
  assert.equal(typeof page1.nextCursor, 'string');
  const page2 = await w.history('status', 'summary', { params: { region: 'us' }, limit: 1, cursor: page1.nextCursor });
  assert.deepEqual(page2.snapshots.map((s) => s.snapshotId), [first.snapshotId]);
  assert.equal(page2.hasMore, false);
  assert.equal(page2.nextCursor, undefined);
  const whole = await w.history('status', 'summary');
  assert.deepEqual(whole.snapshots.map((s) => s.snapshotId), [second.snapshotId, first.snapshotId]);

  const diff = await w.diff(first.snapshotId, second.snapshotId);
  assert.equal(diff.a, first.snapshotId);
  assert.equal(diff.b, second.snapshotId);
  assert.equal(diff.source, 'status');
  assert.deepEqual(diff.params, { region: 'us' });
  assert.equal(typeof diff.fetchedAt.a, 'string');
  assert.ok(diff.total >= 2, JSON.stringify(diff));
  assert.equal(diff.omitted, 0);
  const changed = (before, after) => diff.entries.some((e) => e.change === 'changed' && e.before === before && e.after === after);
  assert.ok(changed(3, 4), JSON.stringify(diff.entries));
  assert.ok(changed('operational', 'degraded'), JSON.stringify(diff.entries));
  assert.deepEqual((await w.diff(first.snapshotId, first.snapshotId)).entries, []);

  const missing = await rejection(w.diff(first.snapshotId, `snp_${'f'.repeat(32)}`));
  assertSightError(missing, warden.NotFound, 'snapshot_not_found', 'unknown id');

  const other = await w.query('status', 'summary', { params: { region: 'eu' }, snapshot: true });
  const crossed = await rejection(w.diff(first.snapshotId, other.snapshotId));
  assertSightError(crossed, warden.OutOfWindow, 'invalid_params', 'different windows');
});

// ---- 4. the credential provider's failures ------------------------------------------------

test('a provider with no value, a throw or a rejection fails credential_unavailable and sends nothing', async (t) => {
  const server = await recorder(t);
  const { w } = openSight(t, server.port);
  withEnvToken(t, undefined);
  const providers = {
    'null': () => null,
    'undefined': () => undefined,
    'a Promise of null': async () => null,
    'a throw': () => {
      throw new Error('vault is down');
    },
    'a thrown non-error': () => {
      throw Symbol('odd');
    },
    'a rejection': async () => {
      throw new Error('vault is down');
    },
    'a rejected non-error': () => Promise.reject(undefined),
    'a number': () => 42,
    'an object': () => ({ token: 'x' }),
    'a thenable that throws': () => ({
      then() {
        throw new Error('broken thenable');
      },
    }),
    'an empty string': () => '',
    'a value with CR/LF': () => 'tok\r\nX-Evil: 1',
  };
  for (const [label, provider] of Object.entries(providers)) {
    w.setCredentialProvider(provider);
    const error = await rejection(w.query('status', 'summary'));
    assertSightError(error, warden.FetchFault, 'credential_unavailable', label);
  }
  w.setCredentialProvider(null);
  const none = await rejection(w.query('status', 'summary'));
  assertSightError(none, warden.FetchFault, 'credential_unavailable', 'no provider, no variable');
  assert.equal(server.connections, 0, 'no request without a credential');
});

// ---- 5. cancellation ----------------------------------------------------------------------

test('aborting a query whose upstream stalls rejects with reason aborted', async (t) => {
  const server = await recorder(t);
  const { w } = openSight(t, server.port);
  w.setCredentialProvider(() => 'tok-cancel');
  let stalled = null;
  server.answer((record, res) => {
    stalled = res; // never answered
  });
  const controller = new AbortController();
  const received = server.nextRequest();
  const query = w.query('status', 'summary', { snapshot: true, signal: controller.signal });
  await received; // the handshake: the request reached the server
  controller.abort();
  const error = await rejection(query);
  assertSightError(error, warden.FetchFault, 'aborted', 'stalled upstream');
  assert.equal(error.details.refusal, false);
  // Let the native call end now rather than at timeout_ms.
  stalled.socket.destroy();
});

test('aborting while the credential provider is pending rejects with reason aborted and sends nothing', async (t) => {
  const server = await recorder(t);
  const { w } = openSight(t, server.port);
  let asked;
  const providerAsked = new Promise((resolve) => {
    asked = resolve;
  });
  w.setCredentialProvider(() => {
    asked();
    return new Promise(() => {}); // never settles
  });
  const controller = new AbortController();
  const query = w.query('status', 'summary', { signal: controller.signal });
  await providerAsked;
  controller.abort();
  assertSightError(await rejection(query), warden.FetchFault, 'aborted', 'pending provider');

  // An already aborted signal never starts the query.
  const error = await rejection(w.query('status', 'summary', { signal: AbortSignal.abort() }));
  assertSightError(error, warden.FetchFault, 'aborted', 'aborted before');
  // The pool thread was released: the next query runs normally.
  w.setCredentialProvider(() => 'tok-after');
  assert.equal((await w.query('status', 'summary')).values.count, 3);
  assert.equal(server.requests.length, 1);
});

/**
 * The child of the test below: 8 aborted queries (each waits for its request to reach the
 * server, aborts, and waits for the server to see the connection closed), a protected call,
 * close(), then nothing: the process must end by itself.
 */
const ABORTED_QUERIES_CHILD = `
'use strict';
const assert = require('node:assert/strict');
const warden = require(process.env.WARDEN_BINDING);
const messages = [];
let waiting = null;
process.on('message', (message) => {
  if (waiting) {
    const resolve = waiting;
    waiting = null;
    resolve(message);
  } else {
    messages.push(message);
  }
});
const next = () => (messages.length > 0 ? Promise.resolve(messages.shift()) : new Promise((resolve) => { waiting = resolve; }));
(async () => {
  const w = new warden.Warden({ store: process.env.WARDEN_STORE, config: process.env.WARDEN_CONFIG });
  w.setCredentialProvider(() => 'tok-silent');
  for (let i = 0; i < 8; i += 1) {
    const controller = new AbortController();
    const query = w.query('status', 'summary', { signal: controller.signal }).then(
      () => null,
      (error) => error,
    );
    assert.equal(await next(), 'received');
    controller.abort();
    const error = await query;
    assert.equal(error && error.reason, 'aborted', String(error));
    process.send({ aborted: i + 1 });
    // The parent answers once the server saw this connection closed by this process.
    assert.equal(await next(), 'hung-up');
  }
  const write = w.protect('ledger.write', () => 'ran');
  const result = await warden.withContext({ agent: 'support-agent', user: 'ada' }, () => write({ entry: 'after-aborts' }));
  process.send({ protected: result });
  w.close();
  process.send({ closed: true });
  process.disconnect();
})().catch((error) => {
  console.error(error);
  process.exitCode = 1;
  process.disconnect();
});
`;

test(
  'aborted queries against a silent server release their threads: a protected call, close() and the process exit all complete',
  { timeout: 45_000 },
  async (t) => {
    // The server accepts and never answers. The source's timeout_ms is a minute, longer than
    // this test's timeout: only a prompt cancel lets the child get past four aborted queries
    // (libuv has four worker threads), run its protected call and exit.
    const sockets = [];
    let child = null;
    const silent = net.createServer((socket) => {
      sockets.push(socket);
      socket.once('data', () => child && child.send('received'));
      socket.on('error', () => {});
      // The server never closes a socket: a close is the client shutting the connection down.
      socket.once('close', () => child && child.connected && child.send('hung-up'));
    });
    await new Promise((resolve) => silent.listen(0, '127.0.0.1', resolve));
    t.after(
      () =>
        new Promise((resolve) => {
          for (const socket of sockets) socket.destroy();
          silent.close(() => resolve());
        }),
    );
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'warden-abort-'));
    t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
    const config = path.join(dir, 'warden.yaml');
    fs.writeFileSync(
      config,
      `schema: warden/v1
actions:
  ledger.write:
    effect: "ledger:{entry}"
    decision: allow
sources:
  - id: status
    base_url: http://127.0.0.1:${silent.address().port}/v2
    auth: { mode: bearer, credential: ${REFERENCE} }
    timeout_ms: 60000
    endpoints:
      - id: summary
        path: /summary
        fields:
          state: /status/indicator
`,
    );
    child = spawn(process.execPath, ['-e', ABORTED_QUERIES_CHILD], {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      env: {
        ...process.env,
        WARDEN_BINDING: path.resolve(__dirname, '..'),
        WARDEN_STORE: path.join(dir, 'state.redb'),
        WARDEN_CONFIG: config,
      },
    });
    t.after(() => {
      if (child.exitCode === null && child.signalCode === null) child.kill();
    });
    const events = [];
    child.on('message', (message) => events.push(message));
    const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
    const { code, signal } = await exited;
    assert.deepEqual({ code, signal }, { code: 0, signal: null }, 'the child finished by itself');
    // Ordering: eight aborts, then the protected call, then close().
    assert.deepEqual(events, [
      ...Array.from({ length: 8 }, (_, i) => ({ aborted: i + 1 })),
      { protected: 'ran' },
      { closed: true },
    ]);
    assert.equal(sockets.length, 8, 'each query reached the silent server, one at a time');
  },
);

// ---- 6. the tool schema and the catalog ---------------------------------------------------

test('callTool: the library dispatches an LLM tool call and confines it before any I/O', async (t) => {
  const rec = await recorder(t);
  const { w } = openSight(t, rec.port);
  assert.deepEqual(await w.callTool('warden_sources'), w.sources());
  assertSightError(await rejection(w.callTool('warden_sources', { url: 'https://evil.com' })), warden.OutOfWindow, 'invalid_params');
  assertSightError(
    await rejection(w.callTool('warden_query', { source: 'status', endpoint: 'summary', url: 'https://evil.com' })),
    warden.OutOfWindow,
    'invalid_params',
  );
  await assert.rejects(w.callTool('warden_fetch', { url: 'https://evil.com' }), warden.InvalidInput);
  assert.equal(rec.requests.length, 0, 'nothing was sent');
});

test('toolSchema: four tools and no way to name a URL, host, header or credential', (t) => {
  const { w } = openSight(t, 1);
  const tools = w.toolSchema();
  assert.deepEqual(tools.map((tool) => tool.name).sort(), ['warden_diff', 'warden_history', 'warden_query', 'warden_sources']);
  const forbidden = new Set(['url', 'host', 'port', 'protocol', 'path', 'method', 'headers', 'credentials', 'base_url']);
  let walked = 0;
  const walk = (node, where) => {
    if (Array.isArray(node)) {
      node.forEach((item, i) => walk(item, `${where}[${i}]`));
      return;
    }
    if (node === null || typeof node !== 'object') return;
    walked += 1;
    if (node.properties && typeof node.properties === 'object') {
      for (const name of Object.keys(node.properties)) {
        assert.ok(!forbidden.has(name.toLowerCase()), `${where} has a property ${name}`);
      }
    }
    for (const [key, value] of Object.entries(node)) walk(value, `${where}.${key}`);
  };
  for (const tool of tools) {
    assert.equal(typeof tool.description, 'string');
    assert.equal(tool.input_schema.type, 'object');
    assert.equal(tool.input_schema.additionalProperties, false, tool.name);
    walk(tool.input_schema, tool.name);
  }
  assert.ok(walked > 4);

  const catalog = w.sources();
  assert.equal(typeof catalog.note, 'string');
  assert.deepEqual(catalog.sources.map((s) => s.id), ['status']);
  const endpoint = catalog.sources[0].endpoints[0];
  assert.equal(endpoint.id, 'summary');
  assert.deepEqual([...endpoint.fields].sort(), ['count', 'secrets', 'state']);
  assert.deepEqual(endpoint.params.map((p) => p.name), ['region', 'limit']);
  const text = JSON.stringify(catalog);
  for (const hidden of ['127.0.0.1', '/v2', REFERENCE, 'bearer', '/status/indicator']) {
    assert.ok(!text.includes(hidden), `the catalog shows ${hidden}`);
  }
});

test('a closed Warden refuses sight calls; a provider does not keep the process alive', async (t) => {
  const { w } = openSight(t, 1);
  w.setCredentialProvider(() => 'x');
  w.close();
  await assert.rejects(w.query('status', 'summary'), (e) => e instanceof warden.InvalidInput && /closed/.test(e.message));
  await assert.rejects(w.history('status', 'summary'), warden.InvalidInput);
  await assert.rejects(w.diff('a', 'b'), warden.InvalidInput);
  assert.throws(() => w.sources(), warden.InvalidInput);
  assert.throws(() => w.toolSchema(), warden.InvalidInput);
  assert.throws(() => w.setCredentialProvider(() => 'y'), warden.InvalidInput);

  // A child that registers a provider and never closes its Warden still exits by itself.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'warden-sight-exit-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  fs.writeFileSync(path.join(dir, 'warden.yaml'), sightConfig(1));
  const script = `
    const { Warden } = require(${JSON.stringify(path.resolve(__dirname, '..'))});
    const w = new Warden({ store: ${JSON.stringify(path.join(dir, 'state.redb'))}, config: ${JSON.stringify(path.join(dir, 'warden.yaml'))} });
    w.setCredentialProvider(async () => 'tok');
    w.setCredentialProvider(() => 'tok2');
    console.log('registered');
  `;
  const child = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 20_000 });
  assert.equal(child.signal, null, 'the child exited by itself');
  assert.equal(child.status, 0, child.stderr);
  assert.equal(child.stdout.trim(), 'registered');
});

// ---- 7. the credential never lands anywhere -----------------------------------------------

test('the token appears in no result, error, snapshot or store byte', async (t) => {
  const server = await recorder(t);
  const { w, store } = openSight(t, server.port);
  const token = newToken();
  w.setCredentialProvider(() => token);
  const seen = [];
  for (const region of ['eu', 'us']) seen.push(await w.query('status', 'summary', { params: { region }, snapshot: true }));
  // The upstream echoes the token everywhere it can: in values, in an error body, in bad JSON.
  server.state.body = JSON.stringify({ status: { indicator: token }, count: `Bearer ${token}`, debug: [token, { deeper: `x${token}y` }] });
  seen.push(await w.query('status', 'summary', { snapshot: true }));
  server.answer((record, res) => {
    res.writeHead(500, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: `bad token ${record.headers.authorization}` }));
  });
  seen.push(await rejection(w.query('status', 'summary', { snapshot: true })));
  server.answer((record, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(`{"broken": "${token}`);
  });
  seen.push(await rejection(w.query('status', 'summary', { snapshot: true })));
  seen.push(await w.history('status', 'summary', { limit: 100 }));
  assert.equal(seen[2].values.state, '[REDACTED]');
  assert.equal(seen[3].reason, 'upstream_error');
  const [a, b] = [seen[0].snapshotId, seen[2].snapshotId];
  seen.push(await w.diff(a, b));
  const text = seen
    .map((item) => (item instanceof Error ? `${item.message} ${JSON.stringify(item.details)}` : warden.stringifyJson(item)))
    .join('\n');
  assert.ok(!text.includes(token), 'the token is in a result or error');

  w.close();
  const bytes = fs.readFileSync(store);
  assert.ok(bytes.length > 0);
  const encodings = [
    token,
    Buffer.from(token).toString('base64'),
    Buffer.from(token).toString('base64url'),
    Buffer.from(`Bearer ${token}`).toString('base64'),
    Buffer.from(token).toString('hex'),
  ];
  for (const encoded of encodings) {
    assert.equal(bytes.indexOf(Buffer.from(encoded)), -1, `the store holds ${encoded.slice(0, 12)}…`);
  }
  // A base64 of the token at any alignment shares this core with one of the three shifts.
  for (const shift of ['', 'x', 'xy']) {
    const core = Buffer.from(shift + token).toString('base64').slice(4, -4);
    assert.equal(bytes.indexOf(Buffer.from(core)), -1, 'the store holds a base64 of the token');
  }
});
