"""Signals between programs and PEs: Triton-distributed's ``dl.wait`` / ``dl.notify`` /
``dl.consume_token`` / ``dl.symm_at`` / ``dl.rank`` / ``dl.num_ranks`` with their signatures
and semantics, and rshmem's own single-word forms ``wait_value`` and ``notify_thread``.

Who acts
--------
- ``wait(ptrs, num_barriers, scope, semantic, waitValue=1)``: every warp waits. Lane ``i`` of
  each warp spins on ``ptrs + i`` (and ``ptrs + i + 32``, ... when ``num_barriers`` exceeds 32)
  until it equals ``waitValue``; then the warp synchronizes (``bar.warp.sync``). Every thread of
  the program must reach it (it is a warp-collective), and after it every thread has observed
  all the flags, so no ``__syncthreads()`` is needed before using data they guard.
- ``notify(ptr, rank, signal=1, sig_op="set", comm_scope="inter_node")``: thread 0 of the
  program acts, once, whichever threads call it. Writes other threads made before it are
  published only if they are ordered before thread 0's release, i.e. after ``__syncthreads()``.
- ``wait_value(ptr, value, scope)`` and ``notify_thread(ptr, pe, value, sig_op)``: thread scope,
  every calling thread acts (guard with ``if tid(0) == 0:``).

``consume_token(x, token)`` returns ``x`` with a data dependence on ``token``, so that what is
read through ``x`` is read after the wait that produced ``token``: Triton's pipeliner then
cannot issue a load through ``x`` ahead of that wait, because it schedules an operation no
earlier than its operands. ``x`` is a pointer (scalar or block), a 16/32/64-bit value, or a
tensor descriptor (host-side ``TensorDescriptor`` argument or ``tl.make_tensor_descriptor``).
"""
from __future__ import annotations

import triton.language as tl
from triton.language import core

from rshmem.triton import libshmem_device
from rshmem.triton._extern import DeviceApiTypeError
from rshmem.triton._lang_thread import tid

__all__ = ["wait", "wait_value", "notify", "notify_thread", "consume_token", "symm_at", "rank", "num_ranks"]

_SCOPES = ("cta", "gpu", "sys")
_LOAD_SEMANTICS = ("relaxed", "acquire")
_SIG_OPS = {"set": libshmem_device.SIGNAL_SET, "add": libshmem_device.SIGNAL_ADD}
_COMM_SCOPES = ("gpu", "intra_node", "inter_node")


def _choice(x, fn: str, what: str, allowed):
    x = core._unwrap_if_constexpr(x)
    if x not in allowed:
        raise ValueError(f"rshmem.triton.language.{fn}: `{what}` must be one of {allowed}, got {x!r}")
    return x


def _scalar_pointer(ptr, fn: str, what: str):
    ptr = core._unwrap_if_constexpr(ptr)
    if not isinstance(ptr, core.tensor) or not ptr.dtype.is_ptr():
        raise DeviceApiTypeError(f"rshmem.triton.language.{fn}: `{what}` must be a pointer, got {ptr!r}")
    if ptr.type.is_block():
        raise DeviceApiTypeError(f"rshmem.triton.language.{fn}: `{what}` must be one pointer (a scalar), "
                                 f"got a block of shape {ptr.shape}")
    return ptr


def _flag_width(ptr, fn: str) -> tuple[int, str]:
    """(bits, register constraint) of a pointer to a 32- or 64-bit integer flag."""
    t = ptr.dtype.element_ty
    if t.is_int() and t.primitive_bitwidth in (32, 64):
        return t.primitive_bitwidth, ("r" if t.primitive_bitwidth == 32 else "l")
    raise DeviceApiTypeError(f"rshmem.triton.language.{fn}: flags must be 32- or 64-bit integers, got a pointer to {t}")


def _int_scalar(x, fn: str, what: str, _semantic):
    x = core._unwrap_if_constexpr(x)
    if isinstance(x, core.tensor):
        if x.dtype.is_ptr() or not x.dtype.is_int() or x.type.is_block():
            raise DeviceApiTypeError(f"rshmem.triton.language.{fn}: `{what}` must be an integer scalar, got {x.type}")
        return x
    if isinstance(x, int) and not isinstance(x, bool):
        return _semantic.to_tensor(x)
    raise DeviceApiTypeError(f"rshmem.triton.language.{fn}: `{what}` must be an integer, got {x!r}")


def _opaque_true(_semantic):
    """An i1 true that MLIR cannot fold (a pure inline-asm constant)."""
    one = tl.inline_asm_elementwise("mov.u32 $0, 1;", "=r", [], dtype=tl.int32, is_pure=True, pack=1,
                                    _semantic=_semantic)
    return _semantic.builder.create_icmpNE(one.handle, _semantic.builder.get_int32(0))


