"""The ops as torch custom ops (`torch.ops.rshmem.*`), with fake implementations (shapes only,
for `torch.compile` and meta tensors) and autograd.

- `rshmem::all_gather_matmul(Tensor a, Tensor b, int team, bool return_a) -> (Tensor, Tensor)`:
  C = all_gather(a) @ b, and the gathered `a` when `return_a` (an empty tensor otherwise); fp32,
  fp16, bf16, or fp8 e4m3 (C in bf16, no gradient).
- `rshmem::matmul_reduce_scatter(Tensor a, Tensor b, int team) -> Tensor`.
- `rshmem::all_reduce(Tensor x, str op, int team) -> Tensor`.
- `rshmem::all_reduce_(Tensor(a!) x, str op, int team) -> ()`: the same, written into x.

Backward: AllGather+GEMM's input gradient is a GEMM+ReduceScatter (dC @ B^T), its weight gradient
a local GEMM with the gathered A; GEMM+ReduceScatter's input gradient is an AllGather+GEMM
(all_gather(dC) @ B^T), which also returns the gathered dC for the weight gradient. The
all-reduce's gradient is the same all-reduce of the gradient (`sum`, `avg`); `max` and `min` have
none here.
"""
from __future__ import annotations

import torch
from torch import Tensor
from torch.utils._python_dispatch import _get_current_dispatch_mode

from .. import _native
from .._native import InvalidArgumentError, UnsupportedError
from . import _checks, _group
from ._checks import AG_DTYPES, FP8, GEMM_DTYPES, REDUCE_DTYPES

REDUCE_OPS = ("sum", "avg", "max", "min")

# The steady state of every op: after the first call of a key (the inputs' shapes, strides,
# dtypes, devices and 16-byte alignment, the team, the op's own options), a call is the key, one
# dict lookup and the key's plan (`_ag_gemm.Plan`, ...: the launches with everything but the
# tensors packed). A call whose key has no plan yet takes the full path: every check (with its
# error), the agreement with the other PEs, the workspace, the tuning; then the plan is made.
# `rshmem.ops.config` changes and `rshmem.finalize()` drop every plan.
_plans: dict = {}


def forget_plans() -> None:
    _plans.clear()


def _aligned(*ts) -> bool:
    p = 0
    for t in ts:
        p |= t.data_ptr()
    return not p & 15


def _gemm_key(what: str, a: Tensor, b: Tensor, team: int, extra=None) -> tuple:
    return (what, team, extra, a.dtype, b.dtype, a.shape, a.stride(), b.shape, b.stride(), a.get_device(),
            b.get_device(), not (a.data_ptr() | b.data_ptr()) & 15)


def _copy(x: Tensor) -> Tensor:
    return x.clone()


def _dims(t: Tensor) -> str:
    return "x".join(str(d) for d in t.shape)


def _gemm_inputs(what: str, a, b, team: int, aname: str, dtypes=GEMM_DTYPES):
    info = _group.info(team, what)
    a = _checks.tensor(a, aname, what, info, dtypes)
    b = _checks.tensor(b, "b", what, info, dtypes)
    _checks.matrix(a, aname, what)
    _checks.matrix(b, "b", what)
    _checks.same_dtype(a, b, what)
    _checks.contiguous(a, aname, what)
    b_t = _checks.weight_layout(b, what)
    if a.shape[1] != b.shape[0]:
        raise InvalidArgumentError(f"rshmem.ops.{what}: {aname} is {_dims(a)} and b is {_dims(b)}: b must have "
                                   f"{a.shape[1]} rows ({aname}'s columns)")
    return info, b_t


# How an eager call reaches the op (`_path`).
DIRECT, AUTOGRAD, DISPATCH = 0, 1, 2
_PLAIN = (torch.Tensor, torch.nn.Parameter)


