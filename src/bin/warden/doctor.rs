//! `warden doctor`: check a store without changing it — every row of every table against its
//! integrity check, the receipt chain, and rows that point at nothing, in one read; and, for a
//! file, redb's own check of every page on a copy.

use serde_json::json;

use warden::clock::{render, Micros, MICROS_PER_SECOND};
use warden::evidence::anchoring::{AnchorSpec, SinkState, StoredAnchor};
use warden::evidence::retention::{Hold, PrunedPrefix};
use warden::evidence::settings::{Due, EvidenceSettings, OVERDUE_GRACE};
use warden::Kernel;

use crate::exit::{Done, Failure};
use crate::output::{document, shown};
use crate::retention_commands;

/// A database clock further than this from the host's is reported as a warning.
const SKEW_WARNING_MS: i64 = 1000;

/// Where the signed checkpoints stand: the last one against the chain, and, when a document
/// with an `evidence` section is given, whether one is overdue.
struct Checkpoints {
    last: Option<warden::evidence::checkpoint::StoredCheckpoint>,
    receipts: u64,
    now: Micros,
    due: Option<Due>,
}

impl Checkpoints {
    fn read(kernel: &Kernel, due: Option<Due>) -> Result<Checkpoints, Failure> {
        Ok(Checkpoints {
            last: kernel.checkpoint_numbered(None)?,
            receipts: kernel.chain_size()?,
            now: kernel.now(),
            due,
        })
    }

    fn overdue(&self) -> bool {
        let last = self.last.as_ref().map(|last| (last.size, last.time));
        self.due.is_some_and(|due| due.is_overdue(self.receipts, last, self.now))
    }

    fn json(&self) -> serde_json::Value {
        json!({
            "last": self.last.as_ref().map(|last| json!({
                "number": last.number, "size": last.size, "time": render(last.time),
            })),
            "receipts_after": self.receipts - self.last.as_ref().map_or(0, |last| last.size.min(self.receipts)),
            "due": self.due.map(|due| json!({"every_receipts": due.every_receipts, "every_seconds": due.every / MICROS_PER_SECOND})),
            "overdue": self.overdue(),
        })
    }

    fn text(&self) -> String {
        let mut out = match &self.last {
            None => format!("  checkpoints      none; {} receipts are covered by no signed checkpoint", self.receipts),
            Some(last) => format!(
                "  checkpoints      {} (the last covers {} of {} receipts, signed {}, {} s ago)",
                last.number,
                last.size,
                self.receipts,
                render(last.time),
                (self.now - last.time).max(0) / MICROS_PER_SECOND
            ),
        };
        if let Some(due) = self.due {
            out.push_str(&format!(
                "; the document makes one due every {} receipts or {} s",
                due.every_receipts,
                due.every / MICROS_PER_SECOND
            ));
        }
        out.push('\n');
        if self.overdue() {
            out.push_str(
                "  WARNING: a checkpoint is overdue. Is a process running with this document (a handle or `warden \
                 gateway`; the CLI's own commands make none), and can it read the evidence key? `warden checkpoint \
                 --key FILE` makes one now\n",
            );
        }
        out
    }
}

/// Where each anchor stands: the sinks the document names (or, without one, those the store has
/// records of), each with its last anchored checkpoint and what waits for it.
struct AnchorReport {
    states: Vec<SinkState>,
    newest: Option<u64>,
    now: Micros,
}

impl AnchorReport {
    fn read(
        kernel: &Kernel,
        evidence: Option<&EvidenceSettings>,
        newest: Option<u64>,
    ) -> Result<AnchorReport, Failure> {
        let sinks: Vec<String> = match evidence {
            Some(settings) => settings.anchors.iter().map(AnchorSpec::sink).collect(),
            None => {
                let mut sinks: Vec<String> = kernel.anchors(1, u64::MAX)?.into_iter().map(|row| row.sink).collect();
                sinks.dedup();
                sinks
            }
        };
        Ok(AnchorReport { states: kernel.anchor_states(&sinks)?, newest, now: kernel.now() })
    }

    /// The latest failure among what waits for the sink.
    fn failing(state: &SinkState) -> Option<&StoredAnchor> {
        state
            .waiting
            .iter()
            .filter_map(|(_, row)| row.as_ref())
            .filter(|row| !row.anchored())
            .max_by_key(|row| row.last_try)
    }

