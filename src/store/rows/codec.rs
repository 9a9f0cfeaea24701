//! How a row's value is laid out, and the integrity check every read makes.
//!
//! `[layout byte 2][postcard body][CRC-32 of table, key, layout byte and body]`, or, when it is
//! smaller, `[layout byte 3][body length, u32 LE][body compressed by LZ4 against the frozen
//! dictionary][CRC-32 of table, key and everything before it]` (schema 5). The checksum covers
//! the key and the table, so a value that moved to another key or table fails too, and it is
//! checked before anything is decompressed. It is a defence against disk faults (a flipped bit,
//! a torn or misdirected write), not against someone who rewrites the file on purpose: that is
//! the receipt chain's business and the threat model's (`docs/THREAT_MODEL.md`).

use std::borrow::Cow;

use serde::{de::DeserializeOwned, Serialize};

use super::dictionary::DICTIONARY;
use crate::error::{Error, Result, StoreFaultKind};

/// Layout 1 (schema 1): postcard with no checksum. Read only by the migration.
pub(in crate::store) const LEGACY_LAYOUT: u8 = 1;
/// Layout 2 (schema 2): postcard and a CRC-32.
pub(in crate::store) const LAYOUT: u8 = 2;
/// Layout 3 (schema 5): postcard compressed against `dictionary::DICTIONARY`, and a CRC-32.
pub(in crate::store) const COMPRESSED_LAYOUT: u8 = 3;
/// Bodies shorter than this are stored as they are (compression would not pay).
const COMPRESS_FROM: usize = 96;
/// Bodies longer than this are stored as they are: a layout-3 row never declares more, so a
/// damaged length can never ask for a larger allocation.
const COMPRESS_UP_TO: usize = 1 << 20;

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
pub(in crate::store) trait KeyBytes {
    fn bytes(&self) -> std::borrow::Cow<'_, [u8]>;
    fn shown(&self) -> String;
}

pub(in crate::store) fn encode<T: Serialize>(table: &str, key: &impl KeyBytes, value: &T) -> Result<Vec<u8>> {
    let mut bytes = Vec::with_capacity(128);
    bytes.push(LAYOUT);
    let mut bytes = postcard::to_extend(value, bytes)
        .map_err(|e| Error::store(StoreFaultKind::Defect, format!("cannot encode a {table} row: {e}")))?;
    let body_len = bytes.len() - 1;
    if (COMPRESS_FROM..=COMPRESS_UP_TO).contains(&body_len) {
        let packed = lz4_flex::block::compress_with_dict(&bytes[1..], DICTIONARY);
        if packed.len() + 4 < body_len {
            let mut compressed = Vec::with_capacity(packed.len() + 9);
            compressed.push(COMPRESSED_LAYOUT);
            // Fits: body_len <= COMPRESS_UP_TO.
            compressed.extend_from_slice(&(body_len as u32).to_le_bytes());
            compressed.extend_from_slice(&packed);
            bytes = compressed;
        }
    }
    let sum = checksum(table, &key.bytes(), &bytes);
    bytes.extend_from_slice(&sum.to_le_bytes());
    Ok(bytes)
}

/// The message every failed integrity check carries.
pub(in crate::store) fn damaged(table: &str, key: &impl KeyBytes, what: &str) -> Error {
    Error::store(
        StoreFaultKind::Damaged,
        format!(
            "the store file is damaged: the {table} row {} {what}; nothing was decided from it. Run `warden doctor` \
         on the store, and restore it from a backup if the damage is confirmed",
            key.shown()
        ),
    )
}

/// Decode a row of the current layout, checking its integrity first.
pub(in crate::store) fn decode<T: DeserializeOwned>(table: &str, key: &impl KeyBytes, bytes: &[u8]) -> Result<T> {
    let body = verified(table, key, bytes)?;
    postcard::from_bytes(&body)
        .map_err(|e| damaged(table, key, &format!("passed its checksum but cannot be read ({e})")))
}

/// Everything before the checksum, once the checksum matched.
fn checked<'b>(table: &str, key: &impl KeyBytes, bytes: &'b [u8], shortest: usize) -> Result<&'b [u8]> {
    if bytes.len() < shortest {
        return Err(damaged(table, key, "is too short to carry its checksum"));
    }
    let (head_and_body, sum) = bytes.split_at(bytes.len() - 4);
    let stored = u32::from_le_bytes([sum[0], sum[1], sum[2], sum[3]]);
    if checksum(table, &key.bytes(), head_and_body) != stored {
        return Err(damaged(table, key, "failed its integrity check (checksum mismatch)"));
    }
    Ok(head_and_body)
}

