"""Kernels written the way Triton-distributed's are, against rshmem's names: ``dl.wait`` over
several flags, ``dl.notify`` from a whole program, ``dl.consume_token`` on pointers and on TMA
descriptors (host-side ``TensorDescriptor`` arguments and ``tl.make_tensor_descriptor``).

test_device_td_compile.py compiles them for sm_90 without a GPU; test_device_td_gpu.py runs
them and checks values. A kernel that waits for another program of its own grid is launched
with ``launch_cooperative_grid=True``, so all its programs are resident at once.
"""
from __future__ import annotations

import triton
import triton.language as tl

import rshmem.triton as triton_dist
import rshmem.triton.language as dl


@triton.jit
def _sleep_ns(ns):
    start = dl.globaltimer()
    while dl.globaltimer() - start < ns:
        pass


# ---------------------------------------------------------------- dl.wait on several flags
@triton_dist.jit
def multi_flag_kernel(flags, data, out, n_flags, epoch, SEG: tl.constexpr, DELAY_NS: tl.constexpr):
    """Program 0 publishes segment i of ``data`` and then sets ``flags[i] = epoch``, one segment
    every ``DELAY_NS``; program 1 waits for all ``n_flags`` flags with one ``dl.wait`` and copies
    ``data`` to ``out``. A wait that missed a flag copies a segment that is not there yet."""
    offs = tl.arange(0, SEG)
    if tl.program_id(0) == 0:
        for i in range(n_flags):
            _sleep_ns(DELAY_NS)
            tl.store(data + i * SEG + offs, epoch * 1000 + i + offs * 0)
            dl.syncthreads()
            if dl.tid(0) == 0:
                dl.st_release(flags + i, epoch, "gpu")
    else:
        token = dl.wait(flags, n_flags, "gpu", "acquire", waitValue=epoch)
        src = dl.consume_token(data, token)
        for i in range(n_flags):
            tl.store(out + i * SEG + offs, tl.load(src + i * SEG + offs))


# ---------------------------------------------------------------- dl.notify from a whole program
@triton_dist.jit
def notify_kernel(sig, target, signal, SIG_OP: tl.constexpr, COMM_SCOPE: tl.constexpr):
    """Every thread of every program calls ``dl.notify``; thread 0 of each program acts."""
    dl.notify(sig, target, signal=signal, sig_op=SIG_OP, comm_scope=COMM_SCOPE)


# ---------------------------------------------------------------- consume_token on descriptors
@triton.jit
def _produce_rows(a_ptr, a_src, ready, M, K, SEG_M, epoch, DELAY_NS: tl.constexpr, BK: tl.constexpr):
    """Copies ``a_src`` into ``a_ptr`` one segment of ``SEG_M`` rows at a time, each followed by
    ``ready[segment] = epoch`` (release)."""
    rows = tl.arange(0, 16)
    cols = tl.arange(0, BK)
    for s in range(M // SEG_M):
        _sleep_ns(DELAY_NS)
        for r in range(0, SEG_M, 16):
            for c in range(0, K, BK):
                idx = (s * SEG_M + r + rows)[:, None] * K + (c + cols)[None, :]
                tl.store(a_ptr + idx, tl.load(a_src + idx))
        dl.syncthreads()
        if dl.tid(0) == 0:
            dl.st_release(ready + s, epoch, "gpu")


@triton.jit
def _consume_tiles(a_desc, b_desc, c_ptr, ready, M, N, K, SEG_M, epoch, NUM_CONSUMERS: tl.constexpr,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, CONSUME: tl.constexpr,
                   WAIT_AT_TILE_START: tl.constexpr):
    """A persistent GEMM ``C = A @ B.T`` over TMA descriptors, one flattened loop over
    (tile, k) as Triton-distributed's AllGather+GEMM consumers run it. Before reading a tile's
    rows of A it waits for the segments holding them (``dl.wait`` over several flags) and ties
    ``a_desc`` to that wait with ``dl.consume_token``; ``CONSUME=False`` leaves the tie out (the
    compile test shows the pipeliner then issues loads before the wait)."""
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BM)
    num_n = tl.cdiv(N, BN)
    k_tiles = tl.cdiv(K, BK)
    num_tiles = num_m * num_n
    tiles_here = num_tiles // NUM_CONSUMERS
    if pid < num_tiles % NUM_CONSUMERS:
        tiles_here += 1
    tile = pid - NUM_CONSUMERS
    ki = -1
    om = 0
    on = 0
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for _ in range(0, k_tiles * tiles_here):
        ki = tl.where(ki == k_tiles - 1, 0, ki + 1)
        if ki == 0:
            tile += NUM_CONSUMERS
            om = (tile % num_m) * BM
            on = (tile // num_m) * BN
            if WAIT_AT_TILE_START:
                seg_beg = om // SEG_M
                seg_end = (tl.minimum(om + BM, M) - 1) // SEG_M
                token = dl.wait(ready + seg_beg, seg_end - seg_beg + 1, "gpu", "acquire", waitValue=epoch)
                if CONSUME:
                    a_desc = dl.consume_token(a_desc, token)
        if not WAIT_AT_TILE_START:
            # Waiting in every step, outside the block that computes the offsets: only the
            # token orders the loads after the wait.
            seg_beg = om // SEG_M
            seg_end = (tl.minimum(om + BM, M) - 1) // SEG_M
            token = dl.wait(ready + seg_beg, seg_end - seg_beg + 1, "gpu", "acquire", waitValue=epoch)
            if CONSUME:
                a_desc = dl.consume_token(a_desc, token)
        a = a_desc.load([om, ki * BK])
        b = b_desc.load([on, ki * BK])
        acc = tl.dot(a, b.T, acc)
        if ki == k_tiles - 1:
            rows = om + tl.arange(0, BM)
            cols = on + tl.arange(0, BN)
            tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc)
            acc = tl.zeros((BM, BN), dtype=tl.float32)


@triton_dist.jit
def ag_gemm_host_desc_kernel(a_desc, b_desc, c_ptr, a_ptr, a_src, ready, M, N, K, SEG_M, epoch,
                             NUM_CONSUMERS: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                             DELAY_NS: tl.constexpr, CONSUME: tl.constexpr, WAIT_AT_TILE_START: tl.constexpr):
    """Consumers read A through a host-side ``TensorDescriptor``; the last program produces A."""
    if tl.program_id(0) == NUM_CONSUMERS:
        _produce_rows(a_ptr, a_src, ready, M, K, SEG_M, epoch, DELAY_NS, BK)
    else:
        _consume_tiles(a_desc, b_desc, c_ptr, ready, M, N, K, SEG_M, epoch, NUM_CONSUMERS, BM, BN, BK, CONSUME,
                       WAIT_AT_TILE_START)


@triton_dist.jit
def ag_gemm_device_desc_kernel(a_ptr, b_ptr, c_ptr, a_src, ready, M, N, K, SEG_M, epoch,
                               NUM_CONSUMERS: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                               DELAY_NS: tl.constexpr, CONSUME: tl.constexpr, WAIT_AT_TILE_START: tl.constexpr):
    """Consumers read A through ``tl.make_tensor_descriptor``; the last program produces A."""
    if tl.program_id(0) == NUM_CONSUMERS:
        _produce_rows(a_ptr, a_src, ready, M, K, SEG_M, epoch, DELAY_NS, BK)
    else:
        a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
        b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
        _consume_tiles(a_desc, b_desc, c_ptr, ready, M, N, K, SEG_M, epoch, NUM_CONSUMERS, BM, BN, BK, CONSUME,
                       WAIT_AT_TILE_START)
