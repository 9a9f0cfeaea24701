'use strict';
// Warden for Node: at-most-once effects for AI agents, in process.
//
// A thin layer over the native addon (native/warden.node), which calls only the warden_* C
// functions of libwarden.so. Everything that touches the store runs off the event loop as
// N-API async work and returns a Promise. JSON crossing the boundary keeps every integer
// exact: beyond 2^53 it is a BigInt. Sights (query, history, diff) are confined reads of the
// HTTP windows the configuration names; the agent only ever names a window, never a URL.
//
// This file is the public entry point: what it exports, and the Warden class with each
// method's documentation. The work is in lib/, by concept: native.js (the addon, calls into
// it, the library's defaults), checks.js (argument checks), context.js (withContext and the
// protected call's context), protect.js (a protected call), sights.js, approvals.js,
// authority.js (delegations), records.js (effects, receipts, events, proofs), telemetry.js,
// evidence.js (the offline verifier), errors.js and json.js.

const json = require('./lib/json');
const errors = require('./lib/errors');
const evidence = require('./lib/evidence');
const telemetry = require('./lib/telemetry');
const { ABI_VERSION, native, invoke, invokeSync, dumps, DEFAULTS } = require('./lib/native');
const { requireString, optionalString } = require('./lib/checks');
const { withContext, withApproval, idempotencyToken, extendLease } = require('./lib/context');
const { protectedFunction } = require('./lib/protect');
const sights = require('./lib/sights');
const approvals = require('./lib/approvals');
const authority = require('./lib/authority');
const records = require('./lib/records');

