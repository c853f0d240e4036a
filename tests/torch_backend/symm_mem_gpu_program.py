"""One 2-PE run of torch's symm_mem API on one backend ("RSHMEM" or "CUDA"), torch's symm_mem ops
and Inductor's micro-pipeline TP on it, then a DDP step over the process-group backend given
(cuda:rshmem or gloo) and, on cuda:rshmem, an all_reduce in a CUDA graph; each rank saves its results to
`<out>/<backend>_<rank>.pt` for test_symm_mem_gpu.py to compare. Started by that test under
torchrun: `python -m torch.distributed.run --nproc-per-node 2 symm_mem_gpu_program.py RSHMEM out`."""
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

import rshmem
import rshmem.torch as rtorch

backend, out = sys.argv[1], sys.argv[2]
torch.cuda.set_device(rtorch.device())
if backend == "RSHMEM":
    import rshmem.torch_backend  # noqa: F401

    dist.init_process_group("cpu:gloo,cuda:rshmem")
    import rshmem.torch_symm_mem  # noqa: F401
else:
    dist.init_process_group("gloo")
    rshmem.init(dist.group.WORLD)
if backend != "CUDA":
    # torch 2.11 registers its CUDA backend as the default for CUDA tensors, not by name:
    # set_backend("CUDA") raises "does not find allocation backend CUDA".
    symm_mem.set_backend(backend)
me, n = dist.get_rank(), dist.get_world_size()
dev = torch.device("cuda", torch.cuda.current_device())
group = dist.group.WORLD.group_name
res = {}

t = symm_mem.empty(4096, dtype=torch.float32, device=dev)
h = symm_mem.rendezvous(t, dist.group.WORLD)
t.fill_(float(me + 1))
h.barrier()
res["peer"] = h.get_buffer((me + 1) % n, (4096,), torch.float32).clone()
h.barrier()
h.get_buffer((me + 1) % n, (16,), torch.float32, 16).fill_(100.0 + me)
h.put_signal((me + 1) % n)
h.wait_signal((me - 1) % n)
res["signalled"] = t[:64].clone()
h.barrier()
pad = h.get_signal_pad(me, (symm_mem.get_signal_pad_size() // 4,), torch.int32)
torch.cuda.synchronize()
res["pad_zero"] = bool((pad == 0).all())
# torch's memset32 / stream_write_value32 take the pad as a flat uint32 tensor.
symm_mem._SymmetricMemory.memset32(pad.view(torch.uint32), 0, 0, 4)
symm_mem._SymmetricMemory.stream_write_value32(pad.view(torch.uint32), 0, 0)

g = torch.Generator().manual_seed(7 + me)
x = symm_mem.empty(1024, dtype=torch.bfloat16, device=dev)
x.copy_(torch.randn(1024, generator=g).to(torch.bfloat16))
symm_mem.rendezvous(x, group)
res["one_shot"] = torch.ops.symm_mem.one_shot_all_reduce(x, "sum", group).float().cpu()

a = torch.randn(64, 32, generator=g).to(dev)
b = torch.randn(32, 48, generator=g).to(dev)
ag, mm = torch.ops.symm_mem.fused_all_gather_matmul(a, [b], gather_dim=0, group_name=group)
res["ag"], res["ag_mm"] = ag.cpu(), mm[0].cpu()
torch.cuda.synchronize()
h.barrier()

# torch's GEMM + reduce-scatter and its two-shot all-reduce (in place, on a symm_mem tensor).
a2 = torch.randn(64, 32, generator=g).to(dev)
res["mm_rs"] = torch.ops.symm_mem.fused_matmul_reduce_scatter(a2, b, "sum", 0, group).cpu()
y = symm_mem.empty(2048, dtype=torch.float32, device=dev)
symm_mem.rendezvous(y, group)
y.copy_(torch.randn(2048, generator=g).to(dev))
try:
    torch.ops.symm_mem.two_shot_all_reduce_(y, "sum", group)
    res["two_shot"] = y.cpu()
except RuntimeError as e:  # recorded: the test compares it with the CUDA backend's
    res["two_shot"] = f"{type(e).__name__}: {str(e).splitlines()[0]}"
torch.cuda.synchronize()
h.barrier()

# Inductor's micro-pipeline (async) tensor parallelism: all_gather + mm compiled into torch's
# fused_all_gather_matmul, which runs on the backend's memory.
import torch._inductor.config as inductor_config  # noqa: E402
from torch._inductor.utils import run_and_get_code  # noqa: E402
from torch.distributed._functional_collectives import all_gather_tensor  # noqa: E402

symm_mem.enable_symm_mem_for_group(group)
full_a = torch.randn(2 * 128, 64, generator=torch.Generator().manual_seed(11)).to(dev)
w = torch.randn(64, 96, generator=torch.Generator().manual_seed(12)).to(dev)


def ag_mm(shard, w):
    return all_gather_tensor(shard, 0, group) @ w


inductor_config._micro_pipeline_tp = True
torch._dynamo.reset()
got, code = run_and_get_code(torch.compile(ag_mm, fullgraph=True), full_a[me * 128:(me + 1) * 128].contiguous(), w)
res["mptp"] = got.cpu()
res["mptp_fused"] = "fused_all_gather_matmul" in "\n".join(code)
torch.testing.assert_close(got, full_a @ w, rtol=2e-3, atol=2e-3)
# ... and mm + reduce_scatter into torch's fused_matmul_reduce_scatter.
from torch.distributed._functional_collectives import reduce_scatter_tensor  # noqa: E402

parts = [torch.randn(2 * 64, 64, generator=torch.Generator().manual_seed(20 + r)).to(dev) for r in range(n)]


def mm_rs(x, w):
    return reduce_scatter_tensor(x @ w, "sum", 0, group)


torch._dynamo.reset()
got, code = run_and_get_code(torch.compile(mm_rs, fullgraph=True), parts[me], w)
inductor_config._micro_pipeline_tp = False
res["mptp_rs"] = got.cpu()
res["mptp_rs_fused"] = "fused_matmul_reduce_scatter" in "\n".join(code)
torch.testing.assert_close(got, sum(p @ w for p in parts)[me * 64:(me + 1) * 64], rtol=2e-3, atol=2e-3)
torch.cuda.synchronize()
h.barrier()

from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).to(dev)
ddp = DDP(model, device_ids=[dev.index])
opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
xs, ys = torch.randn(6, 8, generator=g).to(dev), torch.randn(6, 4, generator=g).to(dev)
torch.nn.functional.mse_loss(ddp(xs), ys).backward()
opt.step()
res["ddp"] = [p.detach().cpu() for p in model.parameters()]
res["pg"] = dist.get_backend()

if backend == "RSHMEM":
    # The process group's all_reduce on CUDA tensors captured in a CUDA graph and replayed (gloo,
    # the other run's group, cannot be captured).
    t = torch.full((1024,), float(me + 1), device=dev)
    dist.all_reduce(t)  # the first call makes the group's workspace: not capturable
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            dist.all_reduce(t)
        for _ in range(2):
            t.fill_(float(me + 1))
            graph.replay()
        torch.cuda.synchronize()
        res["pg_graph"] = t.cpu()
    except Exception as e:  # noqa: BLE001 - recorded for the test's message
        res["pg_graph"] = f"{type(e).__name__}: {str(e).splitlines()[0]}"

os.makedirs(out, exist_ok=True)
torch.save(res, os.path.join(out, f"{backend}_{me}.pt"))
dist.barrier()
print(f"rank {me}: {backend} done", flush=True)
dist.destroy_process_group()
