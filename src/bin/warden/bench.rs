//! `warden bench`: protected no-op actions per second, with p50/p99 latency, for several
//! thread counts and for several processes on one store, under both outcome settings; beside
//! the physical reference measured on the same disk in the same run (raw `write`+`fdatasync`,
//! redb's durable commits in single-writer and multi-writer mode).
//!
//! Every action is the full pipeline: `Warden::submit` (document, policy, one durable write for
//! the permit) and `commit` (the outcome and its receipt). Scratch stores live in a temporary
//! directory under `--dir` (default: the current directory) and are removed afterwards, so the
//! numbers are the disk of `--dir`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use warden::evidence::key::NoteSigner;
use warden::kernel::Outcomes;
use warden::pipeline::{ActionRequest, Warden, WardenOptions};
use warden::store::{io_counters, IoCounters, StoreOptions, Withstands};

use crate::exit::Failure;

/// The document every bench store runs under: one allowed action with an effect key.
const DOCUMENT: &str = "schema: warden/v1\nenvironment: production\nactions:\n  bench.noop:\n    effect: \"noop:{n}\"\n    rules:\n      - decision: allow\n";

/// The hidden subcommand a process worker runs.
pub const CHILD_SUBCOMMAND: &str = "__bench-child";

pub struct BenchArgs<'a> {
    pub dir: Option<&'a Path>,
    pub actions: usize,
    pub threads: &'a [usize],
    pub processes: usize,
    pub outcomes: &'a str,
    pub durability: &'a str,
    pub checkpoints: &'a str,
    pub json: bool,
}

/// One configuration of the store: when outcomes are durable, and what a write survives.
#[derive(Clone, Copy)]
struct Setting {
    outcomes: &'static str,
    mode: Outcomes,
    durability: Withstands,
    /// Whether the document asks for automatic checkpoints (its `evidence` section, defaults).
    checkpoints: bool,
}

impl Setting {
    /// A name for this setting's store files.
    fn name(&self) -> String {
        let checkpoints = if self.checkpoints { "-checkpoints" } else { "" };
        format!("{}-{}{checkpoints}", self.outcomes, self.durability.as_str())
    }
}

/// The bench document for `setting`, in the scratch directory.
fn config_for(scratch: &Path, setting: Setting) -> PathBuf {
    scratch.join(if setting.checkpoints { "bench-checkpoints.yaml" } else { "bench.yaml" })
}

/// How many checkpoints the store at `store` holds (it is closed by its writers).
fn checkpoints_in(store: &Path) -> Result<u64, Failure> {
    let kernel = warden::Kernel::open(store, warden::KernelOptions::default()).map_err(|e| fail("open", e))?;
    Ok(kernel.checkpoint_numbered(None).map_err(|e| fail("checkpoints", e))?.map_or(0, |last| last.number))
}

fn fail(what: &str, error: impl std::fmt::Display) -> Failure {
    Failure::internal(format!("bench: {what}: {error}"))
}

fn progress(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = write!(err, "\r\x1b[2K{text}");
    let _ = err.flush();
}

fn settings(outcomes: &str, durability: &str, checkpoints: &str) -> Result<Vec<Setting>, Failure> {
    let durable = ("durable", Outcomes::Durable);
    let deferred = ("deferred", Outcomes::Deferred { max_delay: Outcomes::DEFAULT_MAX_DELAY });
    let outcomes = match outcomes {
        "durable" => vec![durable],
        "deferred" => vec![deferred],
        "both" => vec![durable, deferred],
        other => return Err(Failure::usage(format!("--outcomes must be durable, deferred or both, not {other:?}"))),
    };
    let levels = match durability {
        "both" => vec![Withstands::Power, Withstands::Process],
        one => vec![Withstands::parse(one)
            .map_err(|_| Failure::usage(format!("--durability must be power, process or both, not {one:?}")))?],
    };
    let checkpoints = match checkpoints {
        "off" => vec![false],
        "on" => vec![true],
        "both" => vec![false, true],
        other => return Err(Failure::usage(format!("--checkpoints must be off, on or both, not {other:?}"))),
    };
    let mut all = Vec::new();
    for &durability in &levels {
        for &(name, mode) in &outcomes {
            for &checkpoints in &checkpoints {
                all.push(Setting { outcomes: name, mode, durability, checkpoints });
            }
        }
    }
    Ok(all)
}