def _path(*tensors) -> int:
    """How a call may run: DIRECT (the op's implementation, skipping torch's dispatcher: a few
    microseconds per call, which small all-reduces feel) for plain tensors that need no
    gradient; AUTOGRAD (the implementation in a `torch.autograd.Function` with the custom op's
    backward: the custom op's autograd layer costs tens of microseconds per call, which every
    training step's forward pays) when one needs a gradient; DISPATCH (the custom op) with a
    compiler, a torch function or dispatch mode, functorch transforms, or tensor subclasses
    around, which would want to see the op."""
    if torch.compiler.is_compiling() or torch._C._is_torch_function_mode_enabled():
        return DISPATCH
    if _dispatch_depth() and _get_current_dispatch_mode() is not None:
        return DISPATCH
    grad = torch.is_grad_enabled()
    needs = False
    for t in tensors:
        if type(t) not in _PLAIN or t.is_meta:
            return DISPATCH
        needs = needs or (grad and t.requires_grad)
    if needs and _functorch_active():
        return DISPATCH
    return AUTOGRAD if needs else DIRECT


# The depth of torch's dispatch-mode stack (0: no mode, the common case, without walking it).
_dispatch_depth = getattr(torch._C, "_len_torch_dispatch_stack", lambda: 1)
# Whether torch.func transforms (grad, vmap, ...) are active; where torch cannot say, assume so.
_functorch_active = getattr(torch._C, "_are_functorch_transforms_active", lambda: True)


def _eager_autograd(name: str, impl, setup, backward) -> type:
    """A `torch.autograd.Function` running a custom op's implementation, setup and backward: what
    an eager call that needs a gradient goes through (`rshmem.ops._path`), the same forward and
    gradient as the custom op without torch's dispatcher and its autograd layer around it."""

    def forward(ctx, *inputs):
        out = impl(*inputs)
        setup(ctx, inputs, out)
        return out

    return type(name, (torch.autograd.Function,), {"forward": staticmethod(forward),
                                                   "backward": staticmethod(backward),
                                                   "forward_impl": staticmethod(impl)})


def _call(function: type, op, *args):
    """An op called by another op's backward, as `rshmem.ops` calls it (`_path`): its
    implementation directly in an eager backward, its `function` where the gradient needs a
    gradient itself, the custom op `op` under a compiler."""
    path = _path(*[a for a in args if isinstance(a, Tensor)])
    if path == DIRECT:
        return function.forward_impl(*args)
    return function.apply(*args) if path == AUTOGRAD else op(*args)


# ------------------------------------------------------------------------ all_gather_matmul


def all_gather_matmul_impl(a: Tensor, b: Tensor, team: int, return_a: bool, prepare: bool = False) -> tuple:
    what = "all_gather_matmul"
    pk = _gemm_key(what, a, b, team, return_a)
    plan = _plans.get(pk)
    if plan is not None and not prepare:
        return plan(a, b)
    info, b_t = _gemm_inputs(what, a, b, team, "a_shard", AG_DTYPES)
    m, K = a.shape
    N = b.shape[1]
    key = (str(a.dtype), m, K, N)
    _checks.agree(what, info, key, lambda: f"a_shard {_dims(a)}, b {_dims(b)}, {a.dtype}")
    W = info.size
    if m == 0 or N == 0 or K == 0:
        c = a.new_zeros((W * m, N), dtype=_checks.out_dtype(a.dtype))
        return c, (a.new_zeros((W * m, K)) if return_a else a.new_empty((0,)))
    if info.backend == "host":
        from . import _fallback

        plan = _plans[pk] = lambda a, b: _fallback.all_gather_matmul(a, b, info, return_a)
    else:
        from . import _ag_gemm

        plan = _plans[pk] = _ag_gemm.Plan(a, b, b_t, info, return_a, key)
    if prepare and info.backend == "cuda":
        return None
    return plan(a, b)


@torch.library.custom_op("rshmem::all_gather_matmul", mutates_args=())
def all_gather_matmul(a: Tensor, b: Tensor, team: int, return_a: bool) -> tuple[Tensor, Tensor]:
    return all_gather_matmul_impl(a, b, team, return_a)


@all_gather_matmul.register_fake
def _(a, b, team, return_a):
    W = _native.team_n_pes(team)
    c = a.new_empty((W * a.shape[0], b.shape[1]), dtype=_checks.out_dtype(a.dtype))
    return c, (a.new_empty((W * a.shape[0], a.shape[1])) if return_a else a.new_empty((0,)))


def _ag_setup(ctx, inputs, output):
    a, b, team, return_a = inputs
    ctx.team = team
    ctx.save_for_backward(b, output[1])


