//! How a scenario comes out: a status and what was seen.

use crate::error::{Error, Result};

/// How one guarantee came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// It held.
    Pass,
    /// It did not hold.
    Fail,
    /// The document gives it nothing to check (never reported as a pass).
    NotApplicable,
}

impl Status {
    /// The JSON spelling: `pass`, `fail`, `not_applicable`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "fail",
            Status::NotApplicable => "not_applicable",
        }
    }

    pub(super) fn label(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "fail",
            Status::NotApplicable => "n/a",
        }
    }
}

pub(super) type Outcome = (Status, String);

pub(super) fn pass(detail: String) -> Result<Outcome> {
    Ok((Status::Pass, detail))
}

pub(super) fn fail(detail: String) -> Result<Outcome> {
    Ok((Status::Fail, detail))
}

pub(super) fn not_applicable(detail: &str) -> Result<Outcome> {
    Ok((Status::NotApplicable, detail.to_owned()))
}

/// "was refused (reason: message)", for details.
pub(super) fn refused(error: &Error) -> String {
    format!("was refused ({}: {error})", error.reason())
}
