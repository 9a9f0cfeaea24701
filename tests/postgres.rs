//! The PostgreSQL backend's own guarantees, against a real server: migrations and what opening
//! refuses, secrets kept out of messages, lost commits decided by the witness, a stalled or
//! killed lock holder, a server restart between calls, events in commit order under concurrent
//! writers, the clock skew report.
//!
//! Needs `WARDEN_TEST_STORE=postgresql://…` naming a database this user may create schemas in
//! (`scripts/pg-server.sh start DIR` starts a private server and prints one), and for the
//! restart case `WARDEN_TEST_PG_DIR=DIR`. `scripts/test.sh` runs it in its PostgreSQL stage:
//!
//!   url=$(scripts/pg-server.sh start /tmp/wpg)
//!   WARDEN_TEST_STORE=$url WARDEN_TEST_PG_DIR=/tmp/wpg cargo test --features test-exports,postgres --test postgres
//!   scripts/pg-server.sh stop /tmp/wpg

mod common;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use warden::test_support::KernelInternals;

use common::*;
use warden::store::{lose_next_postgres_commit, StoreOptions};
use warden::{DuplicateState, EffectState, Error, Kernel, KernelOptions, ManualClock};

/// The restart case stops the server every other test uses: it runs alone (write), the rest
/// together (read).
static SERVER: std::sync::RwLock<()> = std::sync::RwLock::new(());

fn shared() -> std::sync::RwLockReadGuard<'static, ()> {
    SERVER.read().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn base() -> String {
    std::env::var("WARDEN_TEST_STORE")
        .ok()
        .filter(|url| warden::store::is_postgres(url))
        .expect("set WARDEN_TEST_STORE=postgresql://… (scripts/pg-server.sh start DIR prints one)")
}

/// A direct connection, to read and alter what the backend wrote.
fn connect(url: &str) -> postgres::Client {
    postgres::Client::connect(url, postgres::NoTls).expect("connect to the test server")
}

fn open_with(location: &str, clock: &ManualClock, wait: Duration) -> warden::error::Result<Kernel> {
    Kernel::open(
        PathBuf::from(location),
        KernelOptions {
            clock: Arc::new(clock.clone()),
            store: StoreOptions { wait, read_only: false, ..StoreOptions::default() },
            ..KernelOptions::default()
        },
    )
}

fn refusal(location: &str) -> String {
    match open_with(location, &ManualClock::new(T0), Duration::from_secs(5)) {
        Ok(_) => panic!("opening {location} was not refused"),
        Err(error) => error.to_string(),
    }
}

fn schema_of(url: &str) -> String {
    url.rsplit("search_path%3D").next().unwrap().to_owned()
}

#[test]
fn a_new_schema_gets_every_migration_once_and_a_second_open_changes_nothing() {
    let _server = shared();
    let url = fresh_postgres_schema(&base());
    let first = open(&PathBuf::from(&url), &ManualClock::new(T0));
    first.propose(&allow(&refund("p1", 1), &key_template())).unwrap().commit(&serde_json::json!(1)).unwrap();
    drop(first);
    let again = open(&PathBuf::from(&url), &ManualClock::new(T0));
    assert_eq!(again.effect("refund:p1").unwrap().unwrap().state, EffectState::Committed);
    let mut db = connect(&url);
    let versions: Vec<i32> =
        db.query("SELECT version FROM warden_schema_version", &[]).unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(versions, [1, 2, 3, 4, 5, 6, 7]);
}

