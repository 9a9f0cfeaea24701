//! How a row's value is laid out, and the integrity check every read makes.
//!
//! `[layout byte 2][postcard body][CRC-32 of table, key, layout byte and body]`. The checksum
//! covers the key and the table, so a value that moved to another key or table fails too. It
//! is a defence against disk faults (a flipped bit, a torn or misdirected write), not against
//! someone who rewrites the file on purpose: that is the receipt chain's business and the
//! threat model's (`docs/THREAT_MODEL.md`).

use serde::{de::DeserializeOwned, Serialize};

use crate::error::{Error, Result};

/// Layout 1 (schema 1): postcard with no checksum. Read only by the migration.
pub(super) const LEGACY_LAYOUT: u8 = 1;
/// Layout 2 (schema 2): postcard and a CRC-32.
pub(super) const LAYOUT: u8 = 2;

fn checksum(table: &str, key: &[u8], head_and_body: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(table.as_bytes());
    hasher.update(&[0]);
    hasher.update(&(key.len() as u64).to_le_bytes());
    hasher.update(key);
    hasher.update(head_and_body);
    hasher.finalize()
}

/// A key as the checksum and the messages see it.
pub(super) trait KeyBytes {
    fn bytes(&self) -> std::borrow::Cow<'_, [u8]>;
    fn shown(&self) -> String;
}

impl KeyBytes for &str {
    fn bytes(&self) -> std::borrow::Cow<'_, [u8]> {
        std::borrow::Cow::Borrowed(str::as_bytes(self))
    }
    fn shown(&self) -> String {
        let mut text: String = self.chars().take(200).collect();
        if text.len() < self.len() {
            text.push('…');
        }
        format!("{text:?}")
    }
}

impl KeyBytes for u64 {
    fn bytes(&self) -> std::borrow::Cow<'_, [u8]> {
        std::borrow::Cow::Owned(self.to_le_bytes().to_vec())
    }
    fn shown(&self) -> String {
        self.to_string()
    }
}

impl KeyBytes for (&str, u64) {
    fn bytes(&self) -> std::borrow::Cow<'_, [u8]> {
        let mut out = self.0.as_bytes().to_vec();
        out.push(0);
        out.extend_from_slice(&self.1.to_le_bytes());
        std::borrow::Cow::Owned(out)
    }
    fn shown(&self) -> String {
        format!("({:?}, {})", self.0, self.1)
    }
}

pub(super) fn encode<T: Serialize>(table: &str, key: &impl KeyBytes, value: &T) -> Result<Vec<u8>> {
    let mut bytes = Vec::with_capacity(128);
    bytes.push(LAYOUT);
    let mut bytes =
        postcard::to_extend(value, bytes).map_err(|e| Error::Store(format!("cannot encode a {table} row: {e}")))?;
    let sum = checksum(table, &key.bytes(), &bytes);
    bytes.extend_from_slice(&sum.to_le_bytes());
    Ok(bytes)
}

/// The message every failed integrity check carries.
pub(super) fn damaged(table: &str, key: &impl KeyBytes, what: &str) -> Error {
    Error::Store(format!(
        "the store file is damaged: the {table} row {} {what}; nothing was decided from it. Run `warden doctor` \
         on the store, and restore it from a backup if the damage is confirmed",
        key.shown()
    ))
}

/// Decode a row of the current layout, checking its integrity first.
pub(super) fn decode<T: DeserializeOwned>(table: &str, key: &impl KeyBytes, bytes: &[u8]) -> Result<T> {
    let body = verified(table, key, bytes)?;
    postcard::from_bytes(body)
        .map_err(|e| damaged(table, key, &format!("passed its checksum but cannot be read ({e})")))
}

/// The body of a row after its checksum, or a store fault naming the table and key.
pub(super) fn verified<'b>(table: &str, key: &impl KeyBytes, bytes: &'b [u8]) -> Result<&'b [u8]> {
    match bytes.first() {
        None => Err(damaged(table, key, "is empty")),
        Some(&LAYOUT) => {
            if bytes.len() < 5 {
                return Err(damaged(table, key, "is too short to carry its checksum"));
            }
            let (head_and_body, sum) = bytes.split_at(bytes.len() - 4);
            let stored = u32::from_le_bytes([sum[0], sum[1], sum[2], sum[3]]);
            if checksum(table, &key.bytes(), head_and_body) != stored {
                return Err(damaged(table, key, "failed its integrity check (checksum mismatch)"));
            }
            Ok(&head_and_body[1..])
        }
        Some(&LEGACY_LAYOUT) => Err(damaged(
            table,
            key,
            "has the layout of schema 1 in a schema-2 store (the migration never rewrote it)",
        )),
        Some(other) => Err(Error::Store(format!(
            "the {table} row {} has value layout {other}, which this build does not know; use the Warden version that wrote it",
            key.shown()
        ))),
    }
}

/// Decode a schema-1 row (layout 1, no checksum), for the migration only.
pub(super) fn decode_legacy<T: DeserializeOwned>(table: &str, key: &impl KeyBytes, bytes: &[u8]) -> Result<T> {
    match bytes.split_first() {
        Some((&LEGACY_LAYOUT, body)) => postcard::from_bytes(body)
            .map_err(|e| damaged(table, key, &format!("cannot be read while migrating from schema 1 ({e})"))),
        _ => Err(damaged(table, key, "is not a schema-1 row, in a schema-1 store")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_single_bit_flip_of_a_row_is_a_store_fault_naming_table_and_key() {
        let row = encode("effects", &"refund:pay_1", &("committed", 2u32, "act_1")).expect("encode");
        assert_eq!(decode::<(String, u32, String)>("effects", &"refund:pay_1", &row).expect("decode").1, 2);
        for byte in 0..row.len() {
            for bit in 0..8 {
                let mut flipped = row.clone();
                flipped[byte] ^= 1 << bit;
                let error = decode::<(String, u32, String)>("effects", &"refund:pay_1", &flipped)
                    .expect_err("a flipped bit must never decode");
                let text = error.to_string();
                assert!(matches!(error, Error::Store(_)), "{text}");
                assert!(text.contains("effects") && text.contains("refund:pay_1"), "{text}");
            }
        }
    }

    #[test]
    fn a_row_moved_to_another_key_or_table_fails_its_check() {
        let row = encode("effects", &"refund:pay_1", &7u32).expect("encode");
        assert!(decode::<u32>("effects", &"refund:pay_2", &row).is_err());
        assert!(decode::<u32>("approvals", &"refund:pay_1", &row).is_err());
        let numbered = encode("receipts", &5u64, &7u32).expect("encode");
        assert!(decode::<u32>("receipts", &6u64, &numbered).is_err());
        assert_eq!(decode::<u32>("receipts", &5u64, &numbered).expect("decode"), 7);
    }

    #[test]
    fn empty_short_and_unknown_layout_rows_are_refused() {
        assert!(decode::<u32>("effects", &"k", &[]).unwrap_err().to_string().contains("is empty"));
        assert!(decode::<u32>("effects", &"k", &[LAYOUT, 1]).unwrap_err().to_string().contains("too short"));
        assert!(decode::<u32>("effects", &"k", &[9, 1, 2, 3, 4, 5]).unwrap_err().to_string().contains("layout 9"));
        assert!(decode::<u32>("effects", &"k", &[LEGACY_LAYOUT, 7]).unwrap_err().to_string().contains("schema 1"));
    }
}
