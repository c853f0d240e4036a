"""What the fused-ops jobs share (suite "fused"): the shapes, the data, the timing, the series.

Shapes (bf16; W = the PE count; the issue's, 70B-class MLP and attention at 2-way tensor
parallelism):
- AllGather+GEMM `(M, K, N)`: A `[M, K]` gathered from `[M / W, K]` shards, B `[K, N]` (this PE's
  columns), C `[M, N]`; M in {4096, 8192}, K = 8192, N in {28672, 5120}.
- GEMM+ReduceScatter `(M, K, N)`: A `[M, K / W]`, B `[K / W, N]`, C_shard `[M / W, N]`;
  M = N = 8192, K in {28672, 8192}.
- AllReduce: 1 KiB to 64 MiB (every power of 4; quick: a few).

A point's `median_us` is the slowest rank's median of `reps` timed calls after warm-up (CUDA
events; one call per event pair for the GEMMs, `EAGER_CALLS` eager calls per pair for small
all-reduces). "GEMM alone" points are measured by PE 0 alone while the others wait, so that on
a GPU shared by the PEs they are single-GPU numbers (on 2 GPUs it changes nothing). Every series
checks its result once against torch (`verified`).

When the PEs share one GPU (`shared_gpu` in the points), only the GEMM-alone figures mean
anything for speed: the fused ops' kernels of the PEs time-slice the GPU.
"""
from __future__ import annotations

from benchmarks.harness.common import KiB, MiB, Ctx, gbps, pow2_sizes, summarize

AG_SHAPES = [(4096, 8192, 28672), (4096, 8192, 5120), (8192, 8192, 28672), (8192, 8192, 5120)]
AG_QUICK = [(4096, 8192, 5120), (8192, 8192, 28672)]
RS_SHAPES = [(8192, 28672, 8192), (8192, 8192, 8192)]
RS_QUICK = [(8192, 8192, 8192)]
HOST_AG = [(64, 64, 96)]  # the host backend: the harness only (the unfused host implementation)
HOST_RS = [(64, 128, 96)]
EAGER_CALLS = 20
EAGER_MAX = 1 * MiB


def ag_shapes(ctx: Ctx) -> list:
    if not ctx.cuda:
        return HOST_AG
    return AG_QUICK if ctx.quick else AG_SHAPES


def rs_shapes(ctx: Ctx) -> list:
    if not ctx.cuda:
        return HOST_RS
    return RS_QUICK if ctx.quick else RS_SHAPES


def ar_sizes(ctx: Ctx) -> list:
    if not ctx.cuda:
        return [KiB, 64 * KiB]
    if ctx.quick:
        return [KiB, 64 * KiB, MiB, 16 * MiB]
    return pow2_sizes(KiB, 64 * MiB, 4)


def shape_name(shape) -> str:
    return "x".join(str(d) for d in shape)


def shared_gpu(ctx: Ctx) -> bool:
    """Whether the PEs share GPUs: the harness's verdict where it gives one (`ctx.shared_gpu`),
    else fewer visible GPUs than PEs."""
    import torch

    given = getattr(ctx, "shared_gpu", None)
    if given is not None:
        return bool(given)
    return ctx.cuda and torch.cuda.device_count() < ctx.world


def device(ctx: Ctx):
    """This PE's device (the one place the fused jobs ask; a GPU shared by the PEs included)."""
    import torch

    if not ctx.cuda:
        return torch.device("cpu")
    if shared_gpu(ctx):
        return torch.device("cuda", ctx.local_rank % max(1, torch.cuda.device_count()))
    return ctx.device


def rand(ctx: Ctx, shape, seed: int, scale: float = 1.0):
    """Random bf16 data made on this PE's device, the same on every PE for the same seed."""
    import torch

    dev = device(ctx)
    g = torch.Generator(device=dev).manual_seed(seed)
    return (torch.randn(shape, generator=g, device=dev) * scale).to(torch.bfloat16)


def ag_data(ctx: Ctx, shape):
    """(A [M, K], B [K, N], this PE's shard of A)."""
    M, K, N = shape
    m = M // ctx.world
    A = rand(ctx, (M, K), 11)
    B = rand(ctx, (K, N), 12, K ** -0.5)
    return A, B, A[ctx.rank * m:(ctx.rank + 1) * m].contiguous()


def rs_data(ctx: Ctx, shape):
    """(A [M, K], B [K, N], this PE's a [M, K / W] and b [K / W, N])."""
    M, K, N = shape
    k = K // ctx.world
    A = rand(ctx, (M, K), 21)
    B = rand(ctx, (K, N), 22, K ** -0.5)
    r = ctx.rank
    return A, B, A[:, r * k:(r + 1) * k].contiguous(), B[r * k:(r + 1) * k].contiguous()


