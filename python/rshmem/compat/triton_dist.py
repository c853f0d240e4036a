"""The host helpers Triton-distributed tutorials import from `triton_dist.utils`, same names and
arguments, on rshmem. A tutorial ports by replacing

    from triton_dist.utils import initialize_distributed, nvshmem_create_tensor, ...

with `from rshmem.compat.triton_dist import ...`.
"""

from __future__ import annotations

import builtins
import os
import random

import torch
import torch.distributed as dist

import rshmem
import rshmem.torch as rtorch
from rshmem.compat._td_tensors import nvshmem_create_tensor, nvshmem_create_tensors, nvshmem_free_tensor_sync

NVSHMEM_SIGNAL_DTYPE = rtorch.SIGNAL_DTYPE
"""dtype of signal words."""

_owns_process_group = False


def init_seed(seed: int = 0) -> None:
    """Triton-distributed's seeding and numerics: Python, torch and numpy generators seeded from
    ``seed``; deterministic algorithms where torch has them (warning otherwise); no TF32 and no
    reduced-precision reductions in matmuls, so reference results are exact enough to compare."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":16:8")
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.manual_seed(3 + seed)
    torch.cuda.manual_seed_all(3 + seed)
    random.seed(3 + seed)
    try:
        import numpy as np  # noqa: PLC0415 (optional)

        np.random.seed(3 + seed)
    except ImportError:
        pass
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False


def initialize_distributed(seed=None, initialize_shmem: bool = True):
    """Initializes torch.distributed from the torchrun environment, seeds as Triton-distributed
    does (``init_seed(seed)``: the same data on every rank when ``seed`` is given, ``init_seed(RANK)``
    otherwise), then starts rshmem on that group unless ``initialize_shmem`` is False. Returns the
    process group (the WORLD group).

    The GPU is rshmem's choice for this PE (`rshmem.torch.device()`): one per PE, or shared
    round-robin under `RSHMEM_ALLOW_SHARED_GPU=1`; torch.distributed uses NCCL with a GPU per
    PE, gloo on a shared GPU or without one (`rshmem.torch.dist_backend()`). On a shared GPU it
    also calls `stage_cuda_collectives_through_cpu()`, so that reference collectives on CUDA
    tensors and groups created with an explicit NCCL backend work there."""
    global _owns_process_group
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    device = rtorch.device()
    if device.type == "cuda":
        torch.cuda.set_device(device)
    backend = rtorch.dist_backend()
    if backend == "gloo" and device.type == "cuda":
        stage_cuda_collectives_through_cpu()
    if not dist.is_initialized():
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29500")
        dist.init_process_group(
            backend=backend,
            rank=rank,
            world_size=world,
            device_id=device if backend == "nccl" else None,
        )
        _owns_process_group = True
    init_seed(seed if seed is not None else rank)
    if initialize_shmem and not rshmem.is_initialized():
        rshmem.init(dist.group.WORLD)
    return dist.group.WORLD


def nvshmem_barrier_all_on_stream(stream=None) -> None:
    """Collective barrier ordered on `stream` (on the host backend, a host barrier)."""
    rtorch.barrier_all_on_stream(stream)


def dist_print(*args, allowed_ranks=(0,), prefix=False, need_sync=False, **kwargs) -> None:
    """`print` on the ranks in `allowed_ranks` (`"all"` for every rank), prefixed with the rank
    when `prefix`; with `need_sync`, ranks print one after another."""
    rank = dist.get_rank() if dist.is_initialized() else 0
    world = dist.get_world_size() if dist.is_initialized() else 1
    if allowed_ranks == "all":
        allowed_ranks = range(world)

    def emit():
        if rank in allowed_ranks:
            if prefix:
                builtins.print(f"[rank:{rank}]", *args, **kwargs, flush=True)
            else:
                builtins.print(*args, **kwargs, flush=True)

    if not need_sync or world == 1:
        emit()
        return
    for turn in range(world):
        if turn == rank:
            emit()
        dist.barrier()


def finalize_distributed() -> None:
    """Stops rshmem, then the process group if `initialize_distributed` started it."""
    global _owns_process_group
    rshmem.finalize()
    if _owns_process_group and dist.is_initialized():
        dist.destroy_process_group()
        _owns_process_group = False


# The rest of triton_dist.utils (and of triton_dist.profiler_utils, .nv_utils, .autotuner,
# .tma_utils, .tools, .tune and kernels.common_ops's host side), and what `import triton_dist`
# gives: jit, language, tune.
from rshmem.compat._td_utils import *  # noqa: E402,F401,F403 (re-exported names, listed in its __all__)
from rshmem.compat._td_utils import __all__ as _utils_all  # noqa: E402
from rshmem.compat._td_utils import stage_cuda_collectives_through_cpu  # noqa: E402
from rshmem.compat._td_host import *  # noqa: E402,F401,F403
from rshmem.compat._td_host import __all__ as _host_all  # noqa: E402
from rshmem.compat._td_profile import *  # noqa: E402,F401,F403
from rshmem.compat._td_profile import __all__ as _profile_all  # noqa: E402
from rshmem.triton import jit, language  # noqa: E402,F401

__all__ = ["NVSHMEM_SIGNAL_DTYPE", "initialize_distributed", "nvshmem_create_tensor", "nvshmem_create_tensors",
           "nvshmem_free_tensor_sync", "nvshmem_barrier_all_on_stream", "dist_print", "finalize_distributed", "jit",
           "language", "init_seed", *_utils_all, *_host_all, *_profile_all]
