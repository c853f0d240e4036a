"""All-reduce on the cuda backend: one Triton kernel per call (per piece of
`config.allreduce_piece_bytes`), one-shot or two-shot (see `_kernels_ar`), no barrier kernel.

The form: `config.allreduce_form`, or by default one-shot on 2 PEs (both forms move the same bytes
there, and one-shot has one phase fewer) and up to `config.allreduce_one_shot_max` bytes on more
PEs, two-shot above.

**Large all-reduces go to NCCL** where it can take them: from `config.allreduce_nccl_min_bytes`
(8 MiB) up, when the op's group (the torch.distributed group it was given, or WORLD for
`group=None`) has NCCL as its backend, `torch.distributed.all_reduce` on that group runs instead
of the kernels. There, bandwidth decides, and NCCL's ring (or NVLS tree) reaches the links'
bandwidth with few SMs, while one-shot reads W copies and two-shot moves every byte twice through
SM loads and stores; the kernels win on latency, which dominates below a few MiB. 8 MiB is the
bound vLLM's custom all-reduce keeps for the same reason (its measurements on NVLink machines),
until `benchmarks.run --suite fused` on 2 GPUs measures ours. Every PE of the group decides alike
(the size is agreed, the backend is the group's, the config must be the same everywhere). NCCL's
result is the same on every PE, but summed in its order and in the input's dtype, not in fp32 in
PE order. On gloo or another non-NCCL backend, on an rshmem team given as the group, and on the
host backend, the op always runs rshmem's path.
"""
from __future__ import annotations

import torch

from . import _group, _kernels_ar as ka, _tuning, _workspace
from ._config import config
from .. import _cuda
from ._launch import Kernel

OPS = {"sum": ka.SUM, "avg": ka.AVG, "max": ka.MAX, "min": ka.MIN}
NCCL_OPS = {"sum": "SUM", "avg": "AVG", "max": "MAX", "min": "MIN"}  # names of torch.distributed.ReduceOp
MIN_CLASS = 64 << 10
# Programs per workspace: one per 32 KiB of its size class, at most 128 and the SM count. Small
# sizes want a few programs (latency: each puts and sums its slice in parallel), large ones many
# (the summing pass reads W copies and writes one: it needs the SMs' bandwidth, not one CTA's).
MAX_PROGRAMS = 128
BYTES_PER_PROGRAM = 32 << 10
BLOCK = 2048

_one = Kernel(ka.one_shot_kernel, "all_reduce")
_two = Kernel(ka.two_shot_kernel, "all_reduce")


def form(nbytes: int, W: int) -> str:
    config.check()
    if config.allreduce_form != "auto":
        return config.allreduce_form
    return "one_shot" if W == 2 or nbytes <= config.allreduce_one_shot_max else "two_shot"


def nccl_group(info: _group.TeamInfo, nbytes: int):
    """The torch.distributed group that takes an all-reduce of `nbytes` over `info`'s team (see
    the module docstring), or None for rshmem's kernels."""
    config.check()
    limit = config.allreduce_nccl_min_bytes
    if not limit or nbytes < limit or info.backend != "cuda" or info.size == 1:
        return None
    pg = _group.process_group(info.team)
    if pg is None:
        return None
    import torch.distributed as dist

    try:
        backend = str(dist.get_backend(pg))
    except (RuntimeError, ValueError):
        return None
    return pg if "nccl" in backend.lower() else None


