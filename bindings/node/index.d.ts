// Type declarations for the Warden Node binding (index.js).
//
// JSON values crossing the boundary keep every integer exact: an integer beyond 2^53 - 1 is a
// `bigint`. A `bigint` passed in is written as its exact digits.

/** The C ABI version this binding is written against; the loaded library must match. */
export declare const ABI_VERSION: 1;

/** This package's version, the same as the library's and the CLI's (`warden --version --json`). */
export declare const version: string;

export type JsonValue = null | boolean | number | bigint | string | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

/** Who is asking: the agent, and the user it acts for. */
export interface Principal {
  agent: string;
  user?: string | null;
}

/** A principal in a context: who is asking, and (optionally) the task and the hop presented. */
export interface CallContext extends Principal {
  /** The unit of work; grants naming `tasks` need a matching one. */
  task?: string | null;
  /** A delegation id (`dlg_…`) handed over by another agent: then the only grant considered. */
  hop?: string | null;
}

/** A stored delegation as `delegations()` lists it. */
export interface DelegationRecord {
  delegation_id: string;
  parent_id: string;
  depth: number;
  grant: JsonObject;
  created_by: { agent: string; user: string | null };
  created_via: 'api' | 'cli' | 'hop';
  created_at: string;
  revoked: boolean;
  revoked_at: string | null;
  revoked_by: string | null;
  readable: boolean;
  problem: string | null;
}

/** A receipt's audit path in one checkpoint, as `proofInclusion()` returns it (hashes in base64). */
export interface InclusionProof {
  receipt_id: string;
  seq: number;
  /** `seq - 1`. */
  leaf_index: number;
  /** SHA-256(0x00 ‖ the receipt's document). */
  leaf_hash: string;
  checkpoint: number;
  tree_size: number;
  /** The checkpoint's root, as its signed note spells it. */
  root: string;
  /** The audit path, leaf to root (RFC 9162 §2.1.3). */
  proof: string[];
  proof_bytes: number;
}

/** One checkpoint's consistency with a later one, as `proofConsistency()` returns it. */
export interface ConsistencyProof {
  old_checkpoint: number;
  new_checkpoint: number;
  old_size: number;
  new_size: number;
  old_root: string;
  new_root: string;
  /** RFC 9162 §2.1.4; empty when both trees have one size. */
  proof: string[];
}

/** A signed checkpoint as an anchor receives it: `note` is the signed note exactly as signed. */
export interface SignedCheckpoint {
  number: number;
  size: number;
  origin: string;
  note: string;
}

/** What an anchor keeps beside a checkpoint. */
export interface AnchorReceipt {
  kind: string;
  receipt: Uint8Array;
  description?: string;
}

/** A signed checkpoint as `checkpoints()` lists it. */
export interface CheckpointRecord {
  number: number;
  origin: string;
  size: number;
  root: string;
  time: string;
  /** The verifier key that signed it (public; no signing key is stored). */
  verifier_key: string;
  /** The signed note exactly as signed. */
  note: string;
}

