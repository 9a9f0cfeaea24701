#!/usr/bin/env python3
"""The library's file-level import cycles (issue 33: "no file-level import cycle in src/").

    scripts/import-cycles.py            every cycle, smallest first, and a count; exits 1 on a cycle
    scripts/import-cycles.py --edges    also the edges inside each cycle, each with a path that makes it

What counts as a dependency. File A depends on file B when A's library code names an item that
B defines:

- Paths that start with `crate`, `$crate`, `self` or `super` (any number of `super`s), in code
  and in `use` declarations, grouped and nested imports included.
- Paths that start with a module A declares (`mod x;` ... `x::thing`, `use x::{...}`,
  `pub use x::Thing`: Rust 2018 lets a parent name its child without `self::`), and paths that
  start with a name A imports (`use crate::store::rows;` ... `rows::Codec`).
- Intra-doc link targets in doc comments (`[`crate::a::B`]`, `[text](super::C)`), which rustdoc
  resolves; paths in prose, plain comments and string literals are not dependencies.

A path is resolved to the file holding the longest module prefix of it; when the next segment
is a name that file binds with a `use` (a re-export, `pub use x::Thing`, or a private import a
child can see), the path follows that `use` to where the name is defined. So `crate::Error`
depends on src/error.rs, not on lib.rs, which only re-exports it; the `pub use` line itself is a
dependency of the re-exporting file on the defining one (it is an import: a `mod.rs` that
re-exports a child and holds items the child uses is a cycle, mended by moving those items to a
leaf). Paths that resolve outside src/ (std, other crates) are not dependencies.

Not dependencies: declaring `mod x;` alone; a `use` that only names a module (`use
crate::store::rows;`, `use super::{self}`): it is an alias, and the paths through it count
instead; `pub(in crate::store)` visibilities; macros reached by textual scope (`test_pub!`
without a path).

A glob import (`use x::*`) depends on the file of `x`. Not resolved: method calls (`k.f()` does
not name the file whose `impl` defines `f`) and names a glob brings in.

Left out: `src/bin/` (the CLI), and test code: every item under `#[cfg(test)]` (or
`#[cfg(all(test, ...))]`), and the files of modules declared under it (`#[cfg(test)] mod
tests;`), with their submodules. Items compiled for `test-exports` are library code and count.
Known limit: paths inside an inline non-test `mod x { ... }` are resolved as if they were in
the file's own module (the library has one, store/pg's `gate`, which names only std).

Cycles are the strongly connected components of that graph (Tarjan). Exit status 1 when there
is at least one cycle, 0 when there is none.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent / "src"


def module_path(path):
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] in ("mod", "lib"):
        parts = parts[:-1]
    return tuple(parts)


# --- lexing: code with comments and literals blanked, intra-doc link targets kept -------------

IDENT = re.compile(r"[A-Za-z0-9_]")
DOC_LINK = re.compile(
    r"\[`?([A-Za-z_$][\w:$]*)(?:\(\))?!?`?\](?!\()"  # [`path`]
    r"|\]\(`?([A-Za-z_$][\w:$]*)`?\)"  # [text](path)
    r"|^\s*\[[^\]]+\]:\s*([\w:$]+)"  # [text]: path
)
RAW_STRING = re.compile(r'r(#*)"')


def blank(s):
    return "".join("\n" if c == "\n" else " " for c in s)


def doc_links(line):
    """The intra-doc link targets of one doc-comment line, placed where they stand."""
    out = [" "] * len(line)
    for m in DOC_LINK.finditer(line):
        group = next(g for g in (1, 2, 3) if m.group(g))
        start, target = m.start(group), m.group(group)
        if "::" in target:
            out[start : start + len(target)] = target
    return "".join(out)


def lex(text):
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            line = text[i:end]
            is_doc = (line.startswith("///") and not line.startswith("////")) or line.startswith("//!")
            out.append("   " + doc_links(line[3:]) if is_doc else blank(line))
            i = end
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(blank(text[i:j]))
            i = j
        elif c == "r" and (i == 0 or not IDENT.match(text[i - 1]) or text[i - 1] == "b") and RAW_STRING.match(text, i):
            hashes = RAW_STRING.match(text, i).group(1)
            end = text.find('"' + hashes, i + 2 + len(hashes))
            end = n if end < 0 else end + 1 + len(hashes)
            out.append(blank(text[i:end]))
            i = end
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(blank(text[i : j + 1]))
            i = j + 1
        elif c == "'":
            m = re.match(r"'(?:\\(?:x[0-9a-fA-F]{2}|u\{[0-9a-fA-F]+\}|.)|[^\\'\n])'", text[i:])
            if m:
                out.append(blank(m.group(0)))
                i += len(m.group(0))
            else:  # a lifetime or a label
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


# --- test code --------------------------------------------------------------------------------

CFG_TEST = re.compile(r"#\s*\[\s*cfg\s*\(\s*(?:all\s*\(\s*)?test\b")
ATTRIBUTE = re.compile(r"\s*#\s*\[")


def bracket_end(code, i):
    """The index just past the bracket group that opens at code[i]."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    stack = []
    while i < len(code):
        c = code[i]
        if c in pairs:
            stack.append(pairs[c])
        elif stack and c == stack[-1]:
            stack.pop()
            if not stack:
                return i + 1
        i += 1
    return i


