//! G4 of `warden verify` as OS processes: this binary starts itself `CONTENDERS` times as
//! `warden __verify-child SPEC INDEX`, lines them up at a file barrier, releases them together
//! and reads each one's answer. Process spawning lives here, in the binary, so the library
//! starts no process (`docs/VERIFY.md`). `tests/verify.rs` includes this file by path and races
//! a stand-in program through the same code.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use warden::verify::{Contended, ProcessRace, RaceFiles, CHILD_SUBCOMMAND, RACE_TIMEOUT};

/// The program each contender runs as `PROGRAM __verify-child SPEC INDEX`.
pub struct ChildProgram(pub PathBuf);

type Answers = Vec<Result<Contended, String>>;

impl ProcessRace for ChildProgram {
    fn race(&self, files: &RaceFiles) -> Result<Answers, String> {
        let program = &self.0;
        let mut children: Vec<Child> = Vec::new();
        for index in 0..files.contenders {
            let spawned = Command::new(program)
                .arg(CHILD_SUBCOMMAND)
                .arg(&files.spec)
                .arg(index.to_string())
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn();
            match spawned {
                Ok(child) => children.push(child),
                Err(error) => {
                    stop(&mut children);
                    return Err(format!("cannot start {} {CHILD_SUBCOMMAND}: {error}", program.display()));
                }
            }
        }
        let deadline = Instant::now() + RACE_TIMEOUT;
        while (0..files.contenders).any(|i| !files.ready(i).exists()) {
            let exited = children.iter_mut().any(|c| matches!(c.try_wait(), Ok(Some(_))));
            if exited || Instant::now() >= deadline {
                // Release whoever is waiting, then report what the early ones said.
                let _ = std::fs::write(files.go(), b"");
                let answers = collect(children, deadline);
                let first = answers.iter().find_map(|o| o.as_ref().err().cloned()).unwrap_or_else(|| {
                    format!("the contenders did not reach the barrier within {} s", RACE_TIMEOUT.as_secs())
                });
                return Err(format!("the race could not start: {first}"));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        if let Err(error) = std::fs::write(files.go(), b"") {
            stop(&mut children);
            return Err(format!("cannot release the barrier: {error}"));
        }
        Ok(collect(children, Instant::now() + RACE_TIMEOUT))
    }
}

fn stop(children: &mut [Child]) {
    for child in children.iter_mut() {
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// Wait for each child (killing it past `deadline`) and read its answer.
fn collect(children: Vec<Child>, deadline: Instant) -> Answers {
    children
        .into_iter()
        .map(|mut child| {
            let status = wait_until(&mut child, deadline);
            let mut stdout = String::new();
            let mut stderr = String::new();
            if let Some(mut out) = child.stdout.take() {
                let _ = out.read_to_string(&mut stdout);
            }
            if let Some(mut err) = child.stderr.take() {
                let _ = err.read_to_string(&mut stderr);
            }
            let Some(status) = status else {
                return Err(format!("a contender did not finish within {} s and was stopped", RACE_TIMEOUT.as_secs()));
            };
            Contended::from_output(&stdout, status.success()).ok_or_else(|| {
                let message: String = stderr.trim().chars().take(400).collect();
                format!("a contender exited with {status}: {message}")
            })
        })
        .collect()
}

fn wait_until(child: &mut Child, deadline: Instant) -> Option<ExitStatus> {
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(2)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
}
