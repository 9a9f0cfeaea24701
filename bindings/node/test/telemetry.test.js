'use strict';
// OpenTelemetry through the real SDK: one `execute_tool` span per protected call, a child of the
// caller's span and the parent of the protected function's own spans, named and attributed from
// the library's record; its measurements in the SDK's metric reader; nothing without an SDK.
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');

const warden = require('..');
const { open, scratch, ada } = require('./helpers');

let otel;
try {
  otel = {
    api: require('@opentelemetry/api'),
    trace: require('@opentelemetry/sdk-trace-base'),
    metrics: require('@opentelemetry/sdk-metrics'),
    hooks: require('@opentelemetry/context-async-hooks'),
  };
} catch {
  otel = null;
}
const skip = otel ? false : 'the OpenTelemetry packages are not installed (npm install, as run-tests.sh does)';

if (otel) {
  otel.api.context.setGlobalContextManager(new otel.hooks.AsyncLocalStorageContextManager().enable());
}

/** A reader the test collects from when it wants to. */
function reader() {
  return new (class extends otel.metrics.MetricReader {
    async onForceFlush() {}
    async onShutdown() {}
  })();
}

/** A tracer provider exporting to memory and a meter provider read on demand. */
function sdk() {
  const exporter = new otel.trace.InMemorySpanExporter();
  const tracerProvider = new otel.trace.BasicTracerProvider({
    spanProcessors: [new otel.trace.SimpleSpanProcessor(exporter)],
  });
  const metricReader = reader();
  const meterProvider = new otel.metrics.MeterProvider({ readers: [metricReader] });
  const tracer = tracerProvider.getTracer('app');
  const spans = (name) => exporter.getFinishedSpans().filter((s) => name === undefined || s.name === name);
  const points = async (metric) => {
    const { resourceMetrics } = await metricReader.collect();
    return resourceMetrics.scopeMetrics.flatMap((scope) =>
      scope.metrics.filter((m) => m.descriptor.name === metric).flatMap((m) => m.dataPoints),
    );
  };
  return { tracerProvider, meterProvider, tracer, spans, points, reader: metricReader };
}

function traced(t, s, options = {}) {
  const { store, config } = scratch(t);
  const w = new warden.Warden({
    store,
    config,
    environment: 'test',
    tracerProvider: s.tracerProvider,
    meterProvider: s.meterProvider,
    ...options,
  });
  t.after(() => w.close());
  return w;
}

/** `fn` inside an active span `name` of the app's tracer, ended after. */
function within(s, name, fn) {
  return s.tracer.startActiveSpan(name, async (span) => {
    try {
      return await fn(span);
    } finally {
      span.end();
    }
  });
}

const parentId = (span) => span.parentSpanContext?.spanId;

test('the span is a child of the caller and the parent of the function own calls', { skip }, async (t) => {
  const s = sdk();
  const w = traced(t, s);
  const refund = w.protect('stripe.refund', async ({ payment_id }) =>
    within(s, 'stripe POST /v1/refunds', async () => ({ refund_id: `re_${payment_id}` })),
  );
  const turnTrace = await within(s, 'agent turn', async (turn) => {
    assert.deepEqual(await ada(() => refund({ payment_id: 'pay_1', amount: 1200 })), { refund_id: 're_pay_1' });
    return turn.spanContext();
  });
  const [outbound] = s.spans('stripe POST /v1/refunds');
  const ours = s.spans('execute_tool stripe.refund');
  const [caller] = s.spans('agent turn');
  assert.equal(ours.length, 1);
  const [span] = ours;
  assert.equal(span.kind, otel.api.SpanKind.INTERNAL);
  assert.equal(parentId(span), caller.spanContext().spanId);
  assert.equal(parentId(outbound), span.spanContext().spanId);
  for (const one of [outbound, span, caller]) assert.equal(one.spanContext().traceId, turnTrace.traceId);
  assert.equal(span.status.code, otel.api.SpanStatusCode.UNSET);
  const a = span.attributes;
  assert.equal(a['gen_ai.operation.name'], 'execute_tool');
  assert.equal(a['gen_ai.tool.name'], 'stripe.refund');
  assert.equal(a['warden.decision'], 'allow');
  assert.equal(a['warden.effect.key'], 'refund:pay_1');
  assert.equal(a['warden.effect.state'], 'committed');
  assert.equal(a['warden.effect.attempt'], 1);
  assert.equal(a['warden.outcome'], 'committed');
  assert.equal(a['error.type'], undefined);
  assert.equal(a['gen_ai.tool.call.arguments'], undefined);
  const [receipt] = await w.receipts();
  assert.equal(a['warden.receipt.id'], receipt.receipt_id);
  assert.equal(a['warden.receipt.hash'], receipt.hash);
  assert.equal(a['gen_ai.tool.call.id'], receipt.action_id);
  assert.equal(a['warden.receipt.seq'], receipt.seq);
  assert.equal(a['warden.policy.hash'], receipt.policy_hash);
  assert.equal(a['warden.policy.version'], receipt.policy_version);
  assert.equal(a['warden.action.hash'], receipt.action_hash);
  assert.equal(a['warden.decision.reason'], receipt.decision_reason);
  assert.equal(a['warden.rule'], 'rule[0]');
  assert.equal(a['warden.outcomes'], 'durable');
  assert.equal(receipt.traceparent, `00-${turnTrace.traceId}-${caller.spanContext().spanId}-01`);
  assert.deepEqual(
    span.events.map((e) => [e.name, e.attributes['gen_ai.guardrail.result.value'], e.attributes['gen_ai.guardrail.policy.id']]),
    [['gen_ai.guardrail.result', 'allow', receipt.policy_hash]],
  );
});

