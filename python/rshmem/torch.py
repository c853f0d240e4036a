"""Symmetric torch tensors and the on-stream API.

`create_symmetric_tensor(shape, dtype)` allocates on every PE's symmetric heap (a collective:
every PE calls it with the same shape and dtype) and returns a tensor that *is* that memory, so
a peer's `put` into it shows up in the tensor. `peer_tensor(t, pe)` views the same allocation on a
node-local peer: writing into it writes the peer's memory.

On the host backend these are CPU tensors over shared memory, built from the address without
linking libtorch (ctypes buffer -> `torch.frombuffer` as bytes -> `.view(dtype)`), so any torch
dtype works, fp8 included. On the cuda backend they are CUDA tensors of this PE's GPU, built the
same way through `__cuda_array_interface__` (`rshmem._cuda`), and the `*_on_stream` calls are
ordered on a torch CUDA stream (default: the current one).

A tensor from here must not be used after `free_tensor(t)`: its memory may hold another
allocation (torch cannot know). After `rshmem.finalize()` its memory stays mapped until the tensor
dies, so using it is safe but no longer shared with the peers.
"""

from __future__ import annotations

import bisect
import ctypes
import math
import weakref

import torch

from . import _core, _cuda, _native
from ._dtypes import check_torch_dtype
from ._native import InvalidArgumentError, NotInitializedError, NotSymmetricError, UnsupportedError
from ._errors import api

SIGNAL_DTYPE = torch.int64
"""dtype of signal words (64-bit)."""

_CUDA_LATER = "the cuda backend arrives with issue 3"

# Live allocations made here: sorted base addresses, base -> size in bytes, and base -> a weak
# reference to the tensor create_symmetric_tensor returned (finalize counts those still alive).
_bases: list = []
_sizes: dict = {}
_tensors: dict = {}
# Which init the allocations belong to: a tensor kept across finalize + init may have the base
# address of a new allocation (the new heap can land at the same addresses), and must not free it.
_run = [0]


def _forget_all() -> tuple:
    """Forgets every allocation (finalize frees the heap); returns (count, bytes) of the tensors
    still referenced. The new run number makes free_tensor / peer_tensor refuse them."""
    alive = [base for base, ref in _tensors.items() if ref() is not None]
    found = (len(alive), sum(_sizes[base] for base in alive))
    _bases.clear()
    _sizes.clear()
    _tensors.clear()
    _run[0] += 1
    return found


_core._finalize_hooks.append(_forget_all)


def _on_cuda() -> bool:
    return _native.is_initialized() and _native.backend() == "cuda"


if _on_cuda():  # rshmem.init ran before torch was imported: make this PE's GPU current now
    _cuda.use_device()


def device() -> torch.device:
    """This PE's torch device, before or after `rshmem.init`: its GPU on the cuda backend (one
    GPU per PE by local rank; round-robin when `RSHMEM_ALLOW_SHARED_GPU=1` lets fewer GPUs serve
    more PEs), `cpu` on the host backend. Scripts use it instead of computing the device from
    `LOCAL_RANK`::

        torch.cuda.set_device(rshmem.torch.device())   # before init, where CUDA is used

    Before init it applies the same rule as `init` to the launcher's variables (`LOCAL_RANK`,
    `LOCAL_WORLD_SIZE`, or Open MPI's / MPICH's / Slurm's) and raises `InvalidArgumentError`
    where `init` would (more PEs than GPUs on the host without the opt-in, naming both counts).
    """
    if _native.is_initialized():
        return _cuda.device() if _native.backend() == "cuda" else torch.device("cpu")
    if not _cuda.cuda_wanted():
        return torch.device("cpu")
    return torch.device("cuda", _cuda.planned()[0])


def gpu_shared() -> bool:
    """Whether other PEs of this host use this PE's GPU (only with `RSHMEM_ALLOW_SHARED_GPU=1`).
    Results stay correct on a shared GPU, but its timings mean nothing for speed, and
    torch.distributed must use gloo there (`dist_backend()`). Before init: by the rule."""
    if _native.is_initialized():
        return _native.gpu_sharers() > 1
    return _cuda.cuda_wanted() and _cuda.planned()[1] > 1


