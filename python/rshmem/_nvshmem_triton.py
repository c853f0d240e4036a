"""torch's Triton NVSHMEM extension (`torch.distributed._symmetric_memory._nvshmem_triton`) on the
RSHMEM SymmetricMemory backend.

torch's `@requires_nvshmem` kernels call NVSHMEM's device names (`nvshmem.put`, `signal_op`,
`barrier_all`, ... lower to `nvshmemx_putmem_block`, `nvshmemx_signal_op`, ...), link NVSHMEM's
`libnvshmem_device.bc` and, after compiling, initialize NVSHMEM's device state in the module.
On RSHMEM memory none of that works: NVSHMEM is not running. `install()` (from
`rshmem.torch_symm_mem`) makes those kernels run on rshmem instead, decided at each launch by the
backend of the current CUDA device (`symm_mem.get_backend`):

- RSHMEM: the kernel links `rshmem/triton/lib/libnvshmem_device.bc` (triton-lib/build.py: NVSHMEM's
  names with torch's types over rshmem's library; see `triton-lib/src/torch_nvshmem.cu` for what
  each name does), rshmem's module-load hook writes rshmem's device state into it, and torch's
  NVSHMEM initialization is skipped. Triton's cache key holds the library, so a kernel compiled
  for one backend is never reused for the other.
- any other backend: torch's own path, unchanged.

Where NVSHMEM's bitcode is not installed, `requires_nvshmem` no longer fails at decoration
(torch's finder raises); RSHMEM's bitcode stands in, and a launch on another backend then fails
in torch's NVSHMEM initialization as it would have.

This patches three names of a private torch module (`NvshmemLibFinder.find_device_library`,
`_nvshmem_init_hook`, `GridCallableWithExtern.run`), as written in torch 2.9-2.11; a torch without
them is left alone.
"""
from __future__ import annotations

from pathlib import Path

import torch

BITCODE = Path(__file__).resolve().parent / "triton" / "lib" / "libnvshmem_device.bc"
_state: dict = {}


def bitcode() -> str:
    if not BITCODE.is_file():
        from ._native import UnsupportedError

        raise UnsupportedError(f"rshmem: {BITCODE} is missing, so torch's Triton NVSHMEM kernels cannot run on the "
                               "RSHMEM backend; reinstall rshmem (triton-lib/build.py makes it)")
    return str(BITCODE)


def on_rshmem() -> bool:
    """Whether torch's symm_mem backend of the current CUDA device is RSHMEM."""
    if not torch.cuda.is_available():
        return False
    from torch.distributed import _symmetric_memory as symm_mem

    return symm_mem.get_backend(torch.device("cuda", torch.cuda.current_device())) == "RSHMEM"


def install() -> bool:
    """Patches torch's extension (idempotent); False where this torch has no such extension."""
    if "ext" in _state:
        return True
    try:
        from torch.distributed._symmetric_memory import _nvshmem_triton as ext
    except ImportError:  # no Triton
        return False
    finder, hook = getattr(ext, "NvshmemLibFinder", None), getattr(ext, "_nvshmem_init_hook", None)
    grid = getattr(ext, "GridCallableWithExtern", None)
    if finder is None or hook is None or grid is None:
        return False
    find, run = finder.find_device_library, grid.run

    def find_device_library(cls):
        try:
            return find()
        except RuntimeError:
            return bitcode()

    def init_hook(*args, **kwargs):
        # On RSHMEM the module got rshmem's state when it loaded (rshmem.triton's load hook).
        if not on_rshmem():
            return hook(*args, **kwargs)

    def launch(self, *args, **kwargs):
        if not on_rshmem():
            return run(self, *args, **kwargs)
        from .triton import install_load_hook

        install_load_hook()
        return self.jit_func.run(*args, **kwargs, extern_libs={"libnvshmem_device": bitcode()})

    finder.find_device_library = classmethod(find_device_library)
    ext._nvshmem_init_hook = init_hook  # what later `requires_nvshmem` decorations install
    from triton import knobs

    if knobs.runtime.jit_post_compile_hook is hook:  # a kernel decorated before this import
        knobs.runtime.jit_post_compile_hook = init_hook
    grid.run = launch
    _state["ext"] = ext
    return True
