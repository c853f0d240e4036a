"""Symmetric torch tensors and the on-stream API.

`create_symmetric_tensor(shape, dtype)` allocates on every PE's symmetric heap (a collective:
every PE calls it with the same shape and dtype) and returns a tensor that *is* that memory, so
a peer's `put` into it shows up in the tensor. `peer_tensor(t, pe)` views the same allocation on a
node-local peer: writing into it writes the peer's memory.

Tensors live on `device()`: the CPU on the host backend, this PE's GPU on the cuda backend. Both
are built the same way, without linking libtorch: the runtime hands torch a DLPack capsule of the
heap bytes (`torch.from_dlpack`), viewed as `dtype` and `shape`, so every torch dtype works, fp8
included. The capsule pins the heap, so a tensor's memory stays mapped while the tensor lives.

The allocation records are the runtime's (`rshmem._native.allocation_of`); a tensor made here
carries the id of its allocation, so using it after `free_tensor(t)` or `rshmem.finalize()`
raises `NotSymmetricError` even where a later allocation took over its memory. `free_tensor` also
releases the storage that the tensor and its views share, so torch itself raises on any later
access to them instead of reaching the next allocation. After `finalize` its memory stays mapped until the
tensor dies, so using it is safe but no longer shared with the peers.

The `*_on_stream` calls are queued on a torch CUDA stream on the cuda backend (`stream=None`: the
current one; a `torch.cuda.Stream`, or a raw `CUstream` int); on the host backend there is no
stream (`stream` must be None) and each call completes before it returns, which is the order a
stream would give. An on-stream call returns once its work is queued, so a local CUDA tensor it
reads or writes is marked used by that stream (`Tensor.record_stream`): torch's caching allocator
keeps its memory from any new tensor until the stream has run the copy.
"""

from __future__ import annotations

import math

import torch

from . import _core, _cuda, _native, _on_stream, _teams
from ._dtype_names import check_torch_dtype
from ._errors import api
from ._native import InvalidArgumentError, NotSymmetricError
from ._on_stream import *  # noqa: F401,F403 - the on-stream forms, part of rshmem.torch
from ._tensor_args import _addr, _check_live, _span

SIGNAL_DTYPE = torch.int64
"""dtype of signal words (64-bit)."""

if _native.is_initialized() and _native.device_ordinal() is not None:
    _cuda.use_device()  # rshmem.init ran before torch was imported: make this PE's GPU current now


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
        index = _native.device_ordinal()
        return torch.device("cpu") if index is None else torch.device("cuda", index)
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


# --------------------------------------------------------------------- tensors over the heap


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


def _wrap(addr: int, nbytes: int, dtype, shape, stride=None, primary: bool = False) -> torch.Tensor:
    """A tensor of `shape` and `dtype` over `nbytes` of heap memory at `addr`, on the memory's
    device, stamped with its allocation's id. An empty tensor still starts at `addr` (a zero-length
    slice of a one-byte view), so `data_ptr()` finds its allocation."""
    capsule, alloc_id = _native.heap_view(addr, nbytes, primary)
    flat = torch.from_dlpack(capsule)
    if nbytes == 0:
        flat = flat[:0]
    typed = flat.view(dtype)
    t = typed.view(shape) if stride is None else typed.as_strided(shape, stride)
    t._rshmem_id = alloc_id
    return t


@api
def create_symmetric_tensor(shape, dtype) -> torch.Tensor:
    """Collective: a symmetric tensor of `shape` and `dtype` (any torch dtype), zero-filled;
    every PE must pass the same shape and dtype."""
    check_torch_dtype(dtype)
    dims = _shape(shape)
    nbytes = math.prod(dims) * dtype.itemsize
    _core._require_init("rshmem.torch.create_symmetric_tensor()")
    # calloc zeroes inside the collective, before any peer can write into this PE's copy; zeroing
    # here afterwards could erase a fast peer's first put.
    what = f"a tensor of shape {dims} and dtype {dtype}"  # PEs must agree on it, not only on bytes
    addr = _native.calloc(1, _core._size_arg(max(nbytes, 1), f"{what} in bytes"), what, "create_symmetric_tensor")
    return _wrap(addr, nbytes, dtype, dims, primary=True)


def _own_allocation(t: torch.Tensor, what: str):
    """The runtime's record of the allocation on this PE that holds all of tensor `t`."""
    _check_live(t, what)
    addr, span = _addr(t), _span(t)
    info = _native.allocation_of(addr)
    if info is None or info["pe"] != _native.my_pe() or info["owner"] != "user" or \
            addr + span > info["base"] + max(info["nbytes"], 1):
        raise NotSymmetricError(
            f"the tensor at {addr:#x} (+{span} bytes) is not inside a live tensor of create_symmetric_tensor on "
            "this PE (ordinary memory, or freed already): take symmetric tensors and views of them"
        )
    return info


