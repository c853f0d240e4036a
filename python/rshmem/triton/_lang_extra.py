"""Triton-distributed's ``language_extra`` helpers (``triton_dist.language.extra.language_extra``
and its CUDA module), written for stock Triton: loads and stores with scope and semantic,
vector loads and stores, warp shuffles and votes, fences, timers and the per-warp atomic.

Each acts once per calling thread (inline PTX executed by every thread), as in
Triton-distributed, except where the docstring says otherwise. ``scope``: ``"cta"``,
``"gpu"``, ``"sys"``; ``""`` leaves it out (a weak access, for the vector forms).
"""
from __future__ import annotations

import triton
import triton.language as tl
from triton.language import core

from rshmem.triton._extern import DeviceApiTypeError
from rshmem.triton._lang_simt import _REG, make_vector, pack, pack_b32_v2, unpack, vector  # noqa: F401 - packing: part of this API
from rshmem.triton._lang_thread import atomic_add, laneid, ld_acquire

__all__ = [
    "__syncthreads", "__fence", "fence", "membar", "ld", "st", "ld_b32", "st_b32", "load_v4_u32", "load_v4_b32",
    "load_v4_s32", "load_v2_b64", "st_v4_u32", "st_v4_b32", "st_v2_u32", "ld_vector", "st_vector", "pack_b32_v2",
    "pack", "unpack", "__shfl_sync_i32", "__shfl_up_sync_i32", "__shfl_down_sync_i32", "__shfl_xor_sync_i32",
    "__ballot_sync", "atomic_add_per_warp", "wait_eq", "red_release", "arrive_inc", "arrive_inc_asm",
    "globaltimer_lo", "globaltimer_hi", "smid", "threads_per_warp", "num_threads", "num_warps", "tma_sync",
    "cp_async_bulk_wait_group", "elect_one_sync", "multimem_st_b32", "multimem_st_b64", "multimem_st_v2",
    "multimem_st_v4", "multimem_ld_reduce_v4", "multimem_ld_reduce_p_v4", "multimem_st_p_b32",
]

def _c(x):
    return core._unwrap_if_constexpr(x)


def _fail(fn: str, msg: str):
    return DeviceApiTypeError(f"rshmem.triton.language.{fn}: {msg}")


def _qualifiers(fn: str, semantic, scope, allowed_sem) -> str:
    """``.sem.scope`` for an ld/st/atom, or ``""`` for a weak access."""
    semantic, scope = _c(semantic) or "", _c(scope) or ""
    if semantic and semantic not in allowed_sem:
        raise ValueError(f"rshmem.triton.language.{fn}: semantic must be one of {allowed_sem}, got {semantic!r}")
    if scope and scope not in ("cta", "gpu", "sys"):
        raise ValueError(f"rshmem.triton.language.{fn}: scope must be cta, gpu or sys, got {scope!r}")
    if semantic and not scope:
        scope = "gpu"
    if scope and not semantic:
        semantic = "relaxed"
    return f".{semantic}.{scope}" if semantic else ""


def _pointer(ptr, fn: str):
    ptr = _c(ptr)
    if not isinstance(ptr, core.tensor) or not ptr.dtype.is_ptr():
        raise _fail(fn, f"`ptr` must be a pointer, got {ptr!r}")
    return ptr


def _as_uint_pointer(ptr, _semantic):
    bits = ptr.dtype.element_ty.primitive_bitwidth
    return tl.cast(ptr, core.pointer_type(core.get_int_dtype(bits, False)), _semantic=_semantic), bits


def _ret0(asm: str, constraints: str, args, _semantic):
    """An asm statement with side effects and no result of its own (returns int32 0)."""
    return tl.inline_asm_elementwise(asm + " mov.u32 $0, 0;", "=r" + ("," + constraints if constraints else ""), args,
                                     dtype=tl.int32, is_pure=False, pack=1, _semantic=_semantic)


# ---------------------------------------------------------------- barriers and fences
@core.extern
def __syncthreads(_semantic=None):  # noqa: N807 (their name)
    """Barrier of all threads of the program (``bar.sync 0``)."""
    return tl.debug_barrier(_semantic=_semantic)


@core.extern
def fence(semantic="sc", scope="gpu", _semantic=None):
    """``fence.{semantic}.{scope}`` (semantic ``sc`` or ``acq_rel``)."""
    sem, sc = _c(semantic), _c(scope)
    if sem not in ("sc", "acq_rel") or sc not in ("cta", "gpu", "sys", "cluster"):
        raise ValueError(f"rshmem.triton.language.fence: fence.{sem}.{sc} is not a PTX fence")
    return _ret0(f"fence.{sem}.{sc};", "", [], _semantic)


