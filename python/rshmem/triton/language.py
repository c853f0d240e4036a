"""Thread-level helpers for Triton kernels that communicate through rshmem.

Execution model
---------------
Triton runs a kernel's scalar code in every thread of the program (CTA): ``num_warps * 32``
threads along axis 0. The functions of ``libshmem_device`` come in three scopes:

- ``*_block``: called by all threads of the CTA with the same arguments (it synchronizes the
  block before and after, splits the work over the threads, and issues any signal once).
- ``*_warp``: called by all 32 threads of a warp with the same arguments.
- thread scope (``putmem``, ``signal_op``, ``signal_wait_until``, ``barrier_all``, atomics, ...):
  acts once per calling thread, so guard it::

      if tid(0) == 0:
          libshmem_device.signal_op(sig, 1, libshmem_device.SIGNAL_ADD, peer)
      syncthreads()      # others wait for thread 0 when they depend on its result

The helpers below are inline PTX (``tl.inline_asm_elementwise``) or calls into the library.
``scope`` is ``"cta"``, ``"gpu"`` or ``"sys"`` (peers' memory needs ``"sys"``); ``semantic`` is
``"relaxed"``, ``"acquire"``, ``"release"`` or ``"acq_rel"``.
"""
from __future__ import annotations

import triton.language as tl
from triton.language import core

from rshmem.triton import libshmem_device

__all__ = ["tid", "ntid", "laneid", "syncthreads", "ld_acquire", "st_release", "atomic_add", "atomic_cas",
           "wait", "notify", "symm_at", "consume_token", "globaltimer", "rank", "num_ranks"]

_SCOPES = ("cta", "gpu", "sys")
_SEMANTICS = ("relaxed", "acquire", "release", "acq_rel")
_AXES = {0: "x", 1: "y", 2: "z"}


def _const(x, what: str, allowed):
    x = core._unwrap_if_constexpr(x)
    if x not in allowed:
        raise ValueError(f"rshmem.triton.language: {what} must be one of {allowed}, got {x!r}")
    return x


def _int_suffix(dtype, fn: str) -> tuple[str, str]:
    """(PTX type suffix for ld/st/atom, register constraint) of a 32/64-bit integer dtype."""
    if dtype.is_int() and dtype.primitive_bitwidth == 32:
        return "32", "r"
    if dtype.is_int() and dtype.primitive_bitwidth == 64:
        return "64", "l"
    raise TypeError(f"rshmem.triton.language.{fn}: needs a pointer to a 32- or 64-bit integer, got {dtype}")


def _pointee(ptr, fn: str):
    ptr = core._unwrap_if_constexpr(ptr)
    if not isinstance(ptr, core.tensor) or not ptr.dtype.is_ptr():
        raise TypeError(f"rshmem.triton.language.{fn}: first argument must be a pointer")
    return ptr.dtype.element_ty


@core.extern
def tid(axis, _semantic=None):
    """Thread index in the CTA along ``axis`` (0, 1, 2); int32."""
    r = _AXES[_const(axis, "axis", (0, 1, 2))]
    return tl.inline_asm_elementwise("mov.u32 $0, %tid." + r + ";", "=r", [], dtype=tl.int32, is_pure=True,
                                     pack=1, _semantic=_semantic)


@core.extern
def ntid(axis, _semantic=None):
    """Threads per CTA along ``axis``; int32."""
    r = _AXES[_const(axis, "axis", (0, 1, 2))]
    return tl.inline_asm_elementwise("mov.u32 $0, %ntid." + r + ";", "=r", [], dtype=tl.int32, is_pure=True,
                                     pack=1, _semantic=_semantic)


@core.extern
def laneid(_semantic=None):
    """Lane of this thread in its warp (0..31); int32."""
    return tl.inline_asm_elementwise("mov.u32 $0, %laneid;", "=r", [], dtype=tl.int32, is_pure=True, pack=1,
                                     _semantic=_semantic)


@core.extern
def globaltimer(_semantic=None):
    """The GPU's global nanosecond timer (%globaltimer); int64."""
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1,
                                     _semantic=_semantic)


@core.extern
def syncthreads(_semantic=None):
    """Barrier of all threads of the CTA (bar.sync 0), also ordering their memory at CTA scope."""
    return tl.debug_barrier(_semantic=_semantic)


@core.extern
def ld_acquire(ptr, scope="gpu", _semantic=None):
    """``*ptr`` loaded with acquire semantics at ``scope`` (32/64-bit integers; scalar or block)."""
    scope = _const(scope, "scope", _SCOPES)
    bits, c = _int_suffix(_pointee(ptr, "ld_acquire"), "ld_acquire")
    return tl.inline_asm_elementwise(f"ld.acquire.{scope}.global.b{bits} $0, [$1];", f"={c},l,~{{memory}}", [ptr],
                                     dtype=_pointee(ptr, "ld_acquire"), is_pure=False, pack=1, _semantic=_semantic)


