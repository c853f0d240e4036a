#!/usr/bin/env python3
"""Builds the rshmem device library: libshmem_device.bc (for Triton) and .ptx (for the runtime).

    python triton-lib/build.py [--out-dir DIR] [--python-out PATH] [--extra-cu FILE ...]

Steps:
  1. clang-19 compiles src/libshmem_device.cu (with TRITON_DEFINES) as CUDA device code for the baseline architecture
     (ARCH, sm_80) to LLVM bitcode, so a kernel Triton compiles for any supported GPU (SUPPORTED:
     sm_80, sm_89, sm_90, sm_100) gets only instructions that GPU has: nothing of the library
     needs more than sm_80, and what sm_90 alone has (bulk copies, RSHMEM_COPY_STRATEGY=2) is
     refused at build time below sm_90. tests/device/test_device_archs.py assembles the library
     with ptxas for every supported architecture and compiles a sample of functions for each.
  2. The `nvvm-reflect-ftz` module flag clang emits is removed (llvm-dis -> drop the flag ->
     llvm-as): Triton adds its own with Override behaviour, and linking two differing
     definitions fails. The state global `rshmemi_device_state_d` stays, held by
     llvm.compiler.used.
  3. Every C symbol of include/rshmem/api.h must be defined in the bitcode (llvm-nm).
  4. The bitcode (plus any --extra-cu sources, e.g. the runtime's own kernels) is lowered to PTX
     with llc-19.
  5. Steps 1-3 again with -DRSHMEM_CHECK=1 give libshmem_device.check.bc, the check-mode
     variant (device-side address checks, src/peer_device.h), which rshmem.triton links when
     RSHMEM_CHECK=1; the default library has no trace of the checks.
     The bitcode is copied to --python-out (default python/rshmem/triton/lib/libshmem_device.bc,
     or $RSHMEM_DEVICE_BC_OUT), where rshmem.triton.extern_libs() finds it.
  6. src/torch_nvshmem.cu (NVSHMEM's device names with the types torch's Triton NVSHMEM extension
     declares) linked with the library gives libnvshmem_device.bc, one self-contained bitcode that
     rshmem.torch_symm_mem hands to torch's `requires_nvshmem` kernels in place of NVSHMEM's; it
     is copied beside the library (--python-out) and checked to call nothing it does not define.
  7. When NVRTC and the CUDA headers are here (cuda-bindings, nvidia-cuda-nvrtc, -runtime and
     -cccl: torch and numba-cuda[cu13] install them), the same sources become
     libshmem_device.ltoir for Numba kernels (ltoir.py: compute_80, which nvJitLink links into
     kernels for every SUPPORTED architecture), copied to python/rshmem/numba/lib/
     (--ltoir-out); without them this step is skipped with a note saying what is missing.

Tools are looked up as clang-19 / llvm-dis-19 / llvm-as-19 / llvm-nm-19 / llvm-link-19 / llc-19,
overridable with $RSHMEM_LLVM_SUFFIX (e.g. "" for unsuffixed tools) or $RSHMEM_LLVM_BIN.
No Python dependencies.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SRC = HERE / "src" / "libshmem_device.cu"
INCLUDE = HERE / "include"
API_H = INCLUDE / "rshmem" / "api.h"
DEFAULT_OUT = HERE / "build"
# The check-mode variant's file name, beside the default one.
CHECK_NAME = "libshmem_device.check.bc"
# Step 6: torch's extension links a library by this file name's role ("libnvshmem_device").
TORCH_SRC = HERE / "src" / "torch_nvshmem.cu"
TORCH_NAME = "libnvshmem_device.bc"
DEFAULT_PY_OUT = ROOT / "python" / "rshmem" / "triton" / "lib" / "libshmem_device.bc"
DEFAULT_LTOIR_OUT = ROOT / "python" / "rshmem" / "numba" / "lib" / "libshmem_device.ltoir"
STATE_GLOBAL = "rshmemi_device_state_d"
# The oldest architecture the library supports, which the bitcode is built for; PTX ISA 8.0 (CUDA
# 12.0 drivers and newer), the version Triton 3.6 emits too.
ARCH = "sm_80"
PTX_FEATURE = "+ptx80"
# The GPUs rshmem supports (README, "GPUs"): A100 (sm_80), L40/L4 (sm_89), H100/H200 (sm_90),
# B200 (sm_100). The runtime's own kernels are assembled for the same list (CUBIN_ARCHS in
# runtime/build.rs).
SUPPORTED = ("sm_80", "sm_89", "sm_90", "sm_100")
CLANG_FLAGS = [
    "-x", "cuda", "--cuda-device-only", "-nocudainc", "-nocudalib", f"--cuda-gpu-arch={ARCH}",
    f"--cuda-feature={PTX_FEATURE}", "-O3", "-std=c++17", "-fwrapv", "-Wall", "-Werror",
    "-Wno-unknown-cuda-version", "-ffp-contract=fast",
]


# Defines of both bitcode variants (the library Triton links), not of the CUDA C++ headers nor
# the Numba LTO-IR: the copy loop keeps 16 vectors per thread in flight (copy_device.h: 308 GB/s
# against 209 with 8, 8 CTAs of 128 threads). Triton compiles every kernel with .maxntid from
# num_warps, so ptxas fits the loop's registers to the launch and a kernel never fails to launch
# for them; kernels compiled without launch bounds keep copy_device.h's default of 4
# (docs/device-footprint.md).
# A barrier that stops names the members that had not entered it (barrier_device.h), for the
# same reason: a launch-bounded kernel affords the failure path's registers.
TRITON_DEFINES = ("RSHMEM_COPY_UNROLL=16", "RSHMEM_BARRIER_NAMES_MISSING=1")


def tool(name: str) -> str:
    suffix = os.environ.get("RSHMEM_LLVM_SUFFIX", "-19")
    exe = name + suffix
    bindir = os.environ.get("RSHMEM_LLVM_BIN")
    path = str(Path(bindir) / exe) if bindir else shutil.which(exe)
    if not path or not Path(path).exists():
        sys.exit(f"build.py: {exe} not found; install clang-19/llvm-19 (apt-get install clang-19 llvm-19) "
                 f"or set RSHMEM_LLVM_BIN / RSHMEM_LLVM_SUFFIX")
    return path


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"build.py: command failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr}")
    return r


def compile_bc(src: Path, out: Path, defines: tuple[str, ...] = ()) -> None:
    run([tool("clang"), *CLANG_FLAGS, *(f"-D{d}" for d in defines), f"-I{INCLUDE}", f"-I{HERE / 'src'}",
         "-emit-llvm", "-c", str(src), "-o", str(out)])


def build_library(out: Path, name: str, defines: tuple[str, ...] = ()) -> tuple[Path, int]:
    """Steps 1-3 for one variant of the library: `out/name`, and its number of functions."""
    raw = out / (name + ".raw")
    bc = out / name
    compile_bc(SRC, raw, defines)
    strip_reflect_ftz(raw, bc)
    raw.unlink()
    return bc, check_symbols(bc)


def strip_reflect_ftz(bc: Path, out: Path) -> None:
    """Drops the nvvm-reflect-ftz module flag (and only it) from the bitcode."""
    text = run([tool("llvm-dis"), str(bc), "-o", "-"]).stdout
    flag = re.search(r'^(![0-9]+) = !\{i32 \d+, !"nvvm-reflect-ftz", i32 \d+\}\n', text, re.M)
    if flag:
        ref = flag.group(1)
        text = text[:flag.start()] + text[flag.end():]
        m = re.search(r"^!llvm\.module\.flags = !\{(.*)\}$", text, re.M)
        if m is None:
            sys.exit("build.py: nvvm-reflect-ftz flag found but no !llvm.module.flags list")
        refs = [r.strip() for r in m.group(1).split(",") if r.strip() != ref]
        text = text[:m.start()] + "!llvm.module.flags = !{" + ", ".join(refs) + "}" + text[m.end():]
    if "nvvm-reflect-ftz" in text:
        sys.exit("build.py: could not remove the nvvm-reflect-ftz module flag")
    if not re.search(rf"^@llvm\.compiler\.used = .*@{STATE_GLOBAL}\b", text, re.M):
        sys.exit(f"build.py: {STATE_GLOBAL} is not in llvm.compiler.used; the runtime could not find it")
    run([tool("llvm-as"), "-", "-o", str(out)], input=text)


def check_symbols(bc: Path) -> int:
    declared = set(re.findall(r"^RSHMEM_API_DEVICE .*?\b(rshmemx?_\w+)\(", API_H.read_text(), re.M))
    nm = run([tool("llvm-nm"), "--defined-only", "-j", str(bc)]).stdout.split()
    missing = sorted(declared - set(nm))
    if missing:
        sys.exit(f"build.py: declared in api.h but not defined in {SRC.name}: {', '.join(missing)}")
    if STATE_GLOBAL not in nm:
        sys.exit(f"build.py: {STATE_GLOBAL} is not defined")
    return len(declared)


def build_torch_library(out: Path, library: Path) -> tuple[Path, int]:
    """Step 6: the wrappers linked with `library` (already without the ftz flag), and the number
    of NVSHMEM names they define. Every function the result calls is defined in it (LLVM's
    intrinsics and the CUDA runtime's printf aside), so a missing rshmem symbol fails here, not
    in a user's kernel."""
    raw, linked, bc = out / "torch_nvshmem.bc.raw", out / (TORCH_NAME + ".raw"), out / TORCH_NAME
    compile_bc(TORCH_SRC, raw, TRITON_DEFINES)
    run([tool("llvm-link"), str(library), str(raw), "-o", str(linked)])
    strip_reflect_ftz(linked, bc)
    raw.unlink()
    linked.unlink()
    undefined = [s for s in run([tool("llvm-nm"), "--undefined-only", "-j", str(bc)]).stdout.split()
                 if not s.startswith("llvm.") and s != "vprintf"]
    if undefined:
        sys.exit(f"build.py: {TORCH_NAME} calls functions it does not define: {', '.join(undefined)}")
    names = [s for s in run([tool("llvm-nm"), "--defined-only", "-j", str(bc)]).stdout.split() if s.startswith("nvshmem")]
    return bc, len(names)


def emit_ptx(bcs: list[Path], out_dir: Path) -> Path:
    linked = out_dir / "libshmem_device.linked.bc"
    if len(bcs) > 1:
        run([tool("llvm-link"), *map(str, bcs), "-o", str(linked)])
    else:
        linked = bcs[0]
    ptx = out_dir / "libshmem_device.ptx"
    run([tool("llc"), "-O3", "-march=nvptx64", f"-mcpu={ARCH}", f"-mattr={PTX_FEATURE}", str(linked), "-o", str(ptx)])
    return ptx


def main() -> int:
    ap = argparse.ArgumentParser(description="Build libshmem_device.bc and .ptx")
    ap.add_argument("--out-dir", type=Path, default=DEFAULT_OUT, help="where .bc and .ptx go (default triton-lib/build)")
    # str, not Path: Path("") is "." and would not read as "skip".
    ap.add_argument("--python-out", default=str(os.environ.get("RSHMEM_DEVICE_BC_OUT", DEFAULT_PY_OUT)),
                    help="copy of the .bc that rshmem.triton loads ('' to skip)")
    ap.add_argument("--extra-cu", type=Path, action="append", default=[],
                    help="more CUDA sources (e.g. the runtime's kernels) linked into the PTX only")
    ap.add_argument("--ltoir-out", default=str(DEFAULT_LTOIR_OUT),
                    help="copy of the LTO-IR that rshmem.numba links ('' to skip the LTO-IR)")
    args = ap.parse_args()

    out = args.out_dir
    out.mkdir(parents=True, exist_ok=True)
    bc, n = build_library(out, "libshmem_device.bc", TRITON_DEFINES)
    # The check-mode variant (peer_device.h, "Check mode"): the same library with its address
    # checks compiled in, which rshmem.triton links under RSHMEM_CHECK=1.
    check_bc, _ = build_library(out, CHECK_NAME, (*TRITON_DEFINES, "RSHMEM_CHECK=1"))
    torch_bc, n_torch = build_torch_library(out, bc)
    extras = []
    for i, cu in enumerate(args.extra_cu):
        extra = out / f"extra{i}.bc"
        compile_bc(cu, extra)
        extras.append(extra)
    ptx = emit_ptx([bc, *extras], out)
    print(f"build.py: {bc} ({n} functions), {ptx}, {torch_bc} ({n_torch} NVSHMEM names)")
    if args.python_out:
        py_out = Path(args.python_out)
        py_out.parent.mkdir(parents=True, exist_ok=True)
        install(bc, py_out)
        install(check_bc, py_out.parent / CHECK_NAME)
        install(torch_bc, py_out.parent / TORCH_NAME)
        print(f"build.py: copied to {args.python_out} (and {CHECK_NAME}, {TORCH_NAME} beside it)")
    if args.ltoir_out:
        build_ltoir(out, Path(args.ltoir_out))
    return 0


def install(src: Path, dst: Path) -> None:
    """Copies src over dst by a rename: a process that has dst mapped (LLVM maps the bitcode it
    links; two pytest workers may rebuild at once) keeps the old file instead of reading a
    half-written one (SIGBUS)."""
    tmp = dst.with_name(f".{dst.name}.{os.getpid()}.tmp")
    shutil.copyfile(src, tmp)
    os.replace(tmp, dst)


def build_ltoir(out: Path, copy_to: Path) -> None:
    """Step 7: the LTO-IR for Numba kernels, when NVRTC is here."""
    sys.path.insert(0, str(HERE))
    import ltoir  # noqa: PLC0415 (beside this file)

    lacking = ltoir.missing()
    if lacking:
        print(f"build.py: skipped libshmem_device.ltoir, which rshmem.numba needs: {lacking}")
        return
    try:
        path = ltoir.build(out / "libshmem_device.ltoir")
    except ltoir.LtoirError as e:
        sys.exit(f"build.py: {e}")
    copy_to.parent.mkdir(parents=True, exist_ok=True)
    install(path, copy_to)
    print(f"build.py: {path} (NVRTC), copied to {copy_to}")


if __name__ == "__main__":
    sys.exit(main())
