"""rshmem.numba on GPUs: one test per device function family (RMA, signals, AMOs, waits,
barriers, collectives) checks the values Numba kernels move, on 2 PEs that may share one GPU
(RSHMEM_ALLOW_SHARED_GPU=1). Arrays come from rshmem.compat.nvshmem.core (CuPy where installed,
else Numba device arrays) and torch tensors of rshmem.torch, so the host API's interop is
exercised on the way.

Waits progress by time-slicing on a shared GPU: each kernel is short, waits only for what a
kernel launched before it (on either PE) provides, and never relies on two kernels being
resident at once. Run:

    RSHMEM_ALLOW_SHARED_GPU=1 torchrun --nproc-per-node 2 -m pytest -q -m gpu tests/numba_device/test_numba_gpu.py
"""
from __future__ import annotations

import numpy as np
import pytest

numba = pytest.importorskip("numba", reason="numba-cuda is not installed")
from numba import cuda  # noqa: E402

import rshmem  # noqa: E402
import rshmem.numba as shm  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.multi]


@pytest.fixture(scope="module")
def core(cuda_backend):
    import rshmem.compat.nvshmem.core as core

    cuda.select_device(rshmem._native.device_ordinal())
    return core


def host(a):
    if hasattr(a, "get"):
        return a.get()
    if hasattr(a, "copy_to_host"):
        return a.copy_to_host()
    return a.cpu().numpy()


def fill(a, values) -> None:
    """Copies host `values` into device array `a` (CuPy or Numba)."""
    values = np.ascontiguousarray(values, dtype=host(a).dtype)
    if hasattr(a, "set"):
        a.set(values)
    else:
        a.copy_to_device(values)


def done(core):
    """Waits for this PE's kernels, then for every PE (so the next test starts clean)."""
    cuda.synchronize()
    core.barrier_all()
    cuda.synchronize()


@shm.jit
def _rma_kernel(dst, src, dst_b, src_b, gdst, out, peer):
    # thread-scope put of a slice, block-scope put of a whole array, warp-scope get
    if cuda.threadIdx.x == 0:
        shm.put(dst[:8], src[:8], peer)
        shm.p(dst[8:9], 77, peer)
        shm.quiet()
    shm.put_nbi_block(dst_b, src_b, peer)
    shm.quiet()
    shm.barrier_all_block()
    if cuda.threadIdx.x < 32:
        shm.get_warp(gdst, src_b, peer)
    if cuda.threadIdx.x == 0:
        out[0] = shm.g(src[3:4], peer)


def test_rma(core, me, npes, peer):
    src = core.array((16,), dtype="int32")
    dst = core.array((16,), dtype="int32")
    src_b = core.array((1000,), dtype="float32")
    dst_b = core.array((1000,), dtype="float32")
    gdst = core.array((1000,), dtype="float32")
    out = core.array((1,), dtype="int32")
    fill(src, np.arange(16) + 100 * me)
    fill(src_b, np.full(1000, me + 1))
    done(core)
    _rma_kernel[1, 128](dst, src, dst_b, src_b, gdst, out, peer)
    done(core)
    left = (me - 1) % npes
    got = host(dst)
    assert (got[:8] == np.arange(8) + 100 * left).all() and got[8] == 77
    assert (host(dst_b) == left + 1).all()
    assert (host(gdst) == peer + 1).all()
    assert host(out)[0] == 3 + 100 * peer
    for a in (out, gdst, dst_b, src_b, dst, src):
        core.free_array(a)


# Copy-loop cases: block b puts LENGTHS[b % 7] bytes from src offset src_off[b] to the first half
# of dst region b at offset dst_off[b] (all threads of the block), and the same bytes into the
# second half (its first warp): every relative alignment (16, 8, 4, 1-byte vectors), heads and
# tails, rounds of 16 / 8 / 4 vectors (blocks of 256 / 512 / 1024 threads) and partial rounds.
LENGTHS = (1, 15, 17, 255, 4096 + 5, 65536 + 9, 131000)
REGION = 1 << 18
HALF = REGION // 2
CASES = 48


