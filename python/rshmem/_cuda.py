"""Symmetric CUDA tensors and the on-stream API of the cuda backend (used by `rshmem.torch`).

On the cuda backend every heap address the runtime hands out, this PE's copy and the node-local
peers' copies mapped into this process alike, is a device virtual address usable on this PE's
GPU (`_native.device_ordinal()`). A tensor over such an address is built without linking
libtorch: a small object exposing `__cuda_array_interface__` (version 3, raw bytes) goes through
`torch.as_tensor(obj, device="cuda:N")`, then `.view(dtype).view(shape)`, so every torch dtype
works, fp8 included. torch keeps a reference to that object for as long as any tensor shares the
storage, and the object holds the allocation's record, so a tensor stays a valid view while
Python holds it (until `free_tensor` or `rshmem.finalize()`, which torch cannot know about).

torch reads `__cuda_array_interface__` through numpy; where numpy is missing (or a torch older
than 2.6 copies a peer's memory instead of viewing it), the same view is made from a DLPack
capsule built with ctypes instead (`torch.from_dlpack`).

Streams: `None` is the current torch stream of this PE's GPU, a `torch.cuda.Stream` gives its
`cuda_stream`, and an int is taken as a raw `CUstream` handle.

Lifetimes: an on-stream call returns once its work is queued, so a local tensor it reads or
writes (the source of a put, the destination of a get) is marked used by that stream
(`Tensor.record_stream`): if Python drops the tensor before the stream has run the copy, torch's
caching allocator keeps its memory from any new tensor until then. Symmetric tensors need no
mark: their memory is the heap's, freed only by `free_tensor` / `finalize`, which synchronize
the GPU first.
"""

from __future__ import annotations

import bisect
import ctypes
import importlib.util
import math
import operator
import os
import weakref

import torch

from . import _core, _native
from ._dtypes import runtime_name
from ._native import (
    DTypeError,
    InvalidArgumentError,
    NotSymmetricError,
    RshmemError,
    UnsupportedError,
)

# ----------------------------------------------------------------------------------- the device


def ordinal() -> int:
    """This PE's GPU as a torch / CUDA ordinal of this process."""
    found = _native.device_ordinal()
    if found is None:
        raise UnsupportedError("rshmem runs on the host backend here, which has no GPU: init with backend='cuda'")
    return int(found)


def device() -> torch.device:
    """This PE's GPU as a `torch.device`."""
    return torch.device("cuda", ordinal())


def use_device() -> None:
    """Makes this PE's GPU torch's current device right after `rshmem.init` on cuda, when the
    program has not chosen one yet (torch's CUDA state is not initialized), so plain
    `device="cuda"` tensors and the current stream are on the GPU the heap lives on. A device the
    program chose is never changed: `rshmem.init` has checked that it is this PE's GPU."""
    wanted = ordinal()
    if not torch.cuda.is_initialized():
        _core._log.info("rshmem: torch's current CUDA device set to cuda:%d, this PE's GPU", wanted)
        torch.cuda.set_device(wanted)


def cuda_wanted(backend=None) -> bool:
    """Before init: whether `rshmem.init(backend=backend)` will start the cuda backend (`backend`,
    else RSHMEM_BACKEND, else whether a GPU is visible)."""
    asked = (backend or os.environ.get("RSHMEM_BACKEND", "")).strip().lower()
    if asked:
        return asked == "cuda"
    return torch.cuda.is_available()


def planned(requested=None) -> tuple:
    """Before init: (ordinal, PEs of this host sharing it) by rshmem's rule; (0, 1) for a process
    that no launcher numbered (a lone PE, or init numbers the host's PEs itself)."""
    return _native.plan_device(torch.cuda.device_count(), requested) or (0, 1)


def check_current_device(requested=None) -> None:
    """Before init: raises what init would raise about the GPU (too few GPUs without the opt-in,
    a bad `requested` ordinal), and raises when the program already made another GPU torch's
    current device than the one this PE will use (its tensors and streams would be elsewhere)."""
    plan = _native.plan_device(torch.cuda.device_count(), requested)
    if plan is None or not torch.cuda.is_initialized():
        return
    current, mine = torch.cuda.current_device(), plan[0]
    if current != mine:
        raise InvalidArgumentError(
            f"torch's current CUDA device is cuda:{current}, but this PE's GPU is cuda:{mine} (rshmem's rule: "
            "one GPU per PE by local rank, shared round-robin with RSHMEM_ALLOW_SHARED_GPU=1). Call "
            "torch.cuda.set_device(rshmem.torch.device()) before making CUDA tensors, or pass "
            f"device={current} to rshmem.init to use cuda:{current}")


