//! A plain `cargo test` must not pass quietly while it skipped test targets: cargo builds a
//! `[[test]]` whose `required-features` are off as if it did not exist. This target has no
//! required features, so it always runs, and it fails naming every target this build skipped
//! and the flag that runs them (`cargo test --features test-exports`; scripts/test.sh passes it).

/// The `[[test]]` targets of `Cargo.toml` that require features, with those features.
fn gated_targets(manifest: &str) -> Vec<(String, Vec<String>)> {
    let mut targets = Vec::new();
    let mut in_test = false;
    let mut name: Option<String> = None;
    let mut finish = |in_test: bool, name: &Option<String>, features: Vec<String>| {
        if let (true, Some(name)) = (in_test, name) {
            if !features.is_empty() {
                targets.push((name.clone(), features));
            }
        }
    };
    let mut features = Vec::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            finish(in_test, &name, std::mem::take(&mut features));
            in_test = line == "[[test]]";
            name = None;
        } else if in_test {
            if let Some(value) = line.strip_prefix("name =") {
                name = Some(value.trim().trim_matches('"').to_owned());
            } else if let Some(list) = line.strip_prefix("required-features =") {
                features = list
                    .trim()
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .split(',')
                    .map(|f| f.trim().trim_matches('"').to_owned())
                    .filter(|f| !f.is_empty())
                    .collect();
            }
        }
    }
    finish(in_test, &name, features);
    targets
}

/// Whether this build has `feature` (the features a gated target of this crate can require).
fn enabled(feature: &str) -> bool {
    let built = [("test-exports", cfg!(feature = "test-exports")), ("postgres", cfg!(feature = "postgres"))];
    built.iter().any(|(name, on)| *name == feature && *on)
}

#[test]
fn no_test_target_was_skipped_for_a_missing_feature() {
    let manifest = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml")).unwrap();
    let gated = gated_targets(&manifest);
    assert!(gated.len() >= 10, "the manifest's gated test targets were not found (parser out of date?): {gated:?}");
    let skipped: Vec<String> = gated
        .iter()
        .filter(|(_, features)| !features.iter().all(|f| enabled(f)))
        .map(|(name, features)| format!("tests/{name}.rs (needs {})", features.join(", ")))
        .collect();
    assert!(
        skipped.is_empty(),
        "this build skipped {} test targets because a feature is off:\n  {}\nrun `cargo test --features \
         test-exports` (PostgreSQL's target also needs the default `postgres` feature), or ./scripts/test.sh",
        skipped.len(),
        skipped.join("\n  ")
    );
}

#[test]
fn the_manifest_reader_finds_gated_tests_and_ignores_benches_and_other_tables() {
    let manifest = "[package]\nname = \"x\"\n[[test]]\nname = \"a\"\nrequired-features = [\"test-exports\", \
                    \"postgres\"]\n\n[[test]]\nname = \"b\"\n[[bench]]\nname = \"c\"\nrequired-features = [\"f\"]\n\
                    [profile.dev]\nname = \"no\"\n";
    assert_eq!(gated_targets(manifest), vec![("a".to_owned(), vec!["test-exports".to_owned(), "postgres".to_owned()])]);
}
