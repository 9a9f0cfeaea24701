//! Single-bit flips in a store holding effects in every state that must never run again: no
//! flip may give a permit for a key that was reserved, executing, committed or AMBIGUOUS.
//!
//! The store: one key RESERVED, one EXECUTING, two COMMITTED, one AMBIGUOUS, one FAILED (which
//! may run again, so it is not proposed), with their receipts. Each trial flips one bit in a
//! copy, opens the copy and proposes every guarded key; each proposal is tallied as refused on
//! open, refused as a store fault, refused as its state, refused otherwise, a panic caught, or
//! a permit (a failure, printed with the flip that caused it).
//!
//! What is flipped (`WARDEN_SWEEP`):
//! - `sample` (the default, what CI runs): `WARDEN_SWEEP_TRIALS` (300) seeded flips, four in
//!   five among the used bytes of the pages that hold a guarded key (the effects and
//!   outcome-index leaves, the receipts and events that name them), one in five anywhere in
//!   the file's non-zero pages;
//! - `full` (`scripts/bitflip-sweep.sh`): every bit of every used byte of those key pages (a
//!   leaf's used bytes end with its last value, `used_bytes`; past it is free space no reader
//!   visits); `all` (`SWEEP=all scripts/bitflip-sweep.sh`): the same over every non-zero page.

mod common;

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::Instant;
use warden::test_support::KernelInternals;

use common::*;
use warden::DuplicateState;
use warden::{Error, Kernel, ManualClock};

const PAGE: usize = 4096;

/// The keys proposed after every flip, with the state each is in.
const GUARDED: [(&str, &str); 5] = [
    ("reserved", "reserved"),
    ("executing", "in_progress"),
    ("committed-1", "committed"),
    ("committed-2", "committed"),
    ("ambiguous", "ambiguous"),
];

fn key(payment: &str) -> String {
    format!("refund:{payment}")
}

/// A small deterministic generator, so a failing seed can be replayed.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn build(path: &Path, clock: &ManualClock) {
    let kernel = open(path, clock);
    let t = key_template();
    let reserved = kernel.reserve_only(&refund("reserved", 1), &key("reserved"), None, None).unwrap();
    assert_eq!(reserved.state, warden::EffectState::Reserved);
    let executing = kernel.reserve_only(&refund("executing", 1), &key("executing"), None, None).unwrap();
    kernel.begin(&key("executing"), &executing.action_id, executing.attempt).unwrap();
    for payment in ["committed-1", "committed-2"] {
        kernel.propose(&allow(&refund(payment, 1), &t)).unwrap().commit(&serde_json::json!({"paid": payment})).unwrap();
    }
    kernel.propose(&allow(&refund("ambiguous", 1), &t)).unwrap().ambiguous("timed out").unwrap();
    kernel.propose(&allow(&refund("failed", 1), &t)).unwrap().not_executed("declined").unwrap();
    for (payment, _) in GUARDED {
        assert!(kernel.propose(&allow(&refund(payment, 1), &t)).is_err(), "the pristine store refuses {payment}");
    }
}

/// How one proposal after one flip ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    RefusedOnOpen,
    Fault,
    RightState,
    OtherRefusal,
    Panicked,
    Permit,
}

fn classify(result: &Result<warden::Permit, Error>, state: &str) -> Outcome {
    match result {
        Ok(_) => Outcome::Permit,
        Err(Error::Store(_) | Error::Poisoned(_) | Error::Panic(_)) => Outcome::Fault,
        Err(Error::Duplicate { state: DuplicateState::Committed, .. }) if state == "committed" => Outcome::RightState,
        Err(Error::Duplicate { state: DuplicateState::InProgress, .. })
            if state == "in_progress" || state == "reserved" =>
        {
            Outcome::RightState
        }
        Err(Error::Ambiguous { .. }) if state == "ambiguous" => Outcome::RightState,
        Err(_) => Outcome::OtherRefusal,
    }
}

