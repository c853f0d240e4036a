"""Latency of rshmem: put-with-signal ping-pong of 8 B and int_p + wait ping-pong inside one
kernel (half round trip), barrier_all_block inside one kernel (per barrier), and the host-issued
barrier_all_on_stream and put-with-signal ping-pong on stream. On the host backend only the
on-stream forms run (there they are host calls)."""
from __future__ import annotations

from benchmarks.jobs import latlib
from benchmarks.harness.common import Ctx
from benchmarks.jobs.latlib import OPS, PING_BYTES, Counter


def run(ctx: Ctx) -> None:
    import torch

    import rshmem
    import rshmem.torch as rtorch

    rshmem.init(ctx.cpu_group, backend=ctx.backend, device=ctx.device.index if ctx.cuda else None)
    try:
        buf = rtorch.create_symmetric_tensor((64,), torch.uint8)
        src = rtorch.create_symmetric_tensor((64,), torch.uint8)
        sig = rtorch.create_symmetric_tensor((1,), torch.int64)
        flag = rtorch.create_symmetric_tensor((1,), torch.int32)
        sig_stream = rtorch.create_symmetric_tensor((1,), torch.int64)
        ctx.sync()
        ctx.barrier()
        if ctx.cuda:
            _in_kernel(ctx, buf, src, sig, flag)
        else:
            ctx.rec.note("host backend: the in-kernel latencies need CUDA and were not run")

        latlib.on_stream(ctx, "barrier_all_on_stream", "rshmem", OPS["barrier_stream"],
                         lambda: rtorch.barrier_all_on_stream())

        ctr = Counter()
        d, s_, word = buf[:PING_BYTES], src[:PING_BYTES], sig_stream[0]

        def step():
            v = ctr.take(1) + 1
            if ctx.rank == 0:
                rtorch.putmem_signal_on_stream(d, s_, word, v, rshmem.SIGNAL_SET, 1)
                rtorch.signal_wait_until_on_stream(word, rshmem.CMP_GE, v)
            elif ctx.rank == 1:
                rtorch.signal_wait_until_on_stream(word, rshmem.CMP_GE, v)
                rtorch.putmem_signal_on_stream(d, s_, word, v, rshmem.SIGNAL_SET, 0)

        latlib.on_stream(ctx, "putmem_signal_on_stream / signal_wait_until_on_stream ping-pong", "rshmem",
                         OPS["pingpong_stream"], step, divide=2.0)
        ctx.sync()
        ctx.barrier()
    finally:
        rshmem.finalize()


def _in_kernel(ctx: Ctx, buf, src, sig, flag) -> None:
    import torch

    from benchmarks.kernels.kernels_rshmem import barrier_kernel, pingpong_p_kernel, pingpong_signal_kernel

    n = latlib.iters(ctx)
    t_out = torch.zeros(1, dtype=torch.int64, device=ctx.device)
    sig_ctr, flag_ctr = Counter(), Counter()

    def ping(_r):
        pingpong_signal_kernel[(1,)](buf, src, sig, t_out, PING_BYTES, n, sig_ctr.take(n + 1), num_warps=1)
        ctx.sync()
        return int(t_out.item())

    def ping_p(_r):
        pingpong_p_kernel[(1,)](flag, t_out, n, flag_ctr.take(n + 1), num_warps=1)
        ctx.sync()
        return int(t_out.item())

    def barrier(_r):
        barrier_kernel[(1,)](t_out, n, num_warps=4)
        ctx.sync()
        return int(t_out.item())

    latlib.in_kernel(ctx, "putmem_signal_block ping-pong 8 B", "rshmem", OPS["pingpong_signal"], ping, 2 * n, True)
    latlib.in_kernel(ctx, "int_p + wait_until ping-pong", "rshmem", OPS["pingpong_p"], ping_p, 2 * n, True)
    latlib.in_kernel(ctx, "barrier_all_block loop", "rshmem", OPS["barrier_block"], barrier, n, False)