def _put_block_cases(dst, src, src_off, dst_off, lengths, peer):
    b = cuda.blockIdx.x
    so, do, n = src_off[b], b * REGION + dst_off[b], lengths[b]
    shm.put_block(dst[do:do + n], src[so:so + n], peer)
    if cuda.threadIdx.x < 32:
        shm.put_warp(dst[do + HALF:do + HALF + n], src[so:so + n], peer)


# A CTA has 64K registers: 128 per thread at most in blocks of 512 threads, 64 in blocks of 1024.
_put_block_cases_256 = shm.jit(_put_block_cases)
_put_block_cases_512 = shm.jit(_put_block_cases, max_registers=128)
_put_block_cases_1024 = shm.jit(_put_block_cases, max_registers=64)


def test_put_copy_loops_every_alignment(core, me, npes, peer):
    rng = np.random.default_rng(7)
    src_off = rng.integers(0, 16, CASES)
    dst_off = rng.integers(0, 16, CASES)
    src_off[:16], dst_off[:16] = np.arange(16), np.zeros(16)     # every relative alignment ...
    dst_off[16:32] = np.arange(16)                                # ... from both sides
    lengths = np.array([LENGTHS[b % len(LENGTHS)] for b in range(CASES)])
    src = core.array((REGION,), dtype="uint8")
    dst = core.array((CASES * REGION,), dtype="uint8")
    args = [core.array((CASES,), dtype="int64") for _ in range(3)]
    for a, v in zip(args, (src_off, dst_off, lengths)):
        fill(a, v)
    pattern = lambda pe: (np.arange(REGION) * 7 + pe * 13) % 251  # noqa: E731
    fill(src, pattern(me))
    left = (me - 1) % npes
    for kernel, threads in ((_put_block_cases_256, 256), (_put_block_cases_512, 512), (_put_block_cases_1024, 1024)):
        fill(dst, np.zeros(CASES * REGION))
        done(core)
        kernel[CASES, threads](dst, src, *args, peer)
        done(core)
        got, want = host(dst).reshape(CASES, REGION), np.zeros((CASES, REGION), dtype=np.uint8)
        for b in range(CASES):
            so, do, n = src_off[b], dst_off[b], lengths[b]
            want[b, do:do + n] = want[b, HALF + do:HALF + do + n] = pattern(left)[so:so + n]
        bad = [b for b in range(CASES) if not np.array_equal(got[b], want[b])]
        assert not bad, (f"{threads} threads: cases {bad} (src offset, dst offset, bytes: "
                         f"{[(int(src_off[b]), int(dst_off[b]), int(lengths[b])) for b in bad[:4]]}) differ")
    for a in (*args, dst, src):
        core.free_array(a)


@shm.jit
def _signal_kernel(data, src, sig, out, peer, rounds):
    # put_signal_block, then wait for the left PE's signal; a ping that must see the data
    shm.put_signal_block(data, src, sig, 1, shm.SIGNAL_ADD, peer)
    if cuda.threadIdx.x == 0:
        out[0] = shm.signal_wait(sig, shm.CMP_GE, rounds)
        out[1] = shm.signal_fetch(sig)
        shm.signal_op(sig[1:2], 5, shm.SIGNAL_SET, peer)


def test_signals(core, me, npes, peer):
    data = core.array((4096,), dtype="int64")
    src = core.array((4096,), dtype="int64")
    sig = core.array((2,), dtype="uint64")
    out = core.array((2,), dtype="uint64")
    fill(src, np.full(4096, me + 10))
    done(core)
    _signal_kernel[1, 256](data, src, sig, out, peer, 1)
    done(core)
    assert (host(data) == (me - 1) % npes + 10).all()  # seen with the signal
    assert list(host(out)) == [1, 1] and host(sig)[1] == 5
    for a in (out, sig, src, data):
        core.free_array(a)


@shm.jit
def _amo_kernel(counter, word, old, peer):
    shm.atomic_add(counter, 1, peer)  # every thread of every block of every PE adds to the peer's
    if cuda.threadIdx.x == 0 and cuda.blockIdx.x == 0:
        old[0] = shm.atomic_fetch_add(word[0:1], 3, peer)
        old[1] = shm.atomic_compare_swap(word[1:2], 0, 9, peer)
        old[2] = shm.atomic_swap(word[2:3], 4, peer)
        shm.atomic_or(word[3:4], 6, peer)


