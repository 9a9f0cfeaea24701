//! Every state change the kernel makes, as a value: what one write transaction reads and
//! writes. The kernel builds an operation (outside any transaction: hashing, rendering, ids),
//! and the store applies it — in this process or in the process that owns the store — inside
//! a group-commit batch, reading the clock at that moment. The logic of each operation lives
//! with its concept (`propose`, `permit`, `effects`, `approvals`, ...) and `dispatch` hands
//! each variant to it; this file only names the operations, their payloads and their replies,
//! and names no concept file (the bottom of the kernel's layers).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::action::{Action, Principal};
use crate::approval::scope::{Scope, ScopeLimits, ScopedGrant};
use crate::approval::{ApprovalAsk, ApprovalRecord, Approver};
use crate::authority::record::StoredDelegation;
use crate::authority::source::IndexKey;
use crate::authority::{AuthorityResult, Budget, Charge};
use crate::clock::Micros;
use crate::decision::Ruling;
use crate::effect::{EffectRecord, EffectState, Outcome};
use crate::error::{Error, StoreFaultKind};
use crate::event::{Event, EventKind};
use crate::evidence::retention::{Hold, PrunedPrefix};
use crate::receipt::{ChainReport, ReceiptAuthority, ReceiptDraft, StoredReceipt};
use crate::snapshot_record::SnapshotRecord;
use crate::store::Protocol;

/// The kernel's operations, as the store's protocol.
#[derive(Debug)]
pub struct Ops;

impl Protocol for Ops {
    type Write = Write;
    type Read = Read;
}

/// What a proposal that reaches the store carries, shared by its variants.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Proposed {
    /// The action, normalized by the pipeline.
    pub action: Action,
    /// The action's hash, which any approval must be bound to.
    pub action_hash: String,
    /// What the pipeline decided.
    pub ruling: Ruling,
    /// The receipt this proposal writes if it ends here (times are set when applied).
    pub draft: ReceiptDraft,
    /// The rendered effect key; `None` for an action with no effect to protect, or one whose key
    /// did not render (observe mode, a denial).
    pub effect_key: Option<String>,
    /// How long the reservation holds, in microseconds.
    pub lease: Micros,
    /// The most attempts the effect key allows; `None` is no ceiling.
    pub max_attempts: Option<u32>,
    /// What the authority axis decided (`None` without an `authority:` section).
    #[serde(default)]
    pub authority: Option<AuthorityStamp>,
    /// What the reservation charges against the budgets up the deciding chain.
    #[serde(default)]
    pub charges: Vec<crate::authority::Charge>,
    /// The precondition fingerprint taken for this proposal (fingerprinted into a new request,
    /// compared with a presented one's).
    #[serde(default)]
    pub precondition: Option<String>,
}

/// The state a permit carries to its outcome.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Finish {
    /// The action the permit ran.
    pub action: Action,
    /// The permit's effect key, if it has one.
    pub effect_key: Option<String>,
    /// The attempt this outcome is for.
    pub attempt: u32,
    /// Whether the permit holds its key; when it does not, the effect row is left alone.
    pub holds_key: bool,
    /// The receipt to write; its `receipt_id` makes a re-sent outcome land once.
    pub draft: ReceiptDraft,
    /// Observe mode: what enforce mode would have done, recorded on the receipt.
    pub would_have: Option<serde_json::Value>,
    /// What the executor reported.
    pub outcome: Outcome,
    /// Answer with the receipt's seq and hash ([`WriteReply::Receipt`]) instead of `Done`, for
    /// a traced call's span. An owner of the previous version ignores it and answers `Done`
    /// (the span then reads the receipt back), and a sender of that version never asks.
    #[serde(default)]
    pub report_receipt: bool,
}

