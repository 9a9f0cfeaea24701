//! The C ABI from C: every program in `tests/c/` is compiled with
//! `gcc -std=c11 -Wall -Wextra -Werror -pedantic`, linked against the shared and the static
//! library this `cargo test` built (with this run's features), and run under valgrind (when
//! installed) with zero errors and zero definitely or indirectly lost bytes.
//!
//! Also: test-only exports exist only with the `test-exports` feature, and neither the release
//! library's dynamic symbols nor the committed header contain them.
//!
//! Run: `cargo test --test c_abi` and `cargo test --features test-exports --test c_abi`.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

const C_FLAGS: [&str; 5] = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic"];

/// Every program in `tests/c/`, each run by a test below; `forced_panic` needs `test-exports`.
const PROGRAMS: [&str; 13] = [
    "reserve_commit_retry",
    "approval_flow",
    "approval_trust",
    "refusal_error",
    "store_ops",
    "store_integrator",
    "forced_panic",
    "sight",
    "limits",
    "fork",
    "authority",
    "results",
    "scoped_grants",
];

const VALGRIND_ARGS: [&str; 5] = [
    "--leak-check=full",
    "--show-leak-kinds=definite,indirect",
    "--errors-for-leak-kinds=definite,indirect",
    "--error-exitcode=1",
    "--track-fds=no",
];

fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The target directory: `CARGO_TARGET_TMPDIR` is `<target>/tmp`.
fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).parent().expect("CARGO_TARGET_TMPDIR has a parent").to_path_buf()
}

/// `<target>/<profile>`: this test binary is `<target>/<profile>/deps/c_abi-<hash>`.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.parent().and_then(Path::parent).expect("the test binary sits in <profile>/deps").to_path_buf()
}

fn features_tag() -> &'static str {
    if cfg!(feature = "test-exports") {
        "test-exports"
    } else {
        "default"
    }
}

fn output_text(output: &Output) -> String {
    format!(
        "status: {}\n--- stdout\n{}--- stderr\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn run(command: &mut Command) -> Output {
    let shown = format!("{command:?}");
    command.output().unwrap_or_else(|error| panic!("cannot run {shown}: {error}"))
}

fn available(program: &str) -> bool {
    Command::new(program).arg("--version").output().is_ok_and(|output| output.status.success())
}

/// `cargo build --lib` in this test's profile, with this run's features: only needed when the
/// library is missing (a plain `cargo test` builds the cdylib and staticlib into `deps/`).
fn cargo_build_lib(profile: &str, with_features: bool) {
    let mut command = Command::new(env!("CARGO"));
    command.current_dir(manifest_dir()).args(["build", "--lib"]);
    match profile {
        "debug" => {}
        "release" => {
            command.arg("--release");
        }
        other => {
            command.args(["--profile", other]);
        }
    }
    if with_features {
        command.args(["--features", "test-exports"]);
    }
    let output = run(&mut command);
    assert!(output.status.success(), "cargo build --lib failed:\n{}", output_text(&output));
}

/// The shared and static libraries this run built, copied into a directory of their own, so
/// that another cargo invocation rebuilding `deps/` (in place) cannot swap them mid-test.
struct Library {
    dir: PathBuf,
}

impl Library {
    fn shared(&self) -> PathBuf {
        self.dir.join("libwarden.so")
    }

    fn archive(&self) -> PathBuf {
        self.dir.join("libwarden.a")
    }
}

fn has_test_symbols(shared: &Path) -> bool {
    defined_symbols(shared).iter().any(|s| s.starts_with("warden_test_"))
}

/// Copies both libraries from `source` into `dir`; true when the copy has this run's features.
fn take_library(source: &Path, dir: &Path) -> bool {
    let built = source.join("libwarden.so").is_file() && source.join("libwarden.a").is_file();
    if !built {
        return false;
    }
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).expect("create the library directory");
    for file in ["libwarden.so", "libwarden.a"] {
        let (from, to) = (source.join(file), dir.join(file));
        std::fs::copy(&from, &to).unwrap_or_else(|e| panic!("copy {} to {}: {e}", from.display(), to.display()));
    }
    has_test_symbols(&dir.join("libwarden.so")) == cfg!(feature = "test-exports")
}

