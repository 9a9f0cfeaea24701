//! The document's `evidence:` section: which key signs automatic checkpoints and how often one
//! is due. Like `notify`, it decides no action, so it is outside the policy hash.

use std::path::PathBuf;

use serde_json::Value;

use crate::clock::{parse_duration, Micros, MICROS_PER_SECOND};
use crate::sight::credentials::is_reference;

pub use super::refusal::SettingsError;

/// A checkpoint is due once this many receipts follow the last one, unless the section says.
pub const DEFAULT_EVERY_RECEIPTS: u64 = 1000;
/// ... or once receipts have waited this long after the last one (`PT1M`).
pub const DEFAULT_EVERY: Micros = 60 * MICROS_PER_SECOND;
/// The shortest `every` accepted (`PT1S`): a shorter one only makes rows.
pub const MIN_EVERY: Micros = MICROS_PER_SECOND;
/// How long past `every` a due checkpoint may be missing before `warden doctor` calls it
/// overdue (the worker looks at least once a second; a checkpoint is two commits).
pub const OVERDUE_GRACE: Micros = 10 * MICROS_PER_SECOND;

const KEYS: [&str; 6] = ["anchors", "every", "every_receipts", "key_file", "key_ref", "origin"];

/// Where the signing key of automatic checkpoints comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// A key file written by `warden keygen` (mode 0600, refused otherwise), read at open.
    File(PathBuf),
    /// A credential reference, resolved through the host's credential provider at each
    /// checkpoint (the value is the key file's one line).
    Ref(String),
}

/// When a checkpoint is due: both bounds hold at once, the first reached makes one. Nothing is
/// due while no receipt follows the last checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Due {
    /// Receipts after the last checkpoint that make one due.
    pub every_receipts: u64,
    /// How long a receipt may wait after the last checkpoint before one is due.
    pub every: Micros,
}

impl Due {
    /// Whether a chain of `size` receipts is due a checkpoint at `now`, its last one (if any)
    /// covering `last_size` receipts at `last_time`.
    pub fn is_due(&self, size: u64, last: Option<(u64, Micros)>, now: Micros) -> bool {
        let Some((last_size, last_time)) = last else { return size > 0 };
        if size <= last_size {
            return false;
        }
        size - last_size >= self.every_receipts || now.saturating_sub(last_time) >= self.every
    }

    /// Whether a checkpoint that a running worker would have made by `now` is missing: receipts
    /// past twice the count, or waiting longer than `every` and [`OVERDUE_GRACE`], or a log with
    /// receipts and no checkpoint at all.
    pub fn is_overdue(&self, size: u64, last: Option<(u64, Micros)>, now: Micros) -> bool {
        let Some((last_size, last_time)) = last else { return size > 0 };
        size > last_size
            && (size - last_size >= self.every_receipts.saturating_mul(2)
                || now.saturating_sub(last_time) >= self.every.saturating_add(OVERDUE_GRACE))
    }
}

/// The `evidence` section, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvidenceSettings {
    /// The signing key.
    pub key: KeySource,
    /// The log's origin on its first checkpoint (default `warden/<random>`).
    pub origin: Option<String>,
    /// When one is due.
    pub due: Due,
    /// Where each checkpoint is sent once signed (`evidence.anchors`), in document order.
    pub anchors: Vec<super::anchoring::AnchorSpec>,
}

fn refuse(path: &str, message: impl Into<String>) -> SettingsError {
    SettingsError { path: path.to_owned(), message: message.into() }
}

fn text<'a>(map: &'a serde_json::Map<String, Value>, key: &str) -> Result<Option<&'a str>, SettingsError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) if !text.is_empty() => Ok(Some(text)),
        Some(_) => Err(refuse(&format!("evidence.{key}"), format!("'{key}' must be a non-empty string"))),
    }
}

