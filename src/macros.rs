//! The crate's own macros: doc tests proving internals stay private (`private_outside!`). A
//! leaf: `lib.rs` declares it first, so every module sees them.

/// Documents `$item` with its leading doc lines, then doc tests that prove internals stay private: each snippet must fail to
/// compile outside the crate in every build without `test-exports` (the error code is named for
/// the reader; stable rustdoc does not compare it), and its test-support twin (the same use of
/// the internal through `warden::test_support`) must compile in a `test-exports` build — so a
/// typo in a snippet fails that build's doc tests instead of passing as "does not compile".
macro_rules! private_outside {
    ($(#[$meta:meta])* $( ($code:literal, $error:literal, $twin:literal) ),+ ; $item:item) => {
        $(#[$meta])*
        $(
            #[cfg_attr(not(feature = "test-exports"), doc = concat!("```compile_fail,", $error, "\n", $code, "\n```"))]
            #[cfg_attr(feature = "test-exports", doc = concat!("```\n", $twin, "\n```"))]
        )+
        $item
    };
}
pub(crate) use private_outside;
