"""GEMM+ReduceScatter on the cuda backend: `C_shard = reduce_scatter(A @ B)`, rows of C split
evenly between the PEs in team order.

One call, in stream order on the caller's stream (the protocol is in `_kernels_gemm`): for each
peer, wait until it has consumed what this PE pushed into its slot last time (`busy[p] == 0`,
`cuStreamWaitValue`) and mark the slot taken; then one persistent kernel computes the peers'
chunks first, pushing each finished tile into the owner's `recv[me]` (one flag per program once
its tiles are all there), and its own chunk last, adding the peers' tiles in its epilogue. No host allocation or synchronization after
the first call of a shape: back to back calls and CUDA graph capture are safe.
"""
from __future__ import annotations

import torch
from triton.tools.tensor_descriptor import TensorDescriptor

from .. import torch as rtorch
from ..host import CMP_EQ, SIGNAL_SET
from . import _checks, _group, _kernels_gemm as kg, _tuning, _workspace
from ._ag_gemm import _Dummy, shape_tma_ok, tma_ok
from ._launch import Kernel
from .._native import UnsupportedError

RESET_BLOCK = 1024
MIN_FLAGS = 1024  # flags per source PE: one per program, at most one program per SM

_kernel = Kernel(kg.gemm_rs_kernel, "matmul_reduce_scatter")


def _space(info: _group.TeamInfo, dtype, m: int, N: int, programs: int) -> _workspace.Space:
    """The workspace: the receive buffer and `MIN_FLAGS` flags per source PE (a flag per program
    of the grid, which has at most one program per SM)."""
    W, elt = info.size, dtype.itemsize
    size = _workspace.size_class(W * m * N * elt)
    cap = MIN_FLAGS
    if programs > cap:
        raise UnsupportedError(f"rshmem.ops.matmul_reduce_scatter: a grid of {programs} programs, more than the "
                               f"{cap} flags per PE of the workspace")
    key = ("matmul_reduce_scatter", info.team, str(dtype), size)

    def make():
        space = _workspace.Space(info, size, W * cap, W, "matmul_reduce_scatter")
        space.extra["flag_stride"] = cap
        return space

    return _workspace.get("matmul_reduce_scatter", key, make)


class _Call:
    def __init__(self, a, b, b_t, info):
        self.a, self.b, self.b_t, self.info = a, b, b_t, info
        self.M, self.K = a.shape
        self.N = b.shape[1]
        self.m = self.M // info.size
        self.bmat = b.t() if b_t else b
        self.shape_tma = shape_tma_ok(a.element_size(), self.K, self.N)

    def launch(self, cfg: _tuning.GemmConfig, c, comm: bool, space, recv, sms: int, prepare: bool = False) -> None:
        info, m, K, N = self.info, self.m, self.K, self.N
        W = info.size
        a3d = self.a.view(W, m, K)
        tma = self.shape_tma and tma_ok(self.a, self.bmat, c)
        if tma:
            a = TensorDescriptor.from_tensor(a3d, [1, cfg.BM, cfg.BK])
            b = TensorDescriptor.from_tensor(self.bmat, [cfg.BN, cfg.BK] if self.b_t else [cfg.BK, cfg.BN])
            cd = TensorDescriptor.from_tensor(c, [cfg.BM, cfg.BN]) if comm else \
                TensorDescriptor.from_tensor(c.view(W, m, N), [1, cfg.BM, cfg.BN])
            sbk = sbn = 0
        else:
            a, b, cd = self.a, self.b, c
            sbk, sbn = self.b.stride()
        tiles = W * (-(-m // cfg.BM)) * (-(-N // cfg.BN))
        grid = max(1, min(sms, tiles))
        stride = space.extra.get("flag_stride", 0) if comm else 0
        args = (a, b, cd, recv, space.flags, space.counter, space.busy, _workspace.pes(info), info.rank, W, m, N, K,
                sbk, sbn, stride, grid)
        consts = (cfg.BM, cfg.BN, cfg.BK, cfg.GROUP_M, tma, self.b_t, comm, cfg.flatten and tma, RESET_BLOCK)
        _kernel((grid,), args, consts, prepare=prepare, num_warps=cfg.warps, num_stages=cfg.stages)


def _config(call: _Call, key: tuple) -> _tuning.GemmConfig:
    # From the shapes only (see shape_tma_ok): the PEs number their flags by program and tile, so they must
    # tile alike, and the tuner's exchange must be made by all of them or none.
    if not call.shape_tma:
        return _tuning.POINTER_CONFIG
    dev = call.a.device

    def alone(cfg):
        scratch = torch.empty((call.M, call.N), dtype=call.a.dtype, device=dev)
        call.launch(cfg, scratch, False, _Dummy(dev), scratch, _tuning.num_sms())

    return _tuning.choose("matmul_reduce_scatter", call.info, key, _tuning.RS_CANDIDATES, alone)


def run(a, b, b_t: bool, info: _group.TeamInfo, key: tuple, prepare: bool = False):
    """C_shard ([M / W, N]) on the caller's stream (with `prepare`, everything but the launch and
    the stream work: `rshmem.ops.prepare`)."""
    W, me = info.size, info.rank
    call = _Call(a, b, b_t, info)
    m, N = call.m, call.N
    dev = a.device
    c = torch.empty((m, N), dtype=a.dtype, device=dev)
    cfg = _config(call, key)
    if W == 1:
        call.launch(cfg, c, False, _Dummy(dev), c, _tuning.num_sms(), prepare)
        return c
    space = _space(info, a.dtype, m, N, _tuning.num_sms())
    recv = space.view(a.dtype, (W, m, N))
    if prepare:
        call.launch(cfg, c, True, space, recv, _tuning.num_sms(), True)
        return c
    main = torch.cuda.current_stream(dev)
    my_pe = info.pes[me]
    for j in range(1, W):
        p = (me + j) % W
        # The owner has consumed what this PE pushed last time before new tiles go there.
        rtorch.signal_wait_until_on_stream(space.busy[p], CMP_EQ, 0, main)
        rtorch.signal_op_on_stream(space.busy[p], 1, SIGNAL_SET, my_pe, main)
    call.launch(cfg, c, True, space, recv, _tuning.num_sms())
    return c


def gemm_alone(a, b, info: _group.TeamInfo, key: tuple):
    """The whole A @ B ([M, N]) by this op's kernel with its communication off (benchmarks time
    it beside cuBLAS)."""
    call = _Call(a, b, _checks.weight_layout(b, "matmul_reduce_scatter"), info)
    c = torch.empty((call.M, call.N), dtype=a.dtype, device=a.device)
    call.launch(_config(call, key), c, False, _Dummy(a.device), c, _tuning.num_sms())
    return c
