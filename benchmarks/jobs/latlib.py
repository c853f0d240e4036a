"""The latency procedures shared by the rshmem and NVSHMEM jobs.

In-kernel latencies loop many iterations inside one kernel and read the GPU's %globaltimer
around the timed iterations (an untimed first iteration absorbs the skew between the two
GPUs' launches): a ping-pong reports half a round trip, a barrier loop the time per barrier.
Each kernel runs `rounds` times after one warm-up launch; the number is the median over rounds.
On-stream latencies time many back-to-back host calls with CUDA events (per call).
"""
from __future__ import annotations

import statistics

from benchmarks.harness.common import Ctx, summarize

PING_BYTES = 8


def iters(ctx: Ctx) -> int:
    # On a shared GPU each half round trip waits for the GPU to switch processes (milliseconds):
    # a few iterations measure it.
    if ctx.shared_gpu:
        return 20
    return 2000 if ctx.quick else 10000


def rounds(ctx: Ctx) -> int:
    return 3 if ctx.quick else 7


def in_kernel(ctx: Ctx, name: str, impl: str, op: str, launch, divide: float, pair_only: bool) -> None:
    """A series of one point. `launch(r)` runs launch number r (0 = warm-up) to completion and
    returns the kernel's nanoseconds; the value is ns / `divide` in microseconds. With
    `pair_only`, only PEs 0 and 1 launch (a ping-pong); the others wait."""
    with ctx.rec.series("latency", name, impl, x="op", y="median_us", better="lower", op=op) as s:
        vals = []
        for r in range(rounds(ctx) + 1):
            ctx.barrier()
            if pair_only and ctx.rank > 1:
                continue
            ns = launch(r)
            if r:
                vals.append(ns / divide / 1e3)
        seen = ctx.gather(vals)
        point = summarize(seen[0])
        point.update(op=op, per_rank_median_us=[statistics.median(v) if v else None for v in seen])
        s.point(**point)


def on_stream(ctx: Ctx, name: str, impl: str, op: str, call, divide: float = 1.0) -> None:
    """A series of one point: per-call microseconds of `call()` run back to back by every PE
    (it must be collective or paired so every PE makes the same calls), divided by `divide`."""
    with ctx.rec.series("latency", name, impl, x="op", y="median_us", better="lower", op=op) as s:
        calls = 10 if ctx.shared_gpu else 50 if ctx.quick else 200
        ctx.barrier()
        vals = [v / divide for v in ctx.timer().batched(call, calls, rounds(ctx), warmup=10)]
        ctx.sync()
        ctx.barrier()
        seen = ctx.gather(vals)
        point = summarize(seen[0])
        point.update(op=op, calls_per_round=calls, per_rank_median_us=[statistics.median(v) for v in seen])
        s.point(**point)


class Counter:
    """Signal values that only grow, so no signal word is ever reset between launches."""

    def __init__(self):
        self.value = 0

    def take(self, n: int) -> int:
        """Reserves the next `n` values; returns the one before the first."""
        base = self.value
        self.value += n
        return base


OPS = {
    "pingpong_signal": "put-with-signal ping-pong 8 B, in kernel (half round trip)",
    "pingpong_p": "int_p + wait ping-pong, in kernel (half round trip)",
    "barrier_block": "barrier_all_block, in kernel (per barrier)",
    "barrier_stream": "barrier_all_on_stream (per call)",
    "pingpong_stream": "put-with-signal ping-pong 8 B on stream (half round trip)",
}
