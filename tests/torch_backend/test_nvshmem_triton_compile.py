"""Kernels written with torch's Triton NVSHMEM extension (`torch.distributed._symmetric_memory.
_nvshmem_triton`: `nvshmem.put`, `signal_op`, `barrier_all`, `reduce`, ...) compile to cubins for
sm_90 against rshmem's stand-in for NVSHMEM's device library (`libnvshmem_device.bc`, built by
triton-lib/build.py), every NVSHMEM name resolved and inlined: what the RSHMEM backend links
them with (`rshmem._nvshmem_triton`). Every function of the extension, every reduction dtype and
operation. Compile-only: no GPU. The same kernels run on a GPU in test_nvshmem_triton_gpu.py.
"""
from __future__ import annotations

import pytest

triton = pytest.importorskip("triton", reason="triton is not installed")
import triton.language as tl  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402


def _extension():
    """torch's extension with its Triton functions: torch defines them only where `has_triton()`,
    which wants a GPU, so here they are defined by importing the module with that check true."""
    import importlib
    import sys

    import torch.utils._triton as torch_triton

    name = "torch.distributed._symmetric_memory._nvshmem_triton"
    if not torch_triton.has_triton():
        sys.modules.pop(name, None)
        real = torch_triton.has_triton
        torch_triton.has_triton = lambda: True
        try:
            return importlib.import_module(name)
        finally:
            torch_triton.has_triton = real
    return importlib.import_module(name)


try:
    nvshmem = _extension()
except ImportError:
    pytest.skip("this torch has no Triton NVSHMEM extension", allow_module_level=True)
from ptx_calls import foreign_calls  # noqa: E402 - tests/ptx_calls.py
from rshmem import _nvshmem_triton  # noqa: E402

pytestmark = pytest.mark.single
TARGET = GPUTarget("cuda", 90, 32)


@pytest.fixture(autouse=True)
def always_compile(monkeypatch):
    monkeypatch.setattr(triton.knobs.compilation, "always_compile", True)


@triton.jit
def rma_kernel(dst, src, sig, nelems, pe, NBI: tl.constexpr):
    nvshmem.put(dst, src, nelems, pe)
    nvshmem.fence()
    if NBI:
        nvshmem.get_nbi(dst, src, nelems, pe)
        nvshmem.quiet()
    else:
        nvshmem.get(dst, src, nelems, pe)
    nvshmem.putmem_signal_block(dst, src, nelems * 8, sig, 1, 5, pe)


@triton.jit
def signal_kernel(sig, flag, value, pe):
    nvshmem.signal_op(sig.to(tl.int64), value, 0, pe)  # torch types the address and value as int64
    nvshmem.signal_wait_until(sig, 5, 1)
    nvshmem.wait_until(flag, 0, 42)


@triton.jit
def barrier_kernel(dst, src, nelems):
    me = nvshmem.my_pe()
    if me == 0:
        i = 1
        while i < nvshmem.n_pes():
            nvshmem.put(dst, src, nelems, i)
            i += 1
    nvshmem.barrier_all()
    nvshmem.sync_all()


@triton.jit
def collective_kernel(dst, src, nelems, root):
    nvshmem.alltoall(0, dst, src, nelems)
    nvshmem.broadcast(0, dst, src, nelems, root)


@triton.jit
def reduce_kernel(dst, src, nreduce, OP: tl.constexpr):
    nvshmem.reduce(0, dst, src, nreduce, OP)


def _compile(fn, signature, constexprs):
    signature = {**signature, **{k: "constexpr" for k in constexprs}}
    return triton.compile(ASTSource(fn=fn, signature=signature, constexprs=constexprs), target=TARGET,
                          options={"extern_libs": (("libnvshmem_device", _nvshmem_triton.bitcode()),)})


