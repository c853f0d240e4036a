"""NVSHMEM twins of `kernels_rshmem`, through PyTorch's NVSHMEM Triton integration.

torch 2.11 ships `torch.distributed._symmetric_memory._nvshmem_triton`: `requires_nvshmem` finds
`libnvshmem_device.bc`, links it into the kernel and hands every compiled module to NVSHMEM; its
device functions (`put`, `putmem_signal_block`, `signal_wait_until`, `wait_until`, `quiet`,
`my_pe`) take pointers as int64. The NVSHMEM functions torch has no binding for
(`nvshmemx_putmem_nbi_block`, `nvshmem_int_p`, `nvshmemx_barrier_all_block`) are declared here the
same way. Kernels are plain `triton.jit` functions; `launchers()` wraps them with
`requires_nvshmem` at run time (it needs NVSHMEM's bitcode; torch's module only defines the
device functions where `torch.utils._triton.has_triton()` holds, i.e. on a GPU machine).

NVSHMEM's constants (NVSHMEM 3.4 headers: `nvshmem_constants.h`, `nvshmem_common_transport.h`):
NVSHMEM_CMP_GE = 5, NVSHMEM_SIGNAL_SET = 9, NVSHMEM_SIGNAL_ADD = 10. (Some torch docstrings say
SIGNAL_SET = 0; the headers are what the library compares against. `check_constants()` reads
the installed headers to confirm.)
"""
from __future__ import annotations

import re
from pathlib import Path

import triton
import triton.language as tl
from triton.language import core

import torch.distributed._symmetric_memory._nvshmem_triton as nvshmem

from benchmarks.kernels.ptx import globaltimer, thread_id

CMP_GE = tl.constexpr(5)
SIGNAL_SET = tl.constexpr(9)
SIGNAL_ADD = tl.constexpr(10)

_I64 = core.dtype("int64")
_I32 = core.dtype("int32")


@core.extern
def putmem_nbi_block(dest, source, nbytes, pe, _semantic=None):
    """nvshmemx_putmem_nbi_block(dest, source, nbytes, pe); pointers and nbytes as int64."""
    return core.extern_elementwise("", "", [dest, source, nbytes, pe],
                                   {(_I64, _I64, _I64, _I32): ("nvshmemx_putmem_nbi_block", _I32)},
                                   is_pure=False, _semantic=_semantic)


@core.extern
def int_p(dest, value, pe, _semantic=None):
    """nvshmem_int_p(dest, value, pe); dest as int64."""
    return core.extern_elementwise("", "", [dest, value, pe], {(_I64, _I32, _I32): ("nvshmem_int_p", _I32)},
                                   is_pure=False, _semantic=_semantic)


@core.extern
def barrier_all_block(_semantic=None):
    """nvshmemx_barrier_all_block()."""
    return core.extern_elementwise("", "", [], {(): ("nvshmemx_barrier_all_block", _I32)}, is_pure=False,
                                   _semantic=_semantic)


@triton.jit(do_not_specialize=["nbytes", "slice_bytes", "pe"])
def nv_put_kernel(dst, src, nbytes, slice_bytes, pe, NBI: tl.constexpr):
    """CTA i puts its slice of `src` into `dst` on `pe`: `nvshmemx_putmem_block` (torch's `put`
    on bytes) or `nvshmemx_putmem_nbi_block` then `quiet`."""
    start = tl.program_id(0).to(tl.int64) * slice_bytes
    n = tl.minimum(nbytes - start, slice_bytes).to(tl.int64)
    if NBI:
        putmem_nbi_block((dst + start).to(tl.int64), (src + start).to(tl.int64), n, pe.to(tl.int32))
        nvshmem.quiet()
    else:
        nvshmem.put(dst + start, src + start, n, pe)


@triton.jit
def _nv_signal_round(me, peer, buf, src, sig, nbytes, v):
    if me == 0:
        nvshmem.putmem_signal_block(buf, src, nbytes, sig, v, SIGNAL_SET, peer)
        nvshmem.signal_wait_until(sig, CMP_GE, v)
    else:
        nvshmem.signal_wait_until(sig, CMP_GE, v)
        nvshmem.putmem_signal_block(buf, src, nbytes, sig, v, SIGNAL_SET, peer)


