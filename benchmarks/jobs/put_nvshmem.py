"""Put bandwidth of NVSHMEM 3.4.5 through PyTorch's NVSHMEM Triton integration: the same kernel
shape as rshmem's (`nvshmemx_putmem_block`, `nvshmemx_putmem_nbi_block` + quiet; CTA x warps
sweep at 256 MiB, then bandwidth vs size with the best config of at most 8 CTAs and the best
overall), and the host API's `nvshmemx_putmem_on_stream` (the twin of rshmem's putmem_on_stream)."""
from __future__ import annotations

from benchmarks.jobs import putlib
from benchmarks.jobs import symm
from benchmarks.harness.common import Ctx, fmt_size


def run(ctx: Ctx) -> None:
    group = symm.start(ctx, "NVSHMEM")
    from benchmarks.kernels import kernels_nvshmem as N

    bad = N.check_constants()
    if bad:
        ctx.rec.note(bad)
    kernels = N.launchers()
    ctx.rec.note(f"NVSHMEM device library {N.device_library()}")
    top = max(max(putlib.put_sizes(ctx)), putlib.SWEEP_BYTES)
    src, _ = symm.empty(ctx, top, group)
    dst, _ = symm.empty(ctx, top, group)
    bench = putlib.PutBench(ctx, src, dst, top)
    put = kernels["put"]
    peer = 1

    def launcher(ctas, warps, nbytes, nbi=False):
        slice_, grid = putlib.grid_for(nbytes, ctas)
        return lambda: put[(grid,)](dst, src, nbytes, slice_, peer, NBI=nbi, num_warps=warps)

    found = putlib.run_sweep(ctx, bench, "nvshmem", "nvshmemx_putmem_block", launcher)
    best = putlib.best_configs(found)
    ctx.rec.data.setdefault("chosen", {})["nvshmemx_putmem_block"] = {k: list(v) for k, v in best.items()}
    for key, op in (("8", "SM put, <= 8 CTAs"), ("best", "SM put, best config")):
        ctas, warps = best[key]
        putlib.run_sizes(ctx, bench, "nvshmem", f"nvshmemx_putmem_block {ctas} CTAs x {warps} warps", op,
                         lambda n, c=ctas, w=warps: launcher(c, w, n), ctas=ctas, warps=warps)
    ctas, warps = best["8"]
    putlib.run_sizes(ctx, bench, "nvshmem", f"nvshmemx_putmem_nbi_block + quiet {ctas} CTAs x {warps} warps",
                     "SM put nbi, <= 8 CTAs", lambda n: launcher(ctas, warps, n, nbi=True), ctas=ctas, warps=warps)
    ctx.rec.note(f"CTA sweep at {fmt_size(putlib.SWEEP_BYTES)}: best <= 8 CTAs {best['8']}, best {best['best']} "
                 "(CTAs, warps)")

    from benchmarks.jobs.nvshmem_host import HostApi

    api = []  # bound inside the series, so a missing library is that series' error

    def on_stream(n):
        if not api:
            api.append(HostApi())
        d, s_ = dst[:n], src[:n]
        return lambda: api[0].putmem_on_stream(d, s_, peer)

    putlib.run_sizes(ctx, bench, "nvshmem", "nvshmemx_putmem_on_stream", "copy engine", on_stream)
    ctx.sync()
    ctx.barrier()