def _resolved(k) -> None:
    ptx = k.asm["ptx"]
    assert k.asm["cubin"]
    assert ".extern" not in ptx, "a name the library does not define"
    # Every NVSHMEM name and library function inlined; only the library's rare paths stay calls.
    assert not foreign_calls(ptx), f"calls not inlined: {foreign_calls(ptx)}"


@pytest.mark.parametrize("nbi", [False, True])
def test_rma(nbi):
    _resolved(_compile(rma_kernel, {"dst": "*i64", "src": "*i64", "sig": "*i64", "nelems": "i64", "pe": "i32"},
                       {"NBI": nbi}))


def test_signals_and_waits():
    _resolved(_compile(signal_kernel, {"sig": "*i64", "flag": "*i32", "value": "i64", "pe": "i32"}, {}))


def test_barriers():
    _resolved(_compile(barrier_kernel, {"dst": "*i32", "src": "*i32", "nelems": "i64"}, {}))


def test_alltoall_and_broadcast():
    _resolved(_compile(collective_kernel, {"dst": "*fp32", "src": "*fp32", "nelems": "i64", "root": "i32"}, {}))


@pytest.mark.parametrize("op", ["sum", "max", "min", "prod"])
@pytest.mark.parametrize("dtype", ["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "fp16", "bf16", "fp32",
                                   "fp64"])
def test_reduce(dtype, op):
    _resolved(_compile(reduce_kernel, {"dst": f"*{dtype}", "src": f"*{dtype}", "nreduce": "i64"}, {"OP": op}))


def test_launches_take_rshmem_library_only_on_rshmem(monkeypatch, tmp_path):
    """`rshmem._nvshmem_triton.install()` routes each launch of a `requires_nvshmem` kernel by the
    backend: RSHMEM's bitcode and no NVSHMEM initialization on RSHMEM, torch's path otherwise."""
    monkeypatch.setattr(_nvshmem_triton, "_state", {})
    monkeypatch.setattr(nvshmem, "_nvshmem_init_hook", nvshmem._nvshmem_init_hook)  # undone after the test
    monkeypatch.setattr(nvshmem.GridCallableWithExtern, "run", nvshmem.GridCallableWithExtern.run)
    monkeypatch.setattr(nvshmem.NvshmemLibFinder, "find_device_library",
                        nvshmem.NvshmemLibFinder.__dict__["find_device_library"])
    torch_hook = nvshmem._nvshmem_init_hook
    monkeypatch.setattr(triton.knobs.runtime, "jit_post_compile_hook", torch_hook)
    assert _nvshmem_triton.install() and _nvshmem_triton.install()
    assert nvshmem._nvshmem_init_hook is not torch_hook
    assert triton.knobs.runtime.jit_post_compile_hook is nvshmem._nvshmem_init_hook

    seen = []

    class Jit:  # what GridCallableWithExtern launches through
        def run(self, *args, **kwargs):
            seen.append(kwargs["extern_libs"])

    kernel = nvshmem.GridCallableWithExtern(Jit(), {"libnvshmem_device": "/nvshmem/libnvshmem_device.bc"})
    monkeypatch.setattr(_nvshmem_triton, "on_rshmem", lambda: True)
    kernel[(1,)](0)
    assert nvshmem._nvshmem_init_hook(key=None) is None  # torch's hook would need NVSHMEM running
    monkeypatch.setattr(_nvshmem_triton, "on_rshmem", lambda: False)
    kernel[(1,)](0)
    assert seen == [{"libnvshmem_device": _nvshmem_triton.bitcode()},
                    {"libnvshmem_device": "/nvshmem/libnvshmem_device.bc"}]

    # No NVSHMEM bitcode where torch looks: the decorator still works, with rshmem's.
    monkeypatch.setattr(nvshmem.NvshmemLibFinder, "found_device_lib_path", None)
    monkeypatch.setenv("NVSHMEM_LIB_DIR", str(tmp_path))
    assert nvshmem.NvshmemLibFinder.find_device_library() == _nvshmem_triton.bitcode()
