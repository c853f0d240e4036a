"""Puts, gets, typed p/g, atomics, signals and waits from the host."""

import pytest
import torch

import rshmem
import rshmem.torch as rtorch

TYPED = [
    torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.uint16, torch.uint32,
    torch.uint64, torch.float16, torch.bfloat16, torch.float32, torch.float64,
]


def test_put_get_roundtrip(sym, me, peer):
    dst = sym((64,), torch.float32)
    src = torch.arange(64, dtype=torch.float32) + 100 * me
    rshmem.put(dst, src, peer)  # this PE writes into the next PE's dst
    rshmem.barrier_all()
    sender = (me - 1) % rshmem.n_pes()
    assert torch.equal(dst, torch.arange(64, dtype=torch.float32) + 100 * sender)
    back = torch.empty(64, dtype=torch.float32)
    rshmem.get(back, dst, peer)
    assert torch.equal(back, src)


def test_putmem_raw_addresses_and_partial(sym, me, peer):
    dst = sym((16,), torch.int64)
    src = torch.arange(16, dtype=torch.int64) * (me + 1)
    rshmem.putmem(dst.data_ptr(), src.data_ptr(), peer, nbytes=4 * 8)  # first 4 elements only
    rshmem.barrier_all()
    sender = (me - 1) % rshmem.n_pes()
    assert dst[:4].tolist() == [i * (sender + 1) for i in range(4)]
    assert not dst[4:].any()
    out = torch.zeros(16, dtype=torch.int64)
    rshmem.getmem(out, dst, peer, nbytes=32)
    assert out[:4].tolist() == src[:4].tolist()


def test_sizes_are_checked(sym, peer):
    dst = sym((4,), torch.float32)
    with pytest.raises(rshmem.InvalidArgumentError, match="holds only 16"):
        rshmem.putmem(dst, torch.zeros(8), peer, nbytes=32)
    with pytest.raises(rshmem.InvalidArgumentError, match="same size"):
        rshmem.put(dst, torch.zeros(5), peer)
    with pytest.raises(rshmem.InvalidArgumentError, match="contiguous"):
        rshmem.put(dst, torch.zeros(4, 2)[:, 0], peer)
    with pytest.raises(rshmem.InvalidArgumentError, match="pass nbytes"):
        rshmem.putmem(dst.data_ptr(), torch.zeros(4).data_ptr(), peer)
    with pytest.raises(rshmem.InvalidArgumentError):
        rshmem.putmem("not an address", torch.zeros(4), peer, nbytes=16)


@pytest.mark.parametrize("dtype", TYPED, ids=str)
def test_p_g_every_dtype(sym, dtype, me, peer):
    t = sym((2,), dtype)
    value = 1 + me + (0.5 if dtype.is_floating_point else 0)
    rshmem.p(t[1], value, peer)
    rshmem.barrier_all()
    sender = (me - 1) % rshmem.n_pes()
    expected = 1 + sender + (0.5 if dtype.is_floating_point else 0)
    assert t[1].item() == expected
    assert rshmem.g(t[1], peer) == value


def test_p_values_fit_the_dtype_or_are_refused(sym, me, peer):
    """p/g carry every integer of a dtype exactly (to the ends of int64 / uint64), round floats to
    the dtype, and refuse an integer outside the dtype or a float for an integer dtype."""
    for dtype, value in ((torch.int64, -(2**63)), (torch.int64, 2**63 - 1), (torch.uint64, 2**64 - 1),
                         (torch.int8, -128), (torch.uint16, 65535)):
        t = sym((1,), dtype)
        rshmem.p(t[0], value, me)
        assert rshmem.g(t[0], me) == value, dtype
    h = sym((1,), torch.float16)
    rshmem.p(h[0], 1 / 3, me)
    assert rshmem.g(h[0], me) == torch.tensor(1 / 3, dtype=torch.float16).item()
    small = sym((1,), torch.int8)
    unsigned = sym((1,), torch.uint8)
    with pytest.raises(rshmem.ArgumentRangeError, match="int8"):
        rshmem.p(small[0], 128, peer)
    with pytest.raises(rshmem.ArgumentRangeError):
        rshmem.p(unsigned[0], -1, peer)
    with pytest.raises(rshmem.ArgumentTypeError):
        rshmem.p(small[0], 2.5, peer)
    rshmem.barrier_all()
    assert small.item() == 0 and unsigned.item() == 0, "a refused p wrote nothing"


