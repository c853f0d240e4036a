"""Device API on 2+ GPUs, functionally: a ring of block puts with signals, test_any /
wait_until_any rotating over ready entries, a guarded signal from a 4-warp program, puts and gets by thread, warp and block on random data, atomics from every PE.
Each memory-model guarantee (fences, quiet, barriers, waits) is its own test in
test_device_memory_model.py, which this file does not repeat.

Run on a machine with 2 GPUs joined by NVLink:
    PYTHONPATH=python torchrun --nproc-per-node 2 -m pytest tests/device/test_device_gpu.py -m gpu -q
Every PE runs the same tests in the same order (collective allocations and barriers require it).
Skipped without a GPU, without torchrun's WORLD_SIZE >= 2, or without the native extension.
"""
from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")
triton = pytest.importorskip("triton", reason="triton is not installed")
import triton.language as tl  # noqa: E402

pytestmark = pytest.mark.gpu

WORLD = int(os.environ.get("WORLD_SIZE", "1"))
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)
if WORLD < 2:
    pytest.skip("needs 2 PEs: run under torchrun --nproc-per-node 2", allow_module_level=True)

import rshmem  # noqa: E402
import rshmem.torch as rtorch  # noqa: E402
import rshmem.triton as rt  # noqa: E402
from rshmem.triton import language as L  # noqa: E402
from rshmem.triton import libshmem_device as shm  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def pe():
    torch.cuda.set_device(rtorch.device())
    if not rshmem.is_initialized():
        rshmem.init(backend="cuda")
    rt.install_load_hook()
    yield rshmem.my_pe()
    rshmem.barrier_all()


def symmetric(shape, dtype, fill=0):
    t = rtorch.create_symmetric_tensor(shape, dtype)
    t.fill_(fill)
    torch.cuda.synchronize()
    rshmem.barrier_all()
    return t


# ---------------------------------------------------------------- put + signal, wait (acquire)
@rt.jit
def ring_push_kernel(data, recv, sig, out, nbytes, n_elems, BLOCK: tl.constexpr):
    me = shm.my_pe()
    peer = (me + 1) % shm.n_pes()
    shm.putmem_signal_block(recv, data, nbytes, sig, 1, shm.SIGNAL_SET, peer)
    if L.tid(0) == 0:
        shm.signal_wait_until(sig, shm.CMP_EQ, 1)
    L.syncthreads()
    offs = tl.arange(0, BLOCK)
    x = tl.load(recv + offs, mask=offs < n_elems)
    tl.store(out + offs, x, mask=offs < n_elems)


def test_ring_push_putmem_signal_block(pe):
    n = 4096
    data = symmetric((n,), torch.float32)
    data.copy_(torch.arange(n, dtype=torch.float32, device="cuda") + 1000.0 * pe)
    recv = symmetric((n,), torch.float32, fill=-1)
    sig = symmetric((1,), torch.int64)
    out = torch.empty(n, dtype=torch.float32, device="cuda")
    torch.cuda.synchronize()
    rshmem.barrier_all()
    ring_push_kernel[(1,)](data, recv, sig, out, n * 4, n, BLOCK=n, num_warps=4)
    torch.cuda.synchronize()
    left = (pe - 1) % WORLD
    expected = torch.arange(n, dtype=torch.float32, device="cuda") + 1000.0 * left
    # Read inside the kernel right after the acquire: the data put before the signal is there.
    assert torch.equal(out, expected)
    assert int(sig.item()) == 1
    rshmem.barrier_all()


# ---------------------------------------------------------------- test_any / wait_until_any rotate
@rt.jit
def any_rounds_kernel(flags, status, out, n, ROUNDS: tl.constexpr, WAIT: tl.constexpr):
    # One thread asks ROUNDS times in a row; every included flag is ready all along.
    if L.tid(0) == 0:
        for k in range(ROUNDS):
            if WAIT:
                i = shm.wait_until_any(flags, n, status, shm.CMP_EQ, 1)
            else:
                i = shm.test_any(flags, n, status, shm.CMP_EQ, 1)
            tl.store(out + k, i)


@pytest.mark.parametrize("wait", [False, True], ids=["test_any", "wait_until_any"])
def test_any_rotates_over_every_ready_entry(pe, wait):
    # Calls that keep finding every entry ready must not keep answering the lowest index: a
    # caller that handles one index per call would starve the others (NVSHMEM rotates its
    # start; so does rshmem). Entry 2 is excluded by `status` and must never be answered.
    n = 5
    flags = torch.ones(n, dtype=torch.int64, device="cuda")
    status = torch.zeros(n, dtype=torch.int32, device="cuda")
    status[2] = 1
    rounds = 2 * n
    out = torch.full((rounds,), -7, dtype=torch.int64, device="cuda")
    any_rounds_kernel[(1,)](flags, status, out, n, ROUNDS=rounds, WAIT=wait, num_warps=1)
    torch.cuda.synchronize()
    got = out.tolist()
    # Only this thread advances the counter, so 2n consecutive calls start twice at each entry;
    # a start at the excluded entry 2 answers the next one, 3.
    counts = {i: got.count(i) for i in set(got)}
    assert counts == {0: 2, 1: 2, 3: 4, 4: 2}, got


