#!/usr/bin/env python3
"""Registers and inlined code of a small Triton kernel per device function: rshmem's library
against NVSHMEM's ``libnvshmem_device.bc``, in the same kernel.

    python tools/device_footprint.py --write   # regenerate docs/device-footprint.md
    python tools/device_footprint.py --check   # exit 1 when the page differs from a fresh run

Each row of SAMPLE is one kernel that calls one function once (the arguments come from kernel
parameters, a result is stored), compiled by Triton for sm_90 with 4 warps and linked with
either library; no GPU is needed. For each compiled kernel:

- ``regs``: registers per thread of the cubin (``cuobjdump -res-usage``: the kernel with
  every function it calls). Triton emits ``.reqntid`` from num_warps, so ptxas fits the
  registers to the launch (4 warps allow 255): a Triton kernel never fails to launch for them,
  and the Triton bitcode keeps its 16-vector copy loop (triton-lib/build.py, TRITON_DEFINES).
  Besides, every ``_block`` row is compiled with 32 warps (1024 threads) and must stay within
  64 registers there (LAUNCH_WARPS).
- ``PTX``: instructions of the kernel's own body, the function's code inlined there (the common
  path), not counting the bodies of functions it calls.
- ``calls``: calls left in the kernel body: rshmem's are its rare paths (proxy ring, debug-wait
  timeout, error record), kept out of line on purpose.

tests/device/test_device_footprint.py runs this (CI, compile-only): it fails when a 1024-thread
``_block`` kernel needs more than 64 registers, when a rare path is inlined again, or when the
page is stale. CUDA C++ and Numba kernels carry no launch bound; their library copies (headers,
LTO-IR) keep copy_device.h's 4-vector loop, and examples/compile_cuda.sh and
tests/numba_device/test_numba_compile.py check their registers at 1024 / 512 threads. NVSHMEM's library is torch's ``nvidia-nvshmem-cu13`` wheel (3.4.5; $NVSHMEM_DEVICE_BC
overrides); without it the NVSHMEM columns cannot be measured and --check/--write refuse.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "device-footprint.md"
ARCH = 90
NUM_WARPS = 4
# The _block rows are compiled again at 1024 threads, which may use 64 registers per thread
# (65536 per SM); ptxas caps them to .reqntid, so this checks that the kernel compiles there.
LAUNCH_WARPS = 32
MAX_REGS_1024 = 64

# (row, rshmem binding in libshmem_device, NVSHMEM C symbol, kind). Kinds name the argument
# pattern (KERNELS below); the same pattern calls both libraries.
SAMPLE = (
    ("p", "p", "nvshmem_int_p", "p"),
    ("g", "g", "nvshmem_int_g", "g"),
    ("putmem", "putmem", "nvshmem_putmem", "put"),
    ("putmem_block", "putmem_block", "nvshmemx_putmem_block", "put"),
    ("getmem_block", "getmem_block", "nvshmemx_getmem_block", "put"),
    ("putmem_signal_nbi", "putmem_signal_nbi", "nvshmem_putmem_signal_nbi", "put_signal"),
    ("putmem_signal_block", "putmem_signal_block", "nvshmemx_putmem_signal_block", "put_signal"),
    ("signal_op", "signal_op", "nvshmemx_signal_op", "signal_op"),
    ("signal_wait_until", "signal_wait_until", "nvshmem_signal_wait_until", "wait"),
    ("atomic_fetch_add", "atomic_fetch_add", "nvshmem_int_atomic_fetch_add", "fadd"),
    ("test_any", "test_any", "nvshmem_longlong_test_any", "any"),
    ("wait_until_any", "wait_until_any", "nvshmem_longlong_wait_until_any", "any"),
    ("quiet", "quiet", "nvshmem_quiet", "none"),
    ("barrier_all_block", "barrier_all_block", "nvshmemx_barrier_all_block", "none"),
    ("broadcastmem_block", "broadcastmem_block", "nvshmemx_broadcastmem_block", "bcast"),
    ("sum_reduce_block (fp32)", "sum_reduce_block", "nvshmemx_float_sum_reduce_block", "reduce"),
)
# Rows compiled again at LAUNCH_WARPS: the block-scope functions, which kernels of 1024 threads call.
BLOCK_ROWS = tuple(row for row, _b, _s, _k in SAMPLE if "_block" in row)
# Rows whose rshmem kernel must call (not inline) a rare path: the ones with a proxy branch or a
# timed wait.
MUST_CALL = ("p", "g", "putmem", "putmem_block", "getmem_block", "putmem_signal_nbi", "putmem_signal_block",
             "signal_op", "signal_wait_until", "atomic_fetch_add", "wait_until_any")


@dataclass
class Measure:
    regs: int
    ptx: int
    calls: int
    callees: tuple[str, ...]
    stack: int = 0  # bytes of stack frame per thread (spilled registers and the calls' frames)


def nvshmem_bitcode() -> Path | None:
    if os.environ.get("NVSHMEM_DEVICE_BC"):
        return Path(os.environ["NVSHMEM_DEVICE_BC"])
    try:
        import nvidia.nvshmem  # noqa: PLC0415

        for base in nvidia.nvshmem.__path__:
            p = Path(base) / "lib" / "libnvshmem_device.bc"
            if p.is_file():
                return p
    except ImportError:
        pass
    return None


def _kernels():
    """The probe kernel and the NVSHMEM bindings, built on first use (imports triton)."""
    import triton  # noqa: PLC0415
    import triton.language as tl  # noqa: PLC0415
    from triton.language import core  # noqa: PLC0415

    from rshmem.triton import _extern as _x  # noqa: PLC0415
    from rshmem.triton import libshmem_device as rs  # noqa: PLC0415

    # NVSHMEM's C functions with their own types (generic pointers, as rshmem's bindings pass
    # them), so that LLVM inlines them as it does rshmem's. Void functions are called for an
    # int32 that the kernel never uses: LLVM then drops the result and inlines the call.
    def nv(symbol, ret, args, _semantic):
        conv = []
        for a, kind in args:
            if kind == "ptr":
                conv.append(_x.pointer(a, "arg", None, symbol + "(...)", _semantic))
            else:
                conv.append(tl.cast(a, kind, _semantic=_semantic))
        return _x.call(symbol, ret, False, conv, _semantic)

    @core.extern
    def nv_call(symbol, kind, a0=None, a1=None, a2=None, a3=None, a4=None, a5=None, a6=None, _semantic=None):
        symbol = core._unwrap_if_constexpr(symbol)
        kind = core._unwrap_if_constexpr(kind)
        i32, i64, u64 = core.int32, core.int64, core.uint64
        pats = {
            "p": ([(a0, "ptr"), (a1, i32), (a2, i32)], i32),
            "g": ([(a0, "ptr"), (a1, i32)], i32),
            "put": ([(a0, "ptr"), (a1, "ptr"), (a2, u64), (a3, i32)], i32),
            "put_signal": ([(a0, "ptr"), (a1, "ptr"), (a2, u64), (a3, "ptr"), (a4, u64), (a5, i32), (a6, i32)], i32),
            "signal_op": ([(a0, "ptr"), (a1, u64), (a2, i32), (a3, i32)], i32),
            "wait": ([(a0, "ptr"), (a1, i32), (a2, u64)], u64),
            "fadd": ([(a0, "ptr"), (a1, i32), (a2, i32)], i32),
            "any": ([(a0, "ptr"), (a1, u64), (a2, "ptr"), (a3, i32), (a4, i64)], i64),
            "none": ([], i32),
            "bcast": ([(a0, i32), (a1, "ptr"), (a2, "ptr"), (a3, u64), (a4, i32)], i32),
            "reduce": ([(a0, i32), (a1, "ptr"), (a2, "ptr"), (a3, u64)], i32),
        }
        args, ret = pats[kind]
        return nv(symbol, ret, args, _semantic)

    @triton.jit
    def probe(row: tl.constexpr, lib: tl.constexpr, symbol: tl.constexpr, kind: tl.constexpr, out, p32, p64, p8,
              pf32, sig, status, n, pe):
        if lib == "rshmem":
            if row == "p":
                rs.p(p32, 1, pe)
            if row == "g":
                tl.store(out, rs.g(p32, pe).to(tl.int64))
            if row == "putmem":
                rs.putmem(p8, p8, n, pe)
            if row == "putmem_block":
                rs.putmem_block(p8, p8, n, pe)
            if row == "getmem_block":
                rs.getmem_block(p8, p8, n, pe)
            if row == "putmem_signal_nbi":
                rs.putmem_signal_nbi(p8, p8, n, sig, 1, rs.SIGNAL_ADD, pe)
            if row == "putmem_signal_block":
                rs.putmem_signal_block(p8, p8, n, sig, 1, rs.SIGNAL_ADD, pe)
            if row == "signal_op":
                rs.signal_op(sig, 1, rs.SIGNAL_ADD, pe)
            if row == "signal_wait_until":
                tl.store(out, rs.signal_wait_until(sig, rs.CMP_GE, 1).to(tl.int64))
            if row == "atomic_fetch_add":
                tl.store(out, rs.atomic_fetch_add(p32, 1, pe).to(tl.int64))
            if row == "test_any":
                tl.store(out, rs.test_any(p64, n, status, rs.CMP_GE, 1))
            if row == "wait_until_any":
                tl.store(out, rs.wait_until_any(p64, n, status, rs.CMP_GE, 1))
            if row == "quiet":
                rs.quiet()
            if row == "barrier_all_block":
                rs.barrier_all_block()
            if row == "broadcastmem_block":
                rs.broadcastmem_block(rs.TEAM_WORLD, p8, p8, n, 0)
            if row == "sum_reduce_block (fp32)":
                rs.sum_reduce_block(rs.TEAM_WORLD, pf32, pf32, n)
        else:
            if kind == "p":
                nv_call(symbol, kind, p32, 1, pe)
            if kind == "g":
                tl.store(out, nv_call(symbol, kind, p32, pe).to(tl.int64))
            if kind == "put":
                nv_call(symbol, kind, p8, p8, n, pe)
            if kind == "put_signal":
                nv_call(symbol, kind, p8, p8, n, sig, 1, 1, pe)  # 1: NVSHMEM_SIGNAL_ADD
            if kind == "signal_op":
                nv_call(symbol, kind, sig, 1, 1, pe)
            if kind == "wait":
                tl.store(out, nv_call(symbol, kind, sig, 5, 1).to(tl.int64))  # 5: NVSHMEM_CMP_GE
            if kind == "fadd":
                tl.store(out, nv_call(symbol, kind, p32, 1, pe).to(tl.int64))
            if kind == "any":
                tl.store(out, nv_call(symbol, kind, p64, n, status, 5, 1))
            if kind == "none":
                nv_call(symbol, kind)
            if kind == "bcast":
                nv_call(symbol, kind, 0, p8, p8, n, 0)  # 0: NVSHMEM_TEAM_WORLD
            if kind == "reduce":
                nv_call(symbol, kind, 0, pf32, pf32, n)

    return probe


SIGNATURE = {"row": "constexpr", "lib": "constexpr", "symbol": "constexpr", "kind": "constexpr", "out": "*i64",
             "p32": "*i32", "p64": "*i64", "p8": "*u8", "pf32": "*fp32", "sig": "*u64", "status": "*i32", "n": "i64", "pe": "i32"}


def _tool(name: str) -> str:
    import triton  # noqa: PLC0415

    return str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name)


def _entry_body(ptx: str) -> str:
    m = re.search(r"\.entry\s+\w+\s*\(.*?\)\s*(?:\.\w+[^\n]*\n\s*)*\{", ptx, re.S)
    if m is None:
        raise RuntimeError("no .entry in the PTX")
    depth, i = 1, m.end()
    while depth:
        c = ptx[i]
        depth += c == "{"
        depth -= c == "}"
        i += 1
    return ptx[m.end():i - 1]


def _count_ptx(body: str) -> tuple[int, int, tuple[str, ...]]:
    callees = tuple(re.findall(r"\bcall(?:\.uni)?\s+(?:\([^)]*\)\s*,\s*)?([A-Za-z_$][\w$]*)", body))
    n = 0
    for stmt in body.split(";"):
        s = re.sub(r"//[^\n]*", "", stmt).strip()
        s = re.sub(r"^(?:\$?\w+:\s*)+", "", s).strip("{} \n\t")
        if not s or s.startswith("."):
            continue  # declarations (.reg, .param, .local)
        n += 1
    return n, len(callees), callees


def measure(row: str, lib: str, symbol: str, kind: str, bitcode: Path, num_warps: int = NUM_WARPS) -> Measure:
    import triton  # noqa: PLC0415
    from triton.backends.compiler import GPUTarget  # noqa: PLC0415
    from triton.compiler import ASTSource  # noqa: PLC0415

    probe = _kernels()
    src = ASTSource(fn=probe, signature=SIGNATURE, constexprs={"row": row, "lib": lib, "symbol": symbol, "kind": kind})
    libname = "libshmem_device" if lib == "rshmem" else "libnvshmem_device"
    # Triton's cache keys extern libraries by path, not content: a rebuilt bitcode at the same
    # path would be answered from the cache.
    knobs = triton.knobs.compilation
    before = knobs.always_compile
    knobs.always_compile = True
    try:
        k = triton.compile(src, target=GPUTarget("cuda", ARCH, 32),
                           options={"extern_libs": ((libname, str(bitcode)),), "num_warps": num_warps})
    finally:
        knobs.always_compile = before
    with tempfile.TemporaryDirectory() as d:
        cubin = Path(d) / "k.cubin"
        cubin.write_bytes(k.asm["cubin"])
        res = subprocess.run([_tool("cuobjdump"), "-res-usage", str(cubin)], capture_output=True, text=True, check=True)
    usage = [(int(r), int(s)) for r, s in re.findall(r"Function \w+:\s*REG:(\d+) STACK:(\d+)", res.stdout)]
    if not usage:
        raise RuntimeError(f"{row}/{lib}: no register count in cuobjdump's output:\n{res.stdout}")
    ptx, calls, callees = _count_ptx(_entry_body(k.asm["ptx"]))
    return Measure(max(r for r, _s in usage), ptx, calls, callees, max(s for _r, s in usage))


def measure_all(rshmem_bc: Path, nvshmem_bc: Path | None, nvshmem_rows=None) -> dict[tuple[str, str], Measure]:
    """Every SAMPLE row with rshmem; with NVSHMEM the rows named in `nvshmem_rows` (None: all).
    NVSHMEM's bitcode is 31 MB, so each of its kernels takes seconds to link where rshmem's
    takes a fraction of one: the CI check measures a few of them, --write all."""
    out = {}
    for row, _binding, symbol, kind in SAMPLE:
        out[(row, "rshmem")] = measure(row, "rshmem", symbol, kind, rshmem_bc)
        if nvshmem_bc is not None and (nvshmem_rows is None or row in nvshmem_rows):
            out[(row, "nvshmem")] = measure(row, "nvshmem", symbol, kind, nvshmem_bc)
    return out


def measure_launch(rshmem_bc: Path) -> dict[str, Measure]:
    """rshmem's kernel of every BLOCK_ROWS row, compiled for LAUNCH_WARPS warps."""
    kinds = {row: (symbol, kind) for row, _b, symbol, kind in SAMPLE}
    return {row: measure(row, "rshmem", *kinds[row], rshmem_bc, LAUNCH_WARPS) for row in BLOCK_ROWS}