fn library() -> &'static Library {
    static LIBRARY: OnceLock<Library> = OnceLock::new();
    LIBRARY.get_or_init(|| {
        let profile = profile_dir();
        let dir = target_dir().join("tmp").join("c-abi").join(features_tag()).join("lib");
        // `cargo test` builds the cdylib and staticlib into `deps/` with this run's features
        // (it does not copy them up to `<profile>/`). Build them explicitly only when they are
        // missing there, or were since rebuilt with other features by another cargo invocation.
        if !take_library(&profile.join("deps"), &dir) {
            let name = profile.file_name().and_then(|n| n.to_str()).unwrap_or("debug").to_owned();
            cargo_build_lib(&name, cfg!(feature = "test-exports"));
            assert!(
                take_library(&profile, &dir),
                "cargo build --lib did not leave libwarden.so and libwarden.a with features {:?} in {}",
                features_tag(),
                profile.display()
            );
        }
        Library { dir }
    })
}

/// Dynamic symbols a library defines.
fn defined_symbols(library: &Path) -> Vec<String> {
    let output = run(Command::new("nm").args(["-D", "--defined-only"]).arg(library));
    assert!(output.status.success(), "nm failed:\n{}", output_text(&output));
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().last().map(str::to_owned))
        .collect()
}

#[derive(Debug, Clone, Copy)]
enum Linkage {
    Shared,
    Static,
}

fn compile(program: &str, linkage: Linkage) -> PathBuf {
    assert!(available("gcc"), "gcc is required for the C ABI tests");
    let library = library();
    let bin = library.dir.parent().expect("lib has a parent").join("bin");
    std::fs::create_dir_all(&bin).expect("create the bin directory");
    let exe = bin.join(format!("{program}-{linkage:?}").to_lowercase());
    let mut command = Command::new("gcc");
    command
        .args(C_FLAGS)
        .arg("-I")
        .arg(manifest_dir().join("include"))
        .arg(manifest_dir().join("tests/c").join(format!("{program}.c")))
        .arg("-o")
        .arg(&exe);
    match linkage {
        Linkage::Shared => {
            // RPATH, not RUNPATH: `cargo test` sets LD_LIBRARY_PATH to `deps/`, which would
            // otherwise win over the copy this test links against.
            command
                .arg("-L")
                .arg(&library.dir)
                .arg("-lwarden")
                .arg("-Wl,--disable-new-dtags")
                .arg(format!("-Wl,-rpath,{}", library.dir.display()));
        }
        Linkage::Static => {
            command.arg(library.archive()).args(["-lpthread", "-ldl", "-lm"]);
        }
    }
    let output = run(&mut command);
    assert!(output.status.success(), "gcc failed for {program} ({linkage:?}):\n{}", output_text(&output));
    exe
}

/// Compiles `program` both ways and runs each binary (under valgrind when installed) in a
/// scratch directory of its own.
fn run_c_program(program: &str) {
    run_c_program_with(program, &[]);
}

/// As `run_c_program`, with `extra` arguments after the scratch directory.
fn run_c_program_with(program: &str, extra: &[&str]) {
    let valgrind = available("valgrind");
    for linkage in [Linkage::Shared, Linkage::Static] {
        let exe = compile(program, linkage);
        let scratch = tempfile::tempdir().expect("tempdir");
        let suppressions = manifest_dir().join("tests/c").join(format!("{program}.supp"));
        let mut command = if valgrind {
            let mut command = Command::new("valgrind");
            command.args(VALGRIND_ARGS);
            if suppressions.is_file() {
                // Only for what a forked child leaves of its parent's threads (see the file);
                // the program's own process must need none of it (checked below). Whole
                // stacks, so that each one reaches the thread's start.
                command.arg(format!("--suppressions={}", suppressions.display())).arg("--num-callers=64");
            }
            command.arg(&exe);
            command
        } else {
            Command::new(&exe)
        };
        command
            .arg(scratch.path())
            .args(extra)
            .env("RUST_BACKTRACE", "0")
            .env_remove("STATUS_TOKEN")
            .env_remove("WARDEN_ENVIRONMENT")
            .env_remove("LD_LIBRARY_PATH");
        let output = run(&mut command);
        let text = output_text(&output);
        assert!(output.status.success(), "{program} ({linkage:?}) failed:\n{text}");
        assert!(String::from_utf8_lossy(&output.stdout).contains(&format!("{program}: ok")), "{text}");
        if valgrind {
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(stderr.contains("ERROR SUMMARY: 0 errors from 0 contexts"), "{text}");
            let summary: Vec<&str> = stderr
                .lines()
                .filter(|line| ["definitely lost", "indirectly lost", "ERROR SUMMARY"].iter().any(|k| line.contains(k)))
                .collect();
            // A program that frees everything has no LEAK SUMMARY at all.
            for line in &summary {
                if line.contains("lost:") {
                    assert!(line.contains(" 0 bytes in 0 blocks"), "{program} ({linkage:?}) leaked:\n{text}");
                }
            }
            if suppressions.is_file() {
                let first = stderr.split("==").nth(1).unwrap_or_default();
                let own = format!("=={first}== ERROR SUMMARY: 0 errors from 0 contexts (suppressed: 0 from 0)");
                assert!(stderr.contains(&own), "{program} ({linkage:?}) itself needed a suppression:\n{text}");
            }
            eprintln!("{program} ({linkage:?}) under valgrind:\n  {}", summary.join("\n  "));
        } else {
            eprintln!("{program} ({linkage:?}): passed (valgrind is not installed; ran without it)");
        }
    }
}