def _ag_backward(ctx, grad_c, grad_full):
    b, full = ctx.saved_tensors
    if b.dtype == FP8:
        raise UnsupportedError("rshmem.ops.all_gather_matmul: fp8 (e4m3) inputs have no gradient here; train in "
                               "bf16 or fp16, or keep the fp8 op out of autograd (torch.no_grad())")
    grad_a = grad_b = None
    if grad_c is not None:
        grad_c = grad_c.contiguous()
    if ctx.needs_input_grad[0]:
        grad_a = _call(MatmulReduceScatter, torch.ops.rshmem.matmul_reduce_scatter, grad_c, b.t(), ctx.team)
        if grad_full is not None and grad_full.numel():
            # The gathered A was an output too: its gradient comes back to its rows' owners.
            info = _group.info(ctx.team)
            summed = _call(AllReduce, torch.ops.rshmem.all_reduce, grad_full.contiguous(), "sum", ctx.team)
            m = grad_a.shape[0]
            grad_a = grad_a + summed[info.rank * m:(info.rank + 1) * m]
    if ctx.needs_input_grad[1]:
        if full.numel() == 0 and grad_c.numel():
            raise UnsupportedError("rshmem::all_gather_matmul: b needs a gradient, which needs the gathered A: call "
                                   "the op with return_a=True (rshmem.ops.all_gather_matmul does so by itself)")
        grad_b = (full.t() @ grad_c).to(b.dtype)
    return grad_a, grad_b, None, None


all_gather_matmul.register_autograd(_ag_backward, setup_context=_ag_setup)
AllGatherMatmul = _eager_autograd("AllGatherMatmul", all_gather_matmul_impl, _ag_setup, _ag_backward)


# -------------------------------------------------------------------- matmul_reduce_scatter


def rs_key(a: Tensor, b: Tensor, info) -> tuple:
    """GEMM+ReduceScatter's agreement (and tuning) key: dtype and shapes, and on GPUs the SM count
    (the grid numbers the kernel's flags, so the PEs must launch alike)."""
    key = (str(a.dtype), a.shape[0], a.shape[1], b.shape[1])
    if info.backend == "cuda":
        from . import _tuning

        key += (_tuning.num_sms(),)
    return key


