"""The device library compiles into Triton kernels for sm_90, without a GPU.

Every row of triton-lib/api.toml is called from the generated kernel
``rshmem.triton._compile_check.call_row`` (``fn: tl.constexpr`` picks the row; each call of a
typed row is made once per dtype) and compiled to a cubin with the bitcode linked. The PTX of the
signalling and waiting functions is checked for the system-scope release / acquire the memory
model needs, and misuse is checked to fail at compile time with a readable message.

Needs triton and clang-19 (the bitcode is built from source when it is missing or older than the
sources); skips otherwise. Run: ``PYTHONPATH=python python -m pytest tests/test_device_compile.py``.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
triton = pytest.importorskip("triton", reason="triton is not installed")
if shutil.which("clang-19") is None:
    pytest.skip("clang-19 is not installed (needed to build libshmem_device.bc)", allow_module_level=True)

import triton.language as tl  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402
from triton.compiler.errors import CompilationError  # noqa: E402

import rshmem.triton as rt  # noqa: E402
from rshmem.triton import _compile_check, language, libshmem_device  # noqa: E402

TARGET = GPUTarget("cuda", 90, 32)
DTYPE_SIG = {"int8": "*i8", "int16": "*i16", "int32": "*i32", "int64": "*i64", "uint8": "*u8",
             "uint16": "*u16", "uint32": "*u32", "uint64": "*u64", "fp16": "*fp16", "bf16": "*bf16",
             "fp32": "*fp32", "fp64": "*fp64"}


def _sources_newer_than(path: Path) -> bool:
    srcs = list((ROOT / "triton-lib" / "src").iterdir()) + list((ROOT / "triton-lib" / "include" / "rshmem").iterdir())
    return any(s.stat().st_mtime > path.stat().st_mtime for s in srcs)


@pytest.fixture(scope="session")
def bitcode(tmp_path_factory) -> str:
    """The library's bitcode: $RSHMEM_DEVICE_BC, the packaged copy if up to date, else a fresh build."""
    if os.environ.get("RSHMEM_DEVICE_BC"):
        return os.environ["RSHMEM_DEVICE_BC"]
    bundled = ROOT / "python" / "rshmem" / "triton" / "lib" / "libshmem_device.bc"
    if bundled.is_file() and not _sources_newer_than(bundled):
        return str(bundled)
    out = tmp_path_factory.mktemp("device-lib")
    subprocess.run([sys.executable, str(ROOT / "triton-lib" / "build.py"), "--out-dir", str(out),
                    "--python-out", str(bundled)], check=True)
    return str(bundled)


def compile_kernel(fn, signature: dict, bitcode: str, constexprs: dict | None = None):
    src = ASTSource(fn=fn, signature=signature, constexprs=constexprs or {})
    return triton.compile(src, target=TARGET, options={"extern_libs": (("libshmem_device", bitcode),)})


def compile_row(row: str, bitcode: str):
    sig = {"fn": "constexpr", "out": "*i64", "pe": "i32", "n": "i64", "sig": "*u64", "status": "*i32"}
    sig.update({"p_" + t: s for t, s in DTYPE_SIG.items()})
    return compile_kernel(_compile_check.call_row, sig, bitcode, {"fn": row})


def test_generated_files_are_up_to_date():
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_api.py"), "--check"], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("row", sorted(_compile_check.ROWS))
def test_row_compiles_to_cubin(row, bitcode):
    k = compile_row(row, bitcode)
    assert k.asm["cubin"], f"{row}: no cubin"
    ptx = k.asm["ptx"]
    # Every library call was inlined: a call left in the PTX means the binding's types differ
    # from the C definition's.
    assert not re.search(r"\bcall(\.uni)?\b", ptx), f"{row}: a call was not inlined (signature mismatch?)"


def _ptx(row: str, bitcode: str) -> str:
    return compile_row(row, bitcode).asm["ptx"]


def test_putmem_signal_block_releases(bitcode):
    ptx = _ptx("putmem_signal_block", bitcode)
    assert re.search(r"st\.release\.sys|fence\.acq_rel\.sys|red\.release\.sys", ptx)
    # The signal follows a block barrier, so it comes after every thread's data.
    assert "bar.sync" in ptx


