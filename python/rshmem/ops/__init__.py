"""Fused communication + computation ops for PyTorch programs (tensor parallelism).

- `all_gather_matmul(a_shard, b, *, group=None, return_a=False)`: `C = all_gather(a_shard, dim 0) @ b`.
  `a_shard` is `[m, K]` on every PE, `b` is `[K, N]`; C is `[W * m, N]`, rows of PE `i` at
  `i * m`. With `return_a`, returns `(C, gathered A)`.
- `matmul_reduce_scatter(a, b, *, group=None)`: `C_shard = reduce_scatter(a @ b, dim 0)`. `a` is
  `[M, K]` (M a multiple of the PE count W), `b` `[K, N]`; C_shard is `[M / W, N]`, PE `i`
  holding rows `i * M / W ...`.
- `all_reduce(x, *, op="sum", group=None)`: `op` ("sum", "avg", "max", "min") over the PEs of
  `x` (fp16, bf16, fp32), as a new tensor. On GPUs, from `config.allreduce_nccl_min_bytes` (8 MiB)
  up over a group whose torch.distributed backend is NCCL, this is NCCL's `all_reduce` (faster at
  those sizes; see `rshmem.ops._allreduce`); rshmem's one-shot / two-shot kernels otherwise.
- `all_reduce_(x, *, op="sum", group=None)`: the same, in place (x holds the result), as
  `torch.distributed.all_reduce` and torch's `two_shot_all_reduce_` are: no output to allocate,
  one launch per call on GPUs; no autograd (use `all_reduce` where a gradient must flow).
- `prepare(op, *args, **kwargs)`: the first-call work of a call, computing nothing (see below).
- `register_group(group)`: makes a group of only some PEs usable as `group=` (see below).

Every PE must call them with the same shapes and dtype, in the same order (they are collective).
They are torch custom ops (`torch.ops.rshmem.*`): they run eagerly, under `torch.compile`, and in
CUDA graphs, and autograd flows through them (the backward of AllGather+GEMM is a GEMM+ReduceScatter
and the other way round). `b` may be row-major or column-major (as
`linear.weight.t()`); `a` / `x` must be contiguous. fp32 (TF32 on GPUs, exact on the host
backend), fp16 and bf16 for the GEMMs; AllGather+GEMM
also takes fp8 (`torch.float8_e4m3fn`) A and B, giving a bf16 C (wgmma's fp8 form on sm_90; no
gradient; scale C yourself for scaled fp8 inputs: per-tensor scales factor out of the product).

On GPUs (the cuda backend) each op is Triton kernels on the symmetric heap: the GEMM waits for
each row block of A as it arrives (or pushes each finished tile to the PE that owns it), so the
communication hides behind the computation; see `docs/ops.md`. On the host backend (CPU tensors)
each op is an exact unfused implementation through rshmem's host API, so programs using them run
without a GPU.

The first call with a new shape and dtype exchanges the shapes between the PEs (a mismatch raises
`rshmem.MismatchError` on every PE), allocates symmetric workspaces and, on GPUs, picks the GEMM
tiling (`config.autotune`) and compiles the kernels; it cannot be captured in a CUDA graph, and
raises `RshmemError` saying so there. `prepare(op, *args, **kwargs)` does that work for a call
eagerly, without computing anything (a warm-up run of the op does too): call it before capturing,
once per shape (e.g. for each shape `torch.compile(mode="reduce-overhead")` will capture with
dynamic shapes). Later calls allocate nothing but their outputs and never synchronize the host:
the first call of a key (shapes, strides, dtypes, alignment, group) leaves a plan that later calls
of the key run with no checks and no Triton binding (see `_library` and `_launch`). Decode-sized
AllGather+GEMMs (`config.gemm_small_rows`) run as the gathered A and cuBLAS.

`group` is None (every PE), a torch.distributed group whose ranks are the PEs in order (the one
rshmem was initialized with), or an `rshmem.Team` of every PE; a group or team of only some PEs
(`dist.new_group([0, 1])` of 4, evenly spaced PEs) once `register_group(group)` has been called
on every PE (collective over all PEs, like `dist.new_group`: see `rshmem.ops._register`).
`config` holds the tunable choices
(`rshmem.ops.config.ag_producer = "sm"`, ...; see `rshmem.ops._config`).
"""
from __future__ import annotations

import inspect
import sys

import torch
from torch.utils._python_dispatch import _get_current_dispatch_mode

from .. import _core
from . import _checks, _group, _library, _register, _tuning, _workspace
from . import _config as _config_module
from ._config import Config, config
from ._library import AUTOGRAD, DIRECT, REDUCE_OPS, _path
from ._register import register_group

__all__ = ["all_gather_matmul", "matmul_reduce_scatter", "all_reduce", "all_reduce_", "prepare", "register_group", "config",
           "Config", "REDUCE_OPS"]


@torch.compiler.assume_constant_result
def _team_of(group, what: str) -> int:
    return _group.team_of(group, what)


def _team(group, what: str) -> int:
    # None is the world team; whether rshmem runs is checked by the op itself.
    return 0 if group is None else _team_of(group, what)


def all_gather_matmul(a_shard, b, *, group=None, return_a: bool = False):
    """`all_gather(a_shard) @ b` (and the gathered A with `return_a`); see the module docstring."""
    team = _team(group, "all_gather_matmul")
    _checks.is_tensor(a_shard, "a_shard", "all_gather_matmul")
    _checks.is_tensor(b, "b", "all_gather_matmul")
    # The weight gradient needs the gathered A: ask for it whenever autograd may want it.
    need_a = return_a or (torch.is_grad_enabled() and b.requires_grad)
    path = _path(a_shard, b)
    if path == DIRECT:
        c, full = _library.all_gather_matmul_impl(a_shard, b, team, need_a)
    elif path == AUTOGRAD:
        c, full = _library.AllGatherMatmul.apply(a_shard, b, team, need_a)
    else:
        c, full = torch.ops.rshmem.all_gather_matmul(a_shard, b, team, need_a)
    return (c, full) if return_a else c


