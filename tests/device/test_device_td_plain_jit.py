"""A plain ``@triton.jit`` kernel that calls the device library, written as Triton-distributed's
kernels are (no ``rshmem.triton.jit``, no ``extern_libs``), compiles to a cubin for sm_90 on
stock Triton: importing ``rshmem.triton`` installed the link hook. Kernels that call nothing of
ours compile exactly as without the hook. Compile-only: no GPU.
"""
from __future__ import annotations

import re

import pytest

triton = pytest.importorskip("triton", reason="triton is not installed")
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402
import triton.language as tl  # noqa: E402

import rshmem.triton as rt  # noqa: E402
from ptx_calls import foreign_calls  # noqa: E402 - tests/ptx_calls.py
from rshmem.triton import _link, libshmem_device  # noqa: E402
from rshmem.triton.language import (cp_async_bulk_commit_group, fence_async_shared, fence_proxy_async,  # noqa: E402
                                    named_barrier_sync, prefetch_tensor_2d_l2, prefetch_tensormap, tid, warp_idx,
                                    ld, st, atomic_add)

pytestmark = pytest.mark.single

TARGET = GPUTarget("cuda", 90, 32)


@pytest.fixture(autouse=True)
def always_compile(monkeypatch):
    monkeypatch.setattr(triton.knobs.compilation, "always_compile", True)


@triton.jit
def ring_put_kernel(dst, src, n, BLOCK: tl.constexpr):
    # Each PE writes its block to the next PE's `dst`, then signals with a barrier.
    rank = libshmem_device.my_pe()
    world = libshmem_device.n_pes()
    peer = (rank + 1) % world
    offs = tl.arange(0, BLOCK)
    if tid(0) == 0:
        libshmem_device.putmem(dst, src, n * 4, peer)
    libshmem_device.barrier_all()
    tl.store(src + offs, tl.load(src + offs) + 1)


@triton.jit
def plain_add_kernel(x, y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y + offs, tl.load(x + offs, mask=mask) * 2.0 + tl.exp(tl.load(x + offs, mask=mask)), mask=mask)


def _compile(fn, signature, constexprs, **options):
    signature = {**signature, **{k: "constexpr" for k in constexprs}}
    return triton.compile(ASTSource(fn=fn, signature=signature, constexprs=constexprs), target=TARGET,
                          options=options)


def test_plain_jit_kernel_calling_the_library_compiles_to_cubin():
    _link.LINKED.discard("ring_put_kernel")
    k = _compile(ring_put_kernel, {"dst": "*i32", "src": "*i32", "n": "i32"}, {"BLOCK": 128})
    assert k.asm["cubin"]
    ptx = k.asm["ptx"]
    # Only the library's out-of-line rare paths (rshmemi_*) may stay calls.
    assert not foreign_calls(ptx), f"library calls not inlined: {foreign_calls(ptx)}"
    assert "rshmem_my_pe" not in ptx and ".extern" not in ptx  # nothing left unresolved
    assert "ring_put_kernel" in _link.LINKED
    # The library is in the options, so Triton's cache key covers its bitcode.
    assert dict(k.metadata.extern_libs)[rt.LIBRARY_NAME] == str(rt.bitcode_path())


def test_kernel_calling_nothing_of_ours_compiles_as_on_stock_triton(monkeypatch):
    _link.LINKED.discard("plain_add_kernel")
    with_hook = _compile(plain_add_kernel, {"x": "*fp32", "y": "*fp32", "n": "i32"}, {"BLOCK": 256})
    assert "plain_add_kernel" not in _link.LINKED
    # Stock Triton: the CUDA backend's own parse_options and no stage hook.
    from triton.backends.nvidia.compiler import CUDABackend

    monkeypatch.setattr(CUDABackend, "parse_options", CUDABackend.parse_options.__rshmem_plain__)
    monkeypatch.setattr(triton.knobs.runtime, "add_stages_inspection_hook", None)
    stock = _compile(plain_add_kernel, {"x": "*fp32", "y": "*fp32", "n": "i32"}, {"BLOCK": 256})
    assert with_hook.asm["llir"] == stock.asm["llir"]
    assert with_hook.asm["ptx"] == stock.asm["ptx"]


