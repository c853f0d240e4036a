"""Collectives on symmetric tensors, checked against torch.

Each PE's input is a function of its PE number, so every PE can compute the expected result
with plain torch ops; `fcollect` is also checked against torch.distributed's all_gather.
"""

import pytest
import torch

import rshmem

DTYPES = [torch.int8, torch.int32, torch.int64, torch.uint8, torch.float16, torch.bfloat16, torch.float32, torch.float64]


def source_of(pe, n, dtype):
    # small integers: exact in every dtype, sums and products included
    return (torch.arange(n) % 5 + pe + 1).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_broadcast(sym, dtype, me, npes):
    n = 37
    src, dst = sym((n,), dtype), sym((n,), dtype)
    src.copy_(source_of(me, n, dtype))
    rshmem.barrier_all()
    root = npes - 1
    rshmem.broadcast(dst, src, root)
    assert torch.equal(dst, source_of(root, n, dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_fcollect(sym, dtype, me, npes):
    n = 19
    src, dst = sym((n,), dtype), sym((npes * n,), dtype)
    src.copy_(source_of(me, n, dtype))
    rshmem.barrier_all()
    rshmem.fcollect(dst, src)
    expected = torch.cat([source_of(pe, n, dtype) for pe in range(npes)])
    assert torch.equal(dst, expected)


@pytest.mark.multi
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64], ids=str)
def test_fcollect_matches_torch_distributed(sym, dtype, me, npes):
    import torch.distributed as dist

    n = 1000
    src, dst = sym((n,), dtype), sym((npes * n,), dtype)
    src.copy_(torch.randn(n).mul(100).to(dtype))
    rshmem.barrier_all()
    rshmem.fcollect(dst, src)
    ref = torch.empty(npes * n, dtype=dtype)
    dist.all_gather_into_tensor(ref, src.clone())
    assert torch.equal(dst, ref)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_alltoall(sym, dtype, me, npes):
    block = 6
    src, dst = sym((npes * block,), dtype), sym((npes * block,), dtype)
    # block j of PE i's source holds 10*i + j
    src.copy_(torch.cat([torch.full((block,), 10 * me + j) for j in range(npes)]).to(dtype))
    rshmem.barrier_all()
    rshmem.alltoall(dst, src)
    expected = torch.cat([torch.full((block,), 10 * i + me) for i in range(npes)]).to(dtype)
    assert torch.equal(dst, expected)


REDUCTIONS = {
    "sum": lambda xs: torch.stack(xs).sum(0),
    "prod": lambda xs: torch.stack(xs).prod(0),
    "min": lambda xs: torch.stack(xs).min(0).values,
    "max": lambda xs: torch.stack(xs).max(0).values,
}


@pytest.mark.parametrize("op", list(REDUCTIONS))
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.float16, torch.bfloat16, torch.float32], ids=str)
def test_reduce(sym, op, dtype, me, npes):
    n = 23
    src, dst = sym((n,), dtype), sym((n,), dtype)
    src.copy_(source_of(me, n, dtype))
    rshmem.barrier_all()
    rshmem.reduce(dst, src, op)
    expected = REDUCTIONS[op]([source_of(pe, n, torch.float64) for pe in range(npes)]).to(dtype)
    assert torch.equal(dst, expected)


@pytest.mark.parametrize("op", ["and", "or", "xor"])
def test_bitwise_reduce(sym, op, me, npes):
    n = 16
    src, dst = sym((n,), torch.int64), sym((n,), torch.int64)
    src.copy_(torch.arange(n) * (me + 3))
    rshmem.barrier_all()
    rshmem.reduce(dst, src, op)
    expected = torch.arange(n) * 3
    for pe in range(1, npes):
        other = torch.arange(n) * (pe + 3)
        expected = {"and": torch.bitwise_and, "or": torch.bitwise_or, "xor": torch.bitwise_xor}[op](expected, other)
    assert torch.equal(dst, expected)


def blocks_of(pe, npes, n, dtype):
    """PE `pe`'s reduce-scatter source: block j (of n) holds source_of(pe) rotated by j, so
    every block reduces to a different result, exact in every dtype as test_reduce's are."""
    return torch.cat([source_of(pe, n, dtype).roll(j) for j in range(npes)])


@pytest.mark.parametrize("op", list(REDUCTIONS))
@pytest.mark.parametrize("dtype", [torch.int32, torch.bfloat16, torch.float32], ids=str)
def test_reducescatter(sym, op, dtype, me, npes):
    n = 11
    src, dst = sym((npes * n,), dtype), sym((n,), dtype)
    src.copy_(blocks_of(me, npes, n, dtype))
    rshmem.barrier_all()
    rshmem.reducescatter(dst, src, op)
    expected = REDUCTIONS[op]([blocks_of(pe, npes, n, torch.float64)[me * n : (me + 1) * n] for pe in range(npes)])
    assert torch.equal(dst, expected.to(dtype))


