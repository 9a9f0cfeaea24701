//! How a settings section of the document (`evidence:`, its `anchors`, `sign_in:`) is refused:
//! the path and what is wrong. A leaf, so that each section's parser can give it without
//! depending on the others.

/// A refusal of the section: where in the document and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingsError {
    /// The path inside the document, e.g. `evidence.every`.
    pub path: String,
    /// What is wrong and what is allowed.
    pub message: String,
}