@core.extern
def __fence(semantic="sc", scope="gpu", _semantic=None):  # noqa: N807 (their name)
    """Same as ``fence``."""
    return fence(semantic, scope, _semantic=_semantic)


@core.extern
def membar(scope="cta", _semantic=None):
    """``membar.{cta|gl|sys}``."""
    sc = _c(scope)
    if sc not in ("cta", "gl", "sys"):
        raise ValueError(f"rshmem.triton.language.membar: scope must be cta, gl or sys, got {sc!r}")
    return _ret0(f"membar.{sc};", "", [], _semantic)


# ---------------------------------------------------------------- scalar loads and stores
@core.extern
def ld(ptr, scope="gpu", semantic="relaxed", _semantic=None):
    """``*ptr`` loaded with ``semantic`` (relaxed, acquire) at ``scope``; any 8- to 64-bit dtype."""
    ptr = _pointer(ptr, "ld")
    q = _qualifiers("ld", semantic, scope, ("relaxed", "acquire"))
    t = ptr.dtype.element_ty
    uptr, bits = _as_uint_pointer(ptr, _semantic)
    if bits not in _REG:
        raise _fail("ld", f"needs an 8- to 64-bit element, got {t}")
    reg = 16 if bits == 8 else bits  # PTX has no 8-bit registers: u8 loads into a 16-bit one
    raw = tl.inline_asm_elementwise(f"ld{q}.global.u{bits} $0, [$1];", f"={_REG[reg]},l", [uptr],
                                    dtype=core.get_int_dtype(reg, False), is_pure=False, pack=1, _semantic=_semantic)
    raw = tl.cast(raw, core.get_int_dtype(bits, False), _semantic=_semantic)
    return tl.cast(raw, t, bitcast=True, _semantic=_semantic)


@core.extern
def st(ptr, val, scope="gpu", semantic="relaxed", _semantic=None):
    """Stores ``val`` to ``*ptr`` with ``semantic`` (relaxed, release) at ``scope``; a
    ``vector`` is stored to consecutive elements (``st_vector``)."""
    val = _c(val)
    if isinstance(val, vector):
        return st_vector(ptr, val, scope, semantic, _semantic=_semantic)
    ptr = _pointer(ptr, "st")
    q = _qualifiers("st", semantic, scope, ("relaxed", "release"))
    t = ptr.dtype.element_ty
    uptr, bits = _as_uint_pointer(ptr, _semantic)
    if bits not in _REG:
        raise _fail("st", f"needs an 8- to 64-bit element, got {t}")
    v = tl.cast(val if isinstance(val, core.tensor) else _semantic.to_tensor(val), t, _semantic=_semantic)
    v = tl.cast(v, core.get_int_dtype(bits, False), bitcast=True, _semantic=_semantic)
    if bits == 8:
        v = tl.cast(v, tl.uint16, _semantic=_semantic)
    # Spelled as Triton-distributed's `st` writes it (its tests look for this text): state space
    # first, then .sem.scope, and an untyped .b (the same bits as .u); ptxas takes either order.
    return _ret0(f"st.global{q}.b{bits} [$1], $2;", f"l,{_REG[bits]}", [uptr, v], _semantic)


@core.extern
def ld_b32(ptr, _semantic=None):
    """Relaxed GPU-scope load of an int32."""
    ptr = _pointer(ptr, "ld_b32")
    if ptr.dtype.element_ty != tl.int32:
        raise _fail("ld_b32", f"`ptr` must point to int32, got {ptr.dtype.element_ty}")
    return ld(ptr, "gpu", "relaxed", _semantic=_semantic)


@core.extern
def st_b32(ptr, val0, _semantic=None):
    """Relaxed GPU-scope store of a 32-bit value."""
    return st(ptr, val0, "gpu", "relaxed", _semantic=_semantic)


# ---------------------------------------------------------------- vector loads and stores
def _load_v(fn, ptr, n: int, bits: int, kind: str, q: str, _semantic):
    ptr = _pointer(ptr, fn)
    outs = ",".join("$" + str(i) for i in range(n))
    t = {"u": core.get_int_dtype(bits, False), "s": core.get_int_dtype(bits, True),
         "b": core.get_int_dtype(bits, True)}[kind]
    return tl.inline_asm_elementwise(f"ld{q}.global.v{n}.{kind}{bits} {{{outs}}}, [${n}];",
                                     ",".join(["=" + _REG[bits]] * n) + ",l", [ptr], dtype=(t,) * n, is_pure=False,
                                     pack=1, _semantic=_semantic)