    /// Waiting checkpoints never tried although made longer ago than the grace: no worker sends them.
    fn untried_late(&self, state: &SinkState) -> usize {
        state
            .waiting
            .iter()
            .filter(|(checkpoint, row)| row.is_none() && self.now.saturating_sub(checkpoint.time) > OVERDUE_GRACE)
            .count()
    }

    fn waiting(&self, state: &SinkState) -> u64 {
        match (state.last_anchored, self.newest) {
            (_, None) => 0,
            (Some(last), Some(newest)) => newest.saturating_sub(last),
            (None, Some(_)) => 1,
        }
    }

    fn json(&self) -> serde_json::Value {
        json!(self
            .states
            .iter()
            .map(|state| json!({
                "sink": state.sink,
                "last_anchored": state.last_anchored,
                "waiting": self.waiting(state),
                "untried_late": self.untried_late(state),
                "failing": Self::failing(state).map(|row| json!({
                    "checkpoint": row.checkpoint,
                    "attempts": row.attempts,
                    "last_try": render(row.last_try),
                    "code": row.error_code,
                    "message": row.description,
                })),
            }))
            .collect::<Vec<_>>())
    }

    fn text(&self) -> String {
        let mut out = String::new();
        for state in &self.states {
            let standing = match (state.last_anchored, self.newest) {
                (_, None) => "no checkpoint to anchor yet".to_owned(),
                (None, Some(_)) => "no checkpoint anchored yet".to_owned(),
                (Some(last), Some(newest)) if last >= newest => format!("checkpoint {last}, the last, anchored"),
                (Some(last), Some(newest)) => {
                    format!("checkpoint {last} anchored; {} of {newest} wait", newest - last)
                }
            };
            out.push_str(&format!("  anchor           {}: {standing}\n", shown(&state.sink)));
            if let Some(row) = Self::failing(state) {
                out.push_str(&format!(
                    "  WARNING: anchoring checkpoint {} to {} has failed {} time(s), last at {} ({}): {}\n",
                    row.checkpoint,
                    shown(&state.sink),
                    row.attempts,
                    render(row.last_try),
                    row.error_code.as_deref().unwrap_or("error"),
                    shown(&row.description)
                ));
            } else if self.untried_late(state) > 0 {
                out.push_str(&format!(
                    "  WARNING: {} checkpoint(s) were never sent to {}. Is a process running with this document? \
                     `warden anchor` sends them now\n",
                    self.untried_late(state),
                    shown(&state.sink)
                ));
            }
        }
        out
    }
}

/// The pruned prefix and the standing holds, as doctor's lines.
fn retention(pruned: Option<&PrunedPrefix>, holds: &[Hold]) -> String {
    let mut out = match pruned {
        None => "  retention        nothing pruned".to_owned(),
        Some(prefix) => format!(
            "  retention        receipts 1..={} pruned through checkpoint {} at {} by {} ({})",
            prefix.through_seq,
            prefix.checkpoint,
            render(prefix.at),
            shown(&prefix.by),
            shown(&prefix.reason)
        ),
    };
    match holds {
        [] => out.push_str("; no hold stands\n"),
        holds => {
            out.push_str(&format!("; {} hold(s) stand, so nothing is pruned:\n", holds.len()));
            for hold in holds {
                out.push_str(&format!("    {}\n", shown(&hold.describe())));
            }
        }
    }
    out
}

