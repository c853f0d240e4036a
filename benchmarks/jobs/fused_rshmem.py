"""rshmem.ops, suite "fused": AllGather+GEMM and GEMM+ReduceScatter at the issue's shapes (each
producer of AllGather+GEMM on its own, and the automatic choice), their GEMM alone (our consumer
with its signals as if set, and cuBLAS's `torch.matmul`, each timed by PE 0 alone), the
communication alone (the library's copy-engine all-gather / all-to-all of the same bytes), and
the all-reduce (automatic, one-shot, two-shot) from 1 KiB to 64 MiB. The one-shot and two-shot
series are rshmem's kernels at every size; "auto" is what the op does, which from
`ops.config.allreduce_nccl_min_bytes` (8 MiB) up is NCCL's all-reduce where torch.distributed's
WORLD group runs NCCL.

The hidden share of the communication, `(GEMM alone + communication alone - fused) /
min(GEMM alone, communication alone)`, and the floor `max(GEMM alone, communication alone)` are
computed by the report from these points, all measured in this job. GEMM tiling is tuned on the
first call of each shape (`rshmem.ops.config.autotune`), before timing; the chosen configuration
is in the points.

On the host backend (no GPU) the ops run their unfused host implementations at tiny shapes: that
only exercises the harness.
"""
from __future__ import annotations

from benchmarks.jobs import fusedlib as fl
from benchmarks.harness.common import Ctx


def run(ctx: Ctx) -> None:
    import rshmem
    import rshmem.ops as ops

    dev = fl.device(ctx)
    rshmem.init(ctx.cpu_group, backend=ctx.backend, device=dev.index if ctx.cuda else None)
    try:
        ops.config.autotune = ctx.cuda
        if fl.shared_gpu(ctx):
            ctx.rec.note(f"the {ctx.world} PEs share one GPU: the fused ops' times mean nothing for speed (their "
                         "kernels time-slice the GPU); the GEMM-alone figures (PE 0 alone) are single-GPU numbers")
        if ctx.world == 1:
            ctx.rec.note("one PE: the ops are their GEMMs alone (nothing to gather or scatter), so the GEMM-alone "
                         "versus cuBLAS columns are the figures of this run; no communication, floor or hidden share")
        if not ctx.cuda:
            ctx.rec.note("host backend: the ops' unfused host implementations at tiny shapes (the harness only)")
        _all_gather_matmul(ctx)
        _matmul_reduce_scatter(ctx)
        _all_reduce(ctx)
        ctx.sync()
        ctx.barrier()
    finally:
        rshmem.finalize()


def _series(ctx: Ctx, kind: str, label: str, shape, impl: str = "rshmem", **params):
    return ctx.rec.series("fused", f"{label}, {fl.shape_name(shape)}", impl, x="shape", y="median_us",
                          better="lower", kind=kind, op=label, **params)


def _config_of(op: str, key: tuple) -> str | None:
    """The GEMM configuration the op chose for `key` (its agreement key), if it tuned one."""
    from rshmem.ops import _tuning

    cfg = _tuning.chosen().get((op, 0) + tuple(key))
    return cfg.describe() if cfg else None