def item_end(code, i):
    """The index just past the item (or statement) that starts at code[i]: its `;` or its block."""
    while i < len(code):
        c = code[i]
        if c in "([":
            i = bracket_end(code, i)
        elif c == "{":
            return bracket_end(code, i)
        elif c == ";":
            return i + 1
        else:
            i += 1
    return i


def strip_tests(code):
    """The code without items under #[cfg(test)], and the test modules it declares as files."""
    test_mods = set()
    while True:
        m = CFG_TEST.search(code)
        if not m:
            return code, test_mods
        start = m.start()
        i = bracket_end(code, code.index("[", start))
        while True:
            a = ATTRIBUTE.match(code, i)
            if not a:
                break
            i = bracket_end(code, a.end() - 1)
        end = item_end(code, i)
        declared = re.match(r"\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", code[i:end])
        if declared:
            test_mods.add(declared.group(1))
        code = code[:start] + blank(code[start:end]) + code[end:]


# --- use declarations -------------------------------------------------------------------------

USE = re.compile(r"\buse\s+([^;]*);")
VISIBILITY_IN = re.compile(r"\bpub\s*\(\s*in\s+[^)]*\)")
MOD_DECL = re.compile(r"\bmod\s+(\w+)\s*[;{]")
DEFINES = re.compile(r"\b(?:fn|struct|enum|trait|type|const|static|union|mod|macro_rules!)\s+(\w+)")


def split_top(s):
    parts, depth, cur = [], 0, ""
    for c in s:
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        if c == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += c
    parts.append(cur)
    return [p.strip() for p in parts if p.strip()]


def parse_use_tree(text):
    """(absolute?, [(segments, bound name or None for a glob)]) for one use declaration's tree."""
    text = re.sub(r"\s+as\s+", " as ", text.strip())
    leaves = []

    def walk(tree, prefix):
        tree = tree.strip()
        brace = tree.find("{")
        if brace >= 0 and tree.endswith("}"):
            head = [x.strip() for x in tree[:brace].split("::") if x.strip()]
            for part in split_top(tree[brace + 1 : -1]):
                walk(part, prefix + head)
            return
        name, _, alias = tree.partition(" as ")
        segments = prefix + [x.strip() for x in name.split("::") if x.strip()]
        if segments and segments[-1] == "*":
            leaves.append((segments[:-1], None))
            return
        if segments and segments[-1] == "self":
            segments = segments[:-1]
        leaves.append((segments, alias.strip() or (segments[-1] if segments else None)))

    absolute = text.startswith("::")
    walk(text.lstrip(":"), [])
    return absolute, leaves


# --- the graph --------------------------------------------------------------------------------


class Source:
    def __init__(self, path):
        self.path = path
        self.module = module_path(path)
        code = lex(path.read_text(encoding="utf-8"))
        code, self.test_mods = strip_tests(code)
        code = VISIBILITY_IN.sub(lambda m: blank(m.group(0)), code)
        self.mods = set(MOD_DECL.findall(code)) - self.test_mods
        self.defined = set(DEFINES.findall(code))
        self.uses = []  # (absolute segments or None, bound name or None)
        for m in USE.finditer(code):
            absolute, leaves = parse_use_tree(m.group(1))
            for segments, bound in leaves:
                self.uses.append((None if absolute else segments, bound))
        self.code = USE.sub(lambda m: blank(m.group(0)), code)


