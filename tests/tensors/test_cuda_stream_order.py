"""On the GPU: host calls given CUDA tensors run after the work queued on torch's
current stream, are refused inside CUDA graph capture, and on-stream calls replay in a graph
(docs/streams.md).

    RSHMEM_ALLOW_SHARED_GPU=1 torchrun --nproc-per-node 2 -m pytest -m gpu tests/tensors/test_cuda_stream_order.py

Each ordering test queues a producer on the current stream, a `torch.cuda._sleep` followed by
the write the host call depends on, checks that the stream is still busy when the host call is
made, and checks the result after a closing barrier. Without that order the host copy would run
on the runtime's private stream at once and move the bytes from before the producer's write. Two PEs
may share one GPU (the sleep then takes longer; nothing waits for the other process's kernel).
"""

import pytest
import torch

import rshmem
import rshmem.torch as rtorch
from cuda_util import dev, settle, sym

pytestmark = [pytest.mark.gpu]

# torch.cuda._sleep spins this many GPU cycles: 30-70 ms at 1.4-2 GHz, longer on a shared GPU,
# far longer than the host needs to reach the call.
GPU_SLEEP = 100_000_000
N = 1 << 16


@pytest.fixture(scope="module", autouse=True)
def on_cuda(cuda_backend):
    yield
    settle()


@pytest.fixture
def left(me, npes):
    return (me - 1) % npes


def produce(write) -> bool:
    """Queues a long kernel and then `write` on the current stream; returns whether the stream
    is still busy afterwards (it must be, or the test proves nothing)."""
    torch.cuda._sleep(GPU_SLEEP)
    write()
    return not torch.cuda.current_stream(dev()).query()


def test_putmem_sends_what_a_running_producer_writes(me, peer, left):
    dst = sym((N,), torch.float32, fill=0)
    src = torch.zeros(N, device=dev())
    torch.cuda.synchronize(dev())
    busy = produce(lambda: src.fill_(me + 1))
    rshmem.putmem(dst, src, peer)
    settle()
    assert busy, "the producer had finished before the host call: the test proves nothing"
    assert torch.equal(dst, torch.full((N,), float(left + 1), device=dev()))
    rtorch.free_tensor(dst)


def test_putmem_signal_and_the_signal_see_the_produced_data(me, peer, left):
    dst = sym((N,), torch.float32, fill=0)
    sig = sym((1,), torch.int64, fill=0)
    src = torch.zeros(N, device=dev())
    torch.cuda.synchronize(dev())
    busy = produce(lambda: src.fill_(me + 1))
    rshmem.putmem_signal(dst, src, sig[0], 1, "set", peer)
    assert rshmem.signal_wait_until(sig[0], "eq", 1) == 1
    assert torch.equal(dst, torch.full((N,), float(left + 1), device=dev()))
    settle()
    assert busy
    rtorch.free_tensor(sig)
    rtorch.free_tensor(dst)


def test_a_host_atomic_applies_after_a_queued_store(me):
    counter = sym((1,), torch.int64, fill=0)
    busy = produce(lambda: counter.fill_(10))
    old = rshmem.atomic_fetch_add(counter[0], 1, me)  # this PE's own word
    settle()
    assert busy and old == 10 and counter.item() == 11, (busy, old, counter.item())
    rtorch.free_tensor(counter)


def test_getmem_lands_after_a_queued_overwrite_of_its_destination(me, peer):
    """The program overwrites its local tensor on the stream, then fetches into it: the fetch
    must win, so the result is the peer's data, not the overwrite."""
    remote = sym((N,), torch.int32, fill=me + 5)
    local = torch.zeros(N, dtype=torch.int32, device=dev())
    torch.cuda.synchronize(dev())
    busy = produce(lambda: local.fill_(-1))
    rshmem.getmem(local, remote, peer)
    after = local.clone()  # queued after the host call returned: sees its bytes
    settle()
    assert busy
    assert torch.equal(after, torch.full((N,), peer + 5, dtype=torch.int32, device=dev()))
    rtorch.free_tensor(remote)


def test_a_host_reduction_reduces_what_the_producer_wrote(me, npes):
    src = sym((N,), torch.float32, fill=0)
    dst = sym((N,), torch.float32, fill=0)
    busy = produce(lambda: src.fill_(me + 1))
    rshmem.reduce(dst, src, torch.distributed.ReduceOp.SUM)
    settle()
    assert busy
    assert torch.equal(dst, torch.full((N,), float(npes * (npes + 1) // 2), device=dev()))
    rtorch.free_tensor(dst)
    rtorch.free_tensor(src)


def test_host_calls_are_refused_inside_graph_capture(peer):
    dst = sym((N,), torch.float32, fill=0)
    src = torch.ones(N, device=dev())
    torch.cuda.synchronize(dev())
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(rshmem.UnsupportedError, match="CUDA graph capture"):
        with torch.cuda.graph(graph):
            rshmem.putmem(dst, src, peer)
    settle()
    assert torch.equal(dst, torch.zeros(N, device=dev()))  # nothing ran at capture
    rtorch.free_tensor(dst)


def test_on_stream_puts_replay_in_a_cuda_graph(me, peer, left):
    dst = sym((N,), torch.float32, fill=0)
    src = torch.zeros(N, device=dev())
    torch.cuda.synchronize(dev())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        rtorch.putmem_on_stream(dst, src, peer)
    for step in (1, 2):
        src.fill_(10 * step + me)
        settle()
        graph.replay()
        settle()
        assert torch.equal(dst, torch.full((N,), float(10 * step + left), device=dev()))
    del graph
    rtorch.free_tensor(dst)
