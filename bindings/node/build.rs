//! Link the root crate's `libwarden.so` dynamically, and let the addon find it next to itself.
//!
//! The library is looked up in `$WARDEN_LIB_DIR`, else `${CARGO_TARGET_DIR:-<repo>/target}/release`.
//! It is copied into `OUT_DIR` first so the linker sees exactly one `libwarden` (the target
//! directory also holds `libwarden.a` and `libwarden.rlib`). At run time the addon finds it
//! through the rpath `$ORIGIN`: `scripts/build.js` copies it next to `warden.node`.

use std::path::PathBuf;

fn main() {
    napi_build::setup();
    println!("cargo:rerun-if-env-changed=WARDEN_LIB_DIR");
    println!("cargo:rerun-if-env-changed=CARGO_TARGET_DIR");
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let repo = manifest.join("../..");
    let dir = match std::env::var_os("WARDEN_LIB_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => {
            let target = std::env::var_os("CARGO_TARGET_DIR")
                .filter(|d| !d.is_empty())
                .map(PathBuf::from)
                .unwrap_or_else(|| repo.join("target"));
            let target = if target.is_absolute() { target } else { manifest.join(target) };
            target.join("release")
        }
    };
    let library = dir.join("libwarden.so");
    println!("cargo:rerun-if-changed={}", library.display());
    if !library.exists() {
        panic!(
            "{} not found: build it first with `cargo build --release --lib --manifest-path {}/Cargo.toml`, \
             or point WARDEN_LIB_DIR at the directory holding it",
            library.display(),
            repo.display()
        );
    }
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("warden-lib");
    std::fs::create_dir_all(&out).expect("create OUT_DIR/warden-lib");
    std::fs::copy(&library, out.join("libwarden.so")).expect("copy libwarden.so into OUT_DIR");
    println!("cargo:rustc-link-search=native={}", out.display());
    println!("cargo:rustc-link-lib=dylib=warden");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-rpath,$ORIGIN");
}