/** This package's version: the same as the library's and the CLI's (`warden --version --json`). */
const { version } = require('./package.json');

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
    return sights.query(this.#handle, source, endpoint, options);
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
    return sights.callTool(this.#handle, name, args, options);
  }

  /**
   * One page of stored snapshots of an endpoint (or of one window with `params`), newest
   * first; pass the page's `nextCursor` as `cursor` for the next. `limit` 1..100, default 20.
   */
  async history(source, endpoint, options) {
    return sights.history(this.#handle, source, endpoint, options);
  }

  /** What changed between two snapshots (`snp_…` ids) of one window. */
  async diff(a, b) {
    return sights.diff(this.#handle, a, b);
  }

  /** The configured windows as an agent may name them (no origin, path or credential). */
  sources() {
    return sights.sources(this.#handle);
  }

  /** The four tool definitions (`warden_sources`, `warden_query`, `warden_history`, `warden_diff`). */
  toolSchema() {
    return sights.toolSchema(this.#handle);
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
    return sights.setCredentialProvider(this.#handle, provider);
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
  protect(name, fn, options = {}) {
    return protectedFunction(this.#handle, this.#telemetry, name, fn, options);
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
  async approve(id, options = {}) {
    return approvals.approve(this.#handle, id, options);
  }

  /** Deny a pending approval (`agent` and `verified` as for `approve`). */
  async deny(id, options = {}) {
    return approvals.deny(this.#handle, id, options);
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
  async approveScoped(id, options = {}) {
    return approvals.approveScoped(this.#handle, id, options);
  }

  /**
   * The scoped grants by id: those that may still be spent, or with `{ liveOnly: false }` every
   * one ever made (`state`: "live", "used_up", "expired" or "revoked").
   */
  async scopedGrants(options = {}) {
    return approvals.scopedGrants(this.#handle, options);
  }

  /**
   * Revoke a scoped grant ("sgr_…"): no later proposal is covered by it. `by` and `reason` are
   * required, one plain line each; an unknown grant rejects with NotFound, one revoked already
   * with InvalidInput, and a refusal changes nothing. Resolves to `{grant, approval: null,
   * receipt_id, receipt_seq}`.
   */
  async revokeScopedGrant(grantId, options = {}) {
    return approvals.revokeScopedGrant(this.#handle, grantId, options);
  }

  /**
   * Wait until the request is answered, expires, or `timeoutMs` passes — judged by the
   * library's clock — and resolve to the record as it then stands (`status` "pending": the
   * wait ran out; "expired": it lapsed), or null when there is no such request.
   */
  async waitForAnswer(id, timeoutMs) {
    return approvals.waitForAnswer(this.#handle, id, timeoutMs);
  }

  /**
   * Call `hook(request)` once for each approval request this handle's proposals create (not
   * for a re-proposal that finds its request still pending), with the request record,
   * arguments included. It runs on the event loop, queued from the library's notification
   * thread, never inside the proposal; what it throws (or rejects with) is logged and never
   * fails the action. `null` removes it.
   */
  onApprovalRequest(hook) {
    return approvals.onApprovalRequest(this.#handle, hook);
  }

  /** One approval record, or null. */
  async approval(id) {
    return approvals.approval(this.#handle, id);
  }

  /** The approval requests still waiting for a human. */
  async pending() {
    return approvals.pending(this.#handle);
  }

  /**
   * Delegate part of `parentId` (a root grant id or "dlg_…") to the grantee `grant` names, as
   * `by` ({agent, user}); resolves to the new "dlg_…" id. `grant` has a grant's keys minus `id`;
   * every dimension the parent constrains must be stated at least as narrowly. Rejects with
   * AuthorityEscalation (`reason`, `dimension`) when refused.
   */
  async delegate(parentId, grant, options = {}) {
    return authority.delegate(this.#handle, parentId, grant, options);
  }

  /** Revoke a delegation: true when this call revoked it, false when it already was. */
  async revoke(id, options = {}) {
    return authority.revoke(this.#handle, id, options);
  }

  /** Revoke every delegation `createdBy` ({agent, user}) made, or every one beneath `under`. */
  async revokeSweep(options = {}) {
    return authority.revokeSweep(this.#handle, options);
  }

  /** Every stored delegation in id order, revoked ones included. */
  async delegations() {
    return authority.delegations(this.#handle);
  }

  /**
   * A human says what happened to an AMBIGUOUS effect: "committed" or "failed". With `attempt`
   * (the effect record's `attempt` the person was shown), only that attempt is resolved: if the
   * effect was resolved and tried again since, InvalidInput is thrown and nothing moves.
   */
  async resolve(key, to, options = {}) {
    return records.resolve(this.#handle, key, to, options);
  }

  /** Effect records in key order, optionally only those in `state`, at most `limit` (0: all). */
  async effects(options = {}) {
    return records.effects(this.#handle, options);
  }

  /** One effect record, or null. */
  async effect(key) {
    return records.effect(this.#handle, key);
  }

  /** Receipts from sequence number `fromSeq` on, in chain order, at most `limit` (0: all). */
  async receipts(options = {}) {
    return records.receipts(this.#handle, options);
  }

  /** Walk the receipt chain and report whether it is intact. */
  async verifyChain() {
    return records.verifyChain(this.#handle);
  }

  /** Events with an id greater than `after`, ascending, at most `limit` (0: all). */
  async events(options = {}) {
    return records.events(this.#handle, options);
  }

  /**
   * The audit path (RFC 9162) of receipt `receiptId` ("rct_…") in checkpoint number
   * `checkpoint` (absent or 0: the last one), checked by the library against the stored root:
   * `{receipt_id, seq, leaf_index, leaf_hash, checkpoint, tree_size, root, proof, proof_bytes}`,
   * hashes in base64 (the `warden proof inclusion --json` document). Rejects with NotFound (no
   * such receipt or checkpoint, no checkpoint yet, or the receipt came after the checkpoint).
   */
  async proofInclusion(receiptId, options = {}) {
    return records.proofInclusion(this.#handle, receiptId, options);
  }

  /**
   * The consistency proof (RFC 9162) from checkpoint number `oldCheckpoint` to
   * `newCheckpoint`, the older first: `{old_checkpoint, new_checkpoint, old_size, new_size,
   * old_root, new_root, proof}` (the `warden proof consistency --json` document). Rejects with
   * NotFound (no such checkpoint) or InvalidInput (a 0, or the first covers more receipts).
   */
  async proofConsistency(oldCheckpoint, newCheckpoint) {
    return records.proofConsistency(this.#handle, oldCheckpoint, newCheckpoint);
  }

  /**
   * The signed checkpoints numbered `from` on (absent, 0 or 1: the first), at most `limit`
   * (0: all): `[{number, origin, size, root, time, verifier_key, note}]`, each as `warden
   * checkpoints --json` lists it.
   */
  async checkpoints(options = {}) {
    return records.checkpoints(this.#handle, options);
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
