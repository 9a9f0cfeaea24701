#!/usr/bin/env bash
# The crate's public API, as `cargo doc --no-deps` shows it, against the committed list in
# docs/public-api.txt: one line per item (`struct Warden`, `fn load_document`, …).
#
#   scripts/public-api.sh            build the docs and compare; exit 1 on a difference
#   scripts/public-api.sh --update   rewrite docs/public-api.txt from the docs just built
#
# The API is what src/lib.rs re-exports; every module is `#[doc(hidden)]` (public only for the
# `warden` binary and the tests). A new public item is a decision to review, so it must appear
# in this list's diff: a module or item that loses its `#[doc(hidden)]`, or a new re-export,
# shows up here and fails the suite until the list is updated with it.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${CARGO_TARGET_DIR:-target}
list=docs/public-api.txt
case "${1:-}" in
    "" | --update) ;;
    -h | --help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "public-api.sh: unknown option $1 (try --help)" >&2; exit 2 ;;
esac
RUSTDOCFLAGS="${RUSTDOCFLAGS:-} -D warnings" cargo doc --quiet --no-deps --lib --locked
all=$target/doc/warden/all.html
[ -f "$all" ] || { echo "public-api.sh: $all was not written by cargo doc" >&2; exit 1; }
current=$(python3 - "$all" <<'PY'
import re, sys
kinds = {"struct": "struct", "enum": "enum", "fn": "fn", "trait": "trait", "type": "type",
         "constant": "const", "static": "static", "macro": "macro", "union": "union",
         "traitalias": "trait alias", "derive": "derive macro", "attr": "attribute macro"}
items = set()
text = open(sys.argv[1], encoding="utf-8").read()
# The item list is the page's `<ul class="all-items">` lists; links elsewhere (the crate's
# index, the sidebar, the settings) are navigation.
lists = re.findall(r'<ul class="all-items">(.*?)</ul>', text, re.S)
if not lists:
    sys.exit("public-api.sh: no item list in all.html (rustdoc's layout changed?)")
for href in re.findall(r'href="([^"]+\.html)"', "".join(lists)):
    parts = href.split("/")
    kind, _, name = parts[-1][: -len(".html")].partition(".")
    if kind not in kinds:
        sys.exit(f"public-api.sh: an item of unknown kind in all.html: {href}")
    items.add(f"{kinds[kind]} {'::'.join(parts[:-1] + [name])}")
print("\n".join(sorted(items)))
PY
)
if [ "${1:-}" = --update ]; then
    printf '%s\n' "$current" > "$list"
    echo "public-api.sh: wrote $(wc -l < "$list") items to $list"
    exit 0
fi
if ! diff -u --label "$list (committed)" --label "cargo doc --no-deps (this checkout)" "$list" <(printf '%s\n' "$current"); then
    echo "public-api.sh: the public API changed (above). If that is meant, run scripts/public-api.sh --update and commit $list." >&2
    exit 1
fi
echo "public-api.sh: the public API is the $(wc -l < "$list") items of $list"
