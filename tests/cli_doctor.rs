//! `warden doctor`: a sound store is reported sound (exit 0); a damaged row is named with its
//! table (exit 1), and the check changes nothing.

mod common;

use std::process::Command;
use warden::test_support::KernelInternals;

use common::*;
use warden::store::RawTable;

fn doctor(store: &std::path::Path, json: bool) -> std::process::Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_warden"));
    command.arg("--store").arg(store);
    if json {
        command.arg("--json");
    }
    command.arg("doctor").output().expect("warden runs")
}

#[test]
fn doctor_reports_a_sound_store_then_names_a_damaged_row_with_its_table() {
    let f = Fixture::new();
    let t = key_template();
    for key in ["pay_1", "pay_2"] {
        f.kernel.propose(&allow(&refund(key, 1), &t)).unwrap().commit(&serde_json::json!({"ok": key})).unwrap();
    }
    let path = f.path();
    let sound = doctor(&path, false);
    let text = String::from_utf8_lossy(&sound.stdout).into_owned();
    assert_eq!(sound.status.code(), Some(0), "{text}{}", String::from_utf8_lossy(&sound.stderr));
    assert!(text.contains("receipt chain") && text.contains("2 receipts  ok") && text.ends_with("sound\n"), "{text}");
    // redb's own check of every page ran, on a copy of the open store, and found it sound.
    assert!(text.contains("redb pages") && text.contains("bytes  ok"), "{text}");

    // One flipped bit in an effect row.
    f.kernel
        .store()
        .tamper(|raw| {
            let mut row = raw.raw(RawTable::Effects, "refund:pay_2")?.expect("row");
            row[5] ^= 0x04;
            raw.set_raw(RawTable::Effects, "refund:pay_2", &row)
        })
        .unwrap();
    drop(f.kernel);
    let before = std::fs::read(&path).unwrap();
    let damaged = doctor(&path, true);
    assert_eq!(damaged.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&damaged.stdout).expect("one JSON document");
    assert_eq!(report["ok"], false);
    let effects = report["tables"].as_array().unwrap().iter().find(|t| t["table"] == "effects").unwrap();
    let problems = effects["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 1, "{report}");
    assert!(problems[0].as_str().unwrap().contains("refund:pay_2"), "{report}");
    assert_eq!(report["chain"]["ok"], true, "the chain itself is intact: {report}");
    // Read-only: the check wrote nothing (the file is byte-for-byte the same).
    assert!(std::fs::read(&path).unwrap() == before, "doctor changed the store");
}

#[test]
fn doctor_reports_the_bytes_the_tables_use_and_the_file_size() {
    let f = Fixture::new();
    let t = key_template();
    let path = f.path();
    let in_use = |json: &serde_json::Value| json["size"]["in_use_bytes"].as_u64().expect("in_use_bytes");
    let read = || -> serde_json::Value {
        let out = doctor(&path, true);
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).expect("one JSON document")
    };
    let empty = read();
    for n in 0..50 {
        let key = format!("pay_{n}");
        f.kernel.propose(&allow(&refund(&key, 1), &t)).unwrap().commit(&serde_json::json!({"ok": n})).unwrap();
    }
    let full = read();
    // Fifty actions take room (at least their receipts and events), and never more than the file.
    assert!(in_use(&full) > in_use(&empty) + 50 * 500, "{empty} {full}");
    let file = full["size"]["file_bytes"].as_u64().expect("file_bytes");
    assert_eq!(file, std::fs::metadata(&path).unwrap().len());
    assert!(in_use(&full) <= file, "{full}");
    let text = String::from_utf8_lossy(&doctor(&path, false).stdout).into_owned();
    assert!(text.contains(&format!("{} bytes in use by the tables, file {file} bytes", in_use(&full))), "{text}");
}
