"""Start-up and exit helpers shared by the tutorials (not a tutorial itself).

Each tutorial runs as a script (``torchrun tutorials/NN_name.py``), so this folder is on
``sys.path`` and they import it as ``from _common import setup, agree``.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist

import rshmem


def setup(backend: str | None):
    """torch.distributed first (nccl on GPUs, gloo otherwise), then rshmem on the same group."""
    use_gpu = torch.cuda.is_available() if backend is None else backend == "cuda"
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if use_gpu:
        torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl" if use_gpu else "gloo")
    rshmem.init(dist.group.WORLD, backend="cuda" if use_gpu else "host", device=local_rank if use_gpu else None)
    return torch.device("cuda", local_rank) if use_gpu else torch.device("cpu")


def agree(ok: bool, device) -> bool:
    """True when `ok` holds on every rank (so every rank prints and exits the same way)."""
    flag = torch.tensor([int(ok)], device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    return bool(flag.item())