test('a refusal is an error span with its type and no child', { skip }, async (t) => {
  const s = sdk();
  const w = traced(t, s);
  const refund = w.protect('stripe.refund', async () => within(s, 'stripe POST /v1/refunds', async () => 'ok'));
  const errors = await within(s, 'agent turn', async () => [
    await ada(() => refund({ payment_id: 'pay_big', amount: 900000 })).catch((e) => e),
    await ada(() => refund({ payment_id: 'pay_mid', amount: 90000 })).catch((e) => e),
  ]);
  assert.ok(errors[0] instanceof warden.Denied && errors[1] instanceof warden.ApprovalRequired);
  assert.equal(s.spans('stripe POST /v1/refunds').length, 0);
  const [caller] = s.spans('agent turn');
  const ours = s.spans('execute_tool stripe.refund');
  assert.deepEqual(ours.map((span) => span.attributes['error.type']), ['denied', 'approval_required']);
  ours.forEach((span, i) => {
    assert.equal(span.status.code, otel.api.SpanStatusCode.ERROR);
    assert.equal(span.status.message, errors[i].message);
    assert.equal(parentId(span), caller.spanContext().spanId);
  });
  assert.equal(ours[1].attributes['warden.approval.id'], errors[1].requestId);
});

for (const [outcomes, named] of [[undefined, 'durable'], ['durable', 'durable'], ['deferred', 'deferred']]) {
  test(`the span names the outcome mode (${outcomes ?? 'default'})`, { skip }, async (t) => {
    const s = sdk();
    const w = traced(t, s, outcomes ? { outcomes } : {});
    const refund = w.protect('stripe.refund', async () => 'ok');
    await ada(() => refund({ payment_id: 'pay_1', amount: 1200 }));
    await w.flush();
    const [span] = s.spans('execute_tool stripe.refund');
    assert.deepEqual([span.attributes['warden.outcomes'], span.attributes['warden.outcome']], [named, 'committed']);
  });
}