/// The pages worth flipping: those holding a guarded key's bytes, and (for the sample's wide
/// share) every page that is not all zeros.
fn pages(file: &[u8]) -> (Vec<usize>, Vec<usize>) {
    let mut keyed = Vec::new();
    let mut nonzero = Vec::new();
    for page in (0..file.len()).step_by(PAGE) {
        let bytes = &file[page..(page + PAGE).min(file.len())];
        if bytes.iter().all(|b| *b == 0) {
            continue;
        }
        nonzero.push(page);
        if GUARDED.iter().any(|(payment, _)| bytes.windows(payment.len()).any(|w| w == payment.as_bytes())) {
            keyed.push(page);
        }
    }
    (keyed, nonzero)
}

/// The bytes of a page a reader can reach. A redb leaf is filled from the front — `[type 1, pad,
/// pairs u16][key ends u32 × n, unless the keys are fixed-width][value ends u32 × n][keys][values]`
/// — so past its last value's end is free space holding whatever the page held before (never
/// read). Both widths are tried (string keys, or the u64 keys of receipts and events); any other
/// page counts whole.
fn used_bytes(page: &[u8]) -> usize {
    let u32_at = |at: usize| page.get(at..at + 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
    if page.first() != Some(&1) || page.len() < 8 {
        return page.len();
    }
    let pairs = u16::from_le_bytes([page[2], page[3]]) as usize;
    if pairs == 0 {
        return 4;
    }
    let plausible = |value_ends_at: usize, data_from: usize| {
        let ends: Option<Vec<usize>> = (0..pairs).map(|i| u32_at(value_ends_at + 4 * i)).collect();
        let ends = ends?;
        let sorted = ends.windows(2).all(|w| w[0] <= w[1]);
        let last = *ends.last()?;
        (sorted && last >= data_from && last <= page.len()).then_some(last)
    };
    // Variable keys and values; then fixed 8-byte keys with variable values.
    let variable = plausible(4 + 4 * pairs, 4 + 8 * pairs);
    let fixed_key = plausible(4, 4 + 4 * pairs);
    variable.into_iter().chain(fixed_key).max().unwrap_or(page.len())
}

fn work_dir() -> tempfile::TempDir {
    // Every refusal writes a receipt: on a tmpfs the syncs cost nothing and the sweep is CPU.
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(dir) = tempfile::tempdir_in(shm) {
            return dir;
        }
    }
    tempfile::tempdir().unwrap()
}

struct Sweep {
    pristine: Vec<u8>,
    work: PathBuf,
    clock: ManualClock,
    tally: BTreeMap<Outcome, u64>,
    permits: Vec<String>,
    trials: u64,
    /// Print each flip before it runs and each outcome after (`WARDEN_SWEEP_TRACE`).
    trace: bool,
    /// Time spent opening the copies, and proposing on them.
    opening: std::time::Duration,
    proposing: std::time::Duration,
}

