"""The on-stream API and the host API on CUDA tensors, 2 GPUs, random data.

    torchrun --nproc-per-node 2 -m pytest -m gpu tests/tensors/test_cuda_stream.py

Each PE fills its data from a seed (`rand(n, dtype, seed=pe)`), so the receiver rebuilds what
its peer sent and compares bit for bit. Sizes run from 1 byte to 1 GiB (only put and get take
the largest). Every PE runs the same tests in the same order.
"""

import pytest
import torch

import rshmem
import rshmem.torch as rtorch
from cuda_util import dev, rand, ref_reduce, same_bits, settle, sym

pytestmark = [pytest.mark.gpu, pytest.mark.multi]

GIB = 1 << 30
SIZES = [1, 7, 4099, 1 << 20, (64 << 20) + 5, GIB]
SMALL_SIZES = [1, 4099, (8 << 20) + 3]
COPY_DTYPES = [
    torch.uint8, torch.int16, torch.int32, torch.int64, torch.float16, torch.bfloat16, torch.float32,
    torch.float64, torch.bool, torch.complex64, torch.float8_e4m3fn, torch.float8_e5m2, torch.uint64,
]
TYPED = [
    torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.uint16, torch.uint32, torch.uint64,
    torch.float16, torch.bfloat16, torch.float32, torch.float64,
]
INTS = [d for d in TYPED if not d.is_floating_point]


@pytest.fixture(scope="module", autouse=True)
def on_cuda(cuda_backend):
    yield
    settle()


@pytest.fixture
def left(me, npes):
    """The PE whose puts land here (the previous one)."""
    return (me - 1) % npes


def free(*ts):
    settle()
    for t in ts:
        rtorch.free_tensor(t)


def ids(n):
    return f"{n}B"


# ------------------------------------------------------------------------------ put and get


@pytest.mark.parametrize("nbytes", SIZES, ids=ids)
def test_putmem_on_stream_bytes(me, peer, left, nbytes):
    dst = sym((nbytes,), torch.uint8)
    src = rand(nbytes, torch.uint8, seed=me)  # a plain CUDA tensor: the source need not be symmetric
    rtorch.barrier_all_on_stream()
    rtorch.putmem_on_stream(dst, src, peer)
    rtorch.barrier_all_on_stream()
    torch.cuda.synchronize()
    del src
    assert same_bits(dst, rand(nbytes, torch.uint8, seed=left))
    free(dst)


@pytest.mark.parametrize("nbytes", SIZES, ids=ids)
def test_getmem_on_stream_bytes(me, peer, nbytes):
    src = sym((nbytes,), torch.uint8)
    src.copy_(rand(nbytes, torch.uint8, seed=me))
    settle()
    dst = torch.empty(nbytes, dtype=torch.uint8, device=dev())
    rtorch.getmem_on_stream(dst, src, peer)
    torch.cuda.synchronize()
    assert same_bits(dst, rand(nbytes, torch.uint8, seed=peer))
    del dst
    free(src)


@pytest.mark.parametrize("dtype", COPY_DTYPES, ids=str)
def test_put_and_get_on_stream_any_dtype(me, peer, left, dtype):
    n = 100_003
    dst = sym((n,), dtype)
    got = torch.empty(n, dtype=dtype, device=dev())
    rtorch.putmem_on_stream(dst, rand(n, dtype, seed=me), peer)
    rtorch.barrier_all_on_stream()
    rtorch.getmem_on_stream(got, dst, peer)  # the peer's copy holds what this PE sent
    torch.cuda.synchronize()
    assert same_bits(dst, rand(n, dtype, seed=left))
    assert same_bits(got, rand(n, dtype, seed=me))
    free(dst)


def test_put_into_a_larger_destination_and_a_2d_tensor(me, peer, left):
    dst = sym((64, 32), torch.float32, fill=-1.0)
    rtorch.putmem_on_stream(dst[:16], rand(16 * 32, torch.float32, seed=me).view(16, 32), peer)
    rtorch.barrier_all_on_stream()
    torch.cuda.synchronize()
    assert same_bits(dst[:16], rand(16 * 32, torch.float32, seed=left).view(16, 32))
    assert torch.equal(dst[16:], torch.full((48, 32), -1.0, device=dev()))
    free(dst)


