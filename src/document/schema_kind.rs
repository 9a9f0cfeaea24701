//! The schemas a document may declare (`Schema`) and how each is spelled. A leaf, so that a
//! grant can ask which numbers `warden/v1` holds without depending on the loader.

use crate::canonical::Floats;

pub(super) const WARDEN_V1: &str = "warden/v1";
pub(super) const CTRLRUN_SCHEMA_PREFIX: &str = "ctrlrun.policy/v";

/// The schema a document declares, which decides how it is read and hashed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Schema {
    /// `warden/v1`.
    WardenV1,
    /// `ctrlrun.policy/vN`, N in 1..=8.
    Ctrlrun(u8),
}

impl Schema {
    /// The schema string as the document spells it.
    pub fn name(&self) -> String {
        match self {
            Schema::WardenV1 => WARDEN_V1.to_owned(),
            Schema::Ctrlrun(version) => format!("{CTRLRUN_SCHEMA_PREFIX}{version}"),
        }
    }

    /// Which numbers the canonical form holds under this schema, the one place that says so:
    /// `warden/v1` prints floats as RFC 8785 does, so a float argument (`{"a": 1.5}`) and a
    /// float operand (`amount_lte: 10.5`) are accepted; a ctrlrun document refuses both, as
    /// ctrlrun does, and so keeps ctrlrun's hashes.
    pub fn floats(&self) -> Floats {
        match self {
            Schema::WardenV1 => Floats::Rfc8785,
            Schema::Ctrlrun(_) => Floats::Refused,
        }
    }
}
