//! The file engine: one redb file per store. `rows` is its row layer; the rest is how one file
//! is shared — created atomically and checked (`file`), migrated forward (`schema`), written by
//! one owner through a group commit (`commit`) whose batches a journal makes durable (`journal`,
//! its records' payload in `payload`), served to other processes over a Unix socket (`owner`,
//! `client`, `wire`).

pub(crate) mod client;
pub(crate) mod commit;
#[cfg(test)]
mod crash_tests;
pub(crate) mod disk;
pub(crate) mod file;
pub(crate) mod journal;
#[cfg(test)]
mod kept_tests;
pub(crate) mod owner;
pub(crate) mod payload;
pub(crate) mod rows;
pub(crate) mod schema;
pub(crate) mod wire;
