'use strict';
// Warden for Node: at-most-once effects for AI agents, in process.
//
// A thin layer over the native addon (native/warden.node), which calls only the warden_* C
// functions of libwarden.so. Everything that touches the store runs off the event loop as
// N-API async work and returns a Promise. JSON crossing the boundary keeps every integer
// exact: beyond 2^53 it is a BigInt. Sights (query, history, diff) are confined reads of the
// HTTP windows the configuration names; the agent only ever names a window, never a URL.

const path = require('node:path');
const util = require('node:util');
const { AsyncLocalStorage } = require('node:async_hooks');

const json = require('./lib/json');
const errors = require('./lib/errors');
const evidence = require('./lib/evidence');
const telemetry = require('./lib/telemetry');

const { WardenError, AbiMismatch, InvalidInput, NotExecuted, fromObject } = errors;

/** The C ABI version this binding is written against. */
const ABI_VERSION = 1;

/** This package's version: the same as the library's and the CLI's (`warden --version --json`). */
const { version } = require('./package.json');

const native = loadNative();

function loadNative() {
  const file = path.join(__dirname, 'native', 'warden.node');
  let addon;
  try {
    addon = require(file);
  } catch (error) {
    throw new AbiMismatch(
      `cannot load the Warden addon ${file} (${error.message}); build it with \`node scripts/build.js\` in ${__dirname} (npm install does this)`,
    );
  }
  const found = addon.abiVersion();
  if (found !== ABI_VERSION) {
    throw new AbiMismatch(
      `libwarden implements ABI version ${found}, and this binding was built for version ${ABI_VERSION}; rebuild it with \`node scripts/build.js\``,
    );
  }
  return addon;
}

/**
 * A native failure is a structured error: `code` is the C constant's name and `fields` the
 * library's error object; make it the matching WardenError.
 */
function translate(error) {
  if (error instanceof WardenError || error === null || typeof error !== 'object') return error;
  const { code, fields } = error;
  if (typeof code !== 'string' || !code.startsWith('WARDEN_RESULT_') || fields === null || typeof fields !== 'object') {
    return error;
  }
  return fromObject(fields);
}

/** Run a native call (sync or returning a Promise), throwing WardenErrors. */
async function invoke(call) {
  try {
    return await call();
  } catch (error) {
    throw translate(error);
  }
}

/** JSON text for the library; a value that cannot be JSON is InvalidInput, as in Python. */
function dumps(value, what) {
  try {
    return json.stringify(value);
  } catch (error) {
    throw new InvalidInput(`${what} cannot be sent to Warden as JSON: ${error.message}`);
  }
}

function invokeSync(call) {
  try {
    return call();
  } catch (error) {
    throw translate(error);
  }
}

// ---- authority helpers ---------------------------------------------------------------------------

function principalOf(what, value) {
  if (value === null || typeof value !== 'object' || typeof value.agent !== 'string') {
    throw new TypeError(`${what} must be {agent, user}`);
  }
  return { agent: value.agent, user: value.user ?? null };
}

// Who revokes, as the one-line name the store records: "agent" or "agent/user".
function revokerOf(by) {
  if (by === undefined || by === null) return null;
  if (typeof by === 'string') return by;
  const principal = principalOf('by', by);
  return principal.user === null ? principal.agent : `${principal.agent}/${principal.user}`;
}

// ---- context: who is asking, and which approval they present --------------------------------

const callerScope = new AsyncLocalStorage();
const protectedScope = new AsyncLocalStorage();

function requireString(what, value) {
  if (typeof value !== 'string' || value === '') throw new TypeError(`${what} must be a non-empty string`);
  return value;
}

/** `requireString`, letting undefined and null through. */
function optionalString(what, value) {
  if (value !== undefined && value !== null) requireString(what, value);
}

/**
 * Run `fn` with the principal {agent, user}. Every protected call made inside it, however deep
 * in async code, proposes as this principal; concurrent calls each see their own. `task` names
 * the unit of work (grants naming `tasks` need a matching one); `hop` is a delegation id
 * ("dlg_…") another agent handed over, then the only grant the calls are judged against. Both
 * belong to this context: an inner `withContext` starts without them.
 */
function withContext({ agent, user = null, task = null, hop = null } = {}, fn) {
  requireString('agent', agent);
  optionalString('user', user);
  optionalString('task', task);
  optionalString('hop', hop);
  if (typeof fn !== 'function') throw new TypeError('withContext(principal, fn): fn must be a function');
  const outer = callerScope.getStore() ?? {};
  return callerScope.run(
    { ...outer, principal: { agent, user: user ?? null }, task: task ?? null, hop: hop ?? null },
    fn,
  );
}

