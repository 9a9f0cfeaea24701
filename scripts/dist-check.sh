#!/usr/bin/env bash
# Install what scripts/dist.sh put in dist/ the way a user without Rust would, and check it:
#
#   scripts/dist-check.sh
#
# - lists the wheel, the npm tarball and the CLI archive and checks their contents: exactly the
#   expected files, no test-only symbol, no absolute build path of this machine, no debug info,
#   every exported warden_* symbol declared in the shipped header, matching checksums;
# - with cargo, rustc and every C compiler removed from PATH: installs the wheel into a fresh
#   venv, the tarball into a fresh npm project and the archive into a fresh prefix, and runs the
#   Python and Node quickstarts (the README's own files), `warden demo`, the bash completion and
#   `man warden-approve` from the installed artifacts, and checks that every one of them reports
#   the same version and ABI as `warden --version --json`;
# - compiles the C quickstart once against the installed header and library (with the C
#   compiler: that step needs one) and runs it without Rust on PATH.
#
# Prints the sizes and install times it measured. Needs python3, node, npm, tar, binutils
# (readelf, nm, strings), cc and pkg-config; man, when installed, is used too.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
dist=$root/dist
fail() { echo "dist-check: $*" >&2; exit 1; }
say() { echo "dist-check: $*"; }

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n1)
triple=x86_64-unknown-linux-gnu
wheel=$(ls "$dist"/warden_effects-"$version"-py3-none-*.whl 2>/dev/null | head -n1 || true)
[ -n "$wheel" ] || fail "no wheel warden_effects-$version-py3-none-*.whl in dist/; run scripts/dist.sh first"
tgz=$dist/warden-$version.tgz
archive=$dist/warden-$version-$triple.tar.gz
sdist=$dist/warden_effects-$version.tar.gz
crate=$dist/warden-effects-$version.crate
for artifact in "$tgz" "$archive" "$sdist" "$crate"; do
    [ -f "$artifact" ] || fail "$artifact is missing; run scripts/dist.sh first"
done
case "$wheel" in
    *-manylinux_*) ;;
    *) fail "$(basename "$wheel") carries no manylinux tag (auditwheel did not retag it)" ;;
esac
(cd "$dist" && sha256sum --quiet --check -- *.sha256) || fail "a checksum in dist/ does not match its artifact"
for artifact in "$wheel" "$tgz" "$archive" "$sdist" "$crate"; do
    [ -f "$artifact.sha256" ] || fail "$(basename "$artifact") has no .sha256 file"
done

work=$(mktemp -d /tmp/warden-dist-check.XXXXXX)
trap 'rm -rf "$work"' EXIT

# ---- contents -----------------------------------------------------------------------------------
python=$(python3 -c 'import sys; print(sys.executable)')
listed() { # listed ARTIFACT: one path per line, sorted
    case "$1" in
        *.whl) "$python" -c 'import sys, zipfile; print("\n".join(sorted(n for n in zipfile.ZipFile(sys.argv[1]).namelist() if not n.endswith("/"))))' "$1" ;;
        *) tar -tzf "$1" | grep -v '/$' | sort ;;
    esac
}
expect_listing() { # expect_listing ARTIFACT EXPECTED-FILE
    if ! diff -u "$2" <(listed "$1") > "$work/listing.diff"; then
        cat "$work/listing.diff" >&2
        fail "$(basename "$1") does not hold exactly the expected files (- expected, + found)"
    fi
    say "$(basename "$1"): $(listed "$1" | wc -l) files, as expected"
}

# The Python modules, from the sources the wheel was built from.
info=warden_effects-$version.dist-info
{
    git ls-files bindings/python/warden | sed 's|^bindings/python/||'
    printf '%s\n' "$info/METADATA" "$info/RECORD" "$info/WHEEL" "$info/top_level.txt" \
        "$info/licenses/LICENSE" "$info/licenses/LICENSE-THIRD-PARTY.txt" "$info/licenses/NOTICE" \
        warden/libwarden.so
} | sort > "$work/wheel.expected"
# setuptools before 77 puts licence files next to METADATA rather than under licenses/.
if listed "$wheel" | grep -qx "$info/LICENSE"; then sed -i "s|$info/licenses/|$info/|" "$work/wheel.expected"; sort -o "$work/wheel.expected" "$work/wheel.expected"; fi
expect_listing "$wheel" "$work/wheel.expected"

