"""NCCL + cuBLAS, suite "fused": the sequential baselines of the fused ops at the same shapes,
`all_gather_into_tensor` then `torch.matmul`, and `torch.matmul` then `reduce_scatter_tensor`,
the collectives alone, and `all_reduce` from 1 KiB to 64 MiB (eager; the first call, which makes
the communicator, is warm-up).

NCCL refuses two ranks on one GPU (ncclInvalidUsage): when the PEs share a GPU the job records
that it is not runnable in that configuration and measures nothing.
"""
from __future__ import annotations

from benchmarks.jobs import fusedlib as fl
from benchmarks.harness.common import Ctx


def run(ctx: Ctx) -> None:
    import torch
    import torch.distributed as dist

    if fl.shared_gpu(ctx):
        reason = (f"not runnable with {ctx.world} ranks on {torch.cuda.device_count()} GPU(s): NCCL refuses two ranks on "
                  "one GPU (ncclInvalidUsage)")
        ctx.rec.note(reason)
        ctx.rec.data["not_runnable"] = reason
        return
    ctx.rec.note(f"NCCL {'.'.join(str(v) for v in torch.cuda.nccl.version())}")
    W, r = ctx.world, ctx.rank
    for shape in fl.ag_shapes(ctx):
        M, K, N = shape
        A, B, shard = fl.ag_data(ctx, shape)
        full = torch.empty((M, K), dtype=shard.dtype, device=shard.device)
        with ctx.rec.series("fused", f"all_gather_into_tensor + matmul, {fl.shape_name(shape)}", "nccl", x="shape",
                            y="median_us", better="lower", kind="ag_fused", op="NCCL all_gather_into_tensor + cuBLAS") as s:
            def seq():
                dist.all_gather_into_tensor(full, shard)
                return torch.matmul(full, B)
            ok = fl.close(seq(), A @ B)
            s.point(**fl.gemm_point(ctx, shape, 2.0 * M * K * N, fl.measure(ctx, seq), ok))
        with ctx.rec.series("fused", f"all_gather_into_tensor alone, {fl.shape_name(shape)}", "nccl", x="shape",
                            y="median_us", better="lower", kind="ag_comm", op="NCCL all_gather_into_tensor") as s:
            point = fl.measure(ctx, lambda: dist.all_gather_into_tensor(full, shard))
            s.point(**fl.gemm_point(ctx, shape, 2.0 * M * K * N, point, bool(torch.equal(full, A))))
        del A, B, shard, full
    for shape in fl.rs_shapes(ctx):
        M, K, N = shape
        m = M // W
        A, B, a, b = fl.rs_data(ctx, shape)
        out = torch.empty((m, N), dtype=a.dtype, device=a.device)
        flops = 2.0 * M * (K // W) * N
        with ctx.rec.series("fused", f"matmul + reduce_scatter_tensor, {fl.shape_name(shape)}", "nccl", x="shape",
                            y="median_us", better="lower", kind="rs_fused", op="cuBLAS + NCCL reduce_scatter_tensor") as s:
            def seq():
                dist.reduce_scatter_tensor(out, torch.matmul(a, b))
                return out
            ok = fl.close(seq(), (A @ B)[r * m:(r + 1) * m])
            s.point(**fl.gemm_point(ctx, shape, flops, fl.measure(ctx, seq), ok))
        partial = a @ b
        with ctx.rec.series("fused", f"reduce_scatter_tensor alone, {fl.shape_name(shape)}", "nccl", x="shape",
                            y="median_us", better="lower", kind="rs_comm", op="NCCL reduce_scatter_tensor") as s:
            s.point(**fl.gemm_point(ctx, shape, flops, fl.measure(ctx, lambda: dist.reduce_scatter_tensor(out, partial)),
                                    True))
        del A, B, a, b, partial
    with ctx.rec.series("fused", "NCCL all_reduce", "nccl", x="bytes", y="median_us", better="lower", kind="ar",
                        op="NCCL all_reduce") as s:
        for nbytes in fl.ar_sizes(ctx):
            xs, want = fl.ar_inputs(ctx, nbytes)
            x = xs[r].clone()
            dist.all_reduce(x)
            # NCCL's ring sums in its own order: equal within bf16 rounding, not bit for bit.
            ok = fl.close(x, want)
            y = xs[r].clone()
            point = fl.measure(ctx, lambda: dist.all_reduce(y), calls=fl.ar_calls(nbytes), warmup=5, timed=20)
            s.point(**fl.ar_point(ctx, nbytes, point, ok))
    ctx.sync()
    ctx.barrier()
