"""Put bandwidth of rshmem: `putmem_block` / `putmem_nbi_block` from a Triton kernel (CTA x warps
sweep at 256 MiB, then bandwidth vs size with the best config of at most 8 CTAs and the best
overall), `putmem_on_stream` (the copy engine), and torch's `copy_` into rshmem's `peer_tensor`
view (the copy engine driven by torch). On the host backend only the last two run."""
from __future__ import annotations

from benchmarks.jobs import putlib
from benchmarks.harness.common import Ctx, fmt_size


def run(ctx: Ctx) -> None:
    import torch

    import rshmem
    import rshmem.torch as rtorch

    rshmem.init(ctx.cpu_group, backend=ctx.backend, device=ctx.device.index if ctx.cuda else None)
    try:
        sizes = putlib.put_sizes(ctx)
        top = max(max(sizes), putlib.SWEEP_BYTES if ctx.cuda else 0)
        src = rtorch.create_symmetric_tensor((top,), torch.uint8)
        dst = rtorch.create_symmetric_tensor((top,), torch.uint8)
        ctx.rec.note(f"rshmem {rshmem.__version__}, backend {rshmem.backend()}, {rshmem.n_pes()} PEs")
        bench = putlib.PutBench(ctx, src, dst, top)
        peer = 1

        if ctx.cuda:
            _kernel_puts(ctx, bench, src, dst, peer)
        else:
            ctx.rec.note("host backend: the Triton kernel puts need CUDA and were not run")

        def on_stream(n):
            d, s_ = dst[:n], src[:n]
            return lambda: rtorch.putmem_on_stream(d, s_, peer)

        putlib.run_sizes(ctx, bench, "rshmem", "putmem_on_stream", "copy engine", on_stream)

        def peer_copy(n):
            view = rtorch.peer_tensor(dst, peer)[:n]
            s_ = src[:n]
            return lambda: view.copy_(s_)

        putlib.run_sizes(ctx, bench, "rshmem", "peer_tensor(...).copy_ (torch copy into rshmem's peer view)",
                         "copy engine (torch copy_)", peer_copy)
        ctx.sync()
        ctx.barrier()
    finally:
        rshmem.finalize()


def _kernel_puts(ctx: Ctx, bench: putlib.PutBench, src, dst, peer: int) -> None:
    from benchmarks.kernels.kernels_rshmem import put_kernel

    def launcher(ctas, warps, nbytes, nbi=False):
        slice_, grid = putlib.grid_for(nbytes, ctas)
        return lambda: put_kernel[(grid,)](dst, src, nbytes, slice_, peer, NBI=nbi, num_warps=warps)

    found = putlib.run_sweep(ctx, bench, "rshmem", "putmem_block", launcher)
    best = putlib.best_configs(found)
    ctx.rec.data.setdefault("chosen", {})["putmem_block"] = {k: list(v) for k, v in best.items()}
    for key, op in (("8", "SM put, <= 8 CTAs"), ("best", "SM put, best config")):
        ctas, warps = best[key]
        putlib.run_sizes(ctx, bench, "rshmem", f"putmem_block {ctas} CTAs x {warps} warps", op,
                         lambda n, c=ctas, w=warps: launcher(c, w, n), ctas=ctas, warps=warps)
    ctas, warps = best["8"]
    putlib.run_sizes(ctx, bench, "rshmem", f"putmem_nbi_block + quiet {ctas} CTAs x {warps} warps",
                     "SM put nbi, <= 8 CTAs", lambda n: launcher(ctas, warps, n, nbi=True), ctas=ctas, warps=warps)
    ctx.rec.note(f"CTA sweep at {fmt_size(putlib.SWEEP_BYTES)}: best <= 8 CTAs {best['8']}, best {best['best']} "
                 "(CTAs, warps)")
