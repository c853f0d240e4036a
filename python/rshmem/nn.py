"""Tensor-parallel linear layers on `rshmem.ops`, in the two forms Megatron-LM uses.

**Sequence parallel** (`sequence_parallel=True`, the default): every PE holds a slice of the
tokens between blocks:

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

**Tensor parallel with a replicated input** (`sequence_parallel=False`, Megatron's default form):
every PE holds every token; the loss is computed alike on every PE (replicated):

    x [..., H] --ColumnParallelLinear--> [..., F/W] --act--> --RowParallelLinear--> [..., H]

- `ColumnParallelLinear(..., sequence_parallel=False, gather_output=False)`: forward is
  `copy_to_region(x) @ weight.t() + bias`: the identity forward, an all-reduce (sum) of the input's
  gradient backward (each PE's output slice contributes a part of it). With `gather_output=True`
  the output slices of every PE are gathered along the last dimension (`[..., out]`; backward:
  this PE's slice of the gradient).
- `RowParallelLinear(..., sequence_parallel=False, input_is_parallel=True)`: forward is
  `reduce_from_region(x @ weight.t()) + bias`: an all-reduce (sum) forward, the identity backward.
  With `input_is_parallel=False` the input is whole (`[..., in]`) and each PE takes its slice of
  the last dimension first (backward: the slices of every PE gathered).

So a replicated loss gives every parameter the gradient of the unparallel model (its slice of
it), with nothing to sum afterwards; `rshmem.ops.all_reduce` alone has the gradient of a sum over
PEs (an all-reduce), which a replicated loss counts W times. The gather along the last dimension
is an all-reduce of the slice placed in zeros (adding zeros is exact): `rshmem.ops` has no plain
all-gather op.

`from_linear(linear, ...)` cuts a full `torch.nn.Linear` (the same on every PE) into this PE's
part, in either form, so a parallel model can be checked against its unparallel twin.
"""
from __future__ import annotations

import math

import torch

from . import ops
from ._native import InvalidArgumentError
from .ops import _group

__all__ = ["ColumnParallelLinear", "RowParallelLinear", "allreduce_sequence_parallel_grads", "copy_to_region",
           "reduce_from_region", "gather_from_region", "scatter_to_region"]


class _CopyToRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return ops.all_reduce(grad.contiguous(), op="sum", group=ctx.group), None


class _ReduceFromRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        return ops.all_reduce(x.contiguous(), op="sum", group=group)

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def _slice_last(x: torch.Tensor, group) -> torch.Tensor:
    info = _group.info(_group.team_of(group, "nn.scatter_to_region"))
    width = x.shape[-1]
    if width % info.size:
        raise InvalidArgumentError(f"rshmem.nn: the last dimension ({width}) cannot be split evenly over "
                                   f"{info.size} PEs")
    part = width // info.size
    return x[..., info.rank * part:(info.rank + 1) * part].contiguous()


def _gather_last(x: torch.Tensor, group) -> torch.Tensor:
    info = _group.info(_group.team_of(group, "nn.gather_from_region"))
    part = x.shape[-1]
    whole = x.new_zeros(tuple(x.shape[:-1]) + (info.size * part,))
    whole[..., info.rank * part:(info.rank + 1) * part] = x
    return ops.all_reduce(whole, op="sum", group=group)


class _GatherFromRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return _gather_last(x, group)

    @staticmethod
    def backward(ctx, grad):
        return _slice_last(grad, ctx.group), None


class _ScatterToRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return _slice_last(x, group)

    @staticmethod
    def backward(ctx, grad):
        return _gather_last(grad.contiguous(), ctx.group), None


def copy_to_region(x: torch.Tensor, group=None) -> torch.Tensor:
    """Megatron's `copy_to_tensor_model_parallel_region`: `x` forward, the sum over the PEs of
    its gradient backward."""
    return _CopyToRegion.apply(x, group)


def reduce_from_region(x: torch.Tensor, group=None) -> torch.Tensor:
    """Megatron's `reduce_from_tensor_model_parallel_region`: the sum over the PEs forward, the
    gradient unchanged backward."""
    return _ReduceFromRegion.apply(x, group)


def gather_from_region(x: torch.Tensor, group=None) -> torch.Tensor:
    """Megatron's `gather_from_tensor_model_parallel_region`: every PE's `x` concatenated along
    the last dimension in PE order forward, this PE's slice of the gradient backward."""
    return _GatherFromRegion.apply(x, group)