@core.extern
def load_v4_u32(ptr, _semantic=None):
    """Four uint32 from a 16-byte aligned address (weak ``ld.global.v4.u32``)."""
    return _load_v("load_v4_u32", ptr, 4, 32, "u", "", _semantic)


@core.extern
def load_v4_b32(ptr, scope="", semantic="", _semantic=None):
    """Four 32-bit words (int32) from a 16-byte aligned address, optionally ordered."""
    return _load_v("load_v4_b32", ptr, 4, 32, "b", _qualifiers("load_v4_b32", semantic, scope, ("relaxed", "acquire")),
                   _semantic)


@core.extern
def load_v4_s32(ptr, _semantic=None):
    """Four int32 from a 16-byte aligned address."""
    return _load_v("load_v4_s32", ptr, 4, 32, "s", "", _semantic)


@core.extern
def load_v2_b64(ptr, _semantic=None):
    """Two 64-bit words (int64) from a 16-byte aligned address (``ld.volatile``)."""
    ptr = _pointer(ptr, "load_v2_b64")
    return tl.inline_asm_elementwise("ld.volatile.global.v2.b64 {$0,$1}, [$2];", "=l,=l,l", [ptr],
                                     dtype=(tl.int64, tl.int64), is_pure=False, pack=1, _semantic=_semantic)


def _store_v(fn, ptr, vals, bits: int, q: str, volatile: bool, _semantic):
    ptr = _pointer(ptr, fn)
    wt = core.get_int_dtype(bits, False)
    uptr = tl.cast(ptr, core.pointer_type(wt), _semantic=_semantic)
    vs = [tl.cast(v if isinstance(_c(v), core.tensor) else _semantic.to_tensor(_c(v)), wt, _semantic=_semantic)
          for v in vals]
    n = len(vs)
    ins = ",".join("$" + str(i + 2) for i in range(n))
    op = "st.volatile" if volatile else "st" + q
    return _ret0(f"{op}.global.v{n}.b{bits} [$1], {{{ins}}};", "l," + ",".join([_REG[bits]] * n), [uptr] + vs,
                 _semantic)


@core.extern
def st_v4_u32(ptr, val0, val1, val2, val3, _semantic=None):
    """Stores four 32-bit values to a 16-byte aligned address."""
    return _store_v("st_v4_u32", ptr, [val0, val1, val2, val3], 32, "", False, _semantic)


@core.extern
def st_v4_b32(ptr, val0, val1, val2, val3, scope="", semantic="", _semantic=None):
    """Stores four 32-bit values to a 16-byte aligned address, optionally ordered."""
    q = _qualifiers("st_v4_b32", semantic, scope, ("relaxed", "release"))
    return _store_v("st_v4_b32", ptr, [val0, val1, val2, val3], 32, q, False, _semantic)


@core.extern
def st_v2_u32(ptr, val0, val1, _semantic=None):
    """Stores two 32-bit values to an 8-byte aligned address (``st.volatile``)."""
    return _store_v("st_v2_u32", ptr, [val0, val1], 32, "", True, _semantic)


