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