def test_amos(core, me, npes, peer):
    counter = core.array((1,), dtype="uint64")
    word = core.array((4,), dtype="int64")
    old = core.array((3,), dtype="int64")
    done(core)
    _amo_kernel[4, 64](counter, word, old, peer)
    done(core)
    assert host(counter)[0] == 4 * 64  # exactly one PE adds into each counter
    assert list(host(word)) == [3, 9, 4, 6] and list(host(old)) == [0, 0, 0]
    for a in (old, word, counter):
        core.free_array(a)


@shm.jit
def _post_kernel(flags, peer):
    if cuda.threadIdx.x == 0:
        shm.p(flags[0:1], 1, peer)
        shm.fence()
        shm.atomic_set(flags[1:2], 2, peer)


@shm.jit
def _wait_kernel(flags, status, out):
    if cuda.threadIdx.x == 0:
        out[0] = shm.wait_until(flags[1:2], shm.CMP_EQ, 2)
        out[1] = shm.test(flags[0:1], shm.CMP_EQ, 1)
        shm.wait_until_all(flags[0:2], shm.CMP_NE, 0)
        out[2] = shm.wait_until_any(flags, shm.CMP_EQ, 2, status)
        out[3] = shm.test_some(flags, shm.CMP_NE, 0)


def test_waits(core, me, npes, peer):
    flags = core.array((3,), dtype="int32")
    status = core.array((3,), dtype="int32")
    out = core.array((4,), dtype="int32")
    done(core)
    _post_kernel[1, 32](flags, peer)
    _wait_kernel[1, 32](flags, status, out)  # waits for what the left PE's first kernel posted
    done(core)
    assert list(host(out)) == [2, 1, 1, 2]
    for a in (out, status, flags):
        core.free_array(a)


@shm.jit
def _barrier_kernel(slots, rounds, peer):
    # each round: write my round number into the peer's slot, barrier, read mine
    for r in range(rounds):
        if cuda.threadIdx.x == 0:
            shm.p(slots[r:r + 1], r + 1, peer)
        shm.barrier_all_block()
        if cuda.threadIdx.x == 0 and slots[r] != r + 1:
            slots[rounds] = r + 1  # first round the barrier did not order


def test_barriers(core, me, npes, peer):
    rounds = 50
    slots = core.array((rounds + 1,), dtype="int32")
    done(core)
    _barrier_kernel[1, 64](slots, rounds, peer)
    done(core)
    got = host(slots)
    assert got[rounds] == 0 and (got[:rounds] == np.arange(1, rounds + 1)).all()
    core.free_array(slots)


@shm.jit
def _collective_kernel(src, summed, gathered, bcast, a2a_src, a2a_dst):
    shm.reduce_block(shm.TEAM_WORLD, summed, src, "sum")
    shm.fcollect_block(shm.TEAM_WORLD, gathered, src)
    shm.broadcast_block(shm.TEAM_WORLD, bcast, src, 1)
    shm.alltoall_block(shm.TEAM_WORLD, a2a_dst, a2a_src)


def test_collectives(core, me, npes):
    n = 256
    src = core.array((n,), dtype="float32")
    summed = core.array((n,), dtype="float32")
    gathered = core.array((n * npes,), dtype="float32")
    bcast = core.array((n,), dtype="float32")
    a2a_src = core.array((4 * npes,), dtype="int32")
    a2a_dst = core.array((4 * npes,), dtype="int32")
    fill(src, np.full(n, me + 1))
    fill(a2a_src, np.full(4 * npes, me * 100))
    done(core)
    _collective_kernel[1, 128](src, summed, gathered, bcast, a2a_src, a2a_dst)
    done(core)
    assert (host(summed) == npes * (npes + 1) / 2).all()
    assert (host(gathered) == np.repeat(np.arange(1, npes + 1), n)).all()
    assert (host(bcast) == 2).all()
    assert (host(a2a_dst) == np.repeat(np.arange(npes) * 100, 4)).all()
    for a in (a2a_dst, a2a_src, bcast, gathered, summed, src):
        core.free_array(a)


