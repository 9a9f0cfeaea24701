//! Reading rows, shared by the write and the read transactions: each row decoded with the same
//! integrity check as the file's (`codec`), under the table name the checksum was made with.

use std::cell::Cell;

use super::sql::{column, int, uint, Ahead, Sql};
use crate::approval::ApprovalRecord;
use crate::authority::record::{DelegationRecord, Revocation, StoredDelegation};
use crate::authority::source::{DelegationSource, IndexKey, SourceError};
use crate::error::{Error, Result};
use crate::receipt::StoredReceipt;
use crate::store::boundary::CountedSource;
use crate::store::codec::decode;
use crate::store::records::StoredEffect;
use crate::store::tables::name;
use crate::store::tx::{bound, failed_proof};

/// The value column of the row keyed `key` in a text-keyed table, decoded.
pub(super) fn text_row<T: serde::de::DeserializeOwned>(
    sql: &Sql<'_>,
    select: &'static str,
    table: &'static str,
    key: &str,
) -> Result<Option<T>> {
    match sql.read_before(table, key)? {
        Ahead::Absent => return Ok(None),
        Ahead::Row(bytes) => return decode(table, &key, &bytes).map(Some),
        Ahead::NotRead => {}
    }
    let Some(row) = sql.row(select, &[&key], &format!("reading the {table} table"))? else { return Ok(None) };
    let bytes: Vec<u8> = column(&row, 0, table)?;
    decode(table, &key, &bytes).map(Some)
}

pub(super) fn effect_row(sql: &Sql<'_>, key: &str) -> Result<Option<StoredEffect>> {
    text_row(sql, "SELECT v FROM warden_effects WHERE k = $1", name::EFFECTS, key)
}

pub(super) fn approval(sql: &Sql<'_>, id: &str) -> Result<Option<ApprovalRecord>> {
    text_row::<ApprovalRecord>(sql, "SELECT v FROM warden_approvals WHERE k = $1", name::APPROVALS, id)?
        .map(|record| bound(record, id))
        .transpose()
}

pub(super) fn receipt_seq(sql: &Sql<'_>, receipt_id: &str) -> Result<Option<u64>> {
    text_row(sql, "SELECT v FROM warden_receipt_ids WHERE k = $1", name::RECEIPT_IDS, receipt_id)
}

pub(super) fn receipt(sql: &Sql<'_>, seq: u64) -> Result<Option<StoredReceipt>> {
    let at = int(seq, "receipt seq")?;
    let Some(row) = sql.row("SELECT v FROM warden_receipts WHERE seq = $1", &[&at], "reading a receipt")? else {
        return Ok(None);
    };
    let bytes: Vec<u8> = column(&row, 0, name::RECEIPTS)?;
    decode(name::RECEIPTS, &seq, &bytes).map(Some)
}

/// The seq of the last receipt that recorded an outcome for `key`.
pub(super) fn outcome_seq(sql: &Sql<'_>, key: &str) -> Result<Option<u64>> {
    text_row(sql, "SELECT v FROM warden_effect_receipts WHERE k = $1", name::EFFECT_RECEIPTS, key)
}

/// A FAILED row checked against the receipts (`tx::failed_proof`).
pub(super) fn check_failed(sql: &Sql<'_>, stored: &StoredEffect) -> Result<()> {
    let last = match outcome_seq(sql, &stored.effect_key)? {
        None => None,
        Some(seq) => Some((seq, receipt(sql, seq)?)),
    };
    failed_proof(stored, last)
}

/// Delegations read through one transaction, counting reads like the file's source.
pub(super) struct PgDelegations<'s, 'c> {
    pub(super) sql: &'s Sql<'c>,
    pub(super) reads: Cell<u64>,
}

fn source_fault(error: Error) -> SourceError {
    SourceError::Fault(error.to_string())
}

fn unreadable(delegation_id: &str, error: Error) -> SourceError {
    SourceError::Unreadable { delegation_id: delegation_id.to_owned(), detail: error.to_string() }
}

impl PgDelegations<'_, '_> {
    fn count(&self) {
        self.reads.set(self.reads.get().saturating_add(1));
    }

    fn bytes(&self, select: &'static str, id: &str, table: &'static str) -> Result<Option<Vec<u8>>, SourceError> {
        self.count();
        let row = self.sql.row(select, &[&id], &format!("reading the {table} table")).map_err(source_fault)?;
        row.map(|row| column::<Vec<u8>>(&row, 0, table)).transpose().map_err(source_fault)
    }

