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
from rshmem.triton import libshmem_device


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


# ---------------------------------------------------------------- SIMT regions and language_extra
@triton_dist.jit(do_not_specialize=["n", "length"])
def bincount_kernel(input, output, n, length):
    """Each thread counts its strided share of ``input`` into ``output`` with per-thread atomics."""
    pid = tl.program_id(0)
    num_pid = tl.num_programs(0)
    with dl.simt_exec_region() as (thread_idx, threads_per_block):
        for i in range(pid * threads_per_block + thread_idx, n, num_pid * threads_per_block):
            val = dl.ld(input + i)
            if val < length:
                dl.atomic_add(output + val, 1, scope="gpu", semantic="relaxed")


@tl.constexpr_function
def _log2(n):
    return n.bit_length() - 1


@triton_dist.jit
def vector_copy_kernel(src, dst, n, VEC: tl.constexpr):
    """Each thread moves VEC elements (128 bits at a time when VEC * element bits is a multiple
    of it) and adds lane + 1: a warp prefix sum of ones through shuffles. A wrong shuffle or
    ballot (lanes 0-3 vote, so it must read 15) moves the result off that."""
    with dl.simt_exec_region() as (thread_idx, block_size):
        base = (tl.program_id(0) * block_size + thread_idx) * VEC
        lane = thread_idx % dl.threads_per_warp()
        # inclusive prefix sum of 1s over the warp: lane + 1
        acc = tl.cast(1, tl.int32)
        for s in tl.static_range(_log2(32)):
            up = dl.__shfl_up_sync_i32(0xFFFFFFFF, acc, 1 << s)
            acc = tl.where(lane >= (1 << s), acc + up, acc)
        votes = dl.__ballot_sync(0xFFFFFFFF, lane < 4)
        ones = dl.__shfl_sync_i32(0xFFFFFFFF, acc, 0) + dl.__shfl_down_sync_i32(0xFFFFFFFF, 0, 1)
        if base < n:
            v = dl.ld_vector(src + base, vec_size=VEC)
            bump = (acc + ones - 1 + (votes != 15).to(tl.int32) * 1000).to(src.dtype.element_ty)
            dl.st_vector(dst + base, v + bump)


@triton_dist.jit
def extra_helpers_kernel(i32, i64, f32, f16, u8, out64, pe):
    """Calls each language_extra name the way Triton-distributed's kernels do (compiled, not run)."""
    tid = dl.tid(0)
    dl.__syncthreads()
    a = dl.ld(i32, scope="gpu", semantic="acquire") + dl.ld_b32(i32 + 1)
    b = dl.ld(i64, "sys", "relaxed")
    c = dl.ld(f32) + dl.ld(f16).to(tl.float32) + dl.ld(u8).to(tl.float32)
    dl.st(i32 + 2, a, scope="sys", semantic="release")
    dl.st(f16 + 1, c.to(tl.float16))
    dl.st(u8 + 1, a.to(tl.uint8))
    dl.st_b32(i32 + 3, b.to(tl.int32))
    x0, x1, x2, x3 = dl.load_v4_b32(i32 + 4, scope="gpu", semantic="acquire")
    y0, y1, y2, y3 = dl.load_v4_u32(i32 + 8)
    z0, z1, z2, z3 = dl.load_v4_s32(i32 + 12)
    w0, w1 = dl.load_v2_b64(i64 + 2)
    dl.st_v4_b32(i32 + 16, x0, x1, x2, x3, scope="gpu", semantic="release")
    dl.st_v4_u32(i32 + 20, y0, y1, y2, y3)
    dl.st_v2_u32(i32 + 24, z0, z1)
    packed = dl.pack_b32_v2(x0, y1) + w0.to(tl.uint64) + w1.to(tl.uint64)
    halves = dl.unpack(packed, tl.uint32)
    v = dl.zeros_vector(4, tl.float32) + dl.make_vector([c, c, c, c])
    word = dl.pack(v.recast(tl.int16)[0:4], tl.uint64)
    dl.st_vector(f32 + 8, v)
    dl.membar("gl")
    dl.fence("acq_rel", "sys")
    dl.__fence()
    old = dl.atomic_add_per_warp(i32 + 28, 1, "gpu", "relaxed")
    dl.red_release(i32 + 29, 1, "gpu")
    dl.arrive_inc(i32 + 30, tid, 1, "gpu")
    dl.arrive_inc_asm(i32 + 31, tid, 1, "gpu")
    dl.wait_eq(i32 + 32, tid, 0, "gpu")
    cas = dl.atomic_cas(i64 + 4, 0, 1, "sys", "acq_rel")
    t = dl.globaltimer_lo().to(tl.uint64) + dl.globaltimer_hi().to(tl.uint64) + dl.smid().to(tl.uint64)
    t += dl.ntid(0).to(tl.uint64) + dl.laneid().to(tl.uint64) + dl.elect_one_sync().to(tl.uint64)
    t += (dl.num_warps() * dl.threads_per_warp() + dl.num_threads()) + dl.__shfl_xor_sync_i32(0xFFFFFFFF, tid, 1)
    dl.cp_async_bulk_wait_group(0)
    remote = dl.symm_at(i64, pe)
    total = (packed + halves[0] + halves[1] + word + old.to(tl.uint64) + cas.to(tl.uint64) + t +
             dl.ld_acquire(remote, "sys").to(tl.uint64) + c.to(tl.uint64))
    tl.store(out64, total)


@triton_dist.jit(do_not_specialize=["n", "BLOCK"])  # Triton-distributed's kernels list constexprs here too
def fill_kernel(x, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x + offs, offs, mask=offs < n)


# ---------------------------------------------------------------- warp barriers from one lane
@triton_dist.jit
def lone_lane_warp_barrier_kernel(out, team):
    """Triton-distributed's test_nvshmem_api guards the warp barriers with ``thread_idx / 32 ==
    0``: a true division, which lane 0 alone passes. Each barrier must still meet every PE's, and
    the program then counts the barriers it left (``out[0]``, by thread 0)."""
    thread_idx = dl.tid(0)
    if thread_idx / 32 == 0:
        libshmem_device.barrier_all_warp()
        libshmem_device.sync_all_warp()
        libshmem_device.barrier_warp(team)
        libshmem_device.team_sync_warp(team)
    dl.__syncthreads()
    if thread_idx == 0:
        tl.store(out, tl.load(out) + 4)
