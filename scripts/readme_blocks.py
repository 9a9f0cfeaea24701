#!/usr/bin/env python3
"""Run every runnable code block of the READMEs as a newcomer would paste it.

    scripts/readme_blocks.py [--list] [--keep] [--warden-bin DIR] [FILE[#HEADING]...]

With no FILE: DEFAULT_FILES below (README.md, CONTRIBUTING.md, the walk-throughs in docs/, the
bindings' READMEs).
`FILE#HEADING` runs only the section(s) whose heading contains HEADING.

How a block runs is written in its info string (CONTRIBUTING.md, "How the code blocks run"):

  ```console          a terminal session: `$ ` lines are commands (a trailing `\\` continues one);
                      the lines under a command are what it prints, stdout and stderr together;
                      a last line `(exit N)` is its exit status (0 when absent). Compared.
  ```sh               commands, run with `set -eo pipefail`; must succeed; output not compared.
  ```LANG file=NAME   the file NAME (python, js, yaml, c, rust, toml...), written as shown.
  ```text, ```json    output or data: never run.
  ... norun           anything marked `norun`: shown, never run (the text says why).
  ... checkout        runs at the root of the clone instead of in the section's folder.

Every other block is an error, so a new block is runnable or says why it is not.

The blocks of one section (up to the next heading) are one session: they run in order in one
fresh temporary folder, and what a command exports or `cd`s into carries over to the next, as in
one terminal. A `checkout` block is a session of its own at the clone's root. Every command
starts from this process's environment without WARDEN_* variables (the READMEs set their own),
plus:

  WARDEN_SRC          the clone (the READMEs install the bindings from "$WARDEN_SRC/...")
  CARGO_INSTALL_ROOT  a scratch folder, so `cargo install` never touches ~/.cargo/bin; its bin/
                      is first on PATH, so `warden` is the binary the README just installed
  PYTHONUNBUFFERED=1  Python's output interleaves with stderr as it does on a terminal
  IN_WARDEN_TEST_SH=1 the README's `./scripts/test.sh` (which runs this stage) returns at once

Output is compared after normalising both sides the same way: timestamps
(2026-11-30T01:44:32.127Z) become <time>; ids (act_, apr_, rct_, snp_, ctr_, dlg_ + 32 hex) keep
their prefix and become <id>; idempotency tokens (8-4-4-4-12 hex) become <uuid>; absolute paths
under the temporary directory become <tmp>; trailing spaces and trailing empty lines go.

After the last block the checkout must be as clean as before: `git status --porcelain` unchanged,
and nothing new among ignored files except build output under target/ and the Node addon's
bindings/node/native/ (npm builds it inside the linked package).
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# README.md sends its references to docs/; their walk-throughs run as the README's own blocks do.
DEFAULT_FILES = [
    "README.md",
    "CONTRIBUTING.md",
    "docs/SIGHTS.md",
    "docs/GATEWAY.md",
    "docs/VERIFY.md",
    "docs/CLI.md",
    "bindings/README.md",
    "bindings/python/README.md",
    "bindings/node/README.md",
]
# What installing from the checkout may leave behind (all ignored by git).
ALLOWED_NEW_IGNORED = ("target/", "bindings/node/native/")
NEVER_RUN = {"text", "json"}
SHELL = {"sh", "bash"}
COMMAND_TIMEOUT = 900  # seconds; a cold `pip install` or `npm install` compiles with cargo


@dataclass
class Block:
    file: str
    line: int  # 1-based line of the opening fence
    section: str
    lang: str
    attrs: dict[str, str]
    body: str

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def runnable(self) -> bool:
        return "norun" not in self.attrs and self.lang not in NEVER_RUN


FENCE = re.compile(r"^( {0,3})(```+|~~~+)(.*)$")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")


def parse(path: Path, name: str) -> list[Block]:
    """The fenced blocks of one Markdown file, each with the heading it sits under."""
    blocks: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    section = "(top)"
    i = 0
    while i < len(lines):
        heading = HEADING.match(lines[i])
        if heading:
            section = heading.group(1)
        fence = FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        indent, marker, info = len(fence.group(1)), fence.group(2), fence.group(3).strip()
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines) and not re.match(rf"^ {{0,3}}{re.escape(marker[0])}{{{len(marker)},}}\s*$", lines[i]):
            text = lines[i]
            body.append(text[indent:] if text[:indent].strip() == "" else text)
            i += 1
        i += 1  # the closing fence
        words = info.split()
        lang = words[0] if words else ""
        attrs: dict[str, str] = {}
        for word in words[1:]:
            key, _, value = word.partition("=")
            attrs[key] = value
        blocks.append(Block(name, start + 1, section, lang, attrs, "\n".join(body) + "\n"))
    return blocks


def problems_of(block: Block) -> list[str]:
    """Why a block is neither runnable nor marked as not runnable."""
    if not block.lang:
        return [f"{block.where}: a block needs an info string (console, sh, LANG file=NAME, text, or norun)"]
    if not block.runnable:
        return []
    known = {"checkout", "file", "norun"}
    unknown = sorted(set(block.attrs) - known)
    if unknown:
        return [f"{block.where}: unknown marker(s) {unknown}; known: {sorted(known)}"]
    if block.lang in SHELL or block.lang == "console" or block.attrs.get("file"):
        return []
    return [f"{block.where}: a ```{block.lang} block must say file=NAME (it is written and used) or norun"]


# ---- normalisation -------------------------------------------------------------------------------

def temp_roots() -> list[str]:
    roots = {"/tmp", tempfile.gettempdir(), os.path.realpath(tempfile.gettempdir())}
    return sorted(roots, key=len, reverse=True)


NORMALISE = [
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"), "<time>"),
    (re.compile(r"\b(act|apr|rct|snp|ctr|dlg)_[0-9a-f]{32}\b"), r"\1_<id>"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<uuid>"),
]


def normalised(text: str) -> list[str]:
    for root in temp_roots():
        text = re.sub(re.escape(root.rstrip("/")) + r"/[^\s'\"`),]*", "<tmp>", text)
    for pattern, replacement in NORMALISE:
        text = pattern.sub(replacement, text)
    lines = [line.rstrip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return lines


# ---- sessions ------------------------------------------------------------------------------------

@dataclass
class Session:
    """One terminal: a folder, the exported environment and the working directory."""

    folder: Path
    env: dict[str, str]
    state: Path
    groups: list[int] = field(default_factory=list)

    @classmethod
    def open(cls, folder: Path, env: dict[str, str], state: Path) -> Session:
        state.mkdir(parents=True)
        session = cls(folder, env, state)
        (state / "env").write_text(
            "".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items() if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k)),
            encoding="utf-8",
        )
        (state / "cwd").write_text(str(folder), encoding="utf-8")
        return session

    @property
    def cwd(self) -> Path:
        return Path((self.state / "cwd").read_text(encoding="utf-8").strip())

    def run(self, script: str, strict: bool) -> tuple[int, str]:
        """Runs `script` in bash in this session; returns (exit status, stdout+stderr)."""
        env_file, cwd_file = self.state / "env", self.state / "cwd"
        program = (
            f"source {shlex.quote(str(env_file))}\n"
            f'cd "$(cat {shlex.quote(str(cwd_file))})"\n'
            "__warden_save() { __rc=$?; export -p > "
            f"{shlex.quote(str(env_file))}.new && mv {shlex.quote(str(env_file))}.new {shlex.quote(str(env_file))}; "
            f"pwd > {shlex.quote(str(cwd_file))}; exit $__rc; }}\n"
            "trap __warden_save EXIT\n"
            + ("set -eo pipefail\n" if strict else "set -o pipefail\n")
            + script
            + "\n"
        )
        output = self.state / "output"
        with open(output, "wb") as sink:
            process = subprocess.Popen(
                ["bash", "--noprofile", "--norc", "-c", program],
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                env={},  # everything comes from the session's env file
                start_new_session=True,
            )
            self.groups.append(process.pid)
            try:
                code = process.wait(timeout=COMMAND_TIMEOUT)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                code = -1
        return code, output.read_bytes().decode("utf-8", errors="replace")

    def close(self) -> None:
        """Stops whatever a command left running in the background (a stand-in server)."""
        for group in self.groups:
            try:
                os.killpg(group, signal.SIGTERM)
            except (ProcessLookupError, PermissionError):
                pass


def console_commands(body: str) -> list[tuple[str, list[str], int]]:
    """A transcript's commands, each with the lines it prints and its exit status."""
    commands: list[tuple[str, list[str], int]] = []
    lines = body.splitlines()
    i = 0
    while i < len(lines):
        if not lines[i].startswith("$ "):
            raise ValueError(f"transcript line {i + 1} is output with no command above it: {lines[i]!r}")
        command = [lines[i][2:]]
        while command[-1].endswith("\\") and i + 1 < len(lines):
            i += 1
            command.append(lines[i])
        i += 1
        output: list[str] = []
        while i < len(lines) and not lines[i].startswith("$ "):
            output.append(lines[i])
            i += 1
        code = 0
        if output and (status := re.fullmatch(r"\(exit (\d+)\)", output[-1].strip())):
            code = int(status.group(1))
            output.pop()
        commands.append(("\n".join(command), output, code))
    return commands