export interface WardenOptions {
  /** The redb store file (created if missing). */
  store: string;
  /** The administrator's policy document (warden.yaml). Without it only management calls work. */
  config?: string | null;
  /** The environment this handle acts in (else $WARDEN_ENVIRONMENT, the document's, `production`). */
  environment?: string | null;
  /**
   * Sights read each credential reference from the file of that name in this directory
   * (systemd credentials, container secrets) instead of from the environment variable.
   */
  credentialsDir?: string | null;
  /**
   * `'deferred'`: an outcome resolves at once and is durable with the store's next commit or
   * within `maxDelayMs` (default 10), on `flush()` and `close()`; a crash in that window leaves
   * the effect AMBIGUOUS once its lease lapses, never FAILED. Default `'durable'`.
   */
  outcomes?: 'durable' | 'deferred' | null;
  /** With `outcomes: 'deferred'`: the longest an outcome waits to be made durable (1–60000). */
  maxDelayMs?: number | null;
  /**
   * `'process'` (a file store): each batch's journal record is written unsynced — a process
   * crash loses nothing, a power loss or OS crash can lose the last writes. Default `'power'`.
   */
  durability?: 'power' | 'process' | null;
  /** Bounds on inputs, in bytes; past one a proposal is refused naming it (a result is stored as an excerpt). */
  limits?: {
    max_request_bytes?: number;
    max_name_bytes?: number;
    max_arguments_bytes?: number;
    max_result_bytes?: number;
    max_message_bytes?: number;
  } | null;
  /**
   * What the spans of protected calls may carry beyond Warden's own identifiers: the call's
   * arguments and its committed result, redacted as sights redact. Both off by default.
   */
  telemetry?: { arguments?: boolean; results?: boolean } | null;
  /**
   * An OpenTelemetry `TracerProvider` for this handle's spans (else the global one; without an
   * SDK registered, nothing is traced). Needs `@opentelemetry/api` installed.
   */
  tracerProvider?: object | null;
  /** An OpenTelemetry `MeterProvider` for this handle's measurements (else the global one). */
  meterProvider?: object | null;
}

/** The answer of a reconcile hook about an AMBIGUOUS effect. */
export type ReconcileAnswer = 'committed' | 'not_executed' | 'unknown';

export interface ProtectOptions {
  /** Asked once when the effect is AMBIGUOUS; `committed`/`not_executed` resolve it and the call is proposed again. */
  reconcile?: (effectKey: string) => ReconcileAnswer | Promise<ReconcileAnswer>;
  /** This call's lease in milliseconds (overrides the document's). */
  leaseMs?: number;
  /** On APPROVAL_REQUIRED, the library waits up to this long (by its own clock) for a human's answer, then the call proceeds or throws. */
  waitMs?: number;
  /**
   * Reads the state the action depends on, before each proposal; a presented approval is spent
   * only when its fingerprint is unchanged since the request (else `precondition_changed`).
   */
  precondition?: (action: { name: string; arguments: JsonObject; principal: { agent: string; user: string | null } | null; resource: string | null }) => JsonValue | Promise<JsonValue>;
}

/** What an identity provider verified about an approver (roles are read from `claims.roles`). */
export interface VerifiedIdentity {
  issuer?: string | null;
  claims?: JsonObject;
}

/** One recorded answer on an approval request. */
export type ApprovalVote = {
  agent: string;
  user: string | null;
  decision: 'grant' | 'deny';
  verified: boolean;
  issuer: string | null;
  at: string;
  note: string | null;
};

export interface ApprovalRecord {
  approval_id: string;
  status: 'pending' | 'granted' | 'denied' | 'consumed' | 'expired' | string;
  action: string;
  action_hash: string;
  action_id: string;
  /** The canonical arguments the request binds (null only for a request older than the store's schema 4). */
  arguments: JsonObject | null;
  resource: string | null;
  environment: string | null;
  requested_by: { agent: string; user: string | null };
  /** What the host's identity provider verified about the requester, when it did. */
  requester_identity: { verified: boolean; issuer: string | null; claims: JsonObject | null };
  /** The policy's reason for asking (`rule[1]`) and the rule's `when`. */
  rule: string | null;
  when: JsonObject | null;
  policy_hash: string | null;
  required: number;
  roles: string[];
  grants: number;
  votes: ApprovalVote[];
  precondition: string | null;
  requested_at: string;
  expires_at: string;
  approver: string | null;
  answered_at: string | null;
  consumed_at: string | null;
  consumed_by: string | null;
  note: string | null;
  [field: string]: JsonValue;
}

/** What a scoped grant covers: `uses` further proposals for `minutes`, of this shape. */
export interface Scope {
  uses: number;
  minutes: number;
  /** JSON pointers (`/customer_id`) whose values must equal the approved action's. */
  fixed?: string[];
  /** JSON pointers to numeric arguments, each with the bound it must not exceed. */
  atMost?: { [pointer: string]: number };
}

