"""PyTorch symmetric memory setup shared by the NVSHMEM and torch baselines.

torch fixes the symmetric-memory backend per process at the first allocation, which is one
reason each baseline runs in its own job. `start(ctx, backend)` selects the backend, makes sure
the CUDA context exists (torch's own NVSHMEM tests note that NVSHMEM allocation needs it) and
returns the group name that `rendezvous` takes.
"""
from __future__ import annotations

from benchmarks.harness.common import Ctx


def start(ctx: Ctx, backend: str) -> str:
    """Selects torch's symmetric-memory `backend` ("NVSHMEM" or "CUDA"); returns the group name.
    Raises RuntimeError when NVSHMEM is asked for and torch says it is not available."""
    import torch
    import torch.distributed as dist
    import torch.distributed._symmetric_memory as symm_mem

    if backend == "NVSHMEM" and not symm_mem.is_nvshmem_available():
        raise RuntimeError("torch.distributed._symmetric_memory.is_nvshmem_available() is False: this torch "
                           "build or machine has no NVSHMEM (pip package nvidia-nvshmem-cu13)")
    torch.empty(1, device=ctx.device)
    # torch registers its default CUDA-tensor backend directly, and only the others as
    # selectable: `set_backend("CUDA")` on a process whose default is already "CUDA" raises
    # "SymmetricMemory does not find allocation backend CUDA" (torch 2.11). So select only when
    # another backend is in place.
    if symm_mem.get_backend(ctx.device) != backend:
        symm_mem.set_backend(backend)
    got = symm_mem.get_backend(ctx.device)
    if got != backend:
        raise RuntimeError(f"torch symmetric memory uses backend {got!r} after asking for {backend!r}")
    ctx.rec.note(f"torch symmetric memory backend {backend}")
    return dist.group.WORLD.group_name


def empty(ctx: Ctx, nbytes: int, group_name: str, dtype=None):
    """A symmetric tensor of `nbytes` bytes (uint8, or `dtype` elements) and its handle."""
    import torch
    import torch.distributed._symmetric_memory as symm_mem

    dtype = dtype or torch.uint8
    t = symm_mem.empty(nbytes // dtype.itemsize, dtype=dtype, device=ctx.device)
    return t, symm_mem.rendezvous(t, group_name)