/// Every state change the kernel makes, as one write transaction of the store.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Write {
    /// A terminal refusal before any reservation: events, receipt.
    Refuse {
        /// The proposal refused.
        proposed: Proposed,
        /// Why: recorded on the receipt and returned as the reply.
        refusal: Error,
    },
    /// An `approve` decision without a presented approval: the effect check, then a new
    /// request (or a blocked receipt).
    Gate {
        /// The proposal that needs an approval.
        proposed: Proposed,
        /// The id minted for a new request (an earlier live request for the same action is reported
        /// instead).
        approval_id: String,
        /// How long the new request stays answerable, in microseconds.
        ttl: Micros,
        /// How many approvers with which roles, the rule's `when`, the requester's verified
        /// identity.
        ask: ApprovalAsk,
    },
    /// The permit: approval check and consume, reservation, events.
    Reserve {
        /// The proposal to grant.
        proposed: Proposed,
        /// The approval id the call presented, if any.
        presented: Option<String>,
        /// Whether the ruling was `approve`, so that a missing or unusable approval refuses (an
        /// `allow` spends a presented one when it can).
        approval_required: bool,
    },
    /// Observe mode's permit.
    Observe {
        /// The proposal to run.
        proposed: Proposed,
        /// The approval id the call presented, checked but never consumed.
        presented: Option<String>,
    },
    /// A pending approval request made directly (`Kernel::request_approval`), not by the gate.
    RequestApproval {
        /// The action the request is for.
        action: Action,
        /// The action's hash, which the request binds.
        action_hash: String,
        /// The id minted for the request.
        approval_id: String,
        /// How long the request stays answerable, in microseconds.
        ttl: Micros,
        /// How many approvers with which roles, and the requester's verified identity.
        ask: ApprovalAsk,
        /// The policy in force, recorded on the request.
        policy_hash: Option<String>,
        /// The document's `version`, recorded on the request.
        policy_version: Option<String>,
    },
    /// One approver's grant or deny, compare-and-set against the row as this transaction reads
    /// it: concurrent answers serialize, each counted once or refused.
    Answer {
        /// The request answered.
        approval_id: String,
        /// Who answers, asserted or verified.
        approver: Approver,
        /// The approver's note, if any.
        note: Option<String>,
        /// `true` grants, `false` denies.
        grant: bool,
        /// Grants only: the approval is usable for this long from the answer instead of until the
        /// request's own expiry.
        ttl: Option<Micros>,
        /// Refuse unless the request binds this hash (the action the approver was shown).
        expect_hash: Option<String>,
    },
    /// A permit's one outcome: the effect's state, its event and the receipt, landing once per
    /// receipt id.
    Finish(Box<Finish>),
    /// Extend the lease of an EXECUTING attempt; only while it is live, and never shorter.
    ExtendLease {
        /// The key whose lease is extended.
        effect_key: String,
        /// The action that must hold the key.
        action_id: String,
        /// The attempt that must hold the key.
        attempt: u32,
        /// The new expiry of the lease.
        until: Micros,
    },
    /// A human's resolution of an AMBIGUOUS effect.
    Resolve {
        /// The effect resolved.
        effect_key: String,
        /// What happened: COMMITTED or FAILED.
        to: EffectState,
        /// Who says so, recorded on the record and the event.
        resolver: String,
        /// The attempt the resolver looked at, when they name one: another attempt is refused,
        /// so a resolution never lands on an ambiguity its author did not see.
        expect_attempt: Option<u32>,
    },
    /// A reconcile hook's answer about an AMBIGUOUS effect, resolved as `reconcile:<action>`.
    Reconcile {
        /// The effect reconciled.
        effect_key: String,
        /// The action whose hook answered; it names the resolver.
        action_name: String,
        /// What the hook said.
        answer: ReconcileAnswer,
    },
    /// Mark an in-flight effect AMBIGUOUS (idempotent from reserved, executing and ambiguous).
    MarkAmbiguous {
        /// The effect marked.
        effect_key: String,
        /// The (`action_id`, `attempt`) the caller says holds the key; required while its
        /// lease is live.
        holder: Option<(String, u32)>,
        /// What went wrong, kept on the record (bounded).
        error: String,
    },
    /// The integrator API: consume an approval and reserve without beginning; with no key,
    /// only consume the approval.
    Claim {
        /// The action claiming.
        action: Action,
        /// The action's hash, which a presented approval must be bound to.
        action_hash: String,
        /// The key to reserve; `None` only consumes the approval.
        effect_key: Option<String>,
        /// The approval to consume, if any.
        presented: Option<String>,
        /// How long the reservation holds, in microseconds.
        lease: Micros,
        /// The most attempts the effect key allows; `None` is no ceiling.
        max_attempts: Option<u32>,
    },
    /// RESERVED → EXECUTING for the holder; a holder whose lease lapsed first is refused and the
    /// record becomes AMBIGUOUS.
    Begin {
        /// The reserved key.
        effect_key: String,
        /// The action that must hold it.
        action_id: String,
        /// The attempt that must hold it.
        attempt: u32,
    },
    /// An outcome reported without a permit (`Kernel::complete`); events only, no receipt.
    Complete {
        /// The key the outcome is for.
        effect_key: String,
        /// The action that must hold it.
        action_id: String,
        /// The attempt that must hold it.
        attempt: u32,
        /// What the integrator reports.
        outcome: Outcome,
    },
    /// Append one snapshot (a sight's confined read), indexed under each of `scopes`.
    AppendSnapshot {
        /// The snapshot; its `seq` is assigned when applied.
        record: SnapshotRecord,
        /// The scopes it can be listed under.
        scopes: Vec<String>,
    },
    /// Create a delegation: the checks and the insert in one transaction.
    Delegate(Box<DelegateOp>),
    /// Revoke one delegation; every descendant is denied from then on.
    Revoke {
        /// The `dlg_…` id revoked.
        delegation_id: String,
        /// Who revoked it, recorded on the revocation.
        by: Option<String>,
    },
    /// Revoke every delegation a sweep selects.
    RevokeSweep {
        /// Which delegations.
        sweep: Sweep,
        /// Who revoked them, recorded on each revocation.
        by: Option<String>,
    },
    /// What became of one notification of a request (`APPROVAL_NOTIFIED`/`_NOTIFY_FAILED`).
    NotifyEvent {
        /// The request notified.
        approval_id: String,
        /// `APPROVAL_NOTIFIED` or `APPROVAL_NOTIFY_FAILED`; any other kind is refused.
        kind: EventKind,
        /// The event's data.
        data: serde_json::Value,
    },
    /// A permit's execution waits for input, or goes on after it (`EXECUTION_SUSPENDED`/
    /// `_RESUMED`), with the lease extended to `until` when given.
    Suspension(Box<Suspension>),
    /// Append a signed checkpoint, after checking its signature, root and order (and cache
    /// the Merkle nodes that check computed).
    AppendCheckpoint(Box<crate::evidence::checkpoint::StoredCheckpoint>),
    /// Keep the canonical policy a handle runs under by its hash, once, before any receipt of
    /// the handle names it; the same bytes again write nothing, other bytes are a fault.
    KeepPolicy {
        /// `sha256:` + hex over `canonical`.
        policy_hash: String,
        /// The canonical policy (`Document::canonical_policy`).
        canonical: Vec<u8>,
    },
    /// Record one sink's try of one checkpoint; a record that says it was anchored is kept as
    /// it is (the reply is the stored one).
    RecordAnchor(Box<crate::evidence::anchoring::StoredAnchor>),
    /// Place or release a retention hold, or prune a prefix of the receipts, with its receipt.
    Retention(Box<RetentionOp>),
    /// Grant a request and make a scoped grant of the next actions of its shape, with its receipt.
    ScopedGrant(Box<ScopedGrantOp>),
    /// Revoke a scoped grant, with its receipt.
    RevokeScopedGrant(Box<RevokeScopedOp>),
}