def test_p_bad_dtype_raises(sym, peer):
    t = sym((2,), torch.complex64)
    with pytest.raises(rshmem.DTypeError, match="complex64"):
        rshmem.p(t[0], 1, peer)
    with pytest.raises(rshmem.DTypeError):
        rshmem.g(t.data_ptr(), peer, dtype="float128")
    with pytest.raises(rshmem.InvalidArgumentError, match="dtype="):
        rshmem.g(t.data_ptr(), peer)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint32, torch.uint64], ids=str)
def test_atomics(sym, dtype, me, npes):
    word = sym((1,), dtype)
    rshmem.barrier_all()
    # every PE adds me+1 to PE 0's word
    rshmem.atomic_add(word[0], me + 1, 0)
    rshmem.barrier_all()
    total = npes * (npes + 1) // 2
    assert rshmem.atomic_fetch(word[0], 0) == total
    rshmem.barrier_all()
    if me == 0:
        assert rshmem.atomic_swap(word[0], 7, 0) == total
        assert rshmem.atomic_compare_swap(word[0], 8, 9, 0) == 7  # cond false: unchanged
        assert rshmem.atomic_compare_swap(word[0], 7, 9, 0) == 7
        assert rshmem.atomic_fetch_inc(word[0], 0) == 9
        assert rshmem.atomic_fetch_and(word[0], 0b1100, 0) == 10
        assert rshmem.atomic_fetch_or(word[0], 0b0011, 0) == 8
        assert rshmem.atomic_fetch_xor(word[0], 0b1111, 0) == 11
        rshmem.atomic_set(word[0], 5, 0)
        assert word[0].item() == 5
        if dtype.is_signed:
            rshmem.atomic_set(word[0], -3, 0)
            assert rshmem.atomic_fetch_add(word[0], -2, 0) == -3
            assert rshmem.atomic_fetch(word[0], 0) == -5
    rshmem.barrier_all()


def test_atomic_misuse(sym, peer):
    f = sym((2,), torch.float32)
    small = sym((2,), torch.int16)
    i = sym((2,), torch.int32)
    with pytest.raises(rshmem.DTypeError, match="int32"):
        rshmem.atomic_add(f[0], 1, peer)
    with pytest.raises(rshmem.DTypeError):
        rshmem.atomic_fetch(small[0], peer)
    with pytest.raises(rshmem.InvalidArgumentError, match="does not fit"):
        rshmem.atomic_set(i[0], 2**40, peer)
    with pytest.raises(rshmem.NotSymmetricError):
        rshmem.atomic_fetch(torch.zeros(1, dtype=torch.int64), peer)


def test_signal_set_add_and_wait(sym, me, npes, peer):
    sig = sym((npes,), rtorch.SIGNAL_DTYPE)
    rshmem.barrier_all()
    rshmem.signal_op(sig[me], 41, rshmem.SIGNAL_SET, peer)
    rshmem.signal_op(sig[me], 1, rshmem.SIGNAL_ADD, peer)
    sender = (me - 1) % npes
    assert rshmem.signal_wait_until(sig[sender], rshmem.CMP_EQ, 42) == 42
    assert rshmem.signal_fetch(sig[sender]) == 42
    rshmem.barrier_all()


def test_putmem_signal_delivers_data_before_signal(sym, me, npes, peer):
    data = sym((1024,), torch.float32)
    sig = sym((1,), torch.uint64)
    rshmem.barrier_all()
    src = torch.full((1024,), float(me + 1))
    rshmem.putmem_signal(data, src, sig[0], 1, rshmem.SIGNAL_ADD, peer)
    rshmem.signal_wait_until(sig[0], rshmem.CMP_GE, 1)
    sender = (me - 1) % npes
    assert torch.equal(data, torch.full((1024,), float(sender + 1)))
    rshmem.barrier_all()


def test_signal_needs_64bit_word(sym, peer):
    small = sym((1,), torch.int32)
    with pytest.raises(rshmem.DTypeError, match="64-bit"):
        rshmem.signal_op(small[0], 1, rshmem.SIGNAL_SET, peer)
    big = sym((1,), torch.int64)
    with pytest.raises(rshmem.InvalidArgumentError, match="signal operation"):
        rshmem.signal_op(big[0], 1, 77, peer)
    with pytest.raises(rshmem.InvalidArgumentError, match="comparison"):
        rshmem.signal_wait_until(big[0], 42, 0)


