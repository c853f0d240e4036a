#!/usr/bin/env python3
"""Lists every import circle between the files of the repo's Rust crates and Python packages.

A circle is a strongly connected component of more than one file in the graph "file A names an
item of file B". Files in a circle cannot be read, tested or moved one at a time, so the repo
keeps none; tests/test_import_cycles.py fails on any this prints.

Rust: every crate with a `src/` (runtime, capi, torch-ext). A file is a module (`src/a/b.rs` or
`src/a/b/mod.rs` is `crate::a::b`); an edge is any path written `crate::...`, `super::...` or
`self::...` in it (in a `use` or inline), resolved to the longest module prefix that is a file,
and through that file's `pub use` when the item is only re-exported there (`crate::Error` is
`error.rs`, not `lib.rs`). `mod` declarations are not edges: a parent holding a child is not
the parent needing it.

Python: the packages under python/ (rshmem), the repo root's `benchmarks`, and the scripts of
tools/ (which import each other as top-level modules). An edge is any import in the file,
function-local ones included (moving an import into a function does not untie two modules),
except those under `if TYPE_CHECKING:`. `from pkg import name` goes to `pkg/name.py` when that
is a module, else to `pkg/__init__.py`.

Usage: tools/import_cycles.py [--root DIR] [--edges]; prints one circle a line (files relative
to the root, sorted; with --edges each file's edges inside it below) and exits 1 when there is
any, 0 otherwise.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

RUST_CRATES = ("runtime", "capi", "torch-ext")
# (directory whose children are top-level Python names, the names under it to take).
PY_ROOTS = (("python", None), (".", ("benchmarks",)), ("tools", None))


# ---- Rust ----------------------------------------------------------------------------------

def _strip_rust(text: str) -> str:
    """`text` with comments, string and char literals blanked (paths inside them are not edges);
    lengths and newlines are kept."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:i + 10]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            end = text.find('"' + hashes, i + 2 + len(hashes))
            j = n if end < 0 else end + 1 + len(hashes)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'" and re.match(r"'(\\.[^']*|[^\\'])'", text[i:i + 12]):
            j = i + len(re.match(r"'(\\.[^']*|[^\\'])'", text[i:i + 12]).group(0))
            out.append(" " * (j - i))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _rust_module_files(src: Path) -> dict[tuple[str, ...], Path]:
    mods: dict[tuple[str, ...], Path] = {}
    for f in sorted(src.rglob("*.rs")):
        parts = list(f.relative_to(src).with_suffix("").parts)
        if parts in (["lib"], ["main"]):
            parts = []
        elif parts[-1] == "mod":
            parts = parts[:-1]
        mods[tuple(parts)] = f
    return mods


def _inline_mods(code: str) -> list[tuple[int, int, str]]:
    """(start, end, name) of each inline `mod name { ... }` in stripped `code`."""
    found = []
    for m in re.finditer(r"\bmod\s+([A-Za-z_]\w*)\s*\{", code):
        depth, j = 1, m.end()
        while j < len(code) and depth:
            depth += {"{": 1, "}": -1}.get(code[j], 0)
            j += 1
        found.append((m.start(), j, m.group(1)))
    return found


def _use_paths(code: str, children: frozenset[str] = frozenset()) -> list[tuple[int, list[str]]]:
    """(offset, segments) of every path starting with crate/super/self, `use` trees expanded; a
    `use` of one of the file's `children` modules (`use rendezvous::Preface;`) counts as `self::`."""
    paths: list[tuple[int, list[str]]] = []

    def expand(prefix: list[str], tree: str, at: int) -> None:
        tree = tree.strip()
        m = re.match(r"((?:[A-Za-z_]\w*\s*::\s*)*)\{(.*)\}$", tree, re.S)
        if m:
            head = [s.strip() for s in m.group(1).split("::") if s.strip()]
            depth, part, parts = 0, "", []
            for ch in m.group(2):
                if ch == "," and depth == 0:
                    parts.append(part)
                    part = ""
                    continue
                depth += {"{": 1, "}": -1}.get(ch, 0)
                part += ch
            parts.append(part)
            for p in parts:
                if p.strip():
                    expand(prefix + head, p, at)
            return
        tree = re.sub(r"\s+as\s+\w+$", "", tree)
        segs = [s.strip() for s in tree.split("::") if s.strip()]
        paths.append((at, prefix + segs))

    for m in re.finditer(r"\buse\s+([^;]*);", code):
        tree = m.group(1).strip()
        if re.match(r"(crate|super|self)\b", tree):
            expand([], tree, m.start())
        elif re.match(r"([A-Za-z_]\w*)\s*::", tree) and re.match(r"([A-Za-z_]\w*)", tree).group(1) in children:
            expand(["self"], tree, m.start())
    # Inline paths outside `use`, e.g. `crate::log::init()`.
    without_uses = re.sub(r"\buse\s+[^;]*;", lambda u: " " * len(u.group(0)), code)
    for m in re.finditer(r"(?<![\w:])((?:crate|super|self)(?:\s*::\s*[A-Za-z_]\w*)+)", without_uses):
        paths.append((m.start(), [s.strip() for s in m.group(1).split("::")]))
    return paths