/// A schema at migration 1 (the budget ledger with its SQL-summed columns, no running sums)
/// migrates to 2 (and on) in one transaction: the columns go, `warden_budget_sums` comes, and a charge
/// made before the migration still counts in the window.
#[test]
fn a_migration_1_schema_keeps_its_budget_charges_through_migration_2() {
    let _server = shared();
    let url = fresh_postgres_schema(&base());
    let charge = |amount| warden::authority::Charge {
        grant_id: "support".into(),
        metric: "amount".into(),
        amount,
        limit: u64::MAX,
        window_seconds: 3600,
    };
    {
        let kernel = open(&PathBuf::from(&url), &ManualClock::new(T0));
        kernel.store().tamper(|t| t.put_budget_charges(&[charge(250)], "refund:p1", 1, T0)).unwrap();
    }
    // Lay the schema out as migration 1 left it.
    connect(&url)
        .batch_execute(
            "ALTER TABLE warden_budget_ledger ADD COLUMN consumed_at bigint NOT NULL DEFAULT 0, \
             ADD COLUMN amount numeric(20, 0) NOT NULL DEFAULT 250, ADD COLUMN released boolean NOT NULL DEFAULT false; \
             DROP TABLE warden_budget_sums, warden_merkle_nodes, warden_checkpoints, warden_anchors, warden_policies, \
             warden_holds, warden_pruned_outcomes, warden_scoped_grants, warden_scoped_grants_by_action; \
             DELETE FROM warden_schema_version WHERE version >= 2",
        )
        .unwrap();
    let kernel = open(&PathBuf::from(&url), &ManualClock::new(T0));
    let mut db = connect(&url);
    let versions: Vec<i32> = db
        .query("SELECT version FROM warden_schema_version ORDER BY version", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(versions, [1, 2, 3, 4, 5, 6, 7]);
    let columns: i64 = db
        .query_one(
            "SELECT count(*) FROM information_schema.columns WHERE table_schema = current_schema() \
             AND table_name = 'warden_budget_ledger' AND column_name IN ('consumed_at', 'amount', 'released')",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(columns, 0);
    let spent = kernel.store().tamper(|t| t.budget_window_sum(&charge(0), T0 + SECOND).map(|sum| assert_eq!(sum, 250)));
    spent.unwrap();
    assert!(kernel.doctor().unwrap().tables.iter().all(|(_, _, problems)| problems.is_empty()));
}

#[test]
fn opening_refuses_a_schema_it_did_not_write_naming_the_cause() {
    let _server = shared();
    // (what is done to a schema this build created, words the refusal must contain)
    let cases: [(&str, &str); 3] = [
        (
            "INSERT INTO warden_schema_version (version, checksum, what) VALUES (8, 'x', 'from a newer build')",
            "newer than this build",
        ),
        ("DELETE FROM warden_schema_version WHERE version = 1", "has a gap"),
        ("UPDATE warden_schema_version SET checksum = 'edited' WHERE version = 1", "diverged"),
    ];
    for (alteration, words) in cases {
        let url = fresh_postgres_schema(&base());
        drop(open(&PathBuf::from(&url), &ManualClock::new(T0)));
        connect(&url).batch_execute(alteration).unwrap();
        let message = refusal(&url);
        assert!(message.contains(words), "{alteration}: {message}");
        assert!(message.contains(&schema_of(&url)), "the refusal names the schema: {message}");
    }
}

#[test]
fn a_user_without_create_is_refused_until_granted_and_then_migrates() {
    let _server = shared();
    let url = fresh_postgres_schema(&base());
    let schema = schema_of(&url);
    let role = format!("r_{schema}");
    let mut admin = connect(&url);
    admin.batch_execute(&format!("CREATE ROLE {role} LOGIN; GRANT USAGE ON SCHEMA {schema} TO {role}")).unwrap();
    let as_role = url.replacen("postgres@", &format!("{role}@"), 1);
    let message = refusal(&as_role);
    assert!(message.contains("may not CREATE") && message.contains(&schema), "{message}");
    admin.batch_execute(&format!("GRANT CREATE ON SCHEMA {schema} TO {role}")).unwrap();
    let kernel = open(&PathBuf::from(&as_role), &ManualClock::new(T0));
    kernel.propose(&allow(&refund("p1", 1), &key_template())).unwrap().commit(&serde_json::json!(1)).unwrap();
}

#[test]
fn a_database_that_is_not_utf8_is_refused() {
    let _server = shared();
    let name = format!("ascii_{}", std::process::id());
    let mut admin = connect(&base());
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name}")).unwrap();
    admin
        .batch_execute(&format!(
            "CREATE DATABASE {name} ENCODING 'SQL_ASCII' TEMPLATE template0 LC_COLLATE 'C' LC_CTYPE 'C'"
        ))
        .unwrap();
    let url = base();
    let (prefix, _) = url.rsplit_once('/').unwrap();
    let message = refusal(&format!("{prefix}/{name}"));
    admin.batch_execute(&format!("DROP DATABASE {name}")).unwrap();
    assert!(message.contains("encoding SQL_ASCII") && message.contains("UTF8"), "{message}");
}

#[test]
fn a_search_path_naming_no_schema_is_refused() {
    let _server = shared();
    let message = refusal(&format!("{}?options=-csearch_path%3Dno_such_schema_here", base()));
    assert!(message.contains("no schema of the search_path"), "{message}");
}

#[test]
fn a_password_never_appears_in_a_message_and_tls_is_refused_before_anything_is_sent() {
    let _server = shared();
    // Nothing listens on port 9 of this host: connecting fails, and the failure is described.
    let message = refusal("postgresql://warden:s3cret-pw@127.0.0.1:9/warden?connect_timeout=2");
    assert!(!message.contains("s3cret-pw"), "{message}");
    assert!(message.contains("***") && message.contains("cannot connect"), "{message}");
    let message = refusal(&format!("{}?sslmode=prefer&password=s3cret-pw", base()));
    assert!(message.contains("sslmode=prefer") && !message.contains("s3cret-pw"), "{message}");
}

/// A CA, and a server certificate for 127.0.0.1 it signed, as PEM: (ca, cert, key).
fn tls_material() -> (String, String, String) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name.push(rcgen::DnType::CommonName, "warden postgres test CA");
    ca.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign, rcgen::KeyUsagePurpose::DigitalSignature];
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca, ca_key);
    let key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()]).unwrap();
    let cert = leaf.signed_by(&key, &issuer).unwrap();
    (ca_cert.pem(), cert.pem(), key.serialize_pem())
}