/// What `Permit::suspend`/`resume` write.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Suspension {
    /// The action the permit runs.
    pub action_id: String,
    /// The permit's effect key, if it has one.
    pub effect_key: Option<String>,
    /// The attempt that must still hold the key.
    pub attempt: u32,
    /// Whether the permit holds its key; only then is the key checked and the lease extended.
    pub holds_key: bool,
    /// `true` writes EXECUTION_RESUMED, `false` EXECUTION_SUSPENDED.
    pub resumed: bool,
    /// Suspend only: the new lease expiry covering the wait.
    pub until: Option<Micros>,
    /// The event's data: a JSON object of at most `MAX_SUSPENSION_DATA_BYTES`, and for a
    /// parked permit (`Permit::park`) its record as the `parked` member.
    pub data: serde_json::Value,
}

/// A permit's grant, as the transaction decided it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Granted {
    /// The attempt's number, from 1.
    pub attempt: u32,
    /// When the attempt's lease lapses; `None` when it holds no key.
    pub lease_expires_at: Option<Micros>,
    /// The approval consumed, if any.
    pub approval_id: Option<String>,
    /// Who granted the consumed approval.
    pub approver: Option<String>,
    /// The instant the transaction granted it: the execution's start.
    pub started_at: Micros,
    /// Whether the attempt reserved its effect key: false in observe mode when the reservation was
    /// refused.
    pub holds_key: bool,
    /// Observe mode: the first check enforce mode would have refused on.
    pub blocked: Option<String>,
    /// Whether the reservation charged budgets.
    #[serde(default)]
    pub charged: bool,
    /// For an approval this grant spent: from its request to the answer that granted it.
    #[serde(default)]
    pub decided_in: Option<Micros>,
    /// The scoped grant that covered the action (one of its uses spent in this transaction).
    #[serde(default)]
    pub scoped_grant_id: Option<String>,
}

/// Why a reservation whose commit was confirmed late is not handed out (its FAILED record says
/// so), or a claimed one is not returned.
pub(super) const LAPSED_BEFORE_HANDED_OUT: &str =
    "the store confirmed this reservation's commit only after its lease had lapsed (its answer was lost), so it \
     was not handed out";

/// What a write operation answers.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WriteReply {
    /// A permit was granted.
    Granted(Granted),
    /// A permit was granted, but its commit was confirmed only after its lease lapsed (a lost
    /// answer read back later): it is never handed out, and its attempt is recorded FAILED.
    Lapsed(Granted),
    /// A claimed reservation (the integrator API) whose commit was confirmed only after its
    /// lease lapsed: never returned (the key is left to lapse into AMBIGUOUS).
    LapsedClaim(EffectRecord),
    /// Refused by design; whatever the refusal keeps (receipt, an expired mark) is committed.
    Refused(Error),
    /// The approval request as the write left it (created, answered or consumed).
    Approval(ApprovalRecord),
    /// The gate created this new request (the caller notifies, then reports ApprovalRequired).
    Requested(ApprovalRecord),
    /// The effect record as the write left it.
    Effect(EffectRecord),
    /// The snapshot as stored, with its `seq`.
    Snapshot(SnapshotRecord),
    /// The delegation created.
    Delegation(Box<crate::authority::DelegationRecord>),
    /// `(delegation id, revoked by this call)`.
    Revoked(Vec<(String, bool)>),
    /// The checkpoint appended.
    Checkpoint(Box<crate::evidence::checkpoint::StoredCheckpoint>),
    /// The anchor's record as stored.
    Anchor(Box<crate::evidence::anchoring::StoredAnchor>),
    /// What a retention write did.
    Retention(Box<RetentionDone>),
    /// What a scoped grant's write (made or revoked) did.
    ScopedGrant(Box<ScopedGrantDone>),
    /// Written; nothing to report.
    Done,
    /// The outcome's receipt was appended at `seq` with `hash` (only when the outcome asked,
    /// `Finish::report_receipt`).
    Receipt {
        /// Its place in the chain.
        seq: u64,
        /// Its hash (`sha256:…`).
        hash: String,
    },
}

