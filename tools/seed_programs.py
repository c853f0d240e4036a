#!/usr/bin/env python3
"""Writes the example programs of the NVSHMEM guides (text files kept outside the repo, named by
--seeds or $RSHMEM_SEEDS) out as
.cu files, as the guides print them, and says how each is built and run against rshmem.

    python3 tools/seed_programs.py OUTDIR [--seeds DIR]     -> OUTDIR/<name>.cu and OUTDIR/programs.tsv
                                                              (exit 3 when no guides are given)

A program is a listing with a `main`: in the developer guide, from its first `#include` line to
the brace that closes `main`; in the training guide, a fenced ```c block with a `main`. Listings
the guide prints without their `#include` lines get the ones they use (stdio, MPI when they call
it, nvshmem.h, nvshmemx.h), above the unchanged code; a listing with an ellipsis in its code is
an excerpt, not a program, and is listed as such.

programs.tsv has one row per listing: name, source (file:line), mpi (`mpirun` when it calls MPI:
built with MPI's headers and library, run under mpirun; `header` when it only includes mpi.h: built
with MPI's headers, run under torchrun; empty otherwise), device (`rank` when it picks its GPU by its PE
number with a checked cudaSetDevice, so that 2 PEs need 2 GPUs; `rank-unchecked` when it does not
check the call; empty otherwise), expect (a regular expression every PE's output must match,
`{pe}`/`{prev}`/`{n}` filled in per PE), and note; `-` stands for an empty field.
"""
from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
GUIDES = {
    "nvshmem-1.0-developer-guide.txt": "devguide",
    "nvshmem-training-guide.txt": "training",
}


@dataclass
class Program:
    name: str
    source: str
    code: str
    note: str = ""

    @property
    def mpi(self) -> str:
        if re.search(r"\bMPI_Init\b", self.code):
            return "mpirun"
        return "header" if re.search(r'#include\s*[<"]mpi\.h[>"]', self.code) else ""

    @property
    def device(self) -> str:
        m = re.search(r"^(.*)cudaSetDevice\s*\(\s*(mype|mype_node|rank)\s*\)", self.code, re.M)
        if not m:
            return ""
        return "rank" if "CHECK" in m.group(1) else "rank-unchecked"

    @property
    def expect(self) -> str:
        if re.search(r'printf\("%d: received message %d\\n"', self.code):
            return r"^{pe}: received message {prev}$"
        if "run complete" in self.code:
            return r"^\[{pe} of {n}\] run complete"
        return ""


def find_seeds(explicit: str | None) -> Path | None:
    """The seeds folder, given as --seeds or $RSHMEM_SEEDS: the guides are an input from outside
    the repository, named by whoever runs this, never looked for."""
    import os

    cand = explicit or os.environ.get("RSHMEM_SEEDS")
    if cand and (Path(cand) / "nvshmem-1.0-developer-guide.txt").is_file():
        return Path(cand)
    return None


def close_of_main(lines: list[str], start: int) -> int | None:
    """Index of the line whose `}` closes the first `main` at or after line `start`."""
    begin = next((i for i in range(start, len(lines)) if re.match(r"\s*int\s+main\b", lines[i])), None)
    if begin is None:
        return None
    depth, opened = 0, False
    for i in range(begin, len(lines)):
        depth += lines[i].count("{") - lines[i].count("}")
        opened = opened or "{" in lines[i]
        if opened and depth == 0:
            return i
    return None


def devguide_programs(text: str, tag: str, fname: str) -> list[Program]:
    lines = text.splitlines()
    out, i = [], 0
    while i < len(lines):
        if lines[i].startswith("#include"):
            end = close_of_main(lines, i)
            if end is None:
                break
            code = "\n".join(lines[i:end + 1]) + "\n"
            out.append(Program(name="", source=f"{fname}:{i + 1}", code=code))
            i = end + 1
        else:
            i += 1
    return out


def fenced_programs(text: str, tag: str, fname: str) -> list[Program]:
    out = []
    for m in re.finditer(r"^```c\n(.*?)^```", text, re.M | re.S):
        code = m.group(1)
        if not re.search(r"^\s*int\s+main\b", code, re.M):
            continue
        line = text.count("\n", 0, m.start()) + 2
        prog = Program(name="", source=f"{fname}:{line}", code=code)
        if "\u2026" in code:
            prog.note = "an excerpt (its code has an ellipsis), not a program"
        elif "#include" not in code:
            heads = ["#include <stdio.h>"]
            if "MPI_" in code:
                heads.append("#include <mpi.h>")
            heads += ["#include <nvshmem.h>", "#include <nvshmemx.h>"]
            prog.code = "\n".join(heads) + "\n\n" + code
            prog.note = "printed without its #include lines: " + ", ".join(h.split()[1] for h in heads) + " added"
        out.append(prog)
    return out


def name_of(p: Program, tag: str, taken: set[str]) -> str:
    kernel = re.search(r"__global__\s+void\s+(\w+)", p.code)
    base = kernel.group(1) if kernel else "init"
    if p.mpi == "mpirun" and "mpi" not in base:
        base = f"mpi_{base}"
    name, k = f"{tag}_{base}", 2
    while name in taken:
        name, k = f"{tag}_{base}_{k}", k + 1
    taken.add(name)
    return name


def programs(seeds: Path) -> list[Program]:
    found, taken = [], set()
    for fname, tag in GUIDES.items():
        text = (seeds / fname).read_text(encoding="utf-8")
        progs = devguide_programs(text, tag, fname) + fenced_programs(text, tag, fname)
        for p in progs:
            p.name = name_of(p, tag, taken)
            found.append(p)
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir", type=Path)
    ap.add_argument("--seeds", help="the folder with the guides (default: $RSHMEM_SEEDS)")
    args = ap.parse_args()
    seeds = find_seeds(args.seeds)
    if seeds is None:
        print("seed_programs.py: no guides found: pass --seeds DIR or set RSHMEM_SEEDS to the folder holding "
              "nvshmem-1.0-developer-guide.txt and nvshmem-training-guide.txt", file=sys.stderr)
        return 3
    args.outdir.mkdir(parents=True, exist_ok=True)
    rows = ["name\tsource\tmpi\tdevice\texpect\tnote"]
    for p in programs(seeds):
        if "excerpt" not in p.note:
            (args.outdir / f"{p.name}.cu").write_text(p.code, encoding="utf-8")
        # "-" for an empty field: shell `read` merges runs of tabs.
        rows.append("\t".join(f or "-" for f in [p.name, p.source, p.mpi, p.device, p.expect, p.note]))
    (args.outdir / "programs.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
