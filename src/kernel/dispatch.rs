//! Which concept applies each operation: the store calls `WriteOp::apply` and `ReadOp::run`,
//! and this file hands each variant of `ops::Write` and `ops::Read` to the function of its
//! concept (`propose`, `permit`, `effects`, `approvals`, `authority`, `evidence`, `retention`,
//! `scoped`). Nothing in the kernel names this file: it sits above every concept.

use crate::clock::Micros;
use crate::effect::EffectState;
use crate::error::Result;
use crate::receipt::ReceiptDraft;
use crate::store::{Prefetch, ReadOp, ReadTx, WriteOp, WriteTx};

use super::ops::{DoctorReport, Read, ReadReply, Write, WriteReply};

impl WriteOp for Write {
    type Reply = WriteReply;

    fn confirmed_late(reply: WriteReply, now: Micros) -> WriteReply {
        match reply {
            WriteReply::Granted(granted) if granted.holds_key && granted.lease_expires_at.is_some_and(|t| t <= now) => {
                WriteReply::Lapsed(granted)
            }
            WriteReply::Effect(record)
                if record.state == EffectState::Reserved && record.lease_expires_at.is_some_and(|t| t <= now) =>
            {
                WriteReply::LapsedClaim(record)
            }
            other => other,
        }
    }

    fn prefetch(&self) -> Vec<Prefetch> {
        let receipt = |draft: &ReceiptDraft| [Prefetch::receipt_id(&draft.receipt_id), Prefetch::chain_head()];
        match self {
            Write::Refuse { proposed, .. } => receipt(&proposed.draft).to_vec(),
            // The effect row, and the approval presented; a refusal's receipt is read when it
            // comes to that.
            Write::Reserve { proposed, presented, .. } | Write::Observe { proposed, presented } => proposed
                .effect_key
                .iter()
                .flat_map(|key| [Prefetch::effect(key), Prefetch::outcome_index(key)])
                .chain(presented.iter().map(|id| Prefetch::approval(id)))
                .collect(),
            Write::Finish(finish) => {
                finish.effect_key.iter().map(|key| Prefetch::effect(key)).chain(receipt(&finish.draft)).collect()
            }
            _ => Vec::new(),
        }
    }

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
            Write::Resolve { effect_key, to, resolver, expect_attempt } => {
                super::effects::apply_resolve(tx, effect_key, *to, resolver, *expect_attempt, now)
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
            Write::AppendCheckpoint(row) => super::evidence::apply_append(tx, row),
            Write::RecordAnchor(row) => super::evidence::apply_anchor(tx, row),
            Write::KeepPolicy { policy_hash, canonical } => {
                super::evidence::apply_keep_policy(tx, policy_hash, canonical)
            }
            Write::Retention(op) => super::retention::apply(tx, op, now),
            Write::ScopedGrant(op) => super::scoped::apply_grant(tx, op, now),
            Write::RevokeScopedGrant(op) => super::scoped::apply_revoke(tx, op, now),
        }
    }

    fn resend_safe(&self) -> bool {
        // An outcome lands once per receipt id (`apply_finish` checks), and a policy is kept once
        // per hash, so a lost answer is safely re-sent; everything else could apply twice.
        matches!(self, Write::Finish(_) | Write::KeepPolicy { .. })
    }
}

impl ReadOp for Read {
    type Reply = ReadReply;

    fn run(&self, rx: &ReadTx<'_>, now: Micros) -> Result<ReadReply> {
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
                    .map_err(super::authority::source_fault)?
                    .into_iter()
                    .collect(),
            ),
            Read::Checkpoints { from, limit } => ReadReply::Checkpoints(rx.checkpoints(*from, *limit)?),
            Read::Checkpoint { number: Some(number) } => {
                ReadReply::Checkpoints(rx.checkpoint(*number)?.into_iter().collect())
            }
            Read::Policy { policy_hash } => ReadReply::Policy(rx.policy(policy_hash)?),
            Read::Checkpoint { number: None } => ReadReply::Checkpoints(rx.last_checkpoint()?.into_iter().collect()),
            Read::Proof(ask) => super::evidence::run_proof(rx, ask)?,
            Read::CheckpointBasis { origin, due } => super::evidence::gather(rx, origin.as_deref(), due.as_ref(), now)?,
            Read::AnchorStates { sinks } => ReadReply::AnchorStates(super::evidence::anchor_states(rx, sinks)?),
            Read::Anchors { from, to } => ReadReply::Anchors(rx.anchors(*from, *to)?),
            Read::ChainSize => ReadReply::Count(rx.chain_size()?),
            Read::Holds => ReadReply::Holds(rx.holds()?),
            Read::ScopedGrants => ReadReply::ScopedGrants(rx.scoped_grants()?),
            Read::ScopedGrant { grant_id } => ReadReply::ScopedGrants(rx.scoped_grant(grant_id)?.into_iter().collect()),
            Read::Pruned => ReadReply::Pruned(rx.pruned()?.map(Box::new)),
            Read::BudgetSpent { grant_id, metric, window_seconds } => {
                ReadReply::Amount(rx.budget_spent(grant_id, metric, *window_seconds, now)?.to_string())
            }
        })
    }
}
