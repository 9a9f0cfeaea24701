//! Generates the C header from `src/ffi/` with cbindgen into `$OUT_DIR/warden.h`. The committed
//! `include/warden.h` must equal it; a test fails when it is stale. Regenerate with
//! `WARDEN_UPDATE_HEADER=1 cargo build`, which also writes `include/warden.h`.

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=src/ffi");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    println!("cargo:rerun-if-env-changed=WARDEN_UPDATE_HEADER");
    let crate_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("cbindgen.toml is readable");
    let bindings =
        match cbindgen::Builder::new().with_src(crate_dir.join("src/ffi/mod.rs")).with_config(config).generate() {
            Ok(bindings) => bindings,
            Err(error) => {
                // A parse error in src/ffi is reported by rustc itself, more precisely.
                println!("cargo:warning=cbindgen could not generate the header: {error}");
                return;
            }
        };
    bindings.write_to_file(out_dir.join("warden.h"));
    if std::env::var_os("WARDEN_UPDATE_HEADER").is_some() {
        bindings.write_to_file(crate_dir.join("include/warden.h"));
    }
}