def test_signal_wait_until_acquires(bitcode):
    assert "ld.acquire.sys" in _ptx("signal_wait_until", bitcode)


def test_fence_and_quiet_instructions(bitcode):
    assert "fence.acq_rel.sys" in _ptx("fence", bitcode)
    assert "fence.sc.sys" in _ptx("quiet", bitcode)


def test_barrier_uses_remote_release_adds_and_acquire_wait(bitcode):
    # Each arriving thread issues one fence (sc for a barrier: quiet; acq_rel for a sync) and then
    # relaxed system-scope adds: fence + strong write is a release pattern, so the adds release.
    for row, fence, other in (("barrier_all_block", "fence.sc.sys", "fence.acq_rel.sys"),
                              ("sync_all_block", "fence.acq_rel.sys", "fence.sc.sys")):
        ptx = _ptx(row, bitcode)
        red = ptx.find("red.relaxed.sys.add.u64")
        assert red >= 0 and "ld.acquire.sys" in ptx, row
        assert 0 <= ptx.find(fence) < red, f"{row}: {fence} must come before the adds"
        assert other not in ptx, row


def test_state_global_survives_linking(bitcode):
    ptx = _ptx("putmem_block", bitcode)
    assert re.search(r"\.visible \.global \.align 8 \.b8 rshmemi_device_state_d\[(\d+)\]", ptx)


# ---------------------------------------------------------------- issue 11: strong p / g
# A weak (plain) global access: `st.u32`, `ld.global.f64`, ... without .relaxed/.acquire/.release/
# .volatile. Parameter, shared, constant and non-coherent loads are other state spaces or the
# invariant state loads of device.h; the device state global itself (the error record's address)
# is read weakly on the failure path only.
_WEAK_STORE = re.compile(r"^\s*(@%p\d+\s+)?st(\.global)?\.[usbf]\d+\s", re.M)
_WEAK_LOAD = re.compile(r"^\s*(@%p\d+\s+)?ld(\.global)?\.[usbf]\d+\s+[^,]+,\s*\[(?!rshmemi_device_state_d)", re.M)

ALL_DTYPES = list(DTYPE_SIG)


@triton.jit
def _p_of_g_every_dtype(p_int8, p_int16, p_int32, p_int64, p_uint8, p_uint16, p_uint32, p_uint64, p_fp16,
                        p_bf16, p_fp32, p_fp64, pe):
    # Every element moves by g then p only, so every global access of the kernel is theirs.
    libshmem_device.p(p_int8, libshmem_device.g(p_int8, pe), pe)
    libshmem_device.p(p_int16, libshmem_device.g(p_int16, pe), pe)
    libshmem_device.p(p_int32, libshmem_device.g(p_int32, pe), pe)
    libshmem_device.p(p_int64, libshmem_device.g(p_int64, pe), pe)
    libshmem_device.p(p_uint8, libshmem_device.g(p_uint8, pe), pe)
    libshmem_device.p(p_uint16, libshmem_device.g(p_uint16, pe), pe)
    libshmem_device.p(p_uint32, libshmem_device.g(p_uint32, pe), pe)
    libshmem_device.p(p_uint64, libshmem_device.g(p_uint64, pe), pe)
    libshmem_device.p(p_fp16, libshmem_device.g(p_fp16, pe), pe)
    libshmem_device.p(p_bf16, libshmem_device.g(p_bf16, pe), pe)
    libshmem_device.p(p_fp32, libshmem_device.g(p_fp32, pe), pe)
    libshmem_device.p(p_fp64, libshmem_device.g(p_fp64, pe), pe)


@triton.jit
def _release_by_fence_and_int_p(flag, pe):
    libshmem_device.fence()
    libshmem_device.int_p(flag, 1, pe)


@triton.jit
def _poll_with_g(flag, pe):
    v = libshmem_device.g(flag, pe)
    while v == 0:
        v = libshmem_device.g(flag, pe)
    libshmem_device.p(flag, v + 1, pe)