def dist_backend() -> str:
    """The torch.distributed backend that works beside rshmem on this PE: `"nccl"` with a GPU of
    its own, `"gloo"` on a shared GPU (NCCL refuses two ranks on one GPU) or without a GPU."""
    if device().type != "cuda" or gpu_shared():
        return "gloo"
    return "nccl"


def _host_only(what: str) -> None:
    if not _native.is_initialized():
        raise NotInitializedError(f"rshmem is not initialized: call rshmem.init() before rshmem.torch.{what}()")
    kind = _native.backend()
    if kind != "host":
        raise UnsupportedError(f"{what} on the {kind} backend: {_CUDA_LATER}")


def _shape(shape) -> tuple:
    if isinstance(shape, int):
        shape = (shape,)
    try:
        dims = tuple(int(d) for d in shape)
        if any(isinstance(d, bool) or int(d) != d for d in shape):
            raise TypeError
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"shape must be an int or a sequence of ints, not {shape!r}") from None
    if any(d < 0 for d in dims):
        raise InvalidArgumentError(f"shape {dims} has a negative dimension")
    return dims


def _wrap(addr: int, nbytes: int, dtype, shape, stride=None):
    """A CPU tensor over `nbytes` at `addr`. The ctypes buffer it is built on stays referenced by
    the tensor's storage, so nothing here frees or copies the memory; the buffer holds a pin of
    the heap, so the memory stays mapped while the tensor lives, past `finalize` too (it is then
    this process's alone: writes no longer reach the peers)."""
    if nbytes == 0:
        return torch.empty(shape, dtype=dtype)
    buf = (ctypes.c_uint8 * nbytes).from_address(addr)
    buf.rshmem_pin = _native.heap_pin()
    flat = torch.frombuffer(buf, dtype=torch.uint8)
    typed = flat.view(dtype)
    if stride is None:
        return typed.view(shape)
    return typed.as_strided(shape, stride)


@api
def create_symmetric_tensor(shape, dtype) -> torch.Tensor:
    """Collective: a symmetric tensor of `shape` and `dtype` (any torch dtype), zero-filled;
    every PE must pass the same shape and dtype."""
    check_torch_dtype(dtype)
    dims = _shape(shape)
    if _on_cuda():
        return _cuda.create_symmetric_tensor(dims, dtype)
    _host_only("create_symmetric_tensor")
    nbytes = math.prod(dims) * dtype.itemsize
    # calloc zeroes inside the collective, before any peer can write into this PE's copy; zeroing
    # here afterwards could erase a fast peer's first put.
    addr = _core.calloc(1, max(nbytes, 1))
    t = _wrap(addr, nbytes, dtype, dims)
    bisect.insort(_bases, addr)
    _sizes[addr] = max(nbytes, 1)
    _tensors[addr] = weakref.ref(t)
    t._rshmem_base = addr  # free_tensor finds zero-size tensors by this
    t._rshmem_run = _run[0]
    return t


def _allocation_of(addr: int):
    i = bisect.bisect_right(_bases, addr) - 1
    if i >= 0:
        base = _bases[i]
        if addr < base + _sizes[base]:
            return base
    return None


def _span(t: torch.Tensor) -> int:
    """Bytes from `t.data_ptr()` to the end of its last element."""
    if t.numel() == 0:
        return 0
    last = sum((n - 1) * s for n, s in zip(t.shape, t.stride()))
    return (last + 1) * t.element_size()


@api
def peer_tensor(t: torch.Tensor, pe: int) -> torch.Tensor:
    """The view of symmetric tensor `t` on PE `pe` (node-local): same shape, strides and dtype,
    over `pe`'s memory (`nvshmem_ptr`)."""
    if not isinstance(t, torch.Tensor):
        raise InvalidArgumentError(f"peer_tensor takes a tensor, not {type(t).__name__}")
    if _on_cuda():
        return _cuda.peer_tensor(t, pe)
    _host_only("peer_tensor")
    if t.device.type != "cpu":
        raise NotSymmetricError(f"tensor on {t.device} is not a symmetric tensor of the host backend")
    if getattr(t, "_rshmem_run", _run[0]) != _run[0]:  # its heap may be a new one at the same address
        raise NotSymmetricError("this tensor was freed by rshmem.finalize(); allocate a new tensor")
    addr = getattr(t, "_rshmem_base", None) if t.numel() == 0 else t.data_ptr()
    if addr is None:
        raise NotSymmetricError("this empty tensor was not made by create_symmetric_tensor")
    span = _span(t)
    base = _allocation_of(addr)
    if base is None or addr + span > base + _sizes[base]:
        raise NotSymmetricError(
            f"the tensor at {addr:#x} (+{span} bytes) is not inside a live tensor of create_symmetric_tensor "
            "(ordinary memory, or freed already): peer_tensor takes symmetric tensors and views of them"
        )
    # The whole span must lie in the heap (NotSymmetricError) and `pe` must be reachable by
    # load/store (UnsupportedError otherwise); `ptr` would answer None for both.
    remote = _native.translate(addr, span, pe)
    return _wrap(remote, span, t.dtype, tuple(t.shape), tuple(t.stride()))


