"""Every misuse of the error list (docs/errors.md) raises the right exception.

One test per row of the spec: a PE out of range, a pointer outside the symmetric heap, sizes
that overflow the heap, allocations that differ between PEs, a dtype the operation does not take,
a peer that dies, a GPU shared by two PEs. (Calls before init: `test_init.py`.) After each
misuse the runtime must still work: the tests allocate, free and synchronize afterwards.
"""

import textwrap

import pytest
import torch

import rshmem
import rshmem.torch as rtorch
from conftest import run_pes


# ------------------------------------------------------------------------------ PE out of range


def test_pe_out_of_range_every_call(sym, npes):
    data = sym((8,), torch.int64)
    sig = sym((1,), rtorch.SIGNAL_DTYPE)
    local = torch.zeros(8, dtype=torch.int64)
    calls = {
        "putmem": lambda pe: rshmem.putmem(data, local, pe),
        "getmem": lambda pe: rshmem.getmem(local, data, pe),
        "put": lambda pe: rshmem.put(data, local, pe),
        "get": lambda pe: rshmem.get(local, data, pe),
        "p": lambda pe: rshmem.p(data[0], 1, pe),
        "g": lambda pe: rshmem.g(data[0], pe),
        "atomic_fetch_add": lambda pe: rshmem.atomic_fetch_add(data[0], 1, pe),
        "atomic_compare_swap": lambda pe: rshmem.atomic_compare_swap(data[0], 0, 1, pe),
        "signal_op": lambda pe: rshmem.signal_op(sig[0], 1, rshmem.SIGNAL_SET, pe),
        "putmem_signal": lambda pe: rshmem.putmem_signal(data, local, sig[0], 1, rshmem.SIGNAL_SET, pe),
        "ptr": lambda pe: rshmem.ptr(data.data_ptr(), pe),
        "peer_tensor": lambda pe: rtorch.peer_tensor(data, pe),
        "putmem_on_stream": lambda pe: rtorch.putmem_on_stream(data, local, pe),
    }
    for bad in (npes, npes + 7, -1):
        for name, call in calls.items():
            with pytest.raises(rshmem.PeOutOfRangeError, match=rf"PE {bad} is out of range.*{npes} PEs?,") as info:
                call(bad)
            assert isinstance(info.value, IndexError), name
    # nothing was written anywhere: this PE's words are still zero
    assert not data.any() and sig.item() == 0


def test_root_out_of_range_in_a_collective(sym, npes):
    a, b = sym((4,), torch.int32), sym((4,), torch.int32)
    with pytest.raises(rshmem.RshmemError, match=f"PE {npes}"):
        rshmem.broadcast(a, b, npes)
    rshmem.barrier_all()


# ------------------------------------------------------------------- outside the symmetric heap


def test_pointer_outside_the_heap_every_call(sym, peer):
    data = sym((8,), torch.int64)
    plain = torch.zeros(8, dtype=torch.int64)  # ordinary memory, not symmetric
    calls = {
        "putmem": lambda: rshmem.putmem(plain, data, peer),
        "getmem": lambda: rshmem.getmem(data, plain, peer),
        "p": lambda: rshmem.p(plain[0], 1, peer),
        "g": lambda: rshmem.g(plain[0], peer),
        "atomic_add": lambda: rshmem.atomic_add(plain[0], 1, peer),
        "signal_op": lambda: rshmem.signal_op(plain[0], 1, rshmem.SIGNAL_ADD, peer),
        "putmem_signal": lambda: rshmem.putmem_signal(data, plain, plain[0], 1, rshmem.SIGNAL_SET, peer),
        "signal_fetch": lambda: rshmem.signal_fetch(plain[0]),
        "wait_until": lambda: rshmem.wait_until(plain[0], rshmem.CMP_EQ, 0),
        "test_any": lambda: rshmem.test_any(plain, rshmem.CMP_EQ, 0),
        "peer_tensor": lambda: rtorch.peer_tensor(plain, peer),
        "free_tensor": lambda: rtorch.free_tensor(plain),
    }
    for name, call in calls.items():
        with pytest.raises(rshmem.NotSymmetricError, match="symmetric") as info:
            call()
        assert isinstance(info.value, ValueError), name
    assert not data.any()


def test_free_of_a_non_heap_address_raises_on_every_pe():
    start = rshmem.heap_in_use()
    plain = torch.zeros(4)
    with pytest.raises(rshmem.NotSymmetricError, match="not inside the symmetric heap"):
        rshmem.free(plain.data_ptr())
    with pytest.raises(rshmem.InvalidArgumentError, match="must be >= 0"):
        rshmem.free(-4096)
    assert rshmem.heap_in_use() == start
    a = rshmem.malloc(64)  # the collective call sequence is still in step on every PE
    rshmem.free(a)


