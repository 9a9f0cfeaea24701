"""The pure-Python verifier of evidence bundles (`warden/evidence.py`) gives the verdict and the
reason of the Rust verifier (`warden verify-bundle`) on the committed corpus and on bundles
changed one thing at a time; its Merkle proofs agree with RFC 9162 written out directly.

The module is loaded from its file path, as a copy of it would be: it needs neither the rest of
the package nor the native library. Where a built `warden` binary is found (`$WARDEN_CLI`, else
`target/debug/warden` or `target/release/warden` under `$CARGO_TARGET_DIR` or the repository),
every changed bundle is also checked with it and the two verdicts compared.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

PACKAGE_DIR = Path(__file__).resolve().parents[1]
REPO = Path(os.environ.get("WARDEN_REPO") or Path(__file__).resolve().parents[3])
CORPUS = REPO / "tests" / "evidence" / "corpus"
HAS_CRYPTOGRAPHY = importlib.util.find_spec("cryptography") is not None

needs_cryptography = pytest.mark.skipif(not HAS_CRYPTOGRAPHY, reason="the cryptography package is not installed")
needs_corpus = pytest.mark.skipif(not (CORPUS / "expected.json").is_file(), reason=f"no corpus at {CORPUS}")


def _load_evidence() -> ModuleType:
    """warden/evidence.py from its file path, under a name of its own (not registered anywhere)."""
    spec = importlib.util.spec_from_file_location("warden_evidence_under_test", PACKAGE_DIR / "warden" / "evidence.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


evidence = _load_evidence()


def _trusted() -> str:
    return (CORPUS / "trusted.vkey").read_text(encoding="utf-8").strip()


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


# ---- the Rust verifier, when built ---------------------------------------------------------------

VERDICT_FIELDS = (
    "ok",
    "reason",
    "receipts",
    "checkpoints",
    "keys_pinned",
    "open_at_end",
    "closed_without_receipt",
    "anchors",
    "anchors_checked",
    "policies_carried",
    "policies_missing",
)


@functools.lru_cache(maxsize=1)
def _rust_cli() -> Path | None:
    """The newest built `warden` binary that has `verify-bundle`, if any."""
    target = Path(os.environ.get("CARGO_TARGET_DIR") or REPO / "target")
    candidates = [Path(os.environ["WARDEN_CLI"])] if os.environ.get("WARDEN_CLI") else []
    candidates += [target / "debug" / "warden", target / "release" / "warden"]
    built = [path for path in candidates if path.is_file() and os.access(path, os.X_OK)]
    for path in sorted(built, key=lambda path: path.stat().st_mtime, reverse=True):
        probe = subprocess.run([str(path), "verify-bundle", "--help"], capture_output=True, text=True)
        if probe.returncode == 0:
            return path
    return None


def _rust_verdict(bundle: Path, keys: list[str]) -> dict[str, Any] | None:
    cli = _rust_cli()
    if cli is None:
        return None
    args = [str(cli), "verify-bundle", str(bundle), "--json"]
    for key in keys:
        args += ["--key", key]
    done = subprocess.run(args, capture_output=True, text=True)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    verdict: dict[str, Any] = json.loads(done.stdout)
    return verdict


def _assert_same_as_rust(bundle: Path, keys: list[str], verdict: dict[str, Any]) -> None:
    rust = _rust_verdict(bundle, keys)
    if rust is None:
        return
    ours = {name: verdict[name] for name in VERDICT_FIELDS}
    theirs = {name: rust[name] for name in VERDICT_FIELDS}
    assert ours == theirs, f"python {verdict['detail']!r}; rust {rust['detail']!r}"


# ---- the committed corpus ------------------------------------------------------------------------


def _corpus_cases() -> list[tuple[str, str | None]]:
    if not (CORPUS / "expected.json").is_file():
        return []
    expected = json.loads((CORPUS / "expected.json").read_text(encoding="utf-8"))
    return [(name, want["reason"]) for name, want in sorted(expected.items())]


@needs_corpus
@needs_cryptography
@pytest.mark.parametrize(("name", "reason"), _corpus_cases())
def test_every_corpus_bundle_gets_the_verdict_it_expects(name: str, reason: str | None) -> None:
    verdict = evidence.verify_bundle(CORPUS / name, keys=[_trusted()])
    assert verdict["reason"] == reason, verdict
    assert verdict["ok"] == (reason is None)
    assert verdict["keys_pinned"] is True
    assert reason is None or reason in evidence.REASONS
    _assert_same_as_rust(CORPUS / name, [_trusted()], verdict)


@needs_corpus
@needs_cryptography
def test_the_sound_bundle_counts_what_it_proved() -> None:
    verdict = evidence.verify_bundle(CORPUS / "sound", keys=[_trusted()])
    counts = {name: verdict[name] for name in ("receipts", "checkpoints", "open_at_end", "closed_without_receipt")}
    assert counts == {"receipts": 28, "checkpoints": 3, "open_at_end": 1, "closed_without_receipt": 1}
    assert sorted(verdict) == sorted(["detail", *VERDICT_FIELDS])
    # The policy the last receipts ran under is carried; the fixture's bare hash was never kept.
    carried = _carried_policy(CORPUS / "sound")
    assert verdict["policies_carried"] == ["sha256:" + hashlib.sha256(carried.read_bytes()).hexdigest()]
    assert verdict["policies_missing"] == ["sha256:test"]
    from_checkpoint = evidence.verify_bundle(CORPUS / "from_checkpoint_1", keys=[_trusted()])
    assert from_checkpoint["receipts"] == 8
    assert (from_checkpoint["policies_carried"], from_checkpoint["policies_missing"]) == (
        verdict["policies_carried"],
        ["sha256:test"],
    )
    refused = evidence.verify_bundle(CORPUS / "edited_policy", keys=[_trusted()])
    assert (refused["reason"], refused["policies_carried"], refused["policies_missing"]) == ("policy_altered", [], [])


@needs_corpus
@needs_cryptography
def test_a_swapped_key_goes_unseen_unless_the_key_is_pinned_or_the_notes_were_anchored(tmp_path: Path) -> None:
    # The file anchor kept the notes as first signed: re-signed ones no longer match.
    anchored = evidence.verify_bundle(CORPUS / "swapped_key")
    assert anchored["reason"] == "anchor_invalid" and anchored["keys_pinned"] is False
    _assert_same_as_rust(CORPUS / "swapped_key", [], anchored)
    bundle = tmp_path / "unanchored"
    shutil.copytree(CORPUS / "swapped_key", bundle)
    (bundle / "anchors.jsonl").unlink()
    unpinned = evidence.verify_bundle(bundle)
    assert unpinned["ok"] and unpinned["keys_pinned"] is False
    assert evidence.verify_bundle(bundle, keys=[])["ok"]
    _assert_same_as_rust(bundle, [], unpinned)
    pinned = evidence.verify_bundle(CORPUS / "swapped_key", keys=[str(CORPUS / "trusted.vkey")])
    assert pinned["reason"] == "key_untrusted" and pinned["keys_pinned"] is True


# ---- signed notes: Go's sumdb/note example -------------------------------------------------------

VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
TEXT = "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n"
SIGNED = (
    TEXT
    + "\n\u2014 PeterNeumann "
    + "x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n"
)


def test_a_verifier_key_reads_back_what_it_encodes() -> None:
    key = evidence.NoteVerifier.parse(f"  {VKEY}\n")
    assert (key.name, key.id, key.encoded()) == ("PeterNeumann", 0xC74F20A3, VKEY)
    assert evidence.key_id(key.name, b"\x01" + key.key) == key.id
    assert evidence.NoteVerifier.parse(VKEY.replace("c74f20a3", "C74F20A3")) == key


@pytest.mark.parametrize(
    "bad",
    [
        "PeterNeumann+c74f20a4+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",  # wrong id
        "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10T",  # not base64
        "Peter Neumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",  # a space
        "PeterNeumann+c74f20a3+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",  # not Ed25519
        "PeterNeumann+0xc74f20+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",  # not 8 hex digits
        "PeterNeumann+c74f20a3",
        "",
    ],
)
def test_a_mangled_verifier_key_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="not a signed-note Ed25519 verifier key"):
        evidence.NoteVerifier.parse(bad)


@needs_cryptography
def test_the_reference_note_verifies_and_an_altered_one_does_not() -> None:
    key = evidence.NoteVerifier.parse(VKEY)
    assert evidence.open_note(SIGNED.encode("utf-8"), [key]) == TEXT
    with pytest.raises(evidence.NoteRefusal) as refused:
        evidence.open_note(SIGNED.replace("answer", "Answer").encode("utf-8"), [key])
    assert (refused.value.kind, refused.value.key) == ("bad_signature", "PeterNeumann+c74f20a3")
    with pytest.raises(evidence.NoteRefusal) as untrusted:
        evidence.open_note(SIGNED.encode("utf-8"), [evidence.NoteVerifier.parse(_other_key())])
    assert (untrusted.value.kind, untrusted.value.seen) == ("untrusted", ["PeterNeumann+c74f20a3"])
    for malformed in (TEXT, SIGNED.replace("\u2014", "-"), SIGNED + "\n", SIGNED.replace("\n", "\r\n")):
        with pytest.raises(evidence.NoteRefusal) as refusal:
            evidence.open_note(malformed.encode("utf-8"), [key])
        assert refusal.value.kind == "malformed"


def _other_key() -> str:
    """A verifier key named PeterNeumann that is not the example's."""
    signer = _Signer("PeterNeumann", b"\x05" * 32)
    return signer.vkey