# torch's current stream as a raw handle without building a torch.cuda.Stream object (what
# Triton's launcher reads too); a call on a latency path pays for that object otherwise.
_current_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None) or (
    lambda idx: int(torch.cuda.current_stream(idx).cuda_stream)
)


def stream_handle(stream) -> int:
    """The raw `CUstream` of `stream`: None -> torch's current stream on this PE's GPU, a
    `torch.cuda.Stream` (or anything with `.cuda_stream`) -> its handle, an int -> itself."""
    if stream is None:
        return _current_raw_stream(ordinal())
    if isinstance(stream, int) and not isinstance(stream, bool):
        if stream < 0:
            raise InvalidArgumentError(f"stream handle {stream} is negative; pass a CUstream (an int >= 0)")
        return stream
    handle = getattr(stream, "cuda_stream", None)
    if handle is None:
        raise InvalidArgumentError(
            f"stream must be None, a torch.cuda.Stream or a CUstream handle (int), not {type(stream).__name__}"
        )
    where = getattr(stream, "device", None)
    if where is not None and getattr(where, "index", None) not in (None, ordinal()):
        raise InvalidArgumentError(
            f"stream is on {where}, but this PE's GPU is cuda:{ordinal()}; make the stream on cuda:{ordinal()}"
        )
    return int(handle)


# ------------------------------------------------------------------------- tensors over the heap


class _Allocation:
    """One symmetric allocation made here: its base address, size, and whether it is still live.
    Every tensor over it (local or peer view) keeps this record alive through its storage, and the
    record keeps the heap's memory mapped (`pin`), so a tensor kept past `finalize` never faults."""

    __slots__ = ("base", "nbytes", "alive", "tensor", "pin")

    def __init__(self, base: int, nbytes: int):
        self.base, self.nbytes, self.alive = base, nbytes, True
        self.tensor = None  # weak reference to the tensor create_symmetric_tensor returned
        self.pin = _native.heap_pin()


class _HeapBytes:
    """`nbytes` device bytes at `ptr`, as a CUDA Array Interface (version 3) exporter. `owner`
    rides along so the allocation record lives as long as the storage torch builds on this."""

    __slots__ = ("__cuda_array_interface__", "owner")

    def __init__(self, ptr: int, nbytes: int, owner=None):
        self.__cuda_array_interface__ = {
            "version": 3,
            "typestr": "|u1",
            "shape": (nbytes,),
            "data": (ptr, False),
            "strides": None,
            # The runtime's own work on the heap is ordered by the caller's stream arguments, not
            # by a stream of this exporter: no synchronization is needed to take the view.
            "stream": None,
        }
        self.owner = owner


# DLPack (dlpack.h, v0.8 ABI) as ctypes structures, for torch builds without numpy.
_KDL_CPU, _KDL_CUDA, _KDL_UINT = 1, 2, 1


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


_Deleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _Deleter)]


# address of a DLManagedTensor handed to torch -> what must live until torch calls its deleter
_dl_live: dict = {}


def _dl_release(managed_addr) -> None:
    _dl_live.pop(managed_addr, None)


_DL_DELETER = _Deleter(_dl_release)  # module-level: the C pointer must outlive every capsule
_DL_NAME = b"dltensor"  # the capsule keeps a pointer to these bytes
_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


def _dlpack_bytes(ptr: int, nbytes: int, device_type: int, device_id: int, owner=None) -> torch.Tensor:
    """A uint8 tensor over `nbytes` at `ptr` through a DLPack capsule (no copy)."""
    shape = (ctypes.c_int64 * 1)(nbytes)
    managed = _DLManagedTensor()
    managed.dl_tensor.data = ptr
    managed.dl_tensor.device = _DLDevice(device_type, device_id)
    managed.dl_tensor.ndim = 1
    managed.dl_tensor.dtype = _DLDataType(_KDL_UINT, 8, 1)
    managed.dl_tensor.shape = shape
    managed.dl_tensor.strides = None
    managed.dl_tensor.byte_offset = 0
    managed.manager_ctx = None
    managed.deleter = _DL_DELETER
    addr = ctypes.addressof(managed)
    _dl_live[addr] = (managed, shape, owner)
    try:
        capsule = _capsule_new(addr, _DL_NAME, None)
        return torch.from_dlpack(capsule)
    except BaseException:
        _dl_live.pop(addr, None)
        raise