def _loops(ptx: str) -> list:
    """The bodies of the PTX's loops: the text from a label to a later branch back to it."""
    bodies = []
    for m in re.finditer(r"\bbra(\.uni)?\s+(\$L\w+);", ptx):
        label = ptx.find(m.group(2) + ":")
        if 0 <= label < m.start():
            bodies.append(ptx[label:m.end()])
    return bodies


def test_issue_11_p_and_g_are_strong_system_scope_accesses(bitcode):
    sig = {"p_" + t: DTYPE_SIG[t] for t in ALL_DTYPES}
    sig["pe"] = "i32"
    ptx = compile_kernel(_p_of_g_every_dtype, sig, bitcode).asm["ptx"]
    assert not _WEAK_STORE.findall(ptx), "p stored with a plain (weak) store"
    assert not _WEAK_LOAD.findall(ptx), "g loaded with a plain (weak) load"
    for bits in (8, 16, 32, 64):
        assert f"st.relaxed.sys.b{bits} " in ptx, f"no strong {bits}-bit store"
        assert f"ld.relaxed.sys.b{bits} " in ptx, f"no strong {bits}-bit load"


def test_issue_11_fence_then_int_p_is_a_release_pattern(bitcode):
    ptx = compile_kernel(_release_by_fence_and_int_p, {"flag": "*i32", "pe": "i32"}, bitcode).asm["ptx"]
    fence = ptx.find("fence.acq_rel.sys")
    flag_store = ptx.find("st.relaxed.sys.b32", fence)
    # fence.acq_rel + a strong store = a release pattern (PTX ISA, memory consistency model).
    assert 0 <= fence < flag_store, "int_p after fence must be a strong store"
    assert not _WEAK_STORE.findall(ptx), "int_p stored with a plain (weak) store"


def test_issue_11_a_loop_polling_g_loads_on_every_iteration(bitcode):
    ptx = compile_kernel(_poll_with_g, {"flag": "*i32", "pe": "i32"}, bitcode).asm["ptx"]
    assert any("ld.relaxed.sys.b32" in body for body in _loops(ptx)), "the load of g left the polling loop"
    assert not _WEAK_LOAD.findall(ptx)


@triton.jit
def _wrong_signal_dtype(buf, pe):
    libshmem_device.putmem_signal_block(buf, buf, 16, buf, 1, libshmem_device.SIGNAL_SET, pe)


@triton.jit
def _pointer_as_pe(buf, sig):
    libshmem_device.signal_op(sig, 1, libshmem_device.SIGNAL_SET, buf)


@triton.jit
def _wrong_atomic_dtype(buf, pe):
    libshmem_device.atomic_add(buf, 1, pe)


@triton.jit
def _multicast(buf):
    libshmem_device.remote_mc_ptr(libshmem_device.TEAM_WORLD, buf)


def _compile_error(fn, signature, bitcode) -> str:
    with pytest.raises(CompilationError) as info:
        compile_kernel(fn, signature, bitcode)
    return str(info.value)


def test_wrong_pointer_dtype_names_function_and_signature(bitcode):
    msg = _compile_error(_wrong_signal_dtype, {"buf": "*fp32", "pe": "i32"}, bitcode)
    assert "libshmem_device.putmem_signal_block" in msg
    assert "sig_addr" in msg and "int64 or uint64" in msg and "fp32" in msg
    assert "Expected signature: putmem_signal_block(dest: pointer" in msg


def test_pointer_where_number_expected(bitcode):
    msg = _compile_error(_pointer_as_pe, {"buf": "*i32", "sig": "*u64"}, bitcode)
    assert "libshmem_device.signal_op" in msg and "`pe` must be a number" in msg


def test_atomic_on_float_is_refused(bitcode):
    msg = _compile_error(_wrong_atomic_dtype, {"buf": "*fp32", "pe": "i32"}, bitcode)
    assert "libshmem_device.atomic_add" in msg and "points to fp32" in msg and "int32, int64, uint32, uint64" in msg


def test_remote_mc_ptr_says_multicast_is_unsupported(bitcode):
    msg = _compile_error(_multicast, {"buf": "*fp32"}, bitcode)
    assert "remote_mc_ptr" in msg and "multicast is not supported" in msg


