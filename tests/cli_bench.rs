//! `warden bench` driven as a user would: a small run in a temporary directory, its JSON
//! document read back, and its scratch stores gone afterwards. No timing is asserted — only
//! that every configuration ran the actions asked for and the physical reference was measured.

use std::process::Command;

use serde_json::Value;

fn bench(dir: &std::path::Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_warden"))
        .arg("bench")
        .args(args)
        .arg("--dir")
        .arg(dir)
        .env_remove("WARDEN_STORE")
        .env_remove("WARDEN_CONFIG")
        .output()
        .expect("run warden bench");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_small_run_reports_every_configuration_and_the_physical_reference_and_leaves_nothing_behind() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (code, stdout, stderr) =
        bench(dir.path(), &["--actions", "12", "--threads", "1,2", "--processes", "2", "--outcomes", "both", "--json"]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let doc: Value = serde_json::from_str(&stdout).expect("one JSON document");
    let rows = doc["rows"].as_array().expect("rows");
    let seen: Vec<(String, String)> = rows
        .iter()
        .map(|row| {
            (row["outcomes"].as_str().unwrap_or("").to_owned(), row["workload"].as_str().unwrap_or("").to_owned())
        })
        .collect();
    for outcomes in ["durable", "deferred"] {
        for workload in ["1 thread(s), one process", "2 thread(s), one process", "2 processes × 1 thread, one store"] {
            assert!(
                seen.contains(&(outcomes.to_owned(), workload.to_owned())),
                "{outcomes} {workload} missing: {seen:?}"
            );
        }
    }
    assert_eq!(rows.len(), 6, "{stdout}");
    for row in rows {
        // `--actions` per configuration, shared among its threads or processes.
        assert_eq!(row["actions"], 12, "{row}");
        assert!(row["actions_per_second"].as_f64().is_some_and(|rate| rate > 0.0), "{row}");
        assert!(row["store_bytes_per_action"].as_f64().is_some_and(|bytes| bytes > 0.0), "{row}");
        let (p50, p99) = (row["p50_ms"].as_f64().expect("p50"), row["p99_ms"].as_f64().expect("p99"));
        assert!(p50 > 0.0 && p99 >= p50, "{row}");
    }
    let references: Vec<&str> =
        doc["reference_per_second"].as_array().expect("reference").iter().filter_map(|r| r["what"].as_str()).collect();
    assert_eq!(
        references,
        [
            "write(512 B) + fdatasync",
            "redb durable commit, single writer",
            "redb durable commit, multi-writer",
            "redb durable commit, one row in each of 2 tables",
            "redb durable commit, one row in each of 6 tables",
            "redb alone: one commit of each (an action's floor)",
        ]
    );
    // The floor is one commit of each kind: slower than either alone.
    let rate = |what: &str| {
        doc["reference_per_second"]
            .as_array()
            .and_then(|all| all.iter().find(|r| r["what"] == what))
            .and_then(|r| r["per_second"].as_f64())
            .expect("rate")
    };
    let floor = rate("redb alone: one commit of each (an action's floor)");
    assert!(floor < rate("redb durable commit, one row in each of 2 tables"));
    assert!(floor < rate("redb durable commit, one row in each of 6 tables"));
    // The scratch stores went with the run.
    let left: Vec<_> = std::fs::read_dir(dir.path()).expect("read dir").flatten().map(|e| e.file_name()).collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn a_zero_count_is_a_usage_error_that_names_the_flags() {
    let dir = tempfile::tempdir().expect("tempdir");
    for args in [&["--actions", "0"][..], &["--threads", "0"], &["--processes", "0"]] {
        let (code, stdout, stderr) = bench(dir.path(), args);
        assert_eq!(code, 2, "{args:?}\n{stdout}\n{stderr}");
        assert!(stderr.contains("--actions, --processes and every --threads count must be at least 1"), "{stderr}");
    }
}
