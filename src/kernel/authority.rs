//! Authority in the store: the rows one evaluation reads, delegation and revocation as
//! operations, and the authority checks of the reservation's transaction (the deciding chain's
//! revocations re-read, the budgets charged).
//!
//! Evaluation runs in the caller, against the document it holds, over the rows one read
//! operation fetched ([`AuthorityRows`]): the two index ranges of the principal's agent and the
//! action's first segment (or the one hop presented), and, for each candidate whose shape matches
//! the action, its chain up to the depth bound. That is everything `authority::evaluate` asks
//! for, and nothing more: the reads do not grow with the delegations stored.
//!
//! Creation and revocation decide and write in one write transaction (`apply_delegate`,
//! `apply_revoke`): a parent revoked while a child is being created cannot slip between the
//! check and the insert.

use crate::action::{Action, Principal};
use crate::authority::record::{parse_delegation, DelegationRecord, StoredDelegation};
use crate::authority::revoke::{descendants, plan_revocation, RevocationError, RevocationPlan};
use crate::authority::source::{lookup_keys, DelegationSource, IndexKey, SourceError};
use crate::authority::{
    grant_from_json, grant_to_json, plan_delegation, Authority, Charge, CreatedVia, CreationError, Grant, Proposal,
    Revocation,
};
use crate::clock::Micros;
use crate::error::{Error, InvalidInputKind, Result, StoreFaultKind};
use crate::event::EventKind;
use crate::store::{ReadTx, WriteTx};

use super::ops::{unexpected, Read, ReadReply, Write, WriteReply};
use super::Kernel;

pub use super::ops::{AuthorityRows, AuthorityStamp, CandidateIds, DelegateOp, RowState, Sweep};

/// The AUTHORITY_DENIED data for a refusal.
pub(super) fn denial_evidence(stamp: Option<&AuthorityStamp>, refusal: &Error) -> serde_json::Value {
    let mut data =
        stamp.map(|s| s.evidence.clone()).filter(serde_json::Value::is_object).unwrap_or_else(|| serde_json::json!({}));
    if let (Some(map), Error::AuthorityDenied { reason, grant_id, .. }) = (data.as_object_mut(), refusal) {
        map.insert("reason".into(), reason.clone().into());
        map.insert("grant_id".into(), grant_id.clone().into());
    }
    data
}

// ---- the rows one evaluation reads ---------------------------------------------------------------

fn not_fetched(what: &str) -> SourceError {
    SourceError::Fault(format!(
        "{what} was not among the rows read for this evaluation; nothing was decided (this is a bug in Warden)"
    ))
}

impl DelegationSource for AuthorityRows {
    fn delegation(&self, delegation_id: &str) -> std::result::Result<Option<StoredDelegation>, SourceError> {
        match self.rows.get(delegation_id) {
            Some(RowState::Found(stored)) => Ok(Some(stored.clone())),
            Some(RowState::Absent) => Ok(None),
            Some(RowState::Unreadable(detail)) => {
                Err(SourceError::Unreadable { delegation_id: delegation_id.to_owned(), detail: detail.clone() })
            }
            None => Err(not_fetched(&format!("delegation '{delegation_id}'"))),
        }
    }

    fn candidates(&self, key: &IndexKey) -> std::result::Result<Vec<StoredDelegation>, SourceError> {
        let Some((_, found)) = self.candidates.iter().find(|(read, _)| read == key) else {
            return Err(not_fetched("an index key"));
        };
        match found {
            Err((delegation_id, detail)) => {
                Err(SourceError::Unreadable { delegation_id: delegation_id.clone(), detail: detail.clone() })
            }
            Ok(ids) => ids.iter().filter_map(|id| self.delegation(id).transpose()).collect(),
        }
    }

    fn children(&self, _: &str) -> std::result::Result<Vec<String>, SourceError> {
        Err(not_fetched("a children list"))
    }
}

/// A row that does not read is damaged; a store that fails is an I/O fault.
pub(crate) fn source_fault(error: SourceError) -> Error {
    let kind = match error {
        SourceError::Unreadable { .. } => StoreFaultKind::Damaged,
        SourceError::Fault(_) => StoreFaultKind::Io,
    };
    Error::store(kind, error.to_string())
}