def _predicable(emit, dtype, _semantic) -> core.tensor:
    """The scalar ``emit()`` returns, computed inside an ``scf.if`` on an opaque true.

    Triton's pipeliner peels loop iterations and must then predicate every operation with side
    effects that a pipelined load depends on; it knows how for ``scf.if`` (it adds to the
    condition) and stops the process for an inline-asm operation. A wait in a loop whose loads
    consume its token is such a dependency, so it goes in a branch.
    """
    b = _semantic.builder
    branch = b.create_if_op([dtype.to_ir(b)], _opaque_true(_semantic), True)
    after = b.get_insertion_point()
    b.set_insertion_point_to_end(branch.get_then_block())
    b.create_yield_op([emit().handle])
    b.set_insertion_point_to_end(branch.get_else_block())
    b.create_yield_op([tl.cast(_semantic.to_tensor(0), dtype, _semantic=_semantic).handle])
    b.restore_insertion_point(after)
    return core.tensor(branch.get_result(0), dtype)


@core.extern
def wait(ptrs, num_barriers, scope, semantic=None, waitValue=1, _semantic=None):  # noqa: N803 (their name)
    """Triton-distributed's ``dl.wait``: lanes ``i < num_barriers`` of every warp spin until
    ``ptrs[i] == waitValue``, loading with ``semantic`` (``"acquire"`` or ``"relaxed"``) at
    ``scope`` (``"cta"``, ``"gpu"``, ``"sys"``); then each warp synchronizes. Flags are 32- or
    64-bit integers; ``num_barriers`` may exceed 32 (lanes take every 32nd flag). Returns an int32
    token for ``consume_token``. Called by every thread of the program (warp-collective).

    rshmem's single-word ``wait(ptr, value, scope)`` is ``wait_value``.
    """
    if core._unwrap_if_constexpr(semantic) is None:
        raise TypeError("rshmem.triton.language.wait(ptrs, num_barriers, scope, semantic, waitValue=1) is "
                        "Triton-distributed's multi-flag wait and needs `semantic` (\"acquire\" or \"relaxed\"); "
                        "rshmem's single-word wait(ptr, value, scope) is called wait_value")
    ptrs = _scalar_pointer(ptrs, "wait", "ptrs")
    bits, c = _flag_width(ptrs, "wait")
    scope = _choice(scope, "wait", "scope", _SCOPES)
    sem = _choice(semantic, "wait", "semantic", _LOAD_SEMANTICS)
    n = tl.cast(_int_scalar(num_barriers, "wait", "num_barriers", _semantic), tl.int32, _semantic=_semantic)
    value = tl.cast(_int_scalar(waitValue, "wait", "waitValue", _semantic), ptrs.dtype.element_ty,
                    _semantic=_semantic)
    # Lane i polls flags i, i + 32, ... below n. Each poll is the ordered load itself, so the
    # value that ends a spin is the one that synchronized with its writer.
    asm = ("{ .reg .pred %p; .reg .s32 %i; .reg .u64 %a; .reg .b" + str(bits) + " %v;\n"
           "mov.u32 %i, %laneid;\n"
           "rshmem_wait_lane_${:uid}:\n"
           "setp.ge.s32 %p, %i, $2;\n"
           "@%p bra rshmem_wait_done_${:uid};\n"
           "mul.wide.s32 %a, %i, " + str(bits // 8) + ";\n"
           "add.u64 %a, %a, $1;\n"
           "rshmem_wait_spin_${:uid}:\n"
           "ld." + sem + "." + scope + ".global.b" + str(bits) + " %v, [%a];\n"
           "setp.ne.b" + str(bits) + " %p, %v, $3;\n"
           "@%p bra rshmem_wait_spin_${:uid};\n"
           "add.s32 %i, %i, 32;\n"
           "bra rshmem_wait_lane_${:uid};\n"
           "rshmem_wait_done_${:uid}:\n"
           "bar.warp.sync -1;\n"
           "mov.u32 $0, 0; }")
    return _predicable(lambda: tl.inline_asm_elementwise(asm, f"=r,l,r,{c},~{{memory}}", [ptrs, n, value],
                                                         dtype=tl.int32, is_pure=False, pack=1, _semantic=_semantic),
                       tl.int32, _semantic)


@core.extern
def wait_value(ptr, value, scope="gpu", _semantic=None):
    """Spins until ``*ptr == value`` (acquire at ``scope``); returns the value seen, usable as a
    token for ``consume_token``. Thread scope: every calling thread spins. (rshmem's form; in
    releases before the Triton-distributed names it was called ``wait``.)"""
    ptr = _scalar_pointer(ptr, "wait_value", "ptr")
    bits, c = _flag_width(ptr, "wait_value")
    scope = _choice(scope, "wait_value", "scope", _SCOPES)
    t = ptr.dtype.element_ty
    value = tl.cast(_int_scalar(value, "wait_value", "value", _semantic), t, _semantic=_semantic)
    asm = ("{ .reg .pred %p; rshmem_wait_${:uid}: ld.acquire." + scope + ".global.b" + str(bits) + " $0, [$1]; "
           "setp.ne.b" + str(bits) + " %p, $0, $2; @%p bra rshmem_wait_${:uid}; }")
    return _predicable(lambda: tl.inline_asm_elementwise(asm, f"={c},l,{c},~{{memory}}", [ptr, value], dtype=t,
                                                         is_pure=False, pack=1, _semantic=_semantic), t, _semantic)


def _signal_ptr(ptr, fn: str):
    ptr = _scalar_pointer(ptr, fn, "ptr")
    if ptr.dtype.element_ty not in (tl.int64, tl.uint64):
        raise DeviceApiTypeError(f"rshmem.triton.language.{fn}: signal words are 64-bit; `ptr` must point to "
                                 f"int64 or uint64, got a pointer to {ptr.dtype.element_ty}")
    return ptr


def _emit_signal(ptr, pe, signal, op: str, comm_scope: str, _semantic) -> None:
    """One signal update by the calling thread: at GPU scope on the local word for
    ``comm_scope="gpu"``, else ``libshmem_device.signal_op`` on ``pe`` (release, system scope)."""
    if comm_scope == "gpu":
        value = tl.cast(signal, tl.uint64, _semantic=_semantic)
        ins = "st.release.gpu.global.b64 [$1], $2;" if op == "set" else "red.release.gpu.global.add.u64 [$1], $2;"
        tl.inline_asm_elementwise(ins + " mov.u32 $0, 0;", "=r,l,l,~{memory}", [ptr, value], dtype=tl.int32,
                                  is_pure=False, pack=1, _semantic=_semantic)
    else:
        libshmem_device.signal_op(ptr, signal, _SIG_OPS[op], pe, _semantic=_semantic)


@core.extern
def notify(ptr, rank, signal=1, sig_op="set", comm_scope="inter_node", _semantic=None):
    """Triton-distributed's ``dl.notify``: thread 0 of the program sets (``"set"``) or adds to
    (``"add"``) the 64-bit signal word ``ptr`` on PE ``rank``, with release at system scope;
    the other threads do nothing. ``comm_scope``: ``"inter_node"`` / ``"intra_node"`` (any PE,
    through ``libshmem_device.signal_op``) or ``"gpu"`` (this PE's own word at GPU scope;
    ``rank`` is ignored). Returns nothing."""
    ptr = _signal_ptr(ptr, "notify")
    op = _choice(sig_op, "notify", "sig_op", tuple(_SIG_OPS))
    comm_scope = _choice(comm_scope, "notify", "comm_scope", _COMM_SCOPES)
    pe = tl.cast(_int_scalar(rank, "notify", "rank", _semantic), tl.int32, _semantic=_semantic)
    signal = tl.cast(_int_scalar(signal, "notify", "signal", _semantic), tl.uint64, _semantic=_semantic)
    b = _semantic.builder
    first = _semantic.equal(tid(0, _semantic=_semantic), _semantic.to_tensor(0))
    if_op = b.create_if_op([], first.handle, False)
    after = b.get_insertion_point()
    b.set_insertion_point_to_start(if_op.get_then_block())
    _emit_signal(ptr, pe, signal, op, comm_scope, _semantic)
    b.restore_insertion_point(after)


@core.extern
def notify_thread(ptr, pe, value=1, sig_op="set", _semantic=None):
    """Sets (``"set"``) or adds to (``"add"``) the 64-bit signal ``ptr`` on ``pe`` with release
    at system scope (``libshmem_device.signal_op``). Thread scope: every calling thread acts, so
    guard it with ``if tid(0) == 0:``. (rshmem's form; before the Triton-distributed names it was
    called ``notify``.)"""
    ptr = _signal_ptr(ptr, "notify_thread")
    op = _choice(sig_op, "notify_thread", "sig_op", tuple(_SIG_OPS))
    return libshmem_device.signal_op(ptr, value, _SIG_OPS[op], pe, _semantic=_semantic)


def _descriptor_after(desc, token, _semantic):
    """``desc`` as a new SSA value that depends on ``token``.

    Stock Triton has no identity operation on descriptors, and MLIR folds the trivial ones (a
    select or an ``scf.if`` with equal arms, a poison arm). What stays is a loop that runs from 0
    to an opaque zero computed from the token, carrying ``desc`` and yielding
    ``select(zero != 0, carried, desc)``: it runs zero times, so its result is ``desc``, but the
    canonicalizer cannot prove that, so TMA operations through the result depend on the token
    and the pipeliner keeps them after the wait. LLVM folds the loop away later.

    The zero comes from ``fence.proxy.async.global``: TMA reads through the async proxy, and the
    fence orders them after the generic-proxy acquire that produced the token. The fence has
    side effects, so it and the loop sit in an ``scf.if`` on an opaque true (``_predicable``'s
    reason); that also keeps the loop out of the body of the loop Triton pipelines, which it
    would otherwise leave unpipelined.
    """
    b = _semantic.builder
    tc = "l" if token.dtype.primitive_bitwidth == 64 else "r"
    ty = desc.handle.get_type()
    branch = b.create_if_op([ty], _opaque_true(_semantic), True)
    after = b.get_insertion_point()
    b.set_insertion_point_to_end(branch.get_then_block())
    zero = tl.inline_asm_elementwise("fence.proxy.async.global; mov.u32 $0, 0; // after $1", f"=r,{tc},~{{memory}}",
                                     [token], dtype=tl.int32, is_pure=False, pack=1, _semantic=_semantic).handle
    loop = b.create_for_op(b.get_int32(0), zero, b.get_int32(1), [desc.handle])
    body = loop.get_body(0)
    b.set_insertion_point_to_start(body)
    never = b.create_icmpNE(zero, b.get_int32(0))
    b.create_yield_op([b.create_select(never, body.arg(1), desc.handle)])
    b.set_insertion_point_to_end(branch.get_then_block())
    b.create_yield_op([loop.get_result(0)])
    b.set_insertion_point_to_end(branch.get_else_block())
    b.create_yield_op([desc.handle])
    b.restore_insertion_point(after)
    handle = branch.get_result(0)
    if isinstance(desc, core.tensor_descriptor):
        return core.tensor_descriptor(handle, list(desc.shape), list(desc.strides), desc.block_type)
    return core.tensor_descriptor_base(handle, desc.block_type)


_MOV = {16: ("h", "b16"), 32: ("r", "b32"), 64: ("l", "b64")}


@core.extern
def consume_token(value, token, _semantic=None):
    """Triton-distributed's ``dl.consume_token``: ``value`` with a data dependence on ``token``
    (an integer, e.g. the result of ``wait``), so loads through it (``tl.load`` of a pointer,
    ``desc.load`` of a tensor descriptor) happen after the wait, also when Triton pipelines them.
    ``value`` is a pointer or a 16/32/64-bit value (scalar or block), or a tensor descriptor."""
    value = core._unwrap_if_constexpr(value)
    token = _int_scalar(token, "consume_token", "token", _semantic)
    if isinstance(value, core.tensor_descriptor_base):
        return _descriptor_after(value, token, _semantic)
    if not isinstance(value, core.tensor):
        raise DeviceApiTypeError("rshmem.triton.language.consume_token: `value` must be a tensor, a pointer or a "
                                 f"tensor descriptor, got {value!r}")
    bits = 64 if value.dtype.is_ptr() else value.dtype.primitive_bitwidth
    if bits not in _MOV:
        raise DeviceApiTypeError("rshmem.triton.language.consume_token: `value` must be a pointer or a 16-, 32- "
                                 f"or 64-bit value, got {value.dtype}")
    c, ty = _MOV[bits]
    tc = "l" if token.dtype.primitive_bitwidth == 64 else "r"
    return tl.inline_asm_elementwise(f"mov.{ty} $0, $1; // after $2", f"={c},{c},{tc}", [value, token],
                                     dtype=value.dtype, is_pure=True, pack=1, _semantic=_semantic)


@core.extern
def symm_at(ptr, rank, _semantic=None):
    """The address of symmetric ``ptr`` on PE ``rank`` (``libshmem_device.remote_ptr``), same
    type; null when ``rank`` is not reachable by load/store."""
    return libshmem_device.remote_ptr(ptr, rank, _semantic=_semantic)


def _world_axis(axis, fn: str) -> None:
    if core._unwrap_if_constexpr(axis) != -1:
        raise NotImplementedError(f"rshmem.triton.language.{fn}: only axis=-1 (all PEs) is supported, got "
                                  f"axis={core._unwrap_if_constexpr(axis)!r}; use team_my_pe / team_n_pes of "
                                  "libshmem_device for a team")


@core.extern
def rank(axis=-1, _semantic=None):
    """This PE (``libshmem_device.my_pe``). ``axis`` must be -1 (the world), as in
    Triton-distributed's default."""
    _world_axis(axis, "rank")
    return libshmem_device.my_pe(_semantic=_semantic)


@core.extern
def num_ranks(axis=-1, _semantic=None):
    """Number of PEs (``libshmem_device.n_pes``). ``axis`` must be -1 (the world)."""
    _world_axis(axis, "num_ranks")
    return libshmem_device.n_pes(_semantic=_semantic)
