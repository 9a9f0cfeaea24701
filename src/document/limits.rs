//! The bounds every YAML file Warden reads is held to: its size, its nesting, what anchors and
//! aliases may materialise. A leaf, so that the event parser and the loader share them.

/// The largest document accepted, file or string.
pub const MAX_DOCUMENT_BYTES: usize = 4 * 1024 * 1024;

/// How deep sequences and mappings may nest (alias expansions included).
pub const MAX_NESTING: usize = 128;

/// How many nodes anchors and aliases may materialise in one document. A ctrlrun document that
/// uses anchors for shared rule blocks needs a few hundred; an alias bomb needs billions.
pub const MAX_ALIAS_NODES: usize = 100_000;