impl AuthorityRows {
    /// Fetch `id` once; a fault of the store is an error, an unreadable row a state.
    fn fetch(&mut self, source: &dyn DelegationSource, id: &str) -> Result<Option<StoredDelegation>> {
        if let Some(state) = self.rows.get(id) {
            return Ok(match state {
                RowState::Found(stored) => Some(stored.clone()),
                _ => None,
            });
        }
        let state = match source.delegation(id) {
            Ok(Some(stored)) => RowState::Found(stored),
            Ok(None) => RowState::Absent,
            Err(SourceError::Unreadable { detail, .. }) => RowState::Unreadable(detail),
            Err(fault @ SourceError::Fault(_)) => return Err(source_fault(fault)),
        };
        let found = match &state {
            RowState::Found(stored) => Some(stored.clone()),
            _ => None,
        };
        self.rows.insert(id.to_owned(), state);
        Ok(found)
    }
}

/// The read operation: the candidates for `action` (or the one `hop`), and each shape-matching
/// candidate's chain up to `bound` links — what `chain::walk` would ask for.
pub(super) fn read_rows(rx: &ReadTx<'_>, action: &Action, hop: Option<&str>, bound: u32) -> Result<AuthorityRows> {
    let source = rx.delegation_source()?;
    let mut rows = AuthorityRows::default();
    let mut leaves: Vec<StoredDelegation> = Vec::new();
    match hop {
        Some(hop) => leaves.extend(rows.fetch(&*source, hop)?),
        None => {
            for key in lookup_keys(&action.principal.agent, &action.name) {
                match source.candidates(&key) {
                    Ok(found) => {
                        let ids = found.iter().map(|s| s.record.delegation_id.clone()).collect();
                        for stored in &found {
                            rows.rows.insert(stored.record.delegation_id.clone(), RowState::Found(stored.clone()));
                        }
                        leaves.extend(found);
                        rows.candidates.push((key, Ok(ids)));
                    }
                    Err(SourceError::Unreadable { delegation_id, detail }) => {
                        rows.candidates.push((key, Err((delegation_id, detail))));
                    }
                    Err(fault @ SourceError::Fault(_)) => return Err(source_fault(fault)),
                }
            }
        }
    }
    for leaf in leaves {
        // Evaluation walks only the candidates whose shape matches; an unparseable one is
        // reported unreadable before any walk.
        match parse_delegation(&leaf) {
            Ok(delegation) if delegation.grant.unmatched_shape(action).is_none() => {}
            _ => continue,
        }
        let mut seen = std::collections::HashSet::from([leaf.record.delegation_id.clone()]);
        let mut parent = leaf.record.parent_id.clone();
        for _ in 0..bound.max(1) {
            if seen.contains(&parent) {
                break;
            }
            let Some(found) = rows.fetch(&*source, &parent)? else { break };
            seen.insert(parent);
            parent = found.record.parent_id;
        }
    }
    rows.reads = source.reads();
    Ok(rows)
}

// ---- delegation and revocation as operations ----------------------------------------------------

fn authority_of(roots: &[(String, String)], max_depth: u32) -> Result<Authority> {
    let mut grants = Vec::with_capacity(roots.len());
    for (id, json) in roots {
        grants.push(
            grant_from_json(json, id)
                .map_err(|e| Error::invalid(InvalidInputKind::Malformed, format!("root grant '{id}': {e}")))?,
        );
    }
    Authority::new(grants, max_depth).map_err(|message| Error::invalid(InvalidInputKind::Malformed, message))
}

pub(super) fn apply_delegate(tx: &mut WriteTx<'_>, op: &DelegateOp, now: Micros) -> Result<WriteReply> {
    let authority = authority_of(&op.roots, op.max_depth)?;
    let mut grant = grant_from_json(&op.grant_json, "")
        .map_err(|message| Error::invalid_at(InvalidInputKind::Malformed, "grant", message))?;
    grant.id = op.grant_id.clone();
    let via = CreatedVia::parse(&op.via).ok_or_else(|| {
        Error::invalid_at(
            InvalidInputKind::Malformed,
            "via",
            format!("created_via must be api, cli or hop, not {:?}", op.via),
        )
    })?;
    let proposal = Proposal {
        parent_id: &op.parent_id,
        grant: &grant,
        by: &op.by,
        by_expires_at: op.by_expires_at,
        via,
        now,
        new_id: &op.new_id,
    };
    let planned = plan_delegation(&authority, &proposal, &*tx.delegations());
    let by = serde_json::json!({"agent": op.by.agent, "user": op.by.user});
    match planned {
        Ok(new) => {
            tx.insert_delegation(&new)?;
            tx.event(
                EventKind::DELEGATION_CREATED,
                now,
                None,
                None,
                None,
                serde_json::json!({
                    "delegation_id": new.record.delegation_id, "parent_id": new.record.parent_id,
                    "depth": new.record.depth, "created_by": by, "created_via": new.record.created_via,
                    "grant": crate::canonical::parse_json(&new.record.grant_json).unwrap_or(serde_json::Value::Null),
                }),
            )?;
            Ok(WriteReply::Delegation(Box::new(new.record)))
        }
        Err(CreationError::Refused(refused)) => {
            let dimension = refused.dimension.map(|d| d.as_str().to_owned());
            tx.event(
                EventKind::DELEGATION_REJECTED,
                now,
                None,
                None,
                None,
                serde_json::json!({
                    "parent_id": refused.parent_id, "reason": refused.reason.as_str(), "dimension": dimension,
                    "created_by": by, "created_via": op.via,
                }),
            )?;
            Ok(WriteReply::Refused(Error::DelegationRefused {
                reason: refused.reason.as_str().to_owned(),
                parent_id: refused.parent_id,
                dimension,
                detail: refused.message,
            }))
        }
        Err(CreationError::InvalidGrant(message)) => {
            Err(Error::invalid_at(InvalidInputKind::Malformed, "grant", format!("the delegated grant: {message}")))
        }
        Err(CreationError::Fault(message)) => Err(Error::store(StoreFaultKind::Io, message)),
    }
}