def test_interior_and_double_free_raise():
    start = rshmem.heap_in_use()
    a = rshmem.malloc(512)
    with pytest.raises(rshmem.InvalidArgumentError, match="into the allocation"):
        rshmem.free(a + 256)
    rshmem.free(a)
    with pytest.raises(rshmem.InvalidArgumentError, match="freed twice"):
        rshmem.free(a)
    assert rshmem.heap_in_use() == start


def test_registering_a_programs_buffer_is_refused_where_it_cannot_be_done():
    # Only the cuda backend adopts a buffer (a cuMemCreate allocation: tests/tensors/
    # test_cuda_user_buffer.py); the host backend says so on every PE, and nothing registered
    # cannot be unregistered.
    if rshmem.backend() != "host":
        pytest.skip("the host backend's refusal")
    start, mapped = rshmem.heap_in_use(), rshmem.heap_mapped()
    local = torch.zeros(1 << 16, dtype=torch.uint8)
    # (In a job of several hosts, virtual ones included, that is said first.)
    with pytest.raises(rshmem.UnsupportedError, match="host backend.*cuMemCreate|PEs on [0-9]+ hosts"):
        rshmem.buffer_register_symmetric(local.data_ptr(), 4096)
    with pytest.raises(rshmem.InvalidArgumentError, match="multiple of the allocation granularity"):
        rshmem.buffer_register_symmetric(local.data_ptr(), 100)
    a = rshmem.malloc(4096)
    with pytest.raises(rshmem.InvalidArgumentError, match="not an address nvshmemx_buffer_register_symmetric returned"):
        rshmem.buffer_unregister_symmetric(a, 4096)
    rshmem.free(a)
    assert (rshmem.heap_in_use(), rshmem.heap_mapped()) == (start, mapped)


# -------------------------------------------------------------------- sizes that overflow the heap


def test_allocation_past_the_heap_bound_raises_and_leaves_the_heap_as_it_was():
    start, mapped = rshmem.heap_in_use(), rshmem.heap_mapped()
    with pytest.raises(rshmem.HeapExhaustedError, match="RSHMEM_SYMMETRIC_SIZE") as info:
        rshmem.malloc(1 << 50)
    assert isinstance(info.value, MemoryError)
    with pytest.raises(rshmem.HeapExhaustedError, match=str(4 << 50)):
        rtorch.create_symmetric_tensor((1 << 25, 1 << 25), torch.float32)
    assert (rshmem.heap_in_use(), rshmem.heap_mapped()) == (start, mapped)
    t = rtorch.create_symmetric_tensor((16,), torch.float32)  # allocation still works
    rtorch.free_tensor(t)
    assert rshmem.heap_in_use() == start


def test_sizes_beyond_the_address_space_raise():
    start = rshmem.heap_in_use()
    with pytest.raises(rshmem.InvalidArgumentError, match="overflows"):
        rshmem.calloc(1 << 62, 16)
    with pytest.raises(rshmem.InvalidArgumentError, match="address space"):
        rshmem.malloc(1 << 64)
    with pytest.raises(rshmem.InvalidArgumentError, match="address space"):
        rtorch.create_symmetric_tensor((1 << 40, 1 << 40), torch.float32)
    with pytest.raises(rshmem.InvalidArgumentError, match=">= 0"):
        rshmem.malloc(-1)
    with pytest.raises(rshmem.InvalidArgumentError, match="must be an int"):
        rshmem.malloc(64.0)
    with pytest.raises(rshmem.InvalidArgumentError, match="power of two"):
        rshmem.align(3, 64)
    assert rshmem.heap_in_use() == start


@pytest.mark.single
def test_small_heap_bound_fills_up_then_recovers():
    code = textwrap.dedent(
        """
        import rshmem
        rshmem.init()
        start = rshmem.heap_in_use()
        big = rshmem.malloc(200 << 20)
        try:
            rshmem.malloc(100 << 20)
        except rshmem.HeapExhaustedError as e:
            print("EXHAUSTED", e)
        assert rshmem.heap_in_use() == start + (200 << 20), rshmem.heap_in_use()
        rshmem.free(big)
        again = rshmem.malloc(100 << 20)
        rshmem.free(again)
        assert rshmem.heap_in_use() == start
        rshmem.finalize()
        print("OK")
        """
    )
    (pe,) = run_pes(code, 1, env={"RSHMEM_SYMMETRIC_SIZE": "256M"})
    assert pe.returncode == 0, pe.stdout + pe.stderr
    assert "EXHAUSTED" in pe.stdout and str(256 << 20) in pe.stdout and "RSHMEM_SYMMETRIC_SIZE" in pe.stdout
    assert pe.stdout.rstrip().endswith("OK")


# ------------------------------------------------------------- allocations that differ between PEs


