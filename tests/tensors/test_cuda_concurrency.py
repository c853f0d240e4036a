"""On the GPU: barrier instances, per-team workspaces, eager kernel loading and the
lifetimes of on-stream calls, each where concurrency used to break it (docs/memory-model.md).

    RSHMEM_ALLOW_SHARED_GPU=1 torchrun --nproc-per-node 2 -m pytest -m gpu tests/tensors/test_cuda_concurrency.py

Two PEs may share one GPU: waits then progress by the GPU's time-slicing between the processes,
so delays here are long (tens of milliseconds on the GPU, half a second on the host) and every
wait is bounded (RSHMEM_DEBUG_WAIT_TIMEOUT_MS from conftest). No test needs two kernels of
different processes to be resident at once. Every PE runs the same tests in the same order;
results are asserted after a closing barrier, so a failure on one PE does not leave the other
waiting.

| defect | test |
|---|---|
| 1: a host barrier ran before this PE's queued stream barrier and matched the peer's | `test_host_barrier_after_a_queued_stream_barrier_waits_for_it` |
| 1: two CTAs in `barrier_all_block` satisfied each other | `test_two_ctas_in_barrier_all_block_each_wait_for_the_peer` |
| 1: stream barriers on two streams matched by run order, not call order | `test_stream_barriers_on_two_streams_match_in_call_order` |
| 1: `team_split_strided` read a peer's scratch before the peer wrote it | `test_team_split_after_a_queued_stream_barrier` |
| 2: reductions of two teams staged into the same workspace | `test_reductions_of_two_teams_at_once` |
| 3: kernel modules loaded (and published) on first use, inside graph capture | `test_first_collectives_of_a_runtime_captured_in_a_cuda_graph` |
| 5: a local tensor freed before its on-stream copy ran | `test_local_tensor_dropped_before_the_stream_ran[...]` |
"""

import time

import pytest
import torch
import triton.language as tl

import rshmem
import rshmem.torch as rtorch
import rshmem.triton as rt
from cuda_util import dev, rand, ref_reduce, same_bits, settle, sym
from rshmem.triton import language as L
from rshmem.triton import libshmem_device as shm

pytestmark = [pytest.mark.gpu, pytest.mark.multi]

# torch.cuda._sleep spins this many GPU cycles: 30-70 ms at 1.4-2 GHz, longer on a shared GPU.
GPU_SLEEP = 100_000_000
# A host pause well past GPU_SLEEP, so a PE's delayed stream work has run before it goes on.
HOST_PAUSE = 0.5


@pytest.fixture(scope="module", autouse=True)
def on_cuda(cuda_backend):
    rt.install_load_hook()
    yield
    settle()


@pytest.fixture
def left(me, npes):
    return (me - 1) % npes


def side_stream() -> torch.cuda.Stream:
    s = torch.cuda.Stream(dev())
    s.wait_stream(torch.cuda.current_stream(dev()))
    return s


def delay(stream: torch.cuda.Stream) -> None:
    with torch.cuda.stream(stream):
        torch.cuda._sleep(GPU_SLEEP)


def free(*ts):
    settle()
    for t in ts:
        rtorch.free_tensor(t)


# ----------------------------------------------------------------------- 1: barrier instances


def test_host_barrier_after_a_queued_stream_barrier_waits_for_it(me):
    """Every PE queues a barrier on a delayed stream (instance 1), then a host barrier
    (instance 2). PE 1 writes PE 0's flag between its two; PE 0's host barrier must not return
    before that, though it runs on the host before PE 0's own stream barrier has run."""
    flag = sym((1,), torch.int64, fill=0)
    side = side_stream()
    delay(side)
    rtorch.barrier_all_on_stream(side)
    seen = None
    if me == 1:
        time.sleep(HOST_PAUSE)  # PE 1's stream barrier ran long ago
        rshmem.p(flag, 1, 0)
        rshmem.barrier_all()
    else:
        rshmem.barrier_all()
        seen = rshmem.g(flag, me)
    settle()
    if me == 0:
        assert seen == 1, "PE 0's host barrier returned before PE 1's host barrier (it matched PE 1's stream barrier)"
    free(flag)