/** Run `fn` presenting the approval `id` ("apr_…") to every protected call inside it. */
function withApproval(id, fn) {
  requireString('the approval id', id);
  if (typeof fn !== 'function') throw new TypeError('withApproval(id, fn): fn must be a function');
  const outer = callerScope.getStore() ?? {};
  return callerScope.run({ ...outer, approvalId: id }, fn);
}

function currentCall(what) {
  const call = protectedScope.getStore();
  if (!call) throw new InvalidInput(`${what} is only available inside a protected call`);
  return call;
}

/**
 * The provider idempotency token of the attempt the current protected call is running. Throws
 * InvalidInput outside a protected call, or when the action has no effect key.
 */
function idempotencyToken() {
  const token = currentCall('idempotencyToken()').info.idempotency_token;
  if (typeof token !== 'string') {
    throw new InvalidInput('this action has no effect key, so its attempt has no idempotency token');
  }
  return token;
}

/** Extend the current protected call's lease to `ms` from now; resolves to the new expiry. */
async function extendLease(ms) {
  const call = currentCall('extendLease()');
  if (!Number.isSafeInteger(ms) || ms <= 0) throw new TypeError('extendLease(ms): ms must be a positive integer');
  const info = json.parse(await invoke(() => call.permit.extendLease(ms)));
  call.info = { ...call.info, lease_expires_at: info.lease_expires_at };
  return info.lease_expires_at ?? null;
}

// ---- pure functions ---------------------------------------------------------------------------

/** The canonical JSON text of `value` (sorted keys, no spaces, exact integers; floats refused). */
function canonical(value) {
  const text = dumps(value, 'canonical(value)');
  return invokeSync(() => native.canonical(text));
}

/** The action hash ("sha256:…") of {name, arguments, principal, resource, environment}. */
function actionHash({ name, arguments: args = {}, principal = null, resource = null, environment } = {}) {
  const action = { name, arguments: args, principal, resource };
  if (environment !== undefined) action.environment = environment;
  const text = dumps(action, 'actionHash(action)');
  return invokeSync(() => native.actionHash(text));
}

// ---- the handle -------------------------------------------------------------------------------

/**
 * The library's defaults (`warden_defaults`): list calls return at most `list_limit` records
 * unless asked (0: no limit), from `from_seq` / `after_id`. Never restated here.
 */
const DEFAULTS = Object.freeze(json.parse(native.defaults()));

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

function optionalCount(what, value, fallback) {
  if (value === undefined || value === null) return fallback;
  if (!Number.isSafeInteger(value) || value < 0) throw new TypeError(`${what} must be a non-negative integer`);
  return value;
}

/** `optionalCount` with no fallback: the count is required. */
function requireCount(what, value) {
  if (value === undefined || value === null) throw new TypeError(`${what} must be a non-negative integer`);
  return optionalCount(what, value, 0);
}

// ---- sights -----------------------------------------------------------------------------------

/** `options` as a plain object of named options ({} when absent). */
function namedOptions(what, options) {
  if (options === undefined || options === null) return {};
  if (typeof options !== 'object' || Array.isArray(options)) throw new TypeError(`${what}: options must be an object`);
  return options;
}

/**
 * The request object of a sight call: the window named positionally, every other option
 * passed through as it is, so the library (not this binding) refuses what is not allowed
 * (`url`, `headers`, … → OutOfWindow `invalid_params`, before any I/O).
 */
function sightRequest(what, source, endpoint, options) {
  for (const key of ['source', 'endpoint']) {
    if (Object.hasOwn(options, key)) throw new TypeError(`${what}: ${key} is the positional argument, not an option`);
  }
  return dumps({ source, endpoint, ...options }, `the ${what} request`);
}

/** What an aborted query rejects with: the library's own shape for reason `aborted`. */
function abortedError() {
  return errors.fromObject({
    code: 'WARDEN_RESULT_FETCH',
    reason: 'aborted',
    message: 'aborted: the query was cancelled',
    refusal: false,
  });
}

/**
 * Run a native sight call, aborted by `signal`: the library checks its token before connecting
 * and between reads, so a stalled server would hold the native call until the source's
 * timeout_ms: the promise settles at the abort instead, and the native call's own outcome is
 * dropped. The token is freed by the addon only once the native call has returned.
 */
