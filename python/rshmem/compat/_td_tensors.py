"""Symmetric tensors in Triton-distributed's names (``triton_dist.utils``), re-exported by
``rshmem.compat.triton_dist`` and used by its lazy allocator (``_td_host.py``)."""
from __future__ import annotations

import torch

import rshmem
import rshmem.torch as rtorch


def nvshmem_create_tensor(shape, dtype) -> torch.Tensor:
    """Collective: a symmetric tensor (`rshmem.torch.create_symmetric_tensor`)."""
    return rtorch.create_symmetric_tensor(shape, dtype)


def nvshmem_create_tensors(shape, dtype, rank, local_world_size) -> list:
    """Collective: the views of one symmetric allocation on every node-local PE."""
    return rtorch.create_symmetric_tensors(shape, dtype, rank, local_world_size)


def nvshmem_free_tensor_sync(tensor) -> None:
    """Collective: waits until this PE's GPU work is done, then for every PE, then frees the
    tensor. The GPU work comes first: a host barrier does not wait for kernels of the caller,
    and one of them still in a barrier of its own (or still writing a peer's copy) would
    otherwise meet the wrong barrier instance (docs/memory-model.md, "Barriers")."""
    if tensor.is_cuda:
        torch.cuda.synchronize(tensor.device)
    rshmem.barrier_all()
    rtorch.free_tensor(tensor)
