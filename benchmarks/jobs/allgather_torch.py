"""All-gather with PyTorch symmetric memory (CUDA backend). torch 2.11 has two all-gather ops:
`symm_mem::_low_contention_all_gather` (copy-engine pull between two barriers, from a symmetric
input) and `symm_mem::multimem_all_gather_out` (NVLink multicast, which these benchmarks switch
off: not run). The op allocates its output on every call, as callers see it."""
from __future__ import annotations

from benchmarks.jobs import aglib
from benchmarks.jobs import symm
from benchmarks.harness.common import Ctx


def run(ctx: Ctx) -> None:
    import torch

    group = symm.start(ctx, "CUDA")
    ctx.rec.note("symm_mem::multimem_all_gather_out needs NVLink multicast, which is switched off: not run")
    bench = aglib.AgBench(ctx, None, None, 0)
    op = torch.ops.symm_mem._low_contention_all_gather
    wait = torch.ops._c10d_functional.wait_tensor
    keep = {}

    def go_for(n):
        # One symmetric input per size: the op's rendezvous looks the tensor up as an allocation.
        keep.clear()
        torch.cuda.synchronize()
        inp, _ = symm.empty(ctx, n, group)
        inp.fill_(aglib.fill_value(ctx.rank))
        torch.cuda.synchronize()
        ctx.barrier()
        last = []

        def go():
            res = wait(op(inp, group))
            last[:] = [res]

        keep["inp"] = inp
        return go, lambda: last[0]

    aglib.run_sizes(ctx, bench, "torch", "torch symm_mem _low_contention_all_gather (copy engine pull)", go_for,
                    op="copy engine pull")
    ctx.sync()
    ctx.barrier()