@pytest.mark.parametrize("kind", ["none", "current", "side", "handle"])
def test_stream_argument_forms(me, peer, left, kind):
    n = 1 << 20
    dst = sym((n,), torch.uint8)
    src = rand(n, torch.uint8, seed=me)
    side = torch.cuda.Stream(dev())
    side.wait_stream(torch.cuda.current_stream())  # src was made on the current stream
    stream = {
        "none": None,
        "current": torch.cuda.current_stream(),
        "side": side,
        "handle": side.cuda_stream,
    }[kind]
    rtorch.putmem_on_stream(dst, src, peer, stream)
    rtorch.barrier_all_on_stream(stream)
    torch.cuda.synchronize()
    assert same_bits(dst, rand(n, torch.uint8, seed=left))
    free(dst)


def test_barrier_all_on_stream_orders_kernel_writes_into_peer_memory(me, npes, peer, left):
    """A kernel writes into the peer's copy through peer_tensor, then barrier_all_on_stream, then
    a kernel reads the local copy, all on one stream with no host synchronization between."""
    n = 1 << 22
    t = sym((n,), torch.float32)
    remote = rtorch.peer_tensor(t, peer)
    for round_ in range(3):
        remote.copy_(rand(n, torch.float32, seed=10 * round_ + me))
        rtorch.barrier_all_on_stream()
        seen = t.clone()
        rtorch.barrier_all_on_stream()  # nobody overwrites t before every PE has read it
        torch.cuda.synchronize()
        assert same_bits(seen, rand(n, torch.float32, seed=10 * round_ + left)), f"round {round_}"
    del remote
    free(t)


def test_barrier_on_stream_of_world(me, peer, left):
    t = sym((1024,), torch.int64)
    rtorch.peer_tensor(t, peer).fill_(me + 7)
    rtorch.barrier_on_stream(rshmem.Team.WORLD)
    seen = t.clone()
    torch.cuda.synchronize()
    assert torch.equal(seen, torch.full((1024,), left + 7, dtype=torch.int64, device=dev()))
    free(t)


# ---------------------------------------------------------------------------------- signals


@pytest.mark.parametrize("nbytes", [8, 1 << 20, (32 << 20) + 8], ids=ids)
@pytest.mark.parametrize("side_stream", [False, True], ids=["current", "side"])
def test_putmem_signal_then_wait_on_stream(me, peer, left, nbytes, side_stream):
    """No barrier between sender and receiver: the receiver's stream waits for the signal, and
    the data put before it must be there for the next kernel on that stream."""
    n = nbytes // 8
    dst = sym((n,), torch.float64)
    sig = sym((2,), torch.int64)
    src = rand(n, torch.float64, seed=me)
    stream = torch.cuda.Stream(dev()) if side_stream else torch.cuda.current_stream()
    stream.wait_stream(torch.cuda.current_stream())
    rtorch.putmem_signal_on_stream(dst, src, sig[1], 1, rshmem.SIGNAL_SET, peer, stream)
    rtorch.signal_wait_until_on_stream(sig[1], rshmem.CMP_EQ, 1, stream)
    with torch.cuda.stream(stream):
        seen = dst.clone()
    torch.cuda.synchronize()
    assert same_bits(seen, rand(n, torch.float64, seed=left))
    assert sig.tolist() == [0, 1]
    free(dst, sig)


def test_putmem_signal_add_accumulates(me, peer, left):
    dst = sym((4096,), torch.int32)
    sig = sym((1,), torch.uint64)
    for k in range(4):
        rtorch.putmem_signal_on_stream(dst, rand(4096, torch.int32, seed=me), sig[0], k + 1, rshmem.SIGNAL_ADD, peer)
    rtorch.signal_wait_until_on_stream(sig[0], rshmem.CMP_GE, 10)
    seen = sig.clone()
    torch.cuda.synchronize()
    assert int(seen.view(torch.int64)[0]) == 10
    assert same_bits(dst, rand(4096, torch.int32, seed=left))
    free(dst, sig)