impl Sweep {
    fn trial(&mut self, offset: usize, bit: u8) {
        self.trials += 1;
        let mut damaged = self.pristine.clone();
        damaged[offset] ^= 1 << bit;
        let copy = self.work.join(format!("t{}.redb", self.trials));
        std::fs::write(&copy, &damaged).unwrap();
        let clock = self.clock.clone();
        let (mut opening, mut proposing) = (std::time::Duration::ZERO, std::time::Duration::ZERO);
        let ran = catch_unwind(AssertUnwindSafe(|| -> Vec<(Outcome, &'static str)> {
            let at = Instant::now();
            let opened = Kernel::open(
                &copy,
                warden::KernelOptions {
                    clock: std::sync::Arc::new(clock.clone()),
                    policy_hash: Some("sha256:test".into()),
                    ..warden::KernelOptions::default()
                },
            );
            opening = at.elapsed();
            let at = Instant::now();
            let Ok(kernel) = opened else {
                return GUARDED.iter().map(|(payment, _)| (Outcome::RefusedOnOpen, *payment)).collect();
            };
            let t = key_template();
            let outcomes = GUARDED
                .iter()
                .map(|(payment, state)| {
                    let result = kernel.propose(&allow(&refund(payment, 1), &t));
                    let outcome = classify(&result, state);
                    if let Ok(permit) = result {
                        // Recorded as not executed, so the trial leaves nothing running.
                        let _ = permit.not_executed("the sweep never executes");
                    }
                    (outcome, *payment)
                })
                .collect();
            proposing = at.elapsed();
            outcomes
        }));
        self.opening += opening;
        self.proposing += proposing;
        let outcomes =
            ran.unwrap_or_else(|_| GUARDED.iter().map(|(payment, _)| (Outcome::Panicked, *payment)).collect());
        for (outcome, payment) in outcomes {
            *self.tally.entry(outcome).or_default() += 1;
            if self.trace {
                // One line per proposal, so a sweep resumed after an abort can add them up.
                eprintln!("outcome {outcome:?}");
            }
            if outcome == Outcome::Permit {
                let permit = format!("bit {bit} of byte {offset} (page {}): {payment}", offset / PAGE);
                eprintln!("  PERMIT after flipping {permit}");
                self.permits.push(permit);
            }
        }
        for leftover in [copy.clone(), copy.with_extension("redb.lock")] {
            let _ = std::fs::remove_file(leftover);
        }
        let _ = std::fs::remove_dir_all(copy.with_extension("redb.warden"));
    }

    fn report(&self, what: &str, started: Instant) {
        let tally: Vec<String> = self.tally.iter().map(|(outcome, n)| format!("{outcome:?} {n}")).collect();
        eprintln!(
            "bit-flip sweep ({what}): {} flips, {} proposals in {:.1} s: {}",
            self.trials,
            self.trials * GUARDED.len() as u64,
            started.elapsed().as_secs_f64(),
            tally.join(", ")
        );
        eprintln!(
            "  opening the copies {:.1} s, proposing {:.1} s",
            self.opening.as_secs_f64(),
            self.proposing.as_secs_f64()
        );
        if !self.permits.is_empty() {
            eprintln!("  {} permits (each printed when it happened)", self.permits.len());
        }
    }
}

