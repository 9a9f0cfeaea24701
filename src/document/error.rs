//! Why a document does not load ([`DocumentError`]), and the paths errors use for the document
//! as a whole. A leaf: every section parser builds these errors.

/// Path used for errors about the document as a whole (its bytes, its YAML).
pub(super) const WHOLE_DOCUMENT: &str = "(document)";
/// Path used for errors about the top-level mapping itself.
pub(super) const TOP_LEVEL: &str = "top level";

/// Why a document (or an authority or grant file) does not load: where, and what to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{origin}{}: {path}: {message}", line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct DocumentError {
    /// The file path, or whatever name the caller gave a string.
    pub origin: String,
    /// Where in the document, e.g. `actions.stripe.refund.rules[1].when.amount_lte`.
    pub path: String,
    /// 1-based line, where one is known.
    pub line: Option<usize>,
    /// What is wrong, and what is allowed there.
    pub message: String,
}