/** A scoped grant as `scopedGrants()` lists it. */
export interface ScopedGrant {
  grant_id: string;
  approval_id: string;
  action: string;
  rule: string;
  policy_hash: string;
  requested_by: { agent: string; user: string | null };
  approver: string;
  approver_verified: boolean;
  /** As the approver asked for it (bounds as JSON number text). */
  scope: { uses: number; minutes: number; fixed: string[]; at_most: { [pointer: string]: string } };
  /** The approved action's value at each fixed pointer. */
  fixed_values: JsonObject;
  uses_left: number;
  granted_at: string;
  expires_at: string;
  state: 'live' | 'used_up' | 'expired' | 'revoked';
  revoked: { by: string; reason: string; at: string } | null;
}

/** What `approveScoped` and `revokeScopedGrant` resolve to. */
export interface ScopedGrantDone {
  grant: ScopedGrant;
  /** The request as the grant left it; null for a revocation. */
  approval: ApprovalRecord | null;
  receipt_id: string;
  receipt_seq: number;
}

export interface EffectRecord {
  effect_key: string;
  state: 'reserved' | 'executing' | 'committed' | 'failed' | 'ambiguous' | string;
  action_id: string;
  action: string;
  action_hash: string;
  attempt: number;
  created_at: string;
  updated_at: string;
  lease_expires_at: string | null;
  result: JsonValue;
  error: string | null;
  resolved_by: string | null;
  approval_id: string | null;
  [field: string]: JsonValue;
}

// ---- sights ---------------------------------------------------------------------------------

/** What `query` needs of an AbortSignal (the global `AbortSignal` fits). */
export interface AbortSignalLike {
  readonly aborted: boolean;
  addEventListener(type: 'abort', listener: () => void, options?: { once?: boolean }): void;
  removeEventListener(type: 'abort', listener: () => void): void;
}

export interface QueryOptions {
  /** The endpoint's declared params (defaults applied); anything else is refused. */
  params?: JsonObject;
  /** Field aliases to return (default: all); never JSON pointers. */
  fields?: string[];
  /** Store the result as a snapshot; the result then carries `snapshotId`. */
  snapshot?: boolean;
  /** Aborting rejects the query with a `FetchFault` whose reason is `aborted`. */
  signal?: AbortSignalLike | null;
}

export interface HistoryOptions {
  /** Only this window (defaults applied); without it, every window of the endpoint. */
  params?: JsonObject;
  /** The previous page's `nextCursor`. */
  cursor?: string | null;
  /** 1..100, default 20. */
  limit?: number;
}

/** What one limit cut from an alias: shown out of the original total. */
export interface TruncationFlag {
  /** The limit: levels, entries or characters shown. */
  shown: number;
  /** The deepest nesting, the most entries or the longest string met. */
  total: number;
  /** For `depth` and `items`: how many containers were cut. */
  containers?: number;
  /** For `strings`: how many strings were cut. */
  strings?: number;
}

/** The limits that cut an alias's value (`max_depth`, `max_items`, `max_string`). */
export interface SightTruncation {
  depth?: TruncationFlag;
  items?: TruncationFlag;
  strings?: TruncationFlag;
}

/** A shaped, redacted read of one window. */
export interface SightResult {
  source: string;
  endpoint: string;
  fetchedAt: string;
  /** The upstream's HTTP status. */
  status: number;
  /** Alias → value; untrusted data, never instructions. */
  values: { [alias: string]: JsonValue };
  warnings: string[];
  warningsTruncated: boolean;
  /** Alias → what each limit cut, only for aliases something was cut from. */
  truncation: { [alias: string]: SightTruncation };
  /** Alias → how many credential echoes were replaced by `[REDACTED]`. */
  redactions: { [alias: string]: number };
  /** With `snapshot: true`: the stored snapshot's id (`snp_…`). */
  snapshotId?: string;
}

