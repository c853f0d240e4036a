#!/usr/bin/env python3
"""Ports Triton-distributed's tutorials, NVIDIA kernels, layers and test scripts to rshmem by
rewriting imports only, then compiles every device kernel for sm_90 against rshmem and prints one
line per kernel; or, with --tests, runs the ported test scripts with 2 PEs each.

    python tools/port_triton_dist.py SRC [--out DIR] [--no-compile] [--only SUBSTRING]
    python tools/port_triton_dist.py SRC --tests [--jobs N] [--base-port P] [--timeout S] [--only SUBSTRING]

SRC is a checkout of ByteDance-Seed/Triton-distributed. The ported files go to DIR (default
.gpu/td): DIR/tutorials/NN-*.py (tutorials 01-08, the CUDA ones), DIR/td_port/kernels/ (every
file of python/triton_dist/kernels/ and kernels/nvidia/), DIR/td_port/layers/nvidia/,
DIR/td_port/test/ (test/utils.py and the NVIDIA test scripts' helpers) and DIR/tests/ (the test
scripts tools/td_tests.py runs), plus DIR/run_tutorial.py, which runs a ported tutorial or test
script under torchrun (see its docstring). --tests runs them: one line per run (PASS / FAIL /
TIMEOUT / MCAST, the flags, the seconds, and how many distinct kernels it launched and how many of
those have the device library linked in). Only import statements change, and a
statement that spans several lines keeps its lines (blank ones pad it), so line numbers in
errors match the original. The mapping:

    import triton_dist / triton_dist.tune        -> import rshmem.compat.triton_dist as triton_dist
    triton_dist.language[.extra[.cuda]].language_extra, .simt_ops, .tma_language
                                                 -> rshmem.triton.language
    from triton_dist.language.extra[.cuda] import libshmem_device / libnvshmem_device
                                                 -> from rshmem.triton import libshmem_device
    triton_dist.utils, .profiler_utils, .tools, .nv_utils, .tune
                                                 -> rshmem.compat.triton_dist
    triton_dist.kernels.X, .layers.X, .test.X    -> td_port.kernels.X, ... (ported copies)
    triton_dist.tools.profiler                   -> rshmem.compat.td_profiler (rshmem's own)
    triton_dist.autotuner, .tma_utils            -> rshmem.compat.triton_dist
    nvshmem.core, nvshmem.bindings.nvshmem       -> rshmem.compat.nvshmem[...]
    from cuda import cuda, cudart                -> from cuda.bindings import driver as cuda, runtime as cudart

A name that the rshmem module lacks is imported from ``rshmem.compat.missing`` instead: the
module still loads, and using the name says why rshmem does not have it.

Compiling sets TRITON_ALWAYS_COMPILE=1 (Triton's cache key does not cover core.extern builtins'
Python, so a cached kernel could hide a failing one) and answers torch.cuda's device queries as
an sm_90 GPU (modules ask at import). How each kernel's argument types are found is in
tools/td_kernels.py. Exit status: 0 when every kernel compiled or failed only for NVLink
multicast, 1 otherwise.
"""
from __future__ import annotations

import argparse
import ast
import importlib
import os
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # td_kernels, td_tests

PACKAGE = "td_port"
# (Triton-distributed module, rshmem module). Longest prefix wins; submodules of the left side
# not listed map to the same right side.
MODULES = [
    ("triton_dist.language.extra.cuda.language_extra", "rshmem.triton.language"),
    ("triton_dist.language.extra.language_extra", "rshmem.triton.language"),
    ("triton_dist.language.extra.cuda.tma_language", "rshmem.triton.language"),
    ("triton_dist.language.extra.cuda.libnvshmem_device", "rshmem.triton.libshmem_device"),
    ("triton_dist.language.extra.libshmem_device", "rshmem.triton.libshmem_device"),
    ("triton_dist.language.extra.hip", "rshmem.compat.missing"),
    ("triton_dist.language.extra.cuda", "rshmem.triton"),
    ("triton_dist.language.extra", "rshmem.triton"),
    ("triton_dist.language.simt_ops", "rshmem.triton.language"),
    ("triton_dist.language.distributed_ops", "rshmem.triton.language"),
    ("triton_dist.language", "rshmem.triton.language"),
    ("triton_dist.kernels", "td_port.kernels"),
    ("triton_dist.layers", "td_port.layers"),
    ("triton_dist.function", "td_port.function"),
    ("triton_dist.test", "td_port.test"),
    ("triton_dist.tools.profiler", "rshmem.compat.td_profiler"),
    ("triton_dist.autotuner", "rshmem.compat.triton_dist"),
    ("triton_dist.tma_utils", "rshmem.compat.triton_dist"),
    ("triton_dist.utils", "rshmem.compat.triton_dist"),
    ("triton_dist.profiler_utils", "rshmem.compat.triton_dist"),
    ("triton_dist.nv_utils", "rshmem.compat.triton_dist"),
    ("triton_dist.tools", "rshmem.compat.triton_dist"),
    ("triton_dist.tune", "rshmem.compat.triton_dist"),
    ("triton_dist.jit", "rshmem.triton"),
    ("triton_dist", "rshmem.compat.triton_dist"),
    ("triton._C.libtriton_distributed", "rshmem.compat.missing"),
    ("nvshmem", "rshmem.compat.nvshmem"),
    ("pyrocshmem", "rshmem.compat.missing"),
]
# Names that change on the way (module, name) -> new name.
RENAMES = {("triton_dist.language.extra.cuda", "libnvshmem_device"): "libshmem_device"}
CUDA_BINDINGS = {"cuda": "driver", "cudart": "runtime", "nvrtc": "nvrtc"}