#[test]
fn tls_is_verified_against_the_given_root_and_refused_with_another_or_a_fallback() {
    let _server = shared();
    let dir = std::env::var("WARDEN_TEST_PG_DIR").expect("WARDEN_TEST_PG_DIR");
    let (ca, cert, key) = tls_material();
    let (other_ca, _, _) = tls_material();
    let tls_dir = PathBuf::from(&dir).join(format!("tls-{}", std::process::id()));
    std::fs::create_dir_all(&tls_dir).unwrap();
    for (name, text) in [("server.crt", &cert), ("server.key", &key)] {
        let path = tls_dir.join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    }
    if rustix::process::geteuid().is_root() {
        // The server runs as the owner of its data directory and reads its key only if it owns it.
        let owner = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(format!("{dir}/data")).unwrap());
        for path in [tls_dir.clone(), tls_dir.join("server.crt"), tls_dir.join("server.key")] {
            std::os::unix::fs::chown(&path, Some(owner), None).unwrap();
        }
    }
    let ca_path = tls_dir.join("ca.pem");
    let other_path = tls_dir.join("other-ca.pem");
    std::fs::write(&ca_path, &ca).unwrap();
    std::fs::write(&other_path, &other_ca).unwrap();
    let mut admin = connect(&base());
    // One statement per call: ALTER SYSTEM refuses to run in the implicit transaction of a batch.
    for statement in [
        format!("ALTER SYSTEM SET ssl_cert_file = '{}/server.crt'", tls_dir.display()),
        format!("ALTER SYSTEM SET ssl_key_file = '{}/server.key'", tls_dir.display()),
        "ALTER SYSTEM SET ssl = on".to_owned(),
        "SELECT pg_reload_conf()".to_owned(),
    ] {
        admin.batch_execute(&statement).unwrap();
    }
    std::thread::sleep(Duration::from_millis(500));

    let url = fresh_postgres_schema(&base());
    let verified = format!("{url}&sslmode=verify-full&sslrootcert={}&application_name=warden-tls", ca_path.display());
    let kernel = open(&PathBuf::from(&verified), &ManualClock::new(T0));
    kernel.propose(&allow(&refund("tls", 1), &key_template())).unwrap().commit(&serde_json::json!(1)).unwrap();
    let encrypted: bool = admin
        .query_one(
            "SELECT coalesce(bool_and(s.ssl), false) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
             WHERE a.application_name = 'warden-tls'",
            &[],
        )
        .unwrap()
        .get(0);
    assert!(encrypted, "the store's connections are not encrypted");

    // (URL suffix, words the refusal must contain)
    let refused = [
        (format!("&sslmode=verify-full&sslrootcert={}", other_path.display()), "certificate".to_owned()),
        ("&sslmode=require".to_owned(), "certificate".to_owned()),
        ("&sslmode=allow".to_owned(), "sslmode=allow".to_owned()),
        ("&sslmode=verify-full&sslrootcert=/no/such/root.pem".to_owned(), "/no/such/root.pem".to_owned()),
        ("&sslmode=disable&sslrootcert=/etc/hosts".to_owned(), "say which you mean".to_owned()),
    ];
    for (suffix, words) in refused {
        let message = refusal(&format!("{url}{suffix}"));
        assert!(message.contains(&words), "{suffix}: {message}");
    }
    // A server elsewhere, without sslmode: refused before any connection is made.
    let message = refusal("postgresql://warden@192.0.2.1:5432/warden");
    assert!(message.contains("does not say sslmode"), "{message}");
    admin.batch_execute("ALTER SYSTEM RESET ssl").unwrap();
    admin.batch_execute("SELECT pg_reload_conf()").unwrap();
}

#[test]
fn a_commit_that_never_reached_the_server_is_applied_once_by_the_witness_check() {
    let _server = shared();
    let url = fresh_postgres_schema(&base());
    let kernel = open(&PathBuf::from(&url), &ManualClock::new(T0));
    let t = key_template();
    lose_next_postgres_commit(false);
    let permit = kernel.propose(&allow(&refund("lost", 5), &t)).unwrap();
    assert_eq!(permit.attempt(), 1);
    // The first transaction never committed; the reservation was applied once, by the check.
    let mut db = connect(&url);
    let witnesses: i64 = db.query_one("SELECT count(*) FROM warden_witness", &[]).unwrap().get(0);
    assert_eq!(witnesses, 1);
    permit.commit(&serde_json::json!({"ok": true})).unwrap();
    let record = kernel.effect("refund:lost").unwrap().unwrap();
    assert_eq!((record.state, record.attempt), (EffectState::Committed, 1));
    assert_eq!(kernel.receipts(1, 100).unwrap().len(), 1);
    assert!(kernel.verify_chain().unwrap().ok);
}

