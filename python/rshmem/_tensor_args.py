"""The argument checks of `rshmem.torch`: where a tensor lives and whether its allocation is still
there, and the arguments of the on-stream calls (`_on_stream.py`), which the runtime queues on the
stream (cuda) or runs now (host) along one path for both backends."""

from __future__ import annotations

import operator

import torch

from . import _cuda, _native
from ._dtype_names import runtime_name
from ._native import DTypeError, InvalidArgumentError, NotSymmetricError, UnsupportedError


def _addr(t: torch.Tensor) -> int:
    """Where `t` starts. torch answers 0 for the `data_ptr()` of an empty tensor, so an empty one
    is located through its storage (an empty tensor made here is a zero-length view at the start
    of a one-byte heap view)."""
    try:
        if t.numel():
            return t.data_ptr()
        return t.untyped_storage().data_ptr() + t.storage_offset() * t.element_size()
    except RuntimeError as e:  # a storage free_tensor released (or one torch itself released)
        raise NotSymmetricError(str(e)) from None


def _span(t: torch.Tensor) -> int:
    """Bytes from `t.data_ptr()` to the end of its last element."""
    if t.numel() == 0:
        return 0
    last = sum((n - 1) * s for n, s in zip(t.shape, t.stride()))
    return (last + 1) * t.element_size()


def _check_live(t: torch.Tensor, what: str) -> None:
    """Refuses a tensor made here whose allocation is gone (freed, or finalized), even where a
    newer allocation now holds its address: the runtime's id there differs from the tensor's."""
    stamped = getattr(t, "_rshmem_id", None)
    if stamped is None:
        return
    state = _native.view_state(_addr(t), stamped)
    if state in ("finalized", "uninitialized"):
        raise NotSymmetricError(f"{what} was freed by rshmem.finalize() (its heap is gone); allocate a new tensor")
    if state != "live":
        raise NotSymmetricError(f"{what} was freed (free_tensor): its memory is freed already; allocate a new tensor")



def _pe(pe) -> int:
    """A PE number (ints and integer scalars such as numpy.int64); range is the runtime's check."""
    try:
        if isinstance(pe, bool):
            raise TypeError
        return operator.index(pe)
    except TypeError:
        raise InvalidArgumentError(f"pe must be an int, not {pe!r}") from None


def _local(t, what: str, index: int | None) -> int:
    """The address of contiguous tensor `t` on this PE's device (`index`: its GPU ordinal, None
    on the host backend, as `_native.device_ordinal()` says once per call)."""
    if not isinstance(t, torch.Tensor):
        raise InvalidArgumentError(f"{what} must be a torch tensor, not {type(t).__name__}")
    # `get_device()` (-1 on the CPU) rather than `t.device`: on the on-stream latency path,
    # building a torch.device object per tensor is a measurable part of a call.
    if t.get_device() != (-1 if index is None else index):
        here = "cpu" if index is None else f"cuda:{index}"
        raise InvalidArgumentError(
            f"{what} is a tensor on {t.device}, but this PE's memory is on {here} ({_native.backend()} backend): "
            f"pass tensors on {here} (e.g. {what}.to('{here}'))"
        )
    if not t.is_contiguous():
        raise InvalidArgumentError(
            f"{what} must be contiguous, but its shape {tuple(t.shape)} has strides {tuple(t.stride())} "
            "(call .contiguous() first)"
        )
    _check_live(t, what)
    try:
        return t.data_ptr()
    except RuntimeError as e:  # a view of a tensor free_tensor released
        raise NotSymmetricError(f"{what}: {e}") from None


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def _same_dtype(a: torch.Tensor, b: torch.Tensor, call: str) -> None:
    if a.dtype != b.dtype:
        raise DTypeError(f"{call}: dst is {a.dtype} but src is {b.dtype}; use one dtype")


def _fits(need: int, have: int, what: str, unit: str, call: str) -> None:
    if need > have:
        raise InvalidArgumentError(f"{call}: {what} holds {have} {unit}, but {need} are needed")


def _sig(sig, call: str, index: int | None) -> int:
    if not isinstance(sig, torch.Tensor):
        raise InvalidArgumentError(f"{call}: sig must be a tensor element such as sig[0], not {type(sig).__name__}")
    if sig.dtype not in (torch.int64, torch.uint64):
        raise DTypeError(f"{call}: signal words are 64-bit: pass an int64 or uint64 element, not {sig.dtype}")
    if sig.numel() != 1:
        raise InvalidArgumentError(f"{call}: sig must be one element (e.g. sig[0]), not {sig.numel()} elements")
    return _local(sig, "sig", index)


def _u64(value, call: str) -> int:
    v = int(value)
    if not -(1 << 63) <= v < (1 << 64):
        raise InvalidArgumentError(f"{call}: signal value {v} does not fit in 64 bits")
    return v & ((1 << 64) - 1)


def _typed(dst: torch.Tensor, src: torch.Tensor, call: str) -> str:
    _same_dtype(dst, src, call)
    return runtime_name(dst.dtype)


def _stream(stream, call: str, index: int | None) -> int:
    """The raw stream handle of an on-stream call: a CUDA stream of this PE's GPU on the cuda
    backend (see `_cuda.stream_handle`); 0 on the host backend, which takes no stream."""
    if index is not None:
        return _cuda.current_raw_stream(index) if stream is None else _cuda.stream_handle(stream)
    if stream is not None:
        raise UnsupportedError(f"{call}: a stream needs the cuda backend; on the host backend pass stream=None")
    return 0


def _used_by_stream(t: torch.Tensor, stream, handle: int) -> None:
    """Keeps local CUDA tensor `t`'s memory from being reused before the work just queued on the
    stream has run (see the module docs). Heap tensors are skipped: torch's allocator never
    hands out heap memory."""
    if t.is_cuda and t.numel() and getattr(t, "_rshmem_id", None) is None:
        if isinstance(stream, torch.cuda.Stream):
            s = stream
        elif stream is None:
            s = torch.cuda.current_stream(t.get_device())
        elif handle == 0:
            s = torch.cuda.default_stream(t.get_device())
        else:
            s = torch.cuda.ExternalStream(handle, device=t.device)
        t.record_stream(s)


def _bytes_of(nbytes, t: torch.Tensor, call: str) -> int:
    """`nbytes` of an on-stream copy: all of `t` by default, else a whole number of its elements
    that fits in it."""
    have = _nbytes(t)
    if nbytes is None:
        return have
    n = operator.index(nbytes)
    if n < 0 or n > have or n % t.element_size():
        raise InvalidArgumentError(
            f"{call}: nbytes is {n}; it must be a multiple of the element size {t.element_size()} "
            f"between 0 and the {have} bytes of the tensor"
        )
    return n