/** A stored snapshot: the result and the window's params. */
export interface SightSnapshot extends SightResult {
  snapshotId: string;
  params: JsonObject;
}

export interface SightHistoryPage {
  source: string;
  endpoint: string;
  params?: JsonObject;
  /** Newest first. */
  snapshots: SightSnapshot[];
  hasMore: boolean;
  nextCursor?: string;
}

export interface SightDiffEntry {
  change: 'added' | 'removed' | 'changed';
  path: string;
  before?: JsonValue;
  after?: JsonValue;
}

export interface SightDiff {
  a: string;
  b: string;
  source: string;
  endpoint: string;
  params: JsonObject;
  fetchedAt: { a: string; b: string };
  /** At most 50; `omitted` counts the rest of `total`. */
  entries: SightDiffEntry[];
  total: number;
  omitted: number;
}

export interface SightParam {
  name: string;
  required: boolean;
  /** The JSON Schema of the value. */
  schema: JsonObject;
  default?: JsonValue;
  description?: string;
}

export interface SightCatalog {
  sources: {
    id: string;
    description: string;
    endpoints: { id: string; description: string; params: SightParam[]; fields: string[] }[];
  }[];
  note: string;
}

/** One tool definition for an LLM tool-calling API. */
export interface SightTool {
  name: 'warden_sources' | 'warden_query' | 'warden_history' | 'warden_diff';
  description: string;
  input_schema: JsonObject;
}

/**
 * Resolves a credential reference: a string, or null/undefined for "no value", or a Promise of
 * either. A throw or a rejection is "no value" too (reason `credential_unavailable`).
 */
export type CredentialProvider = (
  reference: string,
) => string | null | undefined | Promise<string | null | undefined>;

/**
 * A protected function: one object of arguments in, the wrapped function's result out.
 * `signal` aborted before the function runs: it never runs (NOT_EXECUTED once a permit was
 * issued) and the call rejects with `signal.reason`.
 */
export type Protected<A extends object, R> = (args?: A, options?: { signal?: AbortSignal }) => Promise<Awaited<R>>;