def test_signal_op_on_stream_add_and_set(me, peer, left):
    sig = sym((2,), torch.int64)
    for _ in range(5):
        rtorch.signal_op_on_stream(sig[0], me + 1, rshmem.SIGNAL_ADD, peer)
    big = (1 << 63) + 5  # above int64: passed as the 64 bits of an unsigned value
    rtorch.signal_op_on_stream(sig[1], big, rshmem.SIGNAL_SET, peer)
    rtorch.signal_wait_until_on_stream(sig[0], rshmem.CMP_EQ, 5 * (left + 1))
    rtorch.signal_wait_until_on_stream(sig[1], rshmem.CMP_EQ, big)
    seen = sig.clone()
    torch.cuda.synchronize()
    assert seen.tolist() == [5 * (left + 1), big - (1 << 64)]
    free(sig)


@pytest.mark.parametrize("cmp, value", [("CMP_NE", 0), ("CMP_GT", 6), ("CMP_LT", 8), ("CMP_LE", 7), ("CMP_GE", 7)])
def test_signal_wait_on_stream_takes_every_comparison(me, peer, left, cmp, value):
    """The wait is a kernel, so every comparison works on a stream (the driver's stream wait had
    only ==, >= and a mask). The word starts at 100 for CMP_LT / CMP_LE, which only the peer's
    SET of 7 satisfies; the data put before the signal is there for the stream's next kernel."""
    n = 4099
    dst = sym((n,), torch.float32)
    sig = sym((1,), torch.int64)
    if cmp in ("CMP_LT", "CMP_LE"):
        sig.fill_(100)
    torch.cuda.synchronize()
    rshmem.barrier_all()
    rtorch.putmem_signal_on_stream(dst, rand(n, torch.float32, seed=me), sig[0], 7, rshmem.SIGNAL_SET, peer)
    rtorch.signal_wait_until_on_stream(sig[0], getattr(rshmem, cmp), value)
    seen = dst.clone()
    torch.cuda.synchronize()
    assert same_bits(seen, rand(n, torch.float32, seed=left))
    assert sig.tolist() == [7]
    free(dst, sig)


def test_quiet_on_stream_then_signal(me, peer, left):
    n = 1 << 21
    dst = sym((n,), torch.bfloat16)
    sig = sym((1,), torch.int64)
    rtorch.putmem_on_stream(dst, rand(n, torch.bfloat16, seed=me), peer)
    rtorch.quiet_on_stream()
    rtorch.signal_op_on_stream(sig[0], 1, rshmem.SIGNAL_SET, peer)
    rtorch.signal_wait_until_on_stream(sig[0], rshmem.CMP_EQ, 1)
    seen = dst.clone()
    torch.cuda.synchronize()
    assert same_bits(seen, rand(n, torch.bfloat16, seed=left))
    free(dst, sig)


# ------------------------------------------------------------------------------ collectives


@pytest.mark.parametrize("n", SMALL_SIZES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int8, torch.bfloat16, torch.uint64], ids=str)
def test_broadcast_on_stream_every_root(me, npes, n, dtype):
    src = sym((n,), dtype)
    dst = sym((n,), dtype)
    src.copy_(rand(n, dtype, seed=100 + me))
    for root in range(npes):
        rtorch.barrier_all_on_stream()
        rtorch.broadcast_on_stream(dst, src, root)
        rtorch.barrier_all_on_stream()
        torch.cuda.synchronize()
        assert same_bits(dst, rand(n, dtype, seed=100 + root)), f"root {root}"
    free(dst, src)


@pytest.mark.parametrize("n", SMALL_SIZES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.int64, torch.uint8], ids=str)
def test_fcollect_on_stream(me, npes, n, dtype):
    src = sym((n,), dtype)
    dst = sym((npes, n), dtype)
    src.copy_(rand(n, dtype, seed=200 + me))
    rtorch.barrier_all_on_stream()
    rtorch.fcollect_on_stream(dst, src)
    rtorch.barrier_all_on_stream()
    torch.cuda.synchronize()
    for p in range(npes):
        assert same_bits(dst[p], rand(n, dtype, seed=200 + p)), f"block of PE {p}"
    free(dst, src)


