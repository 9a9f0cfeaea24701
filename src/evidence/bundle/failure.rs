//! Why a bundle check stopped: one of the verifier's reasons (`REASONS`) and a detail.

pub(super) struct Failure(pub(super) &'static str, pub(super) String);

pub(super) fn fail<T>(reason: &'static str, detail: impl Into<String>) -> std::result::Result<T, Failure> {
    Err(Failure(reason, detail.into()))
}