export declare class Warden {
  constructor(options: WardenOptions);
  /** Close the store. Idempotent; calls already running finish first. */
  close(): void;
  readonly closed: boolean;
  /** Make every deferred outcome of this process durable now (see `outcomes`). */
  flush(): Promise<void>;
  /**
   * Observable gauges read from this store whenever the meter collects: `warden.effects` (by
   * `warden.effect.state`), `warden.approvals.pending`, `warden.chain.length`. Returns their
   * names. Needs `@opentelemetry/api`.
   */
  registerGauges(options?: { meterProvider?: object | null }): string[];
  /**
   * Wrap `fn`: each call is proposed (principal from `withContext`, approval from
   * `withApproval`), run with the canonical arguments, and its outcome recorded: a return
   * commits, `NotExecuted` records FAILED, any other throw records AMBIGUOUS and is rethrown.
   */
  protect<A extends object = JsonObject, R = unknown>(
    name: string,
    fn: (args: A) => R | Promise<R>,
    options?: ProtectOptions,
  ): Protected<A, R>;
  /** Grant a pending approval; `by` must not be the requesting principal in any spelling. */
  approve(id: string, options: { by: string; ttlMs?: number; agent?: string; verified?: VerifiedIdentity }): Promise<ApprovalRecord>;
  deny(id: string, options: { by: string; reason?: string | null; agent?: string; verified?: VerifiedIdentity }): Promise<ApprovalRecord>;
  /**
   * Grant a pending approval and make a scoped grant: the next `scope.uses` proposals of its
   * shape run without a human until `scope.minutes` pass. Rejects with InvalidInput (naming
   * what) past the document's `approval.scoped` caps, and nothing changes.
   */
  approveScoped(
    id: string,
    options: { by: string; scope: Scope; agent?: string; verified?: VerifiedIdentity; actionHash?: string },
  ): Promise<ScopedGrantDone>;
  /** The scoped grants that may still be spent, or with `liveOnly: false` every one ever made. */
  scopedGrants(options?: { liveOnly?: boolean }): Promise<ScopedGrant[]>;
  /** Revoke a scoped grant; `by` and `reason` are required. Rejects with NotFound or InvalidInput, changing nothing. */
  revokeScopedGrant(grantId: string, options: { by: string; reason: string }): Promise<ScopedGrantDone>;
  /** Wait (by the library's clock) until the request is answered, expires, or `timeoutMs` passes. */
  waitForAnswer(id: string, timeoutMs: number): Promise<ApprovalRecord | null>;
  /** Called once per new approval request this handle creates, on the event loop; never fails the action. */
  onApprovalRequest(hook: ((request: ApprovalRecord) => unknown) | null): void;
  approval(id: string): Promise<ApprovalRecord | null>;
  pending(): Promise<ApprovalRecord[]>;
  /**
   * Delegate part of `parentId` (a root grant id or `dlg_…`) to the grantee `grant` names, as
   * `by`; resolves to the new `dlg_…` id. Rejects with `AuthorityEscalation` when refused.
   */
  delegate(
    parentId: string,
    grant: JsonObject,
    options: { by: Principal; byExpiresAtMs?: number | null; via?: 'api' | 'cli' | 'hop' },
  ): Promise<string>;
  /** Revoke a delegation: `true` when this call revoked it, `false` when it already was. */
  revoke(id: string, options?: { by?: string | Principal | null }): Promise<boolean>;
  /** Revoke every delegation `createdBy` made, or every one beneath `under`, in one write. */
  revokeSweep(options: {
    createdBy?: Principal;
    under?: string;
    by?: string | Principal | null;
  }): Promise<{ delegation_id: string; revoked: boolean }[]>;
  /** Every stored delegation in id order, revoked ones included. */
  delegations(): Promise<DelegationRecord[]>;
  /** A human says what happened to an AMBIGUOUS effect. */
  resolve(key: string, to: 'committed' | 'failed', options: { by: string; attempt?: number }): Promise<EffectRecord>;
  /** Effect records in key order, optionally only those in `state`; `limit` defaults to the library's `list_limit`, 0 is no limit. */
  effects(options?: { state?: string | null; limit?: number }): Promise<EffectRecord[]>;
  effect(key: string): Promise<EffectRecord | null>;
  /** Receipts from sequence number `fromSeq` (default: the library's `from_seq`); `limit` defaults to the library's `list_limit`, 0 is no limit. */
  receipts(options?: { fromSeq?: number; limit?: number }): Promise<JsonObject[]>;
  /** Walk the receipt chain: the report (`ok`, …). */
  verifyChain(): Promise<JsonObject>;
  /** Events with an id greater than `after` (default: the library's `after_id`); `limit` defaults to the library's `list_limit`, 0 is no limit. */
  events(options?: { after?: number; limit?: number }): Promise<JsonObject[]>;
  /**
   * The audit path of receipt `receiptId` in checkpoint `checkpoint` (absent or 0: the last),
   * checked by the library against the stored root. Rejects with `NotFound`.
   */
  proofInclusion(receiptId: string, options?: { checkpoint?: number }): Promise<InclusionProof>;
  /** The consistency proof from checkpoint `oldCheckpoint` to `newCheckpoint` (the older first). */
  proofConsistency(oldCheckpoint: number, newCheckpoint: number): Promise<ConsistencyProof>;
  /** The signed checkpoints numbered `from` on (default: the first); `limit` defaults to the library's `list_limit`, 0 is no limit. */
  checkpoints(options?: { from?: number; limit?: number }): Promise<CheckpointRecord[]>;
  /**
   * Send every checkpoint the handle's automatic-checkpoint thread signs to `anchor` too, under
   * the sink name `host NAME`; what it returns is kept beside the checkpoint, what it throws is
   * a failure retried later. Throws `ConfigError` without an `evidence` section.
   */
  addAnchor(
    name: string,
    anchor: (checkpoint: SignedCheckpoint) => AnchorReceipt | null | undefined | Promise<AnchorReceipt | null | undefined>,
  ): void;

