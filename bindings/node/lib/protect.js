'use strict';
// A protected call: `Warden.protect` wraps a function so each call is proposed (the library
// reconciling, waiting for an approval and asking the precondition as the options say), runs
// at most once per effect key under its permit, and records exactly one outcome.

const util = require('node:util');

const json = require('./json');
const telemetry = require('./telemetry');
const { InvalidInput, NotExecuted } = require('./errors');
const { native, invoke, dumps } = require('./native');
const { requireString, signalOption } = require('./checks');
const { callerScope, protectedScope } = require('./context');

/**
 * The function `Warden.protect(name, fn, options)` returns, for the store `handle` and the
 * handle's `tracing` (see `Warden.protect`).
 */
function protectedFunction(handle, tracing, name, fn, { reconcile, leaseMs, waitMs, precondition } = {}) {
  requireString('the action name', name);
  if (typeof fn !== 'function') throw new TypeError('protect(name, fn): fn must be a function');
  if (reconcile !== undefined && typeof reconcile !== 'function') throw new TypeError('reconcile must be a function');
  if (leaseMs !== undefined && (!Number.isSafeInteger(leaseMs) || leaseMs <= 0)) {
    throw new TypeError('leaseMs must be a positive integer');
  }
  if (waitMs !== undefined && (typeof waitMs !== 'number' || !(waitMs >= 0))) {
    throw new TypeError('waitMs must be a non-negative number');
  }
  if (precondition !== undefined && typeof precondition !== 'function') {
    throw new TypeError('precondition must be a function');
  }
  const protectedCall = async (args = {}, { signal } = {}) => {
    if (args === null || typeof args !== 'object' || Array.isArray(args)) {
      throw new TypeError(`${name}: a protected function takes one object of arguments`);
    }
    signalOption(name, signal);
    signal?.throwIfAborted();
    const caller = callerScope.getStore() ?? {};
    const request = {
      name,
      arguments: args,
      principal: caller.principal ?? null,
      approval_id: caller.approvalId ?? null,
      lease_ms: leaseMs ?? null,
      resource: null,
      principal_expires_at_ms: null,
      task: caller.task ?? null,
      hop: caller.hop ?? null,
    };
    // With an OpenTelemetry SDK: the caller's trace context (for the receipts) and a trace.
    const call = tracing.begin();
    let trace;
    if (call) {
      request.traceparent = call.traceparent();
      trace = new native.Trace();
    }
    let permit;
    try {
      permit = await proposeRecovering(handle, request, { reconcile, waitMs, precondition }, trace);
    } catch (error) {
      if (call) telemetry.refused(call, trace);
      throw error;
    }
    const traced = call ? new telemetry.Traced(call, trace) : null;
    if (signal?.aborted) {
      // The caller left while the proposal was on its way and the function has not run: the
      // library records NOT_EXECUTED (FAILED, a retry may run), never AMBIGUOUS.
      await invoke(() => permit.cancel()).catch(() => {});
      permit.release();
      traced?.end();
      signal.throwIfAborted();
    }
    return runPermitted(permit, fn, traced);
  };
  Object.defineProperty(protectedCall, 'name', { value: fn.name || name });
  return protectedCall;
}

/** The message an AMBIGUOUS or FAILED outcome records for a thrown value. */
function messageOf(thrown) {
  let text;
  try {
    if (thrown instanceof Error) text = thrown.message ? `${thrown.name}: ${thrown.message}` : thrown.name;
    else text = `thrown: ${util.inspect(thrown, { depth: 1 })}`;
  } catch {
    text = 'thrown: a value with no text';
  }
  // The library cuts a long message to its own bound (limits.max_message_bytes) and marks it.
  return text;
}

/**
 * Commit a result: the library is handed its JSON, or (a value with no JSON form) its
 * util.inspect text, and stores either by its own rule, never refusing a success. A large
 * value is written in steps between turns of the event loop, and comes back as Buffers that
 * the addon joins on the thread pool (a 50 MB result never holds the loop for its whole length).
 */
async function commitResult(permit, value) {
  let encoded;
  try {
    encoded = await json.stringifyInSteps(value === undefined ? null : value);
  } catch {
    return invoke(() => permit.commitText(inspectText(value)));
  }
  return invoke(() => (typeof encoded === 'string' ? permit.commit(encoded) : permit.commitPieces(encoded)));
}

/** Whether a thrown value is a NotExecuted, never throwing itself (a Proxy's trap may). */
function isNotExecuted(thrown) {
  try {
    return thrown instanceof NotExecuted;
  } catch {
    return false;
  }
}

/** The text form of a result with no JSON form. */
function inspectText(value) {
  try {
    return util.inspect(value, { depth: 2, breakLength: Infinity });
  } catch (error) {
    return `<a value whose inspection threw ${error?.name ?? 'an error'}>`;
  }
}

/**
 * One `warden_propose_recovering` call: the library proposes, asks `reconcile` once on
 * AMBIGUOUS, waits `waitMs` for an approval's answer and presents it, and asks `precondition`
 * when an approval is involved. Each hook runs here, on the event loop, while the proposal
 * waits on its pool thread; what a hook throws is what the call rejects with.
 */
async function proposeRecovering(handle, request, { reconcile, waitMs, precondition }, trace) {
  const thrown = [];
  const bridge = (hook, read, answerText) => (question, reply) => {
    Promise.resolve()
      .then(() => hook(read(question)))
      .then((answer) => reply.settle(answerText(answer)))
      .catch((error) => {
        thrown.push(error);
        reply.settle(null);
      });
  };
  const text = dumps(request, `the ${request.name} request`);
  // The library takes any wait; a JavaScript number beyond 2^53 ms (or Infinity) is 2^53 - 1.
  const wait = waitMs > 0 ? Math.min(Math.ceil(waitMs), Number.MAX_SAFE_INTEGER) : 0;
  const asked = precondition
    ? bridge(precondition, json.parse, (state) => dumps(state, 'the precondition state'))
    : undefined;
  const answered = reconcile ? bridge(reconcile, (key) => key, (answer) => String(answer)) : undefined;
  try {
    return await invoke(() => handle.propose(text, wait, asked, answered, trace));
  } catch (error) {
    if (thrown.length > 0 && error instanceof InvalidInput) throw thrown[0];
    throw error;
  }
}

/** Run `fn` under a permit (and its span, when traced) and report exactly one outcome. */
async function runPermitted(permit, fn, traced) {
  const info = json.parse(permit.info);
  const call = { permit, info };
  const run = () => fn(info.arguments);
  try {
    let result;
    try {
      result = await protectedScope.run(call, () => (traced ? traced.run(run) : run()));
    } catch (error) {
      // NotExecuted: the remote side provably did nothing. If even an outcome cannot be
      // recorded, the release below records AMBIGUOUS, and the caller still gets its error.
      // The thrown value goes back unchanged whatever it is: nothing here may throw instead.
      const report = isNotExecuted(error) ? permit.notExecuted : permit.ambiguous;
      await invoke(() => report.call(permit, messageOf(error))).catch(() => {});
      throw error;
    }
    // It ran: COMMITTED, whatever the result is (the library stores it, as itself or marked).
    await commitResult(permit, result);
    return result;
  } finally {
    permit.release();
    // The outcome is recorded (or, released without one, AMBIGUOUS): the span ends with it.
    traced?.end();
  }
}

module.exports = { protectedFunction };
