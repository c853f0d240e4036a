"""This PE's GPU as torch sees it, before and after `rshmem.init` (used by `rshmem.torch` and
`rshmem.init`): the one PE-to-GPU rule of the runtime applied to torch's view of the devices, and
torch CUDA streams as raw `CUstream` handles.
"""

from __future__ import annotations

import logging
import os

import torch

from . import _native
from ._native import InvalidArgumentError, UnsupportedError

_log = logging.getLogger("rshmem")

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
        _log.info("rshmem: torch's current CUDA device set to cuda:%d, this PE's GPU", wanted)
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
current_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None) or (
    lambda idx: int(torch.cuda.current_stream(idx).cuda_stream)
)


def stream_handle(stream) -> int:
    """The raw `CUstream` of `stream`: None -> torch's current stream on this PE's GPU, a
    `torch.cuda.Stream` (or anything with `.cuda_stream`) -> its handle, an int -> itself."""
    if stream is None:
        return current_raw_stream(ordinal())
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


