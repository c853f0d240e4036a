"""One 2-PE run of torch's symm_mem API on one backend ("RSHMEM" or "CUDA"), then a DDP step over
the process-group backend given (cuda:rshmem or gloo); each rank saves its results to
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

os.makedirs(out, exist_ok=True)
torch.save(res, os.path.join(out, f"{backend}_{me}.pt"))
dist.barrier()
print(f"rank {me}: {backend} done", flush=True)
dist.destroy_process_group()