@shm.jit
def _scoped_collective_kernel(src, rs_block, rs_warp, rs_thread, red_warp, bits, xor_warp, a2a_src, a2a_dst):
    # the warp and thread forms, and the reduce-scatters of every scope, one after another
    shm.reducescatter_block(shm.TEAM_WORLD, rs_block, src, "sum")
    if cuda.threadIdx.x < 32:
        shm.reducescatter_warp(shm.TEAM_WORLD, rs_warp, src, "max")
        shm.reduce_warp(shm.TEAM_WORLD, red_warp, src, "prod")
        shm.reduce_warp(shm.TEAM_WORLD, xor_warp, bits, "xor")
        shm.alltoall_warp(shm.TEAM_WORLD, a2a_dst, a2a_src)
    if cuda.threadIdx.x == 0:
        shm.reducescatter(shm.TEAM_WORLD, rs_thread, bits, "or")


def test_warp_collectives_and_reducescatter(core, me, npes):
    """reduce_warp, alltoall_warp and reducescatter (thread, warp, block) move the values
    nvshmem4py's do: block `me` of every PE's source, reduced, lands in this PE's destination."""
    n = 64  # elements per member's block
    src = core.array((n * npes,), dtype="float32")
    rs_block = core.array((n,), dtype="float32")
    rs_warp = core.array((n,), dtype="float32")
    red_warp = core.array((n * npes,), dtype="float32")
    bits = core.array((n * npes,), dtype="int64")
    rs_thread = core.array((n,), dtype="int64")
    xor_warp = core.array((n * npes,), dtype="int64")
    a2a_src = core.array((3 * npes,), dtype="int32")
    a2a_dst = core.array((3 * npes,), dtype="int32")
    index = np.arange(n * npes)
    fill(src, (me + 1) * 1000 + index)  # block j of PE p: (p + 1) * 1000 + j * n + i
    fill(bits, np.left_shift(1, me) * (index % 3 + 1))
    fill(a2a_src, me * 100 + np.arange(3 * npes))
    done(core)
    _scoped_collective_kernel[1, 128](src, rs_block, rs_warp, rs_thread, red_warp, bits, xor_warp, a2a_src, a2a_dst)
    done(core)
    pes = np.arange(npes)[:, None]
    every = (pes + 1) * 1000 + index[None, :]  # every PE's src, one row each
    mine = every[:, me * n:(me + 1) * n]
    assert (host(rs_block) == mine.sum(axis=0)).all()
    assert (host(rs_warp) == mine.max(axis=0)).all()
    assert np.allclose(host(red_warp), every.astype(np.float64).prod(axis=0), rtol=1e-6)
    every_bits = np.left_shift(1, pes) * (index[None, :] % 3 + 1)
    assert (host(xor_warp) == np.bitwise_xor.reduce(every_bits, axis=0)).all()
    assert (host(rs_thread) == np.bitwise_or.reduce(every_bits[:, me * n:(me + 1) * n], axis=0)).all()
    sent = pes * 100 + np.arange(3 * npes)[None, :]  # a2a_src of every PE
    assert (host(a2a_dst) == sent[:, me * 3:(me + 1) * 3].reshape(-1)).all()
    for a in (a2a_dst, a2a_src, xor_warp, rs_thread, bits, red_warp, rs_warp, rs_block, src):
        core.free_array(a)


# One block-scope collective per kernel, launched as one block of 1024 threads with no register
# cap: each launches only if it needs at most 64 registers per thread (test_numba_compile.py
# checks that without a GPU).
@shm.jit
def _reduce_block_1024(dst, src):
    shm.reduce_block(shm.TEAM_WORLD, dst, src, "sum")


# A block-scope reduce-scatter needs 70 registers per thread uncapped: a 1024-thread block needs
# the cap (64, no spill), as a CUDA C++ kernel needs __launch_bounds__(1024).
@shm.jit(max_registers=64)
def _reducescatter_block_1024(dst, src):
    shm.reducescatter_block(shm.TEAM_WORLD, dst, src, "max")


@shm.jit
def _broadcast_block_1024(dst, src):
    shm.broadcast_block(shm.TEAM_WORLD, dst, src, 1)


@shm.jit
def _fcollect_block_1024(dst, src):
    shm.fcollect_block(shm.TEAM_WORLD, dst, src)


@shm.jit
def _alltoall_block_1024(dst, src):
    shm.alltoall_block(shm.TEAM_WORLD, dst, src)


