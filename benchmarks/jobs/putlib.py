"""The put-bandwidth procedure shared by the rshmem, NVSHMEM and torch jobs.

PE 0 writes into PE 1's symmetric buffer, one direction only (the physical reference is about
450 GB/s per direction: 18 NVLink4 links); the other PEs wait. Before each measurement every PE
zeroes its destination; after it, PE 1 compares the bytes it received with the pattern (every PE
fills its source with the same seeded random bytes), so a fast but wrong transfer shows as
`verified: false`. Bandwidth is bytes / median time, in GB/s (10^9 B/s).

Kernel puts split the transfer over CTAs: C CTAs get slices of ceil(n / C) bytes (rounded up to
16 B), but never slices under `MIN_SLICE` (small transfers use fewer CTAs): the same rule for
rshmem and NVSHMEM.
"""
from __future__ import annotations

from benchmarks.harness.common import GiB, KiB, MiB, Ctx, fmt_size, gbps, pow2_sizes, reps_for, summarize

SWEEP_BYTES = 256 * MiB
WARPS = (4, 8, 16, 32)
MIN_SLICE = 16 * KiB


def put_sizes(ctx: Ctx) -> list[int]:
    """1 KiB .. 1 GiB (every power of 2; quick: a few), smaller on the host backend."""
    if not ctx.cuda:
        return [KiB, 64 * KiB, MiB] if ctx.quick else pow2_sizes(KiB, 16 * MiB, 4)
    if ctx.quick:
        return [KiB, 4 * KiB, 64 * KiB, MiB, 16 * MiB, 64 * MiB, 256 * MiB, GiB]
    return pow2_sizes(KiB, GiB)


def sweep_ctas(ctx: Ctx) -> list[int]:
    """CTA counts of the sweep at `SWEEP_BYTES` (132 = every SM of an H100/H200)."""
    if ctx.quick:
        return [1, 2, 4, 8, 16, 32, 64, 132]
    return [1, 2, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 132]


def grid_for(nbytes: int, ctas: int) -> tuple[int, int]:
    """(slice bytes, CTAs to launch) for `ctas` CTAs sharing `nbytes`."""
    slice_ = max(-(-nbytes // ctas), min(MIN_SLICE, nbytes))
    slice_ = -(-slice_ // 16) * 16
    return slice_, -(-nbytes // slice_)


def pattern(nbytes: int, device):
    """`nbytes` seeded random bytes (the same on every PE)."""
    import torch

    g = torch.Generator(device=device)
    g.manual_seed(20261122)
    return torch.randint(0, 256, (nbytes,), dtype=torch.uint8, generator=g, device=device)


class PutBench:
    """Measures puts from PE 0 into `dst` on PE 1; `src` and `dst` are uint8 symmetric tensors of
    at least the largest size."""

    def __init__(self, ctx: Ctx, src, dst, max_bytes: int):
        self.ctx, self.src, self.dst = ctx, src, dst
        src[:max_bytes].copy_(pattern(max_bytes, src.device))
        ctx.sync()
        ctx.barrier()

    def measure(self, launch, nbytes: int, reps: tuple[int, int] | None = None) -> dict:
        """Times `launch()` (run on PE 0) for a transfer of `nbytes`; returns the point."""
        import torch

        ctx = self.ctx
        warmup, n = reps or reps_for(nbytes, ctx.quick)
        self.dst[:nbytes].zero_()
        ctx.sync()
        ctx.barrier()
        times = ctx.timer().each(launch, n, warmup) if ctx.rank == 0 else None
        ctx.sync()
        ctx.barrier()
        ok = bool(torch.equal(self.dst[:nbytes], self.src[:nbytes])) if ctx.rank == 1 else None
        seen = ctx.gather((times, ok))
        point = summarize(seen[0][0])
        point.update(bytes=nbytes, gbps=gbps(nbytes, point["median_us"]), verified=seen[1][1])
        return point


def run_sweep(ctx: Ctx, bench: PutBench, impl: str, label: str, make_launch) -> dict:
    """CTA x warps sweep at `SWEEP_BYTES`; one series per warp count. `make_launch(ctas, warps,
    nbytes)` returns the launch callable. Returns {(ctas, warps): GB/s} of verified points."""
    found = {}
    for warps in WARPS:
        with ctx.rec.series("put", f"{label} @ {fmt_size(SWEEP_BYTES)}, {warps} warps", impl, x="ctas", y="gbps",
                            better="higher", kind="cta_sweep", op=f"{label} sweep", warps=warps,
                            bytes=SWEEP_BYTES) as s:
            for ctas in sweep_ctas(ctx):
                p = bench.measure(make_launch(ctas, warps, SWEEP_BYTES), SWEEP_BYTES)
                s.point(ctas=ctas, warps=warps, **p)
                if p["verified"]:
                    found[(ctas, warps)] = p["gbps"]
    return found


def best_configs(found: dict) -> dict:
    """{"8": (ctas, warps), "best": (ctas, warps)} from a sweep: the fastest with at most 8 CTAs
    and the fastest overall (defaults: 8 CTAs / 16 warps and 32 CTAs / 16 warps when the sweep
    measured nothing)."""
    small = {k: v for k, v in found.items() if k[0] <= 8}
    return {"8": max(small, key=small.get) if small else (8, 16),
            "best": max(found, key=found.get) if found else (32, 16)}


def run_sizes(ctx: Ctx, bench: PutBench, impl: str, name: str, op: str, launch_for, **params) -> None:
    """One bandwidth-vs-size series; `launch_for(nbytes)` returns the launch callable."""
    with ctx.rec.series("put", name, impl, x="bytes", y="gbps", better="higher", kind="put_bw", op=op,
                        **params) as s:
        for n in put_sizes(ctx):
            s.point(**bench.measure(launch_for(n), n))
