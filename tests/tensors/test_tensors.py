"""Symmetric tensors: allocation, peer views, aliasing, freeing, misuse."""

import pytest
import torch

import rshmem
import rshmem.torch as rtorch

ALL_DTYPES = [
    torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.uint16, torch.uint32,
    torch.uint64, torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.bool,
    torch.complex64, torch.float8_e4m3fn, torch.float8_e5m2,
]


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_create_any_dtype_is_zeroed_and_writable(dtype):
    t = rtorch.create_symmetric_tensor((3, 5), dtype)
    try:
        assert t.shape == (3, 5) and t.dtype == dtype and t.device.type == "cpu"
        assert t.is_contiguous()
        assert not t.view(torch.uint8).any()
        t.view(torch.uint8).fill_(1)
        assert t.view(torch.uint8).sum().item() == 15 * dtype.itemsize
        assert rshmem.ptr(t.data_ptr(), rshmem.my_pe()) == t.data_ptr()
    finally:
        rshmem.barrier_all()
        rtorch.free_tensor(t)


def test_int_shape_and_empty_tensor():
    a = rtorch.create_symmetric_tensor(7, torch.float32)
    b = rtorch.create_symmetric_tensor((0, 4), torch.float16)
    assert a.shape == (7,) and b.shape == (0, 4)
    rtorch.free_tensor(b)
    rtorch.free_tensor(a)


@pytest.mark.multi
def test_write_by_pe0_into_pe1_is_seen_by_pe1(me):
    t = rtorch.create_symmetric_tensor((4, 8), torch.float32)
    if me == 0:
        rtorch.peer_tensor(t, 1).copy_(torch.arange(32, dtype=torch.float32).view(4, 8))
    rshmem.barrier_all()
    if me == 1:
        assert torch.equal(t, torch.arange(32, dtype=torch.float32).view(4, 8))
    else:
        assert not t.any()
    rshmem.barrier_all()
    rtorch.free_tensor(t)


def test_peer_tensor_aliases_peer_memory(me, npes, peer):
    t = rtorch.create_symmetric_tensor((6, 4), torch.int32)
    t.copy_(torch.full((6, 4), me, dtype=torch.int32))
    rshmem.barrier_all()
    remote = rtorch.peer_tensor(t, peer)
    assert torch.equal(remote, torch.full((6, 4), peer, dtype=torch.int32))
    # a strided view keeps its strides and offset on the peer
    view = t[1:5:2, 1:3]
    remote_view = rtorch.peer_tensor(view, peer)
    assert remote_view.shape == view.shape and remote_view.stride() == view.stride()
    assert rshmem.ptr(view.data_ptr(), peer) == remote_view.data_ptr()
    rshmem.barrier_all()  # the peer has read this PE's tensor before it changes below
    # the own view shares memory with the tensor
    mine = rtorch.peer_tensor(t, me)
    mine[0, 0] = 1234
    assert t[0, 0].item() == 1234
    rshmem.barrier_all()
    rtorch.free_tensor(t)


def test_create_symmetric_tensors_list(me, npes):
    views = rtorch.create_symmetric_tensors((2, 3), torch.float16, me, npes)
    assert len(views) == npes
    assert views[me].data_ptr() == rshmem.ptr(views[me].data_ptr(), me)
    views[me].fill_(me + 1)
    rshmem.barrier_all()
    for i, v in enumerate(views):
        assert torch.equal(v, torch.full((2, 3), i + 1, dtype=torch.float16))
    rshmem.barrier_all()
    rtorch.free_tensor(views[me])


def test_create_and_free_1000_mixed_tensors_returns_heap():
    start = rshmem.heap_in_use()
    dtypes = [torch.float16, torch.int64, torch.uint8, torch.float32, torch.bfloat16, torch.float8_e4m3fn]
    live = []
    for i in range(1000):
        shape = (i % 7 + 1, (i * 13) % 17 + 1)
        live.append(rtorch.create_symmetric_tensor(shape, dtypes[i % len(dtypes)]))
        if i % 3 == 2:  # free out of order as we go
            rtorch.free_tensor(live.pop(len(live) // 2))
    assert rshmem.heap_in_use() > start
    while live:
        rtorch.free_tensor(live.pop())
    assert rshmem.heap_in_use() == start


def test_bad_dtype_and_shape_raise():
    with pytest.raises(rshmem.DTypeError, match="torch dtype"):
        rtorch.create_symmetric_tensor((2,), "float16")
    with pytest.raises(rshmem.InvalidArgumentError, match="negative"):
        rtorch.create_symmetric_tensor((2, -1), torch.float32)
    with pytest.raises(rshmem.InvalidArgumentError, match="shape"):
        rtorch.create_symmetric_tensor((2, 1.5), torch.float32)
    with pytest.raises(rshmem.InvalidArgumentError, match="shape"):
        rtorch.create_symmetric_tensor("ab", torch.float32)


def test_non_symmetric_tensor_raises():
    plain = torch.zeros(16, dtype=torch.float32)
    with pytest.raises(rshmem.NotSymmetricError):
        rtorch.peer_tensor(plain, rshmem.my_pe())
    with pytest.raises(rshmem.NotSymmetricError):
        rtorch.free_tensor(plain)
    with pytest.raises(rshmem.NotSymmetricError):
        rshmem.put(plain, plain, rshmem.my_pe())


def test_pe_out_of_range_raises(npes):
    t = rtorch.create_symmetric_tensor((4,), torch.float32)
    for bad in (npes, npes + 5, -1):
        with pytest.raises(rshmem.PeOutOfRangeError, match=str(bad)):
            rtorch.peer_tensor(t, bad)
        with pytest.raises(IndexError):
            rshmem.p(t[0], 1.0, bad)
    rtorch.free_tensor(t)


def test_double_free_and_view_free_raise():
    t = rtorch.create_symmetric_tensor((8,), torch.float32)
    with pytest.raises(rshmem.NotSymmetricError, match="not a view"):
        rtorch.free_tensor(t[2:])
    view = t[2:]
    rtorch.free_tensor(t)
    with pytest.raises(rshmem.NotSymmetricError, match="already freed"):
        rtorch.free_tensor(t)
    for gone in (t, view):  # the memory of a freed tensor is not symmetric memory any more
        with pytest.raises(rshmem.NotSymmetricError, match="freed already"):
            rtorch.peer_tensor(gone, rshmem.my_pe())

