"""PyTorch symmetric memory, suite "fused": `torch.ops.symm_mem.fused_all_gather_matmul` and
`fused_matmul_reduce_scatter` at the fused ops' shapes, and the one-shot and two-shot all-reduce
(`one_shot_all_reduce`, `two_shot_all_reduce_`, on symmetric inputs) from 1 KiB to 64 MiB.
`two_shot_all_reduce_` works in place: timed calls keep reducing the same buffer (the time does
not depend on the values); its result is checked on the first call.
"""
from __future__ import annotations

from benchmarks.jobs import fusedlib as fl
from benchmarks.jobs import symm
from benchmarks.harness.common import Ctx


def _guard(ctx: Ctx, what: str, fn) -> None:
    """Runs a part of the job; on a GPU shared by the PEs a failure is recorded as "not runnable
    in this configuration" instead of failing the job."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        if not fl.shared_gpu(ctx):
            raise
        reason = f"{what}: not runnable with the PEs sharing one GPU ({type(e).__name__}: {str(e).splitlines()[0][:200]})"
        ctx.rec.note(reason)
        ctx.rec.data.setdefault("not_runnable", reason)


def run(ctx: Ctx) -> None:
    group = {}
    _guard(ctx, "torch symmetric memory", lambda: group.setdefault("name", symm.start(ctx, "CUDA")))
    if "name" not in group:
        return
    name = group["name"]
    try:
        import torch.distributed._symmetric_memory as symm_mem

        enable = getattr(symm_mem, "enable_symm_mem_for_group", None)
        if enable is not None:
            enable(name)
    except Exception as e:  # noqa: BLE001 - recent torch needs no enabling
        ctx.rec.note(f"enable_symm_mem_for_group: {type(e).__name__}: {e}")
    if fl.shared_gpu(ctx):
        ctx.rec.note("the PEs share one GPU: these times mean nothing for speed")
    _guard(ctx, "fused_all_gather_matmul", lambda: _ag(ctx, name))
    _guard(ctx, "fused_matmul_reduce_scatter", lambda: _rs(ctx, name))
    _guard(ctx, "one-shot / two-shot all-reduce", lambda: _ar(ctx, name))
    ctx.sync()
    ctx.barrier()


def _ag(ctx: Ctx, name: str) -> None:
    import torch

    op = torch.ops.symm_mem.fused_all_gather_matmul
    for shape in fl.ag_shapes(ctx):
        M, K, N = shape
        A, B, shard = fl.ag_data(ctx, shape)
        with ctx.rec.series("fused", f"fused_all_gather_matmul, {fl.shape_name(shape)}", "torch", x="shape",
                            y="median_us", better="lower", kind="ag_fused", op="torch symm_mem fused_all_gather_matmul") as s:
            def go():
                return op(shard, [B], 0, name, return_A=False)[1][0]
            ok = fl.close(go(), A @ B)
            s.point(**fl.gemm_point(ctx, shape, 2.0 * M * K * N, fl.measure(ctx, go), ok))
        del A, B, shard


def _rs(ctx: Ctx, name: str) -> None:
    import torch

    op = torch.ops.symm_mem.fused_matmul_reduce_scatter
    W, r = ctx.world, ctx.rank
    for shape in fl.rs_shapes(ctx):
        M, K, N = shape
        m = M // W
        A, B, a, b = fl.rs_data(ctx, shape)
        with ctx.rec.series("fused", f"fused_matmul_reduce_scatter, {fl.shape_name(shape)}", "torch", x="shape",
                            y="median_us", better="lower", kind="rs_fused",
                            op="torch symm_mem fused_matmul_reduce_scatter") as s:
            def go():
                return op(a, b, "sum", 0, name)
            ok = fl.close(go(), (A @ B)[r * m:(r + 1) * m])
            s.point(**fl.gemm_point(ctx, shape, 2.0 * M * (K // W) * N, fl.measure(ctx, go), ok))
        del A, B, a, b


def _ar(ctx: Ctx, name: str) -> None:
    import torch

    for form in ("one_shot", "two_shot"):
        with ctx.rec.series("fused", f"torch symm_mem {form} all-reduce", "torch", x="bytes", y="median_us",
                            better="lower", kind="ar", op=f"torch symm_mem {form}_all_reduce") as s:
            for nbytes in fl.ar_sizes(ctx):
                xs, want = fl.ar_inputs(ctx, nbytes)
                inp, _ = symm.empty(ctx, nbytes, name, dtype=torch.bfloat16)
                inp.copy_(xs[ctx.rank])
                ctx.sync()
                ctx.barrier()
                if form == "one_shot":
                    go = lambda: torch.ops.symm_mem.one_shot_all_reduce(inp, "sum", name)  # noqa: E731
                    ok = fl.close(go(), want)
                else:
                    go = lambda: torch.ops.symm_mem.two_shot_all_reduce_(inp, "sum", name)  # noqa: E731
                    go()
                    ok = fl.close(inp, want)
                point = fl.measure(ctx, go, calls=fl.ar_calls(nbytes), warmup=5, timed=20)
                s.point(**fl.ar_point(ctx, nbytes, point, ok))
                del inp