#[test]
fn a_commit_whose_answer_was_lost_hands_out_its_one_permit_and_a_blind_retry_is_refused() {
    let _server = shared();
    let url = fresh_postgres_schema(&base());
    let kernel = open(&PathBuf::from(&url), &ManualClock::new(T0));
    let t = key_template();
    lose_next_postgres_commit(true);
    let permit = kernel.propose(&allow(&refund("landed", 5), &t)).unwrap();
    let refused = kernel.propose(&allow(&refund("landed", 5), &t)).unwrap_err();
    assert!(matches!(refused, Error::Duplicate { state: DuplicateState::InProgress, .. }), "{refused}");
    permit.commit(&serde_json::json!(1)).unwrap();
    let record = kernel.effect("refund:landed").unwrap().unwrap();
    assert_eq!((record.state, record.attempt), (EffectState::Committed, 1));
    let mut db = connect(&url);
    let witnesses: i64 = db.query_one("SELECT count(*) FROM warden_witness", &[]).unwrap().get(0);
    // The reservation, the blind retry's refusal (it records a receipt), the commit.
    assert_eq!(witnesses, 3);
    assert!(kernel.verify_chain().unwrap().ok);
}

#[test]
fn hostile_text_is_stored_and_read_back_exactly() {
    let _server = shared();
    let url = fresh_postgres_schema(&base());
    let kernel = open(&PathBuf::from(&url), &ManualClock::new(T0));
    // Raw: the value goes into the effect key as it is (a text key column, written as an SQL
    // literal), not percent-encoded.
    let t = warden::Template::parse("refund:{payment_id}", warden::TemplateMode::Raw).unwrap();
    let values = [
        "'",
        "''",
        "\\",
        "\\'",
        "'; DROP TABLE warden_effects; --",
        "$1",
        "$$ $2 $$",
        "E'\\x00'",
        "\\x41",
        "naïve — ünïcödé ✓ 🦀",
        "line\nbreak\ttab\r",
        "%s %d {n}",
    ];
    for (n, value) in values.iter().enumerate() {
        let permit = kernel.propose(&allow(&refund(value, n as i64 + 1), &t)).unwrap();
        permit.commit(&serde_json::json!({"echo": value})).unwrap();
        let record = kernel.effect(&format!("refund:{value}")).unwrap().expect("the effect is found by its key");
        assert_eq!(record.state, EffectState::Committed, "{value:?}");
        assert_eq!(record.result.unwrap().json, serde_json::json!({"echo": value}).to_string(), "{value:?}");
    }
    assert_eq!(kernel.effects(None, 100).unwrap().len(), values.len());
    assert!(kernel.verify_chain().unwrap().ok);
    // PostgreSQL text cannot hold NUL: refused by name, nothing written, the handle usable.
    let refused = kernel.propose(&allow(&refund("nul\0here", 1), &t)).unwrap_err();
    assert!(refused.to_string().contains("NUL"), "{refused}");
    assert_eq!(kernel.poisoned(), None);
    assert_eq!(kernel.effects(None, 100).unwrap().len(), values.len());
}

#[test]
fn a_write_that_collides_with_an_altered_row_fails_whole_and_writes_nothing() {
    let _server = shared();
    let url = fresh_postgres_schema(&base());
    let kernel = open(&PathBuf::from(&url), &ManualClock::new(T0));
    let t = key_template();
    let permit = kernel.propose(&allow(&refund("collide", 5), &t)).unwrap();
    // Someone puts a row where the next receipt goes: the commit's insert collides.
    let mut db = connect(&url);
    db.execute("INSERT INTO warden_receipts (seq, v) VALUES (1, '\\x00'::bytea)", &[]).unwrap();
    let events_before: i64 = db.query_one("SELECT count(*) FROM warden_events", &[]).unwrap().get(0);
    let failed = permit.commit(&serde_json::json!(1)).unwrap_err();
    assert!(matches!(failed, Error::Store(_)), "{failed}");
    assert!(failed.to_string().contains("warden_receipts"), "{failed}");
    let events_after: i64 = db.query_one("SELECT count(*) FROM warden_events", &[]).unwrap().get(0);
    assert_eq!(events_after, events_before, "an event of the failed commit was written");
    // The handle is poisoned by the fault (a store it did not write); a fresh one reads the row
    // as the reservation left it.
    let again = open(&PathBuf::from(&url), &ManualClock::new(T0));
    assert_eq!(again.effect("refund:collide").unwrap().unwrap().state, EffectState::Executing);
    let witnesses: i64 = db.query_one("SELECT count(*) FROM warden_witness", &[]).unwrap().get(0);
    assert_eq!(witnesses, 1, "only the reservation's transaction committed");
}