def rust_edges(crate: Path) -> dict[Path, set[Path]]:
    src = crate / "src"
    mods = _rust_module_files(src)
    by_file = {f: m for m, f in mods.items()}
    codes = {f: _strip_rust(f.read_text()) for f in by_file}

    # Names each file re-exports with `pub use`, and the absolute path they stand for.
    reexports: dict[Path, dict[str, list[str] | None]] = {}
    for f, code in codes.items():
        here = list(by_file[f])
        names: dict[str, list[str] | None] = {}
        for m in re.finditer(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]*);", code):
            tree = m.group(1).strip()
            sub = _use_paths("use " + tree + ";")
            first = re.match(r"([A-Za-z_]\w*)\s*::", tree)
            if not sub and first:
                if tuple(here + [first.group(1)]) in mods:  # `pub use error::Error` (a child)
                    sub = _use_paths("use self::" + tree + ";")
                else:  # `pub use half::f16`: another crate's item, no file of this one
                    for _, segs in _use_paths("use self::" + tree + ";"):
                        names[segs[-1]] = None
            for _, segs in sub:
                absolute = _absolute(here, [], segs)
                if absolute and absolute[-1] not in ("*", "self"):
                    names[absolute[-1]] = absolute
        reexports[f] = names

    def resolve(absolute: list[str], seen: int = 0) -> Path | None:
        for k in range(len(absolute), -1, -1):
            target = mods.get(tuple(absolute[:k]))
            if target is None:
                continue
            rest = absolute[k:]
            if rest and rest[0] in reexports[target] and seen < 8:
                if reexports[target][rest[0]] is None:
                    return None
                again = resolve(reexports[target][rest[0]] + rest[1:], seen + 1)
                if again is not None:
                    return again
            return target
        return None

    edges: dict[Path, set[Path]] = {f: set() for f in by_file}
    for f, code in codes.items():
        here = list(by_file[f])
        inline = _inline_mods(code)
        # Names that stand for a module in this file: its `mod x;` children and modules it
        # imports by name (`use crate::heap;`, `use super::select::{self, ..}`), so that
        # `secret::serve(..)` or `heap::Heap` is an edge too.
        aliases: dict[str, list[str]] = {}
        for m in re.finditer(r"\bmod\s+([A-Za-z_]\w*)\s*;", code):
            if tuple(here + [m.group(1)]) in mods:
                aliases[m.group(1)] = here + [m.group(1)]
        # `pub use` re-exports a name (resolved through above); it is no edge of its own.
        reexported = {m.start(1) for m in re.finditer(r"\bpub(?:\([^)]*\))?\s+(use)\b", code)}
        for at, segs in _use_paths(code, frozenset(aliases)):
            nested = [name for s, e, name in inline if s < at < e]
            absolute = _absolute(here, nested, segs)
            if absolute is None or at in reexported:
                continue
            if tuple(absolute) in mods and not nested:
                aliases[segs[-1]] = absolute
            elif absolute and absolute[-1] == "self" and tuple(absolute[:-1]) in mods and not nested:
                aliases[absolute[-2]] = absolute[:-1]
            target = resolve([s for s in absolute if s != "self"])
            if target is not None and target != f:
                edges[f].add(target)
        if aliases:
            names = "|".join(sorted(map(re.escape, aliases)))
            plain = re.sub(r"\buse\s+[^;]*;", lambda u: " " * len(u.group(0)), code)
            for m in re.finditer(rf"(?<![\w:])({names})((?:\s*::\s*[A-Za-z_]\w*)+)", plain):
                rest = [s.strip() for s in m.group(2).split("::") if s.strip()]
                target = resolve(aliases[m.group(1)] + rest)
                if target is not None and target != f:
                    edges[f].add(target)
    return edges


def _absolute(here: list[str], nested: list[str], segs: list[str]) -> list[str] | None:
    """`segs` (starting with crate/super/self) as a path from the crate root, written in module
    `here` inside inline modules `nested`."""
    if not segs:
        return None
    if segs[0] == "crate":
        return segs[1:]
    cur = here + nested
    i = 0
    if segs[0] == "self":
        i = 1
    while i < len(segs) and segs[i] == "super":
        if not cur:
            return None
        cur = cur[:-1]
        i += 1
    if i == 0:
        return None
    return cur + segs[i:]