/// Revoke one id inside `tx`: `Some(true)` written, `Some(false)` already revoked, `None`
/// unknown. A row that fails its check is revoked all the same: revoking is the safe direction,
/// and damage must not keep a delegation alive.
fn revoke_one(tx: &mut WriteTx<'_>, id: &str, by: Option<&str>, now: Micros) -> Result<Option<bool>> {
    let plan = plan_revocation(&*tx.delegations(), id, by, now);
    let (revocation, unreadable) = match plan {
        Ok(RevocationPlan::Revoke(revocation)) => (revocation, None),
        Ok(RevocationPlan::AlreadyRevoked { .. }) => return Ok(Some(false)),
        Err(RevocationError::Unknown(_)) => return Ok(None),
        Err(RevocationError::Unreadable(detail)) => (
            Revocation { delegation_id: id.to_owned(), revoked_at: now, revoked_by: by.map(str::to_owned) },
            Some(detail),
        ),
        Err(RevocationError::Fault(message)) => return Err(Error::store(StoreFaultKind::Io, message)),
    };
    if !tx.insert_revocation(&revocation)? {
        return Ok(Some(false));
    }
    tx.event(
        EventKind::DELEGATION_REVOKED,
        now,
        None,
        None,
        None,
        serde_json::json!({"delegation_id": id, "revoked_by": by, "unreadable": unreadable}),
    )?;
    Ok(Some(true))
}

pub(super) fn apply_revoke(tx: &mut WriteTx<'_>, id: &str, by: Option<&str>, now: Micros) -> Result<WriteReply> {
    match revoke_one(tx, id, by, now)? {
        Some(written) => Ok(WriteReply::Revoked(vec![(id.to_owned(), written)])),
        None => Ok(WriteReply::Refused(Error::NotFound(format!(
            "no delegation '{}'; nothing was revoked",
            crate::authority::pattern::shorten(id)
        )))),
    }
}

pub(super) fn apply_sweep(tx: &mut WriteTx<'_>, sweep: &Sweep, by: Option<&str>, now: Micros) -> Result<WriteReply> {
    let ids = match sweep {
        Sweep::CreatedBy { agent, user } => tx.delegations_created_by(agent, user.as_deref())?,
        Sweep::Under { id } => descendants(&*tx.delegations(), id).map_err(source_fault)?,
    };
    let mut revoked = Vec::with_capacity(ids.len());
    for id in ids {
        let written = revoke_one(tx, &id, by, now)?.unwrap_or(false);
        revoked.push((id, written));
    }
    Ok(WriteReply::Revoked(revoked))
}

// ---- inside the reservation's transaction --------------------------------------------------------

/// The authority checks of a reservation, before it writes: every delegation of the deciding
/// chain is still unrevoked (evaluation ran before this transaction), and every budget up the
/// chain has room for its charge. `Some(refusal)` refuses; nothing is written either way except
/// the running sums (a cache the next check would compute the same).
pub(super) fn recheck(
    tx: &mut WriteTx<'_>,
    stamp: Option<&AuthorityStamp>,
    charges: &[Charge],
    now: Micros,
) -> Result<Option<Error>> {
    let Some(stamp) = stamp else { return Ok(None) };
    if let Some(revoked) = first_revoked(tx, &stamp.chain)? {
        return Ok(Some(stamp.refused(
            crate::authority::AuthorityReason::Revoked.as_str(),
            None,
            format!("delegation '{revoked}' of the deciding chain was revoked before the reservation"),
        )));
    }
    let refusal = crate::authority::check_charges(charges, |charge| tx.budget_window_sum(charge, now))?;
    Ok(refusal.err().map(|refusal| {
        let grant = match &refusal {
            crate::authority::BudgetRefusal::Exhausted { grant_id, .. } => Some(grant_id.clone()),
            _ => None,
        };
        stamp.refused(refusal.reason(), grant, refusal.to_string())
    }))
}

