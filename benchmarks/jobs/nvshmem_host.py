"""NVSHMEM's host API (`nvshmemx_*_on_stream`), called through ctypes on the library torch loaded.

torch's NVSHMEM backend loads `libnvshmem_host.so.3` and initialises NVSHMEM at the first
symmetric allocation; opening the same file again with ctypes returns the same handle, so these
calls act on the NVSHMEM state torch set up. Call `HostApi()` only after that first allocation.
Pointers are the LOCAL addresses of NVSHMEM symmetric tensors (`t.data_ptr()`), as in C.
"""
from __future__ import annotations

import ctypes
from pathlib import Path

TEAM_WORLD = 0  # NVSHMEM_TEAM_WORLD (device_host/nvshmem_common.cuh)


def loaded_library() -> str:
    """Path of the libnvshmem_host.so mapped into this process, else the one beside the device
    library torch found. FileNotFoundError when neither exists."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                if "libnvshmem_host.so" in line:
                    return line.split()[-1]
    except OSError:
        pass
    from benchmarks.kernels.kernels_nvshmem import device_library

    path = Path(device_library()).parent / "libnvshmem_host.so.3"
    if not path.exists():
        raise FileNotFoundError(f"libnvshmem_host.so is not loaded in this process and not at {path}")
    return str(path)


def _stream():
    import torch

    return ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)


class HostApi:
    """The on-stream functions the benchmarks use, bound with their C signatures (NVSHMEM 3.4
    headers host/nvshmemx_api.h and host/nvshmemx_coll_api.h)."""

    def __init__(self):
        self.path = loaded_library()
        lib = ctypes.CDLL(self.path)
        vp, sz, i32, u64 = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_uint64

        def bind(name, argtypes, restype=None):
            f = getattr(lib, name)
            f.argtypes, f.restype = argtypes, restype
            return f

        self._put = bind("nvshmemx_putmem_on_stream", [vp, vp, sz, i32, vp])
        self._get = bind("nvshmemx_getmem_on_stream", [vp, vp, sz, i32, vp])
        self._put_signal = bind("nvshmemx_putmem_signal_on_stream", [vp, vp, sz, vp, u64, i32, i32, vp])
        self._wait = bind("nvshmemx_signal_wait_until_on_stream", [vp, i32, u64, vp])
        self._barrier = bind("nvshmemx_barrier_all_on_stream", [vp])
        self._fcollect = bind("nvshmemx_fcollectmem_on_stream", [i32, vp, vp, sz, vp], ctypes.c_int)

    def putmem_on_stream(self, dst, src, pe: int) -> None:
        self._put(dst.data_ptr(), src.data_ptr(), src.numel() * src.element_size(), pe, _stream())

    def getmem_on_stream(self, dst, src, pe: int) -> None:
        self._get(dst.data_ptr(), src.data_ptr(), dst.numel() * dst.element_size(), pe, _stream())

    def putmem_signal_on_stream(self, dst, src, sig, value: int, op: int, pe: int) -> None:
        self._put_signal(dst.data_ptr(), src.data_ptr(), src.numel() * src.element_size(), sig.data_ptr(), value,
                         op, pe, _stream())

    def signal_wait_until_on_stream(self, sig, cmp: int, value: int) -> None:
        self._wait(sig.data_ptr(), cmp, value, _stream())

    def barrier_all_on_stream(self) -> None:
        self._barrier(_stream())

    def fcollectmem_on_stream(self, dst, src) -> None:
        rc = self._fcollect(TEAM_WORLD, dst.data_ptr(), src.data_ptr(), src.numel() * src.element_size(), _stream())
        if rc != 0:
            raise RuntimeError(f"nvshmemx_fcollectmem_on_stream returned {rc}")
