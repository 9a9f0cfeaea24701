//! Every state change the kernel makes, as a value: what one write transaction reads and
//! writes. The kernel builds an operation (outside any transaction: hashing, rendering, ids),
//! and the store applies it — in this process or in the process that owns the store — inside
//! a group-commit batch, reading the clock at that moment. The logic of each operation lives
//! with its concept (`propose`, `permit`, `effects`, `approvals`); this file only names them.

use serde::{Deserialize, Serialize};

use crate::action::Action;
use crate::approval::{ApprovalAsk, ApprovalRecord, Approver};
use crate::authority::DelegationSource;
use crate::clock::Micros;
use crate::decision::Ruling;
use crate::effect::{EffectRecord, EffectState, Outcome};
use crate::error::{Error, Result};
use crate::event::{Event, EventKind};
use crate::receipt::{ChainReport, ReceiptDraft, StoredReceipt};
use crate::snapshot_record::SnapshotRecord;
use crate::store::{Protocol, ReadOp, ReadTx, WriteOp, WriteTx};

use super::ReconcileAnswer;

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
    pub action: Action,
    pub action_hash: String,
    pub ruling: Ruling,
    /// The receipt this proposal writes if it ends here (times are set when applied).
    pub draft: ReceiptDraft,
    pub effect_key: Option<String>,
    pub lease: Micros,
    pub max_attempts: Option<u32>,
    /// What the authority axis decided (`None` without an `authority:` section).
    #[serde(default)]
    pub authority: Option<super::authority::AuthorityStamp>,
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
    pub action: Action,
    pub effect_key: Option<String>,
    pub attempt: u32,
    pub holds_key: bool,
    /// The receipt to write; its `receipt_id` makes a re-sent outcome land once.
    pub draft: ReceiptDraft,
    pub would_have: Option<serde_json::Value>,
    pub outcome: Outcome,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Write {
    /// A terminal refusal before any reservation: events, receipt.
    Refuse {
        proposed: Proposed,
        refusal: Error,
    },
    /// An `approve` decision without a presented approval: the effect check, then a new
    /// request (or a blocked receipt).
    Gate {
        proposed: Proposed,
        approval_id: String,
        ttl: Micros,
        ask: ApprovalAsk,
    },
    /// The permit: approval check and consume, reservation, events.
    Reserve {
        proposed: Proposed,
        presented: Option<String>,
        approval_required: bool,
    },
    /// Observe mode's permit.
    Observe {
        proposed: Proposed,
        presented: Option<String>,
    },
    RequestApproval {
        action: Action,
        action_hash: String,
        approval_id: String,
        ttl: Micros,
        ask: ApprovalAsk,
        policy_hash: Option<String>,
        policy_version: Option<String>,
    },
    /// One approver's grant or deny, compare-and-set against the row as this transaction reads
    /// it: concurrent answers serialize, each counted once or refused.
    Answer {
        approval_id: String,
        approver: Approver,
        note: Option<String>,
        grant: bool,
        ttl: Option<Micros>,
        /// Refuse unless the request binds this hash (the action the approver was shown).
        expect_hash: Option<String>,
    },
    Finish(Box<Finish>),
    ExtendLease {
        effect_key: String,
        action_id: String,
        attempt: u32,
        until: Micros,
    },
    Resolve {
        effect_key: String,
        to: EffectState,
        resolver: String,
    },
    Reconcile {
        effect_key: String,
        action_name: String,
        answer: ReconcileAnswer,
    },
    MarkAmbiguous {
        effect_key: String,
        /// The (`action_id`, `attempt`) the caller says holds the key; required while its
        /// lease is live.
        holder: Option<(String, u32)>,
        error: String,
    },
    /// The integrator API: consume an approval and reserve without beginning; with no key,
    /// only consume the approval.
    Claim {
        action: Action,
        action_hash: String,
        effect_key: Option<String>,
        presented: Option<String>,
        lease: Micros,
        max_attempts: Option<u32>,
    },
    Begin {
        effect_key: String,
        action_id: String,
        attempt: u32,
    },
    Complete {
        effect_key: String,
        action_id: String,
        attempt: u32,
        outcome: Outcome,
    },
    AppendSnapshot {
        record: SnapshotRecord,
        scopes: Vec<String>,
    },
    /// Create a delegation: the checks and the insert in one transaction.
    Delegate(Box<super::authority::DelegateOp>),
    Revoke {
        delegation_id: String,
        by: Option<String>,
    },
    RevokeSweep {
        sweep: super::authority::Sweep,
        by: Option<String>,
    },
    /// What became of one notification of a request (`APPROVAL_NOTIFIED`/`_NOTIFY_FAILED`).
    NotifyEvent {
        approval_id: String,
        kind: EventKind,
        data: serde_json::Value,
    },
    /// A permit's execution waits for input, or goes on after it (`EXECUTION_SUSPENDED`/
    /// `_RESUMED`), with the lease extended to `until` when given.
    Suspension(Box<Suspension>),
}

