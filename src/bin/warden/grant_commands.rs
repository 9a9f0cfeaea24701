//! Scoped grants at the CLI: `warden approve … --scope-uses N --scope-minutes M [--scope-fixed
//! POINTER]… [--scope-at-most POINTER=NUMBER]…` makes one (with the approval), `warden grants list`
//! shows them, `warden grants revoke sgr_… --by --reason` ends one, `warden inspect sgr_…` shows
//! one with its events and receipts.

use serde_json::json;

use warden::approval::check_person_name;
use warden::approval::scope::{Scope, ScopedGrant};
use warden::clock::render;
use warden::{Error, Kernel};

use crate::exit::Failure;
use crate::output::{document, shown, table};

/// The scope the approve flags ask for; `None` without `--scope-uses`. Each `--scope-at-most` is
/// `POINTER=NUMBER` (split at its last `=`).
pub fn scope_from_flags(
    uses: Option<u32>,
    minutes: Option<u32>,
    fixed: &[String],
    at_most: &[String],
) -> Result<Option<Scope>, Failure> {
    let Some(uses) = uses else {
        if minutes.is_some() || !fixed.is_empty() || !at_most.is_empty() {
            return Err(Failure::usage("--scope-minutes, --scope-fixed and --scope-at-most go with --scope-uses"));
        }
        return Ok(None);
    };
    let Some(minutes) = minutes else {
        return Err(Failure::usage("--scope-uses needs --scope-minutes (how long the grant lasts)"));
    };
    let mut bounds = Vec::with_capacity(at_most.len());
    for spec in at_most {
        let Some((pointer, bound)) = spec.rsplit_once('=') else {
            return Err(Failure::usage(format!(
                "--scope-at-most {} is POINTER=NUMBER, such as /amount=5000",
                shown(spec)
            )));
        };
        bounds.push((pointer.to_owned(), bound.to_owned()));
    }
    Ok(Some(Scope { uses, minutes, fixed: fixed.to_vec(), at_most: bounds }))
}

/// What the store refused: a refusal (exit 1) named `reason`; a fault stays a fault.
pub fn refusal(reason: &'static str) -> impl Fn(Error) -> Failure {
    move |error| match error {
        Error::InvalidInput(warden::error::InvalidInput { message, .. }) | Error::NotFound(message) => {
            Failure::check(reason, message)
        }
        other => other.into(),
    }
}

/// One line saying what a scoped grant covers.
pub fn describe(grant: &ScopedGrant) -> String {
    let mut shape: Vec<String> = grant.scope.fixed.iter().map(|pointer| format!("{pointer} fixed")).collect();
    shape.extend(grant.scope.at_most.iter().map(|(pointer, bound)| format!("{pointer} <= {bound}")));
    let shape = if shape.is_empty() { "any arguments".to_owned() } else { shape.join(", ") };
    format!(
        "scoped grant {}: the next {} {} proposals by {} decided by {} ({shape}), until {}",
        grant.grant_id,
        grant.scope.uses,
        shown(&grant.action_name),
        shown(&warden::approval::person::label(&grant.requested_by)),
        shown(&grant.rule),
        render(grant.expires_at)
    )
}

pub fn list(kernel: &Kernel, all: bool, json: bool) -> Result<String, Failure> {
    let now = kernel.now();
    let grants = kernel.scoped_grants(!all)?;
    if json {
        return Ok(document(&json!({"grants": grants.iter().map(|g| g.to_json(now)).collect::<Vec<_>>()})));
    }
    if grants.is_empty() {
        return Ok(if all { "no scoped grant was ever made\n" } else { "no scoped grant is live\n" }.to_owned());
    }
    let rows = grants
        .iter()
        .map(|grant| {
            vec![
                grant.grant_id.clone(),
                grant.state(now).as_str().to_owned(),
                shown(&grant.action_name),
                format!("{}/{}", grant.uses_left, grant.scope.uses),
                render(grant.expires_at),
                shown(&grant.approver),
                shown(&warden::approval::person::label(&grant.requested_by)),
            ]
        })
        .collect();
    Ok(table(Some(&["GRANT", "STATE", "ACTION", "USES LEFT", "EXPIRES", "APPROVER", "REQUESTER"]), rows))
}

pub fn revoke(kernel: &Kernel, id: &str, by: &str, reason: &str, json: bool) -> Result<String, Failure> {
    check_person_name("--by", by).map_err(|e| Failure::usage(e.to_string()))?;
    check_person_name("--reason", reason).map_err(|e| Failure::usage(e.to_string()))?;
    let done = kernel.revoke_scoped_grant(id, by, reason).map_err(refusal("revoke_refused"))?;
    Ok(if json {
        document(&done.to_json(kernel.now()))
    } else {
        format!(
            "scoped grant {} revoked with {} use(s) left: no later proposal is covered by it\nreceipt {} (seq {}) \
             records it\n",
            done.grant.grant_id, done.grant.uses_left, done.receipt_id, done.receipt_seq
        )
    })
}
