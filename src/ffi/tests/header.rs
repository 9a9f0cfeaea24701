//! `include/warden.h`: the committed header is the generated one, its code table agrees with the
//! library and docs/ABI.md, every function documents threads, NULL and its codes, and no
//! test-only export leaks into it.

use super::known_codes;

const HEADER: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/include/warden.h"));

#[test]
fn the_committed_header_is_the_generated_one() {
    let generated = include_str!(concat!(env!("OUT_DIR"), "/warden.h"));
    let committed =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/include/warden.h")).unwrap_or_default();
    assert!(
        generated == committed,
        "include/warden.h is stale: regenerate it with `WARDEN_UPDATE_HEADER=1 cargo build` and commit it"
    );
}

/// `(code, name)` rows of a table, found by `parse` on each line.
fn table(text: &str, parse: impl Fn(&str) -> Option<(u32, String)>) -> Vec<(u32, String)> {
    text.lines().filter_map(parse).collect()
}

#[test]
fn the_code_table_in_the_header_comment_the_defines_and_docs_abi_agree_with_the_library() {
    let comment_rows = table(HEADER.split("*/").next().unwrap_or_default(), |line| {
        let mut words = line.trim_start_matches([' ', '*']).split_whitespace();
        let code = words.next()?.parse().ok()?;
        Some((code, words.next()?.to_owned()))
    });
    let defines = table(HEADER, |line| {
        let rest = line.strip_prefix("#define WARDEN_RESULT_")?;
        let (name, code) = rest.split_once(' ')?;
        Some((code.trim().parse().ok()?, format!("WARDEN_RESULT_{name}")))
    });
    let abi_md = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/ABI.md")).expect("docs/ABI.md");
    let documented = table(&abi_md, |line| {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        Some((cells.get(1)?.parse().ok()?, cells.get(2)?.trim_matches('`').to_owned()))
    });
    let known = known_codes();
    assert_eq!(comment_rows, known, "the table at the top of the header (cbindgen.toml)");
    assert_eq!(defines, known, "the #define lines");
    assert_eq!(documented, known, "the table in docs/ABI.md");
}

#[test]
fn every_function_in_the_header_documents_threads_null_and_its_codes() {
    let mut comment = Vec::new();
    let mut checked = 0;
    for line in HEADER.lines() {
        if let Some(text) = line.strip_prefix("//") {
            comment.push(text.to_owned());
            continue;
        }
        let is_prototype = line.contains("warden_") && line.contains('(') && !line.starts_with([' ', '*', '/', '#']);
        if is_prototype {
            let doc = comment.join("\n");
            let function = line.split('(').next().unwrap_or_default();
            assert!(doc.contains("Thread safety"), "{function} does not document thread safety:\n{doc}");
            if line.starts_with("warden_result ") {
                assert!(doc.contains("Returns WARDEN_RESULT_OK"), "{function} does not list its codes:\n{doc}");
                assert!(doc.contains("NULL"), "{function} does not say what NULL means:\n{doc}");
            }
            checked += 1;
        }
        if !line.starts_with(' ') {
            comment.clear();
        }
    }
    assert_eq!(checked, 80, "the number of functions (75) and callback typedefs (5) in the header changed; check this test still reads them all");
}

#[test]
fn the_header_holds_no_test_only_export() {
    assert!(!HEADER.contains("warden_test_"), "a test-only export leaked into include/warden.h");
}