@api
def create_symmetric_tensors(shape, dtype, rank: int, local_world_size: int) -> list:
    """Collective: one symmetric allocation, returned as `local_world_size` tensors; entry `i`
    is the view of node-local PE `i`'s copy (entry `rank % local_world_size` is this PE's)."""
    node = _core.team_n_pes(_core.Team.NODE)
    if local_world_size != node:
        raise InvalidArgumentError(f"local_world_size is {local_world_size}, but this node has {node} PEs")
    if rank % local_world_size != _core.team_my_pe(_core.Team.NODE):
        raise InvalidArgumentError(
            f"rank {rank} is not this PE (PE {_native.my_pe()}, node-local PE {_core.team_my_pe(_core.Team.NODE)})"
        )
    local = create_symmetric_tensor(shape, dtype)
    me = _core.team_my_pe(_core.Team.NODE)
    out = []
    for i in range(local_world_size):
        if i == me:
            out.append(local)
        else:
            peer = peer_tensor(local, _core.team_translate_pe(_core.Team.NODE, i, _core.Team.WORLD))
            peer._rshmem_base = None
            out.append(peer)
    return out


@api
def free_tensor(t: torch.Tensor) -> None:
    """Collective: frees a tensor made by `create_symmetric_tensor` (`nvshmem_free`). Every PE
    frees its own tensor of that allocation; the tensor must not be used afterwards."""
    if not isinstance(t, torch.Tensor):
        raise InvalidArgumentError(f"free_tensor takes a tensor, not {type(t).__name__}")
    if _on_cuda():
        return _cuda.free_tensor(t)
    base = getattr(t, "_rshmem_base", None)
    stale = getattr(t, "_rshmem_run", None) != _run[0]  # made before the last finalize
    if base is None or stale or base not in _sizes or (t.numel() and t.data_ptr() != base):
        raise NotSymmetricError(
            "free_tensor takes the tensor returned by create_symmetric_tensor on this PE "
            "(not a view, a peer tensor, or an already freed tensor)"
        )
    _native.free(base)
    del _sizes[base]
    del _tensors[base]
    _bases.remove(base)
    t._rshmem_base = None


# ------------------------------------------------------------------------- on-stream forms
# On the host backend there is no stream: each call runs to completion before it returns, which
# is the order a stream would give. On the cuda backend each call is enqueued on `stream`
# (`rshmem._cuda`): `None` is the current stream, a `torch.cuda.Stream` or a raw CUstream (int).


def _no_stream(stream, what: str) -> None:
    _host_only(what)
    if stream is not None and getattr(stream, "device", None) is not None and stream.device.type == "cuda":
        raise UnsupportedError(f"{what}: a CUDA stream needs the cuda backend; {_CUDA_LATER}")


@api
def barrier_all_on_stream(stream=None) -> None:
    """Collective barrier ordered on `stream` (host backend: a host barrier)."""
    if _on_cuda():
        return _cuda.barrier_all_on_stream(stream)
    _no_stream(stream, "barrier_all_on_stream")
    _core.barrier_all()


@api
def quiet_on_stream(stream=None) -> None:
    """`quiet` ordered on `stream` (host backend: a host quiet)."""
    if _on_cuda():
        return _cuda.quiet_on_stream(stream)
    _no_stream(stream, "quiet_on_stream")
    _core.quiet()


@api
def putmem_on_stream(dst, src, pe: int, stream=None) -> None:
    """Copies tensor `src` into symmetric tensor `dst` on `pe`, ordered on `stream`."""
    if _on_cuda():
        return _cuda.putmem_on_stream(dst, src, pe, stream)
    from . import host

    _no_stream(stream, "putmem_on_stream")
    host.put(dst, src, pe)


