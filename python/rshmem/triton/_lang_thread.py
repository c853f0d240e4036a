"""Thread geometry and memory-ordering helpers of ``rshmem.triton.language`` (inline PTX).

``scope`` is ``"cta"``, ``"gpu"`` or ``"sys"`` (peers' memory needs ``"sys"``); ``semantic`` is
``"relaxed"``, ``"acquire"``, ``"release"`` or ``"acq_rel"``.
"""
from __future__ import annotations

import triton.language as tl
from triton.language import core

__all__ = ["tid", "ntid", "laneid", "syncthreads", "ld_acquire", "st_release", "atomic_add", "atomic_cas",
           "globaltimer"]

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
    # The same bits either way; .s32 for int32 is Triton-distributed's spelling (PTX has no .s64 add).
    sign = "s" if t.is_int_signed() and bits == "32" else "u"
    return tl.inline_asm_elementwise(f"atom.{sem}.{scope}.global.add.{sign}{bits} $0, [$1], $2;",
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
