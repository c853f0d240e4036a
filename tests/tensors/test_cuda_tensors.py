"""Symmetric CUDA tensors on 2 GPUs: allocation, peer views, heap growth, freeing, misuse.

    torchrun --nproc-per-node 2 -m pytest -m gpu tests/tensors/test_cuda_tensors.py

Skipped without a GPU per PE or with fewer than 2 PEs. Every PE runs the same tests in the same
order (allocations and barriers are collective).
"""

import hashlib

import pytest
import torch

import rshmem
import rshmem.torch as rtorch
from cuda_util import dev, rand, same_bits, settle, sym

pytestmark = [pytest.mark.gpu, pytest.mark.multi]

ALL_DTYPES = [
    torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.uint16, torch.uint32,
    torch.uint64, torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.bool,
    torch.complex64, torch.float8_e4m3fn, torch.float8_e5m2,
]


@pytest.fixture(scope="module", autouse=True)
def on_cuda(cuda_backend):
    yield
    settle()


def test_backend_and_current_device():
    from rshmem import _cuda

    assert rshmem.backend() == "cuda"
    # init made this PE's GPU torch's current device; one PE per GPU unless shared.
    assert torch.cuda.current_device() == _cuda.ordinal() == rtorch.device().index
    # 16 bytes naming the physical GPU, whatever the format torch prints its UUID in
    uuid = hashlib.md5(str(torch.cuda.get_device_properties(dev()).uuid).encode()).digest()
    mine = sym((16,), torch.uint8)
    mine.copy_(torch.tensor(list(uuid), dtype=torch.uint8))
    everyone = sym((rshmem.n_pes(), 16), torch.uint8)
    rshmem.fcollect(everyone, mine)
    settle()
    gpus = len({bytes(row) for row in everyone.cpu().tolist()})
    if rtorch.gpu_shared():  # RSHMEM_ALLOW_SHARED_GPU=1 with fewer GPUs than PEs
        assert gpus < rshmem.n_pes() and rshmem._native.gpu_sharers() > 1
    else:
        assert gpus == rshmem.n_pes() and rshmem._native.gpu_sharers() == 1
    settle()
    rtorch.free_tensor(everyone)
    rtorch.free_tensor(mine)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_create_any_dtype_is_zeroed_cuda_and_a_view_of_the_heap(dtype):
    t = rtorch.create_symmetric_tensor((3, 5), dtype)
    try:
        assert t.shape == (3, 5) and t.dtype == dtype and t.device == dev() and t.is_contiguous()
        assert not t.view(torch.uint8).any()
        assert rshmem.ptr(t.data_ptr(), rshmem.my_pe()) == t.data_ptr()
        t.view(torch.uint8).fill_(1)
        assert int(t.view(torch.uint8).sum()) == 15 * dtype.itemsize
    finally:
        settle()
        rtorch.free_tensor(t)


def test_int_shape_and_empty_tensor():
    a = rtorch.create_symmetric_tensor(7, torch.float32)
    b = rtorch.create_symmetric_tensor((0, 4), torch.float16)
    assert a.shape == (7,) and b.shape == (0, 4) and b.device == dev()
    assert rtorch.peer_tensor(b, (rshmem.my_pe() + 1) % rshmem.n_pes()).shape == (0, 4)
    rtorch.free_tensor(b)
    rtorch.free_tensor(a)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float8_e4m3fn, torch.int64], ids=str)
def test_a_write_through_peer_tensor_is_seen_by_the_peer(me, npes, peer, dtype):
    t = sym((64, 33), dtype)
    rtorch.peer_tensor(t, peer).copy_(rand(64 * 33, dtype, seed=me).view(64, 33))
    settle()
    left = (me - 1) % npes
    assert same_bits(t, rand(64 * 33, dtype, seed=left).view(64, 33))
    settle()
    rtorch.free_tensor(t)


def test_peer_tensor_reads_the_peers_copy_and_keeps_strides(me, npes, peer):
    t = sym((6, 4), torch.int32, fill=me)
    remote = rtorch.peer_tensor(t, peer)
    assert remote.device == dev()
    assert torch.equal(remote, torch.full((6, 4), peer, dtype=torch.int32, device=dev()))
    view = t[1:5:2, 1:3]
    rview = rtorch.peer_tensor(view, peer)
    assert rview.shape == view.shape and rview.stride() == view.stride()
    assert rview.data_ptr() == rshmem.ptr(view.data_ptr(), peer)
    assert torch.equal(rview, torch.full((2, 2), peer, dtype=torch.int32, device=dev()))
    settle()
    rtorch.free_tensor(t)


def test_create_symmetric_tensors_lists_every_local_pe(me, npes):
    ts = rtorch.create_symmetric_tensors((8,), torch.float32, me, npes)
    ts[me].fill_(float(me))
    settle()
    for i, t in enumerate(ts):
        assert t.device == dev()
        assert torch.equal(t, torch.full((8,), float(i), device=dev()))
    settle()
    rtorch.free_tensor(ts[me])