@core.extern
def st_release(ptr, value, scope="gpu", _semantic=None):
    """Stores ``value`` to ``*ptr`` with release semantics at ``scope``; returns 0 (int32)."""
    scope = _const(scope, "scope", _SCOPES)
    t = _pointee(ptr, "st_release")
    bits, c = _int_suffix(t, "st_release")
    value = tl.cast(value, t, _semantic=_semantic)
    return tl.inline_asm_elementwise(f"st.release.{scope}.global.b{bits} [$1], $2; mov.u32 $0, 0;",
                                     f"=r,l,{c},~{{memory}}", [ptr, value], dtype=tl.int32, is_pure=False, pack=1,
                                     _semantic=_semantic)


@core.extern
def atomic_add(ptr, value, scope="gpu", semantic="relaxed", _semantic=None):
    """Atomic add at ``scope`` with ``semantic``; returns the old value."""
    scope = _const(scope, "scope", _SCOPES)
    sem = _const(semantic, "semantic", _SEMANTICS)
    t = _pointee(ptr, "atomic_add")
    bits, c = _int_suffix(t, "atomic_add")
    value = tl.cast(value, t, _semantic=_semantic)
    return tl.inline_asm_elementwise(f"atom.{sem}.{scope}.global.add.u{bits} $0, [$1], $2;",
                                     f"={c},l,{c},~{{memory}}", [ptr, value], dtype=t, is_pure=False, pack=1,
                                     _semantic=_semantic)


@core.extern
def atomic_cas(ptr, cmp, value, scope="gpu", semantic="relaxed", _semantic=None):
    """Atomic compare-and-swap at ``scope`` with ``semantic``; returns the old value."""
    scope = _const(scope, "scope", _SCOPES)
    sem = _const(semantic, "semantic", _SEMANTICS)
    t = _pointee(ptr, "atomic_cas")
    bits, c = _int_suffix(t, "atomic_cas")
    cmp = tl.cast(cmp, t, _semantic=_semantic)
    value = tl.cast(value, t, _semantic=_semantic)
    return tl.inline_asm_elementwise(f"atom.{sem}.{scope}.global.cas.b{bits} $0, [$1], $2, $3;",
                                     f"={c},l,{c},{c},~{{memory}}", [ptr, cmp, value], dtype=t, is_pure=False,
                                     pack=1, _semantic=_semantic)


@core.extern
def wait(ptr, value, scope="gpu", _semantic=None):
    """Spins until ``*ptr == value`` (acquire at ``scope``); returns the value seen, usable as a
    token for ``consume_token``. Thread scope: every calling thread spins."""
    scope = _const(scope, "scope", _SCOPES)
    t = _pointee(ptr, "wait")
    bits, c = _int_suffix(t, "wait")
    value = tl.cast(value, t, _semantic=_semantic)
    asm = ("{ .reg .pred %p; rshmem_wait_${:uid}: ld.acquire." + scope + ".global.b" + bits + " $0, [$1]; "
           "setp.ne.b" + bits + " %p, $0, $2; @%p bra rshmem_wait_${:uid}; }")
    return tl.inline_asm_elementwise(asm, f"={c},l,{c},~{{memory}}", [ptr, value], dtype=t, is_pure=False, pack=1,
                                     _semantic=_semantic)


@core.extern
def notify(ptr, pe, value=1, sig_op="set", _semantic=None):
    """Sets (``"set"``) or adds to (``"add"``) the 64-bit signal ``ptr`` on ``pe`` with release at
    system scope (``libshmem_device.signal_op``). Thread scope."""
    op = _const(sig_op, "sig_op", ("set", "add"))
    code = libshmem_device.SIGNAL_SET if op == "set" else libshmem_device.SIGNAL_ADD
    return libshmem_device.signal_op(ptr, value, code, pe, _semantic=_semantic)


@core.extern
def symm_at(ptr, pe, _semantic=None):
    """The address of symmetric ``ptr`` on ``pe`` (``libshmem_device.remote_ptr``), same type."""
    return libshmem_device.remote_ptr(ptr, pe, _semantic=_semantic)


@core.extern
def consume_token(x, token, _semantic=None):
    """Returns ``x`` with a data dependence on ``token`` (e.g. the result of ``wait``), so loads
    through ``x`` are not issued before the wait completes."""
    x = core._unwrap_if_constexpr(x)
    token = core._unwrap_if_constexpr(token)
    if not isinstance(token, core.tensor):
        token = _semantic.to_tensor(token)
    tbits, tc = ("64", "l") if token.dtype.primitive_bitwidth == 64 else ("32", "r")
    if x.dtype.is_ptr() or x.dtype.primitive_bitwidth == 64:
        c = "l"
    elif x.dtype.primitive_bitwidth == 32:
        c = "r"
    else:
        raise TypeError(f"rshmem.triton.language.consume_token: x must be a pointer or a 32/64-bit value, got {x.dtype}")
    return tl.inline_asm_elementwise("mov.b" + ("64" if c == "l" else "32") + " $0, $1; // token $2",
                                     f"={c},{c},{tc}", [x, token], dtype=x.dtype, is_pure=False, pack=1,
                                     _semantic=_semantic)


@core.extern
def rank(_semantic=None):
    """This PE (``libshmem_device.my_pe``)."""
    return libshmem_device.my_pe(_semantic=_semantic)


@core.extern
def num_ranks(_semantic=None):
    """Number of PEs (``libshmem_device.n_pes``)."""
    return libshmem_device.n_pes(_semantic=_semantic)