/// The body of a row after its checksum (decompressed for layout 3), or a store fault naming
/// the table and key.
pub(in crate::store) fn verified<'b>(table: &str, key: &impl KeyBytes, bytes: &'b [u8]) -> Result<Cow<'b, [u8]>> {
    match bytes.first() {
        None => Err(damaged(table, key, "is empty")),
        Some(&LAYOUT) => Ok(Cow::Borrowed(&checked(table, key, bytes, 5)?[1..])),
        Some(&COMPRESSED_LAYOUT) => {
            let head_and_body = checked(table, key, bytes, 9)?;
            let declared =
                u32::from_le_bytes([head_and_body[1], head_and_body[2], head_and_body[3], head_and_body[4]]) as usize;
            if declared > COMPRESS_UP_TO {
                return Err(damaged(
                    table,
                    key,
                    &format!("passed its checksum but declares {declared} bytes, more than a compressed row holds"),
                ));
            }
            let mut body = vec![0; declared];
            match lz4_flex::block::decompress_into_with_dict(&head_and_body[5..], &mut body, DICTIONARY) {
                Ok(length) if length == declared => Ok(Cow::Owned(body)),
                Ok(length) => Err(damaged(
                    table,
                    key,
                    &format!("passed its checksum but decompresses to {length} bytes, not the {declared} it declares"),
                )),
                Err(e) => Err(damaged(table, key, &format!("passed its checksum but does not decompress ({e})"))),
            }
        }
        Some(&LEGACY_LAYOUT) => Err(damaged(
            table,
            key,
            "has the layout of schema 1 in a schema-2 store (the migration never rewrote it)",
        )),
        Some(other) => Err(Error::store(StoreFaultKind::Version, format!(
            "the {table} row {} has value layout {other}, which this build does not know; use the Warden version that wrote it",
            key.shown()
        ))),
    }
}

