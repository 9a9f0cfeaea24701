//! Faults of the file engine's own layout: redb's pages and the file itself (a replaced file,
//! a flipped byte in a leaf page, the open check). PostgreSQL and memory stores have no file, so
//! these run on the file only; the conformance suite (`tests/store_faults.rs` and the rest) runs
//! on every engine.

mod common;

use std::path::Path;
use warden::test_support::KernelInternals;

use common::*;
use warden::error::StoreFaultKind;
use warden::store::RawTable;
use warden::{Error, Kernel, KernelOptions, ManualClock};

/// The effect key the key template gives a payment.
fn key(payment: &str) -> String {
    format!("refund:{payment}")
}

/// Close the fixture's handle and open its store again to write, by the fixture's clock (the
/// open's checks run now). The directory comes back too: the store lives as long as it does.
fn reopened(f: Fixture) -> (tempfile::TempDir, Result<Kernel, Error>) {
    let path = f.path();
    let Fixture { dir, clock, kernel, .. } = f;
    drop(kernel);
    let opened = Kernel::open(&path, KernelOptions { clock: std::sync::Arc::new(clock), ..KernelOptions::default() });
    (dir, opened)
}

fn committed(f: &Fixture, payment: &str) {
    let t = key_template();
    f.kernel.propose(&allow(&refund(payment, 1), &t)).unwrap().commit(&serde_json::json!({"ok": payment})).unwrap();
}

#[test]
fn a_store_replaced_under_an_open_handle_takes_no_further_write() {
    let f = Fixture::new();
    committed(&f, "pay_1");
    let path = f.path();
    let moved = path.with_extension("moved");
    std::fs::rename(&path, &moved).unwrap();
    std::fs::copy(&moved, &path).unwrap();
    let refused = f.kernel.propose(&allow(&refund("pay_2", 1), &key_template())).unwrap_err();
    assert!(
        matches!(&refused, Error::Store(fault) if fault.kind == StoreFaultKind::Damaged && fault.message.contains("was replaced")),
        "{refused}"
    );
}
/// The offsets of the redb leaf pages holding `key` as their one key with an effects row as its
/// value (the outcome index's leaf holds the same key with a short layout-2 seq). Stale copies
/// of the page that redb's copy-on-write left behind are found too; flipping them is harmless.
fn effects_leaves(file: &[u8], key: &str) -> Vec<usize> {
    const PAGE: usize = 4096;
    const LEAF: u8 = 1;
    let mut found = Vec::new();
    for page in (0..file.len()).step_by(PAGE) {
        let p = &file[page..(page + PAGE).min(file.len())];
        if p.len() < 64 || p[0] != LEAF || u16::from_le_bytes([p[2], p[3]]) != 1 {
            continue;
        }
        // One pair, both widths variable: [type, pad, pairs u16][key end u32][value end u32][key][value].
        let key_end = u32::from_le_bytes([p[4], p[5], p[6], p[7]]) as usize;
        if key_end != 12 + key.len() || &p[12..key_end] != key.as_bytes() {
            continue;
        }
        let value = &p[key_end..];
        let layout_2_effect =
            value[0] == 2 && value[1] as usize == key.len() && &value[2..2 + key.len()] == key.as_bytes();
        if value[0] == 3 || layout_2_effect {
            found.push(page);
        }
    }
    found
}
/// The red team's flip: the low bit of the byte holding the key's length (its end offset) in
/// the effects leaf page, so the lookup of `key` finds no row.
fn flip_key_length_byte(path: &Path, key: &str) {
    let mut file = std::fs::read(path).unwrap();
    let leaves = effects_leaves(&file, key);
    assert!(!leaves.is_empty(), "no effects leaf page holds {key}");
    for page in leaves {
        file[page + 4] ^= 1;
    }
    std::fs::write(path, &file).unwrap();
}
#[test]
fn a_flipped_key_length_byte_in_the_effects_leaf_is_a_fault_never_a_fresh_permit_and_doctor_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.redb");
    let clock = ManualClock::new(T0);
    let t = key_template();
    {
        let kernel = open(&path, &clock);
        kernel.propose(&allow(&refund("pay_7", 1), &t)).unwrap().commit(&serde_json::json!({"paid": 7})).unwrap();
        // A retry refused as committed: the last receipt records no outcome, so the check an
        // open makes (the last receipt's rows) has nothing to say about pay_7.
        assert!(kernel.propose(&allow(&refund("pay_7", 1), &t)).is_err());
    }
    assert_eq!(warden::store::check_pages(&path).unwrap().problem, None, "the pristine store's pages");
    flip_key_length_byte(&path, "refund:pay_7");
    let pages = warden::store::check_pages(&path).unwrap();
    assert!(pages.problem.is_some(), "redb's page check missed the flip: {pages:?}");
    // The page check ran on a copy and changed nothing: the store is still the damaged one. The
    // lookup of the key finds nothing, which alone used to be "new"; the open already refuses it,
    // because the last reservation the events name is that key (the proof at a proposal, when
    // the hidden key is an older one, is tests/store_faults.rs's and the bit-flip sweep's).
    let refused = Kernel::open(&path, KernelOptions::default()).expect_err("a store hiding a committed key opened");
    assert_hidden_row_fault(&refused, "refund:pay_7");
    assert!(refused.to_string().contains("reserved it"), "{refused}");
    let kernel = open_to_read(&path);
    assert!(kernel.effect("refund:pay_7").unwrap().is_none(), "the flip is meant to hide the row");
    let report = kernel.doctor().unwrap();
    let problems: Vec<&String> = report.tables.iter().flat_map(|(_, _, problems)| problems).collect();
    assert!(!problems.is_empty() || !report.orphans.is_empty(), "doctor found nothing: {report:?}");
    assert!(report.orphans.iter().any(|o| o.contains("refund:pay_7")), "{:?}", report.orphans);
    // And on a copy of a store that is open (the owner holds it), the check sees the same.
    assert!(warden::store::check_pages(&path).unwrap().problem.is_some());
}
#[test]
fn an_executing_effect_whose_key_byte_flipped_is_refused_at_open_by_its_reservation_event() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.redb");
    let clock = ManualClock::new(T0);
    {
        let kernel = open(&path, &clock);
        // In flight: no outcome receipt yet, so the outcome index is no witness; only the
        // damaged row next to the key is.
        let reserved = kernel.reserve_only(&refund("pay_7", 1), "refund:pay_7", None, None).unwrap();
        kernel.begin("refund:pay_7", &reserved.action_id, reserved.attempt).unwrap();
    }
    flip_key_length_byte(&path, "refund:pay_7");
    // The open refuses first: the last reservation the events name is the hidden key.
    let refused = Kernel::open(&path, KernelOptions::default()).expect_err("a store hiding an executing key opened");
    assert_hidden_row_fault(&refused, "refund:pay_7");
    // Read without the open's check, the lookup finds nothing and the damaged neighbour is there.
    let kernel = open_to_read(&path);
    assert!(kernel.effect("refund:pay_7").unwrap().is_none(), "the flip is meant to hide the row");
}
#[test]
fn an_open_refuses_a_store_whose_last_receipt_names_an_effect_with_no_row() {
    let f = Fixture::new();
    // An effect without an outcome first, so the effects table still holds as many rows as
    // effects have outcomes (the count check at open) and the last receipt's check is the one
    // that speaks.
    f.kernel.reserve_only(&refund("pay_0", 1), &key("pay_0"), None, None).unwrap();
    committed(&f, "pay_1");
    f.kernel.store().tamper(|raw| raw.remove_raw(RawTable::Effects, "refund:pay_1")).unwrap();
    let path = f.path();
    let (_dir, opened) = reopened(f);
    let Err(refused) = opened else { panic!("a store whose last receipt's effect row is gone opened to write") };
    assert_store_fault(&refused, "effects", "refund:pay_1");
    // Doctor still opens it (to read, without taking it over) and names the damage.
    let report = open_to_read(&path).doctor().unwrap();
    assert!(report.orphans.iter().any(|o| o.contains("refund:pay_1")), "{:?}", report.orphans);
}

