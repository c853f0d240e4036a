"""The ops on the host backend (CPU tensors): unfused and exact, through rshmem's host API.

- AllGather+GEMM: the shard goes into a symmetric buffer, `rshmem.fcollect` gathers every PE's,
  then one matmul.
- GEMM+ReduceScatter: the matmul in fp32, `rshmem.alltoall` sends row block `j` to PE `j`, and
  each PE sums the blocks it received in PE order.
- AllReduce: `rshmem.fcollect` of every PE's vector, reduced in fp32 in PE order.

Reductions run in PE order in fp32 on every PE, so every PE gets the same bits. The buffers are
symmetric CPU tensors kept per (op, team, dtype, size class) like the GPU workspaces.
"""
from __future__ import annotations

import torch

import rshmem

from . import _checks, _group, _workspace


class _Pair:
    def __init__(self, info: _group.TeamInfo, src_elems: int, dst_elems: int, dtype, what: str):
        self.src = _group.symmetric(info, (max(src_elems, 1),), dtype, what)
        self.dst = _group.symmetric(info, (max(dst_elems, 1),), dtype, what)


def _pair(what: str, info: _group.TeamInfo, dtype, elems: int, dst_factor: int) -> _Pair:
    size = _workspace.size_class(elems * dtype.itemsize, 1 << 12)
    key = ("host", what, info.team, str(dtype), size)
    cap = size // dtype.itemsize
    return _workspace.get(what, key, lambda: _Pair(info, cap, cap * dst_factor, dtype, what))


def all_gather(a: torch.Tensor, info: _group.TeamInfo) -> torch.Tensor:
    """The rows of every PE's `a`, in team order, as a new tensor."""
    if a.dtype.is_floating_point and a.element_size() == 1:  # fp8: the host collectives move its bytes
        return all_gather(a.view(torch.uint8), info).view(a.dtype)
    W, n = info.size, a.numel()
    pair = _pair("all_gather", info, a.dtype, n, W)
    pair.src[:n].copy_(a.reshape(-1))
    rshmem.fcollect(pair.dst[:W * n], pair.src[:n], info.team)
    return pair.dst[:W * n].clone().view((W * a.shape[0],) + tuple(a.shape[1:]))


def all_gather_matmul(a, b, info: _group.TeamInfo, return_a: bool):
    full = all_gather(a, info)
    c = (full.float() @ b.float()).to(_checks.out_dtype(a.dtype))
    return c, (full if return_a else a.new_empty((0,)))


def matmul_reduce_scatter(a, b, info: _group.TeamInfo):
    W = info.size
    M, N = a.shape[0], b.shape[1]
    m = M // W
    part = a.float() @ b.float()
    n = m * N
    pair = _pair("reduce_scatter", info, torch.float32, W * n, 1)
    pair.src[:W * n].copy_(part.reshape(-1))
    rshmem.alltoall(pair.dst[:W * n], pair.src[:W * n], info.team)
    blocks = pair.dst[:W * n].view(W, m, N)
    acc = blocks[0].clone()
    for s in range(1, W):
        acc += blocks[s]
    return acc.to(a.dtype)


def all_reduce(x, op: str, info: _group.TeamInfo):
    W, n = info.size, x.numel()
    pair = _pair("all_reduce", info, x.dtype, n, W)
    pair.src[:n].copy_(x.reshape(-1))
    rshmem.fcollect(pair.dst[:W * n], pair.src[:n], info.team)
    rows = pair.dst[:W * n].view(W, n).float()
    acc = rows[0].clone()
    for s in range(1, W):
        if op in ("sum", "avg"):
            acc += rows[s]
        elif op == "max":
            acc = torch.maximum(acc, rows[s])
        else:
            acc = torch.minimum(acc, rows[s])
    if op == "avg":
        acc /= W
    return acc.to(x.dtype).view(x.shape)