def test_constants_match_the_contract():
    expected = {"CMP_EQ": 0, "CMP_NE": 1, "CMP_GT": 2, "CMP_LE": 3, "CMP_LT": 4, "CMP_GE": 5, "SIGNAL_SET": 9,
                "SIGNAL_ADD": 10, "TEAM_INVALID": -1, "TEAM_WORLD": 0, "TEAM_SHARED": 1, "TEAM_NODE": 2,
                "TEAM_SAME_MYPE_NODE": 3, "NVSHMEM_CMP_EQ": 0, "NVSHMEM_CMP_GE": 5, "NVSHMEM_SIGNAL_SET": 9,
                "NVSHMEM_SIGNAL_ADD": 10, "NVSHMEM_TEAM_WORLD": 0, "NVSHMEMX_TEAM_NODE": 2,
                "NVSHMEM_TEAM_INVALID": -1}
    got = {k: getattr(libshmem_device, k).value for k in expected}
    assert got == expected


@triton.jit
def _language_helpers(buf, sig, out, pe):
    if language.tid(0) == 0:
        language.notify_thread(sig, pe, 1, "add")
    language.syncthreads()
    token = language.wait_value(sig, 1, "sys")
    data = language.consume_token(buf, token)
    a = language.ld_acquire(sig, "sys") + language.atomic_add(sig, 1, "gpu", "relaxed")
    a += language.atomic_cas(sig, 0, 1, "sys", "acq_rel")
    language.st_release(sig, a, "sys")
    remote = language.symm_at(data, pe)
    t = language.globaltimer() + language.ntid(0) + language.laneid() + language.rank() + language.num_ranks()
    tl.store(out, t + remote.to(tl.int64))


def test_language_helpers_lower_to_the_named_ptx(bitcode):
    ptx = compile_kernel(_language_helpers, {"buf": "*fp32", "sig": "*u64", "out": "*i64", "pe": "i32"},
                         bitcode).asm["ptx"]
    for needle in ("%tid.x", "%ntid.x", "%laneid", "%globaltimer", "ld.acquire.sys.global.b64",
                   "atom.relaxed.gpu.global.add.u64", "atom.acq_rel.sys.global.cas.b64",
                   "st.release.sys.global.b64", "red.release.sys.add.u64", "bar.sync"):
        assert needle in ptx, needle


def test_extern_libs_points_at_the_bitcode(bitcode, monkeypatch):
    monkeypatch.setenv("RSHMEM_DEVICE_BC", bitcode)
    assert rt.extern_libs() == {"libshmem_device": bitcode}
    monkeypatch.setenv("RSHMEM_DEVICE_BC", "/nonexistent/libshmem_device.bc")
    with pytest.raises(FileNotFoundError, match="triton-lib/build.py"):
        rt.extern_libs()


def test_jit_adds_extern_libs_and_installs_the_hook(bitcode, monkeypatch):
    seen = {}

    def fake_run(self, *args, **kwargs):
        seen.update(kwargs)

    monkeypatch.setenv("RSHMEM_DEVICE_BC", bitcode)
    monkeypatch.setattr(triton.runtime.jit.JITFunction, "run", fake_run)

    @rt.jit
    def kernel(x):
        pass

    kernel[(1,)](0, extern_libs={"other": "/x.bc"})
    assert seen["extern_libs"] == {"other": "/x.bc", "libshmem_device": bitcode}
    assert rt._on_kernel_load in triton.knobs.runtime.kernel_load_end_hook.calls


def test_load_hook_hands_modules_to_the_runtime(monkeypatch):
    calls = []
    fake = types.ModuleType("rshmem._native")
    fake.device_init_module = calls.append
    monkeypatch.setitem(sys.modules, "rshmem._native", fake)
    import rshmem

    monkeypatch.setattr(rshmem, "_native", fake, raising=False)
    rt.install_load_hook()
    triton.knobs.runtime.kernel_load_end_hook(0x1234, 0x5678, "k", {}, "hash")
    assert calls == [0x1234]
    # Without device_init_module (an older extension), loading goes on quietly.
    del fake.device_init_module
    triton.knobs.runtime.kernel_load_end_hook(0x9999, 0, "k", {}, "hash")
    assert calls == [0x1234]
