"""One `rshmem.ops.all_gather_matmul` call with every ops kernel launch traced: each launch is
followed by a synchronize, so the kernel that faults is named, with the runtime's device error
record (a wait past RSHMEM_DEBUG_WAIT_TIMEOUT_MS, a bad address) when there is one.

    RSHMEM_ALLOW_SHARED_GPU=1 RSHMEM_DEBUG_WAIT_TIMEOUT_MS=8000 \
        torchrun --nproc-per-node 2 tools/ops_trace.py copy_engine 4096 8192 5120

(producer: copy_engine or sm; then M K N, bf16). It finds faults, not timings: a traced consumer
is synchronized before the producer is queued, so with working kernels it stops at the debug
wait timeout with the wait's record; a kernel that faults stops at once with no record.
"""
import os, sys, time
import torch, torch.distributed as dist
import rshmem, rshmem.torch as rtorch, rshmem.ops as ops
from rshmem.ops import _launch
torch.cuda.set_device(rtorch.device())
dist.init_process_group("gloo")
rshmem.init(dist.group.WORLD)
me, W = rshmem.my_pe(), rshmem.n_pes()
producer, M, K, N = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
ops.config.autotune = False
ops.config.ag_producer = producer
plain_call = _launch.Kernel.__call__
def traced(self, grid, args, consts=(), **options):
    name = getattr(self.fn, "__name__", None) or getattr(getattr(self.fn, "fn", None), "__name__", "?")
    print(f"PE {me} launch {name} grid={grid} consts={consts} options={options}", flush=True)
    plain_call(self, grid, args, consts, **options)
    try:
        torch.cuda.synchronize()
        print(f"PE {me}   {name} done", flush=True)
    except Exception as e:
        print(f"PE {me}   {name} FAILED: {str(e).splitlines()[0]}", flush=True)
        try:
            rshmem._native.check_device_error(); print(f"PE {me}: no device error record", flush=True)
        except Exception as d:
            print(f"PE {me}: DEVICE RECORD: {d}", flush=True)
        os._exit(1)
_launch.Kernel.__call__ = traced
g = torch.Generator(device="cuda"); g.manual_seed(1)
A = torch.randn((M, K), device="cuda", generator=g).to(torch.bfloat16)
B = (torch.randn((K, N), device="cuda", generator=g) / K ** 0.5).to(torch.bfloat16)
m = M // W
t0 = time.time()
try:
    c = ops.all_gather_matmul(A[me * m:(me + 1) * m].contiguous(), B)
    torch.cuda.synchronize()
    ref = A.float() @ B.float()
    print(f"PE {me} {producer} {M}x{K}x{N}: ok in {time.time()-t0:.1f}s, max err {(c.float()-ref).abs().max().item():.3f}", flush=True)
except Exception as e:
    print(f"PE {me} {producer}: {type(e).__name__}: {str(e).splitlines()[0]} after {time.time()-t0:.1f}s", flush=True)
    try:
        rshmem._native.check_device_error(); print(f"PE {me}: no device error record", flush=True)
    except Exception as d:
        print(f"PE {me}: DEVICE RECORD: {d}", flush=True)
    os._exit(1)
dist.barrier()
os._exit(0)