def read_page(text: str) -> dict[tuple[str, str], tuple[int, int, int]]:
    """The (regs, PTX, calls) of each row and library as the page states them."""
    out = {}
    for m in re.finditer(r"^\| `([^`]+)` \| `[^`]+` \| (\d+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \|$", text, re.M):
        row, rr, nr, rp, np_, rc, nc = m.groups()
        out[(row, "rshmem")] = (int(rr), int(rp), int(rc))
        out[(row, "nvshmem")] = (int(nr), int(np_), int(nc))
    return out


def stale(results: dict[tuple[str, str], Measure], page: str, launch: dict[str, Measure] | None = None) -> list[str]:
    """Where the page's numbers differ from `results` and `launch` (only the kernels measured)."""
    stated = read_page(page)
    out = []
    for row, m in (launch or {}).items():
        if f"| `{row}` | {m.regs} | {m.stack} |" not in page.splitlines():
            out.append(f"{row} / rshmem at {LAUNCH_WARPS} warps: measured regs={m.regs} stack={m.stack}, "
                       "not what the page says")
    for key, m in results.items():
        if stated.get(key) != (m.regs, m.ptx, m.calls):
            out.append(f"{key[0]} / {key[1]}: measured regs={m.regs} PTX={m.ptx} calls={m.calls}, "
                       f"the page says {stated.get(key)}")
    missing = {r for r, _b, _s, _k in SAMPLE} - {k[0] for k in stated}
    out += [f"{r}: not on the page" for r in sorted(missing)]
    return out