#[test]
fn an_open_refuses_a_store_whose_effects_table_holds_fewer_rows_than_effects_with_outcomes() {
    // What a damaged table directory entry did in the sweep of every page: the effects table
    // looked empty (every key new) while the outcome index still named its effects.
    let f = Fixture::new();
    f.kernel.reserve_only(&refund("pay_0", 1), &key("pay_0"), None, None).unwrap();
    committed(&f, "pay_1");
    committed(&f, "pay_2");
    f.kernel
        .store()
        .tamper(|raw| {
            raw.remove_raw(RawTable::Effects, "refund:pay_0")?;
            raw.remove_raw(RawTable::Effects, "refund:pay_1")
        })
        .unwrap();
    let (_dir, opened) = reopened(f);
    let Err(refused) = opened else { panic!("1 effect row for 2 outcomes opened to write") };
    let text = refused.to_string();
    assert!(
        text.contains("holds 1 rows but 2 effects have outcome receipts") && text.contains("warden doctor"),
        "{text}"
    );
}

#[test]
fn an_open_refuses_a_store_whose_last_reserved_effect_has_no_row_even_with_no_outcome_anywhere() {
    // Only reservations, no outcome: no receipt or index names the effects. The events do.
    let f = Fixture::new();
    f.kernel.reserve_only(&refund("pay_0", 1), &key("pay_0"), None, None).unwrap();
    f.kernel.reserve_only(&refund("pay_1", 1), &key("pay_1"), None, None).unwrap();
    f.kernel
        .store()
        .tamper(|raw| {
            raw.remove_raw(RawTable::Effects, "refund:pay_0")?;
            raw.remove_raw(RawTable::Effects, "refund:pay_1")
        })
        .unwrap();
    let (_dir, opened) = reopened(f);
    let Err(refused) = opened else { panic!("an emptied effects table opened to write") };
    assert_store_fault(&refused, "effects", "refund:pay_1");
    assert!(refused.to_string().contains("reserved it"), "{refused}");
}

#[test]
fn the_last_reservation_check_passes_a_store_whose_rows_are_all_there() {
    // The control: the same store, untouched, opens and refuses the reserved key as in progress.
    let f = Fixture::new();
    f.kernel.reserve_only(&refund("pay_0", 1), &key("pay_0"), None, None).unwrap();
    let (_dir, opened) = reopened(f);
    let kernel = opened.expect("the untouched store opens");
    let refused = kernel.propose(&allow(&refund("pay_0", 1), &key_template())).unwrap_err();
    assert!(matches!(refused, Error::Duplicate { .. }), "{refused}");
}