{
    printf 'package/%s\n' package.json README.md LICENSE NOTICE LICENSE-THIRD-PARTY.txt index.js index.d.ts \
        native/warden.node native/libwarden.so
    git ls-files bindings/node/lib | sed 's|^bindings/node/|package/|'
} | sort > "$work/npm.expected"
expect_listing "$tgz" "$work/npm.expected"

prefix_name=warden-$version-$triple
{
    printf "$prefix_name/%s\n" bin/warden lib/libwarden.so lib/libwarden.a lib/pkgconfig/warden.pc include/warden.h \
        share/bash-completion/completions/warden share/zsh/site-functions/_warden \
        share/fish/vendor_completions.d/warden.fish LICENSE NOTICE LICENSE-THIRD-PARTY.txt CHANGELOG.md
    # One man page for the command and one per visible subcommand (`warden --help` lists them),
    # nested ones included (below).
    echo "$prefix_name/share/man/man1/warden.1"
} | sort > "$work/archive.expected"
mkdir -p "$work/prefix-probe"
tar -xzf "$archive" -C "$work/prefix-probe"
# A subcommand with subcommands of its own (`warden proof inclusion`, `warden gateway pins accept`)
# has a page for each of them too, at every depth.
commands_of() { sed -n '/^Commands:/,/^$/p' | awk 'NR > 1 && $1 != "help" && NF {print $1}'; }
pages_of() { # PAGE-NAME COMMAND-WORDS...: the pages of the subcommands below these words
    local page=$1 sub
    shift
    "$work/prefix-probe/$prefix_name/bin/warden" "$@" --help | commands_of | while read -r sub; do
        echo "$prefix_name/share/man/man1/$page-$sub.1"
        pages_of "$page-$sub" "$@" "$sub"
    done
}
pages_of warden >> "$work/archive.expected"
sort -o "$work/archive.expected" "$work/archive.expected"
expect_listing "$archive" "$work/archive.expected"

# The npm package installs without running anything: no install scripts at all.
tar -xzOf "$tgz" package/package.json | "$python" -c '
import json, sys
package = json.load(sys.stdin)
scripts = set(package.get("scripts", {})) & {"preinstall", "install", "postinstall", "prepare"}
sys.exit(f"the npm package runs {sorted(scripts)} at install" if scripts else 0)'

# Every shipped ELF file: no debug info, no test-only symbol, no path of this build machine.
mkdir -p "$work/elf/wheel" "$work/elf/npm"
"$python" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract("warden/libwarden.so", sys.argv[2])' "$wheel" "$work/elf/wheel"
tar -xzf "$tgz" -C "$work/elf/npm" package/native
build_paths=("$root" "${CARGO_HOME:-$HOME/.cargo}" "/.cargo/registry")
if [ -n "${CARGO_TARGET_DIR:-}" ]; then build_paths+=("$CARGO_TARGET_DIR"); fi
header=$work/prefix-probe/$prefix_name/include/warden.h
for elf in "$work/elf/wheel/warden/libwarden.so" "$work/elf/npm/package/native/libwarden.so" \
    "$work/elf/npm/package/native/warden.node" "$work/prefix-probe/$prefix_name/bin/warden" \
    "$work/prefix-probe/$prefix_name/lib/libwarden.so" "$work/prefix-probe/$prefix_name/lib/libwarden.a"; do
    shown=${elf#"$work"/}
    if readelf -S --wide "$elf" 2>/dev/null | grep -q ' \.debug_'; then
        fail "$shown carries debug info ($(readelf -S --wide "$elf" | grep -o '\.debug_[a-z_]*' | sort -u | tr '\n' ' '))"
    fi
    if nm -a "$elf" 2>/dev/null | grep -q 'warden_test_'; then
        fail "$shown holds test-only symbols: $(nm -a "$elf" | grep -o 'warden_test_[A-Za-z0-9_]*' | sort -u | tr '\n' ' ')"
    fi
    for path in "${build_paths[@]}"; do
        if strings -a "$elf" | grep -qF -- "$path"; then
            fail "$shown names the build path $path: $(strings -a "$elf" | grep -F -- "$path" | head -n 3)"
        fi
    done
done
for so in "$work/elf/wheel/warden/libwarden.so" "$work/prefix-probe/$prefix_name/lib/libwarden.so"; do
    undeclared=$(nm -D --defined-only "$so" | awk '{print $3}' | grep '^warden_' | while read -r fn; do
        grep -q "[ *]$fn(" "$header" || echo "$fn"; done)
    [ -z "$undeclared" ] || fail "${so#"$work"/} exports warden_* symbols the header does not declare: $undeclared"
done
say "ELF files: no debug info, no test-only symbol, no build path, every export declared in warden.h"

# ---- a machine without Rust or a C compiler -----------------------------------------------------
# Every directory of PATH mirrored with symlinks, minus the Rust toolchain and the C compilers.
bin=$work/no-rust-bin
mkdir -p "$bin"
ln -s "$python" "$bin/python3"
IFS=: read -r -a path_dirs <<<"$PATH"
for dir in "${path_dirs[@]}"; do
    [ -d "$dir" ] || continue
    for tool in "$dir"/*; do
        name=${tool##*/}
        case $name in
            cargo | cargo-* | rustc | rustdoc | rustup | rust-* | cc | c++ | cpp | gcc | g++ | gcc-* | g++-* \
                | clang | clang++ | clang-* | tcc | *-linux-gnu-gcc* | *-linux-gnu-g++* | *-linux-gnu-cpp*) continue ;;
        esac
        if [ -x "$tool" ] && [ ! -d "$tool" ] && [ ! -e "$bin/$name" ]; then ln -s "$tool" "$bin/$name"; fi
    done