def test_strided_iput_iget(sym, me, npes, peer):
    prev = (me - 1) % npes
    grid = sym((24,), torch.int64)
    dev = grid.device
    src = torch.arange(16, dtype=torch.int64, device=dev) + 100 * me
    rshmem.barrier_all()
    rshmem.iput(grid, src, 3, 2, 8, peer)  # grid[3i] on peer = src[2i]
    rshmem.barrier_all()
    want = [100 * prev + 2 * (i // 3) if i % 3 == 0 else 0 for i in range(24)]
    assert grid.tolist() == want
    back = torch.zeros(8, dtype=torch.int64, device=dev)
    rshmem.iget(back, grid, 1, 3, 8, me)
    assert back.tolist() == [100 * prev + 2 * i for i in range(8)]
    # With tensors the strided range must fit; a bad call is refused before anything moves.
    with pytest.raises(rshmem.InvalidArgumentError, match="need"):
        rshmem.iput(grid, src, 4, 1, 8, peer)
    with pytest.raises(rshmem.InvalidArgumentError, match="negative"):
        rshmem.iget(back, grid, -1, 1, 2, me)
    with pytest.raises(rshmem.DTypeError):
        rshmem.iput(grid, src.to(torch.int32), 1, 1, 2, peer)
    rshmem.barrier_all()
    assert grid.tolist() == want


def test_wait_and_test_family(sym, me, npes, peer):
    flags = sym((4,), torch.int32)
    rshmem.barrier_all()
    assert rshmem.test(flags[0], rshmem.CMP_EQ, 0)
    assert not rshmem.test(flags[0], rshmem.CMP_NE, 0)
    # the previous PE sets flags 1 and 3 on this PE
    rshmem.p(flags[1], 5, peer)
    rshmem.p(flags[3], 5, peer)
    rshmem.quiet()
    rshmem.wait_until(flags[3], rshmem.CMP_EQ, 5)
    rshmem.wait_until_all(flags, rshmem.CMP_EQ, 5, status=[1, 0, 1, 0])
    assert rshmem.wait_until_any(flags, rshmem.CMP_EQ, 5) in (1, 3)
    assert sorted(rshmem.wait_until_some(flags, rshmem.CMP_EQ, 5)) == [1, 3]
    assert rshmem.test_all(flags, rshmem.CMP_GE, 0)
    assert not rshmem.test_all(flags, rshmem.CMP_EQ, 5)
    assert rshmem.test_any(flags, rshmem.CMP_GT, 4) in (1, 3)
    assert sorted(rshmem.test_some(flags, rshmem.CMP_GT, 4)) == [1, 3]
    assert rshmem.test_some(flags, rshmem.CMP_GT, 4, status=[0, 1, 0, 1]) == []
    # Fair, as NVSHMEM's: each scan starts one word further, so words 1 and 3, both ready, are
    # each returned within a few calls (the spec's example clears the word it got and polls on).
    assert {rshmem.test_any(flags, rshmem.CMP_EQ, 5) for _ in range(8)} == {1, 3}
    assert {rshmem.wait_until_any(flags, rshmem.CMP_EQ, 5) for _ in range(8)} == {1, 3}
    assert {rshmem.test_any(flags, rshmem.CMP_EQ, 5, status=[0, 1, 0, 0]) for _ in range(4)} == {3}
    with pytest.raises(rshmem.InvalidArgumentError, match="status"):
        rshmem.test_all(flags, rshmem.CMP_EQ, 5, status=[0])
    rshmem.barrier_all()


def test_fence_orders_puts_and_quiet_completes_them(sym, me, npes, peer):
    # Each PE writes into the next one (`peer`), so the previous PE writes here.
    prev = (me - 1) % npes
    data = sym((8,), torch.int64)
    flag = sym((1,), torch.int64)
    later = sym((1,), torch.int64)
    rshmem.barrier_all()
    rshmem.put(data, torch.full((8,), me + 7, dtype=torch.int64), peer)
    rshmem.fence()  # the data arrives before the flag
    rshmem.p(flag[0], 1, peer)
    rshmem.wait_until(flag[0], rshmem.CMP_EQ, 1)
    assert torch.equal(data, torch.full((8,), prev + 7, dtype=torch.int64))
    rshmem.p(later[0], me + 100, peer)
    rshmem.quiet()  # complete: sync_all (which does not quiet) is enough to see it
    rshmem.sync_all()
    assert int(later[0]) == prev + 100
    rshmem.barrier(rshmem.Team.WORLD)
    rshmem.sync(rshmem.Team.WORLD)
    assert int(flag[0]) == 1 and torch.equal(data, torch.full((8,), prev + 7, dtype=torch.int64))