def _all_gather_matmul(ctx: Ctx) -> None:
    import torch

    import rshmem.ops as ops
    import rshmem.torch as rtorch

    for shape in fl.ag_shapes(ctx):
        M, K, N = shape
        flops = 2.0 * M * K * N
        A, B, shard = fl.ag_data(ctx, shape)
        want = A @ B
        key = (str(shard.dtype), M // ctx.world, K, N)
        for producer in ("auto", "copy_engine", "sm"):
            with _series(ctx, "ag_fused", f"AllGather+GEMM ({producer})", shape, producer=producer) as s:
                ops.config.ag_producer = producer
                try:
                    c = ops.all_gather_matmul(shard, B)  # agrees, allocates, tunes, compiles
                    ok = fl.close(c, want)
                    point = fl.measure(ctx, lambda: ops.all_gather_matmul(shard, B))
                finally:
                    ops.config.ag_producer = "auto"
                s.point(**fl.gemm_point(ctx, shape, flops, point, ok, config=_config_of("all_gather_matmul", key)))
        if not ctx.cuda:
            continue
        from rshmem.ops import _ag_gemm, _group

        info = _group.info(0)
        ok = fl.close(_ag_gemm.gemm_alone(shard, B, info, key), want)  # the buffer holds the gathered A
        mine, cublas = fl.measure_pair(ctx, lambda: _ag_gemm.gemm_alone(shard, B, info, key), lambda: torch.matmul(A, B))
        with _series(ctx, "ag_gemm_alone", "consumer GEMM alone (signals set)", shape) as s:
            s.point(**fl.gemm_point(ctx, shape, flops, mine, ok, config=_config_of("all_gather_matmul", key)))
        with _series(ctx, "ag_gemm_alone", "cuBLAS torch.matmul alone", shape, impl="cublas") as s:
            s.point(**fl.gemm_point(ctx, shape, flops, cublas, True))
        if ctx.world == 1:  # nothing to communicate: no floor, no hidden share
            del A, B, shard, want
            continue
        with _series(ctx, "ag_comm", "all-gather alone (fcollect_on_stream, copy engine)", shape) as s:
            src = rtorch.create_symmetric_tensor(tuple(shard.shape), shard.dtype)
            dst = rtorch.create_symmetric_tensor((M, K), shard.dtype)
            src.copy_(shard)
            rtorch.fcollect_on_stream(dst, src)
            ok = bool(torch.equal(dst, A))
            point = fl.measure(ctx, lambda: rtorch.fcollect_on_stream(dst, src))
            s.point(**fl.gemm_point(ctx, shape, flops, point, ok))
            ctx.sync()
            ctx.barrier()
            rtorch.free_tensor(dst)
            rtorch.free_tensor(src)
        del A, B, shard, want


def _matmul_reduce_scatter(ctx: Ctx) -> None:
    import torch

    import rshmem.ops as ops
    import rshmem.torch as rtorch

    for shape in fl.rs_shapes(ctx):
        M, K, N = shape
        W, r = ctx.world, ctx.rank
        m = M // W
        flops = 2.0 * M * (K // W) * N
        A, B, a, b = fl.rs_data(ctx, shape)
        want = (A @ B)[r * m:(r + 1) * m]
        from rshmem.ops import _group, _library

        key = _library.rs_key(a, b, _group.info(0))  # the op's own key: its tuned configuration
        with _series(ctx, "rs_fused", "GEMM+ReduceScatter", shape) as s:
            ok = fl.close(ops.matmul_reduce_scatter(a, b), want)
            point = fl.measure(ctx, lambda: ops.matmul_reduce_scatter(a, b))
            s.point(**fl.gemm_point(ctx, shape, flops, point, ok, config=_config_of("matmul_reduce_scatter", key)))
        if not ctx.cuda:
            continue
        from rshmem.ops import _gemm_rs

        info = _group.info(0)
        partial = a @ b
        ok = fl.close(_gemm_rs.gemm_alone(a, b, info, key), partial)
        mine, cublas = fl.measure_pair(ctx, lambda: _gemm_rs.gemm_alone(a, b, info, key), lambda: torch.matmul(a, b))
        with _series(ctx, "rs_gemm_alone", "GEMM alone (this op's kernel, no communication)", shape) as s:
            s.point(**fl.gemm_point(ctx, shape, flops, mine, ok, config=_config_of("matmul_reduce_scatter", key)))
        with _series(ctx, "rs_gemm_alone", "cuBLAS torch.matmul alone", shape, impl="cublas") as s:
            s.point(**fl.gemm_point(ctx, shape, flops, cublas, True))
        if ctx.world == 1:
            del A, B, a, b, partial, want
            continue
        with _series(ctx, "rs_comm", "reduce-scatter bytes alone (alltoall_on_stream, copy engine)", shape) as s:
            src = rtorch.create_symmetric_tensor((M, N), a.dtype)
            dst = rtorch.create_symmetric_tensor((M, N), a.dtype)
            src.copy_(partial)
            rtorch.alltoall_on_stream(dst, src)
            ok = bool(torch.equal(dst[r * m:(r + 1) * m], partial[r * m:(r + 1) * m]))
            point = fl.measure(ctx, lambda: rtorch.alltoall_on_stream(dst, src))
            s.point(**fl.gemm_point(ctx, shape, flops, point, ok))
            ctx.sync()
            ctx.barrier()
            rtorch.free_tensor(dst)
            rtorch.free_tensor(src)
        del A, B, a, b, partial, want


def _all_reduce(ctx: Ctx) -> None:
    import torch

    import rshmem.ops as ops

    forms = ("auto", "one_shot", "two_shot") if ctx.cuda else ("auto",)
    for form in forms:
        with ctx.rec.series("fused", f"all_reduce ({form})", "rshmem", x="bytes", y="median_us", better="lower",
                            kind="ar", op=f"all_reduce {form}", form=form) as s:
            ops.config.allreduce_form = form
            nccl_from = ops.config.allreduce_nccl_min_bytes
            if form != "auto":
                ops.config.allreduce_nccl_min_bytes = 0  # the kernels themselves, also above NCCL's threshold
            try:
                for nbytes in fl.ar_sizes(ctx):
                    xs, want = fl.ar_inputs(ctx, nbytes)
                    x = xs[ctx.rank]
                    ok = bool(torch.equal(ops.all_reduce(x), want))
                    calls = fl.ar_calls(nbytes)
                    point = fl.measure(ctx, lambda: ops.all_reduce(x), calls=calls, warmup=5, timed=20)
                    s.point(**fl.ar_point(ctx, nbytes, point, ok))
            finally:
                ops.config.allreduce_form = "auto"
                ops.config.allreduce_nccl_min_bytes = nccl_from
