"""Jobs that exercise the harness itself (suite "selftest", never part of "all"): a normal
series, a series failing on one rank only, a PE that dies, and a PE that hangs. The smoke test
(tests/bench/test_benchmarks_smoke.py) runs them on the host backend and checks that each outcome is
recorded and that the run goes on."""
from __future__ import annotations

import os
import time

from benchmarks.harness.common import Ctx


def ok(ctx: Ctx) -> None:
    """One series with two points, measured with the job's timer."""
    with ctx.rec.series("selftest", "sleep 1 ms", "rshmem", x="bytes", y="median_us", better="lower") as s:
        for n in (1, 2):
            times = ctx.timer().each(lambda: time.sleep(0.001), reps=5, warmup=1)
            s.point(bytes=n, median_us=sorted(times)[2], verified=True)


def series_error(ctx: Ctx) -> None:
    """The first series fails on rank 1 only; the second one must still be measured."""
    with ctx.rec.series("selftest", "fails on rank 1", "rshmem", x="bytes", y="median_us", better="lower") as s:
        if ctx.rank == 1:
            raise ValueError("deliberate failure on rank 1")
        s.point(bytes=1, median_us=1.0)
    with ctx.rec.series("selftest", "after the failure", "rshmem", x="bytes", y="median_us", better="lower") as s:
        ctx.barrier()
        s.point(bytes=1, median_us=2.0)


def crash(ctx: Ctx) -> None:
    """Rank 1 dies in the middle of a series; rank 0 is left waiting in a barrier."""
    with ctx.rec.series("selftest", "peer dies", "rshmem", x="bytes", y="median_us", better="lower"):
        if ctx.rank == 1:
            os._exit(3)
        ctx.barrier()


def hang(ctx: Ctx) -> None:
    """Rank 0 never finishes its series (the launcher must kill the job at its limit)."""
    with ctx.rec.series("selftest", "never ends", "rshmem", x="bytes", y="median_us", better="lower"):
        if ctx.rank == 0:
            time.sleep(3600)