/// Every consistent read the kernel makes of the store.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Read {
    /// One effect record, with its executor result.
    Effect {
        /// The key read.
        effect_key: String,
    },
    /// Effects in key order, at most `limit`.
    Effects {
        /// Only effects in this state, when given.
        state: Option<EffectState>,
        /// The most records returned.
        limit: usize,
    },
    /// One approval request.
    Approval {
        /// The request read.
        approval_id: String,
    },
    /// The requests pending and unexpired at the read's instant, oldest first.
    Pending,
    /// Receipts with seq `from` onward, in seq order.
    Receipts {
        /// The first seq returned.
        from: u64,
        /// The most receipts returned.
        limit: usize,
    },
    /// The last receipts of the chain, in seq order.
    LastReceipts {
        /// How many.
        count: usize,
    },
    /// How many receipts the chain holds.
    ReceiptCount,
    /// The seq of one receipt.
    ReceiptSeq {
        /// The receipt's id (`rct_…`).
        receipt_id: String,
    },
    /// Events with id after `after`, ascending.
    Events {
        /// The last event id already seen (0 for all).
        after: u64,
        /// The most events returned.
        limit: usize,
    },
    /// The whole receipt chain verified in one read.
    VerifyChain,
    /// One snapshot.
    Snapshot {
        /// The snapshot's id.
        id: String,
    },
    /// Snapshots indexed under one scope, newest first.
    SnapshotPage {
        /// The scope listed.
        scope: String,
        /// Only snapshots with seq below this, when given (the previous page's last).
        before: Option<u64>,
        /// The most snapshots returned.
        limit: usize,
    },
    /// Every row integrity-checked, the chain verified and orphans listed (`warden doctor`).
    Doctor,
    /// The delegation rows one authority evaluation of `action` needs.
    AuthorityRows {
        /// The action being evaluated.
        action: Box<Action>,
        /// A delegation id handed over by another agent: then the only candidate.
        hop: Option<String>,
        /// How many links of each candidate's chain to read (the depth bound).
        bound: u32,
    },
    /// Delegations in id order, revoked ones included.
    Delegations {
        /// Only ids after this, when given (the previous page's last).
        after: Option<String>,
        /// The most delegations returned.
        limit: usize,
    },
    /// One delegation, with its revocation.
    Delegation {
        /// The `dlg_…` id read.
        delegation_id: String,
    },
    /// Checkpoints numbered `from..`, at most `limit`.
    Checkpoints {
        /// The first number returned.
        from: u64,
        /// The most returned.
        limit: usize,
    },
    /// One checkpoint by number, or the last one.
    Checkpoint {
        /// The number; the last checkpoint when `None`.
        number: Option<u64>,
    },
    /// Hashes of the receipts' Merkle tree.
    Proof(ProofAsk),
    /// What the next checkpoint states, from one snapshot (the writer never waits for it).
    CheckpointBasis {
        /// The log's origin, on its first checkpoint; later ones repeat it or omit it.
        origin: Option<String>,
        /// Gather only when one is due by these bounds (`ReadReply::NotDue` otherwise).
        due: Option<crate::evidence::settings::Due>,
    },
    /// Where each sink stands: its last anchored checkpoint and the ones waiting for it.
    AnchorStates {
        /// The sinks, as their specs name them.
        sinks: Vec<String>,
    },
    /// Every sink's records of checkpoints `from..=to`.
    Anchors {
        /// The first checkpoint number.
        from: u64,
        /// The last.
        to: u64,
    },
    /// The canonical policy kept under one hash.
    Policy {
        /// `sha256:` + hex.
        policy_hash: String,
    },
    /// The seq of the last receipt (0 for an empty chain): the chain's size, pruned receipts
    /// included.
    ChainSize,
    /// Every retention hold, standing or released.
    Holds,
    /// Every scoped grant, by id.
    ScopedGrants,
    /// One scoped grant.
    ScopedGrant {
        /// The `sgr_…` id.
        grant_id: String,
    },
    /// The pruned prefix of the receipts.
    Pruned,
    /// The unreleased amount charged to one grant's budget metric in a window ending now.
    BudgetSpent {
        /// The grant whose budget is summed.
        grant_id: String,
        /// The budget's metric.
        metric: String,
        /// The window's length, in seconds.
        window_seconds: u64,
    },
}

