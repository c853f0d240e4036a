"""Latency of PyTorch symmetric memory's CUDA backend barrier: `SymmetricMemory.barrier()`, a
kernel that signals every peer through the signal pads, issued on the current stream: the torch
counterpart of barrier_all_on_stream."""
from __future__ import annotations

from benchmarks.jobs import latlib
from benchmarks.jobs import symm
from benchmarks.harness.common import Ctx
from benchmarks.jobs.latlib import OPS


def run(ctx: Ctx) -> None:
    group = symm.start(ctx, "CUDA")
    _, hdl = symm.empty(ctx, 4096, group)
    ctx.sync()
    ctx.barrier()
    latlib.on_stream(ctx, "torch symm_mem SymmetricMemory.barrier()", "torch", OPS["barrier_stream"],
                     lambda: hdl.barrier(channel=0))
    ctx.sync()
    ctx.barrier()
