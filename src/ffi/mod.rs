//! The `extern "C"` surface: the only place `unsafe` is allowed. Every export is panic-safe.
//! This issue lays down the boundary's first symbol and the header pipeline; the full surface
//! (handles, result codes, JSON in and out) is the boundary issue's.

/// The ABI version of this library. A binding built for another version must refuse to load.
/// Bumped only when an existing symbol's meaning changes; added symbols do not bump it.
pub const WARDEN_ABI_VERSION: u32 = 1;

/// Returns the ABI version this library implements. Never fails, never allocates.
///
/// Thread safety: safe from any thread.
#[no_mangle]
pub extern "C" fn warden_abi_version() -> u32 {
    WARDEN_ABI_VERSION
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_committed_header_is_the_generated_one() {
        let generated = include_str!(concat!(env!("OUT_DIR"), "/warden.h"));
        let committed =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/include/warden.h")).unwrap_or_default();
        assert!(
            generated == committed,
            "include/warden.h is stale: regenerate it with `WARDEN_UPDATE_HEADER=1 cargo build` and commit it"
        );
    }
}
