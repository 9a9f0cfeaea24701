//! Authority at the operator's shell: `delegate` (a grant file, as a named principal, recorded
//! `created_via: cli` — an assertion typed at a shell, not an act of the application),
//! `revoke` (one id, or a sweep by creator or beneath an id) and `delegations` (the listing).

use std::path::Path;

use serde_json::{json, Value};

use warden::authority::revoke::parse_created_by;
use warden::authority::CreatedVia;
use warden::document::{load_grant_file, Document};
use warden::kernel::authority::{ListedDelegation, Sweep};
use warden::pipeline::Warden;
use warden::Principal;

use crate::exit::Failure;
use crate::output::{document, shown};
use crate::store_commands::{open_store, open_store_to_read};

/// `AGENT` or `AGENT/USER` as a principal.
fn principal_of(value: &str, flag: &str) -> Result<Principal, Failure> {
    let (agent, user) = parse_created_by(value).map_err(|e| Failure::usage(e.replace("--created-by", flag)))?;
    Principal::new(&agent, user.as_deref()).map_err(|e| Failure::usage(format!("{flag}: {e}")))
}

/// `warden delegate --parent ID --file grant.yaml --as AGENT[/USER]`.
pub fn delegate(
    doc: Document,
    store: Option<&Path>,
    parent: &str,
    file: &Path,
    as_: &str,
    json_out: bool,
) -> Result<String, Failure> {
    let by = principal_of(as_, "--as")?;
    let grant = load_grant_file(file).map_err(|e| Failure::usage(e.to_string()))?;
    let kernel = open_store(store)?;
    let warden = Warden::open(kernel.store_path(), doc, crate::store_commands::cli_options())?;
    let id = warden.delegate(parent, &grant, &by, None, CreatedVia::Cli)?;
    let listed = warden.delegation(&id)?;
    if json_out {
        return Ok(document(&listed.map_or_else(|| json!({"delegation_id": id}), |d| d.to_json())));
    }
    Ok(format!("{id}\n  delegated under {} as {} (created_via cli)\n", shown(parent), shown(as_)))
}

/// `warden revoke ID`, `warden revoke --created-by P`, `warden revoke --under ID`.
pub fn revoke(
    store: Option<&Path>,
    id: Option<&str>,
    created_by: Option<&str>,
    under: Option<&str>,
    by: &str,
    json_out: bool,
) -> Result<String, Failure> {
    let kernel = open_store(store)?;
    let revoked: Vec<(String, bool)> = match (id, created_by, under) {
        (Some(id), None, None) => vec![(id.to_owned(), kernel.revoke(id, Some(by))?)],
        (None, Some(creator), None) => {
            let creator = principal_of(creator, "--created-by")?;
            kernel.revoke_sweep(Sweep::CreatedBy { agent: creator.agent, user: creator.user }, Some(by))?
        }
        (None, None, Some(under)) => kernel.revoke_sweep(Sweep::Under { id: under.to_owned() }, Some(by))?,
        _ => return Err(Failure::usage("give exactly one of ID, --created-by AGENT[/USER] or --under ID")),
    };
    if json_out {
        let list: Vec<Value> =
            revoked.iter().map(|(id, written)| json!({"delegation_id": id, "revoked": written})).collect();
        return Ok(document(&json!({"revoked_by": by, "delegations": list})));
    }
    if revoked.is_empty() {
        return Ok("nothing to revoke\n".to_owned());
    }
    let mut out = String::new();
    for (id, written) in &revoked {
        let what = if *written { "revoked" } else { "already revoked" };
        out.push_str(&format!("{id}  {what}\n"));
    }
    Ok(out)
}

/// `warden delegations [--json]`: every stored delegation, revoked ones included.
pub fn delegations(store: Option<&Path>, json_out: bool) -> Result<String, Failure> {
    let kernel = open_store_to_read(store)?;
    let all = kernel.all_delegations()?;
    if json_out {
        return Ok(document(&Value::Array(all.iter().map(ListedDelegation::to_json).collect())));
    }
    if all.is_empty() {
        return Ok("no delegations\n".to_owned());
    }
    let mut out = String::new();
    for listed in &all {
        let value = listed.to_json();
        let record = &listed.stored.record;
        let grantee = value["grant"]["subject"]["agent"].as_str().unwrap_or("?");
        let actions = value["grant"]["actions"]
            .as_array()
            .map_or_else(String::new, |list| list.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(","));
        let creator = match &record.created_by.user {
            Some(user) => format!("{}/{user}", record.created_by.agent),
            None => record.created_by.agent.clone(),
        };
        let state = match &listed.stored.revocation {
            Some(revocation) => format!(
                "REVOKED {} by {}",
                warden::clock::render(revocation.revoked_at),
                revocation.revoked_by.as_deref().unwrap_or("?")
            ),
            None if listed.grant.is_err() => "UNREADABLE".to_owned(),
            None => "live".to_owned(),
        };
        out.push_str(&format!(
            "{}  depth {}  under {}  to {}  [{}]  by {} via {}  {}\n",
            record.delegation_id,
            record.depth,
            shown(&record.parent_id),
            shown(grantee),
            shown(&actions),
            shown(&creator),
            record.created_via,
            state
        ));
    }
    Ok(out)
}