# Targets that mirror their source's submodules (nvshmem.bindings.nvshmem -> ...nvshmem.bindings.nvshmem).
MIRRORED = (PACKAGE, "rshmem.compat.nvshmem")


def map_module(name: str) -> str | None:
    """The rshmem module for Triton-distributed module ``name``, or None when it is not theirs."""
    for old, new in MODULES:
        if name == old:
            return new
        if name.startswith(old + "."):
            return new + name[len(old):] if new.startswith(MIRRORED) else new
    return None


def _has(module: str, name: str) -> bool:
    if module.startswith(PACKAGE) or module == "rshmem.compat.missing":
        return True  # the ported copies have their own names; missing has every name
    try:
        mod = importlib.import_module(module)
    except ImportError:
        return False
    if hasattr(mod, name):
        return True
    try:
        importlib.import_module(f"{module}.{name}")
        return True
    except ImportError:
        return False


def _alias(name: str, asname: str | None) -> str:
    return name if not asname or asname == name else f"{name} as {asname}"


def rewrite_statement(node) -> tuple[str | None, list[str]]:
    """The replacement text of one import statement (None: leave it), and notes on what moved
    to rshmem.compat.missing."""
    notes = []
    if isinstance(node, ast.Import):
        parts, changed = [], False
        for a in node.names:
            top = a.name.split(".")[0]
            new = map_module(a.name)
            if new is None:
                parts.append(f"import {_alias(a.name, a.asname)}")
                continue
            changed = True
            if a.asname:  # import x.y.z as w: w is the module x.y.z
                parts.append(f"import {new} as {a.asname}")
            else:  # import x.y.z binds x; x's counterpart must offer y.z as attributes
                parts.append(f"import {map_module(top)} as {top}")
        return ("; ".join(parts) if changed else None), notes
    if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
        return None, notes
    if node.module == "cuda":
        names = [f"{CUDA_BINDINGS.get(a.name, a.name)} as {a.asname or a.name}" for a in node.names]
        return f"from cuda.bindings import {', '.join(names)}", notes
    new = map_module(node.module)
    if new is None:
        return None, notes
    groups: dict[str, list[str]] = {}
    for a in node.names:
        name = RENAMES.get((node.module, a.name), a.name)
        target = new if a.name == "*" or _has(new, name) else "rshmem.compat.missing"
        if target == "rshmem.compat.missing" and new != target:
            notes.append(f"{node.module}.{a.name} -> rshmem.compat.missing")
        groups.setdefault(target, []).append(_alias(name, a.asname or (a.name if name != a.name else None)))
    return "; ".join(f"from {m} import {', '.join(ns)}" for m, ns in groups.items()), notes


def rewrite_imports(src: str) -> tuple[str, list[str]]:
    """``src`` with every Triton-distributed import rewritten, lines kept; and notes."""
    tree = ast.parse(src)
    lines = src.splitlines(keepends=True)
    notes = []
    for node in sorted((n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))),
                       key=lambda n: n.lineno, reverse=True):
        text, why = rewrite_statement(node)
        notes += why
        if text is None:
            continue
        # Offsets are in UTF-8 bytes. What precedes the statement on its first line (indent,
        # `if x:`) and what follows it on its last (a comment) stays.
        head = lines[node.lineno - 1].encode()[:node.col_offset].decode()
        tail = lines[node.end_lineno - 1].encode()[node.end_col_offset:].decode().rstrip("\n")
        lines[node.lineno - 1:node.end_lineno] = [head + text + tail + "\n"] + ["\n"] * (node.end_lineno - node.lineno)
    return "".join(lines), notes


