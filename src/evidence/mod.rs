//! Evidence that leaves the box: the receipts' Merkle tree ([`tree`]), signed checkpoints over
//! it ([`checkpoint`], [`key`]) and offline bundles with their verifier ([`bundle`]). The
//! formats and what a verifier can and cannot conclude are in `docs/EVIDENCE.md`.

pub mod anchor;
pub mod bundle;
pub mod checkpoint;
pub mod key;
pub mod tree;
pub mod tsa;