FCOLLECT_MAX = 256 << 10  # the largest fcollect per PE of the staged (world) and one-block (team) kernels


def _fcollect_rounds(me, npes, sizes, team=rshmem.Team.WORLD):
    """fcollect_on_stream of `sizes[r]` bytes per PE in round r, back to back, with a GPU reader
    of `dst` and a new source between rounds and no other synchronization: a PE that wrote
    round r + 1 into a peer's `dst` (or staging slot) before the peer's reader of round r ran
    would change the peer's sums."""
    top = max(sizes)
    src = sym((top,), torch.uint8)
    dst = sym((npes * top,), torch.uint8)
    sums = torch.zeros((len(sizes), npes), dtype=torch.int64, device=dev())
    for r, n in enumerate(sizes):
        src[:n].fill_((7 * r + 3 * me + 1) % 251)
        rtorch.fcollect_on_stream(dst[: npes * n], src[:n], team)
        sums[r] = dst[: npes * n].view(npes, n).sum(dim=1, dtype=torch.int64)
    got = sums.cpu()
    want = torch.tensor([[n * ((7 * r + 3 * p + 1) % 251) for p in range(npes)] for r, n in enumerate(sizes)])
    assert torch.equal(got, want), (got != want).nonzero()[:5].tolist()
    free(dst, src)


@pytest.mark.parametrize("n", [1, 4097, FCOLLECT_MAX, FCOLLECT_MAX + 1], ids=ids)
def test_fcollect_on_stream_back_to_back(me, npes, n):
    """Each form of fcollect_on_stream on TEAM_WORLD: staged (up to 256 KiB per PE; 1 byte
    leaves 7 of its 8 blocks without data) and the copy-engine pull above."""
    _fcollect_rounds(me, npes, [n] * 64)


def test_fcollect_on_stream_sizes_change_between_calls(me, npes):
    """The staged form's slots are reused every other call whatever the sizes; each call here
    changes the size (and with it every block's slice), and some cross to the pull form."""
    sizes = [1024, FCOLLECT_MAX, 16, 100_000, FCOLLECT_MAX + 4096, 3, 65536, 17, FCOLLECT_MAX, 1] * 6
    _fcollect_rounds(me, npes, sizes)


@pytest.mark.parametrize("n", [1, 4097, FCOLLECT_MAX, FCOLLECT_MAX + 1], ids=ids)
def test_fcollect_on_stream_team(me, npes, n):
    """On a team other than TEAM_WORLD (a copy of it): the one-block push kernel between team
    barriers up to 256 KiB per PE, the pull above."""
    team = rshmem.team_split_strided(rshmem.Team.WORLD, 0, 1, npes)
    try:
        _fcollect_rounds(me, npes, [n] * 32, team)
    finally:
        settle()
        rshmem.team_destroy(team)


@pytest.mark.parametrize("block", [1, 4099, 1 << 20])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int16], ids=str)
def test_alltoall_on_stream(me, npes, block, dtype):
    src = sym((npes, block), dtype)
    dst = sym((npes, block), dtype)
    src.copy_(rand(npes * block, dtype, seed=300 + me).view(npes, block))
    rtorch.barrier_all_on_stream()
    rtorch.alltoall_on_stream(dst, src)
    rtorch.barrier_all_on_stream()
    torch.cuda.synchronize()
    for p in range(npes):
        theirs = rand(npes * block, dtype, seed=300 + p).view(npes, block)
        assert same_bits(dst[p], theirs[me]), f"block from PE {p}"
    free(dst, src)


def _reduce_cases():
    for op in ("sum", "prod", "min", "max", "and", "or", "xor"):
        for dtype in TYPED:
            if op in ("and", "or", "xor") and dtype.is_floating_point:
                continue
            yield pytest.param(op, dtype, id=f"{op}-{str(dtype)[6:]}")