def port(src_root: Path, out: Path) -> list[Path]:
    """Writes the ported tutorials and kernels under ``out``; returns the ported .py files."""
    tutorials = sorted((src_root / "tutorials").glob("0[1-8]*.py"))
    kernels = src_root / "python" / "triton_dist" / "kernels"
    if not tutorials or not kernels.is_dir():
        raise SystemExit(f"{src_root}: not a Triton-distributed checkout (no tutorials/0*.py or "
                         "python/triton_dist/kernels)")
    jobs = [(t, out / "tutorials" / t.name) for t in tutorials]
    for sub in ("", "nvidia"):
        for f in sorted((kernels / sub).iterdir()):
            if f.is_file():
                jobs.append((f, out / PACKAGE / "kernels" / sub / f.name))
    pkg = src_root / "python" / "triton_dist"
    for sub in ("layers", "function"):
        for f in sorted((pkg / sub / "nvidia").glob("*.py")):
            jobs.append((f, out / PACKAGE / sub / "nvidia" / f.name))
    if (pkg / "test" / "utils.py").is_file():
        jobs.append((pkg / "test" / "utils.py", out / PACKAGE / "test" / "utils.py"))
    from td_tests import SCRIPTS  # noqa: PLC0415 (beside this file)

    for name in SCRIPTS:
        f = pkg / "test" / "nvidia" / name
        if f.is_file():
            jobs.append((f, out / "tests" / name))
            jobs.append((f, out / PACKAGE / "test" / "nvidia" / name))  # importable as td_port.test.nvidia.X
    written = []
    for src, dst in jobs:
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.suffix != ".py":
            shutil.copyfile(src, dst)
            continue
        text, notes = rewrite_imports(src.read_text())
        dst.write_text(text)
        written.append(dst)
        for n in notes:
            print(f"note  {dst.relative_to(out)}: {n}")
    for folder in (out / PACKAGE, out / PACKAGE / "kernels", out / PACKAGE / "layers", out / PACKAGE / "function",
                   out / PACKAGE / "test",
                   out / PACKAGE / "test" / "nvidia"):
        init = folder / "__init__.py"
        if folder.is_dir() and not init.exists():
            init.write_text("")
    (out / "run_tutorial.py").write_text(RUNNER)
    return written


RUNNER = '''"""Runs a ported Triton-distributed tutorial or test script as __main__ (under torchrun), with
this folder on sys.path (for td_port) and torch.distributed usable where PEs share one GPU
(rshmem.compat.triton_dist.stage_cuda_collectives_through_cpu: reference collectives on CUDA
tensors, and explicit NCCL groups, go through gloo).

    RSHMEM_ALLOW_SHARED_GPU=1 torchrun --nproc-per-node 2 run_tutorial.py tutorials/02-intra-node-allgather.py

With RSHMEM_PORT_LAUNCHES=DIR, each rank writes DIR/rankR.json at exit: the names of the kernels
it launched and of those linked with rshmem's device library.
"""
import atexit
import json
import os
import runpy
import sys

from rshmem.compat.triton_dist import stage_cuda_collectives_through_cpu

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
stage_cuda_collectives_through_cpu()
if os.environ.get("RSHMEM_PORT_LAUNCHES"):
    from triton import knobs

    from rshmem.triton import _link

    launched = set()

    def _count(metadata):
        launched.add(metadata.get()["name"])

    knobs.runtime.launch_enter_hook.add(_count)

    def _write():
        path = os.path.join(os.environ["RSHMEM_PORT_LAUNCHES"], f"rank{os.environ.get('RANK', '0')}.json")
        with open(path, "w") as f:
            json.dump({"launched": sorted(launched), "linked": sorted(launched & _link.LINKED)}, f)

    atexit.register(_write)
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
'''


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src", type=Path, help="a checkout of ByteDance-Seed/Triton-distributed")
    ap.add_argument("--out", type=Path, default=Path(".gpu/td"), help="where the ported files go (.gpu/td)")
    ap.add_argument("--no-compile", action="store_true", help="only write the ported files")
    ap.add_argument("--only", default="", help="compile only kernels whose 'file::name' contains this")
    ap.add_argument("--verbose", action="store_true", help="print the signature tried for a failing kernel")
    ap.add_argument("--tests", action="store_true", help="run the ported test scripts with 2 PEs each (needs a GPU)")
    ap.add_argument("--jobs", type=int, default=1, help="--tests: runs at once (each its own port)")
    ap.add_argument("--base-port", type=int, default=36000, help="--tests: run i uses port BASE + i")
    ap.add_argument("--timeout", type=int, default=300, help="--tests: seconds per run")
    args = ap.parse_args(argv)
    if args.out.exists():
        shutil.rmtree(args.out)
    files = port(args.src.resolve(), args.out)
    print(f"ported {len(files)} Python files into {args.out}")
    if args.tests:
        import td_tests  # noqa: PLC0415

        return td_tests.run_all(args.out.resolve(), args.only, args.jobs, args.base_port, args.timeout)
    if args.no_compile:
        return 0
    os.environ["TRITON_ALWAYS_COMPILE"] = "1"
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import td_kernels  # noqa: PLC0415 (needs triton and torch; porting alone does not)

    return td_kernels.compile_all(args.out, PACKAGE, args.only, args.verbose)


if __name__ == "__main__":
    sys.exit(main())