# ---- checkpoint texts and times ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("2025-11-24T16:00:20.000Z", True),
        ("2024-02-29T23:59:59.999Z", True),
        ("0000-02-29T00:00:00.000Z", True),
        ("2025-02-29T00:00:00.000Z", False),
        ("2025-04-31T00:00:00.000Z", False),
        ("2025-11-24T24:00:00.000Z", False),
        ("2016-12-31T23:59:60.000Z", False),
        ("2025-11-24T16:00:20Z", False),
        ("2025-11-24T16:00:20.0000Z", False),
        ("2025-11-24t16:00:20.000Z", False),
        ("2025-11-24T16:00:20.000+00:00", False),
        ("+2025-11-24T16:00:20.000Z", False),
    ],
)
def test_a_time_is_read_only_as_warden_writes_it(text: str, ok: bool) -> None:
    assert evidence.is_time(text) is ok


def test_a_checkpoint_text_reads_back_and_misstatements_are_refused() -> None:
    root, companion = _b64(bytes([9]) * 32), _b64(bytes([7]) * 32)
    text = f"warden/test\n7\n{root}\nwarden-time 2023-11-14T22:13:20.123Z\nwarden-open 1 {companion}\n"
    body = evidence.parse_checkpoint(text)
    assert (body.origin, body.size, body.root, body.time, body.open) == (
        "warden/test",
        7,
        bytes([9]) * 32,
        "2023-11-14T22:13:20.123Z",
        1,
    )
    for bad, says in [
        (text.rstrip("\n"), "newline"),
        ("warden/test\n7\n", "5 lines"),
        (text.replace("\n7\n", "\n07\n"), "decimal"),
        (text.replace("warden/test", "warden test"), "origin"),
        (text.replace("warden-time", "warden-when"), "fourth line"),
        (text.replace("warden-open 1", "warden-open x"), "fifth line"),
        (text.replace(root, root.rstrip("=")), "root"),
    ]:
        with pytest.raises(ValueError, match=says):
            evidence.parse_checkpoint(bad)


