// Type declarations for the Warden Node binding (index.js).
//
// JSON values crossing the boundary keep every integer exact: an integer beyond 2^53 - 1 is a
// `bigint`. A `bigint` passed in is written as its exact digits.

/** The C ABI version this binding is written against; the loaded library must match. */
export declare const ABI_VERSION: 1;

export type JsonValue = null | boolean | number | bigint | string | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

/** Who is asking: the agent, and the user it acts for. */
export interface Principal {
  agent: string;
  user?: string | null;
}

export interface WardenOptions {
  /** The redb store file (created if missing). */
  store: string;
  /** The administrator's policy document (warden.yaml). Without it only management calls work. */
  config?: string | null;
  /** The environment this handle acts in (else $WARDEN_ENVIRONMENT, the document's, `production`). */
  environment?: string | null;
}

/** The answer of a reconcile hook about an AMBIGUOUS effect. */
export type ReconcileAnswer = 'committed' | 'not_executed' | 'unknown';

export interface ProtectOptions {
  /** Asked once when the effect is AMBIGUOUS; `committed`/`not_executed` resolve it and the call is proposed again. */
  reconcile?: (effectKey: string) => ReconcileAnswer | Promise<ReconcileAnswer>;
  /** This call's lease in milliseconds (overrides the document's). */
  leaseMs?: number;
  /** On APPROVAL_REQUIRED, wait up to this long for a human's answer, then proceed or throw. */
  waitMs?: number;
}

export interface ApprovalRecord {
  approval_id: string;
  status: 'pending' | 'granted' | 'denied' | 'consumed' | 'expired' | string;
  action: string;
  action_hash: string;
  action_id: string;
  requested_by: { agent: string; user: string | null };
  requested_at: string;
  expires_at: string;
  approver: string | null;
  answered_at: string | null;
  consumed_at: string | null;
  consumed_by: string | null;
  note: string | null;
  [field: string]: JsonValue;
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

/** A protected function: one object of arguments in, the wrapped function's result out. */
export type Protected<A extends object, R> = (args?: A) => Promise<Awaited<R>>;

export declare class Warden {
  constructor(options: WardenOptions);
  /** Close the store. Idempotent; calls already running finish first. */
  close(): void;
  readonly closed: boolean;
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
  /** Grant a pending approval; `by` must not be the requesting principal. */
  approve(id: string, options: { by: string; ttlMs?: number }): Promise<ApprovalRecord>;
  deny(id: string, options: { by: string; reason?: string | null }): Promise<ApprovalRecord>;
  approval(id: string): Promise<ApprovalRecord | null>;
  pending(): Promise<ApprovalRecord[]>;
  /** A human says what happened to an AMBIGUOUS effect. */
  resolve(key: string, to: 'committed' | 'failed', options: { by: string }): Promise<EffectRecord>;
  /** Effect records in key order, optionally only those in `state`; `limit` defaults to 100, 0 is no limit. */
  effects(options?: { state?: string | null; limit?: number }): Promise<EffectRecord[]>;
  effect(key: string): Promise<EffectRecord | null>;
  /** Receipts from sequence number `fromSeq` (default 1); `limit` defaults to 100, 0 is no limit. */
  receipts(options?: { fromSeq?: number; limit?: number }): Promise<JsonObject[]>;
  /** Walk the receipt chain: the report (`ok`, …). */
  verifyChain(): Promise<JsonObject>;
  /** Events with an id greater than `after` (default 0); `limit` defaults to 100, 0 is no limit. */
  events(options?: { after?: number; limit?: number }): Promise<JsonObject[]>;
}

/** Run `fn` as `principal`; protected calls inside it (however deep in async code) propose as it. */
export declare function withContext<T>(principal: Principal, fn: () => T): T;
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
/** JSON.parse, except integers beyond 2^53 - 1 become `bigint`. */
export declare function parseJson(text: string): JsonValue;
/** JSON.stringify, except a `bigint` is written as its exact digits. */
export declare function stringifyJson(value: unknown): string;

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
/** Something is broken. */
export declare class Fault extends WardenError {}
export declare class InvalidInput extends Fault {}
export declare class StoreFault extends Fault {}
export declare class ConfigError extends Fault {}
export declare class FetchFault extends Fault {}
export declare class Panic extends Fault {}
export declare class Poisoned extends Fault {}
export declare class AbiMismatch extends Fault {}

/** Throw from a protected function when the remote side provably did nothing: FAILED, retry allowed. */
export declare class NotExecuted extends Error {
  constructor(message?: string, options?: { cause?: unknown });
}