class Runner:
    def __init__(self, scratch: Path, warden_bin: Path | None) -> None:
        self.scratch = scratch
        self.install_root = scratch / "cargo-install"
        self.failures: list[str] = []
        self.ran = 0
        base = {k: v for k, v in os.environ.items() if not k.startswith("WARDEN_") and k != "VIRTUAL_ENV"}
        path = [str(self.install_root / "bin")]
        if warden_bin is not None:
            path.append(str(warden_bin))
        base["PATH"] = os.pathsep.join(path + [base.get("PATH", "/usr/bin:/bin")])
        base.update(
            WARDEN_SRC=str(ROOT),
            CARGO_INSTALL_ROOT=str(self.install_root),
            PYTHONUNBUFFERED="1",
            # README.md's first block names ./scripts/test.sh, which is what runs this stage in
            # CI; with this set, that nested call returns at once instead of starting over.
            IN_WARDEN_TEST_SH="1",
        )
        self.env = base
        self.count = 0

    def session(self, folder: Path | None = None) -> Session:
        self.count += 1
        if folder is None:
            folder = self.scratch / f"s{self.count}"
            folder.mkdir()
        return Session.open(folder, self.env, self.scratch / f"state{self.count}")

    def fail(self, block: Block, what: str) -> None:
        self.failures.append(f"{block.where} ({block.section}): {what}")
        print(f"  FAIL {block.where}: {what}", flush=True)

    def run_block(self, session: Session, block: Block) -> None:
        self.ran += 1
        started = time.monotonic()
        if block.attrs.get("file"):
            target = session.cwd / block.attrs["file"]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(block.body, encoding="utf-8")
            print(f"  wrote {block.attrs['file']} ({block.where})", flush=True)
            return
        if block.lang in SHELL:
            script = block.body
            if re.search(r"^\s*cargo new\b", script, re.M):
                # A reader's own Rust project builds in a target directory of its own, as on their
                # machine: the suite's shared one holds the same crates built in other dependency
                # graphs, and once made such a project's build see two serde_json (E0308).
                script = 'export CARGO_TARGET_DIR="$PWD/target"\n' + script
            code, output = session.run(script, strict=True)
            print(f"  sh ({block.where}) exit {code} in {time.monotonic() - started:.0f}s", flush=True)
            if code != 0:
                self.fail(block, f"the commands exited {code}:\n{block.body}--- output\n{output}")
            return
        try:
            commands = console_commands(block.body)
        except ValueError as error:
            self.fail(block, str(error))
            return
        for command, expected, expected_code in commands:
            code, output = session.run(command, strict=False)
            got, want = normalised(output), normalised("\n".join(expected))
            took = time.monotonic() - started
            started = time.monotonic()
            print(f"  $ {command.splitlines()[0][:90]}  -> exit {code} in {took:.0f}s", flush=True)
            if code != expected_code or got != want:
                diff = "\n".join(difflib.unified_diff(want, got, "README", "actual", lineterm=""))
                self.fail(block, f"`{command}` exited {code} (README: {expected_code})\n{diff}")

    def run_section(self, blocks: list[Block]) -> None:
        print(f"== {blocks[0].file} # {blocks[0].section}", flush=True)
        shared: Session | None = None
        sessions: list[Session] = []
        try:
            for block in blocks:
                if "checkout" in block.attrs:
                    session = self.session(ROOT)
                    sessions.append(session)
                    self.run_block(session, block)
                    continue
                if shared is None:
                    shared = self.session()
                    sessions.append(shared)
                self.run_block(shared, block)
        finally:
            for session in sessions:
                session.close()