#[test]
fn reserve_commit_then_the_retry_is_refused_as_a_duplicate_from_c() {
    run_c_program("reserve_commit_retry");
}

#[test]
fn every_input_bound_holds_at_its_edge_and_refuses_or_marks_one_byte_past_it_from_c() {
    run_c_program("limits");
}

#[test]
fn approval_required_then_granted_by_a_human_then_consumed_from_c() {
    run_c_program("approval_flow");
}

#[test]
fn a_scoped_grant_covers_the_next_refunds_until_used_up_and_a_revoked_one_covers_none_from_c() {
    run_c_program("scoped_grants");
}

#[test]
fn approvals_from_c_show_the_arguments_answer_as_a_verified_principal_hear_the_hook_and_check_the_precondition() {
    run_c_program("approval_trust");
}

#[test]
fn a_refusals_error_object_is_read_and_freed_and_every_code_has_its_name_from_c() {
    run_c_program("refusal_error");
}

#[test]
fn delegation_revocation_sweeps_and_hops_from_c() {
    run_c_program("authority");
}

#[test]
fn the_integrator_store_operations_reserve_begin_complete_and_refuse_the_retry_from_c() {
    run_c_program("store_ops");
}

#[test]
fn the_integrator_extends_a_lease_consumes_approvals_with_and_without_a_key_and_marks_ambiguous_only_as_the_holder_from_c(
) {
    run_c_program("store_integrator");
}

#[test]
fn after_fork_the_inherited_handle_is_refused_untouched_and_children_with_their_own_handles_run_each_key_once() {
    run_c_program("fork");
}

