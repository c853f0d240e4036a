"""Reduce-scatter on the cuda backend: the on-stream form (`rshmemi_rt_reduce` with its scatter
flag), the blocking host form on CUDA tensors, and nvshmem4py's `core.reducescatter`.

    RSHMEM_ALLOW_SHARED_GPU=1 torchrun --nproc-per-node 2 -m pytest -m gpu tests/tensors/test_cuda_reducescatter.py

Block j of PE p's source is `rand(n, dtype, seed=base + 10 * p + j)`, so every PE rebuilds the
blocks it combines and compares bit for bit (2 PEs: one rounding, the kernel's and torch's
agree; more: compared with a tolerance, as test_cuda_stream.py's reductions are).
"""

import pytest
import torch

import rshmem
import rshmem.torch as rtorch
from cuda_util import rand, ref_reduce, same_bits, settle, sym

pytestmark = [pytest.mark.gpu, pytest.mark.multi]

DTYPES = [torch.int32, torch.int64, torch.uint8, torch.float16, torch.bfloat16, torch.float32, torch.float64]


@pytest.fixture(scope="module", autouse=True)
def on_cuda(cuda_backend):
    yield
    settle()


def free(*ts):
    settle()
    for t in ts:
        rtorch.free_tensor(t)


def blocks(pe, npes, n, dtype, base):
    return torch.cat([rand(n, dtype, seed=base + 10 * pe + j) for j in range(npes)])


def expected(op, me, npes, n, dtype, base):
    return ref_reduce(op, [rand(n, dtype, seed=base + 10 * p + me).cpu() for p in range(npes)])


def check(got, want, npes, what):
    if got.dtype.is_floating_point and npes > 2:
        torch.testing.assert_close(got.cpu(), want)  # more than one rounding: order matters
    else:
        assert same_bits(got.cpu(), want), what


def _cases():
    for op in ("sum", "prod", "min", "max", "and", "or", "xor"):
        for dtype in DTYPES:
            if op in ("and", "or", "xor") and dtype.is_floating_point:
                continue
            yield pytest.param(op, dtype, id=f"{op}-{str(dtype)[6:]}")


@pytest.mark.parametrize("op,dtype", list(_cases()))
def test_reducescatter_on_stream(me, npes, op, dtype):
    n = 4099
    src, dst = sym((npes * n,), dtype), sym((n,), dtype)
    src.copy_(blocks(me, npes, n, dtype, 600))
    rtorch.barrier_all_on_stream()
    rtorch.reducescatter_on_stream(dst, src, op)
    torch.cuda.synchronize()
    check(dst, expected(op, me, npes, n, dtype, 600), npes, f"{op} over {dtype}")
    free(dst, src)


def test_reducescatter_on_stream_in_place_over_many_rounds(me, npes):
    """A block of 1 Mi + 3 float32 elements: many rounds of the 128 KiB team workspace, the
    last one partial; dst is this PE's own block of src."""
    n = (1 << 20) + 3
    src = sym((npes * n,), torch.float32)
    src.copy_(blocks(me, npes, n, torch.float32, 700))
    rtorch.barrier_all_on_stream()
    mine = src[me * n : (me + 1) * n]
    rtorch.reducescatter_on_stream(mine, src, "max")
    rtorch.barrier_all_on_stream()
    torch.cuda.synchronize()
    check(mine, expected("max", me, npes, n, torch.float32, 700), npes, "in-place max")
    free(src)


def test_reducescatter_on_a_split_team_and_the_host_form(me, npes):
    team = rshmem.team_split_strided(rshmem.Team.WORLD, 0, 1, npes)  # a copy of WORLD: its own slot
    n = 513
    src, dst = sym((npes * n,), torch.int64), sym((n,), torch.int64)
    src.copy_(blocks(me, npes, n, torch.int64, 800))
    rtorch.barrier_all_on_stream()
    rtorch.reducescatter_on_stream(dst, src, "sum", team)
    torch.cuda.synchronize()
    check(dst, expected("sum", me, npes, n, torch.int64, 800), npes, "split team sum")
    # The blocking host form on CUDA tensors (after torch's current stream).
    dst.zero_()
    rshmem.reducescatter(dst, src, "xor", team)
    check(dst, expected("xor", me, npes, n, torch.int64, 800), npes, "host-form xor")
    settle()
    rshmem.team_destroy(team)
    free(dst, src)


def test_nvshmem4py_reducescatter_on_a_cuda_stream(me, npes):
    import rshmem.compat.nvshmem.core as core

    n = 1000
    src, dst = core.tensor((npes * n,), dtype=torch.float32), core.tensor((n,), dtype=torch.float32)
    src.copy_(blocks(me, npes, n, torch.float32, 900))
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    core.barrier_all(stream)
    core.reducescatter(core.Teams.TEAM_WORLD, dst, src, "sum", stream=stream)
    stream.synchronize()
    check(dst, expected("sum", me, npes, n, torch.float32, 900), npes, "nvshmem4py sum")
    settle()
    core.free_tensor(dst)
    core.free_tensor(src)


def test_reducescatter_on_stream_misuse_reaches_no_stream(me, npes):
    """Refused on the host before anything is queued: every PE makes the same bad calls, and
    the team's next collective works."""
    n = 64
    src, dst = sym((npes * n,), torch.float32), sym((n,), torch.float32)
    ints = sym((npes * n,), torch.int32)
    with pytest.raises(rshmem.DTypeError):
        rtorch.reducescatter_on_stream(dst, ints)
    with pytest.raises(rshmem.InvalidArgumentError, match="xor"):
        rtorch.reducescatter_on_stream(dst, src, "xor")
    with pytest.raises(rshmem.InvalidArgumentError, match="dst holds 63 elements"):
        rtorch.reducescatter_on_stream(dst[:63], src)
    if npes > 1:
        with pytest.raises(rshmem.InvalidArgumentError, match="team size"):
            rtorch.reducescatter_on_stream(dst, src[:-1])
        # dst straddling two blocks of src: the kernel would overwrite elements it has not staged.
        with pytest.raises(rshmem.InvalidArgumentError, match="whole block"):
            rtorch.reducescatter_on_stream(src[n // 2 : n // 2 + n], src)
    with pytest.raises(rshmem.NotSymmetricError):
        rtorch.reducescatter_on_stream(torch.zeros(n, device=src.device), src)
    src.fill_(1.0)
    rtorch.barrier_all_on_stream()
    rtorch.reducescatter_on_stream(dst, src)
    torch.cuda.synchronize()
    assert torch.equal(dst.cpu(), torch.full((n,), float(npes)))
    free(ints, dst, src)
