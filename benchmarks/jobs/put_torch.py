"""Put bandwidth of a torch peer copy: PyTorch symmetric memory's CUDA backend, `copy_` from a
local tensor into the peer's buffer (`SymmetricMemory.get_buffer(peer, ...)`), which the CUDA
driver runs on the copy engine over NVLink. The reference for rshmem's `putmem_on_stream`."""
from __future__ import annotations

from benchmarks.jobs import putlib
from benchmarks.jobs import symm
from benchmarks.harness.common import Ctx


def run(ctx: Ctx) -> None:
    import torch

    group = symm.start(ctx, "CUDA")
    top = max(putlib.put_sizes(ctx))
    src = torch.empty(top, dtype=torch.uint8, device=ctx.device)
    dst, hdl = symm.empty(ctx, top, group)
    bench = putlib.PutBench(ctx, src, dst, top)
    peer = 1
    remote = hdl.get_buffer(peer, (top,), torch.uint8)

    def copy(n):
        d, s_ = remote[:n], src[:n]
        return lambda: d.copy_(s_)

    putlib.run_sizes(ctx, bench, "torch", "torch symm_mem peer buffer .copy_ (copy engine)",
                     "copy engine (torch copy_)", copy)
    ctx.sync()
    ctx.barrier()