fn first_revoked(tx: &WriteTx<'_>, chain: &[String]) -> Result<Option<String>> {
    for id in chain {
        if tx.is_revoked(id)? {
            return Ok(Some(id.clone()));
        }
    }
    Ok(None)
}

/// The revocation half of [`recheck`] alone (for the approval gate, which charges nothing).
pub(super) fn recheck_revocations(tx: &WriteTx<'_>, stamp: Option<&AuthorityStamp>) -> Result<Option<Error>> {
    let Some(stamp) = stamp else { return Ok(None) };
    Ok(first_revoked(tx, &stamp.chain)?.map(|revoked| {
        stamp.refused(
            crate::authority::AuthorityReason::Revoked.as_str(),
            None,
            format!("delegation '{revoked}' of the deciding chain was revoked"),
        )
    }))
}

// ---- the kernel's calls ---------------------------------------------------------------------------

/// How many delegations one read of [`Kernel::all_delegations`] lists.
pub const DELEGATION_PAGE: usize = 1000;

/// A delegation as listed: the row, its revocation, and the parsed grant when it parses.
#[derive(Debug, Clone, PartialEq)]
pub struct ListedDelegation {
    /// The row, with its revocation when revoked.
    pub stored: StoredDelegation,
    /// The grant the row holds, or why it does not parse.
    pub grant: std::result::Result<Grant, String>,
}

impl ListedDelegation {
    /// The delegation as the CLI's JSON listing shows it, revocation and readability included.
    pub fn to_json(&self) -> serde_json::Value {
        let record = &self.stored.record;
        let revocation = self.stored.revocation.as_ref();
        serde_json::json!({
            "delegation_id": record.delegation_id,
            "parent_id": record.parent_id,
            "depth": record.depth,
            "grant": crate::canonical::parse_json(&record.grant_json).unwrap_or(serde_json::Value::Null),
            "created_by": {"agent": record.created_by.agent, "user": record.created_by.user},
            "created_via": record.created_via,
            "created_at": crate::clock::render(record.created_at),
            "revoked": revocation.is_some(),
            "revoked_at": revocation.map(|r| crate::clock::render(r.revoked_at)),
            "revoked_by": revocation.and_then(|r| r.revoked_by.clone()),
            "readable": self.grant.is_ok(),
            "problem": self.grant.as_ref().err(),
        })
    }
}

impl Kernel {
    /// Create a delegation of `parent_id` under `authority` (the document's root grants), by
    /// `by`, in one write: checks in ctrlrun's order, the row and its indexes, and
    /// DELEGATION_CREATED — or DELEGATION_REJECTED and a `DelegationRefused`.
    pub fn delegate(
        &self,
        authority: &Authority,
        parent_id: &str,
        grant: &Grant,
        by: &Principal,
        by_expires_at: Option<Micros>,
        via: CreatedVia,
    ) -> Result<DelegationRecord> {
        by.validate()?;
        if parent_id.is_empty() {
            return Err(Error::invalid_at(
                InvalidInputKind::Missing,
                "parent_id",
                "the parent id is empty; name a root grant or a dlg_ id",
            ));
        }
        let new_id = crate::action::new_id(crate::action::IdKind::Delegation)
            .map_err(|e| Error::store(StoreFaultKind::Io, format!("no randomness for a delegation id: {e}")))?;
        let op = DelegateOp {
            roots: authority.grants.iter().map(|(id, grant)| (id.clone(), grant_to_json(grant))).collect(),
            max_depth: authority.max_delegation_depth,
            parent_id: parent_id.to_owned(),
            grant_json: grant_to_json(grant),
            grant_id: grant.id.clone(),
            by: by.clone(),
            by_expires_at,
            via: via.as_str().to_owned(),
            new_id,
        };
        self.guarded(|kernel, _| match kernel.write(Write::Delegate(Box::new(op)))? {
            WriteReply::Delegation(record) => Ok(*record),
            WriteReply::Refused(refusal) => Err(refusal),
            _ => Err(unexpected("delegation")),
        })
    }