# ---- the Merkle tree against RFC 9162 written out ------------------------------------------------

LEAVES: list[bytes] = [evidence.leaf_hash(f'{{"seq":{i + 1}}}'.encode()) for i in range(70)]


@functools.lru_cache(maxsize=None)
def _mth(lo: int, hi: int) -> bytes:
    """RFC 9162 §2.1.1 MTH of LEAVES[lo:hi], as the RFC defines it."""
    if hi - lo == 0:
        return hashlib.sha256(b"").digest()
    if hi - lo == 1:
        return LEAVES[lo]
    k = _split(hi - lo)
    return hashlib.sha256(b"\x01" + _mth(lo, lo + k) + _mth(lo + k, hi)).digest()


def _split(n: int) -> int:
    """The largest power of two smaller than n."""
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def _path(m: int, lo: int, hi: int) -> list[bytes]:
    """RFC 9162 §2.1.3.1 PATH(m, D[lo:hi])."""
    if hi - lo == 1:
        return []
    k = _split(hi - lo)
    if m < k:
        return _path(m, lo, lo + k) + [_mth(lo + k, hi)]
    return _path(m - k, lo + k, hi) + [_mth(lo, lo + k)]


def _subproof(m: int, lo: int, hi: int, complete: bool) -> list[bytes]:
    """RFC 9162 §2.1.4.1 SUBPROOF(m, D[lo:hi], b)."""
    if m == hi - lo:
        return [] if complete else [_mth(lo, hi)]
    k = _split(hi - lo)
    if m <= k:
        return _subproof(m, lo, lo + k, complete) + [_mth(lo + k, hi)]
    return _subproof(m - k, lo + k, hi, False) + [_mth(lo, lo + k)]


def _frontier(size: int) -> list[bytes]:
    out, first = [], 0
    for level in range(63, -1, -1):
        if size >> level & 1:
            out.append(_mth(first, first + (1 << level)))
            first += 1 << level
    return out


def _flip(proof: list[bytes], at: int) -> list[bytes]:
    changed = list(proof)
    changed[at] = bytes([changed[at][0] ^ 1]) + changed[at][1:]
    return changed


def test_the_hashes_are_domain_separated() -> None:
    assert evidence.leaf_hash(b"x") == hashlib.sha256(b"\x00x").digest()
    assert evidence.node_hash(b"a" * 32, b"b" * 32) == hashlib.sha256(b"\x01" + b"a" * 32 + b"b" * 32).digest()
    assert evidence.Frontier().root() == hashlib.sha256(b"").digest()


@pytest.mark.parametrize("size", range(1, 71))
def test_roots_and_audit_paths_agree_with_the_rfc(size: int) -> None:
    root = _mth(0, size)
    frontier = evidence.Frontier()
    for leaf in LEAVES[:size]:
        frontier.push(leaf)
    assert frontier.root() == root
    resumed = evidence.Frontier.resume(size, _frontier(size))
    assert resumed is not None and resumed.root() == root
    assert evidence.Frontier.resume(size, [*_frontier(size), root]) is None
    for index in range(size):
        path = _path(index, 0, size)
        assert evidence.check_inclusion(path, size, root, index, LEAVES[index])
        assert not evidence.check_inclusion(path, size, root, index, evidence.leaf_hash(b"other"))
        assert not evidence.check_inclusion(path, size, evidence.leaf_hash(b"not the root"), index, LEAVES[index])
        assert not evidence.check_inclusion(path, size, root, size, LEAVES[index])
        assert not evidence.check_inclusion(path + [root], size, root, index, LEAVES[index])
        if size > 1:
            assert not evidence.check_inclusion(path, size, root, (index + 1) % size, LEAVES[index])
            assert not evidence.check_inclusion(path[:-1], size, root, index, LEAVES[index])
            for at in range(len(path)):
                assert not evidence.check_inclusion(_flip(path, at), size, root, index, LEAVES[index])


@pytest.mark.parametrize("size", range(1, 71))
def test_consistency_proofs_agree_with_the_rfc(size: int) -> None:
    root = _mth(0, size)
    assert evidence.check_consistency([], size, root, size, root)
    assert not evidence.check_consistency([root], size, root, size, root)
    assert not evidence.check_consistency([], 0, _mth(0, 0), size, root)
    for old in range(1, size):
        proof = _subproof(old, 0, size, True)
        old_root = _mth(0, old)
        assert evidence.check_consistency(proof, old, old_root, size, root), (old, size)
        assert not evidence.check_consistency(proof, old, evidence.leaf_hash(b"forked"), size, root)
        assert not evidence.check_consistency(proof, old, old_root, size, evidence.leaf_hash(b"forked"))
        assert not evidence.check_consistency(proof, size, root, old, old_root)
        assert not evidence.check_consistency(proof + [root], old, old_root, size, root)
        assert not evidence.check_consistency(proof[:-1], old, old_root, size, root)
        for at in range(len(proof)):
            assert not evidence.check_consistency(_flip(proof, at), old, old_root, size, root)


