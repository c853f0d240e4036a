"""Every Triton kernel of the tutorials and of the GPU tests (memory model, concurrency) compiles
to an sm_90 cubin, with the device library linked, on a machine without a GPU.

The GPU runs of those kernels need 2 GPUs; this test is what CI can prove everywhere: the
kernels trace (argument types match the bindings), link against ``libshmem_device.bc`` and lower
to SASS, and every library call is inlined (a call left in the PTX means a binding's types differ
from the C definition's). Each kernel is compiled with the argument types its program launches it
with, including Triton's specialization of an integer argument equal to 1 into a constant.

A kernel added to a tutorial, tests/device/test_device_memory_model.py or tests/tensors/test_cuda_concurrency.py
without a row in ``CASES`` fails ``test_every_kernel_has_a_case``.

Needs triton and either a built ``libshmem_device.bc`` or clang-19 to build it; skips otherwise.
Run: ``PYTHONPATH=python python -m pytest tests/tutorials/test_tutorial_kernels_compile.py -q``.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
triton = pytest.importorskip("triton", reason="triton is not installed")
pytest.importorskip("torch", reason="torch is not installed")

from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402
from triton.runtime.jit import JITFunction  # noqa: E402
from ptx_calls import foreign_calls  # noqa: E402 - tests/ptx_calls.py

# Compiling needs one process only; under torchrun the other ranks would repeat the same work.
pytestmark = pytest.mark.single

TARGET = GPUTarget("cuda", 90, 32)
BUNDLED_BC = ROOT / "python" / "rshmem" / "triton" / "lib" / "libshmem_device.bc"

TUTORIALS = {
    "01": "tutorials/01_notify_wait.py",
    "02": "tutorials/02_intra_node_allgather.py",
    "03": "tutorials/03_ring_allreduce.py",
    "04": "tutorials/04_simple_shift.py",
}
MEMORY_MODEL = "mm"  # tests/device/test_device_memory_model.py
CONCURRENCY = "conc"  # tests/tensors/test_cuda_concurrency.py
TEST_MODULES = {MEMORY_MODEL: ("device", "test_device_memory_model"), CONCURRENCY: ("tensors", "test_cuda_concurrency")}

# (module, kernel, signature, constexprs, num_warps). Signatures follow the launches: tensors as
# pointers of their dtype, Python ints as i32, an int equal to 1 as a constexpr.
_MM_PTRS = {"buf": "*i32", "src": "*i32", "sig": "*i64", "ack": "*i64", "errors": "*i32"}
CASES = [
    ("01", "producer_kernel", {"slot": "*fp32", "messages": "*fp32", "ready": "*i64", "free": "*i64",
                               "n_elems": "i32", "rounds": "i32", "consumer": "constexpr"}, {"consumer": 1}, 4),
    ("01", "producer_kernel", {"slot": "*fp32", "messages": "*fp32", "ready": "*i64", "free": "*i64",
                               "n_elems": "i32", "rounds": "constexpr", "consumer": "i32"}, {"rounds": 1}, 4),
    ("01", "consumer_kernel", {"slot": "*fp32", "received": "*fp32", "ready": "*i64", "free": "*i64",
                               "n_elems": "i32", "rounds": "i32", "producer": "i32", "BLOCK": "constexpr"},
     {"BLOCK": 1024}, 4),
    ("02", "push_allgather_kernel", {"full": "*fp16", "local": "*fp16", "sig": "*i64", "rows": "i32",
                                     "n_cols": "i32", "epoch": "constexpr", "ELEM_BYTES": "constexpr"},
     {"epoch": 1, "ELEM_BYTES": 2}, 16),
    ("02", "push_allgather_kernel", {"full": "*fp16", "local": "*fp16", "sig": "*i64", "rows": "i32",
                                     "n_cols": "i32", "epoch": "i32", "ELEM_BYTES": "constexpr"},
     {"ELEM_BYTES": 2}, 16),
    ("03", "ring_allreduce_kernel", {"x": "*fp32", "out": "*fp32", "recv": "*fp32", "sig": "*i64", "seg_elems": "i32",
                                     "chunk_elems": "i32", "epoch": "i32", "ELEM_BYTES": "constexpr",
                                     "BLOCK": "constexpr"}, {"ELEM_BYTES": 4, "BLOCK": 2048}, 8),
    ("03", "ring_allreduce_kernel", {"x": "*fp32", "out": "*fp32", "recv": "*fp32", "sig": "*i64", "seg_elems": "i32",
                                     "chunk_elems": "i32", "epoch": "constexpr", "ELEM_BYTES": "constexpr",
                                     "BLOCK": "constexpr"}, {"epoch": 1, "ELEM_BYTES": 4, "BLOCK": 2048}, 8),
    ("04", "shift_kernel", {"dest": "*i32", "vec_dest": "*i32", "vec_src": "*i32", "vec_bytes": "i32"}, {}, 4),
    ("04", "barrier_kernel", {}, {}, 4),
]
for _form in ("putmem_signal", "putmem_signal_nbi", "putmem_signal_warp", "putmem_signal_nbi_warp",
              "putmem_signal_block", "putmem_signal_nbi_block"):
    CASES.append((MEMORY_MODEL, "signal_then_data_kernel", {**_MM_PTRS, "n_elems": "i32", "rounds": "i32",
                                                            "FORM": "constexpr", "BLOCK": "constexpr"},
                  {"FORM": _form, "BLOCK": 4096}, 4))
for _wait, _flag in (("signal_wait_until", "*i64"), ("wait_until_int64", "*i64"), ("wait_until_int32", "*i32")):
    CASES.append((MEMORY_MODEL, "acquire_kernel", {"buf": "*i32", "src": "*i32", "flag": _flag, "ack": "*i64",
                                                   "errors": "*i32", "bad_seen": "*i32", "n_elems": "i32",
                                                   "rounds": "i32", "WAIT": "constexpr", "BLOCK": "constexpr"},
                  {"WAIT": _wait, "BLOCK": 4096}, 4))
for _first in ("putmem", "p", "atomic_add", "atomic_set"):
    CASES.append((MEMORY_MODEL, "fence_kernel", {"data": "*i64", "src": "*i64", "flag": "*i64", "errors": "*i32",
                                                 "rounds": "i32", "FIRST": "constexpr"}, {"FIRST": _first}, 1))
for _op in ("putmem", "putmem_nbi", "putmem_nbi_warp", "putmem_nbi_block", "int_p", "atomic_add", "signal_op"):
    CASES.append((MEMORY_MODEL, "quiet_kernel", {"buf": "*i32", "src": "*i32", "ctr": "*i64", "sigw": "*i64",
                                                 "flag": "*i64", "ack": "*i64", "errors": "*i32", "n_elems": "i32",
                                                 "rounds": "i32", "OP": "constexpr", "BLOCK": "constexpr"},
                  {"OP": _op, "BLOCK": 4096}, 4))
for _scope in ("thread", "warp", "block"):
    CASES.append((MEMORY_MODEL, "barrier_quiet_kernel", {"buf": "*i32", "src": "*i32", "errors": "*i32",
                                                         "n_elems": "i32", "rounds": "i32", "SCOPE": "constexpr",
                                                         "BLOCK": "constexpr"}, {"SCOPE": _scope, "BLOCK": 4096}, 4))
    CASES.append((MEMORY_MODEL, "arrival_kernel", {"ctr": "*i64", "errors": "*i32", "iters": "i32",
                                                   "SCOPE": "constexpr"}, {"SCOPE": _scope}, 4))
CASES += [
    (MEMORY_MODEL, "stress_kernel", {"inbox": "*u8", "outbox": "*u8", "sizes": "*i32", "offsets": "*i32", "sig": "*i64",
                                     "ack": "*i64", "errors": "*i32", "rounds": "i32", "BLOCK": "constexpr"},
     {"BLOCK": 4096}, 4),
    (MEMORY_MODEL, "unmatched_wait_kernel", {"sig": "*i64", "WHICH": "constexpr"}, {"WHICH": 2}, 4),
    (CONCURRENCY, "two_cta_barrier_kernel", {"flag": "*i32", "out": "*i32", "delay_ns": "i32"}, {}, 4),
]


# ------------------------------------------------------------------ rshmem.ops (the fused ops)
# Every kernel of rshmem.ops compiles with the options the ops launch it with (warps, stages) and
# fits in sm_90's shared memory; every GEMM configuration the ops may choose is compiled. A kernel
# added to rshmem.ops without a row in OPS_CASES fails test_every_ops_kernel_has_a_case.
# (module, kernel, signature, constexprs, options): each row as the ops launch it.
OPS_MODULES = {"ops_gemm": "rshmem.ops._kernels_gemm", "ops_ar": "rshmem.ops._kernels_ar"}
SM90_SHARED_BYTES = 232448  # 227 KiB, the most one block may opt in to on sm_90


GATHERED_A_SIG = {"a_loc": "*u8", "buf": "*u8", "full": "*u8", "lo": "i32", "hi": "i32", "total": "i32"}


def _desc(dtype: str, *block) -> str:
    return f"tensordesc<{dtype}[{', '.join(str(b) for b in block)}]>"


def _ops_cases() -> list:
    from rshmem.ops import _tuning

    out = []
    ints = lambda *names: {n: "i32" for n in names}  # noqa: E731
    ws = {"flags": "*i64", "counter": "*i32", "busy": "*i64", "pes": "*i32"}
    ag_ints = ints("me", "W", "m", "N", "K", "stride_bk", "stride_bn", "chunk_rows", "n_chunks", "flag_stride", "num_sms")
    rs_ints = ints("me", "W", "m", "N", "K", "stride_bk", "stride_bn", "flag_stride", "num_sms")

    def ag(cfg, dt, tma, b_t, comm, release):
        c = cfg
        cdt = "bf16" if dt == "fp8e4nv" else dt  # fp8 inputs give a bf16 C
        sig = {"a_loc": _desc(dt, c.BM, c.BK) if tma else f"*{dt}", "a_buf": _desc(dt, 1, c.BM, c.BK) if tma else f"*{dt}",
               "b": (_desc(dt, c.BN, c.BK) if b_t else _desc(dt, c.BK, c.BN)) if tma else f"*{dt}",
               "c": _desc(cdt, 1, c.BM, c.BN // 2 if c.split_c else c.BN) if tma else f"*{cdt}", **ws, **ag_ints}
        consts = dict(BM=c.BM, BN=c.BN, BK=c.BK, GROUP_M=c.GROUP_M, TMA=tma, B_T=b_t, COMM=comm, RELEASE=release,
                      FLATTEN=c.flatten and tma, RESET_BLOCK=64, SPLIT_C=c.split_c and tma)
        out.append(("ops_gemm", "ag_gemm_kernel", sig, consts, {"num_warps": c.warps, "num_stages": c.stages}))

    def rs(cfg, dt, tma, b_t, comm):
        c = cfg
        sig = {"a": _desc(dt, 1, c.BM, c.BK) if tma else f"*{dt}",
               "b": (_desc(dt, c.BN, c.BK) if b_t else _desc(dt, c.BK, c.BN)) if tma else f"*{dt}",
               "c": ((_desc(dt, c.BM, c.BN) if comm else _desc(dt, 1, c.BM, c.BN)) if tma else f"*{dt}"),
               "recv": f"*{dt}", **ws, **rs_ints}
        consts = dict(BM=c.BM, BN=c.BN, BK=c.BK, GROUP_M=c.GROUP_M, TMA=tma, B_T=b_t, COMM=comm,
                      FLATTEN=c.flatten and tma, RESET_BLOCK=1024)
        out.append(("ops_gemm", "gemm_rs_kernel", sig, consts, {"num_warps": c.warps, "num_stages": c.stages}))

    for cfg in _tuning.AG_CANDIDATES:  # every configuration the tuner may pick
        ag(cfg, "bf16", True, False, True, True)
    first = _tuning.AG_CANDIDATES[0]
    ag(first, "fp16", True, True, True, False)  # weight.t(), gathered A copied out (release kernel)
    ag(first, "bf16", True, False, False, False)  # the GEMM alone
    ag(_tuning.POINTER_CONFIG, "bf16", False, False, True, True)
    ag(_tuning.POINTER_CONFIG, "fp16", False, False, False, False)
    # a PE whose tensors TMA cannot take runs the pointer form with the tiling every PE agreed on
    ag(_tuning.AG_CANDIDATES[1], "bf16", False, True, True, True)
    # fp8 (e4m3): every configuration with the weight as nn.Linear keeps it (K-major, as wgmma's
    # fp8 form wants), one with a row-major B, the GEMM alone, the pointer form
    for cfg in _tuning.AG_FP8_CANDIDATES:
        ag(cfg, "fp8e4nv", True, True, True, True)
    ag(_tuning.AG_FP8_CANDIDATES[0], "fp8e4nv", True, False, True, False)
    ag(_tuning.AG_FP8_CANDIDATES[0], "fp8e4nv", True, True, False, False)
    ag(_tuning.POINTER_FP8_CONFIG, "fp8e4nv", False, True, True, True)
    # fp32 (TF32 wgmma): every configuration the tuner may pick, both B layouts, the pointer form
    for cfg in _tuning.AG_F32_CANDIDATES:
        ag(cfg, "fp32", True, False, True, True)
    ag(_tuning.AG_F32_CANDIDATES[0], "fp32", True, True, True, False)
    ag(_tuning.POINTER_F32_CONFIG, "fp32", False, True, True, True)
    for cfg in _tuning.RS_F32_CANDIDATES:
        rs(cfg, "fp32", True, True, True)
    rs(_tuning.RS_F32_CANDIDATES[0], "fp32", True, False, False)
    rs(_tuning.POINTER_F32_CONFIG, "fp32", False, False, True)
    for cfg in _tuning.RS_CANDIDATES:
        rs(cfg, "bf16", True, False, True)
    rs(_tuning.RS_CANDIDATES[0], "fp16", True, True, False)
    rs(_tuning.POINTER_CONFIG, "bf16", False, False, True)
    rs(_tuning.POINTER_CONFIG, "fp16", False, True, False)
    rs(_tuning.RS_CANDIDATES[0], "bf16", False, False, True)
    out.append(("ops_gemm", "ag_push_kernel", {"a_shard": "*u8", "buf": "*u8", "flags": "*i64", "pes": "*i32",
                                               **ints("me", "W", "m", "row_bytes", "chunk_rows", "flag_stride")},
                {}, {"num_warps": 16}))
    out.append(("ops_gemm", "ag_gather_kernel", {"a_shard": "*u8", "buf": "*u8", "flags": "*i64", "busy": "*i64",
                                                 "pes": "*i32", **ints("me", "W", "my_pe", "m", "row_bytes",
                                                                       "flag_stride")},
                {}, {"num_warps": 16}))
    out.append(("ops_gemm", "release_kernel", {**ws, **ints("me", "W", "n_flags", "flag_stride")},
                {"RESET_BLOCK": 64}, {"num_warps": 4}))
    out.append(("ops_gemm", "gathered_a_kernel", GATHERED_A_SIG, {"BLOCK": 16384}, {"num_warps": 4}))
    for form, dt, op in (("one_shot", "bf16", 0), ("one_shot", "fp32", 2), ("two_shot", "bf16", 1),
                         ("two_shot", "fp16", 3)):
        sig = {"out": f"*{dt}", "x": f"*{dt}", "buf": f"*{dt}"}
        if form == "two_shot":
            sig["buf2"] = f"*{dt}"
        sig.update({"flags": "*i64", "busy": "*i64", "pes": "*i32", **ints("me", "W", "n")})
        if form == "two_shot":
            sig["chunk"] = "i32"
        sig.update(ints("per", "slot_stride"))
        out.append(("ops_ar", f"{form}_kernel", sig, {"ELEM": 4 if dt == "fp32" else 2, "OP": op, "BLOCK": 2048},
                    {"num_warps": 8}))
    return out


OPS_CASES = _ops_cases()


def _ops_case_id(case) -> str:
    module, kernel, sig, consts, opts = case
    bits = [next(v.split("<")[1].split("[")[0] if v.startswith("tensordesc") else v[1:]
                 for k, v in sig.items() if k in ("a_loc", "a", "x")) if any(k in sig for k in ("a_loc", "a", "x")) else ""]
    for k in ("BM", "BN", "TMA", "B_T", "COMM", "RELEASE", "FLATTEN", "SPLIT_C", "OP"):
        if k in consts:
            bits.append(f"{k}={consts[k]}")
    if "num_stages" in opts:
        bits.append(f"stages={opts['num_stages']}")
    return f"{kernel}[{','.join(b for b in bits if b)}]"


def _case_id(case) -> str:
    module, kernel, _sig, constexprs, _warps = case
    extra = ",".join(f"{k}={v}" for k, v in constexprs.items() if k not in ("BLOCK", "ELEM_BYTES"))
    return f"{module}.{kernel}" + (f"[{extra}]" if extra else "")


_modules: dict = {}


def load(module: str):
    """The tutorial (by number) or the test module, imported once."""
    if module not in _modules:
        if module in TEST_MODULES:
            folder, name = TEST_MODULES[module]
            sys.path.insert(0, str(ROOT / "tests" / folder))
            _modules[module] = importlib.import_module(name)
        else:
            path = ROOT / TUTORIALS[module]
            # The tutorials import their shared helpers (`from _common import ...`) from their own
            # folder, which a script run puts on sys.path; loading them by path does not.
            if str(path.parent) not in sys.path:
                sys.path.insert(0, str(path.parent))
            spec = importlib.util.spec_from_file_location(f"rshmem_tutorial_{module}", path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)  # main() runs only under __main__
            _modules[module] = mod
    return _modules[module]


def _sources_newer_than(path: Path) -> bool:
    lib = ROOT / "triton-lib"
    srcs = list((lib / "src").iterdir()) + list((lib / "include" / "rshmem").iterdir())
    return any(s.stat().st_mtime > path.stat().st_mtime for s in srcs)


@pytest.fixture(scope="module")
def bitcode(tmp_path_factory) -> str:
    """The device library: $RSHMEM_DEVICE_BC, else the source tree's copy if it is up to date,
    else a fresh build with clang-19."""
    import rshmem.triton as rt

    if os.environ.get("RSHMEM_DEVICE_BC"):
        return str(rt.bitcode_path())
    if BUNDLED_BC.is_file() and not _sources_newer_than(BUNDLED_BC):
        return str(BUNDLED_BC)
    if shutil.which("clang-19") is None:
        pytest.skip("no up-to-date libshmem_device.bc and no clang-19 to build it")
    out = tmp_path_factory.mktemp("device-lib")
    subprocess.run([sys.executable, str(ROOT / "triton-lib" / "build.py"), "--out-dir", str(out),
                    "--python-out", str(BUNDLED_BC)], check=True)
    return str(BUNDLED_BC)


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_kernel_compiles_to_sm90_cubin(case, bitcode):
    module, kernel, signature, constexprs, num_warps = case
    fn = getattr(load(module), kernel)
    src = ASTSource(fn=fn, signature=signature, constexprs=constexprs)
    compiled = triton.compile(src, target=TARGET,
                              options={"extern_libs": (("libshmem_device", bitcode),), "num_warps": num_warps})
    assert compiled.asm["cubin"], f"{_case_id(case)}: no cubin"
    assert not foreign_calls(compiled.asm["ptx"]), \
        f"{_case_id(case)}: a library call was not inlined (binding and C signature differ?)"


@pytest.mark.parametrize("module", [*TUTORIALS, *TEST_MODULES])
def test_every_kernel_has_a_case(module):
    mod = load(module)
    kernels = {name for name, obj in vars(mod).items()
               if isinstance(obj, JITFunction) and getattr(obj.fn, "__module__", None) == mod.__name__}
    covered = {kernel for m, kernel, *_ in CASES if m == module}
    assert kernels, f"{module}: no Triton kernels found"
    assert kernels <= covered, f"{module}: kernels without a compile case: {sorted(kernels - covered)}"


@pytest.mark.parametrize("case", OPS_CASES, ids=_ops_case_id)
def test_ops_kernel_compiles_to_sm90_cubin(case, bitcode):
    module, kernel, signature, constexprs, options = case
    fn = getattr(importlib.import_module(OPS_MODULES[module]), kernel)
    full = {**signature, **{k: "constexpr" for k in constexprs}}
    src = ASTSource(fn=fn, signature=full, constexprs=constexprs)
    compiled = triton.compile(src, target=TARGET, options={"extern_libs": (("libshmem_device", bitcode),), **options})
    name = _ops_case_id(case)
    assert compiled.asm["cubin"], f"{name}: no cubin"
    assert not foreign_calls(compiled.asm["ptx"]), f"{name}: a library call was not inlined"
    assert compiled.metadata.shared <= SM90_SHARED_BYTES, \
        f"{name}: needs {compiled.metadata.shared} bytes of shared memory, more than sm_90 has ({SM90_SHARED_BYTES})"
    if constexprs.get("TMA") and constexprs.get("BM"):
        assert "wgmma.mma_async" in compiled.asm["ptx"], f"{name}: the GEMM does not use wgmma"
        if "fp8e4nv" in signature.get("a_loc", ""):
            assert re.search(r"wgmma\.mma_async\S*e4m3\.e4m3", compiled.asm["ptx"]), f"{name}: no fp8 wgmma"
        assert "cp.async.bulk.tensor" in compiled.asm["ptx"], f"{name}: the GEMM does not load through TMA"


def test_gathered_a_copies_16_byte_vectors_when_launched_aligned():
    """AllGather+GEMM's gathered-A copy moves bytes: with the pointers and sizes 16-byte
    divisible (what Triton specializes a launch of the usual shapes to), it must load and store
    16-byte vectors, not a byte per instruction."""
    from rshmem.ops._kernels_gemm import gathered_a_kernel

    attrs = {(i,): [["tt.divisibility", 16]] for i in range(len(GATHERED_A_SIG))}
    src = ASTSource(fn=gathered_a_kernel, signature={**GATHERED_A_SIG, "BLOCK": "constexpr"},
                    constexprs={"BLOCK": 16384}, attrs=attrs)
    ptx = triton.compile(src, target=TARGET, options={"num_warps": 4}).asm["ptx"]
    assert set(re.findall(r"ld\.global[.\w]*", ptx)) == {"ld.global.v4.b32"}, ptx[:2000]
    assert set(re.findall(r"st\.global[.\w]*", ptx)) == {"st.global.v4.b32"}, ptx[:2000]


@pytest.mark.parametrize("module", list(OPS_MODULES))
def test_every_ops_kernel_has_a_case(module):
    mod = importlib.import_module(OPS_MODULES[module])
    # Helpers (`_name`) are inlined into the kernels; only kernels need a case.
    kernels = {name for name, obj in vars(mod).items()
               if isinstance(obj, JITFunction) and getattr(obj.fn, "__module__", None) == mod.__name__
               and not name.startswith("_")}
    covered = {kernel for m, kernel, *_ in OPS_CASES if m == module}
    assert kernels, f"{module}: no Triton kernels found"
    assert kernels <= covered, f"{module}: kernels without a compile case: {sorted(kernels - covered)}"