  /**
   * Read one configured window: Warden builds the GET, resolves the credential, enforces every
   * bound and returns the redacted result. Rejects with `OutOfWindow` (nothing sent) or
   * `FetchFault` (`reason`: `credential_unavailable`, `redirect_refused`, `timeout`,
   * `aborted`, …).
   */
  query(source: string, endpoint: string, options?: QueryOptions): Promise<SightResult>;
  /** One page of stored snapshots, newest first. */
  history(source: string, endpoint: string, options?: HistoryOptions): Promise<SightHistoryPage>;
  /** What changed between two snapshots of one window; an unknown id is `NotFound` (`snapshot_not_found`). */
  diff(a: string, b: string): Promise<SightDiff>;
  /** The configured windows as an agent may name them (no origin, path or credential). */
  sources(): SightCatalog;
  /** The four tool definitions: `warden_sources`, `warden_query`, `warden_history`, `warden_diff`. */
  toolSchema(): SightTool[];
  /** Run one tool call an LLM made against `toolSchema()`, its arguments as sent (the library dispatches and confines it). */
  callTool(name: string, args?: unknown, options?: { signal?: AbortSignal }): Promise<JsonValue>;
  /** Resolve credentials with `provider`; `null` restores the default (environment, or `credentialsDir`). */
  setCredentialProvider(provider: CredentialProvider | null): void;
}

/** Run `fn` as `principal`; protected calls inside it (however deep in async code) propose as it. */
export declare function withContext<T>(principal: CallContext, fn: () => T): T;
/** Run `fn` presenting the approval `id` (`apr_…`) to the protected calls inside it. */
export declare function withApproval<T>(id: string, fn: () => T): T;
/**
 * Inside a protected call: the provider idempotency token of this attempt. Throws
 * `InvalidInput` outside a protected call or when the action has no effect key.
 */
export declare function idempotencyToken(): string;
/** Inside a protected call: extend this attempt's lease to `ms` from now; resolves to the new expiry. */
export declare function extendLease(ms: number): Promise<string | null>;

/** The action hash (`sha256:…`) ctrlrun and every Warden binding agree on. */
export declare function actionHash(action: {
  name: string;
  arguments?: JsonObject;
  principal: Principal;
  resource?: string | null;
  environment?: string;
}): string;
/** Canonical JSON text: sorted keys, no spaces, exact integers; floats are refused. */
export declare function canonical(value: JsonValue): string;
/** The library's defaults (`warden_defaults`), read once at load; the binding restates none. */
export declare function defaults(): Readonly<{
  environment: string;
  list_limit: number;
  from_seq: number;
  after_id: number;
  limits: Readonly<Record<string, number>>;
  result_excerpt_bytes: number;
  max_result_depth: number;
  max_wait_ms: number;
}>;
/** JSON.parse, except integers beyond 2^53 - 1 become `bigint`. */
export declare function parseJson(text: string): JsonValue;
/** JSON.stringify, except a `bigint` is written as its exact digits. */
export declare function stringifyJson(value: unknown): string;

// ---- evidence: offline bundles, verified in pure JavaScript (lib/evidence.js, no addon) ----------