test('a wait for a human is one span naming the approval and its wait', { skip }, async (t) => {
  const s = sdk();
  const w = traced(t, s);
  const refund = w.protect('stripe.refund', async () => 'refunded', { waitMs: 60_000 });
  const [callerId, granted] = await within(s, 'agent turn', async (turn) => {
    const call = ada(() => refund({ payment_id: 'pay_w', amount: 90000 }));
    let request;
    while (!request) [request] = await w.pending();
    await w.approve(request.approval_id, { by: 'ops:bob' });
    assert.equal(await call, 'refunded');
    return [turn.spanContext().spanId, request.approval_id];
  });
  const ours = s.spans('execute_tool stripe.refund');
  assert.equal(ours.length, 1, 'one span for the wait and the call');
  const [span] = ours;
  assert.equal(parentId(span), callerId);
  const a = span.attributes;
  assert.equal(a['warden.approval.id'], granted);
  assert.equal(a['warden.outcome'], 'committed');
  assert.equal(a['warden.decision'], 'approve');
  assert.equal(a['error.type'], undefined);
  const took = span.duration[0] + span.duration[1] / 1e9;
  for (const key of ['warden.approval.wait_time', 'warden.approval.decision_time']) {
    assert.ok(typeof a[key] === 'number' && a[key] >= 0 && a[key] <= took, `${key}: ${a[key]} of ${took}`);
  }
  assert.deepEqual(
    span.events.filter((e) => e.name === 'gen_ai.guardrail.result').map((e) => e.attributes['gen_ai.guardrail.result.value']),
    ['approve', 'approve'],
    'the request, then the proposal that spent the grant',
  );
  const spent = (await w.receipts()).filter((r) => r.approval_id === granted && r.result === 'committed');
  assert.deepEqual(spent.map((r) => r.receipt_id), [a['warden.receipt.id']]);
  const decided = await s.points('warden.approval.decision.duration');
  assert.deepEqual(decided.map((p) => p.value.count), [1]);
});

test('by default no argument, result or host message reaches a span or a measurement', { skip }, async (t) => {
  const s = sdk();
  const w = traced(t, s);
  const secrets = ['Bearer tok-3c9a1f7e5b2d8064', 'ak-7c1e55a2b3d94f60', 'st-9f8e7d6c5b4a3210', '4000-0000-0000-0002'];
  const write = w.protect('ledger.write', async ({ entry, api_key }) => {
    if (entry === 'e_declined') throw new warden.NotExecuted(`rejected ${secrets[3]}`);
    if (entry === 'e_lost') throw new Error(`lost with ${api_key}`);
    return { entry, session_token: secrets[2] };
  });
  await within(s, 'agent turn', async () => {
    for (const entry of ['e_1', 'e_declined', 'e_lost']) {
      await ada(() => write({ entry, note: `your code is ${secrets[0]}`, api_key: secrets[1] })).catch(() => null);
    }
  });
  const ours = s.spans('execute_tool ledger.write');
  assert.deepEqual(ours.map((span) => span.attributes['warden.outcome']), ['committed', 'failed', 'ambiguous']);
  const seen = [
    ...ours.map((span) => span.attributes),
    ...ours.map((span) => ({ status: span.status.message })),
    ...ours.flatMap((span) => span.events.map((e) => e.attributes)),
  ];
  const { resourceMetrics } = await s.reader.collect();
  for (const scope of resourceMetrics.scopeMetrics) {
    for (const metric of scope.metrics) seen.push(...metric.dataPoints.map((p) => p.attributes));
  }
  assert.ok(seen.length > 2 * ours.length);
  const text = JSON.stringify(seen);
  for (const secret of [...secrets, 'your code is']) assert.ok(!text.includes(secret), secret);
});

test('exactly one span per call over mixed outcomes, all in the caller trace', { skip }, async (t) => {
  const s = sdk();
  const w = traced(t, s);
  const refund = w.protect('stripe.refund', async ({ payment_id }) => {
    const kind = payment_id.split('_')[1];
    if (kind === 'fail') throw new warden.NotExecuted('declined');
    if (kind === 'boom') throw new Error('lost');
    return payment_id;
  });
  const calls = 300;
  const outcomes = {};
  const runTrace = await within(s, 'agent run', async (run) => {
    for (let n = 0; n < calls; n += 1) {
      const kind = ['ok', 'fail', 'boom', 'dup', 'big', 'mid'][n % 6];
      const payment_id = kind === 'dup' ? 'pay_ok_0' : `pay_${kind}_${n}`;
      const amount = { big: 900000, mid: 90000 }[kind] ?? 100;
      const outcome = await ada(() => refund({ payment_id, amount })).then(
        () => 'committed',
        (e) => e.constructor.name,
      );
      outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
    }
    return run.spanContext().traceId;
  });
  const ours = s.spans('execute_tool stripe.refund');
  assert.equal(ours.length, calls, 'one span per protected call');
  assert.deepEqual([...new Set(ours.map((span) => span.spanContext().traceId))], [runTrace]);
  assert.equal(new Set(ours.map((span) => span.attributes['gen_ai.tool.call.id'])).size, calls);
  const byOutcome = {};
  for (const span of ours) byOutcome[span.attributes['warden.outcome']] = (byOutcome[span.attributes['warden.outcome']] ?? 0) + 1;
  assert.deepEqual(byOutcome, { committed: 50, failed: 50, ambiguous: 50, refused: 150 });
  assert.deepEqual(outcomes, { committed: 50, NotExecuted: 50, Error: 50, Duplicate: 50, Denied: 50, ApprovalRequired: 50 });
  const counted = await s.points('warden.actions');
  assert.equal(counted.reduce((sum, p) => sum + p.value, 0), calls);
  assert.equal(
    counted.filter((p) => p.attributes['error.type'] === 'duplicate').reduce((sum, p) => sum + p.value, 0),
    50,
  );
  const durations = await s.points('warden.action.duration');
  assert.equal(durations.reduce((sum, p) => sum + p.value.count, 0), calls);
});

