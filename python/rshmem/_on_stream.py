"""The on-stream forms of `rshmem.torch` (`*_on_stream`): queued on a torch CUDA stream on the
cuda backend, run at once on the host backend (see `rshmem.torch`). Their argument checks are in
`_tensor_args.py`."""

from __future__ import annotations

from . import _native
from ._calling import as_cmp, as_reduce_op, as_sig_op, on_stream
from ._native import InvalidArgumentError
from ._teams import Team, team_n_pes
from ._tensor_args import _bytes_of, _fits, _local, _pe, _same_dtype, _sig, _stream, _typed, _u64, _used_by_stream

__all__ = [
    "putmem_on_stream",
    "getmem_on_stream",
    "putmem_signal_on_stream",
    "signal_op_on_stream",
    "signal_wait_until_on_stream",
    "quiet_on_stream",
    "barrier_all_on_stream",
    "barrier_on_stream",
    "broadcast_on_stream",
    "fcollect_on_stream",
    "alltoall_on_stream",
    "reduce_on_stream",
    "reducescatter_on_stream",
]


@on_stream
def putmem_on_stream(dst, src, pe: int, stream=None, *, nbytes: int | None = None) -> None:
    """Copies local tensor `src` (all of it, or its first `nbytes`) into symmetric tensor `dst`
    on `pe`, ordered on `stream` (`nvshmemx_putmem_on_stream`)."""
    _copy_on_stream(_native.putmem_on_stream, "putmem_on_stream", dst, src, pe, stream, nbytes, mine="src")


@on_stream
def getmem_on_stream(dst, src, pe: int, stream=None, *, nbytes: int | None = None) -> None:
    """Fills local tensor `dst` (all of it, or its first `nbytes`) from symmetric tensor `src` on
    `pe`, ordered on `stream` (`nvshmemx_getmem_on_stream`)."""
    _copy_on_stream(_native.getmem_on_stream, "getmem_on_stream", dst, src, pe, stream, nbytes, mine="dst")


