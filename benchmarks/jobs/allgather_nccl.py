"""All-gather with NCCL: `torch.distributed.all_gather_into_tensor` (eager, on the default
process group's NCCL backend; the first call, which creates the communicator, is warm-up), and
the same captured in a CUDA graph."""
from __future__ import annotations

from benchmarks.jobs import aglib
from benchmarks.harness.common import KiB, Ctx


def run(ctx: Ctx) -> None:
    import torch
    import torch.distributed as dist

    ctx.rec.note(f"NCCL {'.'.join(str(v) for v in torch.cuda.nccl.version())}")
    top = max(aglib.ag_sizes(ctx))
    inp = torch.empty(top, dtype=torch.uint8, device=ctx.device)
    out = torch.empty(ctx.world * top, dtype=torch.uint8, device=ctx.device)
    bench = aglib.AgBench(ctx, inp, out, top)

    def go_for(n):
        o, i = out[: ctx.world * n], inp[:n]
        return lambda: dist.all_gather_into_tensor(o, i)

    aglib.run_sizes(ctx, bench, "nccl", "NCCL all_gather_into_tensor", go_for, op="NCCL")
    aglib.run_graph_sizes(ctx, bench, "nccl", "NCCL all_gather_into_tensor", go_for, op="NCCL")
    aglib.note_host_cost(ctx, "NCCL all_gather_into_tensor", go_for(KiB), KiB)
    ctx.sync()
    ctx.barrier()