def files():
    every = sorted(p for p in ROOT.rglob("*.rs") if "bin" not in p.relative_to(ROOT).parts)
    sources = {module_path(p): Source(p) for p in every}
    tests = {s.module + (name,) for s in sources.values() for name in s.test_mods}
    return {m: s for m, s in sources.items() if not any(m[: len(t)] == t for t in tests)}


class Graph:
    def __init__(self):
        self.sources = files()
        self.bindings = {}
        for source in self.sources.values():
            bound = {}
            for segments, name in source.uses:
                if name is not None and name not in ("crate", "super", "self"):
                    bound[name] = segments
            self.bindings[source.module] = bound

    def absolute(self, source, segments):
        """The crate-absolute module path of a path written in `source`, or None outside src/."""
        if not segments:
            return None
        here, first, rest = list(source.module), segments[0], segments[1:]
        if first in ("crate", "$crate"):
            out = []
        elif first == "self":
            out = here
        elif first == "super":
            out = here[:-1]
        elif first in source.mods:
            return self.walk_supers(here + segments)
        elif first in self.bindings[source.module]:
            target = self.bindings[source.module][first]
            if target is None or target[:1] == [first]:
                return None
            base = self.absolute(source, target)
            return None if base is None else base + rest
        else:
            return None
        return self.walk_supers(out + rest)

    @staticmethod
    def walk_supers(segments):
        out = []
        for s in segments:
            if s == "super":
                if not out:
                    return None
                out.pop()
            elif s != "self":
                out.append(s)
        return out

    def resolve(self, segments, depth=0):
        """(kind, module of the file) where an absolute path lands: 'item' or 'module'."""
        for n in range(len(segments), -1, -1):
            if tuple(segments[:n]) in self.sources:
                owner = self.sources[tuple(segments[:n])]
                break
        else:
            return None
        rest = segments[n:]
        if not rest:
            return "module", owner.module
        name = rest[0]
        target = self.bindings[owner.module].get(name)
        if name in self.bindings[owner.module] and name not in owner.defined and depth < 20:
            if target is None:
                return None
            base = self.absolute(owner, target)
            return None if base is None else self.resolve(base + rest[1:], depth + 1)
        return "item", owner.module

    def dependencies(self, source):
        """{module of a file this one depends on: the first path in this one that names it}"""
        found = {}
        starts = {"crate", "self", "super"} | source.mods | {
            k for k, v in self.bindings[source.module].items() if v is not None
        }
        inline = re.compile(
            r"(?<![\w:$])(\$crate|" + "|".join(sorted(map(re.escape, starts))) + r")((?:::[A-Za-z_]\w*)+)"
        )
        paths = [([m.group(1)] + m.group(2).split("::")[1:], False) for m in inline.finditer(source.code)]
        # A `use` that names a module is an alias (no edge); a glob (`use x::*`, bound None) is not.
        paths += [(segments, bound is not None) for segments, bound in source.uses if segments]
        for segments, alias_only in paths:
            absolute = self.absolute(source, segments)
            if absolute is None:
                continue
            landed = self.resolve(absolute)
            if landed is None or (alias_only and landed[0] == "module"):
                continue
            found.setdefault(landed[1], "::".join(segments))
        found.pop(source.module, None)
        return found


def components(graph):
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            out.append(sorted(component))

    sys.setrecursionlimit(100_000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [c for c in out if len(c) > 1]


def main():
    g = Graph()
    graph = {m: g.dependencies(s) for m, s in g.sources.items()}
    name = lambda m: str(g.sources[m].path.relative_to(ROOT))  # noqa: E731
    cycles = sorted(components(graph), key=lambda c: (len(c), list(map(name, c))))
    for cycle in cycles:
        print(f"cycle of {len(cycle)} files: {' '.join(sorted(map(name, cycle)))}")
        if "--edges" in sys.argv[1:]:
            members = set(cycle)
            for m in sorted(cycle, key=name):
                edges = sorted((name(t), why) for t, why in graph[m].items() if t in members)
                print(f"  {name(m)} -> {', '.join(f'{t} ({why})' for t, why in edges)}")
    print(
        f"{len(cycles)} cycles, {sum(map(len, cycles))} files in them, of {len(graph)} library files"
        " in src/ (src/bin/ and test modules left out)"
    )
    return 1 if cycles else 0


if __name__ == "__main__":
    sys.exit(main())