/// What `warden doctor` learns from one read of the whole store.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DoctorReport {
    /// (table, rows checked, problems)
    pub tables: Vec<(String, u64, Vec<String>)>,
    /// The receipt chain's verification.
    pub chain: ChainReport,
    /// Rows that point at nothing: index rows naming a missing receipt or snapshot, effects whose
    /// outcome index names a receipt about another key.
    pub orphans: Vec<String>,
    /// The bytes the tables occupy in the file (`ReadTx::bytes_in_use`).
    #[serde(default)]
    pub bytes_in_use: u64,
}

/// One reply per read, moved once: an approval row (which keeps its whole action) is the
/// largest variant, and boxing it would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReadReply {
    /// One effect record; `None` when the key was never reserved.
    Effect(Option<EffectRecord>),
    /// Effect records.
    Effects(Vec<EffectRecord>),
    /// One approval request; `None` when there is no such id.
    Approval(Option<ApprovalRecord>),
    /// The pending approval requests.
    Approvals(Vec<ApprovalRecord>),
    /// Receipts as `(seq, receipt)`, in seq order.
    Receipts(Vec<(u64, StoredReceipt)>),
    /// The number of receipts.
    Count(u64),
    /// A receipt's seq; `None` when no receipt has that id.
    Seq(Option<u64>),
    /// Events in id order.
    Events(Vec<Event>),
    /// The chain's verification.
    Chain(ChainReport),
    /// One snapshot; `None` when there is no such id.
    Snapshot(Option<SnapshotRecord>),
    /// A page of snapshots, newest first, and whether older ones remain.
    SnapshotPage(Vec<SnapshotRecord>, bool),
    /// What `warden doctor` found.
    Doctor(Box<DoctorReport>),
    /// The delegation rows one authority evaluation reads.
    AuthorityRows(Box<AuthorityRows>),
    /// Delegation rows with their revocations (a page, or the one asked for).
    Delegations(Vec<crate::authority::StoredDelegation>),
    /// A decimal amount (a `u128` does not travel in every JSON reader).
    Amount(String),
    /// Checkpoints, in number order.
    Checkpoints(Vec<crate::evidence::checkpoint::StoredCheckpoint>),
    /// Merkle tree hashes.
    Hashes(Vec<[u8; 32]>),
    /// What the next checkpoint states.
    Basis(Box<crate::evidence::checkpoint::Basis>),
    /// No checkpoint is due (a `CheckpointBasis` with `due`); nothing was gathered.
    NotDue,
    /// The canonical policy kept under a hash; `None` when the store keeps none under it.
    Policy(Option<Vec<u8>>),
    /// Where each sink stands.
    AnchorStates(Vec<crate::evidence::anchoring::SinkState>),
    /// Anchor records, by sink then checkpoint.
    Anchors(Vec<crate::evidence::anchoring::StoredAnchor>),
    /// Retention holds, by name.
    Holds(Vec<crate::evidence::retention::Hold>),
    /// Scoped grants (one or none for `Read::ScopedGrant`).
    ScopedGrants(Vec<crate::approval::scope::ScopedGrant>),
    /// The pruned prefix, if any.
    Pruned(Option<Box<crate::evidence::retention::PrunedPrefix>>),
    /// Refused by design (the caller's to fix); nothing was read past the refusal.
    Refused(crate::error::Error),
}

// ---- what the authority axis decided, carried through the kernel -------------------------------

/// The authority axis's decision for one proposal, as the kernel carries it into the
/// reservation's transaction and onto the receipts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuthorityStamp {
    /// Whether the authority axis authorised the action.
    pub passed: bool,
    /// `authority_grant`, or the failure reason (`authority_revoked`, `no_authority`, …).
    pub reason: String,
    /// The grant that decided, or the one whose failure is reported.
    pub grant_id: Option<String>,
    /// The delegation id presented as a hop, when the call came under one.
    pub hop: Option<String>,
    /// The containment dimension that failed, on a containment failure.
    pub dimension: Option<String>,
    /// On a pass through a delegation: the chain's delegation ids, leaf first.
    pub chain: Vec<String>,
    /// On a pass: every budget up the deciding chain, `(grant id, budget)`.
    pub budgets: Vec<(String, Budget)>,
    /// The AUTHORITY_DENIED event's data on a denial.
    pub evidence: serde_json::Value,
}

impl AuthorityStamp {
    /// The stamp of one evaluation's result, with the evidence an AUTHORITY_DENIED event records.
    pub fn from_result(result: &AuthorityResult) -> AuthorityStamp {
        AuthorityStamp {
            passed: result.passed,
            reason: result.reason.as_str().to_owned(),
            grant_id: result.grant_id.clone(),
            hop: result.hop.clone(),
            dimension: result.dimension.map(|d| d.as_str().to_owned()),
            chain: result.chain.clone(),
            budgets: result.budgets.clone(),
            evidence: serde_json::json!({
                "reason": result.reason.as_str(),
                "grant_id": result.grant_id,
                "delegation_id": result.delegation_id,
                "depth": result.depth,
                "hop": result.hop,
                "dimension": result.dimension.map(crate::authority::Dimension::as_str),
                "missing_parent_id": result.missing_parent_id,
                "expired_parent_id": result.expired_parent_id,
                "depth_exceeded": result.depth_exceeded,
                "cycle_at": result.cycle_at,
                "warnings": result.warnings,
            }),
        }
    }

