//! The crate's own macros: an item public only to `test-exports` builds (`test_pub!`), and doc
//! tests proving internals stay private (`private_outside!`). A leaf: `lib.rs` declares it
//! first, so every module sees them.

/// Declares an item `pub` in a build with the `test-exports` feature and `pub(crate)` in every
/// other build: internals the integration tests drive directly never reach a release build's
/// public API.
macro_rules! test_pub {
    ($(#[$meta:meta])* $kind:ident $($rest:tt)*) => {
        #[cfg(feature = "test-exports")]
        $(#[$meta])* pub $kind $($rest)*
        #[cfg(not(feature = "test-exports"))]
        $(#[$meta])* pub(crate) $kind $($rest)*
    };
}
pub(crate) use test_pub;

/// Documents `$item` with its leading doc lines, then doc tests that prove internals stay private: each snippet must fail to
/// compile outside the crate in every build without `test-exports` (the error code is named for
/// the reader; stable rustdoc does not compare it), and must compile in a `test-exports` build,
/// where the same internals are public — so a typo in a snippet fails that build's doc tests
/// instead of passing as "does not compile".
macro_rules! private_outside {
    ($(#[$meta:meta])* $( ($code:literal, $error:literal) ),+ ; $item:item) => {
        $(#[$meta])*
        $(
            #[cfg_attr(not(feature = "test-exports"), doc = concat!("```compile_fail,", $error, "\n", $code, "\n```"))]
            #[cfg_attr(feature = "test-exports", doc = concat!("```\n", $code, "\n```"))]
        )+
        $item
    };
}
pub(crate) use private_outside;
