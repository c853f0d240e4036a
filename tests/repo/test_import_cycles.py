"""No import circles between the repo's files (tools/import_cycles.py: Rust crates' `use crate::`,
`super::` and module paths, Python imports), and the checker finds the circles it is for."""
from __future__ import annotations

import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import import_cycles  # noqa: E402

# Circles the repo tolerates: none. Any circle fails; take it apart (move what both files need
# into a leaf of its own) instead of adding it here.
ALLOWED: list[list[str]] = []


def test_no_import_circles():
    found = import_cycles.circles(ROOT)
    new = [c for c in found if c not in ALLOWED]
    assert not new, "import circles (tools/import_cycles.py):\n" + "\n".join(" ".join(c) for c in new)
    gone = [c for c in ALLOWED if c not in found]
    assert not gone, "circles of ALLOWED that are gone or changed (drop or update them):\n" + "\n".join(
        " ".join(c) for c in gone)


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def test_finds_rust_circles(tmp_path):
    write(tmp_path, {
        "runtime/src/lib.rs": "pub mod a;\npub mod b;\npub mod c;\npub mod d;\npub use a::Thing;\n",
        # a -> b through a `use` tree, b -> a through an inline path and the root's re-export.
        "runtime/src/a.rs": "use crate::{b::{self, Other}, c};\npub struct Thing;\n",
        "runtime/src/b.rs": "// crate::d::X in a comment is no edge\npub struct Other;\nfn f() -> crate::Thing { crate::Thing }\n",
        "runtime/src/c.rs": "pub fn g() { let _ = \"crate::d::X\"; }\n",
        "runtime/src/d.rs": "use crate::c;\n",
    })
    assert import_cycles.circles(tmp_path) == [["runtime/src/a.rs", "runtime/src/b.rs"]]


def test_finds_rust_circles_through_modules(tmp_path):
    write(tmp_path, {
        "runtime/src/lib.rs": "pub mod top;\npub mod low;\n",
        # top/mod.rs names its child by its module name; the child reaches back with `super::`.
        "runtime/src/top/mod.rs": "mod kid;\npub struct T;\nfn f() { kid::k(); }\n",
        "runtime/src/top/kid.rs": "pub fn k() -> super::T { super::T }\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n",
        # A module imported by name, then used through it; no way back.
        "runtime/src/low.rs": "use crate::top;\nfn g() { let _ = top::T; }\n",
    })
    assert import_cycles.circles(tmp_path) == [["runtime/src/top/kid.rs", "runtime/src/top/mod.rs"]]


def test_finds_python_circles(tmp_path):
    write(tmp_path, {
        "python/pkg/__init__.py": "from ._a import f\n",
        "python/pkg/_a.py": "from . import _b\ndef f(): ...\n",
        # A function-local import still ties the two modules together.
        "python/pkg/_b.py": "def g():\n    from ._a import f\n    return f\n",
        "python/pkg/_c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ._d import D\n",
        "python/pkg/_d.py": "from ._c import TYPE_CHECKING\n",
        "tools/one.py": "import two\n",
        "tools/two.py": "import one\n",
    })
    assert import_cycles.circles(tmp_path) == [
        ["python/pkg/_a.py", "python/pkg/_b.py"],
        ["tools/one.py", "tools/two.py"],
    ]


def test_a_tree_without_circles(tmp_path):
    write(tmp_path, {
        "runtime/src/lib.rs": "pub mod a;\npub mod b;\npub mod top;\npub use b::B;\n",
        "runtime/src/a.rs": "use crate::B;\nuse half::f16;\n",
        "runtime/src/b.rs": "pub struct B;\n",
        # A parent that re-exports its child's item does not need the child: no circle with the
        # child naming the parent, and `crate::top::K` is the child's.
        "runtime/src/top/mod.rs": "mod kid;\npub use kid::K;\npub(crate) use half::f16;\npub struct T;\n",
        "runtime/src/top/kid.rs": "pub struct K(super::T);\nfn f() -> crate::top::f16 { todo!() }\n",
        "python/pkg/__init__.py": "from ._a import f\n",
        "python/pkg/_a.py": "def f(): ...\n",
    })
    assert import_cycles.circles(tmp_path) == []
