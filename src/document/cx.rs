//! The context every section parser works in ([`Cx`]: the file's name and its schema), and the
//! helpers they share: building an error at a path, refusing unknown keys, reading a decision.
//! Each section parser adds its own `impl Cx` in its file; this one depends on none of them.

use crate::decision::Decision;

use super::error::DocumentError;
use super::quote::shorten;
use super::schema_kind::Schema;
use super::tree::{child_path, display_path, Member, Node};

pub(super) struct Cx<'a> {
    pub(super) origin: &'a str,
    pub(super) schema: Schema,
}

impl Cx<'_> {
    pub(super) fn error(&self, path: &str, line: Option<usize>, message: impl Into<String>) -> DocumentError {
        DocumentError {
            origin: self.origin.to_owned(),
            path: display_path(path).to_owned(),
            line,
            message: message.into(),
        }
    }

    pub(super) fn warden(&self) -> bool {
        self.schema == Schema::WardenV1
    }

    pub(super) fn reject_unknown(&self, members: &[Member], allowed: &[&str], path: &str) -> Result<(), DocumentError> {
        for member in members {
            if allowed.contains(&member.key.as_str()) {
                continue;
            }
            let hint = if member.key.chars().any(|c| c.is_ascii_uppercase()) { " (keys are snake_case)" } else { "" };
            return Err(self.error(
                &child_path(path, &member.key),
                Some(member.line),
                format!("unknown key '{}'{hint}; allowed here: {}", shorten(&member.key), allowed.join(", ")),
            ));
        }
        Ok(())
    }

    pub(super) fn decision(&self, node: &Node, path: &str, line: usize) -> Result<Decision, DocumentError> {
        let allowed = "allow, approve, deny";
        match node.as_str() {
            Some(text) => Decision::parse(text).ok_or_else(|| {
                self.error(path, Some(line), format!("unknown decision '{}', expected one of {allowed}", shorten(text)))
            }),
            None => {
                Err(self.error(path, Some(line), format!("decision must be one of {allowed}, got {}", node.shown())))
            }
        }
    }
}
