"""Start-up cost: the time from an initialised torch.distributed job (CUDA context already made)
to the first usable symmetric buffer, per library, in a fresh pair of processes each time.

- rshmem: `rshmem.init(group)` + the first `create_symmetric_tensor` (1 MiB).
- NVSHMEM: torch's NVSHMEM backend initialises NVSHMEM lazily, inside the first `symm_mem.empty`;
  timed: `set_backend("NVSHMEM")` + first `symm_mem.empty` (1 MiB) + `rendezvous`.
- NCCL (a reference): the first `all_reduce` of 4 bytes, which creates the communicator.

Each PE times itself; the value is the slowest PE's, in seconds.
"""
from __future__ import annotations

import time

from benchmarks.harness.common import MiB, Ctx

FIRST_BYTES = 1 * MiB


def _ready(ctx: Ctx) -> None:
    """CUDA context made and every PE here before the clock starts."""
    if ctx.cuda:
        import torch

        torch.empty(1, device=ctx.device)
        torch.cuda.synchronize()
    ctx.barrier()


def _record(ctx: Ctx, name: str, impl: str, op: str, parts: dict) -> None:
    seen = ctx.gather(parts)
    total = [sum(p.values()) for p in seen]
    slowest = max(range(ctx.world), key=lambda r: total[r])
    with ctx.rec.series("init", name, impl, x="op", y="s", better="lower", op=op) as s:
        s.point(op=op, s=total[slowest], parts_s=seen[slowest], per_rank_s=total)


def rshmem(ctx: Ctx) -> None:
    import torch

    import rshmem as lib
    import rshmem.torch as rtorch

    _ready(ctx)
    t0 = time.perf_counter()
    lib.init(ctx.cpu_group, backend=ctx.backend, device=ctx.device.index if ctx.cuda else None)
    t1 = time.perf_counter()
    rtorch.create_symmetric_tensor((FIRST_BYTES,), torch.uint8)
    ctx.sync()
    t2 = time.perf_counter()
    _record(ctx, "rshmem.init + first create_symmetric_tensor (1 MiB)", "rshmem", "startup",
            {"init": t1 - t0, "first_alloc": t2 - t1})
    ctx.barrier()
    lib.finalize()


def nvshmem(ctx: Ctx) -> None:
    import torch.distributed as dist
    import torch.distributed._symmetric_memory as symm_mem

    if not symm_mem.is_nvshmem_available():
        raise RuntimeError("torch.distributed._symmetric_memory.is_nvshmem_available() is False")
    _ready(ctx)
    t0 = time.perf_counter()
    symm_mem.set_backend("NVSHMEM")
    import torch

    t = symm_mem.empty(FIRST_BYTES, dtype=torch.uint8, device=ctx.device)
    t1 = time.perf_counter()
    symm_mem.rendezvous(t, dist.group.WORLD.group_name)
    ctx.sync()
    t2 = time.perf_counter()
    _record(ctx, "torch NVSHMEM backend: first symm_mem.empty (1 MiB) + rendezvous", "nvshmem",
            "startup", {"init_and_alloc": t1 - t0, "rendezvous": t2 - t1})
    ctx.barrier()


def nccl(ctx: Ctx) -> None:
    import torch
    import torch.distributed as dist

    _ready(ctx)
    x = torch.ones(1, dtype=torch.float32, device=ctx.device)
    t0 = time.perf_counter()
    dist.all_reduce(x)
    torch.cuda.synchronize()
    t1 = time.perf_counter()
    _record(ctx, "NCCL: first all_reduce (communicator creation)", "nccl", "startup",
            {"first_all_reduce": t1 - t0})
    ctx.barrier()