/// Decode a schema-1 row (layout 1, no checksum), for the migration only.
pub(in crate::store) fn decode_legacy<T: DeserializeOwned>(
    table: &str,
    key: &impl KeyBytes,
    bytes: &[u8],
) -> Result<T> {
    match bytes.split_first() {
        Some((&LEGACY_LAYOUT, body)) => postcard::from_bytes(body)
            .map_err(|e| damaged(table, key, &format!("cannot be read while migrating from schema 1 ({e})"))),
        _ => Err(damaged(table, key, "is not a schema-1 row, in a schema-1 store")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::rows::{KeyView, Part};

    #[test]
    fn every_single_bit_flip_of_a_row_is_a_store_fault_naming_table_and_key() {
        let row =
            encode("effects", &KeyView(&[Part::Text("refund:pay_1")]), &("committed", 2u32, "act_1")).expect("encode");
        assert_eq!(
            decode::<(String, u32, String)>("effects", &KeyView(&[Part::Text("refund:pay_1")]), &row)
                .expect("decode")
                .1,
            2
        );
        for byte in 0..row.len() {
            for bit in 0..8 {
                let mut flipped = row.clone();
                flipped[byte] ^= 1 << bit;
                let error =
                    decode::<(String, u32, String)>("effects", &KeyView(&[Part::Text("refund:pay_1")]), &flipped)
                        .expect_err("a flipped bit must never decode");
                let text = error.to_string();
                assert!(matches!(error, Error::Store(_)), "{text}");
                assert!(text.contains("effects") && text.contains("refund:pay_1"), "{text}");
            }
        }
    }

    #[test]
    fn a_row_moved_to_another_key_or_table_fails_its_check() {
        let row = encode("effects", &KeyView(&[Part::Text("refund:pay_1")]), &7u32).expect("encode");
        assert!(decode::<u32>("effects", &KeyView(&[Part::Text("refund:pay_2")]), &row).is_err());
        assert!(decode::<u32>("approvals", &KeyView(&[Part::Text("refund:pay_1")]), &row).is_err());
        let numbered = encode("receipts", &KeyView(&[Part::Int(5)]), &7u32).expect("encode");
        assert!(decode::<u32>("receipts", &KeyView(&[Part::Int(6)]), &numbered).is_err());
        assert_eq!(decode::<u32>("receipts", &KeyView(&[Part::Int(5)]), &numbered).expect("decode"), 7);
    }

    /// A receipt-like value: long enough, and repetitive enough, to be stored compressed.
    fn receipt_like() -> (String, Option<String>) {
        let document = r#"{"action":"stripe.refund","action_hash":"sha256:62a44b9d81d9a19354014701e6e90f58","action_id":"act_51ac6bc2a51fffa89425ef42c59ced2e","approval_id":null,"approver":null,"arguments":{"n":4999},"attempt":1,"decision":"allow","decision_reason":"rule[0]","environment":"production","result":"committed","schema":"warden.receipt/v1"}"#;
        (document.to_owned(), Some("sha256:4af60ccf98d94fe7ffb0f199b93bf2b4".to_owned()))
    }

    /// A layout-3 row around `body` (already compressed or not), with a valid checksum.
    fn layout_3(table: &str, key: &str, declared: u32, body: &[u8]) -> Vec<u8> {
        let mut row = vec![COMPRESSED_LAYOUT];
        row.extend_from_slice(&declared.to_le_bytes());
        row.extend_from_slice(body);
        let sum = checksum(table, key.as_bytes(), &row);
        row.extend_from_slice(&sum.to_le_bytes());
        row
    }

    #[test]
    fn a_long_row_is_stored_compressed_and_reads_back_the_same() {
        let value = receipt_like();
        let row = encode("receipts", &KeyView(&[Part::Int(7)]), &value).expect("encode");
        assert_eq!(row[0], COMPRESSED_LAYOUT);
        let plain = postcard::to_stdvec(&value).expect("postcard");
        assert!(row.len() < plain.len() / 2, "{} bytes stored for a {}-byte body", row.len(), plain.len());
        assert_eq!(
            decode::<(String, Option<String>)>("receipts", &KeyView(&[Part::Int(7)]), &row).expect("decode"),
            value
        );
        // A short row is not worth compressing: layout 2, as before.
        assert_eq!(encode("effects", &KeyView(&[Part::Text("k")]), &("committed", 2u32)).expect("encode")[0], LAYOUT);
        // Exactly at the threshold it is tried; one byte below it is not.
        let at = "x".repeat(COMPRESS_FROM - 1); // postcard adds one length byte
        assert_eq!(postcard::to_stdvec(&at).expect("postcard").len(), COMPRESS_FROM);
        assert_eq!(encode("events", &KeyView(&[Part::Int(1)]), &at).expect("encode")[0], COMPRESSED_LAYOUT);
        let below = "x".repeat(COMPRESS_FROM - 2);
        assert_eq!(encode("events", &KeyView(&[Part::Int(1)]), &below).expect("encode")[0], LAYOUT);
        // Incompressible bytes stay layout 2 whatever their length.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let noise: Vec<u8> = (0..400)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 24) as u8
            })
            .collect();
        assert_eq!(encode("events", &KeyView(&[Part::Int(1)]), &noise).expect("encode")[0], LAYOUT);
    }

    #[test]
    fn every_single_bit_flip_of_a_compressed_row_is_a_store_fault() {
        let row = encode("receipts", &KeyView(&[Part::Int(7)]), &receipt_like()).expect("encode");
        assert_eq!(row[0], COMPRESSED_LAYOUT);
        for byte in 0..row.len() {
            for bit in 0..8 {
                let mut flipped = row.clone();
                flipped[byte] ^= 1 << bit;
                let error = decode::<(String, Option<String>)>("receipts", &KeyView(&[Part::Int(7)]), &flipped)
                    .expect_err("a flipped bit must never decode");
                assert!(matches!(error, Error::Store(_)), "{error}");
                assert!(error.to_string().contains("receipts"), "{error}");
            }
        }
    }

    #[test]
    fn a_compressed_row_that_passes_its_checksum_but_lies_is_damage_never_a_panic() {
        let plain = postcard::to_stdvec(&receipt_like()).expect("postcard");
        let packed = lz4_flex::block::compress_with_dict(&plain, DICTIONARY);
        let len = plain.len() as u32;
        let cases: Vec<(&str, Vec<u8>, &str)> = vec![
            (
                "declares more than a row holds",
                layout_3("receipts", "k", COMPRESS_UP_TO as u32 + 1, &packed),
                "declares",
            ),
            ("declares one byte more", layout_3("receipts", "k", len + 1, &packed), "decompresses to"),
            ("declares one byte less", layout_3("receipts", "k", len - 1, &packed), "does not decompress"),
            ("not LZ4 at all", layout_3("receipts", "k", len, &[0xff; 40]), "does not decompress"),
            ("nothing after the length", layout_3("receipts", "k", len, &[]), "does not decompress"),
            ("too short for a length and a checksum", vec![COMPRESSED_LAYOUT, 1, 2, 3, 4, 5, 6, 7], "too short"),
        ];
        for (case, row, says) in cases {
            let error =
                decode::<(String, Option<String>)>("receipts", &KeyView(&[Part::Text("k")]), &row).expect_err(case);
            assert!(matches!(error, Error::Store(_)) && error.to_string().contains(says), "{case}: {error}");
        }
        // The control: the same bytes with the right length read back.
        let good = layout_3("receipts", "k", len, &packed);
        assert_eq!(
            decode::<(String, Option<String>)>("receipts", &KeyView(&[Part::Text("k")]), &good).expect("decode"),
            receipt_like()
        );
    }

    #[test]
    fn empty_short_and_unknown_layout_rows_are_refused() {
        assert!(decode::<u32>("effects", &KeyView(&[Part::Text("k")]), &[])
            .unwrap_err()
            .to_string()
            .contains("is empty"));
        assert!(decode::<u32>("effects", &KeyView(&[Part::Text("k")]), &[LAYOUT, 1])
            .unwrap_err()
            .to_string()
            .contains("too short"));
        assert!(decode::<u32>("effects", &KeyView(&[Part::Text("k")]), &[9, 1, 2, 3, 4, 5])
            .unwrap_err()
            .to_string()
            .contains("layout 9"));
        assert!(decode::<u32>("effects", &KeyView(&[Part::Text("k")]), &[LEGACY_LAYOUT, 7])
            .unwrap_err()
            .to_string()
            .contains("schema 1"));
    }
}