@pytest.mark.parametrize("op,dtype", list(_reduce_cases()))
def test_reduce_on_stream(me, npes, op, dtype):
    n = 10_007
    src = sym((n,), dtype)
    dst = sym((n,), dtype)
    src.copy_(rand(n, dtype, seed=400 + me))
    rtorch.barrier_all_on_stream()
    rtorch.reduce_on_stream(dst, src, op)
    rtorch.barrier_all_on_stream()
    torch.cuda.synchronize()
    want = ref_reduce(op, [rand(n, dtype, seed=400 + p).cpu() for p in range(npes)])
    if dtype.is_floating_point and npes > 2:
        torch.testing.assert_close(dst.cpu(), want)  # more than one rounding: order matters
    else:
        assert same_bits(dst.cpu(), want), f"{op} over {dtype}"
    free(dst, src)


@pytest.mark.parametrize("n", [1, (16 << 20) + 1])
def test_reduce_on_stream_in_place_large(me, npes, n):
    t = sym((n,), torch.float32)
    t.copy_(rand(n, torch.float32, seed=500 + me))
    rtorch.barrier_all_on_stream()
    rtorch.reduce_on_stream(t, t, "max")
    rtorch.barrier_all_on_stream()
    torch.cuda.synchronize()
    want = ref_reduce("max", [rand(n, torch.float32, seed=500 + p) for p in range(npes)])
    assert same_bits(t, want)
    free(t)


# -------------------------------------------------------------------- the host API on CUDA


def test_host_put_get_and_p_g(me, peer, left):
    n = (4 << 20) + 3
    dst = sym((n,), torch.uint8)
    src = rand(n, torch.uint8, seed=600 + me)
    torch.cuda.synchronize()
    rshmem.put(dst, src, peer)
    rshmem.barrier_all()
    assert same_bits(dst, rand(n, torch.uint8, seed=600 + left))
    got = torch.empty(n, dtype=torch.uint8, device=dev())
    rshmem.get(got, dst, peer)
    assert same_bits(got, rand(n, torch.uint8, seed=600 + me))
    rshmem.barrier_all()
    words = sym((4,), torch.float64)
    rshmem.p(words[me], 1.5 + me, peer)
    rshmem.barrier_all()
    assert words[left].item() == 1.5 + left
    assert rshmem.g(words[me], peer) == 1.5 + me
    free(dst, words)


def test_host_atomics_on_device_memory(me, npes, peer):
    counters = sym((3,), torch.int64)
    for _ in range(100):
        rshmem.atomic_fetch_add(counters[0], 1, 0)
    rshmem.atomic_add(counters[1], me + 1, peer)
    rshmem.barrier_all()
    if me == 0:
        assert counters[0].item() == 100 * npes
    assert counters[1].item() == ((me - 1) % npes) + 1
    rshmem.barrier_all()
    if me == 0:
        assert rshmem.atomic_compare_swap(counters[2], 0, 42, peer) == 0
        assert rshmem.atomic_swap(counters[2], 7, peer) == 42
        assert rshmem.atomic_fetch(counters[2], peer) == 7
        rshmem.atomic_set(counters[2], -3, peer)
        assert rshmem.atomic_fetch_xor(counters[2], 1, peer) == -3
    rshmem.barrier_all()
    free(counters)


def test_host_signals_on_device_memory(me, peer, left):
    n = 1 << 16
    dst = sym((n,), torch.int32)
    sig = sym((1,), torch.int64)
    src = rand(n, torch.int32, seed=700 + me)
    torch.cuda.synchronize()
    rshmem.putmem_signal(dst, src, sig[0], 9, rshmem.SIGNAL_SET, peer)
    assert rshmem.signal_wait_until(sig[0], rshmem.CMP_EQ, 9) == 9
    assert same_bits(dst, rand(n, torch.int32, seed=700 + left))
    rshmem.barrier_all()
    rshmem.signal_op(sig[0], 1, rshmem.SIGNAL_ADD, peer)
    assert rshmem.signal_wait_until(sig[0], rshmem.CMP_GE, 10) == 10
    assert rshmem.signal_fetch(sig[0]) == 10
    free(dst, sig)