# The route device_bytes takes by default: the CUDA Array Interface where torch can read it
# (through numpy), else DLPack. Switches to DLPack for good if torch copies instead of viewing.
_HAVE_NUMPY = importlib.util.find_spec("numpy") is not None
_route = "cai" if _HAVE_NUMPY else "dlpack"


def _is_view(flat: torch.Tensor, ptr: int, nbytes: int, dev: torch.device) -> bool:
    return flat.data_ptr() == ptr and flat.device == dev and flat.numel() == nbytes and flat.dtype == torch.uint8


def device_bytes(ptr: int, nbytes: int, owner=None, via: str | None = None) -> torch.Tensor:
    """A uint8 CUDA tensor of `nbytes` viewing device memory at `ptr` on this PE's GPU.

    `via` picks the route, `"cai"` (`__cuda_array_interface__`, read by torch through numpy) or
    `"dlpack"`; by default the CUDA Array Interface where it works, else DLPack."""
    global _route
    dev = device()
    route = via or _route
    if route == "cai":
        # Recent torch (2.11 does) builds the tensor on the device given here without asking the
        # driver which GPU owns the pointer: a peer's copy (physically on the peer's GPU) is still
        # a tensor of this GPU, as it must be for kernels launched here. Older torch asks, and
        # then copies a peer's memory over to this GPU, which is no view: DLPack, which names the
        # device itself, takes over then.
        flat = torch.as_tensor(_HeapBytes(ptr, nbytes, owner), device=dev)
        if _is_view(flat, ptr, nbytes, dev) or via == "cai":
            route = "cai"
        else:
            del flat
            _route = route = "dlpack"
    if route == "dlpack":
        flat = _dlpack_bytes(ptr, nbytes, _KDL_CUDA, dev.index, owner)
    elif route != "cai":
        raise InvalidArgumentError(f"via must be 'cai' or 'dlpack', not {via!r}")
    if not _is_view(flat, ptr, nbytes, dev):
        raise RshmemError(
            f"torch {torch.__version__} copied heap memory instead of viewing it (got {flat.numel()} bytes "
            f"at {flat.data_ptr():#x} on {flat.device}, wanted {nbytes} at {ptr:#x} on {dev}) via {route}; "
            "please report this"
        )
    return flat


def wrap(ptr: int, nbytes: int, dtype, shape, stride=None, owner=None) -> torch.Tensor:
    """A CUDA tensor of `shape` and `dtype` (optionally `stride`) over `nbytes` at `ptr`."""
    if nbytes == 0:
        if stride is None:
            return torch.empty(shape, dtype=dtype, device=device())
        return torch.empty_strided(shape, stride, dtype=dtype, device=device())
    typed = device_bytes(ptr, nbytes, owner).view(dtype)
    return typed.view(shape) if stride is None else typed.as_strided(shape, stride)


# Live allocations made by create_symmetric_tensor: sorted bases and base -> record.
_bases: list = []
_allocs: dict = {}


def _forget_all() -> tuple:
    """Marks every allocation freed (finalize frees the heap); returns (count, bytes) of the
    tensors create_symmetric_tensor returned that are still referenced."""
    if _native.backend() == "cuda" and torch.cuda.is_initialized():
        # Kernels still queued may touch the heap that finalize is about to unmap.
        torch.cuda.synchronize(ordinal())
    alive = [r for r in _allocs.values() if r.tensor is not None and r.tensor() is not None]
    for record in _allocs.values():
        record.alive = False
    _bases.clear()
    _allocs.clear()
    return len(alive), sum(r.nbytes for r in alive)


_core._finalize_hooks.append(_forget_all)


def allocation_of(addr: int):
    """The live allocation record holding `addr`, or None."""
    i = bisect.bisect_right(_bases, addr) - 1
    if i >= 0:
        record = _allocs[_bases[i]]
        if addr < record.base + record.nbytes:
            return record
    return None


