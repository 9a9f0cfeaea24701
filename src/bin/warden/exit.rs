//! Exit codes, what a command printed (`Done`), and what stopped it (`Failure`).

use serde_json::{json, Value};

use warden::Error;

/// Refused, or the check the command ran failed.
pub const EXIT_CHECK_FAILED: u8 = 1;
/// Usage or configuration error: clap's own errors, a missing store or document, invalid input.
pub const EXIT_USAGE: u8 = 2;
/// Internal error: a store fault, stdout gone, anything that is not the caller's doing.
pub const EXIT_INTERNAL: u8 = 3;

/// The exit codes as `--help` prints them (README.md quotes this text).
pub const EXIT_CODES_HELP: &str = "\
Exit codes, one rule for every command:
  0  ok (for `decide`, any decision: it is a report)
  1  refused, or a check failed: the store or a sight said no (duplicate, ambiguous, not
     found, a refused or failed query), a guarantee failed, the receipt chain is broken,
     `doctor` found damage, `init` found the file already there, or what `canonical`,
     `action-hash` or `template` checks was refused
  2  usage or configuration error: bad arguments, or a file that is missing or unusable
     (a document that does not load, for `check` too; no store at the path; a credentials
     directory that is not one)
  3  internal error (a store fault)

With --json, stdout holds exactly one JSON document, also on error.";

/// What a command printed, and, when it did not succeed after all (a failed check, a document
/// `check` refused), the exit code and the note for stderr: stdout is printed either way.
pub struct Done {
    pub stdout: String,
    pub failed: Option<Failure>,
}

impl Done {
    pub fn ok(stdout: String) -> Done {
        Done { stdout, failed: None }
    }
}

/// A command that did not do what was asked: the exit code, the one-line message and the
/// error object printed under `--json`.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub message: String,
    pub json: Value,
}

impl Failure {
    pub fn new(code: u8, reason: &str, message: String) -> Failure {
        let json = json!({"reason": reason, "message": message, "refusal": code == EXIT_CHECK_FAILED});
        Failure { code, message, json }
    }

    pub fn check(reason: &str, message: impl Into<String>) -> Failure {
        Failure::new(EXIT_CHECK_FAILED, reason, message.into())
    }

    pub fn usage(message: impl Into<String>) -> Failure {
        Failure::new(EXIT_USAGE, "usage", message.into())
    }

    /// The document could not be loaded (for every command but `check`, which reports it).
    pub fn config(message: impl Into<String>) -> Failure {
        Failure::new(EXIT_USAGE, "configuration_invalid", message.into())
    }

    pub fn internal(message: impl Into<String>) -> Failure {
        Failure::new(EXIT_INTERNAL, "internal", message.into())
    }
}

impl From<Error> for Failure {
    fn from(error: Error) -> Failure {
        let code = if let Error::Sight(sight) = &error {
            // A sight that failed is the query's answer, not a fault of this program; only a
            // configuration that cannot serve it is the operator's to fix.
            if sight.kind() == warden::sight::SightKind::Config {
                EXIT_USAGE
            } else {
                EXIT_CHECK_FAILED
            }
        } else if error.is_refusal() {
            EXIT_CHECK_FAILED
        } else if matches!(error, Error::InvalidInput(_) | Error::NoPrincipal { .. } | Error::Config(_))
            || error.is_access_problem()
        {
            EXIT_USAGE
        } else {
            EXIT_INTERNAL
        };
        Failure { code, message: error.to_string(), json: error.to_json() }
    }
}