async function abortable(signal, call) {
  if (!signal) return json.parse(await invoke(() => call(undefined)));
  if (signal.aborted) throw abortedError();
  const cancel = new native.Cancel();
  let onAbort;
  const aborted = new Promise((_, reject) => {
    onAbort = () => {
      cancel.trigger();
      reject(abortedError());
    };
  });
  signal.addEventListener('abort', onAbort, { once: true });
  const running = invoke(() => call(cancel));
  running.catch(() => {});
  try {
    return json.parse(await Promise.race([running, aborted]));
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}

/** The `signal` option of a sight call or a protected call: an AbortSignal, or undefined/null for none. */
function signalOption(what, signal) {
  if (signal === undefined || signal === null) return signal;
  if (typeof signal !== 'object' || typeof signal.aborted !== 'boolean' || typeof signal.addEventListener !== 'function') {
    throw new TypeError(`${what}: signal must be an AbortSignal`);
  }
  return signal;
}

/**
 * The function the addon calls (on the JavaScript thread) for each credential reference a
 * query needs: it runs the user's provider and settles the native request exactly once, with
 * a string, or null for "no value" (a throw, a rejection, anything that is not a string). It
 * never throws itself.
 */
function credentialBridge(provider) {
  return function resolveCredential(reference, request) {
    const settle = (value) => {
      try {
        request.settle(typeof value === 'string' ? value : null);
      } catch {
        // The request is already settled or gone; its query has moved on.
      }
    };
    let answer;
    try {
      answer = Promise.resolve(provider(reference));
    } catch {
      settle(null);
      return;
    }
    answer.then(settle, () => settle(null));
  };
}

class Warden {
  #handle;
  #telemetry;

  /**
   * Open `store` (a redb file, created if missing) governed by the document `config`.
   * `credentialsDir` makes sights read each credential reference from the file of that name
   * in the directory instead of from the environment variable.
   * `outcomes: 'deferred'` makes an outcome resolve at once; it becomes durable with the
   * store's next commit or within `maxDelayMs` (default 10), on `flush()` and on `close()`.
   * A crash in that window leaves the effect in flight, then AMBIGUOUS when its lease lapses:
   * never FAILED, never run twice. The default, `'durable'`, resolves once it is on disk.
   * `limits` overrides the bounds on inputs (`max_request_bytes`, `max_name_bytes`,
   * `max_arguments_bytes`, `max_result_bytes`, `max_message_bytes`).
   * `durability: 'process'` (a file store) writes each batch's journal record unsynced: a
   * process crash loses nothing, a power loss or OS crash can lose the last writes. Default
   * `'power'`: nothing that resolved is lost to either.
   * OpenTelemetry (with `@opentelemetry/api` installed): each protected call is one span
   * `execute_tool <action>` of `tracerProvider` (else the global one), a child of the caller's
   * active span, with the protected function running under it; its measurements go to
   * `meterProvider` (else the global one). Without an SDK provider nothing is traced.
   * `telemetry: {arguments: true, results: true}` lets spans carry the call's arguments and
   * result, redacted (docs/TELEMETRY.md); by default they carry neither.
   * @param {{store: string, config?: string, environment?: string, credentialsDir?: string,
   *   outcomes?: 'durable'|'deferred', maxDelayMs?: number, limits?: object,
   *   durability?: 'power'|'process', telemetry?: {arguments?: boolean, results?: boolean},
   *   tracerProvider?: object, meterProvider?: object}} options
   */
  constructor({
    store,
    config,
    environment,
    credentialsDir,
    outcomes,
    maxDelayMs,
    limits,
    durability,
    telemetry: capture,
    tracerProvider,
    meterProvider,
  } = {}) {
    requireString('store', store);
    optionalString('config', config);
    optionalString('environment', environment);
    optionalString('credentialsDir', credentialsDir);
    optionalString('outcomes', outcomes);
    optionalString('durability', durability);
    if (maxDelayMs !== undefined && maxDelayMs !== null && !Number.isInteger(maxDelayMs)) {
      throw new TypeError('maxDelayMs must be an integer number of milliseconds');
    }
    const open = {};
    if (environment) open.environment = environment;
    if (credentialsDir) open.credentials_dir = credentialsDir;
    if (outcomes) open.outcomes = outcomes;
    if (durability) open.durability = durability;
    if (maxDelayMs !== undefined && maxDelayMs !== null) open.max_delay_ms = maxDelayMs;
    if (limits !== undefined && limits !== null) {
      if (typeof limits !== 'object') throw new TypeError('limits must be an object of byte counts');
      open.limits = limits;
    }
    // The library checks the flags (and refuses anything else).
    if (capture !== undefined && capture !== null) open.telemetry = capture;
    const options = Object.keys(open).length > 0 ? json.stringify(open) : undefined;
    this.#handle = invokeSync(() => native.Handle.open(store, config ?? undefined, options));
    this.#telemetry = new telemetry.Telemetry({ tracerProvider, meterProvider, version });
  }

  /**
   * Observable gauges read from this store each time the meter collects them: effects by state
   * (`warden.effects`, AMBIGUOUS first), `warden.approvals.pending`, `warden.chain.length`.
   * `meterProvider` defaults to the one given at open, else the global one. Returns the names
   * registered; after `close()` they observe nothing. Needs `@opentelemetry/api`.
   */
  registerGauges({ meterProvider } = {}) {
    const provider = meterProvider ?? this.#telemetry.meterProvider();
    return telemetry.registerGauges(native, this.#handle, provider, version);
  }

  // ---- sights: confined reads of the configured windows ----

  /**
   * Read one configured window. Warden builds the GET from the configuration, resolves the
   * source's credential through the provider, enforces every bound and returns the shaped,
   * redacted result. `signal` (an AbortSignal) aborts it: the promise rejects with a
   * FetchFault whose reason is `aborted`.
   * @param {string} source
   * @param {string} endpoint
   * @param {{params?: object, fields?: string[], snapshot?: boolean, signal?: AbortSignal}} [options]
   */
  async query(source, endpoint, options) {
    const { signal, ...rest } = namedOptions('query', options);
    signalOption('query', signal);
    const text = sightRequest('query', source, endpoint, rest);
    const handle = this.#handle;
    return abortable(signal, (cancel) => handle.sightQuery(text, cancel));
  }

  /**
   * Run one tool call an LLM made against `toolSchema()`, its arguments as the model sent
   * them (`undefined`/`null` is `{}`): the library dispatches it, so a key the schema does not
   * declare is refused there (OutOfWindow) before any I/O. `signal` aborts a `warden_query`.
   * @param {string} name `warden_sources`, `warden_query`, `warden_history` or `warden_diff`
   * @param {unknown} [args]
   * @param {{signal?: AbortSignal}} [options]
   */
  async callTool(name, args, options) {
    requireString('callTool(name)', name);
    const signal = signalOption('callTool', namedOptions('callTool', options).signal);
    const text = dumps(args ?? {}, `the ${name} arguments`);
    const handle = this.#handle;
    return abortable(signal, (cancel) => handle.sightCallTool(name, text, cancel));
  }

  /**
   * One page of stored snapshots of an endpoint (or of one window with `params`), newest
   * first; pass the page's `nextCursor` as `cursor` for the next. `limit` 1..100, default 20.
   */
  async history(source, endpoint, options) {
    const text = sightRequest('history', source, endpoint, namedOptions('history', options));
    return json.parse(await invoke(() => this.#handle.sightHistory(text)));
  }

  /** What changed between two snapshots (`snp_…` ids) of one window. */
  async diff(a, b) {
    const text = dumps({ a, b }, 'the diff request');
    return json.parse(await invoke(() => this.#handle.sightDiff(text)));
  }

  /** The configured windows as an agent may name them (no origin, path or credential). */
  sources() {
    return json.parse(invokeSync(() => this.#handle.sightSources()));
  }

  /** The four tool definitions (`warden_sources`, `warden_query`, `warden_history`, `warden_diff`). */
  toolSchema() {
    return json.parse(invokeSync(() => this.#handle.sightToolSchema()));
  }

  /**
   * Resolve credential references with `provider(reference)`: a string, or null/undefined for
   * "no value", or a Promise of either. A throw or rejection is "no value" too; the query then
   * fails with reason `credential_unavailable`. `null` restores the default (environment
   * variables, or `credentialsDir`). The provider runs on the JavaScript thread while the
   * query waits on a pool thread; it does not keep the process alive.
   * @param {((reference: string) => string | null | undefined | Promise<string | null | undefined>) | null} provider
   */
  setCredentialProvider(provider) {
    if (provider !== undefined && provider !== null && typeof provider !== 'function') {
      throw new TypeError('setCredentialProvider(provider): provider must be a function or null');
    }
    invokeSync(() => this.#handle.setCredentialProvider(provider ? credentialBridge(provider) : null));
  }

  /** Close the store. Idempotent; calls already running finish first. */
  close() {
    this.#handle.close();
  }

  get closed() {
    return this.#handle.closed;
  }

  /**
   * Wrap `fn` so each call is proposed, run at most once per effect key, and its outcome
   * recorded: a return commits, `NotExecuted` records FAILED (a retry may run), anything else
   * records AMBIGUOUS and is rethrown unchanged.
   * @param {string} name the action name in the policy document
   * @param {(args: object) => any} fn receives the canonical arguments
   * `precondition(action)` (sync or async) reads the state the action depends on; the library
   * asks it only when an approval is involved — when the request is made and again just before
   * a granted approval is spent — keeps the fingerprint of its answer with the new request and
   * spends a presented approval only when it is unchanged (else ApprovalMismatch, reason
   * `precondition_changed`, the approval stays granted). What it throws rejects the call.
   * `reconcile(effectKey)` (sync or async): asked once when the effect is AMBIGUOUS;
   * "committed" or "not_executed" resolves it and the proposal is retried once, "unknown"
   * leaves it. What it throws rejects the call.
   * `waitMs`: how long the library waits (judged by its own clock; any length, over a day too —
   * the request's own expiry ends it first; 0: no wait) for a human to answer an approval
   * request before the approval is presented.
   * A call takes an optional second argument `{signal}` (an AbortSignal): aborted before the
   * call, nothing is proposed; aborted while the proposal is on its way, the function does not
   * run and the library records NOT_EXECUTED; either way the call rejects with
   * `signal.reason`. Once the function runs, the signal is the function's business.
   * @param {{reconcile?: (effectKey: string) => any, leaseMs?: number, waitMs?: number,
   *   precondition?: (action: object) => any}} [options]
   */
  protect(name, fn, { reconcile, leaseMs, waitMs, precondition } = {}) {
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
    const handle = this.#handle;
    const tracing = this.#telemetry;
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

  /**
   * Grant a pending approval as `by` (never the requester: not any of its parts, agent or user,
   * in any spelling or look-alike, nor its verified identity; the library compares). The
   * approver is a principal: `agent` and the user `by`, or without `agent` the name `by` as the
   * library reads it (`USER`, `AGENT:USER`, `AGENT/USER`; the agent "host" when it gives none;
   * a name it cannot read is refused, naming it); `verified: {issuer, claims}` says your
   * identity provider vouched for them (a rule's roles are read from `claims.roles`). Without
   * `agent` or `verified` the approver is asserted and counts only where one approver with no
   * role is required. An M-of-N request stays pending until enough entitled approvers granted.
   */
  async approve(id, { by, ttlMs, agent, verified } = {}) {
    requireString('the approval id', id);
    requireString('by', by);
    if (agent === undefined && verified === undefined) {
      const ttl = optionalCount('ttlMs', ttlMs, 0);
      return json.parse(await invoke(() => this.#handle.approvalGrant(id, by, ttl)));
    }
    const ttl = optionalCount('ttlMs', ttlMs, null);
    return this.#answer(id, 'grant', { by, agent, verified, ttlMs: ttl });
  }

  /** Deny a pending approval (`agent` and `verified` as for `approve`). */
  async deny(id, { by, reason, agent, verified } = {}) {
    requireString('the approval id', id);
    requireString('by', by);
    optionalString('reason', reason);
    if (agent === undefined && verified === undefined) {
      return json.parse(await invoke(() => this.#handle.approvalDeny(id, by, reason ?? undefined)));
    }
    return this.#answer(id, 'deny', { by, agent, verified, note: reason ?? null });
  }

  async #answer(id, decision, { by, agent, verified, ttlMs = null, note = null }) {
    optionalString('agent', agent);
    // Without `agent`, the library parses `by` (approval::person::parse_name): one rule, one place.
    const approver = agent === undefined || agent === null ? by : { agent, user: by };
    const answer = {
      approval_id: id,
      decision,
      approver,
      verified: verified ?? null,
      ttl_ms: ttlMs,
      note,
    };
    const text = dumps(answer, 'the answer');
    return json.parse(await invoke(() => this.#handle.approvalAnswer(text)));
  }

  /**
   * Grant a pending approval as `by` and, in the same write, make a scoped grant: the next
   * `scope.uses` proposals of the same action, by the same requester, decided by the same rule,
   * whose arguments have the scope's shape, run without asking a human until `scope.minutes`
   * pass (their permits name `scoped_grant_id`). `scope` is `{uses, minutes, fixed, atMost}`:
   * `fixed` JSON pointers ('/customer_id') must equal the approved action's values, `atMost`
   * maps pointers to numeric upper bounds. Only a rule whose document sets
   * `approval: {scoped: {max_uses, max_minutes}}` allows it, within those caps; anything else
   * rejects with InvalidInput naming what, and nothing changes. `by`, `agent` and `verified` as
   * for `approve`; `actionHash` refuses unless the request binds that action. Resolves to
   * `{grant, approval, receipt_id, receipt_seq}`.
   */
  async approveScoped(id, { by, scope, agent, verified, actionHash } = {}) {
    requireString('the approval id', id);
    requireString('by', by);
    optionalString('agent', agent);
    optionalString('actionHash', actionHash);
    if (scope === null || typeof scope !== 'object' || Array.isArray(scope)) {
      throw new TypeError('approveScoped(id, { scope }): scope must be an object {uses, minutes, fixed, atMost}');
    }
    // The library reads the scope and refuses any field it does not know: `atMost` is its
    // `at_most`, and everything else is passed as given.
    const { atMost, ...rest } = scope;
    if (atMost !== undefined && 'at_most' in rest) {
      throw new TypeError('approveScoped(id, { scope }): give atMost or at_most, not both');
    }
    const wire = atMost === undefined ? rest : { ...rest, at_most: atMost };
    const approver = agent === undefined || agent === null ? by : { agent, user: by };
    const answer = { approval_id: id, approver, verified: verified ?? null, action_hash: actionHash ?? null, scope: wire };
    const text = dumps(answer, 'the scoped answer');
    return json.parse(await invoke(() => this.#handle.approvalGrantScoped(text)));
  }

  /**
   * The scoped grants by id: those that may still be spent, or with `{ liveOnly: false }` every
   * one ever made (`state`: "live", "used_up", "expired" or "revoked").
   */
  async scopedGrants({ liveOnly = true } = {}) {
    if (typeof liveOnly !== 'boolean') throw new TypeError('scopedGrants({ liveOnly }): liveOnly must be a boolean');
    return json.parse(await invoke(() => this.#handle.scopedGrants(liveOnly)));
  }

  /**
   * Revoke a scoped grant ("sgr_…"): no later proposal is covered by it. `by` and `reason` are
   * required, one plain line each; an unknown grant rejects with NotFound, one revoked already
   * with InvalidInput, and a refusal changes nothing. Resolves to `{grant, approval: null,
   * receipt_id, receipt_seq}`.
   */
  async revokeScopedGrant(grantId, { by, reason } = {}) {
    requireString('the grant id', grantId);
    requireString('by', by);
    requireString('reason', reason);
    return json.parse(await invoke(() => this.#handle.scopedGrantRevoke(grantId, by, reason)));
  }

  /**
   * Wait until the request is answered, expires, or `timeoutMs` passes — judged by the
   * library's clock — and resolve to the record as it then stands (`status` "pending": the
   * wait ran out; "expired": it lapsed), or null when there is no such request.
   */
  async waitForAnswer(id, timeoutMs) {
    requireString('the approval id', id);
    const timeout = optionalCount('timeoutMs', timeoutMs, 0);
    return json.parse(await invoke(() => this.#handle.approvalWait(id, timeout)));
  }

  /**
   * Call `hook(request)` once for each approval request this handle's proposals create (not
   * for a re-proposal that finds its request still pending), with the request record,
   * arguments included. It runs on the event loop, queued from the library's notification
   * thread, never inside the proposal; what it throws (or rejects with) is logged and never
   * fails the action. `null` removes it.
   */
  onApprovalRequest(hook) {
    if (hook !== null && hook !== undefined && typeof hook !== 'function') {
      throw new TypeError('onApprovalRequest(hook): hook must be a function or null');
    }
    const bridge = (text) => {
      const report = (error) => console.error('warden: the approval hook failed; the action is not affected:', error);
      try {
        const outcome = hook(json.parse(text));
        if (outcome && typeof outcome.then === 'function') outcome.then(undefined, report);
      } catch (error) {
        report(error);
      }
    };
    invokeSync(() => this.#handle.setApprovalHook(hook ? bridge : null));
  }

  /** One approval record, or null. */
  async approval(id) {
    requireString('the approval id', id);
    return json.parse(await invoke(() => this.#handle.approvalGet(id)));
  }

  /** The approval requests still waiting for a human. */
  async pending() {
    return json.parse(await invoke(() => this.#handle.approvalsPending()));
  }

  /**
   * Delegate part of `parentId` (a root grant id or "dlg_…") to the grantee `grant` names, as
   * `by` ({agent, user}); resolves to the new "dlg_…" id. `grant` has a grant's keys minus `id`;
   * every dimension the parent constrains must be stated at least as narrowly. Rejects with
   * AuthorityEscalation (`reason`, `dimension`) when refused.
   */
  async delegate(parentId, grant, { by, byExpiresAtMs, via = 'api' } = {}) {
    requireString('the parent id', parentId);
    if (grant === null || typeof grant !== 'object' || Array.isArray(grant)) {
      throw new TypeError('delegate(parentId, grant): grant must be an object');
    }
    const request = {
      parent_id: parentId,
      grant,
      by: principalOf('by', by),
      by_expires_at_ms: byExpiresAtMs ?? null,
      via,
    };
    const created = json.parse(await invoke(() => this.#handle.delegate(dumps(request, 'the delegation'))));
    return created.delegation_id;
  }

  /** Revoke a delegation: true when this call revoked it, false when it already was. */
  async revoke(id, { by } = {}) {
    requireString('the delegation id', id);
    const revoker = revokerOf(by);
    const answer = json.parse(await invoke(() => this.#handle.revoke(id, revoker ?? undefined)));
    return answer.revoked;
  }

  /** Revoke every delegation `createdBy` ({agent, user}) made, or every one beneath `under`. */
  async revokeSweep({ createdBy, under, by } = {}) {
    const request = { by: revokerOf(by) };
    if (createdBy !== undefined) request.created_by = principalOf('createdBy', createdBy);
    if (under !== undefined) request.under = requireString('under', under);
    return json.parse(await invoke(() => this.#handle.revokeSweep(dumps(request, 'the sweep'))));
  }

  /** Every stored delegation in id order, revoked ones included. */
  async delegations() {
    return json.parse(await invoke(() => this.#handle.delegations()));
  }

  /**
   * A human says what happened to an AMBIGUOUS effect: "committed" or "failed". With `attempt`
   * (the effect record's `attempt` the person was shown), only that attempt is resolved: if the
   * effect was resolved and tried again since, InvalidInput is thrown and nothing moves.
   */
  async resolve(key, to, { by, attempt } = {}) {
    requireString('the effect key', key);
    if (to !== 'committed' && to !== 'failed') throw new TypeError('resolve(key, to): to is "committed" or "failed"');
    requireString('by', by);
    if (attempt !== undefined && !(Number.isInteger(attempt) && attempt >= 1 && attempt <= 0xffffffff)) {
      throw new TypeError(`resolve(key, to, {attempt}): an attempt number, 1 or more; got ${String(attempt)}`);
    }
    return json.parse(await invoke(() => this.#handle.effectResolve(key, to, by, attempt)));
  }

  /** Effect records in key order, optionally only those in `state`, at most `limit` (0: all). */
  async effects({ state, limit } = {}) {
    optionalString('state', state);
    const count = optionalCount('limit', limit, DEFAULTS.list_limit);
    return json.parse(await invoke(() => this.#handle.effectsList(state ?? undefined, count)));
  }

  /** One effect record, or null. */
  async effect(key) {
    requireString('the effect key', key);
    return json.parse(await invoke(() => this.#handle.effectGet(key)));
  }

  /** Receipts from sequence number `fromSeq` on, in chain order, at most `limit` (0: all). */
  async receipts({ fromSeq, limit } = {}) {
    const from = optionalCount('fromSeq', fromSeq, DEFAULTS.from_seq);
    const count = optionalCount('limit', limit, DEFAULTS.list_limit);
    return json.parse(await invoke(() => this.#handle.receiptsList(from, count)));
  }

  /** Walk the receipt chain and report whether it is intact. */
  async verifyChain() {
    return json.parse(await invoke(() => this.#handle.chainVerify()));
  }

  /** Events with an id greater than `after`, ascending, at most `limit` (0: all). */
  async events({ after, limit } = {}) {
    const from = optionalCount('after', after, DEFAULTS.after_id);
    const count = optionalCount('limit', limit, DEFAULTS.list_limit);
    return json.parse(await invoke(() => this.#handle.eventsList(from, count)));
  }

  /**
   * The audit path (RFC 9162) of receipt `receiptId` ("rct_…") in checkpoint number
   * `checkpoint` (absent or 0: the last one), checked by the library against the stored root:
   * `{receipt_id, seq, leaf_index, leaf_hash, checkpoint, tree_size, root, proof, proof_bytes}`,
   * hashes in base64 (the `warden proof inclusion --json` document). Rejects with NotFound (no
   * such receipt or checkpoint, no checkpoint yet, or the receipt came after the checkpoint).
   */
  async proofInclusion(receiptId, { checkpoint } = {}) {
    requireString('the receipt id', receiptId);
    const number = optionalCount('checkpoint', checkpoint, 0);
    return json.parse(await invoke(() => this.#handle.proofInclusion(receiptId, number)));
  }

  /**
   * The consistency proof (RFC 9162) from checkpoint number `oldCheckpoint` to
   * `newCheckpoint`, the older first: `{old_checkpoint, new_checkpoint, old_size, new_size,
   * old_root, new_root, proof}` (the `warden proof consistency --json` document). Rejects with
   * NotFound (no such checkpoint) or InvalidInput (a 0, or the first covers more receipts).
   */
  async proofConsistency(oldCheckpoint, newCheckpoint) {
    const older = requireCount('oldCheckpoint', oldCheckpoint);
    const newer = requireCount('newCheckpoint', newCheckpoint);
    return json.parse(await invoke(() => this.#handle.proofConsistency(older, newer)));
  }

  /**
   * The signed checkpoints numbered `from` on (absent, 0 or 1: the first), at most `limit`
   * (0: all): `[{number, origin, size, root, time, verifier_key, note}]`, each as `warden
   * checkpoints --json` lists it.
   */
  async checkpoints({ from, limit } = {}) {
    const first = optionalCount('from', from, 0);
    const count = optionalCount('limit', limit, DEFAULTS.list_limit);
    return json.parse(await invoke(() => this.#handle.checkpoints(first, count)));
  }

  /**
   * Send every checkpoint this handle's automatic-checkpoint thread signs to
   * `anchor(checkpoint)` too, after the document's `evidence.anchors`, under the sink name
   * `host NAME` (`warden doctor` reports it; `warden export` carries what it returned).
   * `checkpoint` is `{number, size, origin, note}`, `note` the signed note exactly as signed.
   * Return (or resolve to) `null`/`undefined` when it was taken with nothing to keep, or
   * `{kind, receipt, description}` (`receipt` a Buffer or Uint8Array) to keep a receipt beside
   * it. A throw or rejection is a failure: kept with its message (never put a secret in it)
   * and retried after a delay that doubles from 2 s to 5 minutes. It never fails an action.
   *
   * It runs on the event loop, asked from the library's checkpoint thread, one call at a time.
   * `name` is 1 to 64 of `A-Z a-z 0-9 . _ : / -`, new on this handle; an anchor stays until the
   * handle closes. Throws ConfigError when the document has no `evidence` section (the handle
   * makes no checkpoints), InvalidInput for a bad or repeated name.
   */
  addAnchor(name, anchor) {
    if (typeof name !== 'string') throw new TypeError("addAnchor(name, anchor): name must be a string");
    if (typeof anchor !== 'function') throw new TypeError('addAnchor(name, anchor): anchor must be a function');
    const bridge = (question, reply) => {
      Promise.resolve()
        .then(() => anchor(json.parse(question)))
        .then((kept) => reply.settle(anchorAnswer(kept)))
        .catch((error) => {
          const name = error && error.name ? error.name : 'Error';
          const message = error && error.message !== undefined ? error.message : String(error);
          reply.settle(`fail:${JSON.stringify({ error: `${name}: ${message}` })}`);
        });
    };
    invokeSync(() => this.#handle.addAnchor(name, bridge));
  }

  /** Make every deferred outcome of this process durable now (see `outcomes`). */
  async flush() {
    await invoke(() => this.#handle.flush());
  }
}

if (typeof Symbol.dispose === 'symbol') {
  Warden.prototype[Symbol.dispose] = function dispose() {
    this.close();
  };
}

/** `warden_anchor_put`'s answer for what a JavaScript anchor returned: "" (nothing to keep) or "keep:" + JSON. */
function anchorAnswer(kept) {
  if (kept === null || kept === undefined) return '';
  if (typeof kept !== 'object') throw new TypeError('an anchor returns null or {kind, receipt, description}');
  const { kind, receipt, description } = kept;
  if (!(receipt instanceof Uint8Array)) throw new TypeError("an anchor's receipt is a Buffer or Uint8Array");
  const answer = { kind, receipt: Buffer.from(receipt).toString('base64'), description: description ?? '' };
  return `keep:${JSON.stringify(answer)}`;
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

module.exports = {
  ABI_VERSION,
  version,
  Warden,
  withContext,
  withApproval,
  idempotencyToken,
  extendLease,
  actionHash,
  canonical,
  defaults: () => DEFAULTS,
  parseJson: json.parse,
  stringifyJson: json.stringify,
  evidence,
  ...errors,
};
delete module.exports.fromObject;
delete module.exports.BY_CODE;
delete module.exports.DEFAULT_REASONS;