fn open(store: &Path, config: &Path, setting: Setting) -> Result<Warden, Failure> {
    let store_options = StoreOptions { durability: setting.durability, ..StoreOptions::default() };
    Warden::open_files(
        store,
        config,
        WardenOptions { outcomes: setting.mode, store: store_options, ..WardenOptions::default() },
    )
    .map_err(|e| fail("open", e))
}

/// The I/O counters of `after` less `before`.
fn io_between(before: IoCounters, after: IoCounters) -> IoCounters {
    IoCounters {
        syncs: after.syncs - before.syncs,
        writes: after.writes - before.writes,
        bytes: after.bytes - before.bytes,
    }
}

/// One protected no-op action; its latency.
fn one_action(warden: &Warden, worker: usize, n: usize) -> Result<Duration, Failure> {
    let started = Instant::now();
    let principal = warden::kernel::principal("bench", None).map_err(|e| fail("principal", e))?;
    let request = ActionRequest::new("bench.noop", json!({"n": format!("{worker}-{n}")}), principal);
    let permit = warden.submit(&request).map_err(|e| fail("propose", e))?;
    permit.commit(&json!({"ok": true})).map_err(|e| fail("commit", e))?;
    Ok(started.elapsed())
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

struct Row {
    setting: Setting,
    /// This run's writes to the store's files (redb pages and journal), summed over processes.
    io: IoCounters,
    workload: String,
    actions: usize,
    seconds: f64,
    latencies: Vec<Duration>,
    /// The store file's growth over an empty store, per completed action.
    bytes_per_action: f64,
    /// Checkpoints in the store after the run, when the document asks for them.
    checkpoints: Option<u64>,
}

/// The size of the store file at `path` after its writers closed, beyond an empty store's.
fn growth_per_action(path: &Path, empty: u64, actions: usize) -> f64 {
    let size = std::fs::metadata(path).map_or(0, |m| m.len());
    size.saturating_sub(empty) as f64 / actions.max(1) as f64
}

impl Row {
    fn rate(&self) -> f64 {
        self.actions as f64 / self.seconds.max(1e-9)
    }
    fn to_json(&self) -> Value {
        let per = |n: u64| (n as f64 / self.actions.max(1) as f64 * 100.0).round() / 100.0;
        json!({
            "outcomes": self.setting.outcomes,
            "durability": self.setting.durability.as_str(),
            "checkpoints": self.checkpoints,
            "syncs_per_action": per(self.io.syncs),
            "writes_per_action": per(self.io.writes),
            "bytes_written_per_action": per(self.io.bytes).round(),
            "workload": self.workload,
            "actions": self.actions,
            "seconds": self.seconds,
            "actions_per_second": self.rate().round(),
            "p50_ms": percentile(&self.latencies, 50.0).as_secs_f64() * 1e3,
            "p99_ms": percentile(&self.latencies, 99.0).as_secs_f64() * 1e3,
            "store_bytes_per_action": self.bytes_per_action.round(),
        })
    }
}

fn threads_row(
    scratch: &Path,
    config: &Path,
    setting: Setting,
    threads: usize,
    actions: usize,
    empty: u64,
) -> Result<Row, Failure> {
    let store = scratch.join(format!("threads-{}-{threads}.redb", setting.name()));
    let warden = open(&store, config, setting)?;
    let before = io_counters();
    let per_thread = actions.div_ceil(threads);
    let done = Arc::new(AtomicUsize::new(0));
    // Each worker says when it ends, so the clock stops then, not at the next progress tick.
    let (ended, ends) = std::sync::mpsc::channel::<()>();
    let started = Instant::now();
    let latencies = std::thread::scope(|scope| -> Result<Vec<Duration>, Failure> {
        let workers: Vec<_> = (0..threads)
            .map(|worker| {
                let (warden, done, ended) = (&warden, done.clone(), ended.clone());
                scope.spawn(move || -> Result<Vec<Duration>, Failure> {
                    let mut mine = Vec::with_capacity(per_thread);
                    let result = (0..per_thread).try_for_each(|n| {
                        mine.push(one_action(warden, worker, n)?);
                        done.fetch_add(1, Ordering::Relaxed);
                        Ok::<(), Failure>(())
                    });
                    let _ = ended.send(());
                    result.map(|()| mine)
                })
            })
            .collect();
        let mut running = threads;
        while running > 0 {
            match ends.recv_timeout(Duration::from_millis(200)) {
                Ok(()) => running -= 1,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => progress(&format!(
                    "{} outcomes, {}, {threads} thread(s): {}/{} actions",
                    setting.outcomes,
                    setting.durability.as_str(),
                    done.load(Ordering::Relaxed),
                    per_thread * threads
                )),
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        let mut all = Vec::new();
        for worker in workers {
            all.extend(worker.join().map_err(|_| fail("a worker thread", "panicked"))??);
        }
        Ok(all)
    })?;
    warden.kernel().flush().map_err(|e| fail("flush", e))?;
    let seconds = started.elapsed().as_secs_f64();
    let io = io_between(before, io_counters());
    drop(warden);
    let mut latencies = latencies;
    latencies.sort();
    Ok(Row {
        setting,
        io,
        workload: format!("{threads} thread(s), one process"),
        actions: latencies.len(),
        seconds,
        bytes_per_action: growth_per_action(&store, empty, latencies.len()),
        checkpoints: if setting.checkpoints { Some(checkpoints_in(&store)?) } else { None },
        latencies,
    })
}

fn processes_row(
    scratch: &Path,
    config: &Path,
    setting: Setting,
    processes: usize,
    actions: usize,
    empty: u64,
) -> Result<Row, Failure> {
    let store = scratch.join(format!("processes-{}.redb", setting.name()));
    // Created up front, so the workers race for actions, not for the creation.
    drop(open(&store, config, setting)?);
    let per_process = actions.div_ceil(processes);
    let exe = std::env::current_exe().map_err(|e| fail("current exe", e))?;
    let started = Instant::now();
    let mut children = Vec::new();
    for worker in 0..processes {
        let child = Command::new(&exe)
            .arg(CHILD_SUBCOMMAND)
            .arg(&store)
            .arg(config)
            .arg(setting.outcomes)
            .arg(setting.durability.as_str())
            .arg(worker.to_string())
            .arg(per_process.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| fail("spawn a worker process", e))?;
        children.push(child);
    }
    progress(&format!(
        "{} outcomes, {}, {processes} processes: running",
        setting.outcomes,
        setting.durability.as_str()
    ));
    let mut latencies = Vec::new();
    let mut io = IoCounters::default();
    for child in children {
        let output = child.wait_with_output().map_err(|e| fail("a worker process", e))?;
        if !output.status.success() {
            return Err(fail("a worker process", format!("exited with {}", output.status)));
        }
        for line in String::from_utf8_lossy(&output.stdout).lines() {
            if let Some(counts) = line.strip_prefix("io ") {
                let counts: Vec<u64> = counts.split(' ').filter_map(|n| n.parse().ok()).collect();
                if let [syncs, writes, bytes] = counts[..] {
                    io.syncs += syncs;
                    io.writes += writes;
                    io.bytes += bytes;
                }
            } else if let Ok(micros) = line.trim().parse::<u64>() {
                latencies.push(Duration::from_micros(micros));
            }
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    latencies.sort();
    Ok(Row {
        setting,
        io,
        workload: format!("{processes} processes × 1 thread, one store"),
        actions: latencies.len(),
        seconds,
        bytes_per_action: growth_per_action(&store, empty, latencies.len()),
        checkpoints: if setting.checkpoints { Some(checkpoints_in(&store)?) } else { None },
        latencies,
    })
}

/// A process worker: `count` actions, one latency in microseconds per line on stdout.
pub fn child_main(args: &[String]) -> i32 {
    let run = || -> Result<(), Failure> {
        let [store, config, outcomes, durability, worker, count] = args else {
            return Err(Failure::usage("bench child: store config outcomes durability worker count"));
        };
        let setting = *settings(outcomes, durability, "off")?.first().ok_or_else(|| fail("setting", "none"))?;
        let worker: usize = worker.parse().map_err(|e| fail("worker", e))?;
        let count: usize = count.parse().map_err(|e| fail("count", e))?;
        let warden = open(Path::new(store), Path::new(config), setting)?;
        let before = io_counters();
        let mut out = String::with_capacity(count * 8);
        for n in 0..count {
            let latency = one_action(&warden, 1000 + worker, n)?;
            out.push_str(&format!("{}\n", latency.as_micros()));
        }
        warden.kernel().flush().map_err(|e| fail("flush", e))?;
        let io = io_between(before, io_counters());
        out.push_str(&format!("io {} {} {}\n", io.syncs, io.writes, io.bytes));
        std::io::stdout().write_all(out.as_bytes()).map_err(|e| fail("stdout", e))
    };
    match run() {
        Ok(()) => 0,
        Err(failure) => {
            eprintln!("warden bench child: {}", failure.message);
            3
        }
    }
}

/// The physical reference, on the same disk: (what, operations per second).
fn reference(scratch: &Path, count: usize) -> Result<Vec<(String, f64)>, Failure> {
    let mut rows = Vec::new();
    let path = scratch.join("fdatasync.bin");
    let mut file =
        std::fs::OpenOptions::new().create(true).append(true).open(&path).map_err(|e| fail("reference file", e))?;
    let record = [7u8; 512];
    progress("physical reference: write + fdatasync");
    let started = Instant::now();
    for _ in 0..count {
        file.write_all(&record).map_err(|e| fail("write", e))?;
        file.sync_data().map_err(|e| fail("fdatasync", e))?;
    }
    rows.push(("write(512 B) + fdatasync".to_owned(), count as f64 / started.elapsed().as_secs_f64()));
    for (name, mode) in [
        ("redb durable commit, single writer", redb::ConcurrencyMode::ExclusiveWriter),
        ("redb durable commit, multi-writer", redb::ConcurrencyMode::MultiWriter),
    ] {
        progress(&format!("physical reference: {name}"));
        let file = scratch.join(format!("redb-{}.redb", rows.len()));
        rows.push((name.to_owned(), redb_commits_per_second(&file, mode, 1, count)?));
    }
    // What the kernel's evidence costs redb alone: one row in each table a proposal writes
    // (effects, events) and in each an outcome writes (effects, events, receipts, their two
    // indexes, the chain head). One of each is the most actions per second this disk allows
    // the kernel from one thread, before any of its own work.
    let mut layout = Vec::new();
    for tables in [2usize, 6] {
        let name = format!("redb durable commit, one row in each of {tables} tables");
        progress(&format!("physical reference: {name}"));
        let file = scratch.join(format!("redb-tables-{tables}.redb"));
        let rate = redb_commits_per_second(&file, redb::ConcurrencyMode::ExclusiveWriter, tables, count)?;
        layout.push(rate);
        rows.push((name, rate));
    }
    rows.push((
        "redb alone: one commit of each (an action's floor)".to_owned(),
        1.0 / (1.0 / layout[0] + 1.0 / layout[1]),
    ));
    Ok(rows)
}

/// Durable redb commits per second in `mode`, each inserting one 200-byte row into each of
/// `tables` tables (at most 6).
fn redb_commits_per_second(
    file: &Path,
    mode: redb::ConcurrencyMode,
    tables: usize,
    count: usize,
) -> Result<f64, Failure> {
    const NAMES: [&str; 6] = ["t0", "t1", "t2", "t3", "t4", "t5"];
    let db = redb::Database::builder().set_concurrency_mode(mode).create(file).map_err(|e| fail("redb", e))?;
    let started = Instant::now();
    for n in 0..count as u64 {
        let txn = db.begin_write().map_err(|e| fail("redb", e))?;
        for name in &NAMES[..tables.min(NAMES.len())] {
            let mut t = txn.open_table(redb::TableDefinition::<u64, &[u8]>::new(name)).map_err(|e| fail("redb", e))?;
            t.insert(n, [1u8; 200].as_slice()).map_err(|e| fail("redb", e))?;
        }
        txn.commit().map_err(|e| fail("redb", e))?;
    }
    Ok(count as f64 / started.elapsed().as_secs_f64())
}

pub fn bench(args: &BenchArgs<'_>) -> Result<String, Failure> {
    if args.actions == 0 || args.processes == 0 || args.threads.is_empty() || args.threads.contains(&0) {
        return Err(Failure::usage("--actions, --processes and every --threads count must be at least 1"));
    }
    let settings = settings(args.outcomes, args.durability, args.checkpoints)?;
    let parent = match args.dir {
        Some(dir) => dir.to_path_buf(),
        None => std::env::current_dir().map_err(|e| fail("current directory", e))?,
    };
    let scratch = Scratch::new(&parent)?;
    std::fs::write(scratch.path().join("bench.yaml"), DOCUMENT).map_err(|e| fail("write the bench document", e))?;
    // The same document with automatic checkpoints at their defaults, signed by a scratch key.
    let key = scratch.path().join("evidence.key");
    NoteSigner::generate("warden-bench").and_then(|signer| signer.save(&key)).map_err(|e| fail("a bench key", e))?;
    let with_checkpoints = format!("{DOCUMENT}evidence:\n  key_file: {}\n", key.display());
    std::fs::write(scratch.path().join("bench-checkpoints.yaml"), with_checkpoints)
        .map_err(|e| fail("write the bench document", e))?;
    let started = Instant::now();
    let reference = reference(scratch.path(), 500)?;
    let empty = {
        let path = scratch.path().join("empty.redb");
        drop(open(&path, &config_for(scratch.path(), settings[0]), settings[0])?);
        std::fs::metadata(&path).map_or(0, |m| m.len())
    };
    let mut rows = Vec::new();
    for setting in &settings {
        for threads in args.threads {
            let config = config_for(scratch.path(), *setting);
            rows.push(threads_row(scratch.path(), &config, *setting, *threads, args.actions, empty)?);
        }
        let config = config_for(scratch.path(), *setting);
        rows.push(processes_row(scratch.path(), &config, *setting, args.processes, args.actions, empty)?);
    }
    progress("");
    let _ = writeln!(std::io::stderr());
    let machine = machine();
    if args.json {
        return Ok(crate::output::document(&json!({
            "machine": machine,
            "directory": parent.display().to_string(),
            "reference_per_second": reference.iter().map(|(k, v)| json!({"what": k, "per_second": v.round()})).collect::<Vec<_>>(),
            "rows": rows.iter().map(Row::to_json).collect::<Vec<_>>(),
            "seconds": started.elapsed().as_secs_f64(),
        })));
    }
    let mut out = String::new();
    out.push_str(&format!("warden bench — {machine}; stores in {}\n\n", parent.display()));
    out.push_str("physical reference (same disk, same run):\n");
    let width = reference.iter().map(|(what, _)| what.chars().count()).max().unwrap_or(40);
    for (what, rate) in &reference {
        out.push_str(&format!("  {what:<width$} {rate:>9.0} /s\n"));
    }
    out.push_str(&format!(
        "\n{:<9} {:<8} {:<8} {:<34} {:>7} {:>10} {:>7} {:>7} {:>8} {:>8} {:>9} {:>8}\n",
        "outcomes",
        "durable",
        "checkpts",
        "workload",
        "actions",
        "actions/s",
        "p50 ms",
        "p99 ms",
        "syncs/a",
        "writes/a",
        "written/a",
        "store/a"
    ));
    for row in &rows {
        let per = |n: u64| n as f64 / row.actions.max(1) as f64;
        out.push_str(&format!(
            "{:<9} {:<8} {:<8} {:<34} {:>7} {:>10.0} {:>7.2} {:>7.2} {:>8.2} {:>8.1} {:>9.0} {:>8.0}\n",
            row.setting.outcomes,
            row.setting.durability.as_str(),
            row.checkpoints.map_or_else(|| "off".to_owned(), |n| n.to_string()),
            row.workload,
            row.actions,
            row.rate(),
            percentile(&row.latencies, 50.0).as_secs_f64() * 1e3,
            percentile(&row.latencies, 99.0).as_secs_f64() * 1e3,
            per(row.io.syncs),
            per(row.io.writes),
            per(row.io.bytes),
            row.bytes_per_action,
        ));
    }
    out.push_str(
        "\nsyncs/a, writes/a, written/a: fdatasync calls, write calls and bytes written to the store's files \
         (redb pages and journal) per action; store/a: the store file's growth per action, after close; checkpts: \
         off, or the checkpoints the document's evidence section (every 1000 receipts or PT1M) made.\n",
    );
    out.push_str("\nEvery action is the full pipeline: propose (one durable write) and commit (outcome + receipt).\n");
    Ok(out)
}

/// A scratch directory removed when dropped (also on failure).
struct Scratch(PathBuf);

impl Scratch {
    fn new(parent: &Path) -> Result<Scratch, Failure> {
        let dir = parent.join(format!(".warden-bench-{}", std::process::id()));
        std::fs::create_dir(&dir)
            .map_err(|e| Failure::usage(format!("cannot make a scratch directory {}: {e}", dir.display())))?;
        Ok(Scratch(dir))
    }
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The machine, as far as the bench can tell: cores and the CPU model.
fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    format!("{cores} cores, {model}")
}