@rt.jit
def two_cta_barrier_kernel(flag, out, delay_ns):
    """PE 0: two CTAs, one barrier_all_block each, then each reads its flag. Other PEs: CTA 0
    waits `delay_ns`, PE 1's writes 1 into PE 0's flag, then two barriers (as many as PE 0's)."""
    me = shm.my_pe()
    pid = tl.program_id(0)
    if me == 0:
        shm.barrier_all_block()
        if L.tid(0) == 0:
            tl.store(out + pid, shm.g(flag, 0))
    elif pid == 0:
        if L.tid(0) == 0:
            start = L.globaltimer()
            while L.globaltimer() - start < delay_ns:
                pass
            if me == 1:
                shm.int_p(flag, 1, 0)
        shm.barrier_all_block()
        shm.barrier_all_block()


def test_two_ctas_in_barrier_all_block_each_wait_for_the_peer(me):
    flag = sym((1,), torch.int32, fill=0)
    out = torch.full((2,), -1, dtype=torch.int32, device=dev())
    two_cta_barrier_kernel[(2,)](flag, out, 50_000_000, num_warps=4)
    settle()
    if me == 0:
        assert out.tolist() == [1, 1], (
            f"PE 0's CTAs read {out.tolist()}: a CTA left its barrier before PE 1 arrived (its arrival was "
            "counted for the other CTA's instance)")
    free(flag)


def test_stream_barriers_on_two_streams_match_in_call_order(me, peer, left):
    """Barrier 1 on a delayed stream after a put, barrier 2 on an idle stream, then a read on
    the idle stream: the read comes after barrier 2, so after every PE's put."""
    n = 1 << 16
    dst = sym((n,), torch.uint8, fill=0)
    data = rand(n, torch.uint8, seed=me)
    s1, s2 = side_stream(), side_stream()
    delay(s1)
    rtorch.putmem_on_stream(dst, data, peer, stream=s1)
    rtorch.barrier_all_on_stream(s1)
    rtorch.barrier_all_on_stream(s2)
    got = torch.empty(n, dtype=torch.uint8, device=dev())
    with torch.cuda.stream(s2):
        got.copy_(dst)
    settle()
    assert same_bits(got, rand(n, torch.uint8, seed=left)), "the barrier on the idle stream ran as instance 1"
    del data, got
    free(dst)


# ------------------------------------------------------------------ 2: a workspace per team


def test_reductions_of_two_teams_at_once(me, npes):
    """Two on-stream reductions, on TEAM_WORLD and on a split team of the same PEs (another
    slot), start together on two streams; each must sum its own sources. Four 128 KiB chunks
    each, so both loop through their workspace."""
    team = rshmem.team_split_strided(rshmem.Team.WORLD, 0, 1, npes)
    n = 4 * (128 << 10) // 4
    src_a, src_b = sym((n,), torch.int32), sym((n,), torch.int32)
    dst_a, dst_b = sym((n,), torch.int32), sym((n,), torch.int32)
    src_a.copy_(rand(n, torch.int32, seed=me))
    src_b.copy_(rand(n, torch.int32, seed=1000 + me))
    settle()
    s1, s2 = side_stream(), side_stream()
    delay(s1)
    delay(s2)
    rtorch.reduce_on_stream(dst_a, src_a, "sum", rshmem.Team.WORLD, stream=s1)
    rtorch.reduce_on_stream(dst_b, src_b, "sum", team, stream=s2)
    settle()
    want_a = ref_reduce("sum", [rand(n, torch.int32, seed=p).cpu() for p in range(npes)])
    want_b = ref_reduce("sum", [rand(n, torch.int32, seed=1000 + p).cpu() for p in range(npes)])
    ok_a, ok_b = same_bits(dst_a.cpu(), want_a), same_bits(dst_b.cpu(), want_b)
    rshmem.team_destroy(team)
    free(src_a, src_b, dst_a, dst_b)
    assert ok_a and ok_b, f"world reduction right: {ok_a}, split-team reduction right: {ok_b}"


