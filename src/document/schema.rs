//! The schema decides how scalars are read, so it is found before anything is resolved.

use super::ctrlrun::NEWEST_CTRLRUN;
use super::error::{DocumentError, TOP_LEVEL};
use super::events::{Raw, RawKind};
use super::scalar::is_null_text;
use super::schema_kind::Schema;
use super::schema_kind::{CTRLRUN_SCHEMA_PREFIX, WARDEN_V1};
use super::tree::YAML_STR_TAG;

fn raw_string(node: &Raw) -> Option<&str> {
    match &node.kind {
        RawKind::Scalar { text, tag, .. } if tag.as_deref().is_none_or(|t| t == YAML_STR_TAG) => Some(text),
        _ => None,
    }
}

fn raw_kind_name(node: &Raw) -> &'static str {
    match &node.kind {
        RawKind::Scalar { .. } => "a scalar",
        RawKind::Seq { .. } => "a list",
        RawKind::Map { .. } => "a mapping",
    }
}

pub(super) fn detect_schema(root: &Raw, origin: &str) -> Result<Schema, DocumentError> {
    let error = |line: Option<usize>, message: String| DocumentError {
        origin: origin.to_owned(),
        path: TOP_LEVEL.to_owned(),
        line,
        message,
    };
    let RawKind::Map { entries, .. } = &root.kind else {
        let empty = matches!(&root.kind, RawKind::Scalar { text, plain: true, tag: None } if is_null_text(text));
        if empty {
            return Err(error(
                Some(root.line),
                "the document is empty; it must be a mapping with 'schema' and 'actions' keys".into(),
            ));
        }
        return Err(error(
            Some(root.line),
            format!("the document must be a mapping with 'schema' and 'actions' keys, got {}", raw_kind_name(root)),
        ));
    };
    let Some((key, value)) = entries.iter().find(|(key, _)| raw_string(key) == Some("schema")) else {
        return Err(error(
            Some(root.line),
            format!(
                "missing 'schema'; a document declares 'schema: {WARDEN_V1}' (or a ctrlrun schema, \
                 {CTRLRUN_SCHEMA_PREFIX}1 to {CTRLRUN_SCHEMA_PREFIX}{NEWEST_CTRLRUN}), and none is ever assumed"
            ),
        ));
    };
    let path_error = |message: String| DocumentError {
        origin: origin.to_owned(),
        path: "schema".to_owned(),
        line: Some(key.line),
        message,
    };
    let Some(name) = raw_string(value) else {
        return Err(path_error(format!("'schema' must be a string, got {}", raw_kind_name(value))));
    };
    if name == WARDEN_V1 {
        return Ok(Schema::WardenV1);
    }
    if let Some(version) = name.strip_prefix(CTRLRUN_SCHEMA_PREFIX) {
        let supported = match version {
            "1" => Some(1),
            "2" => Some(2),
            "3" => Some(3),
            "4" => Some(4),
            "5" => Some(5),
            "6" => Some(6),
            "7" => Some(7),
            "8" => Some(8),
            _ => None,
        };
        if let Some(version) = supported {
            return Ok(Schema::Ctrlrun(version));
        }
    }
    let shown: String = name.chars().take(60).collect();
    Err(path_error(format!(
        "unknown schema '{shown}'; expected '{WARDEN_V1}' or one of '{CTRLRUN_SCHEMA_PREFIX}1' to \
         '{CTRLRUN_SCHEMA_PREFIX}{NEWEST_CTRLRUN}'"
    )))
}
