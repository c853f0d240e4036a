"""Measurements printed side by side, never asserted (speed is judged in benchmarks/, not here):
putmem_on_stream / getmem_on_stream at 256 MiB next to a torch copy between the two GPUs'
tensors (through a `peer_tensor` view) in the same run, and the latency of
`barrier_all_on_stream`. CUDA events, medians.

    torchrun --nproc-per-node 2 -m pytest -m gpu -s tests/tensors/test_cuda_measure.py
"""

import statistics

import pytest
import torch

import rshmem.torch as rtorch
from cuda_util import dev, rand, same_bits, settle, sym

pytestmark = [pytest.mark.gpu, pytest.mark.multi, pytest.mark.distinct_gpus]  # speed over NVLink: meaningless on a shared GPU

MIB = 1 << 20


@pytest.fixture(scope="module", autouse=True)
def on_cuda(cuda_backend):
    yield
    settle()


def median_ms(fn, reps: int, warmup: int = 3) -> float:
    """Median of `reps` timings of `fn` between two CUDA events on the current stream."""
    for _ in range(warmup):
        fn()
    marks = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        marks.append((a, b))
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in marks)


def test_measure_putmem_vs_torch_copy_and_barrier_latency(me, npes, peer, capsys):
    n = 256 * MIB
    dst = sym((n,), torch.uint8)
    src = rand(n, torch.uint8, seed=me)
    local = torch.empty(n, dtype=torch.uint8, device=dev())
    remote = rtorch.peer_tensor(dst, peer)
    lines = []
    if me == 0:  # one direction at a time: PE 0 moves data while the others wait
        cases = [
            ("putmem_on_stream, push", lambda: rtorch.putmem_on_stream(dst, src, peer)),
            ("torch peer_tensor.copy_(src), push", lambda: remote.copy_(src)),
            ("getmem_on_stream, pull", lambda: rtorch.getmem_on_stream(local, dst, peer)),
            ("torch local.copy_(peer_tensor), pull", lambda: local.copy_(remote)),
        ]
        for name, fn in cases:
            ms = median_ms(fn, reps=20)
            lines.append(f"{name:<40} {n // MIB} MiB  {ms:8.3f} ms  {n / ms / 1e6:8.1f} GB/s")
        # The timed copies moved real data: the last pull brought back the pushed bytes.
        assert same_bits(local, src)
    settle()
    per_call = median_ms(rtorch.barrier_all_on_stream, reps=1000, warmup=100)
    batch = 1000
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(batch):
        rtorch.barrier_all_on_stream()
    b.record()
    torch.cuda.synchronize()
    lines.append(
        f"barrier_all_on_stream, PE {me} of {npes}: median {per_call * 1e3:.2f} us per call (events around each), "
        f"{a.elapsed_time(b) * 1e3 / batch:.2f} us per call in a run of {batch}"
    )
    with capsys.disabled():
        print()
        for line in lines:
            print(f"[measure] {line}")
    del remote
    settle()
    rtorch.free_tensor(dst)