/** Why a bundle was refused: the first check that failed, in the order the checks run (docs/EVIDENCE.md). */
export type EvidenceReason =
  | 'bundle_malformed'
  | 'key_untrusted'
  | 'signature_invalid'
  | 'checkpoint_altered'
  | 'log_forked'
  | 'checkpoint_backdated'
  | 'proof_invalid'
  | 'receipt_malformed'
  | 'receipts_reordered'
  | 'receipt_dropped'
  | 'receipt_altered'
  | 'root_mismatch'
  | 'outcome_missing'
  | 'truncated'
  | 'policy_altered';

/** What `evidence.verifyBundle` concluded: the same fields as `warden verify-bundle --json`. */
export interface EvidenceVerdict {
  /** Whether every check passed. */
  ok: boolean;
  /** The first failure, when one failed. */
  reason: EvidenceReason | null;
  /** What exactly failed, or what was proven. */
  detail: string;
  /** Receipts checked. */
  receipts: number;
  /** Checkpoints checked. */
  checkpoints: number;
  /** Whether the keys were given by the caller (true) or taken from the bundle. */
  keys_pinned: boolean;
  /** Effects the last checkpoint counts open (no outcome yet). */
  open_at_end: number;
  /** Effects a checkpoint saw open that closed with no receipt (the signer attests how). */
  closed_without_receipt: number;
  /** The policy hashes the receipts name whose policy the bundle carries, each file hashing to its name (filled when every check passed). */
  policies_carried: string[];
  /** The policy hashes the receipts name whose policy the bundle does not carry: nothing shows what they said (filled when every check passed). */
  policies_missing: string[];
}

/** A signed-note Ed25519 verifier key (`NAME+ID+BASE64`), parsed and checked. */
export interface EvidenceVerifierKey {
  readonly name: string;
  /** The key id (the first 4 bytes of SHA-256(name ‖ "\n" ‖ 0x01 ‖ key), big-endian). */
  readonly id: number;
  /** The key in its text form. */
  encoded(): string;
}

/** Warden's offline evidence bundles, checked as the Rust verifier checks them. */
export interface Evidence {
  readonly BUNDLE_FORMAT: 'warden.bundle/v1';
  readonly COMPANION_FORMAT: 'warden.checkpoint/v1';
  /** Every reason, in the order the checks run. */
  readonly REASONS: readonly EvidenceReason[];
  /**
   * Check the bundle in `dir`. `keys`: the verifier keys trusted (each a key or a file holding
   * one); none means the bundle's own keys are trusted (`keys_pinned: false`). Throws only for
   * a key that cannot be read; every finding about the bundle is in the verdict.
   */
  verifyBundle(dir: string, options?: { keys?: ReadonlyArray<string | EvidenceVerifierKey> }): EvidenceVerdict;
  /** Whether `proof` (an RFC 9162 audit path) shows `leaf` at `index` in the tree of `size` leaves with `root`. */
  checkInclusion(
    proof: ReadonlyArray<Uint8Array>,
    size: number | bigint,
    root: Uint8Array,
    index: number | bigint,
    leaf: Uint8Array,
  ): boolean;
  /** Whether `proof` shows the tree of `oldSize` leaves is a prefix of the tree of `newSize` leaves. */
  checkConsistency(
    proof: ReadonlyArray<Uint8Array>,
    oldSize: number | bigint,
    oldRoot: Uint8Array,
    newSize: number | bigint,
    newRoot: Uint8Array,
  ): boolean;
  /** SHA-256(0x00 ‖ data): the leaf hash of one receipt document (a string is hashed as UTF-8). */
  leafHash(data: Uint8Array | string): Uint8Array;
  /** SHA-256(0x01 ‖ left ‖ right). */
  nodeHash(left: Uint8Array, right: Uint8Array): Uint8Array;
  /** Parse a verifier key; throws an Error saying what is wrong with it. */
  parseVerifierKey(text: string): EvidenceVerifierKey;
  /** A policy's file in a bundle (`policies/<hex>.json`) for its `sha256:` hash; null for a hash of another form. */
  policyFile(policyHash: string): string | null;
}