/// What `Permit::suspend`/`resume` write.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Suspension {
    pub action_id: String,
    pub effect_key: Option<String>,
    pub attempt: u32,
    pub holds_key: bool,
    pub resumed: bool,
    pub until: Option<Micros>,
    pub data: serde_json::Value,
}

/// A permit's grant, as the transaction decided it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Granted {
    pub attempt: u32,
    pub lease_expires_at: Option<Micros>,
    pub approval_id: Option<String>,
    pub approver: Option<String>,
    pub started_at: Micros,
    pub holds_key: bool,
    /// Observe mode: the first check enforce mode would have refused on.
    pub blocked: Option<String>,
    /// Whether the reservation charged budgets.
    #[serde(default)]
    pub charged: bool,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WriteReply {
    Granted(Granted),
    /// Refused by design; whatever the refusal keeps (receipt, an expired mark) is committed.
    Refused(Error),
    Approval(ApprovalRecord),
    /// The gate created this new request (the caller notifies, then reports ApprovalRequired).
    Requested(ApprovalRecord),
    Effect(EffectRecord),
    Snapshot(SnapshotRecord),
    Delegation(Box<crate::authority::DelegationRecord>),
    /// `(delegation id, revoked by this call)`.
    Revoked(Vec<(String, bool)>),
    Done,
}

impl WriteOp for Write {
    type Reply = WriteReply;

    fn apply(&self, tx: &mut WriteTx<'_>, now: Micros) -> Result<WriteReply> {
        match self {
            Write::Refuse { proposed, refusal } => {
                super::propose::apply_refuse(tx, proposed, None, refusal.clone(), now)
            }
            Write::Gate { proposed, approval_id, ttl, ask } => {
                super::propose::apply_gate(tx, proposed, approval_id, *ttl, ask, now)
            }
            Write::Reserve { proposed, presented, approval_required } => {
                super::propose::apply_reserve(tx, proposed, presented.as_deref(), *approval_required, now)
            }
            Write::Observe { proposed, presented } => {
                super::propose::apply_observe(tx, proposed, presented.as_deref(), now)
            }
            Write::RequestApproval { .. } => super::approvals::apply_request(tx, self, now),
            Write::Answer { .. } => super::approvals::apply_answer(tx, self, now),
            Write::Finish(finish) => super::permit::apply_finish(tx, finish, now),
            Write::ExtendLease { effect_key, action_id, attempt, until } => {
                super::permit::apply_extend(tx, effect_key, action_id, *attempt, *until, now)
            }
            Write::Resolve { effect_key, to, resolver } => {
                super::effects::apply_resolve(tx, effect_key, *to, resolver, now)
            }
            Write::Reconcile { effect_key, action_name, answer } => {
                super::effects::apply_reconcile(tx, effect_key, action_name, *answer, now)
            }
            Write::MarkAmbiguous { effect_key, holder, error } => super::effects::apply_mark_ambiguous(
                tx,
                effect_key,
                holder.as_ref().map(|(id, attempt)| (id.as_str(), *attempt)),
                error,
                now,
            ),
            Write::Claim { action, action_hash, effect_key, presented, lease, max_attempts } => {
                super::effects::apply_claim(
                    tx,
                    action,
                    action_hash,
                    effect_key.as_deref(),
                    presented.as_deref(),
                    *lease,
                    *max_attempts,
                    now,
                )
            }
            Write::Begin { effect_key, action_id, attempt } => {
                super::effects::apply_begin(tx, effect_key, action_id, *attempt, now)
            }
            Write::Complete { effect_key, action_id, attempt, outcome } => {
                super::effects::apply_complete(tx, effect_key, action_id, *attempt, outcome, now)
            }
            Write::AppendSnapshot { record, scopes } => {
                tx.append_snapshot(record.clone(), scopes).map(WriteReply::Snapshot)
            }
            Write::Delegate(op) => super::authority::apply_delegate(tx, op, now),
            Write::Revoke { delegation_id, by } => {
                super::authority::apply_revoke(tx, delegation_id, by.as_deref(), now)
            }
            Write::RevokeSweep { sweep, by } => super::authority::apply_sweep(tx, sweep, by.as_deref(), now),
            Write::NotifyEvent { approval_id, kind, data } => {
                super::approvals::apply_notify_event(tx, approval_id, *kind, data, now)
            }
            Write::Suspension(suspension) => super::permit::apply_suspension(tx, suspension, now),
        }
    }