def _programs(size: int) -> int:
    return max(1, min(MAX_PROGRAMS, size // BYTES_PER_PROGRAM, _tuning.num_sms()))


def _space(info: _group.TeamInfo, dtype, how: str, nbytes: int) -> _workspace.Space:
    W, elt = info.size, dtype.itemsize
    size = _workspace.size_class(nbytes, MIN_CLASS)
    key = ("all_reduce", how, info.team, str(dtype), size)

    def make():
        G = _programs(size)
        cap = size // elt
        per_slot = G * -(-(cap if how == "one_shot" else -(-cap // W)) // G)
        bufs = 1 if how == "one_shot" else 2
        space = _workspace.Space(info, bufs * W * per_slot * elt, bufs * W * G, G * W, "all_reduce")
        space.extra.update(programs=G, slot=per_slot, bufs=bufs, views={})
        return space

    return _workspace.get("all_reduce", key, make)


def run(x: torch.Tensor, op: str, info: _group.TeamInfo, prepare: bool = False) -> torch.Tensor:
    """op over the team's PEs of `x` (contiguous), as a new tensor, on the caller's stream (with
    `prepare`, the workspaces and kernels only: `rshmem.ops.prepare`)."""
    W = info.size
    out = torch.empty_like(x)
    n = x.numel()
    if n == 0:
        return out
    if W == 1:
        if not prepare:
            out.copy_(x)
        return out
    elt = x.element_size()
    pg = nccl_group(info, n * elt)
    if pg is not None:
        import torch.distributed as dist

        if prepare:
            # torch makes the group's NCCL communicator on its first collective, which a
            # captured call must not be
            dist.all_reduce(torch.zeros(1, dtype=x.dtype, device=x.device), group=pg)
        else:
            out.copy_(x)
            dist.all_reduce(out, op=getattr(dist.ReduceOp, NCCL_OPS[op]), group=pg)
        return out
    piece = max(1, config.allreduce_piece_bytes // elt)
    code = OPS[op]
    pes = _workspace.pes(info)
    for lo in range(0, n, piece):
        hi = min(n, lo + piece)
        count = hi - lo
        how = form(count * elt, W)
        space = _space(info, x.dtype, how, count * elt)
        G, slot = space.extra["programs"], space.extra["slot"]
        buf = space.extra["views"].get(x.dtype)
        if buf is None:
            buf = space.extra["views"][x.dtype] = space.view(x.dtype, (space.extra["bufs"] * W * slot,))
        # The kernels take addresses: the tensors themselves when the call is one piece.
        xs, outs = (x, out) if count == n else (x.view(-1)[lo:hi], out.view(-1)[lo:hi])
        if how == "one_shot":
            per = -(-count // G)
            _one((G,), (outs, xs, buf, space.flags, space.busy, pes, info.rank, W, count, per, slot),
                 (elt, code, BLOCK), prepare=prepare, num_warps=8)
        else:
            chunk = -(-count // W)
            per = -(-chunk // G)
            _two((G,), (outs, xs, buf, space.extra.setdefault("second", buf[W * slot:]), space.flags, space.busy, pes, info.rank, W, count, chunk, per,
                        slot), (elt, code, BLOCK), prepare=prepare, num_warps=8)
    return out


class Plan:
    """A call of one piece on rshmem's kernels, made on the first call of its key (size, dtype,
    op, team, alignment): the workspace, the kernel loaded, its arguments packed. `plan(x)` is a
    call: the output's allocation and one launch."""

    def __init__(self, x: torch.Tensor, op: str, info: _group.TeamInfo):
        W, n, elt = info.size, x.numel(), x.element_size()
        self.index = x.device.index
        how = form(n * elt, W)
        space = _space(info, x.dtype, how, n * elt)
        G, slot = space.extra["programs"], space.extra["slot"]
        buf = space.view(x.dtype, (space.extra["bufs"] * W * slot,))
        out = torch.empty_like(x)
        pes = _workspace.pes(info)
        code = OPS[op]
        if how == "one_shot":
            args = (out, x, buf, space.flags, space.busy, pes, info.rank, W, n, -(-n // G), slot)
            self.kernel = _one.bind((G,), args, (elt, code, BLOCK), (0, 1), num_warps=8)
        else:
            chunk = -(-n // W)
            args = (out, x, buf, buf[W * slot:], space.flags, space.busy, pes, info.rank, W, n, chunk, -(-chunk // G),
                    slot)
            self.kernel = _two.bind((G,), args, (elt, code, BLOCK), (0, 1), num_warps=8)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        self.kernel.launch(_cuda.current_raw_stream(self.index), out, x)
        return out

    def in_place(self, x: torch.Tensor) -> None:
        """x = the call's result, written over x. Both kernels read every element of x (the
        puts, this PE's term of the sum) before the same program writes it, and no program reads
        another's elements of x, so `out` may be `x`; the plan's key holds x's alignment, which
        `out`'s specialization (an `empty_like`, aligned) then matches only for an aligned x."""
        self.kernel.launch(_cuda.current_raw_stream(self.index), x, x)


def plan(x: torch.Tensor, op: str, info: _group.TeamInfo):
    """The `Plan` of a call like `x`'s, or None where a call does more than one launch (several
    pieces, NCCL) or none (empty, one PE: a copy) and `run` takes it each time."""
    n, elt = x.numel(), x.element_size()
    if n == 0 or info.size == 1 or nccl_group(info, n * elt) is not None:
        return None
    if n > max(1, config.allreduce_piece_bytes // elt):
        return None
    return Plan(x, op, info)
