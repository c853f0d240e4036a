"""What nvshmem4py programs hand the host API, made into what rshmem takes: devices and streams
of cuda.core, Numba, torch or raw handles; arrays of CuPy, Numba, numpy or torch as torch
tensors over the same memory (never a copy); and symmetric tensors back as the array kind the
program uses (CuPy where it is installed, as nvshmem4py does).
"""
from __future__ import annotations

import importlib.util

import rshmem
from rshmem._native import InvalidArgumentError


class NvshmemInvalid(InvalidArgumentError):
    """nvshmem4py's error for invalid arguments (an `rshmem.InvalidArgumentError`)."""


class NvshmemError(rshmem.RshmemError):
    """nvshmem4py's error for a failed operation (an `rshmem.RshmemError`)."""


def device_index(device) -> int | None:
    """The CUDA ordinal of `device`: a cuda.core Device (`device_id`), a Numba device (`id`), a
    torch.device / "cuda:N" (`index`), an int, or None (rshmem's rule picks it)."""
    if device is None or isinstance(device, int) and not isinstance(device, bool):
        return device
    for attr in ("device_id", "index", "id"):
        value = getattr(device, attr, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    if isinstance(device, str) and device.startswith("cuda:"):
        return int(device.split(":", 1)[1])
    raise NvshmemInvalid(f"device must be a cuda.core Device, a Numba or torch device, 'cuda:N' or an int, not "
                         f"{device!r}")


def stream_handle(stream):
    """The raw CUstream of `stream` (None stays None: torch's current stream on the cuda backend).

    Takes what nvshmem4py programs use: a cuda.core Stream (`__cuda_stream__`), a Numba stream
    (`handle`), a torch stream (`cuda_stream`) or a raw handle (int)."""
    if stream is None:
        return None
    if isinstance(stream, int) and not isinstance(stream, bool):
        return stream
    protocol = getattr(stream, "__cuda_stream__", None)
    if callable(protocol):
        return int(protocol()[1])
    handle = getattr(stream, "cuda_stream", None)  # torch
    if handle is None:
        handle = getattr(stream, "handle", None)  # Numba: a CUstream or a ctypes c_void_p
        handle = getattr(handle, "value", handle)
        if handle is None and getattr(stream, "handle", None) is not None:
            handle = 0  # the c_void_p of Numba's default stream holds None
    if handle is None:
        raise NvshmemInvalid(f"stream must be a cuda.core, Numba or torch stream or a CUstream handle (int), not "
                             f"{type(stream).__name__}")
    return int(handle)


def as_tensor(x, what: str):
    """A torch tensor over the memory of `x` (torch tensor, numpy array, or anything with
    `__cuda_array_interface__` / `__dlpack__`), without copying."""
    import torch  # noqa: PLC0415

    if isinstance(x, torch.Tensor):
        return x
    if hasattr(x, "__cuda_array_interface__"):
        ptr = x.__cuda_array_interface__["data"][0]
        t = torch.as_tensor(x, device="cuda")
    elif hasattr(x, "__array_interface__"):
        ptr = x.__array_interface__["data"][0]
        t = torch.from_numpy(x)
    elif hasattr(x, "__dlpack__"):
        t = torch.from_dlpack(x)
        ptr = t.data_ptr()
    else:
        raise NvshmemInvalid(f"{what} must be an array or tensor (CuPy, Numba, numpy or torch), not {type(x).__name__}")
    if t.numel() and t.data_ptr() != ptr:
        raise NvshmemError(f"{what}: torch copied the array instead of viewing it; pass a torch tensor")
    return t


def from_tensor(t, like: str):
    """`t` as the array kind `like` names: "cupy", "numba", "numpy" or "torch" (no copy)."""
    if like == "torch":
        return t
    if like == "numpy":
        return t.numpy()
    if like == "cupy":
        import cupy  # noqa: PLC0415

        return cupy.asarray(t)
    from numba import cuda  # noqa: PLC0415

    return cuda.as_cuda_array(t)


def array_kind(t) -> str:
    """The array kind `array()` returns for symmetric tensor `t`: numpy on the host backend;
    CuPy where installed (nvshmem4py returns CuPy arrays), else a Numba device array."""
    if t.device.type == "cpu":
        return "numpy"
    if importlib.util.find_spec("cupy") is not None:
        return "cupy"
    return "numba"


def kind_of(x) -> str:
    """The array kind of `x`, so a view derived from it comes back the same kind."""
    module = type(x).__module__.split(".")[0]
    if module in ("cupy", "numpy", "torch"):
        return module
    return "numba"