    fn resend_safe(&self) -> bool {
        // An outcome lands once per receipt id (`apply_finish` checks), so a lost answer is
        // safely re-sent; everything else could apply twice.
        matches!(self, Write::Finish(_))
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Read {
    Effect {
        effect_key: String,
    },
    Effects {
        state: Option<EffectState>,
        limit: usize,
    },
    Approval {
        approval_id: String,
    },
    Pending,
    Receipts {
        from: u64,
        limit: usize,
    },
    LastReceipts {
        count: usize,
    },
    ReceiptCount,
    ReceiptSeq {
        receipt_id: String,
    },
    Events {
        after: u64,
        limit: usize,
    },
    VerifyChain,
    Snapshot {
        id: String,
    },
    SnapshotPage {
        scope: String,
        before: Option<u64>,
        limit: usize,
    },
    Doctor,
    /// The delegation rows one authority evaluation of `action` needs.
    AuthorityRows {
        action: Box<Action>,
        hop: Option<String>,
        bound: u32,
    },
    Delegations {
        after: Option<String>,
        limit: usize,
    },
    Delegation {
        delegation_id: String,
    },
    BudgetSpent {
        grant_id: String,
        metric: String,
        window_seconds: u64,
    },
}

/// What `warden doctor` learns from one read of the whole store.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DoctorReport {
    /// (table, rows checked, problems)
    pub tables: Vec<(String, u64, Vec<String>)>,
    pub chain: ChainReport,
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
    Effect(Option<EffectRecord>),
    Effects(Vec<EffectRecord>),
    Approval(Option<ApprovalRecord>),
    Approvals(Vec<ApprovalRecord>),
    Receipts(Vec<(u64, StoredReceipt)>),
    Count(u64),
    Seq(Option<u64>),
    Events(Vec<Event>),
    Chain(ChainReport),
    Snapshot(Option<SnapshotRecord>),
    SnapshotPage(Vec<SnapshotRecord>, bool),
    Doctor(Box<DoctorReport>),
    AuthorityRows(Box<super::authority::AuthorityRows>),
    Delegations(Vec<crate::authority::StoredDelegation>),
    /// A decimal amount (a `u128` does not travel in every JSON reader).
    Amount(String),
}

impl ReadOp for Read {
    type Reply = ReadReply;

    fn run(&self, rx: &ReadTx, now: Micros) -> Result<ReadReply> {
        Ok(match self {
            Read::Effect { effect_key } => ReadReply::Effect(rx.effect(effect_key)?),
            Read::Effects { state, limit } => ReadReply::Effects(rx.effects(*state, *limit)?),
            Read::Approval { approval_id } => ReadReply::Approval(rx.approval(approval_id)?),
            Read::Pending => ReadReply::Approvals(rx.pending_approvals(now)?),
            Read::Receipts { from, limit } => ReadReply::Receipts(rx.receipts(*from, *limit)?),
            Read::LastReceipts { count } => ReadReply::Receipts(rx.last_receipts(*count)?),
            Read::ReceiptCount => ReadReply::Count(rx.receipt_count()?),
            Read::ReceiptSeq { receipt_id } => ReadReply::Seq(rx.receipt_seq(receipt_id)?),
            Read::Events { after, limit } => ReadReply::Events(rx.events(*after, *limit)?),
            Read::VerifyChain => ReadReply::Chain(rx.verify_chain()?),
            Read::Snapshot { id } => ReadReply::Snapshot(rx.snapshot(id)?),
            Read::SnapshotPage { scope, before, limit } => {
                let (page, more) = rx.snapshot_page(scope, *before, *limit)?;
                ReadReply::SnapshotPage(page, more)
            }
            Read::Doctor => ReadReply::Doctor(Box::new(DoctorReport {
                tables: rx
                    .check_all()?
                    .into_iter()
                    .map(|(table, rows, problems)| (table.to_owned(), rows, problems))
                    .collect(),
                chain: rx.verify_chain()?,
                orphans: rx.orphans()?,
                bytes_in_use: rx.bytes_in_use()?,
            })),
            Read::AuthorityRows { action, hop, bound } => {
                ReadReply::AuthorityRows(Box::new(super::authority::read_rows(rx, action, hop.as_deref(), *bound)?))
            }
            Read::Delegations { after, limit } => ReadReply::Delegations(rx.delegation_page(after.as_deref(), *limit)?),
            Read::Delegation { delegation_id } => ReadReply::Delegations(
                rx.delegation_source()?
                    .delegation(delegation_id)
                    .map_err(|e| crate::error::Error::Store(e.to_string()))?
                    .into_iter()
                    .collect(),
            ),
            Read::BudgetSpent { grant_id, metric, window_seconds } => {
                ReadReply::Amount(rx.budget_spent(grant_id, metric, *window_seconds, now)?.to_string())
            }
        })
    }
}

/// A reply of the wrong kind: the two ends disagree about the protocol.
pub(super) fn unexpected(what: &str) -> Error {
    Error::Store(format!("the store answered a {what} request with something else; every process using one store must run the same Warden version"))
}
