"""The all-gather procedure shared by the rshmem, NCCL, NVSHMEM and torch jobs.

Sizes are bytes per rank (each rank contributes `n` bytes; the output holds world * n). Every
rank runs the collective back to back; a measurement is the slowest rank's median. Up to
`EAGER_BATCH_MAX` bytes an event pair spans `EAGER_CALLS` eager calls (the time per call of a
program issuing them back to back, as TARGETS.md measures NCCL); above it, one call. A series
with `launch="graph"` replays a CUDA graph of `GRAPH_CALLS` captured calls per event pair. Bus
bandwidth (what nccl-tests reports, and what TARGETS.md compares) is (world - 1) * n / time;
algorithm bandwidth is world * n / time. Rank r's input is filled with the byte (37 r + 11) mod
251; after the timed calls every rank checks each block of its output, so a wrong result shows
as `verified: false`.
"""
from __future__ import annotations

from benchmarks.harness.common import GiB, KiB, MiB, Ctx, gbps, pow2_sizes, reps_for, summarize


EAGER_BATCH_MAX = 1 * MiB
EAGER_CALLS = 20
GRAPH_CALLS = 20
GRAPH_MAX = 1 * MiB  # CUDA-graph series are measured up to this many bytes per rank


def ag_sizes(ctx: Ctx) -> list[int]:
    """Bytes per rank: 1 KiB .. 1 GiB (every power of 2; quick: a few), smaller on the host."""
    if not ctx.cuda:
        return [KiB, 64 * KiB, MiB] if ctx.quick else pow2_sizes(KiB, 16 * MiB, 4)
    if ctx.quick:
        return [KiB, 4 * KiB, 16 * KiB, 64 * KiB, 256 * KiB, MiB, 16 * MiB, 64 * MiB, 256 * MiB]
    return pow2_sizes(KiB, GiB)


def fill_value(rank: int) -> int:
    return (37 * rank + 11) % 251


class AgBench:
    """Measures an all-gather into `out` (world * max_bytes bytes) from `inp` (max_bytes)."""

    def __init__(self, ctx: Ctx, inp, out, max_bytes: int):
        self.ctx, self.inp, self.out = ctx, inp, out
        if inp is not None:
            inp[:max_bytes].fill_(fill_value(ctx.rank))
        ctx.sync()
        ctx.barrier()

    def check(self, out, nbytes: int) -> bool:
        """Whether block p of `out` holds rank p's fill value, for every rank p."""
        import torch

        blocks = out[: self.ctx.world * nbytes].view(self.ctx.world, nbytes)
        want = torch.tensor([fill_value(p) for p in range(self.ctx.world)], dtype=torch.uint8,
                            device=blocks.device).view(-1, 1)
        return bool(torch.equal(blocks, want.expand_as(blocks)))

    def measure(self, launch, nbytes: int, result=None, per_launch: int = 1) -> dict:
        """Times `launch()` on every rank; `result()` returns the output to check (default `out`).
        `per_launch`: collectives that one `launch()` runs (a replayed graph); the time is per
        collective."""
        ctx = self.ctx
        warmup, reps = reps_for(nbytes, ctx.quick)
        if self.out is not None:
            self.out[: ctx.world * nbytes].zero_()
        ctx.sync()
        ctx.barrier()
        if per_launch > 1:
            times = [t / per_launch for t in ctx.timer().each(launch, reps, warmup)]
            timing = f"CUDA graph of {per_launch} calls per event pair"
        elif nbytes <= EAGER_BATCH_MAX:
            times = ctx.timer().batched(launch, EAGER_CALLS, reps, warmup)
            timing = f"{EAGER_CALLS} eager calls per event pair"
        else:
            times = ctx.timer().each(launch, reps, warmup)
            timing = "1 call per event pair"
        ctx.sync()
        ctx.barrier()
        ok = self.check(result() if result is not None else self.out, nbytes)
        seen = ctx.gather((times, ok))
        per_rank = [summarize(t) for t, _ in seen]
        slowest = max(range(ctx.world), key=lambda r: per_rank[r]["median_us"])
        point = dict(per_rank[slowest])
        t = point["median_us"]
        point.update(bytes=nbytes, slowest_rank=slowest, per_rank_median_us=[p["median_us"] for p in per_rank],
                     busbw_gbps=gbps((ctx.world - 1) * nbytes, t), algbw_gbps=gbps(ctx.world * nbytes, t),
                     verified=all(v for _, v in seen), timing=timing)
        return point


def note_host_cost(ctx: Ctx, what: str, launch, nbytes: int, calls: int = 2000) -> None:
    """Notes how long the CPU takes to issue one eager `launch()` (back to back, no sync) beside
    the wall time per call once the GPU has finished them: equal numbers mean the calls are
    limited by the CPU, not by the GPU."""
    import time

    for _ in range(20):
        launch()
    ctx.sync()
    ctx.barrier()
    t0 = time.perf_counter()
    for _ in range(calls):
        launch()
    t1 = time.perf_counter()
    ctx.sync()
    t2 = time.perf_counter()
    per = ctx.gather(((t1 - t0) / calls * 1e6, (t2 - t0) / calls * 1e6))
    host, wall = max(p[0] for p in per), max(p[1] for p in per)
    ctx.rec.note(f"{what}, {nbytes} B per rank, {calls} eager calls: the CPU issues one in {host:.1f} us; "
                 f"{wall:.1f} us per call until the GPU is done (slowest rank)")


def graphed(ctx: Ctx, call, calls: int = GRAPH_CALLS):
    """`calls` back-to-back `call()`s captured in one CUDA graph; returns its replay. `call` runs
    once eagerly first (on every rank, a collective), so lazy set-up is not captured."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        call()
    torch.cuda.current_stream().wait_stream(side)
    ctx.sync()
    ctx.barrier()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        for _ in range(calls):
            call()
    ctx.sync()
    ctx.barrier()
    return graph.replay


def run_sizes(ctx: Ctx, bench: AgBench, impl: str, name: str, launch_for, sizes=None, op: str = "",
              **params) -> None:
    """One series over sizes; each point has the bus bandwidth and the time per call (the report
    shows both). `launch_for(n)` returns `launch` or `(launch, result)`: one eager collective."""
    sizes = sizes or ag_sizes(ctx)
    with ctx.rec.series("allgather", name, impl, x="bytes", y="busbw_gbps", better="higher", kind="ag_bw", op=op,
                        launch="eager", **params) as s:
        for n in sizes:
            got = launch_for(n)
            launch, result = got if isinstance(got, tuple) else (got, None)
            s.point(**bench.measure(launch, n, result))


def run_graph_sizes(ctx: Ctx, bench: AgBench, impl: str, name: str, call_for, op: str = "", **params) -> None:
    """The series of `call_for(n)` (one collective) captured `GRAPH_CALLS` times in a CUDA graph,
    up to `GRAPH_MAX` bytes per rank: the time without the CPU's launch cost."""
    if not ctx.cuda:
        return
    sizes = [n for n in ag_sizes(ctx) if n <= GRAPH_MAX]
    with ctx.rec.series("allgather", f"{name}, CUDA graph of {GRAPH_CALLS} calls", impl, x="bytes",
                        y="busbw_gbps", better="higher", kind="ag_bw", op=f"{op} (graph)", launch="graph",
                        **params) as s:
        for n in sizes:
            replay = graphed(ctx, call_for(n))
            s.point(**bench.measure(replay, n, per_launch=GRAPH_CALLS))