/// The shared result vectors: each case's bytes go to a file the C program reads.
#[test]
fn every_result_in_the_shared_vectors_commits_stored_whole_or_marked_from_c() {
    let text = std::fs::read_to_string(manifest_dir().join("tests/vectors/results.json")).expect("results.json");
    let vectors: serde_json::Value = serde_json::from_str(&text).expect("results.json is JSON");
    let payloads = tempfile::tempdir().expect("tempdir");
    let mut args: Vec<String> = Vec::new();
    for case in vectors["cases"].as_array().expect("cases") {
        let name = case["name"].as_str().expect("name");
        let (how, bytes) = if let Some(json) = case["json_text"].as_str() {
            ("json", json.to_owned())
        } else if let Some(depth) = case["nested"].as_u64() {
            let depth = usize::try_from(depth).expect("depth");
            ("json", format!("{}{}", "[".repeat(depth), "]".repeat(depth)))
        } else if let Some(count) = case["string_of_x"].as_u64() {
            ("json", format!("\"{}\"", "x".repeat(usize::try_from(count).expect("count"))))
        } else if let Some(text) = case["text"].as_str() {
            ("text", text.to_owned())
        } else {
            assert_eq!(case["cancelled_before_run"], true, "{case}");
            ("cancel", case["error"].as_str().expect("error").to_owned())
        };
        let path = payloads.path().join(name);
        std::fs::write(&path, bytes).expect("payload");
        let stored = case["stored"].as_str().unwrap_or("-");
        let state = case["state"].as_str().expect("state");
        args.extend([name, how, state, stored].map(str::to_owned));
        args.push(path.display().to_string());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run_c_program_with("results", &args);
}

#[cfg(feature = "test-exports")]
#[test]
fn a_forced_panic_returns_panic_then_the_handle_answers_poisoned_until_reopened_from_c() {
    run_c_program("forced_panic");
}

#[test]
fn sights_from_c_catalog_query_hostile_refusals_snapshots_cancel_and_the_credential_callback() {
    let counter = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let server = support::Server::http(move |mut conn: support::Conn, _: &support::Recorded| {
        // Each run of the program (shared, then static) sees s1, s2, s3.
        let n = counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst) % 3 + 1;
        let body = format!(r#"{{"status":{{"indicator":"s{n}"}},"debug":"echo Bearer tok-c-2b7e151628aed2a6"}}"#);
        conn.send(&support::response("200 OK", &[("content-type", "application/json")], body.as_bytes()));
        Some(conn)
    });
    let port = server.port.to_string();
    run_c_program_with("sight", &[&port]);
    // Each linkage sent exactly three GETs (one query, two snapshots), all inside the window,
    // with the host's credential and nothing the agent chose beyond the region.
    let requests = server.requests();
    assert_eq!(requests.len(), 6, "{requests:?}");
    for (i, request) in requests.iter().enumerate() {
        assert_eq!(request.method, "GET");
        let expected = if i % 3 == 0 { "/v2/summary?region=us" } else { "/v2/summary?region=eu" };
        assert_eq!(request.target, expected);
        assert_eq!(request.header("authorization"), Some("Bearer tok-c-2b7e151628aed2a6"));
        assert!(request.extra.is_empty() && request.header("content-length").is_none(), "no body");
    }
}

#[test]
fn every_c_program_in_tests_c_is_run_by_a_test() {
    let mut found: Vec<String> = std::fs::read_dir(manifest_dir().join("tests/c"))
        .expect("tests/c")
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter_map(|name| name.strip_suffix(".c").map(str::to_owned))
        .collect();
    found.sort();
    let mut listed: Vec<String> = PROGRAMS.iter().map(|p| (*p).to_owned()).collect();
    listed.sort();
    assert_eq!(found, listed, "a C program in tests/c is not listed in PROGRAMS (and run by a test)");
}

#[test]
fn the_library_this_run_built_has_test_only_symbols_exactly_when_the_feature_is_on() {
    let shared = library().shared();
    assert_eq!(has_test_symbols(&shared), cfg!(feature = "test-exports"), "features: {}", features_tag());
    assert!(defined_symbols(&shared).iter().any(|s| s == "warden_propose"));
}

/// The functions `include/warden.h` declares.
fn header_functions(header: &str) -> Vec<String> {
    header
        .lines()
        .filter(|line| !line.starts_with([' ', '/', '*', '#']))
        .filter_map(|line| line.split_once('(').map(|(head, _)| head))
        .filter_map(|head| head.split_whitespace().last())
        .map(|name| name.trim_start_matches('*').to_owned())
        .filter(|name| name.starts_with("warden_"))
        .collect()
}

#[test]
fn the_release_library_and_the_header_hold_no_test_only_export() {
    // The release library as shipped: built without the feature, whatever this run enables.
    let mut command = Command::new(env!("CARGO"));
    command.current_dir(manifest_dir()).args(["build", "--release", "--lib"]);
    let output = run(&mut command);
    assert!(output.status.success(), "cargo build --release --lib failed:\n{}", output_text(&output));
    let release = target_dir().join("release").join("libwarden.so");
    let symbols = defined_symbols(&release);
    let leaked: Vec<&String> = symbols.iter().filter(|s| s.contains("warden_test_")).collect();
    assert!(leaked.is_empty(), "the release library exports test-only symbols: {leaked:?}");

    let header = std::fs::read_to_string(manifest_dir().join("include/warden.h")).expect("include/warden.h");
    assert!(!header.contains("warden_test_"), "include/warden.h declares a test-only export");
    let declared = header_functions(&header);
    assert_eq!(declared.len(), 75, "{declared:?}");
    for function in &declared {
        assert!(symbols.contains(function), "{function} is declared in the header but not exported by {release:?}");
    }
    let exported: Vec<&String> = symbols.iter().filter(|s| s.starts_with("warden_")).collect();
    assert_eq!(exported.len(), declared.len(), "exported {exported:?}, declared {declared:?}");
}

#[test]
fn the_header_compiles_as_c_and_as_cpp() {
    let header = manifest_dir().join("include/warden.h");
    let c = run(Command::new("gcc").args(C_FLAGS).args(["-fsyntax-only", "-x", "c"]).arg(&header));
    assert!(c.status.success(), "{}", output_text(&c));
    if available("g++") {
        let cpp = run(Command::new("g++")
            .args(["-std=c++11", "-Wall", "-Wextra", "-Werror", "-pedantic"])
            .args(["-fsyntax-only", "-x", "c++"])
            .arg(&header));
        assert!(cpp.status.success(), "{}", output_text(&cpp));
    }
}
