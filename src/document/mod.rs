//! The administrator's document (DESIGN §5): loaded strictly, validated fail-fast, hashed.
//!
//! Two dialects share one loader. `schema: warden/v1` is Warden's own: unquoted scalars whose
//! meaning differs between YAML 1.1 and YAML 1.2 (`yes`, `on`, `017`, `1_000`, `1:30`, a date)
//! are refused with a hint to quote them, and anchors and aliases are refused outright.
//! `schema: ctrlrun.policy/v1`…`v8` documents are read the way ctrlrun 0.12.2 reads them —
//! PyYAML's `safe_load` (YAML 1.1) plus ctrlrun's validation — and get ctrlrun's policy hash, so
//! a ctrlrun deployment can move over with its receipts' provenance intact. Where ctrlrun
//! accepts something Warden cannot honour (a control registry, data labels, an inline authority
//! section, M-of-N approvals, the policy-change action), the document is refused with a message
//! that names the feature;
//! it is never loaded with the feature silently dropped.
//!
//! The YAML layer is an event parser (`yaml-rust2`) feeding a tree built here, so every node
//! keeps its line and every mapping can be checked for duplicate keys before anything is
//! resolved. Alias expansion is bounded (an alias bomb is refused), nesting is bounded, the
//! document is at most [`MAX_DOCUMENT_BYTES`], and nothing on these paths panics on input.

mod approval;
mod authority;
mod conditions;
mod ctrlrun;
mod cx;
mod error;
mod events;
mod evidence;
mod gateway;
mod hash;
mod integer;
mod limits;
mod load;
mod model;
mod quote;
mod resolve;
mod scalar;
mod schema;
mod schema_kind;
mod tree;
mod upstream;
mod validate;
mod warden;
mod warnings;

pub use error::DocumentError;
pub use gateway::{
    ClientAuthMethod, GatewaySettings, Icons, SamplingTools, TokenExchange, UnknownMethods, UpstreamAuth,
};
pub use limits::{MAX_ALIAS_NODES, MAX_DOCUMENT_BYTES, MAX_NESTING};
pub use load::{
    conditions_from_json, load_authority_file, load_authority_str, load_file, load_grant_file, load_grant_str,
    load_settings_file, load_settings_str, load_str, AuthorityFile, Setting,
};
pub use model::{ActionEntry, Document, Mode, Rule, RESERVED_SUBJECTS};
pub use schema_kind::Schema;
pub use upstream::{is_digest, pem_certificate, pem_certificates, UpstreamPins};
