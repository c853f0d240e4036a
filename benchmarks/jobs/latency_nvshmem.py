"""Latency of NVSHMEM 3.4.5 (torch's NVSHMEM backend): the same kernels as rshmem's through
torch's NVSHMEM Triton integration, and the host API's nvshmemx_barrier_all_on_stream and
nvshmemx_putmem_signal_on_stream / nvshmemx_signal_wait_until_on_stream ping-pong (ctypes)."""
from __future__ import annotations

from benchmarks.jobs import latlib
from benchmarks.jobs import symm
from benchmarks.harness.common import Ctx
from benchmarks.jobs.latlib import OPS, PING_BYTES, Counter


def run(ctx: Ctx) -> None:
    import torch

    group = symm.start(ctx, "NVSHMEM")
    from benchmarks.kernels import kernels_nvshmem as N

    bad = N.check_constants()
    if bad:
        ctx.rec.note(bad)
    k = N.launchers()
    buf, _ = symm.empty(ctx, 64, group)
    src, _ = symm.empty(ctx, 64, group)
    sig, _ = symm.empty(ctx, 8, group, torch.int64)
    flag, _ = symm.empty(ctx, 4, group, torch.int32)
    sig_stream, _ = symm.empty(ctx, 8, group, torch.int64)
    for t in (buf, src, sig, flag, sig_stream):
        t.zero_()
    ctx.sync()
    ctx.barrier()

    n = latlib.iters(ctx)
    t_out = torch.zeros(1, dtype=torch.int64, device=ctx.device)
    sig_ctr, flag_ctr = Counter(), Counter()

    def ping(_r):
        k["pingpong_signal"][(1,)](buf, src, sig, t_out, PING_BYTES, n, sig_ctr.take(n + 1), num_warps=1)
        ctx.sync()
        return int(t_out.item())

    def ping_p(_r):
        k["pingpong_p"][(1,)](flag, t_out, n, flag_ctr.take(n + 1), num_warps=1)
        ctx.sync()
        return int(t_out.item())

    def barrier(_r):
        k["barrier"][(1,)](t_out, n, num_warps=4)
        ctx.sync()
        return int(t_out.item())

    latlib.in_kernel(ctx, "nvshmemx_putmem_signal_block ping-pong 8 B", "nvshmem", OPS["pingpong_signal"], ping,
                     2 * n, True)
    latlib.in_kernel(ctx, "nvshmem_int_p + nvshmem_int_wait_until ping-pong", "nvshmem", OPS["pingpong_p"], ping_p,
                     2 * n, True)
    latlib.in_kernel(ctx, "nvshmemx_barrier_all_block loop", "nvshmem", OPS["barrier_block"], barrier, n, False)

    from benchmarks.jobs.nvshmem_host import HostApi

    api = []  # bound inside the series, so a missing library is that series' error

    def host():
        if not api:
            api.append(HostApi())
        return api[0]

    latlib.on_stream(ctx, "nvshmemx_barrier_all_on_stream", "nvshmem", OPS["barrier_stream"],
                     lambda: host().barrier_all_on_stream())

    ctr = Counter()
    d, s_, word = buf[:PING_BYTES], src[:PING_BYTES], sig_stream[0]

    def step():
        v = ctr.take(1) + 1
        if ctx.rank == 0:
            host().putmem_signal_on_stream(d, s_, word, v, int(N.SIGNAL_SET), 1)
            host().signal_wait_until_on_stream(word, int(N.CMP_GE), v)
        elif ctx.rank == 1:
            host().signal_wait_until_on_stream(word, int(N.CMP_GE), v)
            host().putmem_signal_on_stream(d, s_, word, v, int(N.SIGNAL_SET), 0)

    latlib.on_stream(ctx, "nvshmemx_putmem_signal_on_stream / signal_wait_until_on_stream ping-pong", "nvshmem",
                     OPS["pingpong_stream"], step, divide=2.0)
    ctx.sync()
    ctx.barrier()
