"""torch's SymmetricMemory on rshmem: the backend `"RSHMEM"`.

    import rshmem.torch_symm_mem                    # builds (first time) and registers it
    import torch.distributed._symmetric_memory as symm_mem
    symm_mem.set_backend("RSHMEM")
    t = symm_mem.empty(1024, device=rshmem.torch.device())
    h = symm_mem.rendezvous(t, dist.group.WORLD)    # h.buffer_ptrs, h.barrier(), ...

rshmem must run first (`rshmem.init`, or a group of `rshmem.torch_backend`). The backend is a
thin C++ layer (`csrc/symm_mem.cpp`) implementing torch's `SymmetricMemoryAllocator` and
`SymmetricMemory` over rshmem's C ABI (`csrc/rshmem.h`), which `rshmem._native` exports over the
runtime Python started. It is compiled on the first import against the torch being imported,
with `torch.utils.cpp_extension`'s flags (about a minute; kept in torch's extension cache,
`TORCH_EXTENSIONS_DIR`, under a key of the sources, torch's headers and version and Python's, so
a new torch or rshmem rebuilds it) and needs a C++17 compiler and torch's headers, not CUDA's
nor ninja. Without a compiler, or with a torch whose
SymmetricMemory headers do not match, importing this module raises `UnsupportedError` saying so;
the rest of rshmem does not depend on it.

Which allocator: on the cuda backend `symm_mem.empty(..., device="cuda")` allocates from rshmem's
GPU heap; on the host backend `device="cpu"` allocates from the host heap (torch's other backends
are CUDA-only), so the host parts run without a GPU.

Differences from torch's CUDA backend (docs/pytorch-backend.md):

- `symm_mem.empty` is a collective over every PE (rshmem's symmetric calloc, as with torch's
  NVSHMEM backend). A dead tensor's memory returns to the heap at `release()`, a collective,
  since torch frees a tensor whenever it dies on one PE.
- barrier / put_signal / wait_signal count on 64-bit rshmem signal words of the signal pad
  (word `channel * world_size + peer`), not torch's 32-bit flags; the pad is zero after every
  completed synchronization, as torch requires. On GPUs they are queued on the current stream
  and wait in a one-thread kernel (no timeout but `RSHMEM_DEBUG_WAIT_TIMEOUT_MS`; a peer that leaves
  the job ends the wait with an error); on the host backend `timeout_ms` holds.
- No multicast (`has_multicast_support()` is False).

torch's Triton NVSHMEM extension (`@requires_nvshmem` kernels calling `nvshmem.put`, `signal_op`,
`barrier_all`, ...) runs on RSHMEM too: while the current device's backend is RSHMEM, those
kernels link rshmem's stand-in for NVSHMEM's device library (`rshmem._nvshmem_triton`).
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import torch
import torch.utils.cpp_extension

from . import _native
from ._native import UnsupportedError

_SRC = Path(__file__).resolve().parent / "csrc"
_NAME = "rshmem_symm_mem"
_state: dict = {}


def _compiler() -> str | None:
    return shutil.which(os.environ.get("CXX", "c++"))


def _command(cxx: str, out: Path) -> list:
    """The compiler call: torch's `cpp_extension` flags (headers, ABI, libraries), run here
    directly because `cpp_extension.load` needs ninja, which torch does not install."""
    from torch.utils import cpp_extension

    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    libdir = cpp_extension.library_paths()[0]
    includes = [*cpp_extension.include_paths(), sysconfig.get_paths()["include"], str(_SRC)]
    return [cxx, "-O2", "-std=c++17", "-shared", "-fPIC", "-fvisibility=hidden", f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
            f"-DTORCH_EXTENSION_NAME={_NAME}", "-DTORCH_API_INCLUDE_EXTENSION_H",
            *(f"-I{d}" for d in includes), str(_SRC / "symm_mem.cpp"), "-o", str(out),
            f"-L{libdir}", "-lc10", "-ltorch", "-ltorch_cpu", "-ltorch_python", f"-Wl,-rpath,{libdir}"]


def _cache_dir() -> Path:
    base = os.environ.get("TORCH_EXTENSIONS_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "torch_extensions")
    return Path(base)


def load(verbose: bool = False):
    """The compiled C++ layer: built on the first call into torch's extension cache, under a key of
    the sources, torch's version and the Python version, so a new torch or rshmem rebuilds it."""
    if "ext" in _state:
        return _state["ext"]
    header = Path(torch.utils.cpp_extension.include_paths()[0]) / "torch/csrc/distributed/c10d/symm_mem/SymmetricMemory.hpp"
    if not header.is_file():
        raise UnsupportedError(
            f"rshmem.torch_symm_mem: torch {torch.__version__} has no SymmetricMemory headers ({header}); the "
            "RSHMEM backend needs torch >= 2.8 with distributed support")
    key = hashlib.sha256()
    for part in ((_SRC / "symm_mem.cpp").read_bytes(), (_SRC / "rshmem.h").read_bytes(), header.read_bytes(),
                 torch.__version__.encode(), sys.version.encode()):
        key.update(part)
    out = _cache_dir() / f"{_NAME}_{key.hexdigest()[:16]}" / f"{_NAME}.so"
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the PEs of a host build it once, not once each
        if not out.is_file():
            _build(out, verbose)
    spec = importlib.util.spec_from_file_location(_NAME, out)
    ext = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ext)
    _state["ext"] = ext
    return ext


def _build(out: Path, verbose: bool) -> None:
    cxx = _compiler()
    if cxx is None:
        raise UnsupportedError(
            "rshmem.torch_symm_mem: no C++ compiler found (CXX, else c++ on PATH); the RSHMEM SymmetricMemory "
            "backend is compiled against the installed torch on first import (apt install g++)")
    tmp = out.with_suffix(f".{os.getpid()}.tmp")
    cmd = _command(cxx, tmp)
    if verbose:
        print(" ".join(cmd))
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise UnsupportedError(
            f"rshmem.torch_symm_mem: compiling the RSHMEM SymmetricMemory backend against torch {torch.__version__} "
            f"failed (a torch whose SymmetricMemory interface differs from the one this layer implements, or "
            f"a broken compiler); {cxx} said:\n{done.stderr[-3000:]}")
    os.replace(tmp, out)  # atomic: a reader never sees half a library


def register() -> None:
    """Registers "RSHMEM" for this PE's device kind (cuda or cpu, by rshmem's backend; before
    `rshmem.init`, the device it will use). Done on import; again only after a backend change."""
    ext = load()
    if _native.is_initialized():
        device = "cpu" if _native.device_ordinal() is None else "cuda"
    else:
        from . import torch as rtorch

        device = rtorch.device().type
    ext.register_backend(_native.__file__, device)
    _state["device"] = device
    if device == "cuda":
        from . import _nvshmem_triton

        _nvshmem_triton.install()


def release() -> int:
    """Collective over every PE: hands the memory of symmetric tensors that died back to rshmem's
    heap (rshmem's free is a collective; torch frees a tensor whenever it dies on one PE).
    Every PE must have dropped the same tensors, else rshmem raises a mismatch on every PE.
    Returns how many allocations were freed. `rshmem.finalize` frees everything anyway."""
    return load().release()


register()

__all__ = ["load", "register", "release"]