/** The pure-JavaScript verifier of offline bundles (`warden export`), also usable without the addon: `require('warden/lib/evidence')`. */
export declare const evidence: Evidence;

/** The C error object's fields, as the library sent them. */
export interface ErrorDetails {
  code: string;
  reason: string;
  message: string;
  [field: string]: JsonValue;
}

export declare class WardenError extends Error {
  /** For an error raised by the binding itself: `new InvalidInput("…")` has this code and reason. */
  static readonly defaultCode: string;
  static readonly defaultReason: string;
  constructor(message?: string, fields?: Partial<ErrorDetails>);
  /** The C constant's name, e.g. `WARDEN_RESULT_IN_PROGRESS`. */
  readonly code: string;
  /** The short machine reason, e.g. `duplicate`, `approval_required`, `unknown_action`. */
  readonly reason: string;
  readonly details: Readonly<ErrorDetails>;
  readonly requestId?: string;
  readonly expiresAt?: string;
  readonly actionHash?: string;
  readonly approvalId?: string;
  readonly state?: string;
  readonly effectKey?: string;
  readonly actionId?: string;
  readonly attempts?: number;
  readonly maxAttempts?: number;
}
/** The kernel said no, by design. */
export declare class Refused extends WardenError {}
export declare class Denied extends Refused {}
/**
 * The authority axis said no (`reason`: `no_authority`, `authority_revoked`,
 * `budget_exhausted`, …); `grantId` names the grant it is about.
 */
export declare class AuthorityDenied extends Denied {
  readonly grantId: string | null;
  readonly hop: string | null;
  readonly dimension: string | null;
}
/** A delegation refused at creation (`reason`, and `dimension` for `containment`). */
export declare class AuthorityEscalation extends Refused {
  readonly dimension: string | null;
  readonly parentId: string | null;
}
export declare class ApprovalRequired extends Refused {
  readonly requestId: string;
  readonly expiresAt: string;
}
export declare class ApprovalMismatch extends Refused {}
export declare class Duplicate extends Refused {
  readonly state: 'committed' | 'in_progress';
  readonly effectKey: string;
}
export declare class Ambiguous extends Refused {
  readonly effectKey: string;
}
export declare class AttemptCeiling extends Refused {}
export declare class NotResolvable extends Refused {}
export declare class LateOutcome extends Refused {}
export declare class NotFound extends Refused {}
/**
 * A sight query named something outside the configured windows; nothing was sent. `reason`:
 * `unknown_source`, `unknown_endpoint`, `invalid_params`, `unknown_field`, `invalid_page`.
 */
export declare class OutOfWindow extends Refused {}
/** Something is broken. */
export declare class Fault extends WardenError {}
/**
 * The call was handed something it cannot take; `kind` says what (`malformed`, `not_canonical`,
 * `too_large`, `missing`, `out_of_range`, `unknown`, `conflict`, `state`, `hook_failed`), `path`
 * the offending field when known (`arguments.b`).
 */
export declare class InvalidInput extends Fault {
  readonly kind: string | null;
  readonly path: string | null;
}
/** The store failed; `kind` says how (`io`, `no_space`, `permission`, `damaged`, `version`, …). */
export declare class StoreFault extends Fault {
  readonly kind: string | null;
}
export declare class ConfigError extends Fault {}
/**
 * A sight's fetch failed, was refused or cancelled. `reason`: `credential_unavailable`,
 * `redirect_refused`, `response_too_large`, `timeout`, `aborted`, `upstream_error`,
 * `network_error`, `invalid_response`.
 */
export declare class FetchFault extends Fault {}
export declare class Panic extends Fault {}
export declare class Poisoned extends Fault {}
export declare class AbiMismatch extends Fault {}

/** Throw from a protected function when the remote side provably did nothing: FAILED, retry allowed. */
export declare class NotExecuted extends Error {
  constructor(message?: string, options?: { cause?: unknown });
}