def span(t: torch.Tensor) -> int:
    """Bytes from `t.data_ptr()` to the end of its last element."""
    if t.numel() == 0:
        return 0
    last = sum((n - 1) * s for n, s in zip(t.shape, t.stride()))
    return (last + 1) * t.element_size()


def create_symmetric_tensor(dims: tuple, dtype) -> torch.Tensor:
    """Collective: a zero-filled symmetric CUDA tensor (see `rshmem.torch`)."""
    nbytes = math.prod(dims) * dtype.itemsize
    # calloc zeroes inside the collective, before any peer can write into this PE's copy.
    base = _native.calloc(1, max(nbytes, 1))
    record = _Allocation(base, max(nbytes, 1))
    t = wrap(base, nbytes, dtype, dims, owner=record)
    bisect.insort(_bases, base)
    _allocs[base] = record
    t._rshmem_base = base  # free_tensor finds zero-size tensors by this
    t._rshmem_alloc = record
    record.tensor = weakref.ref(t)
    return t


def _check_live(t: torch.Tensor, what: str) -> None:
    """Refuses a tensor whose allocation was freed, where the tensor says which one it is (the
    tensors made here and their peer views do; slices of them do not)."""
    record = getattr(t, "_rshmem_alloc", None)
    if record is not None and not record.alive:
        raise NotSymmetricError(f"{what} was freed (free_tensor or rshmem.finalize); allocate a new tensor")


def peer_tensor(t: torch.Tensor, pe: int) -> torch.Tensor:
    """The view of symmetric CUDA tensor `t` on node-local PE `pe` (`nvshmem_ptr`)."""
    if t.device.type != "cuda":
        raise NotSymmetricError(f"tensor on {t.device} is not a symmetric tensor of the cuda backend")
    _check_live(t, "the tensor")
    addr = getattr(t, "_rshmem_base", None) if t.numel() == 0 else t.data_ptr()
    if addr is None:
        raise NotSymmetricError("this empty tensor was not made by create_symmetric_tensor")
    remote = _native.ptr(addr, _pe(pe))
    if remote is None:
        # ptr() answers None both for memory outside the heap and for unreachable peers; this
        # PE always reaches its own heap, so asking for itself tells the two apart.
        if _native.ptr(addr, _native.my_pe()) is None:
            raise NotSymmetricError(
                f"the tensor at {addr:#x} is not inside the symmetric heap: make it with "
                "rshmem.torch.create_symmetric_tensor"
            )
        raise UnsupportedError(f"PE {pe} is not reachable by load/store from PE {_native.my_pe()} (not node-local)")
    record = allocation_of(addr)
    view = wrap(remote, span(t), t.dtype, tuple(t.shape), tuple(t.stride()), owner=record)
    view._rshmem_alloc = record
    return view


def free_tensor(t: torch.Tensor) -> None:
    """Collective: frees a tensor made by `create_symmetric_tensor` (`nvshmem_free`)."""
    base = getattr(t, "_rshmem_base", None)
    if base is None or base not in _allocs or (t.numel() and t.data_ptr() != base):
        raise NotSymmetricError(
            "free_tensor takes the tensor returned by create_symmetric_tensor on this PE "
            "(not a view, a peer tensor, or an already freed tensor)"
        )
    # Work already queued on any stream of this GPU may still read or write the memory.
    torch.cuda.synchronize(ordinal())
    _native.free(base)
    _allocs.pop(base).alive = False
    _bases.remove(base)
    t._rshmem_base = None


# -------------------------------------------------------------------------- argument checking


def _pe(pe) -> int:
    """A PE number (ints and integer scalars such as numpy.int64); range is the runtime's check."""
    try:
        if isinstance(pe, bool):
            raise TypeError
        return operator.index(pe)
    except TypeError:
        raise InvalidArgumentError(f"pe must be an int, not {pe!r}") from None


