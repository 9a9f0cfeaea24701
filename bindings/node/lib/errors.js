'use strict';
// The error tree. Every error Warden raises is a WardenError carrying `code` (the C constant's
// name, e.g. WARDEN_RESULT_IN_PROGRESS), `reason` (the short machine reason) and the refusal's
// fields in camelCase. Refusals (the kernel said no, by design) and faults (something is
// broken) are separate branches, as in the C ABI's code ranges and the Python binding.

class WardenError extends Error {
  /**
   * @param {string} message
   * @param {object} [fields] the C error object: {code, reason, message, ...refusal fields}
   */
  constructor(message, fields = {}) {
    super(message ?? fields.message ?? new.target.defaultCode);
    this.name = new.target.name;
    this.code = fields.code ?? new.target.defaultCode;
    this.reason = fields.reason ?? new.target.defaultReason;
    // The error object exactly as the library sent it (snake_case, BigInt-safe).
    Object.defineProperty(this, 'details', { value: Object.freeze({ ...fields }), enumerable: false });
    for (const [from, to] of FIELDS) {
      if (fields[from] !== undefined) this[to] = fields[from];
    }
  }
}

// What an error raised by the binding itself (not sent by the library) says, per class.
WardenError.defaultCode = 'WARDEN_RESULT_UNKNOWN';
WardenError.defaultReason = 'unknown';

// The refusal fields of the C error object, and their JavaScript names.
const FIELDS = [
  ['request_id', 'requestId'],
  ['expires_at', 'expiresAt'],
  ['action_hash', 'actionHash'],
  ['approval_id', 'approvalId'],
  ['state', 'state'],
  ['effect_key', 'effectKey'],
  ['action_id', 'actionId'],
  ['attempts', 'attempts'],
  ['max_attempts', 'maxAttempts'],
];

/** The kernel said no, as designed (codes 100..199). */
class Refused extends WardenError {}
/** The policy (or an environment or principal check) denied the action. */
class Denied extends Refused {}
/**
 * The authority axis said no (a `Denied`): no grant covers the action, the deciding delegation
 * chain is revoked, expired or escalating, or a budget refuses. `reason` is e.g. `no_authority`,
 * `authority_revoked`, `budget_exhausted`; `grantId` names the grant it is about, `hop` the
 * delegation presented, `dimension` the shape row a hop missed.
 */
class AuthorityDenied extends Denied {
  constructor(message, fields = {}) {
    super(message, fields);
    this.grantId = fields.grant_id ?? null;
    this.hop = fields.hop ?? null;
    this.dimension = fields.dimension ?? null;
  }
}
/**
 * A delegation was refused at creation (nothing written but the rejection event). `reason`:
 * `principal_expired`, `id_assigned`, `unknown_parent`, `parent_not_delegable`,
 * `parent_not_valid`, `not_the_subject`, `max_depth` or `containment`; for `containment`,
 * `dimension` names what the child would widen or drop.
 */
class AuthorityEscalation extends Refused {
  constructor(message, fields = {}) {
    super(message, fields);
    this.dimension = fields.dimension ?? null;
    this.parentId = fields.parent_id ?? null;
  }
}
/** A human must approve first: present `requestId` with `withApproval` once granted. */
class ApprovalRequired extends Refused {}
/** The presented approval does not authorize this action now (`reason` says why). */
class ApprovalMismatch extends Refused {}
/** The effect is done (`state` "committed") or held by a live attempt (`state` "in_progress"). */
class Duplicate extends Refused {}
/** The effect's outcome is unknown; a human must resolve it before any retry. */
class Ambiguous extends Refused {}
/** The effect failed `maxAttempts` times; no further attempt is allowed. */
class AttemptCeiling extends Refused {}
/** Only an AMBIGUOUS effect can be resolved by hand. */
class NotResolvable extends Refused {}
/** The effect moved on before this outcome arrived; the outcome was kept as evidence only. */
class LateOutcome extends Refused {}
/** No such approval, effect or snapshot (a sight's `reason`: `snapshot_not_found`). */
class NotFound extends Refused {}
/**
 * A sight query named something outside the configured windows (`reason`: `unknown_source`,
 * `unknown_endpoint`, `invalid_params`, `unknown_field`, `invalid_page`). Nothing was sent.
 */
class OutOfWindow extends Refused {}

/** Something is broken (codes 200..299). */
class Fault extends WardenError {}
/**
 * The call was handed something it cannot take; nothing was done. `kind` says what, for code
 * that branches on it: `malformed`, `not_canonical`, `too_large`, `missing`, `out_of_range`,
 * `unknown`, `conflict`, `state`, `hook_failed` (null when the binding raised it itself).
 * `path` names the offending field where the library knows it (`arguments.b`,
 * `request.principal.agent`), else null.
 */