done
for tool in cargo rustc cc gcc; do
    if PATH=$bin command -v "$tool" >/dev/null; then fail "$tool is still on the stripped PATH"; fi
done
no_rust() { env -i HOME="$work/home" PATH="$bin" LANG=C.UTF-8 TERM=dumb npm_config_update_notifier=false "$@"; }
mkdir -p "$work/home"

# The CLI archive, into a fresh prefix.
prefix=$work/prefix
mkdir -p "$prefix"
tar -xzf "$archive" -C "$prefix" --strip-components=1
no_rust "$prefix/bin/warden" --version --json > "$work/version.json"
cli_version=$("$python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["version"])' "$work/version.json")
cli_abi=$("$python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["abi_version"])' "$work/version.json")
[ "$cli_version" = "$version" ] || fail "warden --version --json says $cli_version, Cargo.toml $version"
(cd "$work" && no_rust "$prefix/bin/warden" demo > "$work/demo.txt") || fail "warden demo failed: $(cat "$work/demo.txt")"
say "CLI archive: warden $cli_version (ABI $cli_abi), warden demo ran ($(wc -l < "$work/demo.txt") lines)"
completed=$(no_rust bash --norc -c "source '$prefix/share/bash-completion/completions/warden'
    COMP_WORDS=(warden appr); COMP_CWORD=1; COMP_LINE='warden appr'; COMP_POINT=11
    _warden warden appr warden; echo \"\${COMPREPLY[*]}\"")
[ "$completed" = "approve approvers" ] || fail "the installed bash completion completed 'warden appr' to '$completed'"
if command -v man >/dev/null; then
    no_rust man -M "$prefix/share/man" -P cat warden-approve 2>/dev/null | grep -q -- '--by' \
        || fail "man -M $prefix/share/man warden-approve does not show the page"
    say "man warden-approve and the bash completion work from the prefix"
fi

# The README's quickstart files: the documentation and this check run the same code.
readme_file() { # readme_file LANG NAME > file
    awk -v open="\`\`\`$1 file=$2" '$0 == open {inside = 1; next} inside && /^```/ {exit} inside {print}' README.md
}

# Python: the wheel into a fresh venv.
app=$work/python-app
mkdir -p "$app"
readme_file python quickstart.py > "$app/quickstart.py"
[ -s "$app/quickstart.py" ] || fail "README.md has no \`\`\`python file=quickstart.py block"
no_rust python3 -m venv "$app/.venv"
t0=$(date +%s.%N)
no_rust "$app/.venv/bin/pip" install --quiet --no-index --disable-pip-version-check "$wheel"
pip_seconds=$("$python" -c "import time; print(f'{time.time() - $t0:.1f}')")
(cd "$app" && no_rust "$prefix/bin/warden" init >/dev/null && no_rust "$app/.venv/bin/python" quickstart.py > out.txt) \
    || fail "the Python quickstart failed: $(cat "$app/out.txt")"
grep -qx 'provider refunds: 1' "$app/out.txt" || fail "the Python quickstart printed: $(cat "$app/out.txt")"
py_versions=$(cd "$app" && no_rust "$app/.venv/bin/python" -c 'import warden; print(warden.__version__, warden.abi_version())')
[ "$py_versions" = "$version $cli_abi" ] || fail "the wheel reports version and ABI '$py_versions', the CLI '$version $cli_abi'"
say "wheel: pip install ${pip_seconds}s into a fresh venv, quickstart.py ran, warden.__version__ $version, ABI $cli_abi"

# Node: the tarball into a fresh npm project.
app=$work/node-app
mkdir -p "$app"
readme_file js quickstart.js > "$app/quickstart.js"
[ -s "$app/quickstart.js" ] || fail "README.md has no \`\`\`js file=quickstart.js block"
(cd "$app" && no_rust npm init --yes >/dev/null)
t0=$(date +%s.%N)
(cd "$app" && no_rust npm install --no-audit --no-fund --offline --silent "$tgz")
npm_seconds=$("$python" -c "import time; print(f'{time.time() - $t0:.1f}')")
(cd "$app" && no_rust "$prefix/bin/warden" init >/dev/null && no_rust node quickstart.js > out.txt) \
    || fail "the Node quickstart failed: $(cat "$app/out.txt")"
grep -qx 'provider refunds: 1' "$app/out.txt" || fail "the Node quickstart printed: $(cat "$app/out.txt")"
node_versions=$(cd "$app" && no_rust node -e 'const w = require("warden"); console.log(w.version, w.ABI_VERSION)')
[ "$node_versions" = "$version $cli_abi" ] || fail "the npm package reports '$node_versions', the CLI '$version $cli_abi'"
say "npm package: npm install ${npm_seconds}s into a fresh project, quickstart.js ran, version $version, ABI $cli_abi"

# C: compiled once (this step needs the compiler) against the installed header and library,
# through the pkg-config file, dynamically and statically; both run without Rust on PATH.
app=$work/c-app
mkdir -p "$app"
pc=$prefix/lib/pkgconfig
# shellcheck disable=SC2046 # pkg-config prints flags, one word each
cc -std=c11 -Wall -Wextra -Werror -pedantic bindings/c/quickstart.c -o "$app/quickstart" \
    $(PKG_CONFIG_PATH=$pc pkg-config --cflags --libs warden) -Wl,-rpath,"$prefix/lib"
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror -pedantic bindings/c/quickstart.c -o "$app/quickstart-static" \
    $(PKG_CONFIG_PATH=$pc pkg-config --cflags warden) "$prefix/lib/libwarden.a" \
    $(PKG_CONFIG_PATH=$pc pkg-config --libs-only-l --static warden | sed 's/-lwarden//')
(cd "$app" && no_rust "$prefix/bin/warden" init >/dev/null)
for program in quickstart quickstart-static; do
    (cd "$app" && rm -f q.redb && no_rust "./$program" q.redb warden.yaml > "$program.txt") \
        || fail "the C quickstart ($program) failed: $(cat "$app/$program.txt")"
    grep -q '^propose the same refund  *WARDEN_RESULT_DUPLICATE$' "$app/$program.txt" \
        || fail "the C quickstart ($program) printed: $(cat "$app/$program.txt")"
done
say "C: quickstart.c built with pkg-config against the prefix (shared and static), ran without Rust"

size() { du -k "$1" | awk '{printf "%.1f MiB", $1 / 1024}'; }
echo
echo "artifact sizes: wheel $(size "$wheel"), npm tarball $(size "$tgz"), CLI archive $(size "$archive"), sdist $(size "$sdist"), crate $(size "$crate")"
echo "install times: pip install ${pip_seconds}s, npm install ${npm_seconds}s (no cargo, rustc or cc on PATH)"