def test_host_collectives_on_device_memory(me, npes):
    n = 4099
    src = sym((n,), torch.float32)
    src.copy_(rand(n, torch.float32, seed=800 + me))
    out = sym((npes, n), torch.float32)
    torch.cuda.synchronize()
    rshmem.barrier_all()
    rshmem.fcollect(out, src)
    for p in range(npes):
        assert same_bits(out[p], rand(n, torch.float32, seed=800 + p))
    rshmem.broadcast(out[0], src, npes - 1)
    assert same_bits(out[0], rand(n, torch.float32, seed=800 + npes - 1))
    rshmem.reduce(out[0], src, "min")
    assert same_bits(out[0], ref_reduce("min", [rand(n, torch.float32, seed=800 + p) for p in range(npes)]))
    blocks = sym((npes, 16), torch.int32)
    blocks.copy_(rand(npes * 16, torch.int32, seed=900 + me).view(npes, 16))
    got = sym((npes, 16), torch.int32)
    torch.cuda.synchronize()
    rshmem.alltoall(got, blocks)
    for p in range(npes):
        assert same_bits(got[p], rand(npes * 16, torch.int32, seed=900 + p).view(npes, 16)[me])
    rshmem.quiet()
    rshmem.fence()
    free(out, src, blocks, got)


# ------------------------------------------------------------------------------------ misuse


def test_on_stream_misuse_raises_clear_errors(me, npes, peer):
    dst = sym((16,), torch.float32)
    sig = sym((1,), torch.int64)
    fp8 = sym((16,), torch.float8_e4m3fn)
    good = torch.zeros(16, device=dev())
    with pytest.raises(rshmem.PeOutOfRangeError, match=str(npes)):
        rtorch.putmem_on_stream(dst, good, npes)
    with pytest.raises(IndexError):
        rtorch.getmem_on_stream(good, dst, -1)
    with pytest.raises(rshmem.NotSymmetricError):
        rtorch.putmem_on_stream(torch.zeros(16, device=dev()), good, peer)
    with pytest.raises(rshmem.NotSymmetricError):
        rtorch.signal_op_on_stream(torch.zeros(1, dtype=torch.int64, device=dev())[0], 1, rshmem.SIGNAL_SET, peer)
    with pytest.raises(rshmem.InvalidArgumentError, match="cpu"):
        rtorch.putmem_on_stream(dst, torch.zeros(16), peer)
    with pytest.raises(rshmem.DTypeError, match="float16"):
        rtorch.putmem_on_stream(dst, torch.zeros(16, dtype=torch.float16, device=dev()), peer)
    with pytest.raises(rshmem.InvalidArgumentError, match="holds 16"):
        rtorch.putmem_on_stream(dst, torch.zeros(17, device=dev()), peer)
    with pytest.raises(rshmem.InvalidArgumentError, match="holds 16"):
        rtorch.getmem_on_stream(torch.zeros(17, device=dev()), dst, peer)
    with pytest.raises(rshmem.InvalidArgumentError, match="contiguous"):
        rtorch.putmem_on_stream(dst[::2], good[::2], peer)
    with pytest.raises(rshmem.DTypeError, match="64-bit"):
        rtorch.signal_op_on_stream(dst[0], 1, rshmem.SIGNAL_SET, peer)
    with pytest.raises(rshmem.InvalidArgumentError, match="one element"):
        rtorch.signal_wait_until_on_stream(sig[0:0], rshmem.CMP_EQ, 1)
    with pytest.raises(rshmem.InvalidArgumentError, match="64 bits"):
        rtorch.signal_op_on_stream(sig[0], 1 << 64, rshmem.SIGNAL_SET, peer)
    with pytest.raises(rshmem.InvalidArgumentError, match="stream"):
        rtorch.putmem_on_stream(dst, good, peer, stream="default")
    with pytest.raises(rshmem.DTypeError):
        rtorch.reduce_on_stream(fp8, fp8, "sum")  # collectives take the runtime's dtypes only
    with pytest.raises(rshmem.InvalidArgumentError):
        rtorch.reduce_on_stream(dst, dst, "xor")  # bitwise ops take integers only
    with pytest.raises(rshmem.InvalidArgumentError, match="team size"):
        rtorch.fcollect_on_stream(dst, dst)
    # Nothing above reached the stream: the symmetric memory is untouched and usable.
    rtorch.barrier_all_on_stream()
    torch.cuda.synchronize()
    assert not dst.any() and not sig.any()
    free(dst, sig, fp8)