/// One budget and what its window holds now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetRow {
    /// The grant or delegation id the charges are kept under.
    pub grant_id: String,
    /// `document` (a grant of the document given) or `delegation`.
    pub from: &'static str,
    pub metric: String,
    pub window_seconds: u64,
    pub limit: u64,
    /// The unreleased amount charged in the window ending now (the ledger's sum).
    pub spent: u128,
}

impl BudgetRow {
    pub fn to_json(&self) -> Value {
        json!({
            "grant_id": self.grant_id,
            "from": self.from,
            "metric": self.metric,
            "window_seconds": self.window_seconds,
            "limit": self.limit,
            // Text: a sum past 2^53 stays exact in every JSON reader.
            "spent": self.spent.to_string(),
            "left": u128::from(self.limit).saturating_sub(self.spent).to_string(),
        })
    }
}

/// Every budget of the document's grants (when a document is given) and of the live
/// delegations, with its current sum, in that order. A delegation revoked, beneath a revoked
/// one, or unreadable charges nothing and is left out.
pub fn budget_rows(
    kernel: &warden::Kernel,
    authority: Option<&warden::authority::Authority>,
    delegations: &[ListedDelegation],
) -> Result<Vec<BudgetRow>, Failure> {
    let granted = authority.into_iter().flat_map(|a| a.grants.values()).map(|grant| ("document", grant));
    let revoked = revoked_or_beneath(delegations);
    let delegated = delegations
        .iter()
        .filter(|listed| !revoked.contains(listed.stored.record.delegation_id.as_str()))
        .filter_map(|listed| listed.grant.as_ref().ok())
        .map(|grant| ("delegation", grant));
    let mut rows = Vec::new();
    for (from, grant) in granted.chain(delegated) {
        for budget in grant.budgets.iter().flatten() {
            let spent = kernel.budget_spent(&grant.id, &budget.metric, budget.window_seconds)?;
            rows.push(BudgetRow {
                grant_id: grant.id.clone(),
                from,
                metric: budget.metric.clone(),
                window_seconds: budget.window_seconds,
                limit: budget.limit,
                spent,
            });
        }
    }
    Ok(rows)
}

/// The ids of the delegations revoked, or beneath a revoked one (the chain refuses those too),
/// among `delegations`.
pub fn revoked_or_beneath(delegations: &[ListedDelegation]) -> std::collections::BTreeSet<&str> {
    let parents: std::collections::BTreeMap<&str, &str> = delegations
        .iter()
        .map(|listed| (listed.stored.record.delegation_id.as_str(), listed.stored.record.parent_id.as_str()))
        .collect();
    let revoked: std::collections::BTreeSet<&str> = delegations
        .iter()
        .filter(|listed| listed.stored.revocation.is_some())
        .map(|listed| listed.stored.record.delegation_id.as_str())
        .collect();
    parents
        .keys()
        .copied()
        .filter(|id| {
            // Up the chain, at most one step per delegation (a cycle cannot loop).
            let mut at = *id;
            for _ in 0..=parents.len() {
                if revoked.contains(at) {
                    return true;
                }
                match parents.get(at) {
                    Some(parent) => at = parent,
                    None => return false,
                }
            }
            false
        })
        .collect()
}

/// `warden budgets [--json]`: each budget with what its window holds now; the document's
/// grants only with `--config` (the store keeps delegations, not the document).
pub fn budgets(store: Option<&Path>, doc: Option<&Document>, json_out: bool) -> Result<String, Failure> {
    let kernel = open_store_to_read(store)?;
    let delegations = kernel.all_delegations()?;
    let rows = budget_rows(&kernel, doc.and_then(|doc| doc.authority_config.as_ref()), &delegations)?;
    if json_out {
        return Ok(document(&Value::Array(rows.iter().map(BudgetRow::to_json).collect())));
    }
    let mut out = String::new();
    if doc.is_none() {
        out.push_str("(delegations only: give --config FILE for the document's grants)\n");
    }
    if rows.is_empty() {
        out.push_str("no budgets\n");
        return Ok(out);
    }
    let table_rows = rows
        .iter()
        .map(|row| {
            vec![
                shown(&row.grant_id),
                row.from.to_owned(),
                shown(&row.metric),
                format!("{}s", row.window_seconds),
                row.spent.to_string(),
                row.limit.to_string(),
                u128::from(row.limit).saturating_sub(row.spent).to_string(),
            ]
        })
        .collect();
    out.push_str(&crate::output::table(
        Some(&["GRANT", "FROM", "METRIC", "WINDOW", "SPENT", "LIMIT", "LEFT"]),
        table_rows,
    ));
    Ok(out)
}