@core.extern
def ld_vector(ptr, vec_size=1, scope="", semantic="", _semantic=None):
    """A ``vector`` of ``vec_size`` (constexpr) elements from ``ptr``: 128 bits per load when
    the vector is a multiple of 128 bits (the caller keeps ``ptr`` 16-byte aligned), else one
    ``ld`` per element."""
    ptr = _pointer(ptr, "ld_vector")
    n = _c(vec_size)
    t = ptr.dtype.element_ty
    total = t.primitive_bitwidth * n
    if total % 128 == 0:
        words = tl.cast(ptr, core.pointer_type(tl.int32), _semantic=_semantic)
        vals = []
        for i in range(total // 128):
            vals += load_v4_b32(tl.add(words, i * 4, _semantic=_semantic), scope, semantic,
                                _semantic=_semantic).values
        return vector(vals).recast(t, _semantic=_semantic)
    sem, sc = (_c(semantic) or "relaxed"), (_c(scope) or "gpu")
    return make_vector([ld(tl.add(ptr, i, _semantic=_semantic), sc, sem, _semantic=_semantic) for i in range(n)],
                       _semantic=_semantic)


@core.extern
def st_vector(ptr, vec, scope="", semantic="", _semantic=None):
    """Stores ``vec`` to consecutive elements at ``ptr`` (128 bits per store when it can)."""
    ptr = _pointer(ptr, "st_vector")
    vec = _c(vec)
    if not isinstance(vec, vector):
        raise _fail("st_vector", f"`vec` must be a vector, got {vec!r}")
    if ptr.dtype.element_ty != vec.dtype:
        raise _fail("st_vector", f"`ptr` points to {ptr.dtype.element_ty} but the vector holds {vec.dtype}")
    total = vec.type.vector_nbits
    if total % 128 == 0:
        words = vec.recast(tl.uint32, _semantic=_semantic).values
        wptr = tl.cast(ptr, core.pointer_type(tl.uint32), _semantic=_semantic)
        for i in range(total // 128):
            st_v4_b32(tl.add(wptr, i * 4, _semantic=_semantic), *words[i * 4:i * 4 + 4], scope=scope, semantic=semantic,
                      _semantic=_semantic)
        return None
    sem, sc = (_c(semantic) or "relaxed"), (_c(scope) or "gpu")
    for i, v in enumerate(vec.values):
        st(tl.add(ptr, i, _semantic=_semantic), v, sc, sem, _semantic=_semantic)
    return None


# ---------------------------------------------------------------- warp shuffles and votes
def _shfl(mode: str, clamp: int, mask, value, lane, _semantic):
    value = _c(value)
    if not isinstance(value, core.tensor):
        value = _semantic.to_tensor(value)
    if value.dtype not in (tl.int32, tl.uint32):
        raise _fail(f"__shfl_{mode}_sync_i32", f"takes int32 or uint32 values, got {value.dtype}")
    lane = tl.cast(_semantic.to_tensor(_c(lane)) if not isinstance(_c(lane), core.tensor) else _c(lane), tl.int32,
                   _semantic=_semantic)
    mask = tl.cast(_semantic.to_tensor(_c(mask)) if not isinstance(_c(mask), core.tensor) else _c(mask), tl.uint32,
                   _semantic=_semantic)
    return tl.inline_asm_elementwise(f"shfl.sync.{mode}.b32 $0, $1, $2, {clamp}, $3;", "=r,r,r,r",
                                     [value, lane, mask], dtype=value.dtype, is_pure=False, pack=1, _semantic=_semantic)


@core.extern
def __shfl_sync_i32(mask, value, laneid, _semantic=None):  # noqa: N807
    """``value`` of lane ``laneid`` (``shfl.sync.idx``); every lane in ``mask`` calls it."""
    return _shfl("idx", 31, mask, value, laneid, _semantic)


@core.extern
def __shfl_up_sync_i32(mask, value, delta, _semantic=None):  # noqa: N807
    """``value`` of lane ``laneid - delta`` (own value for the first ``delta`` lanes)."""
    return _shfl("up", 0, mask, value, delta, _semantic)


@core.extern
def __shfl_down_sync_i32(mask, value, delta, _semantic=None):  # noqa: N807
    """``value`` of lane ``laneid + delta`` (own value past the last lane)."""
    return _shfl("down", 31, mask, value, delta, _semantic)


@core.extern
def __shfl_xor_sync_i32(mask, value, delta, _semantic=None):  # noqa: N807
    """``value`` of lane ``laneid ^ delta``."""
    return _shfl("bfly", 31, mask, value, delta, _semantic)


@core.extern
def __ballot_sync(mask, predicate, _semantic=None):  # noqa: N807
    """Bit i set when lane i's ``predicate`` is non-zero (``vote.sync.ballot``); int32."""
    predicate = tl.cast(_c(predicate), tl.int32, _semantic=_semantic)
    mask = tl.cast(_c(mask), tl.uint32, _semantic=_semantic)
    return tl.inline_asm_elementwise("{ .reg .pred p; setp.ne.b32 p, $1, 0; vote.sync.ballot.b32 $0, p, $2; }",
                                     "=r,r,r", [predicate, mask], dtype=tl.int32, is_pure=False, pack=1,
                                     _semantic=_semantic)


# ---------------------------------------------------------------- per-warp and per-program helpers
@triton.jit
def atomic_add_per_warp(barrier_ptr, value, scope: core.constexpr, semantic: core.constexpr):
    """Lane 0 of each warp adds ``value`` once; every lane gets the old value (warp-collective)."""
    old = tl.cast(0, barrier_ptr.dtype.element_ty)
    if laneid() == 0:
        old = atomic_add(barrier_ptr, value, scope, semantic)
    return __shfl_sync_i32(0xFFFFFFFF, old, 0)


@triton.jit
def wait_eq(barrier_ptr, thread_idx, value, scope: core.constexpr):
    """The thread with ``thread_idx == 0`` spins until ``*barrier_ptr == value`` (acquire); then
    the program synchronizes (``__syncthreads``). Device-side; the host ``wait_eq`` is in
    ``rshmem.compat.triton_dist``."""
    if thread_idx == 0:
        while ld_acquire(barrier_ptr, scope) != value:
            pass
    __syncthreads()


@core.extern
def red_release(barrier_ptr, value, scope="gpu", _semantic=None):
    """``red.release.{scope}.add.s32``: adds ``value`` to ``*barrier_ptr`` (int32), no result."""
    sc = _c(scope)
    v = tl.cast(_c(value), tl.int32, _semantic=_semantic)
    return _ret0(f"red.release.{sc}.global.add.s32 [$1], $2;", "l,r", [barrier_ptr, v], _semantic)


@triton.jit
def arrive_inc(barrier_ptr, thread_idx, value, scope: core.constexpr):
    """``__syncthreads()``, then thread ``thread_idx == 0`` releases ``value`` into the counter."""
    __syncthreads()
    if thread_idx == 0:
        red_release(barrier_ptr, value, scope)


@core.extern
def arrive_inc_asm(barrier_ptr, thread_idx, value, scope="gpu", _semantic=None):
    """``arrive_inc`` in one asm block (``bar.sync 0`` then the predicated ``red.release``)."""
    sc = _c(scope)
    t = tl.cast(_c(thread_idx), tl.int32, _semantic=_semantic)
    v = tl.cast(_c(value), tl.int32, _semantic=_semantic)
    return _ret0("{ .reg .pred p; bar.sync 0; setp.eq.s32 p, $2, 0; @p red.release." + sc +
                 ".global.add.s32 [$1], $3; }", "l,r,r", [barrier_ptr, t, v], _semantic)


# ---------------------------------------------------------------- timers and ids
def _sreg(name: str, ty, _semantic):
    c = "l" if ty.primitive_bitwidth == 64 else "r"
    return tl.inline_asm_elementwise(f"mov.u{ty.primitive_bitwidth} $0, %{name};", "=" + c, [], dtype=ty,
                                     is_pure=False, pack=1, _semantic=_semantic)


@core.extern
def globaltimer_lo(_semantic=None):
    """Low 32 bits of the nanosecond global timer; uint32."""
    return _sreg("globaltimer_lo", tl.uint32, _semantic)


@core.extern
def globaltimer_hi(_semantic=None):
    """High 32 bits of the nanosecond global timer; uint32."""
    return _sreg("globaltimer_hi", tl.uint32, _semantic)


@core.extern
def smid(_semantic=None):
    """The SM this thread runs on; uint32."""
    return _sreg("smid", tl.uint32, _semantic)


@core.builtin
def threads_per_warp(_semantic=None):
    """32 (constexpr)."""
    return core.constexpr(32)


@core.builtin
def num_warps(_semantic=None):
    """The kernel's ``num_warps`` (constexpr)."""
    return core.constexpr(_semantic.builder.options.num_warps)


@core.builtin
def num_threads(_semantic=None):
    """Threads per program, ``num_warps * 32`` (constexpr)."""
    return core.constexpr(_semantic.builder.options.num_warps * 32)


@core.extern
def cp_async_bulk_wait_group(N, read=False, _semantic=None):  # noqa: N803 (their name)
    """``cp.async.bulk.wait_group[.read] N``: at most N bulk copy groups still pending."""
    return _ret0(f"cp.async.bulk.wait_group{'.read' if _c(read) else ''} {_c(N)};", "", [], _semantic)


@core.extern
def tma_sync(N=0, _semantic=None):  # noqa: N803 (their name)
    """``cp.async.bulk.wait_group N``."""
    return cp_async_bulk_wait_group(N, _semantic=_semantic)


@core.extern
def elect_one_sync(_semantic=None):
    """1 in one elected lane of the warp, 0 elsewhere (``elect.sync``); every lane calls it."""
    return tl.inline_asm_elementwise("{ .reg .pred p; elect.sync _|p, 0xFFFFFFFF; selp.u32 $0, 1, 0, p; }", "=r", [],
                                     dtype=tl.int32, is_pure=False, pack=1, _semantic=_semantic)


@core.extern
def cp_async_bulk_commit_group(_semantic=None):
    """``cp.async.bulk.commit_group``: the bulk copies issued so far form one group."""
    return _ret0("cp.async.bulk.commit_group;", "", [], _semantic)


@core.extern
def fence_async_shared(_semantic=None):
    """``fence.proxy.async.shared::cta``: orders generic and async-proxy (TMA) accesses to shared
    memory."""
    return _ret0("fence.proxy.async.shared::cta;", "", [], _semantic)


@core.extern
def fence_proxy_async(_semantic=None):
    """``fence.proxy.async``: orders generic and async-proxy accesses to all state spaces."""
    return _ret0("fence.proxy.async;", "", [], _semantic)


@core.extern
def named_barrier_sync(barrier_id, num_threads, _semantic=None):
    """``bar.sync barrier_id, num_threads`` (constexprs; ``num_threads`` a multiple of 32)."""
    bid, n = _c(barrier_id), _c(num_threads)
    if not (isinstance(bid, int) and 0 <= bid < 16 and isinstance(n, int) and n > 0 and n % 32 == 0):
        raise ValueError(f"rshmem.triton.language.named_barrier_sync: barrier_id must be a constexpr in [0, 16) and "
                         f"num_threads a positive constexpr multiple of 32, got {bid!r}, {n!r}")
    return _ret0(f"bar.sync {bid}, {n};", "", [], _semantic)


@core.extern
def warp_idx(_semantic=None):
    """The warp's index in the program (``%tid.x / 32``; Triton programs are one-dimensional)."""
    return tl.inline_asm_elementwise("{ .reg .u32 t; mov.u32 t, %tid.x; shr.u32 $0, t, 5; }", "=r", [],
                                     dtype=tl.int32, is_pure=True, pack=1, _semantic=_semantic)


def _descriptor_address(desc, fn: str, _semantic):
    desc = _c(desc)
    if not isinstance(desc, core.tensor) or not desc.dtype.is_ptr():
        raise _fail(fn, f"`tmap_global_ptr` must be a pointer to a TMA descriptor in global memory, got {desc!r}")
    return desc


@core.extern
def prefetch_tensor_2d_l2(tmap_global_ptr, coord_0, coord_1, _semantic=None):
    """``cp.async.bulk.prefetch.tensor.2d.L2.global``: the box at (coord_0, coord_1) of the TMA
    descriptor at ``tmap_global_ptr`` into L2."""
    addr = _descriptor_address(tmap_global_ptr, "prefetch_tensor_2d_l2", _semantic)
    c0 = tl.cast(coord_0, tl.int32, _semantic=_semantic)
    c1 = tl.cast(coord_1, tl.int32, _semantic=_semantic)
    return _ret0("cp.async.bulk.prefetch.tensor.2d.L2.global.tile [$1, {$2, $3}];", "l,r,r", [addr, c0, c1],
                 _semantic)


@core.extern
def prefetch_tensormap(tmap_global_ptr, _semantic=None):
    """The box at (0, 0) of the TMA descriptor at ``tmap_global_ptr`` into L2 (what
    Triton-distributed's ``prefetch_tensormap`` does)."""
    return prefetch_tensor_2d_l2(tmap_global_ptr, 0, 0, _semantic=_semantic)


# ---------------------------------------------------------------- NVLink multicast: not offered
def _no_multicast(name: str):
    def refuse(*args, _semantic=None, **kwargs):
        raise NotImplementedError(
            f"rshmem.triton.language.{name} uses NVLink multicast (multimem), which rshmem does not support: the "
            "machines it targets forbid it. Use the per-peer form (symm_at + ld/st, or libshmem_device puts) as "
            "docs/porting-from-triton-distributed.md shows")
    refuse.__name__ = name
    refuse.__doc__ = f"Not offered: ``{name}`` needs NVLink multicast."
    return core.extern(refuse)


multimem_st_b32 = _no_multicast("multimem_st_b32")
multimem_st_b64 = _no_multicast("multimem_st_b64")
multimem_st_v2 = _no_multicast("multimem_st_v2")
multimem_st_v4 = _no_multicast("multimem_st_v4")
multimem_st_p_b32 = _no_multicast("multimem_st_p_b32")
multimem_ld_reduce_v4 = _no_multicast("multimem_ld_reduce_v4")
multimem_ld_reduce_p_v4 = _no_multicast("multimem_ld_reduce_p_v4")