def git_status(ignored: bool) -> set[str]:
    command = ["git", "-C", str(ROOT), "status", "--porcelain"] + (["--ignored"] if ignored else [])
    return set(subprocess.run(command, check=True, capture_output=True, text=True).stdout.splitlines())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", help="FILE or FILE#HEADING (default: the READMEs, CONTRIBUTING.md and the docs/ walk-throughs)")
    parser.add_argument("--list", action="store_true", help="list the blocks and how each runs; run nothing")
    parser.add_argument("--keep", action="store_true", help="keep the session folders")
    parser.add_argument(
        "--warden-bin",
        type=Path,
        help="a folder holding a built `warden`, on PATH after the install root (to run a section "
        "without the README's install block)",
    )
    options = parser.parse_args()

    selected: list[Block] = []
    problems: list[str] = []
    for spec in options.files or DEFAULT_FILES:
        name, _, heading = spec.partition("#")
        blocks = parse(ROOT / name, name)
        for block in blocks:
            problems.extend(problems_of(block))
        selected.extend(b for b in blocks if heading.lower() in b.section.lower())
    if problems:
        print("blocks that are neither runnable nor marked as not runnable:", *problems, sep="\n  ")
        return 1
    if options.list:
        for block in selected:
            how = "never run" if not block.runnable else " ".join([block.lang, *(f"{k}={v}" if v else k for k, v in block.attrs.items())])
            print(f"{block.where:40} {block.section[:40]:40} {how}")
        return 0

    before_plain, before_ignored = git_status(False), git_status(True)
    scratch = Path(tempfile.mkdtemp(prefix="warden-readme-"))
    runner = Runner(scratch, options.warden_bin.resolve() if options.warden_bin else None)
    started = time.monotonic()
    try:
        sections: list[list[Block]] = []
        for block in (b for b in selected if b.runnable):
            if sections and (sections[-1][0].file, sections[-1][0].section) == (block.file, block.section):
                sections[-1].append(block)
            else:
                sections.append([block])
        for section in sections:
            runner.run_section(section)
    finally:
        if options.keep:
            print(f"kept {scratch}")
        else:
            subprocess.run(["rm", "-rf", str(scratch)], check=False)

    after_plain, after_ignored = git_status(False), git_status(True)
    if after_plain != before_plain:
        runner.failures.append(
            "the steps changed the checkout (git status --porcelain):\n  " + "\n  ".join(sorted(after_plain ^ before_plain))
        )
    leftovers = sorted(
        line
        for line in after_ignored - before_ignored
        if line.startswith("!! ") and not line[3:].startswith(ALLOWED_NEW_IGNORED)
    )
    if leftovers:
        runner.failures.append(
            "the steps left ignored files in the checkout outside target/ (git status --porcelain --ignored):\n  "
            + "\n  ".join(leftovers)
        )
    print(
        f"readme blocks: {runner.ran} blocks run in {len(sections)} sections, {len(runner.failures)} failed, "
        f"{time.monotonic() - started:.0f}s"
    )
    for failure in runner.failures:
        print(f"FAILED {failure}")
    return 1 if runner.failures else 0


if __name__ == "__main__":
    sys.exit(main())