@triton.jit(do_not_specialize=["nbytes", "iters", "base"])
def nv_pingpong_signal_kernel(buf, src, sig, t_out, nbytes, iters, base):
    """Twin of `kernels_rshmem.pingpong_signal_kernel`."""
    me = nvshmem.my_pe()
    peer = 1 - me
    n = nbytes.to(tl.int64)
    _nv_signal_round(me, peer, buf, src, sig, n, (base + 1).to(tl.int64))
    t0 = globaltimer()
    for i in range(iters):
        _nv_signal_round(me, peer, buf, src, sig, n, (base + i + 2).to(tl.int64))
    t1 = globaltimer()
    tl.store(t_out, t1 - t0)


@triton.jit
def _nv_p_round(me, peer, flag, v):
    if me == 0:
        int_p(flag.to(tl.int64), v, peer)
        nvshmem.wait_until(flag, CMP_GE, v)
    else:
        nvshmem.wait_until(flag, CMP_GE, v)
        int_p(flag.to(tl.int64), v, peer)


@triton.jit(do_not_specialize=["iters", "base"])
def nv_pingpong_p_kernel(flag, t_out, iters, base):
    """Twin of `kernels_rshmem.pingpong_p_kernel`."""
    me = nvshmem.my_pe()
    peer = 1 - me
    if thread_id() == 0:
        _nv_p_round(me, peer, flag, (base + 1).to(tl.int32))
        t0 = globaltimer()
        for i in range(iters):
            _nv_p_round(me, peer, flag, (base + i + 2).to(tl.int32))
        t1 = globaltimer()
        tl.store(t_out, t1 - t0)


@triton.jit(do_not_specialize=["iters"])
def nv_barrier_kernel(t_out, iters):
    """Twin of `kernels_rshmem.barrier_kernel` (`nvshmemx_barrier_all_block`)."""
    barrier_all_block()
    t0 = globaltimer()
    for i in range(iters):
        barrier_all_block()
    t1 = globaltimer()
    tl.store(t_out, t1 - t0)


#: The kernels, by the name the benchmarks use.
RAW = {
    "put": nv_put_kernel,
    "pingpong_signal": nv_pingpong_signal_kernel,
    "pingpong_p": nv_pingpong_p_kernel,
    "barrier": nv_barrier_kernel,
}


def launchers() -> dict:
    """The kernels wrapped with torch's `requires_nvshmem` (launch as `k[grid](...)`)."""
    return {name: nvshmem.requires_nvshmem(fn) for name, fn in RAW.items()}


def device_library() -> str:
    """Path of `libnvshmem_device.bc` as torch finds it (RuntimeError naming the searched paths)."""
    return nvshmem.NvshmemLibFinder.find_device_library()


def check_constants() -> str | None:
    """None when the installed NVSHMEM headers agree with the constants used here, else what
    differs (or why the headers could not be read)."""
    try:
        inc = Path(device_library()).resolve().parent.parent / "include"
        text = "".join(p.read_text(errors="replace") for p in inc.rglob("*.h")
                       if p.name in ("nvshmem_constants.h", "nvshmem_common_transport.h"))
    except (OSError, RuntimeError) as e:
        return f"could not read the NVSHMEM headers: {e}"
    found = {}
    m = re.search(r"NVSHMEM_SIGNAL_SET\s*=\s*(\d+)\s*,\s*NVSHMEM_SIGNAL_ADD\s*=\s*(\d+)", text)
    if m:
        found["SIGNAL_SET"], found["SIGNAL_ADD"] = int(m.group(1)), int(m.group(2))
    m = re.search(r"NVSHMEM_CMP_EQ\s*=\s*0,\s*NVSHMEM_CMP_NE,\s*NVSHMEM_CMP_GT,\s*NVSHMEM_CMP_LE,\s*"
                  r"NVSHMEM_CMP_LT,\s*NVSHMEM_CMP_GE", text)
    if m:
        found["CMP_GE"] = 5
    want = {"SIGNAL_SET": 9, "SIGNAL_ADD": 10, "CMP_GE": 5}
    diff = {k: (want[k], found.get(k)) for k in want if found.get(k) != want[k]}
    return None if not diff else f"NVSHMEM constants differ from the headers (used, found): {diff}"