# ---- bundles changed one thing at a time ---------------------------------------------------------


class _Signer:
    """An Ed25519 signer key for test bundles (never a real one)."""

    def __init__(self, name: str, seed: bytes) -> None:
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
        from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

        self.name = name
        self.private = Ed25519PrivateKey.from_private_bytes(seed)
        encoded = b"\x01" + self.private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        self.id = int.from_bytes(hashlib.sha256(name.encode() + b"\n" + encoded).digest()[:4], "big")
        self.vkey = f"{name}+{self.id:08x}+{_b64(encoded)}"

    def sign(self, text: str) -> str:
        signature = self.id.to_bytes(4, "big") + self.private.sign(text.encode("utf-8"))
        return f"{text}\n\u2014 {self.name} {_b64(signature)}\n"


def _signer() -> _Signer:
    return _Signer("warden.test/corpus", b"\x07" * 32)


def _manifest(bundle: Path) -> dict[str, Any]:
    manifest: dict[str, Any] = json.loads((bundle / "bundle.json").read_text(encoding="utf-8"))
    return manifest


def _note_text(bundle: Path, number: int) -> str:
    note = (bundle / f"checkpoints/{number:06d}.note").read_text(encoding="utf-8")
    return note[: note.rindex("\n\n") + 1]


def _resign(bundle: Path, number: int, edit: Callable[[str], str] = lambda text: text) -> None:
    """Sign checkpoint `number` again with the test key, its text edited and bound to its
    companion document as the file now holds it."""
    lines = _note_text(bundle, number).split("\n")
    companion = (bundle / f"checkpoints/{number:06d}.json").read_bytes()
    count = lines[4].split(" ")[1]
    lines[4] = f"warden-open {count} {_b64(hashlib.sha256(companion).digest())}"
    (bundle / f"checkpoints/{number:06d}.note").write_text(_signer().sign(edit("\n".join(lines))), encoding="utf-8")


def _receipt_lines(bundle: Path) -> list[bytes]:
    return (bundle / "receipts.jsonl").read_bytes().split(b"\n")[:-1]


def _reforge(bundle: Path) -> None:
    """Make every root, proof and signature of a bundle (from the first receipt) fit its receipts
    as they now are, signed with the test key: what a signer who lies would do."""
    leaves: list[bytes] = [evidence.leaf_hash(line) for line in _receipt_lines(bundle)]
    checkpoints = _manifest(bundle)["checkpoints"]
    sizes = {}
    for number in checkpoints:
        size = int(_note_text(bundle, number).split("\n")[1])
        sizes[number] = size
        root = _b64(_root_of(leaves[:size]))

        def set_root(text: str, root: str = root) -> str:
            lines = text.split("\n")
            lines[2] = root
            return "\n".join(lines)

        _resign(bundle, number, set_root)
    for old, new in zip(checkpoints, checkpoints[1:]):
        proof_file = bundle / f"proofs/consistency-{old:06d}-{new:06d}.json"
        proof = json.loads(proof_file.read_text(encoding="utf-8"))
        proof["proof"] = [_b64(h) for h in _consistency(leaves, sizes[old], sizes[new])]
        proof_file.write_text(json.dumps(proof, indent=2) + "\n", encoding="utf-8")


def _root_of(leaves: list[bytes]) -> bytes:
    tree = evidence.Frontier()
    for leaf in leaves:
        tree.push(leaf)
    return bytes(tree.root())


def _consistency(leaves: list[bytes], old: int, new: int) -> list[bytes]:
    """The consistency proof from `old` to `new` leaves (RFC 9162 §2.1.4.1)."""

    def subproof(m: int, part: list[bytes], complete: bool) -> list[bytes]:
        if m == len(part):
            return [] if complete else [_root_of(part)]
        k = _split(len(part))
        if m <= k:
            return subproof(m, part[:k], complete) + [_root_of(part[k:])]
        return subproof(m - k, part[k:], False) + [_root_of(part[:k])]

    return [] if old in (0, new) else subproof(old, leaves[:new], True)


def _carried_policy(bundle: Path) -> Path:
    """The one policy file the corpus's bundles carry."""
    manifest = _manifest(bundle)
    (carried,) = [policy for policy in manifest["policies"] if policy not in manifest["policies_missing"]]
    name = evidence.policy_file(carried)
    assert name is not None
    return bundle / name


def _mangle_key_file(bundle: Path) -> None:
    """The bundle's key file with its key's algorithm byte changed."""
    path = bundle / _manifest(bundle)["keys"][0]
    name, id_, key = path.read_text(encoding="utf-8").split("+", 2)
    assert key.startswith("A"), key
    path.write_text(f"{name}+{id_}+Z{key[1:]}", encoding="utf-8")