#[test]
fn no_single_bit_flip_gives_a_permit_for_a_reserved_executing_committed_or_ambiguous_key() {
    if on_postgres() {
        // The file's bytes; a PostgreSQL store has no file.
        return;
    }
    let source = tempfile::tempdir().unwrap();
    let path = source.path().join("state.redb");
    let clock = ManualClock::new(T0);
    build(&path, &clock);
    let pristine = std::fs::read(&path).unwrap();
    let (keyed, nonzero) = pages(&pristine);
    assert!(!keyed.is_empty(), "no page holds a guarded key");
    let work = work_dir();
    let mut sweep = Sweep {
        pristine,
        work: work.path().to_owned(),
        clock,
        tally: BTreeMap::new(),
        permits: Vec::new(),
        trials: 0,
        trace: std::env::var("WARDEN_SWEEP_TRACE").is_ok(),
        opening: std::time::Duration::ZERO,
        proposing: std::time::Duration::ZERO,
    };
    // A damaged page may make redb panic (caught and turned into a fault); thousands of
    // backtraces would bury the tally. The default hook is back before the verdict.
    if std::env::var("WARDEN_SWEEP_LOUD").is_err() {
        std::panic::set_hook(Box::new(|_| {}));
    }
    let started = Instant::now();
    let mode = std::env::var("WARDEN_SWEEP").unwrap_or_else(|_| "sample".into());
    eprintln!(
        "store of {} bytes: {} non-zero pages, {} holding a guarded key ({:?})",
        sweep.pristine.len(),
        nonzero.len(),
        keyed.len(),
        keyed.iter().map(|p| p / PAGE).collect::<Vec<_>>()
    );
    // `all`: every non-zero page (the header, the table tree, branches, the allocator's pages).
    let swept = if mode == "all" { &nonzero } else { &keyed };
    let spans: Vec<(usize, usize)> = swept
        .iter()
        .map(|page| {
            let end = (page + PAGE).min(sweep.pristine.len());
            (*page, page + used_bytes(&sweep.pristine[*page..end]))
        })
        .collect();
    eprintln!("used bytes of the pages swept: {:?}", spans.iter().map(|(p, e)| e - p).collect::<Vec<_>>());
    if mode == "full" || mode == "all" {
        let total: usize = spans.iter().map(|(page, end)| (end - page) * 8).sum();
        eprintln!("{mode} sweep: {total} flips over {:?} bytes", spans.iter().map(|(p, e)| e - p).collect::<Vec<_>>());
        // Replaying: start at a flip, print each before it runs (a flip that aborts the process
        // is the last printed), skip flips known to abort ("offset:bit,…").
        let from: u64 = std::env::var("WARDEN_SWEEP_FROM").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
        let trace = sweep.trace;
        let skip: Vec<(usize, u8)> = std::env::var("WARDEN_SWEEP_SKIP")
            .unwrap_or_default()
            .split(',')
            .filter_map(|flip| flip.split_once(':'))
            .filter_map(|(offset, bit)| Some((offset.parse().ok()?, bit.parse().ok()?)))
            .collect();
        let mut index = 0u64;
        for (n, (page, end)) in spans.iter().enumerate() {
            for offset in *page..*end {
                for bit in 0..8 {
                    index += 1;
                    if index <= from || skip.contains(&(offset, bit)) {
                        continue;
                    }
                    if trace {
                        eprintln!("flip {index}: bit {bit} of byte {offset}");
                    }
                    sweep.trial(offset, bit);
                }
            }
            eprintln!("  page {} done ({} of {}), {} of {total} flips", page / PAGE, n + 1, spans.len(), sweep.trials);
        }
    } else if mode == "one" {
        // One flip, replayed (`WARDEN_SWEEP_AT=offset:bit`), its damaged copy kept at
        // `WARDEN_SWEEP_KEEP` (when set) for `warden doctor` and a closer look.
        let at = std::env::var("WARDEN_SWEEP_AT").unwrap_or_default();
        let (offset, bit) = at.split_once(':').expect("WARDEN_SWEEP_AT=offset:bit");
        let (offset, bit): (usize, u8) = (offset.parse().expect("offset"), bit.parse().expect("bit"));
        if let Ok(keep) = std::env::var("WARDEN_SWEEP_KEEP") {
            let mut damaged = sweep.pristine.clone();
            damaged[offset] ^= 1 << bit;
            std::fs::write(&keep, &damaged).unwrap();
            std::fs::write(format!("{keep}.pristine"), &sweep.pristine).unwrap();
        }
        sweep.trial(offset, bit);
    } else {
        let trials: u64 = std::env::var("WARDEN_SWEEP_TRIALS").ok().and_then(|v| v.parse().ok()).unwrap_or(300);
        let mut rng = XorShift(0x5eed_0b17_f11b_2026);
        for n in 0..trials {
            // Four in five in the used bytes of the key pages, one anywhere in a non-zero page.
            let offset = if n % 5 == 4 {
                nonzero[(rng.next() % nonzero.len() as u64) as usize] + (rng.next() % PAGE as u64) as usize
            } else {
                let (page, end) = spans[(rng.next() % spans.len() as u64) as usize];
                page + (rng.next() % (end - page).max(1) as u64) as usize
            };
            let bit = (rng.next() % 8) as u8;
            if offset < sweep.pristine.len() {
                sweep.trial(offset, bit);
            }
        }
    }
    drop(std::panic::take_hook());
    sweep.report(&mode, started);
    assert!(
        sweep.permits.is_empty(),
        "{} flips gave a permit for a key that must never run again",
        sweep.permits.len()
    );
}