@pytest.mark.parametrize("form", ["host", "on_stream"])
def test_reducescatter_bitwise_in_place_and_on_a_split_team(sym, form, me, npes):
    """`xor` on int64; dst is this PE's own block of src (in place); then a team of the even
    PEs, whose source blocks are indexed by team rank. The host backend runs the on-stream
    form as the host one (no stream)."""
    import rshmem.torch as rtorch

    call = rshmem.reducescatter if form == "host" else rtorch.reducescatter_on_stream
    n = 9
    src = sym((npes * n,), torch.int64)
    src.copy_(torch.arange(npes * n) * (me + 3))
    rshmem.barrier_all()
    mine = src[me * n : (me + 1) * n]
    call(mine, src, "xor")
    expected = torch.zeros(n, dtype=torch.int64)
    for pe in range(npes):
        expected ^= torch.arange(me * n, (me + 1) * n) * (pe + 3)
    assert torch.equal(mine, expected)
    rshmem.barrier_all()
    evens = rshmem.team_split_strided(rshmem.Team.WORLD, 0, 2, (npes + 1) // 2)
    dst = sym((n,), torch.int64)
    if evens is not None:
        size, rank = rshmem.team_n_pes(evens), rshmem.team_my_pe(evens)
        src[: size * n].copy_(torch.arange(size * n) + 1000 * me)
        rshmem.barrier(evens)
        call(dst, src[: size * n], "sum", evens)
        members = range(0, npes, 2)
        assert torch.equal(dst, sum(torch.arange(rank * n, (rank + 1) * n) + 1000 * pe for pe in members))
        rshmem.team_destroy(evens)
    rshmem.barrier_all()


@pytest.mark.multi
def test_reducescatter_matches_torch_distributed(sym, me, npes):
    import torch.distributed as dist

    n = 1000
    src, dst = sym((npes * n,), torch.int64), sym((n,), torch.int64)
    src.copy_(torch.randint(-1000, 1000, (npes * n,)))
    rshmem.barrier_all()
    rshmem.reducescatter(dst, src)
    ref = torch.empty(n, dtype=torch.int64)
    dist.reduce_scatter_tensor(ref, src.clone())
    assert torch.equal(dst, ref)


@pytest.mark.parametrize("form", ["host", "on_stream"])
def test_reducescatter_misuse(sym, form, npes):
    """Each bad call fails with a clear error on every PE alike (all PEs make it) and leaves
    the team usable for the next collective."""
    import rshmem.torch as rtorch

    call = rshmem.reducescatter if form == "host" else rtorch.reducescatter_on_stream
    a, b = sym((4 * npes,), torch.float32), sym((4,), torch.float32)
    with pytest.raises(rshmem.DTypeError, match="dtype"):
        call(b, sym((4 * npes,), torch.int32))
    with pytest.raises(rshmem.InvalidArgumentError, match="reduction"):
        call(b, a, "average")
    with pytest.raises(rshmem.InvalidArgumentError, match="xor"):
        call(b, a, "xor")  # bitwise reductions take integers only
    if npes > 1:
        with pytest.raises(rshmem.InvalidArgumentError, match="not a multiple of the team size"):
            call(b, a[: 4 * npes - 1])  # src does not split into one block per PE
    with pytest.raises(rshmem.InvalidArgumentError, match=r"dst holds 3 elements, but 4 are needed|holds only 3|differ in size \(4 and 3 elements\)"):
        call(b[:3], a)  # dst smaller than one block
    with pytest.raises(rshmem.NotSymmetricError):
        call(torch.zeros(4), a)  # not on the symmetric heap
    with pytest.raises(rshmem.RshmemError, match="team"):
        call(b, a, "sum", rshmem.Team(40))  # no such team
    if form == "host":
        with pytest.raises(rshmem.InvalidArgumentError, match="holds only"):
            call(b, a, nelems=5)  # src holds 4 * npes, not 5 * npes
    a.fill_(1.0)
    rshmem.barrier_all()
    call(b, a)
    assert torch.equal(b, torch.full((4,), float(npes)))


def test_collective_misuse(sym, npes):
    a, b = sym((8,), torch.float32), sym((8,), torch.int32)
    with pytest.raises(rshmem.DTypeError, match="different dtypes"):
        rshmem.broadcast(a, b, 0)
    with pytest.raises(rshmem.InvalidArgumentError, match="reduction"):
        rshmem.reduce(a, a, "average")
    with pytest.raises(rshmem.InvalidArgumentError):
        rshmem.reduce(a, a, "xor")  # bitwise reductions take integers only
    with pytest.raises(rshmem.InvalidArgumentError, match="holds only"):
        rshmem.broadcast(a, a, 0, nelems=9)