def _ours(bundle: Path, keep_anchors: bool = False) -> None:
    """Every checkpoint signed again with the test key, which the bundle's key file names; the
    anchors of the old notes go too (they would show the notes re-signed), unless kept."""
    for number in _manifest(bundle)["checkpoints"]:
        _resign(bundle, number)
    for key_file in (bundle / "keys").iterdir():
        key_file.write_text(_signer().vkey + "\n", encoding="utf-8")
    if not keep_anchors:
        (bundle / "anchors.jsonl").unlink()


def _edit_json(path: Path, change: Callable[[Any], Any]) -> None:
    """Rewrite a JSON file after `change` edited its value in place."""
    value = json.loads(path.read_text(encoding="utf-8"))
    change(value)
    path.write_text(json.dumps(value, indent=2) + "\n", encoding="utf-8")


def _edit_text(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{old!r} is not in {path}"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def _flip_signature(path: Path) -> None:
    """Change one base64 character of the signature itself (after the key id)."""
    note = path.read_text(encoding="utf-8")
    head, _, signature = note.rpartition(" ")
    at = 20
    flipped = signature[:at] + ("B" if signature[at] != "B" else "C") + signature[at + 1 :]
    path.write_text(f"{head} {flipped}", encoding="utf-8")


def _set_receipt(bundle: Path, index: int, line: bytes) -> None:
    lines = _receipt_lines(bundle)
    lines[index] = line
    (bundle / "receipts.jsonl").write_bytes(b"".join(each + b"\n" for each in lines))


def _spend_an_approval(bundle: Path) -> None:
    lines = _receipt_lines(bundle)
    last = json.loads(lines[-1])
    last.update(approval_id="apr_1", approver="ada")
    _set_receipt(bundle, len(lines) - 1, json.dumps(last, separators=(",", ":")).encode())


def _last_receipt_rewritten(text: Callable[[dict[str, Any]], str]) -> Callable[[Path], None]:
    def change(bundle: Path) -> None:
        lines = _receipt_lines(bundle)
        _set_receipt(bundle, len(lines) - 1, text(json.loads(lines[-1])).encode("utf-8"))
        _ours(bundle)
        _reforge(bundle)

    return change


def _companion_resigned(change: Callable[[dict[str, Any]], Any], count: int | None = None) -> Callable[[Path], None]:
    def edit(bundle: Path) -> None:
        _ours(bundle)
        _edit_json(bundle / "checkpoints/000002.json", change)
        if count is None:
            _resign(bundle, 2)
        else:
            _resign(bundle, 2, lambda text: text.replace("warden-open 1 ", f"warden-open {count} "))

    return edit


def _small_order_key(bundle: Path) -> None:
    """The bundle's key is the identity point, and every note is "signed" with R = identity and
    s = 0, which the plain Ed25519 equation accepts for any message; strict verification does not."""
    encoded = b"\x01\x01" + bytes(31)
    name = "warden.test/corpus"
    id_ = int.from_bytes(hashlib.sha256(name.encode() + b"\n" + encoded).digest()[:4], "big")
    for key_file in (bundle / "keys").iterdir():
        key_file.write_text(f"{name}+{id_:08x}+{_b64(encoded)}\n", encoding="utf-8")
    signature = id_.to_bytes(4, "big") + b"\x01" + bytes(63)
    for number in _manifest(bundle)["checkpoints"]:
        note = bundle / f"checkpoints/{number:06d}.note"
        note.write_text(f"{_note_text(bundle, number)}\n\u2014 {name} {_b64(signature)}\n", encoding="utf-8")


Change = Callable[[Path], None]


def _impossible_date(bundle: Path) -> None:
    _ours(bundle)
    _resign(bundle, 2, lambda text: text.replace("2025-11-24T", "2025-02-30T"))


def _receipt(line: bytes) -> Change:
    return lambda bundle: _set_receipt(bundle, 3, line)


def _manifest_edit(old: str, new: str) -> Change:
    return lambda bundle: _edit_text(bundle / "bundle.json", old, new)


def _json_edit(name: str, change: Callable[[Any], Any]) -> Change:
    return lambda bundle: _edit_json(bundle / name, change)


def _remove(name: str) -> Change:
    return lambda bundle: (bundle / name).unlink()


def _write(name: str, data: bytes | Callable[[bytes], bytes]) -> Change:
    """Write `data` (or what it makes of the file's bytes) to a bundle file."""

    def change(bundle: Path) -> None:
        path = bundle / name
        path.write_bytes(data(path.read_bytes()) if callable(data) else data)

    return change


def _anchor_edit(kind: str, change: Callable[[dict[str, Any]], Any], raw: Callable[[str], str] | None = None) -> Change:
    """Edit the first line of `anchors.jsonl` whose kind is `kind` (then, with `raw`, its text)."""

    def edit(bundle: Path) -> None:
        path = bundle / "anchors.jsonl"
        lines = path.read_text(encoding="utf-8").splitlines()
        at = next(i for i, line in enumerate(lines) if json.loads(line)["kind"] == kind)
        value = json.loads(lines[at])
        change(value)
        lines[at] = json.dumps(value)
        if raw is not None:
            lines[at] = raw(lines[at])
        path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")

    return edit


def _receipt_text(edit: Callable[[bytes], bytes]) -> Callable[[dict[str, Any]], None]:
    """An anchor line's change: its receipt's bytes edited."""

    def change(line: dict[str, Any]) -> None:
        line["receipt"] = _b64(edit(base64.b64decode(line["receipt"])))

    return change


def _start_after(size: int, checkpoints: list[int]) -> Change:
    """The bundle starts after receipt `size` (start.json: the tree's frontier there) and holds the
    checkpoints listed."""

    def change(bundle: Path) -> None:
        lines = _receipt_lines(bundle)
        tree = evidence.Frontier()
        for line in lines[:size]:
            tree.push(evidence.leaf_hash(line))
        start = {
            "size": size,
            "last_hash": "sha256:" + hashlib.sha256(lines[size - 1]).hexdigest(),
            "frontier": [_b64(subtree) for _, subtree in tree.stack],
        }
        (bundle / "start.json").write_text(json.dumps(start, indent=2) + "\n", encoding="utf-8")
        (bundle / "receipts.jsonl").write_bytes(b"".join(line + b"\n" for line in lines[size:]))
        # As `warden export` writes them: the anchors of the checkpoints it holds.
        anchors = (bundle / "anchors.jsonl").read_text(encoding="utf-8").splitlines()
        held = [line for line in anchors if json.loads(line)["checkpoint"] in checkpoints]
        (bundle / "anchors.jsonl").write_text("".join(line + "\n" for line in held), encoding="utf-8")
        # As `warden export` lists them: the policies the receipts it holds name.
        named = sorted({json.loads(line)["policy_hash"] for line in lines[size:]})

        def manifest(m: dict[str, Any]) -> None:
            missing = [policy for policy in m["policies_missing"] if policy in named]
            m.update(start_size=size, checkpoints=checkpoints, policies=named, policies_missing=missing)

        _edit_json(bundle / "bundle.json", manifest)

    return change


# Which keys a case pins: the corpus's trusted key, the test key, or none (the bundle's own).
CORPUS_KEY, TEST_KEY, NO_KEY = "corpus", "test", "none"

#: (name, the bundle it starts from, what changes, the keys pinned, the reason).
CASES: list[tuple[str, str, Change, str, str | None]] = [
    ("manifest_missing_origin", "sound",
        _json_edit("bundle.json", lambda m: m.pop("origin")), CORPUS_KEY, "bundle_malformed"),
    ("manifest_wrong_format", "sound",
        _json_edit("bundle.json", lambda m: m.update(format="warden.bundle/v2")), CORPUS_KEY, "bundle_malformed"),
    ("manifest_negative_zero", "sound",
        _manifest_edit('"start_size": 0', '"start_size": -0'), CORPUS_KEY, "bundle_malformed"),
    ("manifest_duplicate_field", "sound", _manifest_edit("{", '{"start_size": 0,'), CORPUS_KEY, "bundle_malformed"),
    ("manifest_unknown_field", "sound", _manifest_edit("{", '{"note": ["\\ud800", [[[]]]],'), CORPUS_KEY, None),
    ("manifest_not_json", "sound", _write("bundle.json", b"{"), CORPUS_KEY, "bundle_malformed"),
    ("manifest_out_of_order", "sound",
        _json_edit("bundle.json", lambda m: m.update(checkpoints=[2, 1, 3])), CORPUS_KEY, "bundle_malformed"),
    ("key_file_mangled", "sound", _mangle_key_file, NO_KEY, "bundle_malformed"),
    ("signature_flipped", "sound",
        lambda b: _flip_signature(b / "checkpoints/000002.note"), CORPUS_KEY, "signature_invalid"),
    ("signature_without_dash", "sound",
        lambda b: _edit_text(b / "checkpoints/000002.note", "\u2014 ", "- "), CORPUS_KEY, "bundle_malformed"),
    ("note_with_crlf", "sound",
        lambda b: _edit_text(b / "checkpoints/000001.note", "\n\n", "\r\n\n"), CORPUS_KEY, "bundle_malformed"),
    ("companion_edited", "sound",
        lambda b: _edit_text(b / "checkpoints/000002.json", "executing", "reserved"), CORPUS_KEY, "checkpoint_altered"),
    ("proof_edited", "sound",
        _json_edit("proofs/consistency-000001-000002.json", lambda p: p["proof"].reverse()),
        CORPUS_KEY, "proof_invalid"),
    ("proof_not_base64", "sound",
        _json_edit("proofs/consistency-000001-000002.json", lambda p: p["proof"].append("AAA")),
        CORPUS_KEY, "bundle_malformed"),
    ("receipt_not_json", "sound", _receipt(b'{"seq": 4,'), CORPUS_KEY, "receipt_malformed"),
    ("receipt_lone_surrogate", "sound", _receipt(b'{"seq":4,"x":"\\ud800"}'), CORPUS_KEY, "receipt_malformed"),
    ("receipt_nested_128_deep", "sound",
        _receipt(b'{"seq":4,"x":' + b"[" * 127 + b"]" * 127 + b"}"), CORPUS_KEY, "receipt_malformed"),
    ("receipt_seq_as_float", "sound", _receipt(b'{"seq":4.0}'), CORPUS_KEY, "receipt_malformed"),
    ("receipt_without_newline", "sound",
        _write("receipts.jsonl", lambda data: data[:-1]), CORPUS_KEY, "receipt_malformed"),
    ("approval_missing", "sound", _spend_an_approval, CORPUS_KEY, "bundle_malformed"),
    ("approvals_file_missing", "sound", _remove("approvals.jsonl"), CORPUS_KEY, "bundle_malformed"),
    ("receipts_file_missing", "sound", _remove("receipts.jsonl"), CORPUS_KEY, "bundle_malformed"),
    ("start_frontier_reversed", "from_checkpoint_1",
        _json_edit("start.json", lambda s: s["frontier"].reverse()), CORPUS_KEY, "root_mismatch"),
    ("start_size_wrong", "from_checkpoint_1",
        _json_edit("start.json", lambda s: s.update(size=21)), CORPUS_KEY, "bundle_malformed"),
    ("start_last_hash_wrong", "from_checkpoint_1",
        _json_edit("start.json", lambda s: s.update(last_hash=evidence.GENESIS_HASH)), CORPUS_KEY, "receipt_altered"),
    ("start_after_a_checkpoint", "sound", _start_after(25, [1, 2, 3]), CORPUS_KEY, "bundle_malformed"),
    ("start_at_the_last_checkpoint", "sound", _start_after(28, [3]), CORPUS_KEY, None),
    ("resigned", "sound", _ours, TEST_KEY, None),
    ("resigned_not_pinned", "sound", _ours, CORPUS_KEY, "key_untrusted"),
    ("resigned_keeping_its_anchors", "sound", lambda b: _ours(b, keep_anchors=True), TEST_KEY, "anchor_invalid"),
    ("companion_resigned_without_an_open_effect", "sound",
        _companion_resigned(lambda c: c.update(open=[]), count=0), TEST_KEY, "outcome_missing"),
    ("companion_resigned_with_an_unknown_field", "sound",
        _companion_resigned(lambda c: c.update(extra=1)), TEST_KEY, "checkpoint_altered"),
    ("companion_resigned_count_disagrees", "sound",
        _companion_resigned(lambda c: c["open"].append(c["open"][0])), TEST_KEY, "checkpoint_altered"),
    ("checkpoint_resigned_impossible_date", "sound", _impossible_date, TEST_KEY, "checkpoint_altered"),
    ("receipt_forged_crlf", "sound", _last_receipt_rewritten(lambda r: json.dumps(r) + "\r"), TEST_KEY, None),
    ("receipt_forged_later_finish", "sound",
        _last_receipt_rewritten(lambda r: json.dumps({**r, "finished_at": "2099-01-01T00:00:00.000Z"})),
        TEST_KEY, "checkpoint_backdated"),
    ("receipt_forged_private_number_seq", "sound",
        _last_receipt_rewritten(lambda r: json.dumps({**r, "seq": {"$serde_json::private::Number": "28"}})),
        TEST_KEY, None),
    ("small_order_key", "sound", _small_order_key, NO_KEY, "signature_invalid"),
    ("policy_file_missing", "sound", lambda b: _carried_policy(b).unlink(), CORPUS_KEY, "bundle_malformed"),
    ("policy_file_with_a_newline", "sound",
        lambda b: _carried_policy(b).write_bytes(_carried_policy(b).read_bytes() + b"\n"), CORPUS_KEY, "policy_altered"),
    ("policy_file_emptied", "sound", lambda b: _carried_policy(b).write_bytes(b""), CORPUS_KEY, "policy_altered"),
    ("policy_missing_claimed_carried", "sound",
        _json_edit("bundle.json", lambda m: m.update(policies_missing=[])), CORPUS_KEY, "bundle_malformed"),
    ("policy_carried_claimed_missing", "sound",
        _json_edit("bundle.json", lambda m: m.update(policies_missing=list(m["policies"]))), CORPUS_KEY, None),
    ("policy_missing_not_among_the_policies", "sound",
        _json_edit("bundle.json", lambda m: m["policies_missing"].append("sha256:other")), CORPUS_KEY, "bundle_malformed"),
    ("policy_missing_twice", "sound",
        _json_edit("bundle.json", lambda m: m["policies_missing"].append("sha256:test")), CORPUS_KEY, "bundle_malformed"),
    ("policy_listed_twice", "sound",
        _json_edit("bundle.json", lambda m: m["policies"].append(m["policies"][0])), CORPUS_KEY, "bundle_malformed"),
    ("policy_named_not_listed", "sound",
        _json_edit("bundle.json", lambda m: m.update(policies=["sha256:test"])), CORPUS_KEY, "bundle_malformed"),
    ("policy_listed_not_named", "sound",
        _json_edit("bundle.json", lambda m: m["policies"].append("sha256:unnamed")), CORPUS_KEY, "bundle_malformed"),
    ("manifest_without_policies_missing", "sound",
        _json_edit("bundle.json", lambda m: m.pop("policies_missing")), CORPUS_KEY, "bundle_malformed"),
    ("anchors_file_missing", "sound", _remove("anchors.jsonl"), CORPUS_KEY, None),
    ("anchors_file_not_json", "sound", _write("anchors.jsonl", b"{\n"), CORPUS_KEY, "bundle_malformed"),
    ("anchors_file_empty_line", "sound", _write("anchors.jsonl", lambda data: data + b"\n"), CORPUS_KEY, "bundle_malformed"),
    ("anchor_unknown_field", "sound", _anchor_edit("file", lambda a: a.update(extra=1)), CORPUS_KEY, "bundle_malformed"),
    ("anchor_without_its_sink", "sound", _anchor_edit("file", lambda a: a.pop("sink")), CORPUS_KEY, "bundle_malformed"),
    ("anchor_checkpoint_as_float", "sound",
        _anchor_edit("file", lambda a: None, lambda t: t.replace('"checkpoint": 1,', '"checkpoint": 1.0,')),
        CORPUS_KEY, "bundle_malformed"),
    ("anchor_for_a_checkpoint_not_held", "sound",
        _anchor_edit("file", lambda a: a.update(checkpoint=9)), CORPUS_KEY, "bundle_malformed"),
    ("anchor_receipt_not_base64", "sound",
        _anchor_edit("cosignature", lambda a: a.update(receipt="AAA")), CORPUS_KEY, "bundle_malformed"),
    ("anchor_receipt_noncanonical_base64", "sound",
        _anchor_edit("cosignature", lambda a: a.update(receipt="AB==")), CORPUS_KEY, "bundle_malformed"),
    ("anchor_file_without_its_receipt", "sound",
        _anchor_edit("file", lambda a: a.update(receipt=None)), CORPUS_KEY, "bundle_malformed"),
    ("anchor_file_line_edited", "sound",
        _anchor_edit("file", _receipt_text(lambda r: r.replace(b'"size":20', b'"size":21'))), CORPUS_KEY, "anchor_invalid"),
    ("anchor_file_line_with_its_newline", "sound",
        _anchor_edit("file", _receipt_text(lambda r: r + b"\n")), CORPUS_KEY, "anchor_invalid"),
    ("anchor_file_line_of_another_checkpoint", "sound",
        _anchor_edit("file", lambda a: a.update(checkpoint=2)), CORPUS_KEY, "anchor_invalid"),
    ("anchor_witness_edited", "sound",
        _anchor_edit("cosignature", _receipt_text(lambda r: r + b"!")), CORPUS_KEY, None),
    ("anchor_without_a_kind", "sound", _anchor_edit("file", lambda a: a.pop("kind")), CORPUS_KEY, None),
    ("policy_named_by_a_forged_receipt", "sound",
        _last_receipt_rewritten(lambda r: json.dumps({**r, "policy_hash": "sha256:forged"})),
        TEST_KEY, "bundle_malformed"),
]


@needs_corpus
@needs_cryptography
@pytest.mark.parametrize(("name", "start", "change", "pin", "reason"), CASES, ids=[case[0] for case in CASES])
def test_a_changed_bundle_gets_the_rust_verifiers_reason(
    tmp_path: Path, name: str, start: str, change: Change, pin: str, reason: str | None
) -> None:
    bundle = tmp_path / name
    shutil.copytree(CORPUS / start, bundle)
    change(bundle)
    keys = {CORPUS_KEY: [_trusted()], TEST_KEY: [_signer().vkey], NO_KEY: []}[pin]
    verdict = evidence.verify_bundle(bundle, keys=keys)
    assert (verdict["ok"], verdict["reason"]) == (reason is None, reason), verdict["detail"]
    assert verdict["keys_pinned"] is bool(keys)
    _assert_same_as_rust(bundle, keys, verdict)


# ---- the command line and the module's independence ----------------------------------------------


@needs_corpus
@needs_cryptography
def test_the_command_line_exits_0_1_or_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert evidence.main([str(CORPUS / "sound"), "--key", _trusted()]) == 0
    out = capsys.readouterr().out
    assert out.startswith("bundle ok: 28 receipts")
    assert "\npolicies carried: sha256:" in out and "; not carried (nothing shows what they said): sha256:test\n" in out
    assert evidence.main([str(CORPUS / "truncated"), "--key", str(CORPUS / "trusted.vkey"), "--json"]) == 1
    printed = json.loads(capsys.readouterr().out)
    assert (printed["ok"], printed["reason"]) == (False, "truncated")
    assert evidence.main([str(CORPUS / "sound"), "--key", "not-a-key"]) == 2
    assert "neither a verifier key" in capsys.readouterr().err
    with pytest.raises(SystemExit) as usage:
        evidence.main([])
    assert usage.value.code == 2


@needs_corpus
@needs_cryptography
def test_python_dash_m_runs_the_verifier() -> None:
    env = {**os.environ, "PYTHONPATH": str(PACKAGE_DIR)}
    done = subprocess.run(
        [sys.executable, "-m", "warden.evidence", str(CORPUS / "reordered"), "--key", _trusted(), "--json"],
        capture_output=True,
        text=True,
        cwd=PACKAGE_DIR,
        env=env,
    )
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["reason"] == "receipts_reordered"


def test_the_module_loads_alone_and_never_the_native_library() -> None:
    code = (
        "import importlib.util, sys\n"
        f"path = {str(PACKAGE_DIR / 'warden' / 'evidence.py')!r}\n"
        "spec = importlib.util.spec_from_file_location('standalone', path)\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "assert not [name for name in sys.modules if name == 'warden' or name.startswith('warden.')], sys.modules\n"
        "assert 'ctypes' not in sys.modules\n"
        "assert module.leaf_hash(b'') == bytes.fromhex("
        "'6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_package_exposes_the_verifier_lazily() -> None:
    import warden

    assert warden.evidence.REASONS == evidence.REASONS
    assert warden.evidence.verify_bundle.__doc__ == evidence.verify_bundle.__doc__


@needs_corpus
def test_without_cryptography_the_verifier_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cryptography.hazmat.primitives.asymmetric.ed25519", None)
    with pytest.raises(ImportError, match=r"pip install 'warden-effects\[evidence\]'"):
        evidence.verify_bundle(CORPUS / "sound", keys=[_trusted()])