class InvalidInput extends Fault {
  constructor(message, fields = {}) {
    super(message, fields);
    this.kind = typeof fields.kind === 'string' ? fields.kind : null;
    this.path = typeof fields.path === 'string' ? fields.path : null;
  }
}
/**
 * The store failed. `kind` says how, for code that branches on it: `io`, `no_space`,
 * `permission`, `damaged`, `version`, `needs_recovery`, `not_a_store`, `absent`, `busy`, `limit`,
 * `stopped`, `defect` (null when the store could not be reached at all, reason
 * `store_unavailable`).
 */
class StoreFault extends Fault {
  constructor(message, fields = {}) {
    super(message, fields);
    this.kind = typeof fields.kind === 'string' ? fields.kind : null;
  }
}
class ConfigError extends Fault {}
/**
 * A sight's fetch failed, was refused or cancelled; `reason` is the sight code:
 * `credential_unavailable`, `redirect_refused`, `response_too_large`, `timeout`, `aborted`,
 * `upstream_error`, `network_error`, `invalid_response`.
 */
class FetchFault extends Fault {}
class Panic extends Fault {}
/** The handle latched closed after a store fault or panic: close it and open a new one. */
class Poisoned extends Fault {}
/** The loaded library implements another ABI version than this binding was built for. */
class AbiMismatch extends Fault {}

// Each code's class, and the library's own reason for it (error.rs `reason()`) for errors made here.
const CODES = [
  ['WARDEN_RESULT_DENIED', Denied, 'denied'],
  ['WARDEN_RESULT_APPROVAL_REQUIRED', ApprovalRequired, 'approval_required'],
  ['WARDEN_RESULT_APPROVAL_MISMATCH', ApprovalMismatch, 'mismatch'],
  ['WARDEN_RESULT_DUPLICATE', Duplicate, 'duplicate'],
  ['WARDEN_RESULT_IN_PROGRESS', Duplicate, 'in_progress'],
  ['WARDEN_RESULT_AMBIGUOUS', Ambiguous, 'ambiguous'],
  ['WARDEN_RESULT_ATTEMPT_CEILING', AttemptCeiling, 'attempt_ceiling'],
  ['WARDEN_RESULT_NOT_RESOLVABLE', NotResolvable, 'not_ambiguous'],
  ['WARDEN_RESULT_LATE_OUTCOME', LateOutcome, 'late_outcome'],
  ['WARDEN_RESULT_NOT_FOUND', NotFound, 'not_found'],
  ['WARDEN_RESULT_OUT_OF_WINDOW', OutOfWindow, 'out_of_window'],
  ['WARDEN_RESULT_AUTHORITY_ESCALATION', AuthorityEscalation, 'containment'],
  ['WARDEN_RESULT_INVALID_INPUT', InvalidInput, 'invalid_input'],
  ['WARDEN_RESULT_STORE', StoreFault, 'store'],
  ['WARDEN_RESULT_CONFIG', ConfigError, 'configuration_invalid'],
  ['WARDEN_RESULT_FETCH', FetchFault, 'fetch'],
  ['WARDEN_RESULT_PANIC', Panic, 'panic'],
  ['WARDEN_RESULT_POISONED', Poisoned, 'poisoned'],
  ['WARDEN_RESULT_ABI_MISMATCH', AbiMismatch, 'abi_mismatch'],
];
const BY_CODE = Object.fromEntries(CODES.map(([code, Class]) => [code, Class]));
const DEFAULT_REASONS = Object.fromEntries(CODES.map(([code, , reason]) => [code, reason]));

/**
 * Thrown by a protected function to say the remote side provably did nothing: the attempt is
 * recorded FAILED (not executed) and a retry may run. Any other throw records AMBIGUOUS.
 */
class NotExecuted extends Error {
  constructor(message = 'not executed', options) {
    super(message, options);
    this.name = 'NotExecuted';
  }
}

for (const [code, Class, reason] of CODES) {
  if (!Object.hasOwn(Class, 'defaultCode')) {
    Class.defaultCode = code;
    Class.defaultReason = reason;
  }
}

/** The WardenError for a C error object. */
function fromObject(fields) {
  let Class = BY_CODE[fields.code];
  if (Class === Denied && fields.authority === true) Class = AuthorityDenied;
  if (!Class) {
    // A code added after this binding was built: still a refusal or a fault.
    Class = fields.refusal === true ? Refused : fields.refusal === false ? Fault : WardenError;
  }
  const message = typeof fields.message === 'string' && fields.message !== '' ? fields.message : fields.code;
  return new Class(message, fields);
}

module.exports = {
  BY_CODE,
  DEFAULT_REASONS,
  WardenError,
  Refused,
  Denied,
  AuthorityDenied,
  AuthorityEscalation,
  ApprovalRequired,
  ApprovalMismatch,
  Duplicate,
  Ambiguous,
  AttemptCeiling,
  NotResolvable,
  LateOutcome,
  NotFound,
  OutOfWindow,
  Fault,
  InvalidInput,
  StoreFault,
  ConfigError,
  FetchFault,
  Panic,
  Poisoned,
  AbiMismatch,
  NotExecuted,
  fromObject,
};