@on_stream
def putmem_signal_on_stream(dst, src, sig, value: int, sig_op, pe: int, stream=None, *, nbytes: int | None = None) -> None:
    """Copies `src` (all of it, or its first `nbytes`) into symmetric `dst` on `pe`, then applies
    `sig_op` (`SIGNAL_SET` / `SIGNAL_ADD`, or `"set"` / `"add"`) with `value` to the signal word
    `sig` on `pe`, ordered on `stream` (`nvshmemx_putmem_signal_on_stream`)."""
    sig_op = as_sig_op(sig_op)
    index = _native.device_ordinal()
    call = "putmem_signal_on_stream"
    d, s, g = _local(dst, "dst", index), _local(src, "src", index), _sig(sig, call, index)
    _same_dtype(dst, src, call)
    n = _bytes_of(nbytes, src, call)
    _fits(n // src.element_size(), dst.numel(), "dst", "elements", call)
    handle = _stream(stream, call, index)
    _native.putmem_signal_on_stream(d, s, n, g, _u64(value, call), sig_op, _pe(pe), handle, False)
    _used_by_stream(src, stream, handle)


@on_stream
def signal_op_on_stream(sig, value: int, sig_op, pe: int, stream=None) -> None:
    """Applies `sig_op` (`SIGNAL_SET` / `SIGNAL_ADD`, or `"set"` / `"add"`) with `value` to the
    signal word `sig` on `pe`, ordered on `stream` (`nvshmemx_signal_op_on_stream`)."""
    sig_op = as_sig_op(sig_op)
    index = _native.device_ordinal()
    call = "signal_op_on_stream"
    _native.signal_op_on_stream(_sig(sig, call, index), _u64(value, call), sig_op, _pe(pe), _stream(stream, call, index))


@on_stream
def signal_wait_until_on_stream(sig, cmp, value: int, stream=None) -> None:
    """Makes `stream` wait until the local signal word compares true against `value` (host
    backend: waits here) (`nvshmemx_signal_wait_until_on_stream`)."""
    cmp = as_cmp(cmp)
    index = _native.device_ordinal()
    call = "signal_wait_until_on_stream"
    _native.signal_wait_until_on_stream(_sig(sig, call, index), cmp, _u64(value, call), _stream(stream, call, index))


@on_stream
def quiet_on_stream(stream=None) -> None:
    """Completes this PE's puts and signals issued on `stream` before later work on it (host
    backend: a host quiet) (`nvshmemx_quiet_on_stream`)."""
    index = _native.device_ordinal()
    _native.quiet_on_stream(_stream(stream, "quiet_on_stream", index))


@on_stream
def barrier_all_on_stream(stream=None) -> None:
    """Collective: a barrier of every PE, ordered on `stream` (host backend: a host barrier)
    (`nvshmemx_barrier_all_on_stream`)."""
    index = _native.device_ordinal()
    _native.barrier_all_on_stream(_stream(stream, "barrier_all_on_stream", index))


@on_stream
def barrier_on_stream(team=Team.WORLD, stream=None) -> None:
    """Collective over `team`: a barrier ordered on `stream` (host backend: a host barrier)
    (`nvshmemx_barrier_on_stream`)."""
    index = _native.device_ordinal()
    _native.barrier_on_stream(int(team), _stream(stream, "barrier_on_stream", index))


@on_stream
def broadcast_on_stream(dst, src, root: int, team=Team.WORLD, stream=None) -> None:
    """Collective over `team`: `src` of PE `root` (team numbering) into `dst` on every PE, ordered
    on `stream` (`nvshmemx_broadcast_on_stream`)."""
    index = _native.device_ordinal()
    call = "broadcast_on_stream"
    d, s = _local(dst, "dst", index), _local(src, "src", index)
    name = _typed(dst, src, call)
    _fits(src.numel(), dst.numel(), "dst", "elements", call)
    _native.broadcast_on_stream(int(team), d, s, src.numel(), int(root), name, _stream(stream, call, index))


@on_stream
def fcollect_on_stream(dst, src, team=Team.WORLD, stream=None) -> None:
    """Collective over `team`: `dst` gets every PE's `src`, in team order, ordered on `stream`
    (`nvshmemx_fcollect_on_stream`)."""
    index = _native.device_ordinal()
    call = "fcollect_on_stream"
    d, s = _local(dst, "dst", index), _local(src, "src", index)
    name = _typed(dst, src, call)
    _fits(src.numel() * team_n_pes(team), dst.numel(), "dst", "elements (team size x src)", call)
    _native.fcollect_on_stream(int(team), d, s, src.numel(), name, _stream(stream, call, index))


@on_stream
def alltoall_on_stream(dst, src, team=Team.WORLD, stream=None) -> None:
    """Collective over `team`: block `j` of `src` (`src.numel() // team size` elements) lands in
    block `me` of `dst` on PE `j`, ordered on `stream` (`nvshmemx_alltoall_on_stream`)."""
    index = _native.device_ordinal()
    call = "alltoall_on_stream"
    d, s = _local(dst, "dst", index), _local(src, "src", index)
    name = _typed(dst, src, call)
    block = _block_of(src, team, call)
    _fits(src.numel(), dst.numel(), "dst", "elements", call)
    _native.alltoall_on_stream(int(team), d, s, block, name, _stream(stream, call, index))


@on_stream
def reduce_on_stream(dst, src, op='sum', team=Team.WORLD, stream=None) -> None:
    """Collective over `team`: `dst` on every PE gets the element-wise `op` of every `src`,
    ordered on `stream` (`nvshmemx_<op>_reduce_on_stream`). `op` is a name of
    `rshmem.REDUCE_OPS`, a `rshmem.ReduceOp` or a `torch.distributed.ReduceOp`."""
    op = as_reduce_op(op)
    index = _native.device_ordinal()
    call = "reduce_on_stream"
    d, s = _local(dst, "dst", index), _local(src, "src", index)
    name = _typed(dst, src, call)
    _fits(src.numel(), dst.numel(), "dst", "elements", call)
    _native.reduce_on_stream(int(team), op, d, s, src.numel(), name, _stream(stream, call, index))


@on_stream
def reducescatter_on_stream(dst, src, op='sum', team=Team.WORLD, stream=None) -> None:
    """Collective over `team`: `dst` on member `me` gets the element-wise `op` of block `me`
    (`src.numel() // team size` elements) of every member's `src`, ordered on `stream`
    (`nvshmemx_<op>_reducescatter_on_stream`). `dst` may be a whole block of `src`. `op` as for
    `reduce_on_stream`."""
    op = as_reduce_op(op)
    index = _native.device_ordinal()
    call = "reducescatter_on_stream"
    d, s = _local(dst, "dst", index), _local(src, "src", index)
    name = _typed(dst, src, call)
    block = _block_of(src, team, call)
    _fits(block, dst.numel(), "dst", "elements", call)
    _native.reducescatter_on_stream(int(team), op, d, s, block, name, _stream(stream, call, index))


def _copy_on_stream(native, call: str, dst, src, pe: int, stream, nbytes, *, mine: str) -> None:
    """A put or get on a stream: `mine` names the local tensor (src of a put, dst of a get), whose
    bytes (or `nbytes`) the symmetric one must hold, and which the stream uses until it has run."""
    index = _native.device_ordinal()
    local, remote, other = (src, dst, "dst") if mine == "src" else (dst, src, "src")
    d, s = _local(dst, "dst", index), _local(src, "src", index)
    _same_dtype(dst, src, call)
    n = _bytes_of(nbytes, local, call)
    _fits(n // local.element_size(), remote.numel(), other, "elements", call)
    handle = _stream(stream, call, index)
    native(d, s, n, _pe(pe), handle, False)  # the local side: a live tensor's address
    _used_by_stream(local, stream, handle)


def _block_of(src, team, call: str) -> int:
    """The elements of one member's block of `src`, which holds one block per member of `team`."""
    size = team_n_pes(team)
    if src.numel() % size:
        raise InvalidArgumentError(f"{call}: src holds {src.numel()} elements, not a multiple of the team size {size}")
    return src.numel() // size