pub fn doctor(kernel: &Kernel, evidence: Option<&EvidenceSettings>, json: bool) -> Result<Done, Failure> {
    let report = kernel.doctor()?;
    let pruned = kernel.pruned()?;
    let holds: Vec<Hold> = kernel.holds()?.into_iter().filter(Hold::stands).collect();
    let checkpoints = Checkpoints::read(kernel, evidence.map(|settings| settings.due))?;
    let anchors = AnchorReport::read(kernel, evidence, checkpoints.last.as_ref().map(|last| last.number))?;
    let damaged: usize = report.tables.iter().map(|(_, _, problems)| problems.len()).sum();
    // redb's own check of every page, on a copy (a file store only: PostgreSQL's pages are its own).
    let location = kernel.store_path().display().to_string();
    let pages = if warden::store::is_postgres(&location) {
        None
    } else {
        Some(warden::store::check_pages(kernel.store_path())?)
    };
    let pages_sound = pages.as_ref().is_none_or(|check| check.problem.is_none());
    let sound = damaged == 0 && report.chain.ok && report.orphans.is_empty() && pages_sound;
    let file_bytes = std::fs::metadata(kernel.store_path()).map(|m| m.len()).ok();
    let skew_ms = kernel.clock_skew().map(|micros| micros / 1000);
    let stdout = if json {
        document(&json!({
            "ok": sound,
            "store": kernel.store_path().display().to_string(),
            "tables": report.tables.iter().map(|(table, rows, problems)| json!({
                "table": table, "rows": rows, "problems": problems,
            })).collect::<Vec<_>>(),
            "chain": report.chain,
            "orphans": report.orphans,
            "pages": pages.as_ref().map(|check| json!({"bytes": check.bytes, "problem": check.problem})),
            "size": {"file_bytes": file_bytes, "in_use_bytes": report.bytes_in_use},
            "database_clock_skew_ms": skew_ms,
            "checkpoints": checkpoints.json(),
            "anchors": anchors.json(),
            "pruned": pruned.as_ref().map(retention_commands::pruned_json),
            "holds": holds.iter().map(retention_commands::hold_json).collect::<Vec<_>>(),
        }))
    } else {
        let mut out = format!("store {}\n", kernel.store_path().display());
        for (table, rows, problems) in &report.tables {
            let verdict = if problems.is_empty() { "ok".to_owned() } else { format!("{} DAMAGED", problems.len()) };
            out.push_str(&format!("  {table:<16} {rows:>8} rows  {verdict}\n"));
            for problem in problems.iter().take(20) {
                out.push_str(&format!("    {problem}\n"));
            }
            if problems.len() > 20 {
                out.push_str(&format!("    … and {} more\n", problems.len() - 20));
            }
        }
        let chain = &report.chain;
        if chain.ok {
            out.push_str(&format!("  receipt chain    {:>8} receipts  ok\n", chain.verified));
        } else {
            out.push_str(&format!(
                "  receipt chain    {:>8} receipts  BROKEN ({} break(s))\n",
                chain.chained,
                chain.breaks.len() as u64 + chain.breaks_not_listed
            ));
            for brk in chain.breaks.iter().take(20) {
                out.push_str(&format!("    {} at {:?}: {}\n", brk.name, brk.seq, brk.detail));
            }
        }
        out.push_str(&format!(
            "  size             {} bytes in use by the tables{}\n",
            report.bytes_in_use,
            file_bytes.map(|f| format!(", file {f} bytes")).unwrap_or_default()
        ));
        if let Some(skew) = skew_ms {
            let warning = if skew.abs() > SKEW_WARNING_MS {
                "  WARNING: this host's clock is far off; leases and expiry follow the database's clock, but this \
                 host's logs and any manual clock will disagree with it. Synchronise the host's clock (NTP)"
            } else {
                ""
            };
            out.push_str(&format!("  database clock   {skew:+} ms from this host's{warning}\n"));
        }
        if let Some(check) = &pages {
            let verdict = match &check.problem {
                None => "ok".to_owned(),
                Some(problem) => format!("DAMAGED: {problem}"),
            };
            out.push_str(&format!("  redb pages       {:>8} bytes  {verdict}\n", check.bytes));
        }
        out.push_str(&checkpoints.text());
        out.push_str(&anchors.text());
        out.push_str(&retention(pruned.as_ref(), &holds));
        if report.orphans.is_empty() {
            out.push_str("  references       ok\n");
        } else {
            for orphan in &report.orphans {
                out.push_str(&format!("  orphan: {orphan}\n"));
            }
        }
        out.push_str(if sound {
            "sound\n"
        } else {
            "DAMAGED: restore the store from a backup, or keep it for inspection\n"
        });
        out
    };
    Ok(Done {
        stdout,
        failed: (!sound).then(|| {
            Failure::check("store_damaged", format!("the store {} is damaged", kernel.store_path().display()))
        }),
    })
}