    /// The refusal of a failed evaluation.
    pub fn refusal(&self, action: &str) -> Error {
        let detail = match &self.grant_id {
            Some(grant) => format!("{action}: grant '{grant}' does not authorise it"),
            None => format!("{action}: no grant in the authority section covers this principal and action"),
        };
        Error::AuthorityDenied {
            reason: self.reason.clone(),
            grant_id: self.grant_id.clone(),
            hop: self.hop.clone(),
            dimension: self.dimension.clone(),
            detail,
        }
    }

    /// A refusal decided later (a revocation found inside the transaction, a budget), on the
    /// grant that passed.
    pub(super) fn refused(&self, reason: &str, grant_id: Option<String>, detail: String) -> Error {
        Error::AuthorityDenied {
            reason: reason.to_owned(),
            grant_id: grant_id.or_else(|| self.grant_id.clone()),
            hop: self.hop.clone(),
            dimension: None,
            detail,
        }
    }

    /// What the receipts of this proposal say about authority.
    pub fn receipt(&self, charges: &[Charge]) -> ReceiptAuthority {
        ReceiptAuthority { grant_id: self.grant_id.clone(), hop: self.hop.clone(), budget_charges: charges.to_vec() }
    }
}

/// One delegation id as the read found it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum RowState {
    /// The row, which passed its integrity check.
    Found(StoredDelegation),
    /// No delegation has this id.
    Absent,
    /// The row failed its integrity check or names another id; evaluation answers
    /// `authority_unreadable`.
    Unreadable(String),
}

/// The ids read under one index key, or the `(id, detail)` of the entry that failed its check.
pub type CandidateIds = std::result::Result<Vec<String>, (String, String)>;

/// The delegation rows one evaluation needs, fetched in one read transaction, and how many
/// store reads that took. A [`DelegationSource`](crate::authority::source::DelegationSource) over exactly those rows: asking it for anything
/// it did not fetch is a fault (a bug), never an absence.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthorityRows {
    /// The ids under each index key read (or the unreadable id that stopped it).
    pub candidates: Vec<(IndexKey, CandidateIds)>,
    /// Every delegation row fetched, by id (absent and unreadable ones included).
    pub rows: BTreeMap<String, RowState>,
    /// Store reads made: point lookups, ranges, and rows returned by ranges.
    pub reads: u64,
}

/// Everything creating one delegation needs inside the transaction: the document's root grants
/// (as their storage encoding), the request, and the id minted for it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DelegateOp {
    /// The document's root grants, as `(grant id, grant JSON)`.
    pub roots: Vec<(String, String)>,
    /// The document's bound on delegation depth.
    pub max_depth: u32,
    /// The root grant id or `dlg_…` id the new delegation narrows.
    pub parent_id: String,
    /// The child grant, in its storage encoding.
    pub grant_json: String,
    /// The id the caller's grant carried: empty, or refused (`id_assigned`) by the planner.
    pub grant_id: String,
    /// Who is delegating.
    pub by: Principal,
    /// When the delegating principal's credential expires, if it does.
    pub by_expires_at: Option<Micros>,
    /// How the delegation is made: `api`, `cli` or `hop`.
    pub via: String,
    /// The `dlg_…` id minted for the new delegation.
    pub new_id: String,
}

/// Who a sweep revokes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Sweep {
    /// Every delegation this agent (as this user, when given) created.
    CreatedBy {
        /// The agent whose delegations are revoked.
        agent: String,
        /// Only those it created as this user, when given.
        user: Option<String>,
    },
    /// Every delegation beneath this id (a root grant or a delegation), at any depth.
    Under {
        /// A root grant id or `dlg_…` id; its descendants are revoked.
        id: String,
    },
}

// ---- retention ----------------------------------------------------------------------------------

/// What a retention write does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Retention {
    /// Delete the receipts through this checkpoint's size, and the events of their time.
    Prune {
        /// The checkpoint pruned through.
        checkpoint: u64,
    },
    /// Place a hold under `name`.
    PlaceHold {
        /// The hold's name.
        name: String,
    },
    /// Release the standing hold `name`.
    ReleaseHold {
        /// The hold's name.
        name: String,
    },
}

/// One retention write, with who asks and why, and the ids its receipt takes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RetentionOp {
    /// What is done.
    pub what: Retention,
    /// Who does it (a person's name; the receipt's `principal.user`).
    pub by: String,
    /// Why.
    pub reason: String,
    /// The environment the receipt names (the kernel's).
    pub environment: String,
    /// The receipt's action id.
    pub action_id: String,
    /// The receipt's id.
    pub receipt_id: String,
}