def test_dlpack_views_alias_local_and_peer_memory(me, npes, peer):
    # The runtime's DLPack capsules name this PE's GPU, also for a peer's copy (physically on the
    # peer's GPU): torch builds a view on this GPU without asking the driver, as kernels need.
    from rshmem import _native

    t = sym((4096,), torch.int32)
    local = torch.from_dlpack(_native.heap_view(t.data_ptr(), 4096 * 4)[0]).view(torch.int32)
    remote = torch.from_dlpack(_native.heap_view(rshmem.ptr(t.data_ptr(), peer), 4096 * 4)[0]).view(torch.int32)
    assert local.data_ptr() == t.data_ptr() and local.device == dev() and remote.device == dev()
    local.fill_(me)
    settle()
    assert torch.equal(remote, torch.full((4096,), peer, dtype=torch.int32, device=dev()))
    remote[:10].fill_(100 + me)
    settle()
    assert torch.equal(t[:10], torch.full((10,), 100 + (me - 1) % npes, dtype=torch.int32, device=dev()))
    del local, remote
    settle()
    rtorch.free_tensor(t)


def test_tensor_outlives_every_python_name_of_its_base(me, peer):
    """A slice keeps the view valid after the tensor it came from is dropped (torch holds the
    exporter, which holds the allocation record)."""
    t = sym((1024,), torch.float32, fill=3.0)
    base = t.data_ptr()
    tail = t[512:]
    remote_tail = rtorch.peer_tensor(tail, peer)
    keep = t  # free_tensor needs the original below
    del t
    import gc

    gc.collect()
    assert tail.data_ptr() == base + 512 * 4
    assert torch.equal(tail, torch.full((512,), 3.0, device=dev()))
    assert torch.equal(remote_tail, torch.full((512,), 3.0, device=dev()))
    settle()
    rtorch.free_tensor(keep)


def test_heap_growth_keeps_earlier_data_and_peer_views(me, npes, peer):
    """10 allocations, together larger than the heap's free space and each larger than its
    growth step, so the heap grows under tensors and peer views already handed out; all of them
    must still read and write the same memory."""
    mapped_before = rshmem.heap_mapped()
    mib = 1 << 20
    step = max(80 * mib, (mapped_before - rshmem.heap_in_use()) // 5 + 16 * mib)
    tensors, views = [], []
    for i in range(10):
        numel = (step + i * 4096) // 4
        t = rtorch.create_symmetric_tensor((numel,), torch.int32)
        t.copy_(rand(numel, torch.int32, seed=1000 * i + me))
        tensors.append(t)
        views.append(rtorch.peer_tensor(t, peer))
    settle()
    assert rshmem.heap_mapped() > mapped_before, "the heap did not grow"
    for i, (t, v) in enumerate(zip(tensors, views)):
        assert same_bits(t, rand(t.numel(), torch.int32, seed=1000 * i + me)), f"allocation {i} changed"
        assert same_bits(v, rand(t.numel(), torch.int32, seed=1000 * i + peer)), f"peer view {i} changed"
    settle()
    # Writes through the oldest views still land in the peer's oldest allocation.
    views[0][:1024].fill_(-me - 1)
    settle()
    assert torch.equal(tensors[0][:1024], torch.full((1024,), -((me - 1) % npes) - 1, dtype=torch.int32, device=dev()))
    settle()
    for t in reversed(tensors):
        rtorch.free_tensor(t)


# ------------------------------------------------------------------------------------- misuse


def test_peer_tensor_of_a_plain_cuda_tensor_is_not_symmetric(peer):
    plain = torch.zeros(16, device=dev())
    with pytest.raises(rshmem.NotSymmetricError, match="symmetric"):
        rtorch.peer_tensor(plain, peer)


def test_peer_tensor_of_a_cpu_tensor_is_not_symmetric(peer):
    with pytest.raises(rshmem.NotSymmetricError):
        rtorch.peer_tensor(torch.zeros(4), peer)


def test_peer_tensor_pe_out_of_range(npes):
    t = sym((4,), torch.float32)
    with pytest.raises(rshmem.PeOutOfRangeError, match=str(npes)):
        rtorch.peer_tensor(t, npes)
    with pytest.raises(IndexError):
        rtorch.peer_tensor(t, -1)
    with pytest.raises(rshmem.InvalidArgumentError, match="argument 'pe'"):
        rtorch.peer_tensor(t, "1")
    settle()
    rtorch.free_tensor(t)


def test_free_tensor_misuse_and_freed_tensor_is_refused(peer):
    t = sym((32,), torch.float32)
    remote = rtorch.peer_tensor(t, peer)
    with pytest.raises(rshmem.NotSymmetricError, match="free_tensor takes"):
        rtorch.free_tensor(t[1:])
    with pytest.raises(rshmem.NotSymmetricError, match="free_tensor takes"):
        rtorch.free_tensor(remote)
    with pytest.raises(rshmem.NotSymmetricError):
        rtorch.free_tensor(torch.zeros(4, device=dev()))
    settle()
    rtorch.free_tensor(t)
    with pytest.raises(rshmem.NotSymmetricError, match="freed already"):
        rtorch.free_tensor(t)
    with pytest.raises(rshmem.NotSymmetricError, match="freed"):
        rtorch.putmem_on_stream(t, torch.zeros(32, device=dev()), peer)
    with pytest.raises(rshmem.NotSymmetricError, match="freed"):
        rtorch.peer_tensor(remote, peer)


def test_bad_dtype_and_shape_are_refused():
    with pytest.raises(rshmem.DTypeError):
        rtorch.create_symmetric_tensor((4,), "float32")
    with pytest.raises(rshmem.InvalidArgumentError, match="negative"):
        rtorch.create_symmetric_tensor((4, -1), torch.float32)