@api
def peer_tensor(t: torch.Tensor, pe: int) -> torch.Tensor:
    """The view of symmetric tensor `t` on PE `pe` (node-local): same shape, strides and dtype,
    over `pe`'s memory (`nvshmem_ptr`)."""
    if not isinstance(t, torch.Tensor):
        raise InvalidArgumentError(f"peer_tensor takes a tensor, not {type(t).__name__}")
    _own_allocation(t, "the tensor")
    span = _span(t)
    # The whole span must lie in the heap (NotSymmetricError) and `pe` must be reachable by
    # load/store (UnsupportedError otherwise); `ptr` would answer None for both.
    remote = _native.translate(_addr(t), span, pe)
    return _wrap(remote, span, t.dtype, tuple(t.shape), tuple(t.stride()))


@api
def create_symmetric_tensors(shape, dtype, rank: int, local_world_size: int) -> list:
    """Collective: one symmetric allocation, returned as `local_world_size` tensors; entry `i`
    is the view of node-local PE `i`'s copy (entry `rank % local_world_size` is this PE's)."""
    node = _teams.team_n_pes(_teams.Team.NODE)
    if local_world_size != node:
        raise InvalidArgumentError(f"local_world_size is {local_world_size}, but this node has {node} PEs")
    me = _teams.team_my_pe(_teams.Team.NODE)
    if rank % local_world_size != me:
        raise InvalidArgumentError(f"rank {rank} is not this PE (PE {_native.my_pe()}, node-local PE {me})")
    local = create_symmetric_tensor(shape, dtype)
    return [
        local if i == me else peer_tensor(local, _teams.team_translate_pe(_teams.Team.NODE, i, _teams.Team.WORLD))
        for i in range(local_world_size)
    ]


@api
def free_tensor(t: torch.Tensor) -> None:
    """Collective: frees a tensor made by `create_symmetric_tensor` (`nvshmem_free`). Every PE
    frees its own tensor of that allocation; the tensor must not be used afterwards. Work queued
    on this PE's device completes first (the runtime's `free` synchronizes it).

    No tensor keeps aliasing the freed memory, which the next allocation reuses: the storage
    that `t` and every view of it share is released, so reading or writing any of them with torch
    raises `RuntimeError` ("... was freed already by rshmem.torch.free_tensor() ..."), and rshmem calls on
    them raise `NotSymmetricError`. (Peer views made by `peer_tensor` have storages of their own
    and are not reached.)"""
    if not isinstance(t, torch.Tensor):
        raise InvalidArgumentError(f"free_tensor takes a tensor, not {type(t).__name__}")
    stamped = getattr(t, "_rshmem_id", None)
    if stamped is not None and _native.view_state(_addr(t), stamped) == "finalized":
        raise NotSymmetricError(
            "free_tensor takes a live tensor of create_symmetric_tensor, not an already freed one: this one was "
            "freed by rshmem.finalize() (its heap is gone)"
        )
    info = None if stamped is None or not _native.is_initialized() else _native.allocation_of(_addr(t))
    if info is None or info["id"] != t._rshmem_id or info["base"] != _addr(t) or info["pe"] != _native.my_pe():
        raise NotSymmetricError(
            "free_tensor takes the tensor returned by create_symmetric_tensor on this PE "
            "(not a view, a peer tensor, or an already freed tensor)"
        )
    _native.free(info["base"], "free_tensor")
    _detach_storage(t)


FREED = (
    "this symmetric tensor was freed already by rshmem.torch.free_tensor() (an already freed tensor, or a view "
    "of one): its memory belongs to the heap's next allocations, so it may not be read or written (allocate a "
    "new tensor)"
)


def _detach_storage(t: torch.Tensor) -> None:
    """Releases the storage of `t`, which its views share: torch then raises `FREED` on every
    access to its memory through any of them (the mechanism torch uses for storages it releases
    itself). A torch without it moves a CPU storage onto a private copy of its bytes instead (its
    move into shared memory swaps the memory under every tensor over the storage)."""
    storage = t.untyped_storage()
    release = getattr(torch._C, "_set_storage_data_ptr_access_error_msg", None)
    if release is not None:
        release(storage._cdata, FREED)
    elif t.device.type == "cpu" and storage.nbytes():
        storage._share_fd_cpu_()


__all__ = [
    "SIGNAL_DTYPE",
    "device",
    "gpu_shared",
    "dist_backend",
    "create_symmetric_tensor",
    "create_symmetric_tensors",
    "peer_tensor",
    "free_tensor",
]


__all__ += _on_stream.__all__
