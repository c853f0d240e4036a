"""All-gather with rshmem: a push kernel (every rank puts its block into every peer's output
with putmem_signal_block and waits for the peers' signals; 8 or 32 CTAs per peer), a low-latency
form for small sizes (one CTA per peer, the signal SET to a launch counter, no barrier), and a
copy-engine pull (barrier_all_on_stream, getmem_on_stream from every peer, barrier_all_on_stream),
and the library's own `fcollect_on_stream` (up to 256 KiB per rank one kernel that stages the
data in the peers' workspace with a flag per slice and no barrier; the pull above it), eager and
captured in a CUDA graph. On the host backend only the pull and the eager
`fcollect_on_stream` run."""
from __future__ import annotations

from benchmarks.jobs import aglib
from benchmarks.jobs import putlib
from benchmarks.harness.common import KiB, MiB, Ctx
from benchmarks.jobs.latlib import Counter

PUSH_WARPS = 16
LL_WARPS = 16
LL_MAX = 1 * MiB  # the low-latency form is measured up to this many bytes per rank


def run(ctx: Ctx) -> None:
    import torch

    import rshmem
    import rshmem.torch as rtorch

    rshmem.init(ctx.cpu_group, backend=ctx.backend, device=ctx.device.index if ctx.cuda else None)
    try:
        sizes = aglib.ag_sizes(ctx)
        top = max(sizes)
        inp = rtorch.create_symmetric_tensor((top,), torch.uint8)
        out = rtorch.create_symmetric_tensor((ctx.world * top,), torch.uint8)
        bench = aglib.AgBench(ctx, inp, out, top)
        if ctx.cuda:
            _push(ctx, bench, rtorch, inp, out, sizes)
        else:
            ctx.rec.note("host backend: the push kernels need CUDA and were not run")

        me, world = ctx.rank, ctx.world

        def pull(n):
            blocks = [out[p * n:(p + 1) * n] for p in range(world)]
            src = inp[:n]

            def go():
                rtorch.barrier_all_on_stream()  # every input is ready
                for p in range(world):
                    if p == me:
                        blocks[p].copy_(src)
                    else:
                        rtorch.getmem_on_stream(blocks[p], src, p)
                rtorch.barrier_all_on_stream()  # nobody still reads an input the caller may overwrite
            return go

        aglib.run_sizes(ctx, bench, "rshmem", "pull: getmem_on_stream between two barrier_all_on_stream",
                        pull, op="copy engine pull")

        def fcollect(n):
            o, i = out[: world * n], inp[:n]
            return lambda: rtorch.fcollect_on_stream(o, i)

        aglib.run_sizes(ctx, bench, "rshmem", "fcollect_on_stream", fcollect, op="library fcollect")
        aglib.run_graph_sizes(ctx, bench, "rshmem", "fcollect_on_stream", fcollect, op="library fcollect")
        if ctx.cuda:
            aglib.note_host_cost(ctx, "rshmem fcollect_on_stream", fcollect(KiB), KiB)
        ctx.sync()
        ctx.barrier()
    finally:
        rshmem.finalize()


def _push(ctx: Ctx, bench: aglib.AgBench, rtorch, inp, out, sizes: list[int]) -> None:
    import torch

    from benchmarks.kernels.kernels_rshmem import allgather_push_kernel

    world = ctx.world
    for per_peer in (8, 32):
        sig = rtorch.create_symmetric_tensor((world,), torch.int64)
        ctr = Counter()

        def push(n, sig=sig, ctr=ctr, per_peer=per_peer):
            slice_, ctas = putlib.grid_for(n, per_peer)

            def go():
                target = ctr.take(ctas) + ctas
                allgather_push_kernel[(ctas, world)](out, inp, sig, n, slice_, target, world, SET=False,
                                                     num_warps=PUSH_WARPS)
            return go

        aglib.run_sizes(ctx, bench, "rshmem", f"push: putmem_signal_block, up to {per_peer} CTAs per peer", push,
                        op=f"SM push {per_peer} CTAs/peer", ctas_per_peer=per_peer, warps=PUSH_WARPS,
                        min_slice=putlib.MIN_SLICE)

    sig = rtorch.create_symmetric_tensor((world,), torch.int64)
    ctr = Counter()

    def low_latency(n):
        def go():
            target = ctr.take(1) + 1
            allgather_push_kernel[(1, world)](out, inp, sig, n, n, target, world, SET=True, num_warps=LL_WARPS)
        return go

    aglib.run_sizes(ctx, bench, "rshmem", "low latency: 1 CTA per peer, signal SET, no barrier", low_latency,
                    sizes=[n for n in sizes if n <= LL_MAX], op="SM push low latency", warps=LL_WARPS)
    ctx.rec.note(f"low-latency all-gather measured up to {LL_MAX // KiB} KiB per rank")
    aglib.note_host_cost(ctx, "rshmem Triton low-latency push kernel (a Triton launch from Python)", low_latency(KiB),
                         KiB)