def scatter_to_region(x: torch.Tensor, group=None) -> torch.Tensor:
    """Megatron's `scatter_to_tensor_model_parallel_region`: this PE's slice of the last
    dimension forward, the slices of every PE gathered backward."""
    return _ScatterToRegion.apply(x, group)


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
                 dtype=None, sequence_parallel: bool = True, gather_output: bool = False):
        super().__init__()
        if sequence_parallel and gather_output:
            raise InvalidArgumentError("rshmem.nn.ColumnParallelLinear: gather_output=True needs "
                                       "sequence_parallel=False (the sequence-parallel form gathers the tokens)")
        self.sequence_parallel, self.gather_output = bool(sequence_parallel), bool(gather_output)
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
    def from_linear(cls, linear: torch.nn.Linear, *, group=None, **options) -> "ColumnParallelLinear":
        """This PE's rows of `linear` (which must be the same on every PE); `options` are the
        constructor's (`sequence_parallel`, `gather_output`)."""
        w = linear.weight
        layer = cls(linear.in_features, linear.out_features, linear.bias is not None, group=group, device=w.device,
                    dtype=w.dtype, **options)
        r = _group.info(_group.team_of(group, "nn.ColumnParallelLinear")).rank
        rows = slice(r * layer.out_local, (r + 1) * layer.out_local)
        with torch.no_grad():
            layer.weight.copy_(w[rows])
            if layer.bias is not None:
                layer.bias.copy_(linear.bias[rows])
        return layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.sequence_parallel:
            y = torch.nn.functional.linear(copy_to_region(x, self.group), self.weight, self.bias)
            return gather_from_region(y, self.group) if self.gather_output else y
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
                f"bias={self.bias is not None}, sequence_parallel={self.sequence_parallel}"
                + (", gather_output=True" if self.gather_output else ""))


class RowParallelLinear(torch.nn.Module):
    """See the module docstring. `weight` is `[out_features, in_features / W]`; `bias` is whole."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, *, group=None, device=None,
                 dtype=None, sequence_parallel: bool = True, input_is_parallel: bool = True):
        super().__init__()
        if sequence_parallel and not input_is_parallel:
            raise InvalidArgumentError("rshmem.nn.RowParallelLinear: input_is_parallel=False needs "
                                       "sequence_parallel=False (the sequence-parallel form takes this PE's features)")
        self.sequence_parallel, self.input_is_parallel = bool(sequence_parallel), bool(input_is_parallel)
        info, local = _split(in_features, "RowParallelLinear", group)
        self.group, self.in_features, self.out_features, self.in_local = group, in_features, out_features, local
        self.world = info.size
        kw = {"device": device if device is not None else _group.device(), "dtype": dtype}
        self.weight = torch.nn.Parameter(torch.empty((out_features, local), **kw))
        self.bias = torch.nn.Parameter(torch.empty(out_features, **kw)) if bias else None
        _uniform_(self.weight, in_features)
        if self.bias is not None:
            _uniform_(self.bias, in_features)
            # Fed only this PE's tokens in the sequence-parallel form; whole (the same gradient on
            # every PE) after the all-reduce of the other.
            self.bias.sequence_parallel = self.sequence_parallel

    @classmethod
    def from_linear(cls, linear: torch.nn.Linear, *, group=None, **options) -> "RowParallelLinear":
        """This PE's columns of `linear` (which must be the same on every PE), and its whole bias;
        `options` are the constructor's (`sequence_parallel`, `input_is_parallel`)."""
        w = linear.weight
        layer = cls(linear.in_features, linear.out_features, linear.bias is not None, group=group, device=w.device,
                    dtype=w.dtype, **options)
        r = _group.info(_group.team_of(group, "nn.RowParallelLinear")).rank
        with torch.no_grad():
            layer.weight.copy_(w[:, r * layer.in_local:(r + 1) * layer.in_local])
            if layer.bias is not None:
                layer.bias.copy_(linear.bias)
        return layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.sequence_parallel:
            if not self.input_is_parallel:
                x = scatter_to_region(x, self.group)
            y = reduce_from_region(torch.nn.functional.linear(x, self.weight), self.group)
            return y + self.bias if self.bias is not None else y
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
                f"bias={self.bias is not None}, sequence_parallel={self.sequence_parallel}"
                + (", input_is_parallel=False" if not self.input_is_parallel else ""))


def allreduce_sequence_parallel_grads(module: torch.nn.Module, *, group=None) -> None:
    """Sums over the PEs the gradients of `module`'s parameters marked `sequence_parallel` (held
    whole by every PE, fed only this PE's tokens); call it after `backward()`, on every PE."""
    for p in module.parameters():
        if getattr(p, "sequence_parallel", False) and p.grad is not None:
            p.grad.copy_(ops.all_reduce(p.grad.contiguous(), op="sum", group=group))
