//! Evidence that leaves the box: the receipts' Merkle tree ([`tree`]), signed checkpoints over
//! it ([`checkpoint`], [`key`]), made on demand or automatically by the document's `evidence`
//! section ([`settings`], [`auto`]), the proof documents every surface returns ([`proof`]),
//! offline bundles with their verifier ([`bundle`]), and anchors that take a checkpoint off the
//! box ([`anchor`], [`tsa`]), sent each checkpoint by the worker ([`anchoring`]), and retention: holds and the pruning of
//! an anchored prefix ([`retention`]). The formats and what a verifier can and cannot conclude are in
//! `docs/EVIDENCE.md`.

pub mod anchor;
pub mod anchoring;
pub mod auto;
pub mod bundle;
pub mod checkpoint;
pub mod key;
pub mod proof;
mod refusal;
pub mod retention;
pub mod settings;
pub mod tree;
pub mod tsa;
