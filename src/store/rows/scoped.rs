//! The scoped grants' rows, written once for every engine: each grant under its id
//! (`scoped_grants`, kept for good) and an index by action name (`scoped_grants_by_action`, keyed
//! (action name, grant id), no value) of the grants that may still cover something, so a proposal
//! reads only those of its own action: a grant leaves it when used up or revoked, and an expired
//! one when the first proposal of its action reads it. Whether a grant
//! covers a proposal is the kernel's (`approval::scope::applies`); these read, check and write.

use super::access::{each, read, write, Reads, Writes};
use super::codec::damaged;
use super::{KeyView, Part, Put, RowRead, Scan, Table};
use crate::approval::scope::ScopedGrant;
use crate::error::Result;
use crate::store::boundary::GrantReads;

use Part::Text;

/// The grant filed under `id`, checked to be filed under its own id.
fn grant(rows: &dyn RowRead, id: &str) -> Result<Option<ScopedGrant>> {
    let key = [Text(id)];
    read::<ScopedGrant>(rows, Table::ScopedGrants, &key)?.map(|grant| filed(&key, grant)).transpose()
}

/// `grant`, when filed under its own id; damage otherwise.
pub(super) fn filed(key: &[Part<'_>], grant: ScopedGrant) -> Result<ScopedGrant> {
    match key {
        [Text(id)] if *id == grant.grant_id => Ok(grant),
        _ => Err(damaged(
            Table::ScopedGrants.name(),
            &KeyView(key),
            &format!("holds the record of the scoped grant {}", grant.grant_id),
        )),
    }
}

/// The grants the index lists under `action_name`, oldest id first; an index entry naming a
/// missing grant, or a grant of another action, is damage.
fn for_action(rows: &dyn RowRead, action_name: &str) -> Result<Vec<ScopedGrant>> {
    let prefix = [Text(action_name)];
    let mut ids = Vec::new();
    each::<()>(rows, Table::ScopedGrantsByAction, &Scan::under(&prefix), |key, ()| {
        if let [_, Text(id)] = key {
            ids.push((*id).to_owned());
        }
        Ok(true)
    })?;
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        let index_key = [Text(action_name), Text(&id)];
        match grant(rows, &id)? {
            Some(found) if found.action_name == action_name => out.push(found),
            Some(_) => {
                return Err(damaged(
                    Table::ScopedGrantsByAction.name(),
                    &KeyView(&index_key),
                    "points at a scoped grant of another action",
                ))
            }
            None => {
                return Err(damaged(
                    Table::ScopedGrantsByAction.name(),
                    &KeyView(&index_key),
                    "points at a scoped grant that is missing",
                ))
            }
        }
    }
    Ok(out)
}

/// Every grant, by id.
fn all(rows: &dyn RowRead) -> Result<Vec<ScopedGrant>> {
    let mut out = Vec::new();
    each::<ScopedGrant>(rows, Table::ScopedGrants, &Scan::all(), |key, found| {
        out.push(filed(key, found)?);
        Ok(true)
    })?;
    Ok(out)
}

impl Writes<'_> {
    /// Write a grant's row (replacing the one under its id), and write or delete its index entry.
    pub(super) fn put_scoped_grant_row(&mut self, grant: &ScopedGrant, indexed: bool) -> Result<()> {
        write(self.write_rows(), Table::ScopedGrants, &[Text(&grant.grant_id)], grant, Put::Replace)?;
        let index = [Text(&grant.action_name), Text(&grant.grant_id)];
        if indexed {
            write(self.write_rows(), Table::ScopedGrantsByAction, &index, &(), Put::Replace)
        } else {
            self.write_rows().delete(Table::ScopedGrantsByAction, &index)
        }
    }
}

macro_rules! grant_reads {
    ($type:ty, $rows:ident => $get:expr) => {
        impl GrantReads for $type {
            fn scoped_grant(&self, grant_id: &str) -> Result<Option<ScopedGrant>> {
                let $rows = self;
                grant($get, grant_id)
            }
            fn scoped_grants_for(&self, action_name: &str) -> Result<Vec<ScopedGrant>> {
                let $rows = self;
                for_action($get, action_name)
            }
            fn scoped_grants(&self) -> Result<Vec<ScopedGrant>> {
                let $rows = self;
                all($get)
            }
        }
    };
}

grant_reads!(Reads<'_>, reads => reads.rows());
grant_reads!(Writes<'_>, writes => writes.read_rows());
