"""torch's SymmetricMemory API on the "RSHMEM" backend (`rshmem.torch_symm_mem`), host side: the
C++ layer builds against the installed torch, registers, and torch's own `symm_mem.empty`,
`rendezvous`, buffer and signal-pad pointers, `get_buffer`, `barrier`, `put_signal` /
`wait_signal` (with a timeout), and the misuse run on the host backend's CPU heap, 2 PEs.
The GPU half (torch's kernels on rshmem memory, against torch's CUDA backend) is
test_symm_mem_gpu.py."""
from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

import rshmem

pytestmark = pytest.mark.multi


@pytest.fixture(scope="module")
def backend():
    import rshmem.torch_symm_mem as tsm

    symm_mem.set_backend("RSHMEM")
    return tsm


def me():
    return dist.get_rank()


def n():
    return dist.get_world_size()


def test_registered(backend):
    assert symm_mem.get_backend("cpu") == "RSHMEM"
    names = backend.load().functions()
    assert "rshmem_host_calloc" in names and "rshmem_host_signal_wait_until_on_stream" in names


def test_empty_rendezvous_and_peer_buffers(backend):
    t = symm_mem.empty(64, dtype=torch.float32, device="cpu")
    h = symm_mem.rendezvous(t, dist.group.WORLD)
    assert h.rank == me() and h.world_size == n()
    assert h.buffer_size == 64 * 4 and h.buffer_ptrs[me()] == t.data_ptr()
    assert len(set(h.buffer_ptrs)) == n() and len(h.signal_pad_ptrs) == n()
    assert h.multicast_ptr == 0
    assert symm_mem.rendezvous(t, dist.group.WORLD.group_name).buffer_ptrs == h.buffer_ptrs  # cached
    t.fill_(float(me()))
    h.barrier()
    for r in range(n()):
        assert torch.all(h.get_buffer(r, (64,), torch.float32) == r)
    h.barrier()  # every rank has read before any writes
    # writing a peer's buffer lands in the peer's tensor
    peer = (me() + 1) % n()
    h.get_buffer(peer, (8,), torch.float32, 8).fill_(100.0 + me())
    h.barrier(channel=1)
    assert torch.all(t[8:16] == 100.0 + (me() - 1) % n())
    assert torch.all(t[:8] == me())
    h.barrier()
    del h, t


def test_rendezvous_over_the_rshmem_process_group(backend):
    # The members' PE numbers are exchanged through the group itself: here a process group
    # written in Python (rshmem.torch_backend), which torch's C++ can reach only by the calls
    # such a group overrides.
    import rshmem.torch_backend as tb

    group = dist.new_group(backend="rshmem")
    t = symm_mem.empty(16, dtype=torch.float32, device="cpu")
    h = symm_mem.rendezvous(t, group)
    assert h.rank == group.rank() and h.world_size == group.size() == n()
    t.fill_(float(me()))
    h.barrier()
    for r in range(n()):
        assert torch.all(h.get_buffer(r, (16,), torch.float32) == r)
    h.barrier()
    del h, t
    dist.barrier()
    tb.release()


def test_signal_pad_zero_after_sync(backend):
    t = symm_mem.empty(16, dtype=torch.int32, device="cpu")
    h = symm_mem.rendezvous(t, dist.group.WORLD)
    words = symm_mem.get_signal_pad_size() // 8
    pad = h.get_signal_pad(me(), (words,), torch.int64)
    assert torch.all(pad == 0)  # calloc zero-fills the pad
    # Every rank has looked at its pad before any signals into it (rendezvous is no barrier).
    dist.barrier()
    for channel in range(3):
        h.barrier(channel=channel)
    peer = (me() + 1) % n()
    prev = (me() - 1) % n()
    for _ in range(3):  # early signals are counted, not lost
        h.put_signal(peer, channel=5)
    for _ in range(3):
        h.wait_signal(prev, channel=5, timeout_ms=30000)
    h.barrier()
    assert torch.all(pad == 0)


def test_put_signal_orders_data(backend):
    t = symm_mem.empty(1024, dtype=torch.int64, device="cpu")
    h = symm_mem.rendezvous(t, dist.group.WORLD)
    t.zero_()
    h.barrier()
    peer, prev = (me() + 1) % n(), (me() - 1) % n()
    h.get_buffer(peer, (1024,), torch.int64).copy_(torch.arange(1024) * (me() + 1))
    h.put_signal(peer, channel=2)
    h.wait_signal(prev, channel=2)
    assert torch.equal(t, torch.arange(1024) * (prev + 1))
    h.barrier()


def test_wait_signal_timeout(backend):
    t = symm_mem.empty(8, dtype=torch.uint8, device="cpu")
    h = symm_mem.rendezvous(t, dist.group.WORLD)
    if me() == 0:
        with pytest.raises(RuntimeError, match="timed out after 200 ms"):
            h.wait_signal(1, channel=7, timeout_ms=200)
    h.barrier()


def test_misuse(backend):
    t = symm_mem.empty(8, dtype=torch.float32, device="cpu")
    h = symm_mem.rendezvous(t, dist.group.WORLD)
    with pytest.raises(RuntimeError, match="must be another rank"):
        h.put_signal(me())
    with pytest.raises(RuntimeError, match="must be another rank"):
        h.wait_signal(n())
    with pytest.raises(RuntimeError, match="signal pad"):
        h.barrier(channel=1 << 20)
    with pytest.raises(RuntimeError, match="host backend has none"):
        h.buffer_ptrs_dev  # noqa: B018 - the property raises
    with pytest.raises(RuntimeError, match="not an allocation of the RSHMEM backend"):
        symm_mem.rendezvous(torch.zeros(4), dist.group.WORLD)
    with pytest.raises(RuntimeError, match="cuda backend|NVIDIA driver"):  # ours, or torch's without a GPU
        symm_mem.empty(4, device="cuda")
    h.barrier()


def test_release(backend):
    """Dead tensors' memory returns to the heap at release(), a collective."""
    backend.release()
    before = rshmem.heap_in_use()
    ts = [symm_mem.empty(1 << 16, dtype=torch.uint8, device="cpu") for _ in range(3)]
    assert rshmem.heap_in_use() > before
    for t in ts:
        symm_mem.rendezvous(t, dist.group.WORLD).barrier()
    del ts, t
    assert rshmem.heap_in_use() > before  # not yet: freeing is collective
    assert backend.release() == 3
    assert rshmem.heap_in_use() == before