@pytest.mark.multi
def test_mismatched_allocations_raise_on_every_pe(me):
    start = rshmem.heap_in_use()
    with pytest.raises(rshmem.MismatchError, match="differs between PEs"):
        rshmem.malloc(64 if me == 0 else 128)
    with pytest.raises(rshmem.MismatchError, match=f"PE {me} \\(this PE\\)"):
        rtorch.create_symmetric_tensor((4 + me,), torch.float32)
    with pytest.raises(rshmem.MismatchError):
        rshmem.align(256 if me == 0 else 4096, 64)
    assert rshmem.heap_in_use() == start
    # one allocation freed by some PEs and another by the rest: neither is freed
    a, b = rshmem.malloc(64), rshmem.malloc(64)
    with pytest.raises(rshmem.MismatchError, match="differs between PEs"):
        rshmem.free(a if me == 0 else b)
    rshmem.free(a)
    rshmem.free(b)
    assert rshmem.heap_in_use() == start
    rshmem.barrier_all()


# --------------------------------------------------------------- dtypes an operation does not take


def test_dtypes_an_operation_does_not_take(sym, peer):
    f32 = sym((4,), torch.float32)
    i16 = sym((4,), torch.int16)
    cplx = sym((4,), torch.complex64)
    i32 = sym((4,), torch.int32)
    cases = {
        "p complex": lambda: rshmem.p(cplx[0], 1, peer),
        "g complex": lambda: rshmem.g(cplx[0], peer),
        "atomic on float": lambda: rshmem.atomic_fetch_add(f32[0], 1, peer),
        "atomic on int16": lambda: rshmem.atomic_swap(i16[0], 1, peer),
        "signal on int32": lambda: rshmem.signal_op(i32[0], 1, rshmem.SIGNAL_SET, peer),
        "wait_until on float": lambda: rshmem.wait_until(f32[0], rshmem.CMP_EQ, 0),
        "reduce of complex": lambda: rshmem.reduce(cplx, cplx, "sum"),
        "bitwise reduce of float": lambda: rshmem.reduce(f32, f32, "xor"),
        "test_all on int16": lambda: rshmem.test_all(i16, rshmem.CMP_EQ, 0),
        "collective of mixed dtypes": lambda: rshmem.fcollect(f32, i32),
        "unknown dtype name": lambda: rshmem.g(i32.data_ptr(), peer, dtype="int128"),
        "tensor of a non-torch dtype": lambda: rtorch.create_symmetric_tensor((2,), "float32"),
    }
    for name, call in cases.items():
        with pytest.raises(rshmem.DTypeError) as info:
            call()
        assert isinstance(info.value, TypeError), name
        assert any(word in str(info.value) for word in ("dtype", "int", "float", "complex")), (name, info.value)
    rshmem.barrier_all()


# ----------------------------------------------------------------------------- a peer that dies


@pytest.mark.single
def test_a_dead_peer_raises_peer_died_instead_of_hanging():
    code = textwrap.dedent(
        """
        import os, sys, rshmem
        rshmem.init()
        if rshmem.my_pe() == 1:
            os._exit(0)  # dies without finalize, as a crashed process would
        try:
            rshmem.barrier_all()
            rshmem.barrier_all()
        except rshmem.PeerDiedError as e:
            print("PEER_DIED", e)
            sys.exit(0)
        print("no error")
        sys.exit(1)
        """
    )
    pe0, pe1 = run_pes(code, 2, timeout=90)
    assert pe1.returncode == 0, pe1.stderr
    assert pe0.returncode == 0, pe0.stdout + pe0.stderr
    assert "PEER_DIED" in pe0.stdout and "PE 1" in pe0.stdout


# ---------------------------------------------------------------------------- a GPU shared by 2 PEs


@pytest.mark.gpu
@pytest.mark.single
def test_two_pes_on_one_gpu_raise_unless_allowed():
    code = textwrap.dedent(
        """
        import rshmem
        try:
            rshmem.init(backend="cuda", device=0)
        except rshmem.InvalidArgumentError as e:
            print("REFUSED", e)
        else:
            print("STARTED", rshmem.n_pes())
            rshmem.finalize()
        """
    )
    for pe in run_pes(code, 2, env={"RSHMEM_BACKEND": "cuda"}):
        assert pe.returncode == 0, pe.stdout + pe.stderr
        assert "REFUSED" in pe.stdout and "same GPU" in pe.stdout and "RSHMEM_ALLOW_SHARED_GPU=1" in pe.stdout
    for pe in run_pes(code, 2, env={"RSHMEM_BACKEND": "cuda", "RSHMEM_ALLOW_SHARED_GPU": "1"}):
        assert pe.returncode == 0, pe.stdout + pe.stderr
        assert "STARTED 2" in pe.stdout