/// What a retention write did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetentionDone {
    /// Its own receipt's seq.
    pub receipt_seq: u64,
    /// Its own receipt's id.
    pub receipt_id: String,
    /// The hold as stored (holds).
    pub hold: Option<Hold>,
    /// The pruned prefix now (prunes).
    pub pruned: Option<PrunedPrefix>,
    /// The receipts this prune deleted.
    pub receipts_deleted: u64,
}

// ---- scoped grants -------------------------------------------------------------------------------

/// An answer that grants a request and makes a scoped grant, with the ids its write takes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScopedGrantOp {
    /// The request answered.
    pub approval_id: String,
    /// Who answers.
    pub approver: Approver,
    /// What the approver asks for.
    pub scope: Scope,
    /// Refuse unless the request binds this hash (the action the approver was shown).
    pub expect_hash: Option<String>,
    /// The policy hash the caps were read under: refused unless the request names it.
    pub policy_hash: Option<String>,
    /// The document's caps for the request's rule; `None`: it allows no scoped grant.
    pub limits: Option<ScopeLimits>,
    /// The id minted for the grant.
    pub grant_id: String,
    /// The environment the receipt names (the kernel's).
    pub environment: String,
    /// The receipt's action id.
    pub action_id: String,
    /// The receipt's id.
    pub receipt_id: String,
}

/// A revocation of one scoped grant, with the ids its receipt takes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RevokeScopedOp {
    /// The grant revoked.
    pub grant_id: String,
    /// Who revokes it.
    pub by: String,
    /// Why.
    pub reason: String,
    /// The environment the receipt names (the kernel's).
    pub environment: String,
    /// The receipt's action id.
    pub action_id: String,
    /// The receipt's id.
    pub receipt_id: String,
}

/// What a scoped grant's write did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScopedGrantDone {
    /// The request as the answer left it (granted), when the write answered one.
    pub approval: Option<ApprovalRecord>,
    /// The grant as stored.
    pub grant: ScopedGrant,
    /// Its own receipt's seq.
    pub receipt_seq: u64,
    /// Its own receipt's id.
    pub receipt_id: String,
}

impl ScopedGrantDone {
    /// `{"grant", "approval", "receipt_id", "receipt_seq"}` as `warden approve --scope-* --json`,
    /// `warden grants revoke --json`, the operator's tools and the C ABI show it (`approval` is
    /// `null` for a revocation); `now` decides the grant's `state`.
    pub fn to_json(&self, now: Micros) -> serde_json::Value {
        serde_json::json!({
            "grant": self.grant.to_json(now),
            "approval": self.approval.as_ref().map(ApprovalRecord::to_json),
            "receipt_id": self.receipt_id,
            "receipt_seq": self.receipt_seq,
        })
    }
}

// ---- evidence ------------------------------------------------------------------------------------

/// What a proof read asks for.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProofAsk {
    /// The root of the first `size` receipts.
    Root {
        /// The tree size.
        size: u64,
    },
    /// The audit path of the receipt at `seq` in the tree of `size`.
    Inclusion {
        /// The receipt's seq (leaf `seq - 1`).
        seq: u64,
        /// The tree size.
        size: u64,
    },
    /// The consistency proof from the tree of `old` to the tree of `new`.
    Consistency {
        /// The older size.
        old: u64,
        /// The newer size.
        new: u64,
    },
    /// The complete subtrees of the tree of `size`, largest first.
    Frontier {
        /// The tree size.
        size: u64,
    },
}

// ---- effects -------------------------------------------------------------------------------------

/// What a reconcile hook may say about an AMBIGUOUS effect: it happened, it provably did not,
/// or it cannot tell (which moves nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ReconcileAnswer {
    /// The effect happened: it is resolved COMMITTED.
    Committed,
    /// The effect provably did not happen: it is resolved FAILED.
    NotExecuted,
    /// The hook cannot tell: the effect stays AMBIGUOUS.
    Unknown,
}

impl ReconcileAnswer {
    /// The answer as hooks and events spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            ReconcileAnswer::Committed => "committed",
            ReconcileAnswer::NotExecuted => "not_executed",
            ReconcileAnswer::Unknown => "unknown",
        }
    }

    /// The answer a hook spelled (`committed`, `not_executed`, `unknown`), or `None`.
    pub fn parse(text: &str) -> Option<ReconcileAnswer> {
        match text {
            "committed" => Some(ReconcileAnswer::Committed),
            "not_executed" => Some(ReconcileAnswer::NotExecuted),
            "unknown" => Some(ReconcileAnswer::Unknown),
            _ => None,
        }
    }
}

/// A reply of the wrong kind: the two ends disagree about the protocol.
pub(super) fn unexpected(what: &str) -> Error {
    Error::store(StoreFaultKind::Version, format!("the store answered a {what} request with something else; every process using one store must run the same Warden version"))
}

#[cfg(test)]
mod tests {
    use super::{EffectRecord, EffectState, Granted, Write, WriteReply};
    use crate::store::WriteOp;

