"""On the cuda backend: the host-side checks shared with the host backend, on CUDA
tensors and on-stream calls.

    torchrun --nproc-per-node 2 -m pytest -m gpu tests/tensors/test_cuda_security.py

Two PEs (they may share one GPU with RSHMEM_ALLOW_SHARED_GPU=1). Every PE runs the same tests in
the same order.
"""

import pytest
import torch

import rshmem
import rshmem.torch as rtorch
from conftest import start
from cuda_util import dev, settle, sym

pytestmark = [pytest.mark.gpu, pytest.mark.multi]


@pytest.fixture(scope="module", autouse=True)
def on_cuda(cuda_backend):
    yield
    settle()


def test_on_stream_calls_refuse_freed_memory_and_the_runtime_words(peer):
    src = torch.ones(4, dtype=torch.int64, device=dev())
    keep = sym((4,), torch.int64)
    gone = sym((4,), torch.int64)
    addr = gone.data_ptr()
    base = addr - rshmem._native.allocation_of(addr)["offset"]
    assert rshmem._native.allocation_of(base)["owner"] == "runtime"
    settle()
    rtorch.free_tensor(gone)
    stream = torch.cuda.current_stream().cuda_stream
    for where, why in ((addr, "in no live allocation"), (base, "runtime's own words")):
        for name, call in {
            "putmem_on_stream": lambda: rshmem._native.putmem_on_stream(where, src.data_ptr(), 32, peer, stream, False),
            "getmem_on_stream": lambda: rshmem._native.getmem_on_stream(src.data_ptr(), where, 32, peer, stream, False),
            "signal_op_on_stream": lambda: rshmem._native.signal_op_on_stream(where, 1, rshmem.SIGNAL_SET, peer, stream),
            "signal_wait_until_on_stream": lambda: rshmem._native.signal_wait_until_on_stream(where, rshmem.CMP_EQ, 0, stream),
            "putmem (host)": lambda: rshmem.putmem(where, src, peer, nbytes=32),
        }.items():
            with pytest.raises(rshmem.NotSymmetricError, match=why):
                call()
    settle()
    for _ in range(3):  # the barrier words are intact
        rtorch.barrier_all_on_stream()
        rshmem.barrier_all()
    settle()
    rtorch.free_tensor(keep)


def test_raw_local_addresses_on_cuda(peer):
    t = sym((4,), torch.int64)
    local = torch.arange(4, dtype=torch.int64, device=dev())
    rshmem._native.putmem(t.data_ptr(), local.data_ptr(), 32, rshmem.my_pe(), True)  # device memory: the driver's
    torch.cuda.synchronize()
    assert t.tolist() == [0, 1, 2, 3]
    with pytest.raises(rshmem.InvalidArgumentError, match="not readable memory"):
        rshmem.putmem(t, 0x1000, peer, nbytes=32)
    with pytest.raises(rshmem.InvalidArgumentError, match="not writable memory"):
        rshmem.getmem(0x1000, t, peer, nbytes=32)
    with pytest.raises(rshmem.InvalidArgumentError, match="not readable memory"):
        rshmem._native.putmem_on_stream(t.data_ptr(), 0x1000, 32, peer, torch.cuda.current_stream().cuda_stream)
    settle()
    rtorch.free_tensor(t)


def test_mismatched_host_collectives_on_cuda(me, npes):
    src, dst = sym((16,), torch.float32), sym((16,), torch.float32)
    settle()
    with pytest.raises(rshmem.MismatchError, match=r"reduce (sum|max) of 4 x float32"):
        rshmem.reduce(dst, src, ["sum", "max"][me % 2], nelems=4)
    with pytest.raises(rshmem.MismatchError, match=f"{4 + me} x float32"):
        rshmem.broadcast(dst, src, 0, nelems=4 + me)
    rshmem.reduce(dst, src, "sum", nelems=4)  # still in step
    settle()
    rtorch.free_tensor(dst)
    rtorch.free_tensor(src)


def test_cuda_tensors_after_finalize_stay_mapped(peer):
    t = sym((1024,), torch.float32, fill=2.0)
    view = rtorch.peer_tensor(t, peer)
    settle()
    with pytest.warns(rshmem.LiveTensorsWarning):
        rshmem.finalize()
    t.add_(1.0)  # a kernel on memory of the finalized heap: still mapped, no illegal address
    torch.cuda.synchronize()
    assert float(t.sum()) == 1024 * 3.0
    # The peer's copy is mapped too (it may be adding 1 to it right now).
    assert bool(((view == 2.0) | (view == 3.0)).all())
    del t, view
    start("cuda")
