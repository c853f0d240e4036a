"""All-gather with NVSHMEM 3.4.5: the host API's `nvshmemx_fcollectmem_on_stream` on
NVSHMEM_TEAM_WORLD (ctypes on the library torch's NVSHMEM backend loaded), eager and captured in a
CUDA graph."""
from __future__ import annotations

from benchmarks.jobs import aglib
from benchmarks.jobs import symm
from benchmarks.harness.common import Ctx


def run(ctx: Ctx) -> None:
    group = symm.start(ctx, "NVSHMEM")
    top = max(aglib.ag_sizes(ctx))
    inp, _ = symm.empty(ctx, top, group)
    out, _ = symm.empty(ctx, ctx.world * top, group)
    bench = aglib.AgBench(ctx, inp, out, top)
    from benchmarks.jobs.nvshmem_host import HostApi

    api = []  # bound inside the series, so a missing library is that series' error

    def go_for(n):
        if not api:
            api.append(HostApi())
        o, i = out[: ctx.world * n], inp[:n]
        return lambda: api[0].fcollectmem_on_stream(o, i)

    aglib.run_sizes(ctx, bench, "nvshmem", "nvshmemx_fcollectmem_on_stream", go_for, op="library fcollect")
    aglib.run_graph_sizes(ctx, bench, "nvshmem", "nvshmemx_fcollectmem_on_stream", go_for, op="library fcollect")
    ctx.sync()
    ctx.barrier()