def render(results: dict[tuple[str, str], Measure], launch: dict[str, Measure]) -> str:
    lines = [
        "# Device-code footprint: rshmem against NVSHMEM",
        "",
        "Generated by `tools/device_footprint.py --write` (do not edit); "
        "`tests/device/test_device_footprint.py` checks that it is current, that every rshmem kernel "
        "keeps its rare paths out of line, and that every `_block` kernel compiles for a 1024-thread "
        f"block within {MAX_REGS_1024} registers per thread.",
        "",
        f"One small Triton kernel per function (sm_{ARCH}, {NUM_WARPS} warps, no GPU needed), the same kernel linked "
        "with rshmem's `libshmem_device.bc` or with NVSHMEM 3.4.5's `libnvshmem_device.bc` (the "
        "`nvidia-nvshmem-cu13` wheel). **regs**: registers per thread of the cubin, the kernel with "
        f"every function it calls (`cuobjdump -res-usage`); with {NUM_WARPS} warps ptxas may use up to 255. "
        "**PTX**: instructions of the kernel body, i.e. the common path inlined there, not "
        "counting the functions it calls. **calls**: calls left in the body: rshmem's are its rare "
        "paths (the proxy ring for PEs on other hosts, debug-wait timeouts, error records), kept "
        "out of line on purpose (`RSHMEMI_COLD` in `triton-lib/src/device.h`).",
        "",
        "| function | NVSHMEM symbol | rshmem regs | NVSHMEM regs | rshmem PTX | NVSHMEM PTX | rshmem calls | NVSHMEM calls |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row, _binding, symbol, _kind in SAMPLE:
        r = results[(row, "rshmem")]
        n = results[(row, "nvshmem")]
        lines.append(f"| `{row}` | `{symbol}` | {r.regs} | {n.regs} | {r.ptx} | {n.ptx} | {r.calls} | {n.calls} |")
    lines += [
        "",
        "## Registers per front end",
        "",
        "Triton emits `.reqntid` from `num_warps`, so ptxas fits a Triton kernel's registers to its "
        "launch size: it never fails to launch for registers. The same `_block` kernels compiled "
        f"with {LAUNCH_WARPS} warps (1024 threads), rshmem's library:",
        "",
        "| function | rshmem regs, 1024 threads | stack (bytes per thread) |",
        "|---|---:|---:|",
    ]
    for row in BLOCK_ROWS:
        m = launch[row]
        lines.append(f"| `{row}` | {m.regs} | {m.stack} |")
    lines += [
        "",
        "The Triton bitcode is built with `RSHMEM_COPY_UNROLL=16` (`triton-lib/build.py`, "
        "`TRITON_DEFINES`): each thread loads 16 vectors of 16 bytes before storing any, which keeps "
        "enough bytes in flight for small CTAs. Measured with `benchmarks/microbench/put_copy.cu` "
        "(2 x H200 over NVLink, 256 MiB, 8 CTAs of 128 threads, Triton's `num_warps=4`): "
        "`putmem_block` moved 308 GB/s with 16 vectors and 209 GB/s with 8 (with 256 threads 349 "
        "against 343; with 512 all about 355). The 16-vector loop takes the registers the "
        f"first table shows at {NUM_WARPS} warps; with more threads ptxas fits it to fewer, keeping the "
        "rest on the stack (second table).",
        "",
        "CUDA C++ (nvcc, `nvshmem.h` / `rshmem.h`) and Numba (the NVRTC LTO-IR) kernels carry no launch "
        "bound, so ptxas takes what the code needs and a block whose threads need more than the SM "
        "holds fails to launch (`CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES`). Their copy loops keep fewer "
        "vectors in flight: 4 per thread in Numba's (`triton-lib/src/copy_device.h`'s default), 2 in "
        "CUDA C++'s (`rshmem_cuda.h`: with 4, a kernel calling a g, a `_warp` put and a `_block` put, "
        "as NVIDIA's `moe_shuffle` example does, needed 70-78 registers per thread; with 2, 52-60), "
        f"so a 1024-thread block calling a `_block` put stays within {MAX_REGS_1024} registers per "
        "thread: `examples/compile_cuda.sh` checks it for `capi/tests/nvshmem_put_block_1024.cu` and "
        "`nvshmem_shuffle_1024.cu` (nvcc), "
        "`tests/numba_device/test_numba_compile.py` for a Numba `put_block` kernel (1024 threads) and "
        "tutorial 06's ring all-reduce (512 threads). The block-scope collectives fit too: their "
        "staging and push copy keeps 1 vector per thread there (`RSHMEM_COLL_COPY_UNROLL` in "
        "`triton-lib/src/rma_device.h`; 2 in the Triton bitcode) and the failure paths are `noreturn` "
        "(NVVM does not know that `trap` ends a thread, and kept values live across the call to "
        "them). ptxas allocates a whole program's registers at once (nvcc without `-rdc`, "
        "nvJitLink), so values live across a call and the callee's own add up. nvcc at sm_90, "
        "1024 threads, registers per thread: barriers 54, broadcast 58 (broadcastmem 54), fcollect / "
        "alltoall 54, reductions 64 (90-92 before the failure paths were marked). Numba, measured as "
        "numba-cuda links a kernel at launch (its LTO-IR and the library's assembled in one nvJitLink "
        "call; the PTX that `rshmem.numba.compile_ptx` returns, assembled on its own, reads 10-20 "
        "fewer, which is what an earlier check measured): put_block 40, barriers 44-54, broadcast 54, "
        "fcollect / alltoall 60, reductions 62-64. `examples/compile_cuda.sh` checks every kernel of "
        "`capi/tests/nvshmem_coll_block_1024.cu` (nvcc), `tests/numba_device/test_numba_compile.py` "
        f"the Numba ones, against {MAX_REGS_1024}. One exception in both: a block-scope "
        "reduce-scatter needs 66 to 70 registers per thread under nvcc and 70 in Numba, so a "
        "1024-thread kernel that calls one needs a cap: `__launch_bounds__(1024)` in CUDA C++ "
        "(ptxas then fits it in 61, no spills), `max_registers=64` in Numba (64, no spills; "
        "without it the launch fails with `CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES`, as "
        "`tests/numba_device/test_numba_gpu.py` saw on an H200).",
        "",
    ]
    return "\n".join(lines)


def problems(results: dict[tuple[str, str], Measure], launch: dict[str, Measure]) -> list[str]:
    """What the CI check refuses in rshmem's kernels (`launch`: measure_launch's)."""
    out = []
    for row, m in launch.items():
        if m.regs > MAX_REGS_1024:
            out.append(f"{row}: {m.regs} registers per thread at {LAUNCH_WARPS} warps; a 1024-thread block "
                       f"needs <= {MAX_REGS_1024}")
    for row, _b, _s, _k in SAMPLE:
        m = results.get((row, "rshmem"))
        if m is None:
            continue
        foreign = [c for c in m.callees if "rshmemi_" not in c]
        if foreign:
            out.append(f"{row}: calls {foreign} were not inlined (a binding's types differ from the C definition's?)")
        if row in MUST_CALL and not m.callees:
            out.append(f"{row}: no call left in the kernel: its rare path was inlined into the common path")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--write", action="store_true", help=f"regenerate {PAGE.relative_to(ROOT)}")
    g.add_argument("--check", action="store_true", help="exit 1 when the page is stale or a kernel is refused")
    ap.add_argument("--bitcode", type=Path, default=None, help="rshmem's libshmem_device.bc (default: the packaged one)")
    args = ap.parse_args()
    if args.bitcode is None:
        import rshmem.triton as rt  # noqa: PLC0415

        args.bitcode = Path(rt.bitcode_path())
    nv = nvshmem_bitcode()
    if nv is None:
        sys.exit("device_footprint.py: NVSHMEM's libnvshmem_device.bc not found (pip install nvidia-nvshmem-cu13, "
                 "or set NVSHMEM_DEVICE_BC)")
    results = measure_all(args.bitcode, nv)
    launch = measure_launch(args.bitcode)
    text = render(results, launch)
    bad = problems(results, launch)
    for b in bad:
        print("device_footprint.py:", b, file=sys.stderr)
    if args.write:
        PAGE.write_text(text)
        print(f"device_footprint.py: wrote {PAGE}")
        return 1 if bad else 0
    if PAGE.read_text() != text:
        for d in stale(results, PAGE.read_text()) or ["the prose differs"]:
            print("device_footprint.py:", d, file=sys.stderr)
        print(f"device_footprint.py: {PAGE} is stale; run tools/device_footprint.py --write", file=sys.stderr)
        return 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
