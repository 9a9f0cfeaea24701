#!/usr/bin/env python3
"""The library's file-level import cycles (issue 33: "no file-level import cycle in src/").

    scripts/import-cycles.py            every cycle, smallest first, and a count
    scripts/import-cycles.py --edges    also the edges inside the largest cycle

A file depends on another when it names a path into it (`crate::a::b`, `super::x`, `self::y`,
grouped imports included, doc links too); `src/bin/` (the CLI) and `#[cfg(test)] mod tests`
bodies are left out. Cycles are the strongly connected components of that graph (Tarjan). A
report, not a check: it exits 0 whatever it finds.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent / "src"
FILES = sorted(p for p in ROOT.rglob("*.rs") if "bin" not in p.relative_to(ROOT).parts)


def module_path(path):
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] in ("mod", "lib"):
        parts = parts[:-1]
    return tuple(parts)


BY_MODULE = {module_path(p): p for p in FILES}
PATH = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
GROUP = re.compile(r"\b(crate|super|self)((?:::[a-z_][a-z0-9_]*)*)::\{([^}]*)\}")
TESTS = re.compile(r"#\[cfg\(test\)\]\s*\n\s*(?:pub\(crate\) )?mod tests")


def file_of(parts):
    """The file that holds the longest prefix of a module path."""
    for n in range(len(parts), 0, -1):
        if tuple(parts[:n]) in BY_MODULE:
            return BY_MODULE[tuple(parts[:n])]
    return None


def dependencies(path):
    text = TESTS.split(path.read_text(encoding="utf-8"))[0]
    here = list(module_path(path))
    base = {"crate": [], "self": here, "super": here[:-1]}
    named = [base[kw] + [x for x in rest.split("::") if x] for kw, rest in PATH.findall(text)]
    for kw, rest, inner in GROUP.findall(text):
        prefix = base[kw] + [x for x in rest.split("::") if x]
        for item in inner.split(","):
            item = item.strip().split(" as ")[0]
            if item:
                named.append(prefix + [x for x in item.split("::") if x and x != "self"])
    return {f for f in map(file_of, named) if f is not None and f != path}


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
    graph = {p: dependencies(p) for p in FILES}
    cycles = sorted(components(graph), key=len)
    name = lambda p: str(p.relative_to(ROOT))  # noqa: E731
    for cycle in cycles:
        print(f"cycle of {len(cycle)} files: {' '.join(map(name, cycle))}")
    print(f"{len(cycles)} cycles, {sum(map(len, cycles))} files in them, of {len(FILES)} files in src/ (src/bin/ left out)")
    if "--edges" in sys.argv[1:] and cycles:
        largest = set(cycles[-1])
        for f in cycles[-1]:
            print(f"  {name(f)} -> {', '.join(sorted(map(name, graph[f] & largest)))}")


if __name__ == "__main__":
    main()