def matmul_reduce_scatter_impl(a: Tensor, b: Tensor, team: int, prepare: bool = False) -> Tensor:
    what = "matmul_reduce_scatter"
    pk = _gemm_key(what, a, b, team)
    plan = _plans.get(pk)
    if plan is not None and not prepare:
        return plan(a, b)
    info, b_t = _gemm_inputs(what, a, b, team, "a")
    M, K = a.shape
    N = b.shape[1]
    W = info.size
    if M % W:
        raise InvalidArgumentError(f"rshmem.ops.{what}: a has {M} rows, which the {W} PEs cannot share evenly: the "
                                   f"rows must be a multiple of {W}")
    key = rs_key(a, b, info)
    sms = f", a GPU of {key[-1]} SMs" if info.backend == "cuda" else ""
    _checks.agree(what, info, key, lambda: f"a {_dims(a)}, b {_dims(b)}, {a.dtype}{sms}")
    if M == 0 or N == 0 or K == 0:
        return a.new_zeros((M // W, N))
    if info.backend == "host":
        from . import _fallback

        plan = _plans[pk] = lambda a, b: _fallback.matmul_reduce_scatter(a, b, info)
    else:
        from . import _gemm_rs

        plan = _plans[pk] = _gemm_rs.Plan(a, b, b_t, info, key)
    if prepare and info.backend == "cuda":
        return None
    return plan(a, b)


@torch.library.custom_op("rshmem::matmul_reduce_scatter", mutates_args=())
def matmul_reduce_scatter(a: Tensor, b: Tensor, team: int) -> Tensor:
    return matmul_reduce_scatter_impl(a, b, team)


@matmul_reduce_scatter.register_fake
def _(a, b, team):
    return a.new_empty((a.shape[0] // _native.team_n_pes(team), b.shape[1]))


def _rs_setup(ctx, inputs, output):
    a, b, team = inputs
    ctx.team = team
    ctx.save_for_backward(a, b)


def _rs_backward(ctx, grad):
    a, b = ctx.saved_tensors
    grad = grad.contiguous()
    need_a, need_b = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
    grad_a = grad_b = None
    if need_a or need_b:
        gathered_grad_a, full = _call(AllGatherMatmul, torch.ops.rshmem.all_gather_matmul, grad, b.t(), ctx.team,
                                      need_b)
        if need_a:
            grad_a = gathered_grad_a
        if need_b:
            grad_b = (a.t() @ full).to(b.dtype)
    return grad_a, grad_b, None


matmul_reduce_scatter.register_autograd(_rs_backward, setup_context=_rs_setup)
MatmulReduceScatter = _eager_autograd("MatmulReduceScatter", matmul_reduce_scatter_impl, _rs_setup, _rs_backward)


# ------------------------------------------------------------------------------- all_reduce


def all_reduce_impl(x: Tensor, op: str, team: int, prepare: bool = False) -> Tensor:
    what = "all_reduce"
    pk = ("all_reduce", team, op, x.dtype, x.shape, x.stride(), x.get_device(), _aligned(x))
    plan = _plans.get(pk)
    if plan is not None and not prepare:
        return plan(x)
    info = _group.info(team, what)
    x = _checks.tensor(x, "x", what, info, REDUCE_DTYPES)
    if op not in REDUCE_OPS:
        raise InvalidArgumentError(f"rshmem.ops.{what}: op={op!r}; choose one of {', '.join(REDUCE_OPS)}")
    _checks.contiguous(x, "x", what)
    key = (str(x.dtype), op, x.numel())
    _checks.agree(what, info, key, lambda: f"x of {x.numel()} elements ({_dims(x)}), {x.dtype}, op {op}")
    if info.backend == "host":
        from . import _fallback

        plan = _plans[pk] = lambda x: _fallback.all_reduce(x, op, info)
        return plan(x)
    from . import _allreduce

    plan = _copy if info.size == 1 and x.numel() else _allreduce.plan(x, op, info)
    if plan is None:
        return _allreduce.run(x, op, info, prepare)
    _plans[pk] = plan
    return x if prepare else plan(x)


def all_reduce_in_place(x: Tensor, op: str, team: int) -> None:
    """x = `op` over the team's PEs of x (contiguous), in place, on the caller's stream
    (`rshmem.ops.all_reduce_`, the process group's all_reduce). After the first call of a key it
    is one launch of the plan writing over x where the call has one (one piece on rshmem's
    kernels, 16-byte aligned), nothing on one PE, else the op's path and a copy back. The first
    call of a key checks and agrees as `all_reduce` does (its messages name `all_reduce`)."""
    pk = ("all_reduce", team, op, x.dtype, x.shape, x.stride(), x.get_device(), _aligned(x))
    plan = _plans.get(pk)
    if plan is None:
        out = all_reduce_impl(x, op, team)
        plan = _plans.get(pk)
        if plan is not _copy:
            x.copy_(out)
        return
    if plan is _copy:
        return
    if pk[-1] and hasattr(plan, "in_place"):
        plan.in_place(x)
    else:
        x.copy_(plan(x))


@torch.library.custom_op("rshmem::all_reduce_", mutates_args=("x",))
def all_reduce_(x: Tensor, op: str, team: int) -> None:
    all_reduce_in_place(x, op, team)


@all_reduce_.register_fake
def _(x, op, team):
    return None


def all_reduce_planned(x: Tensor, op: str, team: int) -> bool:
    """Whether a call like this one has its plan (may run during CUDA graph capture)."""
    return ("all_reduce", team, op, x.dtype, x.shape, x.stride(), x.get_device(), _aligned(x)) in _plans


@torch.library.custom_op("rshmem::all_reduce", mutates_args=())
def all_reduce(x: Tensor, op: str, team: int) -> Tensor:
    return all_reduce_impl(x, op, team)


@all_reduce.register_fake
def _(x, op, team):
    return torch.empty_like(x)


def _ar_setup(ctx, inputs, output):
    ctx.op, ctx.team = inputs[1], inputs[2]


def _ar_backward(ctx, grad):
    if ctx.op not in ("sum", "avg"):
        raise UnsupportedError(f"rshmem.ops.all_reduce: op={ctx.op!r} has no gradient here (only sum and avg)")
    return _call(AllReduce, torch.ops.rshmem.all_reduce, grad.contiguous(), ctx.op, ctx.team), None, None


all_reduce.register_autograd(_ar_backward, setup_context=_ar_setup)
AllReduce = _eager_autograd("AllReduce", all_reduce_impl, _ar_setup, _ar_backward)