    /// Revoke one delegation: `true` when this call revoked it, `false` when it already was. An
    /// unknown id is `NotFound`. Transitive by structure: every descendant is denied from now on.
    pub fn revoke(&self, delegation_id: &str, by: Option<&str>) -> Result<bool> {
        if let Some(by) = by {
            crate::approval::check_person_name("the revoker name", by)?;
        }
        let op = Write::Revoke { delegation_id: delegation_id.to_owned(), by: by.map(str::to_owned) };
        self.guarded(|kernel, _| match kernel.write(op)? {
            WriteReply::Revoked(list) => Ok(list.first().is_some_and(|(_, written)| *written)),
            WriteReply::Refused(refusal) => Err(refusal),
            _ => Err(unexpected("revocation")),
        })
    }

    /// Revoke every delegation a sweep selects, in one write: `(id, revoked by this call)`.
    pub fn revoke_sweep(&self, sweep: Sweep, by: Option<&str>) -> Result<Vec<(String, bool)>> {
        if let Some(by) = by {
            crate::approval::check_person_name("the revoker name", by)?;
        }
        let op = Write::RevokeSweep { sweep, by: by.map(str::to_owned) };
        self.guarded(|kernel, _| match kernel.write(op)? {
            WriteReply::Revoked(list) => Ok(list),
            WriteReply::Refused(refusal) => Err(refusal),
            _ => Err(unexpected("revocation")),
        })
    }

    /// Every stored delegation in id order, revoked ones included: the one paging loop (pages
    /// of [`DELEGATION_PAGE`], each its own read, so no read holds the whole table).
    pub fn all_delegations(&self) -> Result<Vec<ListedDelegation>> {
        let mut all: Vec<ListedDelegation> = Vec::new();
        loop {
            let after = all.last().map(|listed| listed.stored.record.delegation_id.clone());
            let page = self.delegations(after.as_deref(), DELEGATION_PAGE)?;
            let full = page.len() == DELEGATION_PAGE;
            all.extend(page);
            if !full {
                return Ok(all);
            }
        }
    }

    /// Delegations in id order after `after`, at most `limit`, revoked ones included.
    pub fn delegations(&self, after: Option<&str>, limit: usize) -> Result<Vec<ListedDelegation>> {
        let op = Read::Delegations { after: after.map(str::to_owned), limit };
        match self.guarded(|kernel, _| kernel.read(&op))? {
            ReadReply::Delegations(rows) => Ok(rows
                .into_iter()
                .map(|stored| {
                    let grant = parse_delegation(&stored).map(|d| d.grant).map_err(|e| e.to_string());
                    ListedDelegation { stored, grant }
                })
                .collect()),
            _ => Err(unexpected("delegations")),
        }
    }

    /// One delegation by id, with its revocation; a row failing its check is a store fault.
    pub fn delegation(&self, delegation_id: &str) -> Result<Option<ListedDelegation>> {
        let op = Read::Delegation { delegation_id: delegation_id.to_owned() };
        match self.guarded(|kernel, _| kernel.read(&op))? {
            ReadReply::Delegations(rows) => Ok(rows.into_iter().next().map(|stored| {
                let grant = parse_delegation(&stored).map(|d| d.grant).map_err(|e| e.to_string());
                ListedDelegation { stored, grant }
            })),
            _ => Err(unexpected("delegation")),
        }
    }

    /// The rows one evaluation of `action` reads (see `read_rows`).
    pub fn authority_rows(&self, action: &Action, hop: Option<&str>, bound: u32) -> Result<AuthorityRows> {
        let op = Read::AuthorityRows { action: Box::new(action.clone()), hop: hop.map(str::to_owned), bound };
        match self.guarded(|kernel, _| kernel.read(&op))? {
            ReadReply::AuthorityRows(rows) => Ok(*rows),
            _ => Err(unexpected("authority rows")),
        }
    }

    /// The unreleased amount charged to `(grant, metric)` in the window of `window_seconds`
    /// ending now, summed from the ledger.
    pub fn budget_spent(&self, grant_id: &str, metric: &str, window_seconds: u64) -> Result<u128> {
        let op = Read::BudgetSpent { grant_id: grant_id.to_owned(), metric: metric.to_owned(), window_seconds };
        match self.guarded(|kernel, _| kernel.read(&op))? {
            ReadReply::Amount(amount) => Ok(amount.parse().unwrap_or(u128::MAX)),
            _ => Err(unexpected("budget")),
        }
    }
}