    fn granted(lease_expires_at: Option<i64>, holds_key: bool) -> WriteReply {
        WriteReply::Granted(Granted {
            attempt: 1,
            lease_expires_at,
            approval_id: None,
            approver: None,
            started_at: 0,
            holds_key,
            blocked: None,
            charged: false,
            decided_in: None,
            scoped_grant_id: None,
        })
    }

    #[test]
    fn a_grant_from_an_owner_that_sends_no_decision_time_still_reads() {
        // What an owner process of the previous version sends for a grant, over the socket.
        let older = r#"{"granted":{"attempt":1,"lease_expires_at":5,"approval_id":"apr_1","approver":"bob","started_at":2,"holds_key":true,"blocked":null,"charged":false}}"#;
        let Ok(WriteReply::Granted(read)) = serde_json::from_str::<WriteReply>(older) else { panic!("unreadable") };
        assert_eq!((read.approval_id.as_deref(), read.decided_in), (Some("apr_1"), None));
        let newer = serde_json::to_string(&granted(Some(5), true)).unwrap();
        assert!(newer.contains("\"decided_in\":null"), "{newer}");
    }

    #[test]
    fn an_outcome_asks_for_its_receipt_only_when_it_says_so_and_the_answer_names_it() {
        let principal = crate::Principal::new("agent", None).unwrap();
        let action = crate::action::Action::new("a", serde_json::json!({}), principal, None, "production").unwrap();
        let ruling = crate::decision::Ruling {
            decision: crate::decision::Decision::Allow,
            reason: "decision".into(),
            warnings: Vec::new(),
        };
        let draft = super::super::propose::draft_for("rct_1".into(), &action, "sha256:0", &ruling);
        let finish = super::Finish {
            action,
            effect_key: None,
            attempt: 1,
            holds_key: false,
            draft,
            would_have: None,
            outcome: crate::effect::Outcome::Ambiguous("timeout".into()),
            report_receipt: true,
        };
        let mut sent = serde_json::to_value(Write::Finish(Box::new(finish))).unwrap();
        assert_eq!(sent["report_receipt"], true);
        // What a sender of the previous version sends: no such field, so no such answer.
        sent.as_object_mut().unwrap().remove("report_receipt");
        let Ok(Write::Finish(read)) = serde_json::from_value::<Write>(sent) else { panic!("unreadable") };
        assert!(!read.report_receipt);
        let answer = serde_json::to_string(&WriteReply::Receipt { seq: 7, hash: "sha256:ab".into() }).unwrap();
        assert_eq!(answer, r#"{"receipt":{"seq":7,"hash":"sha256:ab"}}"#);
        let Ok(WriteReply::Receipt { seq, hash }) = serde_json::from_str::<WriteReply>(&answer) else { panic!() };
        assert_eq!((seq, hash.as_str()), (7, "sha256:ab"));
    }

    fn lapsed(reply: WriteReply, now: i64) -> bool {
        matches!(Write::confirmed_late(reply, now), WriteReply::Lapsed(_))
    }

    fn reserved(lease_expires_at: Option<i64>, state: EffectState) -> WriteReply {
        WriteReply::Effect(EffectRecord {
            effect_key: "k".into(),
            state,
            action_id: "act_1".into(),
            action_name: "a".into(),
            action_hash: "sha256:0".into(),
            attempt: 1,
            created_at: 0,
            updated_at: 0,
            lease_expires_at,
            result: None,
            error: None,
            resolved_by: None,
            approval_id: None,
        })
    }

    #[test]
    fn a_claim_confirmed_at_or_after_its_lease_lapse_is_lapsed_and_only_a_reservation_is() {
        let lapsed_claim = |reply, now| matches!(Write::confirmed_late(reply, now), WriteReply::LapsedClaim(_));
        assert!(lapsed_claim(reserved(Some(1_000), EffectState::Reserved), 1_000), "at the instant");
        assert!(lapsed_claim(reserved(Some(1_000), EffectState::Reserved), 1_001), "one step past");
        assert!(!lapsed_claim(reserved(Some(1_000), EffectState::Reserved), 999), "one step before");
        assert!(!lapsed_claim(reserved(None, EffectState::Reserved), 5_000), "no lease");
        // A record in any other state (an extended or begun lease, a resolution) is kept.
        assert!(!lapsed_claim(reserved(Some(1_000), EffectState::Executing), 1_001));
        assert!(!lapsed_claim(reserved(Some(1_000), EffectState::Committed), 1_001));
    }

    #[test]
    fn a_permit_confirmed_at_or_after_its_lease_lapse_is_lapsed_and_one_microsecond_before_is_not() {
        assert!(lapsed(granted(Some(1_000), true), 1_000), "at the instant");
        assert!(lapsed(granted(Some(1_000), true), 1_001), "one step past");
        assert!(!lapsed(granted(Some(1_000), true), 999), "one step before");
        // No key held, or no lease: nothing to lapse.
        assert!(!lapsed(granted(Some(1_000), false), 5_000));
        assert!(!lapsed(granted(None, true), 5_000));
        // Any other reply is kept as it is.
        assert!(matches!(Write::confirmed_late(WriteReply::Done, 5_000), WriteReply::Done));
    }
}
