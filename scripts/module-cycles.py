#!/usr/bin/env python3
"""Fails when a crate's top-level modules depend on each other in a cycle.

A module depends on another when its non-test code names `crate::<other>`.
The modules of a cycle can only be understood, tested and moved together,
so the architecture rule is: no cycles. This check fails when one appears;
KNOWN would list a cycle accepted for a while, and the check also fails when
a listed module has left its cycle (shrink the list then).
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Known cycles to break, by crate: the modules in them (none left).
KNOWN = {}

CRATE_REFERENCE = re.compile(r"\bcrate::(\w+)")


def workspace_crates():
    manifest = (ROOT / "Cargo.toml").read_text()
    members = re.search(r"members\s*=\s*\[(.*?)\]", manifest, re.S).group(1)
    return re.findall(r'"([^"]+)"', members)


def is_test_file(path):
    return path.name == "tests.rs" or path.stem.endswith("_tests") or "tests" in path.parts[:-1]


def non_test_code(text):
    """The text without `#[cfg(test)]` items (a module, function, use...)
    and without comment lines."""
    text = "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("//"))
    out = []
    rest = text
    while (cut := rest.find("#[cfg(test)]")) >= 0:
        out.append(rest[:cut])
        rest = rest[cut + len("#[cfg(test)]"):]
        # The item ends at its first `;` outside braces or its first
        # top-level block's closing brace, whichever comes first.
        depth = 0
        for i, c in enumerate(rest):
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    rest = rest[i + 1:]
                    break
            elif c == ";" and depth == 0:
                rest = rest[i + 1:]
                break
        else:
            rest = ""
    out.append(rest)
    return "".join(out)


def dependencies(src):
    """Each top-level module of the crate at `src` -> the modules it names."""
    modules = {}
    for path in sorted(src.rglob("*.rs")):
        relative = path.relative_to(src)
        if is_test_file(relative):
            continue
        top = relative.parts[0].removesuffix(".rs")
        if top in ("lib", "main", "bin"):
            continue
        modules.setdefault(top, []).append(path)
    graph = {}
    for module, paths in modules.items():
        named = set()
        for path in paths:
            named.update(CRATE_REFERENCE.findall(non_test_code(path.read_text())))
        graph[module] = {m for m in named if m in modules and m != module}
    return graph


def cycles(graph):
    """The strongly connected sets of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    sys.setrecursionlimit(10_000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def main():
    problems = []
    for crate in workspace_crates():
        src = ROOT / crate / "src"
        if not src.is_dir():
            continue
        known = KNOWN.get(crate, set())
        in_cycles = set()
        for component in cycles(dependencies(src)):
            in_cycles |= component
            new = component - known
            if new:
                problems.append(f"{crate}: modules {sorted(component)} form a cycle "
                                f"({sorted(new)} new to it): break it")
        gone = known - in_cycles
        if gone:
            problems.append(f"{crate}: {sorted(gone)} no longer in a cycle: "
                            "remove them from KNOWN in scripts/module-cycles.py")
        print(f"{crate}: {len(in_cycles)} modules in cycles")
    if problems:
        print("\n".join(problems), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