def _gpu(t, what: str) -> int:
    """The address of contiguous CUDA tensor `t` on this PE's GPU."""
    if not isinstance(t, torch.Tensor):
        raise InvalidArgumentError(f"{what} must be a torch tensor, not {type(t).__name__}")
    # `is_cuda` / `get_device()` rather than `t.device`: on the on-stream latency path, building
    # a torch.device object per tensor is a measurable part of a call.
    if not t.is_cuda:
        raise InvalidArgumentError(
            f"{what} is a tensor on {t.device}, but rshmem runs on the cuda backend: pass CUDA tensors "
            f"(e.g. {what}.to('cuda:{ordinal()}'))"
        )
    if t.get_device() != ordinal():
        raise InvalidArgumentError(f"{what} is on {t.device}, but this PE's GPU is cuda:{ordinal()}")
    if not t.is_contiguous():
        raise InvalidArgumentError(f"{what} must be contiguous (call .contiguous() first)")
    _check_live(t, what)
    return t.data_ptr()


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def _same_dtype(a: torch.Tensor, b: torch.Tensor, call: str) -> None:
    if a.dtype != b.dtype:
        raise DTypeError(f"{call}: dst is {a.dtype} but src is {b.dtype}; use one dtype")


def _fits(need: int, have: int, what: str, unit: str, call: str) -> None:
    if need > have:
        raise InvalidArgumentError(f"{call}: {what} holds {have} {unit}, but {need} are needed")


def _sig(sig, call: str) -> int:
    if not isinstance(sig, torch.Tensor):
        raise InvalidArgumentError(f"{call}: sig must be a tensor element such as sig[0], not {type(sig).__name__}")
    if sig.dtype not in (torch.int64, torch.uint64):
        raise DTypeError(f"{call}: signal words are 64-bit: pass an int64 or uint64 element, not {sig.dtype}")
    if sig.numel() != 1:
        raise InvalidArgumentError(f"{call}: sig must be one element (e.g. sig[0]), not {sig.numel()} elements")
    return _gpu(sig, "sig")


def _u64(value, call: str) -> int:
    v = int(value)
    if not -(1 << 63) <= v < (1 << 64):
        raise InvalidArgumentError(f"{call}: signal value {v} does not fit in 64 bits")
    return v & ((1 << 64) - 1)


def _typed(dst: torch.Tensor, src: torch.Tensor, call: str) -> str:
    _same_dtype(dst, src, call)
    return runtime_name(dst.dtype)


# ------------------------------------------------------------------------------ on-stream API


def _torch_stream(stream, handle: int):
    """`stream` (an argument of an on-stream call, `handle` its raw CUstream) as a torch stream
    object, which `Tensor.record_stream` needs."""
    if isinstance(stream, torch.cuda.Stream):
        return stream
    if stream is None:
        return torch.cuda.current_stream(ordinal())
    if handle == 0:
        return torch.cuda.default_stream(ordinal())
    return torch.cuda.ExternalStream(handle, device=device())


def _used_by_stream(t: torch.Tensor, stream, handle: int) -> None:
    """Keeps local tensor `t`'s memory from being reused before the work just queued on the
    stream has run (see the module docs). Symmetric tensors are skipped: heap memory, which
    torch's allocator never hands out."""
    if getattr(t, "_rshmem_alloc", None) is None and t.numel():
        t.record_stream(_torch_stream(stream, handle))


def putmem_on_stream(dst, src, pe: int, stream=None) -> None:
    """Copies all of local `src` into symmetric `dst` on `pe`, ordered on `stream`."""
    call = "putmem_on_stream"
    d, s = _gpu(dst, "dst"), _gpu(src, "src")
    _same_dtype(dst, src, call)
    _fits(src.numel(), dst.numel(), "dst", "elements", call)
    handle = stream_handle(stream)
    _native.putmem_on_stream(d, s, _nbytes(src), _pe(pe), handle, False)  # s: a live tensor's
    _used_by_stream(src, stream, handle)


def getmem_on_stream(dst, src, pe: int, stream=None) -> None:
    """Fills all of local `dst` from symmetric `src` on `pe`, ordered on `stream`."""
    call = "getmem_on_stream"
    d, s = _gpu(dst, "dst"), _gpu(src, "src")
    _same_dtype(dst, src, call)
    _fits(dst.numel(), src.numel(), "src", "elements", call)
    handle = stream_handle(stream)
    _native.getmem_on_stream(d, s, _nbytes(dst), _pe(pe), handle, False)  # d: a live tensor's
    _used_by_stream(dst, stream, handle)