def matmul_reduce_scatter(a, b, *, group=None):
    """`reduce_scatter(a @ b)` over the rows; see the module docstring."""
    team = _team(group, "matmul_reduce_scatter")
    _checks.is_tensor(a, "a", "matmul_reduce_scatter")
    _checks.is_tensor(b, "b", "matmul_reduce_scatter")
    path = _path(a, b)
    if path == DIRECT:
        return _library.matmul_reduce_scatter_impl(a, b, team)
    if path == AUTOGRAD:
        return _library.MatmulReduceScatter.apply(a, b, team)
    return torch.ops.rshmem.matmul_reduce_scatter(a, b, team)


def all_reduce(x, *, op: str = "sum", group=None):
    """`op` over the PEs of `x`, as a new tensor; see the module docstring."""
    team = _team(group, "all_reduce")
    _checks.is_tensor(x, "x", "all_reduce")
    path = _path(x)
    if path == DIRECT:
        return _library.all_reduce_impl(x, op, team)
    if path == AUTOGRAD:
        return _library.AllReduce.apply(x, op, team)
    return torch.ops.rshmem.all_reduce(x, op, team)


def all_reduce_(x, *, op: str = "sum", group=None):
    """`op` over the PEs of `x`, written into `x`; returns `x`. See the module docstring."""
    team = _team(group, "all_reduce_")
    _checks.is_tensor(x, "x", "all_reduce_")
    if torch.is_grad_enabled() and x.requires_grad:
        from .._native import InvalidArgumentError

        raise InvalidArgumentError("rshmem.ops.all_reduce_: x requires grad, and an in-place all-reduce has no "
                                   "gradient here; use rshmem.ops.all_reduce (out of place), or call it under "
                                   "torch.no_grad()")
    if _path(x) == DIRECT:
        _library.all_reduce_in_place(x, op, team)
    else:
        torch.ops.rshmem.all_reduce_(x, op, team)
    return x


def _prepare_all_gather_matmul(a_shard, b, *, group=None, return_a: bool = False):
    team = _team(group, "all_gather_matmul")
    _checks.is_tensor(a_shard, "a_shard", "all_gather_matmul")
    _checks.is_tensor(b, "b", "all_gather_matmul")
    need_a = return_a or (torch.is_grad_enabled() and b.requires_grad)  # as all_gather_matmul decides
    with torch.no_grad():
        _library.all_gather_matmul_impl(a_shard, b, team, need_a, prepare=True)


def _prepare_matmul_reduce_scatter(a, b, *, group=None):
    team = _team(group, "matmul_reduce_scatter")
    _checks.is_tensor(a, "a", "matmul_reduce_scatter")
    _checks.is_tensor(b, "b", "matmul_reduce_scatter")
    with torch.no_grad():
        _library.matmul_reduce_scatter_impl(a, b, team, prepare=True)


def _prepare_all_reduce(x, *, op: str = "sum", group=None):
    team = _team(group, "all_reduce")
    _checks.is_tensor(x, "x", "all_reduce")
    with torch.no_grad():
        _library.all_reduce_impl(x, op, team, prepare=True)


_PREPARE = {
    "all_gather_matmul": (all_gather_matmul, _prepare_all_gather_matmul),
    "matmul_reduce_scatter": (matmul_reduce_scatter, _prepare_matmul_reduce_scatter),
    "all_reduce": (all_reduce, _prepare_all_reduce),
    "all_reduce_": (all_reduce_, _prepare_all_reduce),
}


def prepare(op, /, *args, **kwargs) -> None:
    """Does the first-call work of `op(*args, **kwargs)` (`op` one of this module's ops, or its
    name) without computing it: the shapes agreed with the other PEs, the workspaces allocated,
    the GEMM tiling chosen (which times the GEMM alone when `config.autotune`), every kernel the
    call launches compiled and loaded. Only the shapes, dtypes, layouts, alignment and `group` of
    the arguments matter, not their values (`torch.empty` will do). Collective over the group,
    like the op; eager only (raises during CUDA graph capture). Afterwards a call with tensors
    like these may be captured in a CUDA graph. On the host backend, where nothing is compiled,
    it runs the op once."""
    from .._native import InvalidArgumentError

    name = op if isinstance(op, str) else next((k for k, (fn, _) in _PREPARE.items() if fn is op), None)
    if name not in _PREPARE:
        raise InvalidArgumentError(f"rshmem.ops.prepare: op={op!r}; pass one of rshmem.ops."
                                   f"{', rshmem.ops.'.join(_PREPARE)} (or its name)")
    fn, prepare_fn = _PREPARE[name]
    try:
        inspect.signature(fn).bind(*args, **kwargs)
    except TypeError as e:
        raise InvalidArgumentError(f"rshmem.ops.prepare: the arguments do not fit rshmem.ops.{name} ({e})") from None
    _checks.not_capturing(name, "rshmem.ops.prepare itself")
    prepare_fn(*args, **kwargs)


def _forget_all():
    """rshmem.finalize(): drop every workspace and cache (the heap goes away), before the runtime
    counts the live tensors."""
    _library.forget_plans()
    _workspace.forget()
    _checks.forget()
    _tuning.forget()
    _group.forget()
    _register.forget()
    ag = sys.modules.get(__name__ + "._ag_gemm")  # imported (with triton) only on GPUs
    if ag is not None:
        ag.forget()


_core._finalize_hooks.insert(0, _forget_all)
_config_module._ON_CHANGE.append(_library.forget_plans)
