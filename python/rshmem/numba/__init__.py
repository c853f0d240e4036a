"""rshmem for Numba-CUDA kernels: the device API as Numba functions.

Call these from ``@cuda.jit`` kernels; names and arguments follow nvshmem4py's
``nvshmem.core.device.numba``::

    from numba import cuda
    import rshmem.numba as shm

    @cuda.jit
    def shift(dst, src, sig):
        peer = (shm.my_pe() + 1) % shm.n_pes()
        shm.put_signal_nbi_block(dst, src, sig, 1, shm.SIGNAL_SET, peer)   # all threads of the block
        if cuda.threadIdx.x == 0:
            shm.signal_wait(sig, shm.CMP_GE, 1)

- Arrays in, sizes deduced: ``put(dst, src, pe)`` moves ``min(dst.size, src.size)`` elements of
  the arrays' dtype (which must agree; a mismatch is a compile-time error). Slice to move a part.
- Scopes: a plain function acts once per calling thread (guard it with ``if cuda.threadIdx.x ==
  0``); ``*_warp`` / ``*_block`` must be called by every thread of the warp / block with the same
  arguments.
- Families: RMA (``put``/``get`` [``_nbi``][``_warp``/``_block``], ``p``, ``g``), signals
  (``put_signal*``, ``signal_op``, ``signal_wait``, ``signal_fetch``), waits (``wait_until*``,
  ``test*``), atomics (``atomic_*``), ordering (``fence``, ``quiet``), barriers (``barrier_all*``,
  ``sync_all*``, ``barrier*``, ``sync*``), collectives (``reduce*``, ``broadcast*``,
  ``fcollect*``, ``alltoall*``), queries, and ``peer_array(array, pe)``: a node-local peer's
  copy as an array that loads and stores reach directly.
- ``raw``: one function per row of the device API table (``triton-lib/api.toml``), with
  pointers and explicit sizes, as the C header declares them.

The calls inline into the kernel: the device library is LTO-IR that nvJitLink optimizes with the
kernel (numba-cuda's default where nvJitLink is installed; ``jit`` below forces it). Every module
that links it gets the device state when it loads, for kernels compiled before or after
``rshmem.init``. ``compile_ptx`` shows the inlined PTX without a GPU.

Symmetric arrays come from the host API: ``rshmem.torch.create_symmetric_tensor`` (any CUDA
array interface consumer takes the tensor) or ``rshmem.compat.nvshmem.core.array``.
"""
from __future__ import annotations

import contextlib

from rshmem.numba import _raw as raw
from rshmem.numba._device import *  # noqa: F403 - the device API
from rshmem.numba._device import DeviceApiError
from rshmem.numba._device import __all__ as _device_all
from rshmem.numba._lower import DeviceApiTypeError, library_path

CMP_EQ, CMP_NE, CMP_GT, CMP_LE, CMP_LT, CMP_GE = (raw.CMP_EQ, raw.CMP_NE, raw.CMP_GT, raw.CMP_LE, raw.CMP_LT,
                                                  raw.CMP_GE)
SIGNAL_SET, SIGNAL_ADD = raw.SIGNAL_SET, raw.SIGNAL_ADD
TEAM_INVALID, TEAM_WORLD, TEAM_SHARED, TEAM_NODE, TEAM_SAME_MYPE_NODE = (
    raw.TEAM_INVALID, raw.TEAM_WORLD, raw.TEAM_SHARED, raw.TEAM_NODE, raw.TEAM_SAME_MYPE_NODE)


def jit(func_or_sig=None, **options):
    """``numba.cuda.jit`` with link-time optimization on (``lto=True``), which the device
    library needs; use as ``@jit``, ``@jit(...)`` or ``jit(fn, ...)``."""
    from numba import cuda  # noqa: PLC0415

    options.setdefault("lto", True)
    if func_or_sig is None:
        return cuda.jit(**options)
    return cuda.jit(func_or_sig, **options)


class _AssumedDevice:
    """What numba-cuda asks the current device while it compiles a device function (the
    functions of this package are Numba overloads, compiled as device functions): only the
    compute capability."""

    def __init__(self, cc):
        self.compute_capability = tuple(cc[:2])


@contextlib.contextmanager
def _assume_device(cc):
    # numba-cuda (0.30) compiles the device functions a kernel calls for the compute capability
    # of the *current device*, even when the kernel itself is compiled for a given one, so a
    # machine without a GPU cannot compile them. While compile_ptx runs, that question is
    # answered with `cc`; with a GPU present nothing is replaced.
    from numba.cuda import dispatcher  # noqa: PLC0415

    if cuda_available():
        yield
        return
    saved = dispatcher.get_current_device
    dispatcher.get_current_device = lambda: _AssumedDevice(cc)
    try:
        yield
    finally:
        dispatcher.get_current_device = saved


def cuda_available() -> bool:
    """Whether Numba sees a GPU here."""
    from numba import cuda  # noqa: PLC0415

    try:
        return bool(cuda.is_available())
    except Exception:  # noqa: BLE001 - no driver at all
        return False


def compile_ptx(pyfunc, sig, cc=(9, 0), optimize: bool = True) -> str:
    """The PTX of kernel ``pyfunc`` for argument types ``sig`` (a tuple of Numba types) on
    compute capability ``cc``, after nvJitLink linked and optimized it with the device library:
    what the GPU runs, with the library's calls inlined. ``optimize=False`` links without
    optimizing (no inlining; much faster, for checking that everything links). Needs NVVM and
    nvJitLink, no GPU."""
    from cuda.bindings import nvjitlink  # noqa: PLC0415
    from numba.cuda import compile_all  # noqa: PLC0415

    with _assume_device(cc):
        codes, _ = compile_all(pyfunc, sig, device=False, cc=cc, output="ltoir", abi="numba")
    arch = f"-arch=sm_{cc[0]}{cc[1]}{cc[2] if len(cc) > 2 else ''}"
    options = [arch, "-lto", "-ptx"] + ([] if optimize else ["-Xnvvm=-opt=0"])
    handle = nvjitlink.create(len(options), options)
    try:
        for i, code in enumerate(codes):
            # bytes (the kernel), Numba's LinkableCode (`data`) or cuda.core's ObjectCode (`code`,
            # from CUDA C++ that Numba's own float16 support links), all LTO-IR here
            data = code if isinstance(code, bytes) else getattr(code, "data", None) or code.code
            nvjitlink.add_data(handle, nvjitlink.InputType.LTOIR, data, len(data), f"input{i}")
        try:
            nvjitlink.complete(handle)
        except nvjitlink.nvJitLinkError as e:
            size = nvjitlink.get_error_log_size(handle)
            log = bytearray(size)
            nvjitlink.get_error_log(handle, log)
            raise RuntimeError(f"nvJitLink failed ({e}): {log.decode(errors='replace')}") from None
        size = nvjitlink.get_linked_ptx_size(handle)
        ptx = bytearray(size)
        nvjitlink.get_linked_ptx(handle, ptx)
    finally:
        nvjitlink.destroy(handle)
    return ptx.decode().rstrip("\x00")


__all__ = [
    *_device_all, "raw", "jit", "compile_ptx", "cuda_available", "library_path", "DeviceApiError", "DeviceApiTypeError", "CMP_EQ", "CMP_NE", "CMP_GT", "CMP_LE", "CMP_LT", "CMP_GE", "SIGNAL_SET",
    "SIGNAL_ADD", "TEAM_INVALID", "TEAM_WORLD", "TEAM_SHARED", "TEAM_NODE", "TEAM_SAME_MYPE_NODE",
]
