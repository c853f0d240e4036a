"""Tensor-parallel linear layers on `rshmem.ops`, for Megatron-style blocks with sequence
parallelism (every PE holds a slice of the tokens between blocks):

    x_shard [n/W, ..., H] --ColumnParallelLinear--> [n, ..., F/W] --act--> --RowParallelLinear--> [n/W, ..., H]

- `ColumnParallelLinear(in_features, out_features)`: this PE holds `out_features / W` rows of the
  weight (and of the bias). forward(x_shard) gathers the tokens of every PE and multiplies, fused
  (`rshmem.ops.all_gather_matmul`): `[n_local, ..., in] -> [W * n_local, ..., out / W]`.
- `RowParallelLinear(in_features, out_features)`: this PE holds `in_features / W` columns of the
  weight; forward(x) multiplies and reduce-scatters the tokens, fused
  (`rshmem.ops.matmul_reduce_scatter`): `[n, ..., in / W] -> [n / W, ..., out]`, then adds the
  whole bias.

Dimension 0 is the one gathered and scattered (Megatron's sequence-first layout). The backward
passes are the other fused op. Like Megatron, the parameters every PE holds whole (the row-parallel
bias, and e.g. LayerNorms between the layers) get only this PE's tokens' share of their gradient;
they carry `sequence_parallel = True`, and `allreduce_sequence_parallel_grads(module)` sums their
gradients over the PEs after `backward()`.

`from_linear(linear)` cuts a full `torch.nn.Linear` (the same on every PE) into this PE's part, so
a parallel model can be checked against its unparallel twin.
"""
from __future__ import annotations

import math

import torch

from . import ops
from ._native import InvalidArgumentError
from .ops import _group

__all__ = ["ColumnParallelLinear", "RowParallelLinear", "allreduce_sequence_parallel_grads"]


def _split(total: int, what: str, group) -> tuple:
    team = _group.team_of(group, f"nn.{what}")
    info = _group.info(team)
    if total % info.size:
        raise InvalidArgumentError(f"rshmem.nn.{what}: {total} features cannot be split evenly over {info.size} PEs")
    return info, total // info.size


def _uniform_(t: torch.Tensor, fan_in: int) -> None:
    # torch.nn.Linear's default initialization, with the fan-in of the whole layer.
    bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
    with torch.no_grad():
        t.uniform_(-bound, bound)


class ColumnParallelLinear(torch.nn.Module):
    """See the module docstring. `weight` is `[out_features / W, in_features]`."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, *, group=None, device=None,
                 dtype=None):
        super().__init__()
        info, local = _split(out_features, "ColumnParallelLinear", group)
        self.group, self.in_features, self.out_features, self.out_local = group, in_features, out_features, local
        self.world = info.size
        kw = {"device": device if device is not None else _group.device(), "dtype": dtype}
        self.weight = torch.nn.Parameter(torch.empty((local, in_features), **kw))
        self.bias = torch.nn.Parameter(torch.empty(local, **kw)) if bias else None
        _uniform_(self.weight, in_features)
        if self.bias is not None:
            _uniform_(self.bias, in_features)

    @classmethod
    def from_linear(cls, linear: torch.nn.Linear, *, group=None) -> "ColumnParallelLinear":
        """This PE's rows of `linear` (which must be the same on every PE)."""
        w = linear.weight
        layer = cls(linear.in_features, linear.out_features, linear.bias is not None, group=group, device=w.device,
                    dtype=w.dtype)
        r = _group.info(_group.team_of(group, "nn.ColumnParallelLinear")).rank
        rows = slice(r * layer.out_local, (r + 1) * layer.out_local)
        with torch.no_grad():
            layer.weight.copy_(w[rows])
            if layer.bias is not None:
                layer.bias.copy_(linear.bias[rows])
        return layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lead = x.shape[:-1]
        if not lead:
            raise InvalidArgumentError(f"rshmem.nn.ColumnParallelLinear: the input ({tuple(x.shape)}) needs a "
                                       "dimension 0 of tokens to gather")
        y = ops.all_gather_matmul(x.reshape(-1, x.shape[-1]), self.weight.t(), group=self.group)
        if self.bias is not None:
            y = y + self.bias
        return y.view((self.world * lead[0],) + tuple(lead[1:]) + (self.out_local,))

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features} ({self.out_local} here), "
                f"bias={self.bias is not None}")


class RowParallelLinear(torch.nn.Module):
    """See the module docstring. `weight` is `[out_features, in_features / W]`; `bias` is whole."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, *, group=None, device=None,
                 dtype=None):
        super().__init__()
        info, local = _split(in_features, "RowParallelLinear", group)
        self.group, self.in_features, self.out_features, self.in_local = group, in_features, out_features, local
        self.world = info.size
        kw = {"device": device if device is not None else _group.device(), "dtype": dtype}
        self.weight = torch.nn.Parameter(torch.empty((out_features, local), **kw))
        self.bias = torch.nn.Parameter(torch.empty(out_features, **kw)) if bias else None
        _uniform_(self.weight, in_features)
        if self.bias is not None:
            _uniform_(self.bias, in_features)
            self.bias.sequence_parallel = True

    @classmethod
    def from_linear(cls, linear: torch.nn.Linear, *, group=None) -> "RowParallelLinear":
        """This PE's columns of `linear` (which must be the same on every PE), and its whole bias."""
        w = linear.weight
        layer = cls(linear.in_features, linear.out_features, linear.bias is not None, group=group, device=w.device,
                    dtype=w.dtype)
        r = _group.info(_group.team_of(group, "nn.RowParallelLinear")).rank
        with torch.no_grad():
            layer.weight.copy_(w[:, r * layer.in_local:(r + 1) * layer.in_local])
            if layer.bias is not None:
                layer.bias.copy_(linear.bias)
        return layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lead = x.shape[:-1]
        if not lead or lead[0] % self.world:
            raise InvalidArgumentError(f"rshmem.nn.RowParallelLinear: dimension 0 of the input ({tuple(x.shape)}) "
                                       f"must be a multiple of the {self.world} PEs")
        y = ops.matmul_reduce_scatter(x.reshape(-1, x.shape[-1]), self.weight.t(), group=self.group)
        if self.bias is not None:
            y = y + self.bias
        return y.view((lead[0] // self.world,) + tuple(lead[1:]) + (self.out_features,))

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features} ({self.in_local} here), out_features={self.out_features}, "
                f"bias={self.bias is not None}")


def allreduce_sequence_parallel_grads(module: torch.nn.Module, *, group=None) -> None:
    """Sums over the PEs the gradients of `module`'s parameters marked `sequence_parallel` (held
    whole by every PE, fed only this PE's tokens); call it after `backward()`, on every PE."""
    for p in module.parameters():
        if getattr(p, "sequence_parallel", False) and p.grad is not None:
            p.grad.copy_(ops.all_reduce(p.grad.contiguous(), op="sum", group=group))