test('with the opt-in the span carries the arguments and result, redacted', { skip }, async (t) => {
  const s = sdk();
  const w = traced(t, s, { telemetry: { arguments: true, results: true } });
  const write = w.protect('ledger.write', async ({ entry }) => ({ entry, session_token: 'st-9f8e7d6c5b4a3210' }));
  await ada(() => write({ entry: 'e1', note: 'paid with Bearer tok-3c9a1f7e5b2d8064', api_key: 'ak-7c1e55a2b3d94f60' }));
  const [span] = s.spans('execute_tool ledger.write');
  assert.deepEqual(JSON.parse(span.attributes['gen_ai.tool.call.arguments']), {
    api_key: '[REDACTED]',
    entry: 'e1',
    note: 'paid with Bearer [REDACTED]',
  });
  assert.deepEqual(JSON.parse(span.attributes['gen_ai.tool.call.result']), { entry: 'e1', session_token: '[REDACTED]' });
});

test('the measurements and gauges reach the metric reader', { skip }, async (t) => {
  const s = sdk();
  const w = traced(t, s);
  assert.deepEqual(w.registerGauges(), ['warden.effects', 'warden.approvals.pending', 'warden.chain.length']);
  const refund = w.protect('stripe.refund', async () => {
    throw new Error('lost');
  });
  for (const payment_id of ['pay_1', 'pay_2']) {
    await assert.rejects(ada(() => refund({ payment_id, amount: 100 })), /lost/);
  }
  await assert.rejects(ada(() => refund({ payment_id: 'pay_3', amount: 90000 })), warden.ApprovalRequired);
  const effects = Object.fromEntries((await s.points('warden.effects')).map((p) => [p.attributes['warden.effect.state'], p.value]));
  assert.deepEqual(effects, { ambiguous: 2, executing: 0, reserved: 0, failed: 0 });
  assert.deepEqual((await s.points('warden.approvals.pending')).map((p) => p.value), [1]);
  assert.deepEqual((await s.points('warden.chain.length')).map((p) => p.value), [(await w.receipts()).length]);
  const writes = Object.fromEntries(
    (await s.points('warden.store.write.duration')).map((p) => [p.attributes['warden.store.write'], p.value.count]),
  );
  assert.deepEqual(writes, { proposal: 3, outcome: 2 });
});

test('without an SDK the library is not asked for a record', { skip }, async (t) => {
  const addon = require(path.join(__dirname, '..', 'native', 'warden.node'));
  const Real = addon.Trace;
  addon.Trace = function made() {
    throw new Error('a trace was made with no SDK configured');
  };
  t.after(() => {
    addon.Trace = Real;
  });
  assert.notEqual(addon.Trace, Real, 'the addon export can be replaced for this test');
  const { w } = open(t);
  const refund = w.protect('stripe.refund', async ({ payment_id }) => payment_id);
  assert.equal(await ada(() => refund({ payment_id: 'pay_1', amount: 1 })), 'pay_1');
  await assert.rejects(ada(() => refund({ payment_id: 'pay_1', amount: 1 })), warden.Duplicate);
  const [receipt] = await w.receipts({ limit: 1 });
  assert.equal(receipt.traceparent, undefined);
});