# ---- Python --------------------------------------------------------------------------------

def python_modules(root: Path) -> dict[str, Path]:
    mods: dict[str, Path] = {}
    for base, names in PY_ROOTS:
        top = (root / base).resolve()
        for f in sorted(top.rglob("*.py")):
            rel = f.relative_to(top)
            if names is not None and rel.parts[0] not in names:
                continue
            if any(p.startswith(".") or p == "__pycache__" for p in rel.parts):
                continue
            if len(rel.parts) > 1 and not (top / rel.parts[0] / "__init__.py").exists():
                continue  # a folder of scripts, not a package
            parts = list(rel.with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            if parts:
                mods.setdefault(".".join(parts), f)
    return mods


def _stub_names(root: Path) -> set[str]:
    names = set()
    for base, _ in PY_ROOTS:
        top = (root / base).resolve()
        for f in top.rglob("*.pyi"):
            if (f.with_suffix(".py")).exists():
                continue
            names.add(".".join(f.relative_to(top).with_suffix("").parts) + ".__stub__")
    return names


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            t = node.test
            name = t.id if isinstance(t, ast.Name) else t.attr if isinstance(t, ast.Attribute) else None
            if name == "TYPE_CHECKING":
                for sub in node.body:
                    for n in ast.walk(sub):
                        if hasattr(n, "lineno"):
                            lines.add(n.lineno)
    return lines


def python_edges(root: Path) -> dict[Path, set[Path]]:
    mods = python_modules(root)
    by_file = {f: m for m, f in mods.items()}
    edges: dict[Path, set[Path]] = {f: set() for f in by_file}
    # Compiled modules, known by their stubs (rshmem/_native.pyi): `from . import _native` names
    # no file of the graph, not the package.
    compiled = {mods_name[: -len(".__stub__")] for mods_name in _stub_names(root)}

    def target(name: str) -> Path | None:
        # Only exact names: a name not found is another project's module or a compiled one
        # (rshmem._native), which is no file of this graph.
        return mods.get(name)

    for f, mod in by_file.items():
        tree = ast.parse(f.read_text(), str(f))
        skip = _type_checking_lines(tree)
        package = mod if f.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(tree):
            if getattr(node, "lineno", None) in skip:
                continue
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = package.split(".") if package else []
                    if node.level > 1:
                        parts = parts[: len(parts) - (node.level - 1)]
                    base = ".".join(parts + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                names = []
                for a in node.names:
                    full = f"{base}.{a.name}"
                    if full in mods:
                        names.append(full)
                    elif full not in compiled:
                        names.append(base)
            for name in names:
                t = target(name)
                if t is not None and t != f:
                    edges[f].add(t)
    return edges


# ---- circles -------------------------------------------------------------------------------

def strongly_connected(edges: dict[Path, set[Path]]) -> list[list[Path]]:
    """Tarjan's components of more than one node (iterative: no recursion limit)."""
    index: dict[Path, int] = {}
    low: dict[Path, int] = {}
    on_stack: set[Path] = set()
    stack: list[Path] = []
    found: list[list[Path]] = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in edges:
                    continue
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(edges[nxt]))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    x = stack.pop()
                    on_stack.discard(x)
                    comp.append(x)
                    if x == node:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Every file's edges, as paths relative to `root`."""
    root = root.resolve()
    edges: dict[Path, set[Path]] = {}
    for crate in RUST_CRATES:
        if (root / crate / "src").is_dir():
            edges.update(rust_edges(root / crate))
    edges.update(python_edges(root))
    return {str(f.relative_to(root)): {str(t.relative_to(root)) for t in ts} for f, ts in edges.items()}


def circles(root: Path = ROOT) -> list[list[str]]:
    """Every circle, as sorted file paths relative to `root`; the list sorted."""
    edges = {Path(f): {Path(t) for t in ts} for f, ts in graph(root).items()}
    return sorted([str(p) for p in comp] for comp in strongly_connected(edges))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, default=ROOT)
    ap.add_argument("--edges", action="store_true", help="also print the edges inside each circle")
    args = ap.parse_args()
    found = circles(args.root)
    edges = graph(args.root) if args.edges else {}
    for comp in found:
        print(" ".join(comp))
        for f in comp if args.edges else []:
            inside = sorted(t for t in edges[f] if t in comp)
            print(f"    {f} -> {' '.join(inside)}")
    sys.stdout.flush()
    print(f"{len(found)} import circle(s)", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