def test_references_device_library_reads_extern_symbols():
    assert _link.references_device_library('%0 = tt.extern_elementwise %a {libname = "", libpath = "", '
                                           'pure = true, symbol = "rshmem_my_pe"} : () -> i32')
    assert _link.references_device_library('symbol = "rshmemx_putmem_signal_block"')
    assert not _link.references_device_library('symbol = "__nv_expf"')
    assert not _link.references_device_library('tt.func public @rshmem_like_name()')


def test_missing_bitcode_names_the_path_only_for_kernels_of_ours(monkeypatch, tmp_path):
    monkeypatch.setenv("RSHMEM_DEVICE_BC", str(tmp_path / "absent.bc"))
    with pytest.raises(FileNotFoundError, match="absent.bc"):
        _compile(ring_put_kernel, {"dst": "*i32", "src": "*i32", "n": "i32"}, {"BLOCK": 128})
    assert _compile(plain_add_kernel, {"x": "*fp32", "y": "*fp32", "n": "i32"}, {"BLOCK": 256}).asm["cubin"]


def test_install_is_idempotent_and_can_be_refused(monkeypatch):
    assert _link.install_link_hook() and _link.install_link_hook()
    hook = triton.knobs.runtime.add_stages_inspection_hook
    assert hasattr(hook, "__rshmem_previous__") and not hasattr(hook.__rshmem_previous__, "__rshmem_previous__")
    monkeypatch.setattr(_link, "_installed", False)
    monkeypatch.setenv("RSHMEM_TRITON_LINK", "0")
    assert _link.install_link_hook() is False


@triton.jit
def tma_helpers_kernel(desc, out):
    # Triton-distributed's tma_language helpers that need no shared-memory address.
    prefetch_tensormap(desc)
    prefetch_tensor_2d_l2(desc, 0, 64)
    fence_proxy_async()
    fence_async_shared()
    cp_async_bulk_commit_group()
    named_barrier_sync(1, 128)
    tl.store(out + warp_idx(), 1)


def test_tma_language_helpers_compile():
    ptx = _compile(tma_helpers_kernel, {"desc": "*i8", "out": "*i32"}, {}, num_warps=4).asm["ptx"]
    for instruction in ("cp.async.bulk.prefetch.tensor.2d.L2.global.tile", "fence.proxy.async;",
                        "fence.proxy.async.shared::cta;", "cp.async.bulk.commit_group;", "bar.sync 1, 128;"):
        assert instruction in ptx, instruction
    assert ptx.count("cp.async.bulk.prefetch.tensor.2d.L2.global.tile") == 2


@triton.jit
def bad_named_barrier_kernel(out):
    named_barrier_sync(1, 100)


def test_named_barrier_needs_whole_warps():
    from triton.compiler.errors import CompilationError

    with pytest.raises(CompilationError) as info:
        _compile(bad_named_barrier_kernel, {"out": "*i32"}, {})
    assert "multiple of 32" in str(info.value) + str(info.value.__cause__)


@triton.jit
def ld_st_atomic_kernel(inp, out, SCOPE: tl.constexpr, LD_SEM: tl.constexpr, ST_SEM: tl.constexpr):
    # Triton-distributed's language_extra in its own tests' form: ld, st and atomic_add per thread.
    from_peer = ld(inp + tid(0), scope=SCOPE, semantic=LD_SEM)
    old = atomic_add(inp + tid(0), 1, scope=SCOPE, semantic="acq_rel")
    st(out + tid(0), from_peer + old, scope=SCOPE, semantic=ST_SEM)


@pytest.mark.parametrize("dtype,bits,sign", [("i32", 32, "s"), ("u32", 32, "u"), ("u64", 64, "u"), ("i64", 64, "u")])
@pytest.mark.parametrize("scope", ["gpu", "sys"])
def test_st_is_untyped_and_atomic_add_is_signed_like_its_pointee(dtype, bits, sign, scope):
    ptx = _compile(ld_st_atomic_kernel, {"inp": f"*{dtype}", "out": f"*{dtype}"},
                   {"SCOPE": scope, "LD_SEM": "acquire", "ST_SEM": "release"}, num_warps=2).asm["ptx"]
    assert f"st.global.release.{scope}.b{bits}" in ptx  # the text Triton-distributed's own test looks for
    assert f"atom.acq_rel.{scope}.global.add.{sign}{bits}" in ptx