# ------------------------------------------------------------- 3: every module loaded at init


def test_first_collectives_of_a_runtime_captured_in_a_cuda_graph(me, npes):
    """Right after init, the first fcollect and reduction of the runtime happen inside CUDA graph
    capture (global mode: no synchronizing call allowed), then the graph replays twice."""
    from conftest import start

    rshmem.finalize()
    start("cuda")  # a fresh runtime: no collective has run on it yet
    n = 4096
    src = sym((n,), torch.float32)
    src.copy_(rand(n, torch.float32, seed=me))
    gathered, summed = sym((npes * n,), torch.float32), sym((n,), torch.float32)
    settle()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        rtorch.fcollect_on_stream(gathered, src)
        rtorch.reduce_on_stream(summed, src, "sum")
    for _ in range(2):
        gathered.zero_()
        summed.zero_()
        settle()
        graph.replay()
        settle()
        want = torch.cat([rand(n, torch.float32, seed=p) for p in range(npes)])
        assert same_bits(gathered, want)
        assert same_bits(summed.cpu(), ref_reduce("sum", [rand(n, torch.float32, seed=p).cpu() for p in range(npes)]))
    del graph
    free(src, gathered, summed)


# ------------------------------------------------------- 5: local tensors of on-stream calls


@pytest.mark.parametrize("op", ["putmem", "putmem_signal", "getmem"])
def test_local_tensor_dropped_before_the_stream_ran(me, peer, left, op):
    """The local tensor of an on-stream call on a delayed stream is dropped at once, and a new
    tensor of the same size is made and filled on the current stream. torch's allocator must not
    give it the dropped tensor's memory before the copy has run: the peer must get the original
    bytes (put), and the new tensor must keep its own (get)."""
    n = 1 << 20
    remote = sym((n,), torch.uint8, fill=0)
    sig = sym((1,), torch.int64, fill=0)
    if op == "getmem":
        remote.copy_(rand(n, torch.uint8, seed=me))
        settle()
    side = side_stream()
    delay(side)
    local = rand(n, torch.uint8, seed=me) if op != "getmem" else torch.empty(n, dtype=torch.uint8, device=dev())
    side.wait_stream(torch.cuda.current_stream(dev()))
    if op == "putmem":
        rtorch.putmem_on_stream(remote, local, peer, stream=side)
    elif op == "putmem_signal":
        rtorch.putmem_signal_on_stream(remote, local, sig[0], 1, rshmem.SIGNAL_SET, peer, stream=side)
    else:
        rtorch.getmem_on_stream(local, remote, peer, stream=side)
    del local
    other = torch.empty(n, dtype=torch.uint8, device=dev())
    other.fill_(0xAB)
    settle()
    if op == "getmem":
        assert bool((other == 0xAB).all()), "the delayed get wrote into a tensor made after its destination was dropped"
    else:
        assert same_bits(remote, rand(n, torch.uint8, seed=left)), "the peer got the bytes of a later tensor"
    if op == "putmem_signal":
        assert int(sig.item()) == 1
    del other
    free(remote, sig)


# --------------------------------------------------------- 1: team_split_strided (runs last)


def test_team_split_after_a_queued_stream_barrier(me, npes):
    """A split's host barriers come after this PE's queued stream barrier: PE 0 must not read
    PE 1's arguments before PE 1 wrote them (stale ones mismatch, or the split hangs). Last in
    the file: without the fix PE 0 fails with a mismatch and PE 1 with a timeout, which leaves the
    job's barrier counts inconsistent for any test after it."""
    side = side_stream()
    delay(side)
    rtorch.barrier_all_on_stream(side)
    if me == 1:
        time.sleep(HOST_PAUSE)
    team = rshmem.team_split_strided(rshmem.Team.WORLD, 0, 1, 1)
    assert (team is not None) == (me == 0)
    settle()
    if team is not None:
        rshmem.team_destroy(team)