impl EvidenceSettings {
    /// Parse the section (as JSON).
    pub fn parse(value: &Value) -> Result<EvidenceSettings, SettingsError> {
        let Value::Object(map) = value else {
            return Err(refuse(
                "evidence",
                "'evidence' must be a mapping such as {key_file: /etc/warden/evidence.key, every_receipts: 1000, every: PT1M}",
            ));
        };
        if let Some(key) = map.keys().find(|key| !KEYS.contains(&key.as_str())) {
            return Err(refuse(
                &format!("evidence.{key}"),
                format!("unknown key '{key}'; allowed here: {}", KEYS.join(", ")),
            ));
        }
        let key = match (text(map, "key_file")?, text(map, "key_ref")?) {
            (Some(file), None) => KeySource::File(PathBuf::from(file)),
            (None, Some(reference)) if is_reference(reference) => KeySource::Ref(reference.to_owned()),
            (None, Some(_)) => {
                return Err(refuse(
                    "evidence.key_ref",
                    "'key_ref' must be a credential reference (an environment-variable-like name such as \
                     WARDEN_EVIDENCE_KEY), never the key itself",
                ))
            }
            (Some(_), Some(_)) => {
                return Err(refuse("evidence", "name the signing key once: 'key_file' or 'key_ref', not both"))
            }
            (None, None) => {
                return Err(refuse(
                    "evidence",
                    "'evidence' needs the key that signs its checkpoints: 'key_file' (written by `warden keygen --out FILE`) \
                     or 'key_ref' (a credential reference)",
                ))
            }
        };
        let origin = text(map, "origin")?.map(str::to_owned);
        if let Some(origin) = &origin {
            if !super::checkpoint::is_origin(origin) {
                return Err(refuse(
                    "evidence.origin",
                    "'origin' must be printable ASCII without spaces or '+', such as example.com/payments",
                ));
            }
        }
        let every_receipts = match map.get("every_receipts") {
            None | Some(Value::Null) => DEFAULT_EVERY_RECEIPTS,
            Some(value) => match value.as_u64() {
                Some(n) if n >= 1 => n,
                _ => {
                    return Err(refuse(
                        "evidence.every_receipts",
                        "'every_receipts' must be a whole number of 1 or more",
                    ))
                }
            },
        };
        let every = match text(map, "every")? {
            None => DEFAULT_EVERY,
            Some(duration) => {
                let every = parse_duration(duration).map_err(|why| refuse("evidence.every", why))?;
                if every < MIN_EVERY {
                    return Err(refuse("evidence.every", "'every' must be PT1S or longer"));
                }
                every
            }
        };
        let anchors = match map.get("anchors") {
            None | Some(Value::Null) => Vec::new(),
            Some(list) => super::anchoring::AnchorSpec::parse_list(list)?,
        };
        Ok(EvidenceSettings { key, origin, due: Due { every_receipts, every }, anchors })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_section_is_checked_and_defaults_are_filled() {
        let parsed = EvidenceSettings::parse(&json!({"key_file": "/k"})).expect("parses");
        assert_eq!(parsed.key, KeySource::File("/k".into()));
        assert_eq!(parsed.due, Due { every_receipts: 1000, every: 60 * MICROS_PER_SECOND });
        let parsed = EvidenceSettings::parse(
            &json!({"key_ref": "WARDEN_EVIDENCE_KEY", "every_receipts": 1, "every": "PT1S", "origin": "example.com/log"}),
        )
        .expect("parses");
        assert_eq!(parsed.key, KeySource::Ref("WARDEN_EVIDENCE_KEY".into()));
        assert_eq!(parsed.due, Due { every_receipts: 1, every: MICROS_PER_SECOND });
        assert_eq!(parsed.origin.as_deref(), Some("example.com/log"));

        let refused = [
            (json!("yes"), "evidence", "must be a mapping"),
            (json!({}), "evidence", "needs the key"),
            (json!({"key_file": "/k", "key_ref": "K"}), "evidence", "not both"),
            (json!({"key_file": ""}), "evidence.key_file", "non-empty string"),
            (json!({"key_file": 7}), "evidence.key_file", "non-empty string"),
            (json!({"key_ref": "PRIVATE+KEY+x+1+abc"}), "evidence.key_ref", "never the key itself"),
            (json!({"key_file": "/k", "every_receipts": 0}), "evidence.every_receipts", "1 or more"),
            (json!({"key_file": "/k", "every_receipts": -1}), "evidence.every_receipts", "1 or more"),
            (json!({"key_file": "/k", "every_receipts": 1.5}), "evidence.every_receipts", "1 or more"),
            (json!({"key_file": "/k", "every": "PT0S"}), "evidence.every", "PT1S or longer"),
            (json!({"key_file": "/k", "every": "60s"}), "evidence.every", "ISO 8601"),
            (json!({"key_file": "/k", "origin": "two words"}), "evidence.origin", "printable ASCII"),
            (json!({"key_file": "/k", "signer": "x"}), "evidence.signer", "unknown key 'signer'"),
        ];
        for (value, path, message) in refused {
            let error = EvidenceSettings::parse(&value).expect_err("refused");
            assert_eq!(error.path, path, "{value}");
            assert!(error.message.contains(message), "{value}: {}", error.message);
        }
    }

    #[test]
    fn a_checkpoint_is_due_at_either_bound_and_never_without_a_new_receipt() {
        let due = Due { every_receipts: 10, every: 60 };
        let cases = [
            (0, None, 0, false),
            (1, None, 0, true),
            (5, Some((5, 0)), 1_000, false),
            (4, Some((5, 0)), 1_000, false),
            (14, Some((5, 0)), 59, false),
            (15, Some((5, 0)), 59, true),
            (14, Some((5, 0)), 60, true),
            (6, Some((5, 0)), 60, true),
            (6, Some((5, 100)), 0, false),
        ];
        for (size, last, now, expected) in cases {
            assert_eq!(due.is_due(size, last, now), expected, "{size} {last:?} {now}");
        }
    }

    #[test]
    fn a_checkpoint_is_overdue_past_twice_the_count_or_the_time_and_its_grace() {
        // docs/EVIDENCE.md and `warden doctor` say ten seconds.
        assert_eq!(OVERDUE_GRACE, 10_000_000);
        let due = Due { every_receipts: 10, every: 60 };
        let late = 60 + OVERDUE_GRACE;
        let cases = [
            (0, None, 0, false),
            (1, None, 0, true),
            (5, Some((5, 0)), late * 10, false),
            (24, Some((5, 0)), late - 1, false),
            (25, Some((5, 0)), late - 1, true),
            (6, Some((5, 0)), late - 1, false),
            (6, Some((5, 0)), late, true),
            (6, Some((5, 100)), late, false),
        ];
        for (size, last, now, expected) in cases {
            assert_eq!(due.is_overdue(size, last, now), expected, "{size} {last:?} {now}");
        }
    }
}