# ---------------------------------------------------------------- execution model
@rt.jit
def guarded_signal_kernel(sig):
    peer = (shm.my_pe() + 1) % shm.n_pes()
    if L.tid(0) == 0:
        shm.signal_op(sig, 1, shm.SIGNAL_ADD, peer)
    shm.barrier_all_block()


def test_guarded_signal_op_from_4_warps_adds_exactly_one(pe):
    sig = symmetric((1,), torch.int64)
    # Signal words may be uint64 tensors too; pass this one as such where torch has the dtype.
    as_u64 = sig.view(torch.uint64) if hasattr(torch, "uint64") else sig
    guarded_signal_kernel[(1,)](as_u64, num_warps=4)
    torch.cuda.synchronize()
    rshmem.barrier_all()
    assert int(sig.item()) == 1


# ---------------------------------------------------------------- put / get / atomics by group
@rt.jit
def put_get_kernel(dst, src, got, nbytes, SCOPE: tl.constexpr):
    me = shm.my_pe()
    peer = (me + 1) % shm.n_pes()
    if SCOPE == "thread":
        if L.tid(0) == 0:
            shm.putmem(dst, src, nbytes, peer)
    elif SCOPE == "warp":
        # Each warp moves its own quarter.
        w = L.tid(0) // 32
        q = nbytes // 4
        shm.putmem_warp(dst.to(tl.pointer_type(tl.int8)) + w * q, src.to(tl.pointer_type(tl.int8)) + w * q, q, peer)
    else:
        shm.putmem_block(dst, src, nbytes, peer)
    shm.barrier_all_block()
    shm.getmem_block(got, dst, nbytes, peer)


@pytest.mark.parametrize("scope", ["thread", "warp", "block"])
def test_put_get_by_group_random_data(pe, scope):
    n = 1 << 16
    gen = torch.Generator(device="cuda").manual_seed(1234 + pe)
    src = symmetric((n,), torch.int32)
    src.copy_(torch.randint(-(1 << 31), (1 << 31) - 1, (n,), generator=gen, dtype=torch.int32, device="cuda"))
    dst = symmetric((n,), torch.int32, fill=0)
    got = symmetric((n,), torch.int32, fill=0)
    mine = src.clone()
    torch.cuda.synchronize()
    rshmem.barrier_all()
    put_get_kernel[(1,)](dst, src, got, n * 4, SCOPE=scope, num_warps=4)
    torch.cuda.synchronize()
    rshmem.barrier_all()
    left = (pe - 1) % WORLD
    expect_dst = rtorch.peer_tensor(src, left).clone()
    assert torch.equal(dst, expect_dst)       # left neighbour's data, put to us
    assert torch.equal(got, mine)             # our data, read back from the right neighbour
    rshmem.barrier_all()


@rt.jit
def atomics_kernel(c32, c64, u32, u64, old, root):
    me = shm.my_pe()
    if L.tid(0) == 0:
        shm.atomic_add(c32, me + 1, root)
        shm.atomic_fetch_add(c64, me + 1, root)
        shm.atomic_inc(u32, root)
        shm.atomic_fetch_inc(u64, root)
        # Exactly one PE wins the compare-and-swap from 0 on the second word.
        prev = shm.atomic_compare_swap(c64 + 1, 0, me + 1, root)
        tl.store(old, prev)
    shm.barrier_all_block()


def test_atomics_from_every_pe(pe):
    c32 = symmetric((2,), torch.int32)
    c64 = symmetric((2,), torch.int64)
    u32 = symmetric((2,), torch.int32)
    u64 = symmetric((2,), torch.int64)
    # uint pointers: view the same memory as unsigned where torch has the dtype.
    u32v = u32.view(torch.uint32) if hasattr(torch, "uint32") else u32
    u64v = u64.view(torch.uint64) if hasattr(torch, "uint64") else u64
    old = torch.full((1,), -7, dtype=torch.int64, device="cuda")
    atomics_kernel[(1,)](c32, c64, u32v, u64v, old, 0, num_warps=4)
    torch.cuda.synchronize()
    rshmem.barrier_all()
    total = sum(range(1, WORLD + 1))
    if pe == 0:
        assert int(c32[0].item()) == total
        assert int(c64[0].item()) == total
        assert int(u32[0].item()) == WORLD
        assert int(u64[0].item()) == WORLD
        assert 1 <= int(c64[1].item()) <= WORLD
    # The PE whose value is in the word saw 0; every other PE saw the winner's value.
    winner = int(rtorch.peer_tensor(c64, 0)[1].item())
    assert int(old.item()) == (0 if winner == pe + 1 else winner)
    rshmem.barrier_all()
