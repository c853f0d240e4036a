"""GEMM+ReduceScatter on the cuda backend: `C_shard = reduce_scatter(A @ B)`, rows of C split
evenly between the PEs in team order.

One call, in stream order on the caller's stream (the protocol is in `_kernels_gemm`): for each
peer, wait until it has consumed what this PE pushed into its slot last time (`busy[p] == 0`,
`signal_wait_until_on_stream`) and mark the slot taken; then one persistent kernel computes the peers'
chunks first, pushing each finished tile into the owner's `recv[me]` (one flag per program once
its tiles are all there), and its own chunk last, adding the peers' tiles in its epilogue. No host allocation or synchronization after
the first call of a shape: back to back calls and CUDA graph capture are safe.
"""
from __future__ import annotations

import torch
from triton.tools.tensor_descriptor import TensorDescriptor

from ..host import CMP_EQ, SIGNAL_SET
from . import _checks, _group, _kernels_gemm as kg, _tuning, _workspace
from ._ag_gemm import _Dummy, shape_tma_ok, small_rows, tma_ok
from ._launch import Kernel
from .. import _cuda, _native
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

    def pack(self, cfg: _tuning.GemmConfig, c, comm: bool, space, recv, sms: int):
        """(grid, runtime arguments, constexprs, options) of the launch."""
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
        return (grid,), args, consts, {"num_warps": cfg.warps, "num_stages": cfg.stages}

    def launch(self, cfg: _tuning.GemmConfig, c, comm: bool, space, recv, sms: int, prepare: bool = False) -> None:
        grid, args, consts, opts = self.pack(cfg, c, comm, space, recv, sms)
        _kernel(grid, args, consts, prepare=prepare, **opts)


def _config(call: _Call, key: tuple) -> _tuning.GemmConfig:
    # From the shapes only (see shape_tma_ok): the PEs number their flags by program and tile, so they must
    # tile alike, and the tuner's exchange must be made by all of them or none.
    f32 = call.a.dtype == torch.float32
    if not call.shape_tma:
        return _tuning.POINTER_F32_CONFIG if f32 else _tuning.POINTER_CONFIG
    dev = call.a.device

    def alone(cfg):
        scratch = torch.empty((call.M, call.N), dtype=call.a.dtype, device=dev)
        call.launch(cfg, scratch, False, _Dummy(dev), scratch, _tuning.num_sms())

    return _tuning.choose("matmul_reduce_scatter", call.info, key,
                          _tuning.RS_F32_CANDIDATES if f32 else _tuning.RS_CANDIDATES, alone)


class Plan:
    """The call's key-dependent part, made on its first call (see `_ag_gemm.Plan`): configuration,
    workspace, this PE's busy words, the kernel loaded and its arguments packed. `plan(a, b)` is
    a call: the output's allocation, the stream waits, one launch."""

    def __init__(self, a, b, b_t: bool, info: _group.TeamInfo, key: tuple):
        W, me = info.size, info.rank
        call = _Call(a, b, b_t, info)
        m, N = call.m, call.N
        dev = a.device
        self.W, self.shape, self.dtype, self.dev, self.index = W, (m, N), a.dtype, dev, dev.index
        # One PE and few rows: cuBLAS (see `_ag_gemm.small_rows`). With more PEs the fused kernel
        # runs at every size (the reduce-scatter needs it).
        self.small = W == 1 and small_rows(call.M, a.dtype)
        if self.small:
            return
        c = torch.empty((m, N), dtype=a.dtype, device=dev)
        cfg = _config(call, key)
        if W == 1:
            self.dummy = _Dummy(dev)
            grid, args, consts, opts = call.pack(cfg, c, False, self.dummy, c, _tuning.num_sms())
            self.kernel = _kernel.bind(grid, args, consts, (0, 1, 2, 3), **opts)
            return
        space = _space(info, a.dtype, m, N, _tuning.num_sms())
        recv = space.view(a.dtype, (W, m, N))
        self.my_pe = info.pes[me]
        self.busy = [space.busy[(me + j) % W].data_ptr() for j in range(1, W)]
        grid, args, consts, opts = call.pack(cfg, c, True, space, recv, _tuning.num_sms())
        self.kernel = _kernel.bind(grid, args, consts, (0, 1, 2), **opts)

    def __call__(self, a, b):
        if self.small:
            return torch.mm(a, b)
        c = torch.empty(self.shape, dtype=self.dtype, device=self.dev)
        handle = _cuda.current_raw_stream(self.index)
        if self.W == 1:
            self.kernel.launch(handle, a, b, c, c)
            return c
        my_pe = self.my_pe
        for busy in self.busy:
            # The owner has consumed what this PE pushed last time before new tiles go there.
            _native.signal_wait_until_on_stream(busy, CMP_EQ, 0, handle)
            _native.signal_op_on_stream(busy, 1, SIGNAL_SET, my_pe, handle)
        self.kernel.launch(handle, a, b, c)
        return c


def gemm_alone(a, b, info: _group.TeamInfo, key: tuple):
    """The whole A @ B ([M, N]) by this op's kernel with its communication off (benchmarks time
    it beside cuBLAS)."""
    call = _Call(a, b, _checks.weight_layout(b, "matmul_reduce_scatter"), info)
    c = torch.empty((call.M, call.N), dtype=a.dtype, device=a.device)
    call.launch(_config(call, key), c, False, _Dummy(a.device), c, _tuning.num_sms())
    return c