def close(got, want) -> bool:
    """bf16 results of different summation orders: within 2% of the largest value."""
    err = (got.float() - want.float()).abs().max().item()
    return err <= 2e-2 * max(want.float().abs().max().item(), 1.0)


# GEMM alone and cuBLAS are timed by PE 0 alone, in alternating rounds: their ratio is a few
# percent either way, while a GPU's clocks (power, temperature) drift by more than that between
# two series timed one after the other.
PAIR_ROUNDS, PAIR_CALLS = 8, 6


def measure_pair(ctx: Ctx, first, second) -> tuple:
    """Points of `first` and `second`, each timed by PE 0 alone in `PAIR_ROUNDS` rounds of
    `PAIR_CALLS` calls, the two taking turns (which goes first alternates too): the median of the
    round medians, with the rounds' medians."""
    rounds: tuple = ([], [])
    for i in range(PAIR_ROUNDS):
        for j in ((0, 1) if i % 2 == 0 else (1, 0)):
            fn = first if j == 0 else second
            rounds[j].append(measure(ctx, fn, alone=True, warmup=2, timed=PAIR_CALLS)["median_us"])
    out = []
    for medians in rounds:
        point = summarize(medians)
        point.update(round_medians_us=medians,
                     timing=f"PE 0 alone, {PAIR_ROUNDS} rounds of {PAIR_CALLS} calls taking turns with the other series")
        out.append(point)
    return tuple(out)


def reps(ctx: Ctx) -> tuple:
    """(warm-up calls, timed calls) of a GEMM-sized op."""
    if not ctx.cuda:
        return 1, 3
    return (2, 5) if ctx.quick else (3, 10)


def _times(ctx: Ctx, fn, calls: int, warmup: int, timed: int) -> list:
    return ctx.timer().batched(fn, calls, timed, warmup)


def measure(ctx: Ctx, fn, *, calls: int = 1, alone: bool = False, warmup=None, timed=None) -> dict:
    """Times `fn` on every rank (or, with `alone`, on PE 0 while the others wait) and returns
    the slowest rank's summary as a point (median_us, p10_us, ...)."""
    w, t = reps(ctx)
    warmup, timed = warmup if warmup is not None else w, timed if timed is not None else t
    ctx.sync()
    ctx.barrier()
    mine = None
    if not alone or ctx.rank == 0:
        mine = _times(ctx, fn, calls, warmup, timed)
    ctx.sync()
    seen = [s for s in ctx.gather(mine) if s]
    per = [summarize(s) for s in seen]
    slowest = max(range(len(per)), key=lambda i: per[i]["median_us"])
    point = dict(per[slowest])
    point["per_rank_median_us"] = [p["median_us"] for p in per]
    point["timing"] = ("PE 0 alone" if alone else "every PE") + (f", {calls} calls per event pair" if calls > 1 else "")
    return point


def agree_ok(ctx: Ctx, ok: bool) -> bool:
    return all(ctx.gather(bool(ok)))


def tflops(flops: float, us: float) -> float:
    return flops / us / 1e6 if us > 0 else float("nan")


def gemm_point(ctx: Ctx, shape, flops: float, point: dict, ok: bool, **extra) -> dict:
    """A GEMM-shaped point: the shape, TFLOP/s, verification, the shared-GPU flag."""
    point.update(shape=shape_name(shape), tflops=tflops(flops, point["median_us"]), verified=agree_ok(ctx, ok),
                 shared_gpu=shared_gpu(ctx), **extra)
    return point


def ar_point(ctx: Ctx, nbytes: int, point: dict, ok: bool, **extra) -> dict:
    """An all-reduce point: bytes, bus bandwidth (2 (W-1) / W of the bytes per PE, as nccl-tests)."""
    W = ctx.world
    point.update(bytes=nbytes, busbw_gbps=gbps(2 * (W - 1) * nbytes // W, point["median_us"]),
                 verified=agree_ok(ctx, ok), shared_gpu=shared_gpu(ctx), **extra)
    return point


def ar_calls(nbytes: int) -> int:
    return EAGER_CALLS if nbytes <= EAGER_MAX else 1


def ar_inputs(ctx: Ctx, nbytes: int, dtype=None):
    """(every PE's input, the sum in PE order) for an all-reduce of `nbytes` (bf16)."""
    import torch

    dtype = dtype or torch.bfloat16
    n = nbytes // dtype.itemsize
    xs = [rand(ctx, (n,), 300 + p).to(dtype) for p in range(ctx.world)]
    acc = xs[0].float()
    for x in xs[1:]:
        acc = acc + x.float()
    return xs, acc.to(dtype)