def test_block_collectives_launch_with_1024_threads(core, me, npes):
    """Each block-scope collective, alone in a kernel of 1024 threads without max_registers,
    launches and moves nvshmem4py's values; more elements than threads, with a ragged tail."""
    n = 5 * 1024 + 77
    index = np.arange(n * npes)
    src = core.array((n * npes,), dtype="float32")
    fill(src, (me + 1) * 1000 + index % 4099)  # exact in fp32 summed over the PEs
    pes = np.arange(npes)[:, None]
    every = (pes + 1) * 1000 + index[None, :] % 4099  # every PE's src, one row each
    cases = (
        (_reduce_block_1024, n, every[:, :n].sum(axis=0)),
        (_reducescatter_block_1024, n, every[:, me * n:(me + 1) * n].max(axis=0)),
        (_broadcast_block_1024, n * npes, every[1 % npes]),
        (_fcollect_block_1024, n * npes * npes, every.reshape(-1)),
        (_alltoall_block_1024, n * npes, every[:, me * n:(me + 1) * n].reshape(-1)),
    )
    for kernel, size, expected in cases:
        dst = core.array((size,), dtype="float32")
        fill(dst, np.zeros(size))
        done(core)
        kernel[1, 1024](dst, src)
        done(core)
        got = host(dst)
        assert (got == expected).all(), f"{kernel.__name__}: {np.flatnonzero(got != expected)[:5]} wrong"
        core.free_array(dst)
    core.free_array(src)


@shm.jit
def _peer_kernel(arr, peer):
    view = shm.peer_array(arr, peer)
    if shm.is_reachable(arr, peer):
        for i in range(cuda.threadIdx.x, arr.size, cuda.blockDim.x):
            view[i] = shm.my_pe() + 1


def test_peer_arrays(core, me, npes, peer):
    arr = core.array((300,), dtype="int32")
    done(core)
    _peer_kernel[1, 64](arr, peer)
    done(core)
    assert (host(arr) == (me - 1) % npes + 1).all()
    core.free_array(arr)


@shm.jit
def _whoami(out):
    out[0] = shm.my_pe()
    out[1] = shm.n_pes()


def test_kernel_loaded_before_init_gets_the_state_at_init(core, me, npes):
    """The setup callback hands a module loaded while rshmem is stopped to the runtime, which
    writes the device state into it at the next init; a module loaded while running gets it at
    once, and keeps getting it across finalize + init."""
    from conftest import start

    out = cuda.device_array(2, dtype=np.int32)
    done(core)
    rshmem.finalize()
    _whoami[1, 1](out)  # first launch: Numba loads the module now, rshmem is not running
    cuda.synchronize()
    start("cuda")
    _whoami[1, 1](out)
    cuda.synchronize()
    assert list(out.copy_to_host()) == [me, npes]
    rshmem.finalize()
    start("cuda")  # a module published before is written again
    out2 = cuda.device_array(2, dtype=np.int32)
    _whoami[1, 1](out2)
    cuda.synchronize()
    assert list(out2.copy_to_host()) == [me, npes]


def test_host_api_takes_streams_of_every_kind(core, me, npes, peer):
    """nvshmem4py programs hand the host API Numba, cuda.core and torch streams and raw
    handles; each orders the call on that stream."""
    import torch

    try:
        from cuda.core import Stream
    except ImportError:  # cuda.core before 0.4
        from cuda.core.experimental import Stream

    dst = core.array((1024,), dtype="float32")
    src = core.array((1024,), dtype="float32")
    sig = core.array((1,), dtype="uint64")
    fill(src, np.full(1024, me + 1))
    nb = cuda.stream()
    handle = nb.handle
    raw = int(getattr(handle, "value", handle) or 0)
    streams = [nb, Stream.from_handle(raw), torch.cuda.Stream(), raw]
    done(core)
    for i, stream in enumerate(streams):
        core.put_signal(dst, src, sig, 1, core.SignalOp.SIGNAL_ADD, peer, stream=stream)
        core.signal_wait(sig, i + 1, core.ComparisonType.CMP_GE, stream=stream)
        core.barrier(core.Teams.TEAM_WORLD, stream=stream)
        torch.cuda.synchronize()
        cuda.synchronize()
    assert (host(dst) == (me - 1) % npes + 1).all() and host(sig)[0] == len(streams)
    done(core)
    for a in (sig, src, dst):
        core.free_array(a)