def putmem_signal_on_stream(dst, src, sig, value: int, op: int, pe: int, stream=None) -> None:
    """Copies all of `src` into symmetric `dst` on `pe`, then applies `op` with `value` to the
    signal word `sig` on `pe`, ordered on `stream`."""
    call = "putmem_signal_on_stream"
    d, s, g = _gpu(dst, "dst"), _gpu(src, "src"), _sig(sig, call)
    _same_dtype(dst, src, call)
    _fits(src.numel(), dst.numel(), "dst", "elements", call)
    handle = stream_handle(stream)
    _native.putmem_signal_on_stream(d, s, _nbytes(src), g, _u64(value, call), int(op), _pe(pe), handle, False)
    _used_by_stream(src, stream, handle)


def signal_op_on_stream(sig, value: int, op: int, pe: int, stream=None) -> None:
    """Applies `op` (`SIGNAL_SET` / `SIGNAL_ADD`) with `value` to the signal word on `pe`."""
    call = "signal_op_on_stream"
    _native.signal_op_on_stream(_sig(sig, call), _u64(value, call), int(op), _pe(pe), stream_handle(stream))


def signal_wait_until_on_stream(sig, cmp: int, value: int, stream=None) -> None:
    """Makes `stream` wait until the local signal word compares true against `value`."""
    call = "signal_wait_until_on_stream"
    _native.signal_wait_until_on_stream(_sig(sig, call), int(cmp), _u64(value, call), stream_handle(stream))


def quiet_on_stream(stream=None) -> None:
    """Completes this PE's puts and signals issued on `stream` before later work on it."""
    _native.quiet_on_stream(stream_handle(stream))


def barrier_all_on_stream(stream=None) -> None:
    """Collective: a barrier of every PE, ordered on `stream`."""
    _native.barrier_all_on_stream(stream_handle(stream))


def barrier_on_stream(team=_core.Team.WORLD, stream=None) -> None:
    """Collective over `team`: a barrier ordered on `stream`."""
    _native.barrier_on_stream(int(team), stream_handle(stream))


def broadcast_on_stream(dst, src, root: int, team=_core.Team.WORLD, stream=None) -> None:
    """Collective over `team`: `src` of PE `root` (team numbering) into `dst` on every PE."""
    call = "broadcast_on_stream"
    d, s = _gpu(dst, "dst"), _gpu(src, "src")
    name = _typed(dst, src, call)
    _fits(src.numel(), dst.numel(), "dst", "elements", call)
    _native.broadcast_on_stream(int(team), d, s, src.numel(), int(root), name, stream_handle(stream))


def fcollect_on_stream(dst, src, team=_core.Team.WORLD, stream=None) -> None:
    """Collective over `team`: `dst` gets every PE's `src`, in team order."""
    call = "fcollect_on_stream"
    d, s = _gpu(dst, "dst"), _gpu(src, "src")
    name = _typed(dst, src, call)
    _fits(src.numel() * _core.team_n_pes(team), dst.numel(), "dst", "elements (team size x src)", call)
    _native.fcollect_on_stream(int(team), d, s, src.numel(), name, stream_handle(stream))


def alltoall_on_stream(dst, src, team=_core.Team.WORLD, stream=None) -> None:
    """Collective over `team`: block `j` of `src` (`src.numel() // team size` elements) lands in
    block `me` of `dst` on PE `j`."""
    call = "alltoall_on_stream"
    d, s = _gpu(dst, "dst"), _gpu(src, "src")
    name = _typed(dst, src, call)
    size = _core.team_n_pes(team)
    if src.numel() % size:
        raise InvalidArgumentError(f"{call}: src holds {src.numel()} elements, not a multiple of the team size {size}")
    _fits(src.numel(), dst.numel(), "dst", "elements", call)
    _native.alltoall_on_stream(int(team), d, s, src.numel() // size, name, stream_handle(stream))


def reduce_on_stream(op: str, dst, src, team=_core.Team.WORLD, stream=None) -> None:
    """Collective over `team`: `dst` on every PE gets the element-wise `op` of every `src`."""
    call = "reduce_on_stream"
    d, s = _gpu(dst, "dst"), _gpu(src, "src")
    name = _typed(dst, src, call)
    _fits(src.numel(), dst.numel(), "dst", "elements", call)
    _native.reduce_on_stream(int(team), str(op), d, s, src.numel(), name, stream_handle(stream))
