"""Start-up and exit helpers shared by the tutorials (not a tutorial itself).

Each tutorial runs as a script (``torchrun tutorials/NN_name.py``), so this folder is on
``sys.path`` and they import it as ``from _common import setup, agree``.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist

import rshmem
import rshmem.torch as rtorch


def setup(backend: str | None):
    """torch.distributed first, then rshmem on the same group; returns this PE's torch device.

    The GPU comes from rshmem's rule (`rshmem.torch.device()`). A tutorial must run on any
    machine, so on one with fewer GPUs than PEs it opts in to sharing them
    (`RSHMEM_ALLOW_SHARED_GPU=1`) and says so: its results are checked as on separate GPUs, its
    timings then mean nothing for speed. torch.distributed uses NCCL with a GPU per PE, else
    gloo (`rshmem.torch.dist_backend()`: NCCL refuses two ranks on one GPU).
    """
    if backend is not None:
        os.environ["RSHMEM_BACKEND"] = backend
    local = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    opted_in = False
    if backend != "host" and 0 < torch.cuda.device_count() < local and "RSHMEM_ALLOW_SHARED_GPU" not in os.environ:
        os.environ["RSHMEM_ALLOW_SHARED_GPU"] = "1"
        opted_in = True
    device = rtorch.device()
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(rtorch.dist_backend())
    rshmem.init(dist.group.WORLD, backend=device.type if device.type == "cuda" else "host")
    if rshmem.my_pe() == 0 and rshmem.backend() == "cuda" and rtorch.gpu_shared():
        why = "this tutorial set RSHMEM_ALLOW_SHARED_GPU=1" if opted_in else "RSHMEM_ALLOW_SHARED_GPU=1"
        print(f"note: {local} PEs share {torch.cuda.device_count()} GPU(s) ({why}; torch.distributed on gloo): "
              "results are checked as on separate GPUs, but the times printed mean nothing for speed", flush=True)
    return device


def agree(ok: bool, device) -> bool:
    """True when `ok` holds on every rank (so every rank prints and exits the same way)."""
    flag = torch.tensor([int(ok)], device=device if dist.get_backend() == "nccl" else "cpu")
    dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    return bool(flag.item())


def reference(collective, *tensors) -> None:
    """Runs a torch.distributed collective (the tutorials' reference) on `tensors`. gloo has no
    CUDA all_gather (on a shared GPU the group is gloo): the tensors then go through the CPU."""
    if dist.get_backend() == "nccl" or all(t.device.type == "cpu" for t in tensors):
        collective(*tensors)
        return
    cpu = [t.cpu() for t in tensors]
    collective(*cpu)
    for t, c in zip(tensors, cpu):
        t.copy_(c)


def timing_caveat() -> str:
    """A note for the tutorials' timing headers: empty with a GPU per PE."""
    if rshmem.backend() == "cuda" and rtorch.gpu_shared():
        return " [GPU shared by several PEs: these times mean nothing for speed]"
    return ""