/// A clock that leaps ten minutes (twice the default lease) at every read: the instant a lost
/// commit is confirmed is always past the lease it granted.
#[derive(Debug)]
struct Leaping(std::sync::atomic::AtomicI64);

impl warden::Clock for Leaping {
    fn now(&self) -> i64 {
        self.0.fetch_add(600 * SECOND, std::sync::atomic::Ordering::SeqCst)
    }
}

/// A kernel whose every reading of the clock is 10 minutes past the last.
fn leaping(url: &str) -> Kernel {
    let clock = Arc::new(Leaping(std::sync::atomic::AtomicI64::new(T0)));
    Kernel::open(PathBuf::from(url), KernelOptions { clock, ..KernelOptions::default() }).unwrap()
}

#[test]
fn a_permit_confirmed_after_its_lease_lapsed_is_not_handed_out_and_its_attempt_is_failed() {
    let _server = shared();
    let url = fresh_postgres_schema(&base());
    let kernel = leaping(&url);
    let t = key_template();
    lose_next_postgres_commit(true);
    let refused = kernel.propose(&allow(&refund("late", 5), &t)).unwrap_err();
    assert!(matches!(refused, Error::Unavailable(_)), "{refused}");
    assert!(refused.to_string().contains("after its lease had lapsed"), "{refused}");
    assert_eq!(kernel.poisoned(), None);
    let record = kernel.effect("refund:late").unwrap().unwrap();
    assert_eq!((record.state, record.attempt), (EffectState::Failed, 1));
    assert!(record.error.as_deref().unwrap_or("").contains("not handed out"), "{record:?}");
    // It provably never ran: the next proposal renews it as attempt 2.
    let permit = kernel.propose(&allow(&refund("late", 5), &t)).unwrap();
    assert_eq!(permit.attempt(), 2);
    permit.commit(&serde_json::json!(1)).unwrap();
    let results: Vec<String> = kernel
        .receipts(1, 10)
        .unwrap()
        .iter()
        .map(|(_, r)| {
            serde_json::from_str::<serde_json::Value>(&r.document).unwrap()["result"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(results, ["failed", "committed"]);
    assert!(kernel.verify_chain().unwrap().ok);
}

#[test]
fn a_claim_confirmed_after_its_lease_lapsed_is_not_returned_and_its_key_lapses_into_ambiguous() {
    let _server = shared();
    let url = fresh_postgres_schema(&base());
    let kernel = leaping(&url);
    let action = refund("claimed", 5);
    lose_next_postgres_commit(true);
    let refused = kernel.reserve_only(&action, "refund:claimed", None, None).unwrap_err();
    assert!(matches!(refused, Error::Unavailable(_)), "{refused}");
    assert!(refused.to_string().contains("after its lease had lapsed"), "{refused}");
    assert!(refused.to_string().contains("the next claim finds it AMBIGUOUS"), "{refused}");
    assert_eq!(kernel.poisoned(), None);
    // Never handed out, and left as it landed: reserved, its lease lapsed.
    let record = kernel.effect("refund:claimed").unwrap().unwrap();
    assert_eq!((record.state, record.attempt), (EffectState::Reserved, 1));
    // The next claim finds it AMBIGUOUS (fail closed); a human settles it.
    let again = kernel.reserve_only(&refund("claimed", 5), "refund:claimed", None, None).unwrap_err();
    assert!(matches!(again, Error::Ambiguous { .. }), "{again}");
    assert_eq!(kernel.effect("refund:claimed").unwrap().unwrap().state, EffectState::Ambiguous);
    // A claim whose commit is answered is returned as it is, lease and all.
    let other = kernel.reserve_only(&refund("answered", 5), "refund:answered", None, None).unwrap();
    assert_eq!((other.state, other.attempt), (EffectState::Reserved, 1));
    assert!(kernel.verify_chain().unwrap().ok);
}

/// Hold the store's write lock from another connection, as a stalled client would.
fn hold_write_lock(url: &str) -> postgres::Client {
    let mut holder = connect(url);
    // 1464074242 is the backend's WRITE_LOCK_CLASS (0x5744_0002, src/store/pg/mod.rs).
    holder.batch_execute("BEGIN; SELECT pg_advisory_xact_lock(1464074242, hashtext(current_schema()))").unwrap();
    holder
}

#[test]
fn a_stalled_lock_holder_makes_a_call_unavailable_within_its_bound_without_poisoning_the_handle() {
    let _server = shared();
    let url = fresh_postgres_schema(&base());
    let clock = ManualClock::new(T0);
    let kernel = open_with(&url, &clock, Duration::from_millis(400)).unwrap();
    let t = key_template();
    let mut holder = hold_write_lock(&url);
    let started = Instant::now();
    let refused = kernel.propose(&allow(&refund("waits", 5), &t)).unwrap_err();
    assert!(matches!(refused, Error::Unavailable(_)), "{refused}");
    assert!(refused.to_string().contains("write lock"), "{refused}");
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    assert_eq!(kernel.poisoned(), None);
    holder.batch_execute("ROLLBACK").unwrap();
    kernel.propose(&allow(&refund("waits", 5), &t)).unwrap().commit(&serde_json::json!(1)).unwrap();
    assert_eq!(kernel.effect("refund:waits").unwrap().unwrap().attempt, 1);
}

/// Not a test: a child process that takes the store's write lock in an open transaction, says
/// so, and waits to be killed (`WARDEN_CHILD_HOLD` names the store).
#[test]
#[ignore = "entry point for the child process of the SIGKILL test"]
fn child_holds_the_write_lock() {
    let Ok(url) = std::env::var("WARDEN_CHILD_HOLD") else { return };
    let _holder = hold_write_lock(&url);
    println!("CHILD:locked");
    loop {
        std::thread::park();
    }
}

#[test]
fn a_lock_holder_killed_with_sigkill_releases_the_store() {
    let _server = shared();
    use std::io::BufRead;
    let url = fresh_postgres_schema(&base());
    let kernel = open_with(&url, &ManualClock::new(T0), Duration::from_secs(20)).unwrap();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["child_holds_the_write_lock", "--exact", "--ignored", "--nocapture", "--test-threads=1", "--quiet"])
        .env("WARDEN_CHILD_HOLD", &url)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    assert!(lines.by_ref().map_while(Result::ok).any(|line| line == "CHILD:locked"), "the child never took the lock");
    // While the child lives, a call waits for the lock; it is released when the child dies.
    let waiter = {
        let kernel = kernel.clone();
        std::thread::spawn(move || {
            let started = Instant::now();
            let attempt = kernel.propose(&allow(&refund("after-kill", 5), &key_template())).map(|p| p.attempt());
            (attempt, started.elapsed())
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    assert!(!waiter.is_finished(), "the call did not wait for the lock holder");
    child.kill().unwrap(); // SIGKILL
    let _ = child.wait();
    let (attempt, waited) = waiter.join().unwrap();
    assert_eq!(attempt.unwrap(), 1);
    assert!(waited >= Duration::from_millis(300) && waited < Duration::from_secs(15), "{waited:?}");
}

/// `pg_ctl restart -m fast` of the test server (as the user that owns its data directory).
fn restart_server(dir: &str) {
    let bin = std::fs::read_dir("/usr/lib/postgresql")
        .ok()
        .and_then(|entries| entries.filter_map(Result::ok).map(|e| e.path().join("bin")).max())
        .unwrap_or_else(|| PathBuf::from("/usr/bin"));
    let pg_ctl = std::env::var("PG_BIN").map(|b| PathBuf::from(b).join("pg_ctl")).unwrap_or(bin.join("pg_ctl"));
    let data = format!("{dir}/data");
    let mut command = if rustix::process::geteuid().is_root() {
        let mut c = std::process::Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(&pg_ctl);
        c
    } else {
        std::process::Command::new(&pg_ctl)
    };
    let status = command
        .args(["-D", &data, "-m", "fast", "-w", "-t", "30", "restart", "-l"])
        .arg(format!("{dir}/server.log"))
        .status()
        .unwrap();
    assert!(status.success(), "pg_ctl restart failed");
}

#[test]
fn a_server_restart_between_calls_is_survived_by_reconnecting() {
    let _alone = SERVER.write().unwrap_or_else(std::sync::PoisonError::into_inner);
    let Ok(dir) = std::env::var("WARDEN_TEST_PG_DIR") else {
        panic!("set WARDEN_TEST_PG_DIR to the directory scripts/pg-server.sh started the server in");
    };
    let url = fresh_postgres_schema(&base());
    let kernel = open_with(&url, &ManualClock::new(T0), Duration::from_secs(20)).unwrap();
    let t = key_template();
    kernel.propose(&allow(&refund("before", 5), &t)).unwrap().commit(&serde_json::json!(1)).unwrap();
    restart_server(&dir);
    // The pooled connection died with the server; the next call replaces it.
    let permit = kernel.propose(&allow(&refund("after", 5), &t)).unwrap();
    permit.commit(&serde_json::json!(2)).unwrap();
    assert_eq!(kernel.poisoned(), None);
    assert_eq!(kernel.effects(None, 10).unwrap().len(), 2);
    assert!(kernel.verify_chain().unwrap().ok);
}

#[test]
fn a_server_restart_under_eight_writers_loses_no_reported_permit_and_fails_nothing() {
    let _alone = SERVER.write().unwrap_or_else(std::sync::PoisonError::into_inner);
    let dir = std::env::var("WARDEN_TEST_PG_DIR").expect("WARDEN_TEST_PG_DIR");
    let url = fresh_postgres_schema(&base());
    drop(open(&PathBuf::from(&url), &ManualClock::new(T0)));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let workers: Vec<_> = (0..8)
        .map(|w| {
            let (url, stop) = (url.clone(), stop.clone());
            std::thread::spawn(move || {
                // Each its own handle: its own connections, as a process would have.
                let kernel = open_with(&url, &ManualClock::new(T0), Duration::from_secs(10)).unwrap();
                let t = key_template();
                let (mut permits, mut commits, mut unavailable) = (Vec::new(), Vec::new(), 0);
                let mut n = 0;
                while !stop.load(std::sync::atomic::Ordering::SeqCst) || n < 5 {
                    let key = format!("w{w}n{n}");
                    n += 1;
                    match kernel.propose(&allow(&refund(&key, 1), &t)) {
                        Ok(permit) => {
                            permits.push(key.clone());
                            match permit.commit(&serde_json::json!(n)) {
                                Ok(()) => commits.push(key),
                                Err(Error::Unavailable(_)) => unavailable += 1,
                                Err(other) => panic!("commit of {key}: {other}"),
                            }
                        }
                        Err(Error::Unavailable(_)) => unavailable += 1,
                        Err(other) => panic!("propose {key}: {other}"),
                    }
                    assert_eq!(kernel.poisoned(), None);
                }
                (permits, commits, unavailable)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(700));
    restart_server(&dir);
    std::thread::sleep(Duration::from_millis(700));
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let reader = open(&PathBuf::from(&url), &ManualClock::new(T0));
    let mut reported = 0;
    for worker in workers {
        let (permits, commits, unavailable) = worker.join().unwrap();
        eprintln!("worker: {} permits, {} commits, {unavailable} unavailable", permits.len(), commits.len());
        reported += permits.len();
        for key in &permits {
            let record = reader.effect(&format!("refund:{key}")).unwrap();
            assert!(record.is_some(), "reported permit {key} was lost");
        }
        for key in &commits {
            assert_eq!(
                reader.effect(&format!("refund:{key}")).unwrap().unwrap().state,
                EffectState::Committed,
                "{key}"
            );
        }
    }
    assert!(reported > 16, "the workers made progress: {reported} permits");
    let failed = reader.effects(Some(EffectState::Failed), 1000).unwrap();
    assert!(failed.is_empty(), "FAILED without proof: {failed:?}");
    assert!(reader.verify_chain().unwrap().ok);
}

#[test]
fn a_password_comes_from_the_password_file_which_others_must_not_read() {
    use std::os::unix::fs::PermissionsExt;
    let _alone = SERVER.write().unwrap_or_else(std::sync::PoisonError::into_inner);
    let dir = std::env::var("WARDEN_TEST_PG_DIR").expect("WARDEN_TEST_PG_DIR");
    let url = fresh_postgres_schema(&base());
    let schema = schema_of(&url);
    let role = format!("pw_{schema}");
    let mut admin = connect(&base());
    admin
        .batch_execute(&format!(
            "CREATE ROLE {role} LOGIN PASSWORD 'right-pw'; GRANT USAGE, CREATE ON SCHEMA {schema} TO {role}"
        ))
        .unwrap();
    // This role must give a password (the server trusts everyone else on 127.0.0.1).
    let hba = format!("{dir}/data/pg_hba.conf");
    let original = std::fs::read_to_string(&hba).unwrap();
    std::fs::write(&hba, format!("host all {role} 127.0.0.1/32 scram-sha-256\n{original}")).unwrap();
    admin.batch_execute("SELECT pg_reload_conf()").unwrap();
    std::thread::sleep(Duration::from_millis(300));

    let port = base().rsplit_once(':').unwrap().1.split('/').next().unwrap().to_owned();
    let files = tempfile::tempdir().unwrap();
    let passfile = files.path().join("pgpass");
    let as_role = url.replacen("postgres@", &format!("{role}@"), 1);
    let attempt = |line: &str, mode: u32| {
        std::fs::write(&passfile, line).unwrap();
        std::fs::set_permissions(&passfile, std::fs::Permissions::from_mode(mode)).unwrap();
        std::env::set_var("PGPASSFILE", &passfile);
        let opened = open_with(&as_role, &ManualClock::new(T0), Duration::from_secs(5));
        std::env::remove_var("PGPASSFILE");
        opened.map(drop).map_err(|e| e.to_string())
    };
    let right = format!("127.0.0.1:{port}:warden:{role}:right-pw\n");
    assert_eq!(attempt(&right, 0o600), Ok(()));
    let wrong = attempt(&format!("127.0.0.1:{port}:warden:{role}:wrong-pw\n"), 0o600).unwrap_err();
    assert!(wrong.contains("password authentication failed") && !wrong.contains("wrong-pw"), "{wrong}");
    let readable = attempt(&right, 0o644).unwrap_err();
    assert!(readable.contains("may be read by others") && !readable.contains("right-pw"), "{readable}");

    std::fs::write(&hba, original).unwrap();
    admin.batch_execute("SELECT pg_reload_conf()").unwrap();
}

#[test]
fn a_reader_tailing_events_never_misses_one_while_four_handles_write() {
    let _server = shared();
    let url = fresh_postgres_schema(&base());
    let reader = open(&PathBuf::from(&url), &ManualClock::new(T0));
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let url = url.clone();
            std::thread::spawn(move || {
                let kernel = open(&PathBuf::from(&url), &ManualClock::new(T0));
                for n in 0..25 {
                    let permit = kernel.propose(&allow(&refund(&format!("w{w}n{n}"), 1), &key_template())).unwrap();
                    permit.commit(&serde_json::json!(n)).unwrap();
                }
            })
        })
        .collect();
    let mut seen: Vec<u64> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let done = writers.iter().all(std::thread::JoinHandle::is_finished);
        let after = seen.last().copied().unwrap_or(0);
        for event in reader.events(after, 1000).unwrap() {
            // Each id read is the next one: none committed later with a lower id.
            assert_eq!(event.event_id, seen.last().copied().unwrap_or(0) + 1, "after {after}");
            seen.push(event.event_id);
        }
        if done && reader.events(seen.last().copied().unwrap_or(0), 1).unwrap().is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "writers did not finish");
    }
    for writer in writers {
        writer.join().unwrap();
    }
    assert!(seen.len() >= 200, "at least a reserve and a commit event per action: {}", seen.len());
    let mut db = connect(&url);
    let count: i64 = db.query_one("SELECT count(*) FROM warden_events", &[]).unwrap().get(0);
    assert_eq!(count as usize, seen.len());
}

#[test]
fn the_handle_reports_its_clock_against_the_database_and_a_file_reports_none() {
    let _server = shared();
    let url = fresh_postgres_schema(&base());
    let kernel = open(&PathBuf::from(&url), &ManualClock::new(T0));
    let skew = kernel.clock_skew().expect("a PostgreSQL store measures its skew");
    // Same host: the two clocks are one clock, read a round trip apart.
    assert!(skew.abs() < 1_000_000, "{skew} µs");
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(open(&dir.path().join("state.redb"), &ManualClock::new(T0)).clock_skew(), None);
}

#[test]
fn warden_verify_passes_every_guarantee_with_its_scratch_stores_in_postgres_and_drops_them() {
    let _server = shared();
    let scratch_schemas = |db: &mut postgres::Client| -> i64 {
        db.query_one("SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'warden_scratch_%'", &[]).unwrap().get(0)
    };
    let mut db = connect(&base());
    let before = scratch_schemas(&mut db);
    let document = warden::document::load_str(include_str!("../src/bin/warden/starter.yaml"), "starter.yaml").unwrap();
    // G4 races threads here (the CLI races its own processes: `warden verify --scratch-postgres`).
    let report = warden::verify::run_on(&document, None, Some(&base())).unwrap();
    let statuses: Vec<(String, warden::verify::Status)> =
        report.guarantees.iter().map(|g| (g.id.to_string(), g.status)).collect();
    assert_eq!(statuses.len(), 14, "{statuses:?}");
    assert!(statuses.iter().all(|(_, status)| *status == warden::verify::Status::Pass), "{}", report.render());
    // G11 and G12 edit rows behind the kernel's back, G13 checkpoints and exports, and G14 prunes, on
    // PostgreSQL too.
    let g11 = report.guarantees.iter().find(|g| g.id == "G11").unwrap();
    assert!(g11.detail.contains("content_altered at seq 1"), "{}", g11.detail);
    assert_eq!(scratch_schemas(&mut db), before, "every scratch schema is dropped at the end");
    // A URL that picks a schema itself is refused, naming why.
    let refused =
        warden::verify::run_on(&document, None, Some(&format!("{}?options=-csearch_path%3Dx", base()))).unwrap_err();
    assert!(refused.to_string().contains("sets options="), "{refused}");
}