@api
def getmem_on_stream(dst, src, pe: int, stream=None) -> None:
    """Copies symmetric tensor `src` on `pe` into tensor `dst`, ordered on `stream`."""
    if _on_cuda():
        return _cuda.getmem_on_stream(dst, src, pe, stream)
    from . import host

    _no_stream(stream, "getmem_on_stream")
    host.get(dst, src, pe)


@api
def putmem_signal_on_stream(dst, src, sig, value: int, op: int, pe: int, stream=None) -> None:
    """`putmem_signal` of tensor `src` into `dst` on `pe`, ordered on `stream`."""
    if _on_cuda():
        return _cuda.putmem_signal_on_stream(dst, src, sig, value, op, pe, stream)
    from . import host

    _no_stream(stream, "putmem_signal_on_stream")
    host.putmem_signal(dst, src, None, sig, value, op, pe)


@api
def signal_op_on_stream(sig, value: int, op: int, pe: int, stream=None) -> None:
    """`signal_op` ordered on `stream`."""
    if _on_cuda():
        return _cuda.signal_op_on_stream(sig, value, op, pe, stream)
    from . import host

    _no_stream(stream, "signal_op_on_stream")
    host.signal_op(sig, value, op, pe)


@api
def signal_wait_until_on_stream(sig, cmp: int, value: int, stream=None) -> None:
    """Makes `stream` wait until the local signal compares true (host backend: waits here)."""
    if _on_cuda():
        return _cuda.signal_wait_until_on_stream(sig, cmp, value, stream)
    from . import host

    _no_stream(stream, "signal_wait_until_on_stream")
    host.signal_wait_until(sig, cmp, value)


@api
def broadcast_on_stream(dst, src, root: int, team=_core.Team.WORLD, stream=None) -> None:
    """`broadcast` of symmetric tensors, ordered on `stream`."""
    if _on_cuda():
        return _cuda.broadcast_on_stream(dst, src, root, team, stream)
    from . import host

    _no_stream(stream, "broadcast_on_stream")
    host.broadcast(dst, src, root, team)


@api
def fcollect_on_stream(dst, src, team=_core.Team.WORLD, stream=None) -> None:
    """`fcollect` of symmetric tensors, ordered on `stream`."""
    if _on_cuda():
        return _cuda.fcollect_on_stream(dst, src, team, stream)
    from . import host

    _no_stream(stream, "fcollect_on_stream")
    host.fcollect(dst, src, team)


@api
def alltoall_on_stream(dst, src, team=_core.Team.WORLD, stream=None) -> None:
    """`alltoall` of symmetric tensors, ordered on `stream`."""
    if _on_cuda():
        return _cuda.alltoall_on_stream(dst, src, team, stream)
    from . import host

    _no_stream(stream, "alltoall_on_stream")
    host.alltoall(dst, src, team)


@api
def reduce_on_stream(op: str, dst, src, team=_core.Team.WORLD, stream=None) -> None:
    """Reduction `op` of symmetric tensors, ordered on `stream`."""
    if _on_cuda():
        return _cuda.reduce_on_stream(op, dst, src, team, stream)
    from . import host

    _no_stream(stream, "reduce_on_stream")
    host.reduce(dst, src, op, team)


@api
def barrier_on_stream(team=_core.Team.WORLD, stream=None) -> None:
    """Collective barrier of `team` ordered on `stream` (host backend: a host barrier)."""
    if _on_cuda():
        return _cuda.barrier_on_stream(team, stream)
    _no_stream(stream, "barrier_on_stream")
    _core.barrier(team)


__all__ = [
    "SIGNAL_DTYPE",
    "device",
    "gpu_shared",
    "dist_backend",
    "create_symmetric_tensor",
    "create_symmetric_tensors",
    "peer_tensor",
    "free_tensor",
    "barrier_all_on_stream",
    "barrier_on_stream",
    "quiet_on_stream",
    "putmem_on_stream",
    "getmem_on_stream",
    "putmem_signal_on_stream",
    "signal_op_on_stream",
    "signal_wait_until_on_stream",
    "broadcast_on_stream",
    "fcollect_on_stream",
    "alltoall_on_stream",
    "reduce_on_stream",
]