    /// Ids listed under a prefix of an index table, each entry's empty value checked.
    fn listed(
        &self,
        select: &'static str,
        params: &[&(dyn postgres::types::ToSql + Sync)],
        table: &'static str,
        check: impl Fn(&str, &[u8]) -> Result<()>,
    ) -> Result<Vec<String>, SourceError> {
        self.count();
        let rows = self.sql.rows(select, params, &format!("reading the {table} table")).map_err(source_fault)?;
        let mut ids = Vec::with_capacity(rows.len());
        for row in rows {
            self.count();
            let id: String = column(&row, 0, table).map_err(source_fault)?;
            let value: Vec<u8> = column(&row, 1, table).map_err(source_fault)?;
            check(&id, &value).map_err(|error| unreadable(&id, error))?;
            ids.push(id);
        }
        Ok(ids)
    }
}

impl CountedSource for PgDelegations<'_, '_> {
    fn reads(&self) -> u64 {
        self.reads.get()
    }
}

impl DelegationSource for PgDelegations<'_, '_> {
    fn delegation(&self, delegation_id: &str) -> Result<Option<StoredDelegation>, SourceError> {
        let Some(bytes) =
            self.bytes("SELECT v FROM warden_delegations WHERE k = $1", delegation_id, name::DELEGATIONS)?
        else {
            return Ok(None);
        };
        let record: DelegationRecord =
            decode(name::DELEGATIONS, &delegation_id, &bytes).map_err(|error| unreadable(delegation_id, error))?;
        if record.delegation_id != delegation_id {
            return Err(SourceError::Unreadable {
                delegation_id: delegation_id.to_owned(),
                detail: "the row names another delegation id".into(),
            });
        }
        let revocation = self
            .bytes("SELECT v FROM warden_revocations WHERE k = $1", delegation_id, name::REVOCATIONS)?
            .map(|bytes| decode::<Revocation>(name::REVOCATIONS, &delegation_id, &bytes))
            .transpose()
            .map_err(|error| unreadable(delegation_id, error))?;
        Ok(Some(StoredDelegation { record, revocation }))
    }

    fn candidates(&self, key: &IndexKey) -> Result<Vec<StoredDelegation>, SourceError> {
        let ids = self.listed(
            "SELECT id, v FROM warden_delegation_index WHERE agent = $1 AND action = $2 ORDER BY id",
            &[&key.agent, &key.action],
            name::DELEGATION_INDEX,
            |id, value| decode::<()>(name::DELEGATION_INDEX, &(key.agent.as_str(), key.action.as_str(), id), value),
        )?;
        crate::store::shared_rules::indexed_delegations(self, ids)
    }

    fn children(&self, parent_id: &str) -> Result<Vec<String>, SourceError> {
        self.listed(
            "SELECT id, v FROM warden_delegation_children WHERE parent = $1 ORDER BY id",
            &[&parent_id],
            name::DELEGATION_CHILDREN,
            |id, value| decode::<()>(name::DELEGATION_CHILDREN, &(parent_id, id), value),
        )
    }
}

/// A bigint key column read back as u64.
pub(super) fn seq_column(row: &postgres::Row, index: usize, table: &'static str) -> Result<u64> {
    uint(column(row, index, table)?, table)
}

/// The bigint column `name` of the first row of a simple query's answer that has it (the
/// answers of a transaction's first round trip), or a store fault naming it.
pub(super) fn simple_int(rows: &[postgres::SimpleQueryRow], name: &str) -> Result<i64> {
    let text = rows
        .iter()
        .find_map(|row| row.try_get(name).ok())
        .flatten()
        .ok_or_else(|| Error::Store(format!("PostgreSQL answered no {name} when a write transaction began")))?;
    text.parse().map_err(|_| {
        Error::Store(format!("PostgreSQL answered {name} = {text:?} when a write transaction began, not a bigint"))
    })
}

/// The row read ahead as `index` in a transaction's first round trip (`engine::opening`): its
/// value column, or `None` when the row is absent.
pub(super) fn read_ahead(rows: &[postgres::SimpleQueryRow], index: usize) -> Result<Option<Vec<u8>>> {
    let wanted = index.to_string();
    let Some(row) = rows.iter().find(|row| row.try_get("ahead").ok().flatten() == Some(wanted.as_str())) else {
        return Ok(None);
    };
    let text = row
        .try_get("ahead_v")
        .ok()
        .flatten()
        .ok_or_else(|| Error::Store("PostgreSQL answered a row read ahead without its value".into()))?;
    hex::decode(text)
        .map(Some)
        .map_err(|_| Error::Store("PostgreSQL answered a row read ahead whose value is not hex".into()))
}
