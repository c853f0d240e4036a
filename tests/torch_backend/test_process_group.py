"""The torch.distributed backend "rshmem" (`rshmem.torch_backend`) on the host backend, in the
manner of torch's distributed tests: each collective by value against what every rank can
compute itself, over dtypes and reduce ops, sync and async, groups of some ranks, the misuse
that must raise, and a DDP training step equal to one over gloo.

Run as 2 PEs (`torchrun --nproc-per-node 2 -m pytest tests/torch_backend`): the session's gloo
group and rshmem stay up, and each test uses the rshmem group of every rank that the module
makes with `dist.new_group(backend="rshmem")`. Jobs of their own run as
`dist.init_process_group("rshmem")` and `"cpu:gloo,cuda:rshmem"` programs
(test_init_process_group.py).
"""
from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

import rshmem
import rshmem.torch_backend as tb

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.int32,
          torch.int64]
FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


@pytest.fixture(scope="module")
def pg():
    group = dist.new_group(backend="rshmem")
    yield group
    dist.barrier()
    tb.release()  # the groups' workspaces, before the session finalizes rshmem


def me():
    return dist.get_rank()


def n():
    return dist.get_world_size()


def data(rank, shape, dtype, seed=0):
    """Rank `rank`'s input, small integers so every reduction is exact in every dtype."""
    g = torch.Generator().manual_seed(1000 * seed + rank)
    lo, hi = (0, 4) if dtype in (torch.uint8, torch.int8) else (-8, 9)
    return torch.randint(lo, hi, shape, generator=g).to(dtype)


pytestmark = pytest.mark.multi


def test_backend_name(pg):
    assert dist.get_backend(pg) == "rshmem"
    assert pg.rank() == me() and pg.size() == n()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["SUM", "MAX", "MIN", "PRODUCT"])
def test_all_reduce(pg, dtype, op):
    shape = (5, 7)
    ins = [data(r, shape, dtype) for r in range(n())]
    fold = {"SUM": torch.add, "MAX": torch.maximum, "MIN": torch.minimum, "PRODUCT": torch.mul}[op]
    want = ins[0].clone()
    for x in ins[1:]:
        want = fold(want, x)
    t = ins[me()].clone()
    dist.all_reduce(t, getattr(dist.ReduceOp, op), group=pg)
    torch.testing.assert_close(t, want)


@pytest.mark.parametrize("op", ["BAND", "BOR", "BXOR"])
def test_all_reduce_bitwise(pg, op):
    ins = [data(r, (33,), torch.int32, seed=3) & 0xF for r in range(n())]
    fold = {"BAND": torch.bitwise_and, "BOR": torch.bitwise_or, "BXOR": torch.bitwise_xor}[op]
    want = ins[0].clone()
    for x in ins[1:]:
        want = fold(want, x)
    t = ins[me()].clone()
    dist.all_reduce(t, getattr(dist.ReduceOp, op), group=pg)
    assert torch.equal(t, want)


@pytest.mark.parametrize("dtype", FLOATS)
def test_all_reduce_avg(pg, dtype):
    ins = [data(r, (16,), dtype) for r in range(n())]
    t = ins[me()].clone()
    dist.all_reduce(t, dist.ReduceOp.AVG, group=pg)
    torch.testing.assert_close(t, (sum(x.double() for x in ins) / n()).to(dtype))


def _want(ins, op):
    if op == "AVG":
        return sum(x.double() for x in ins) / len(ins)
    fold = {"SUM": torch.add, "MAX": torch.maximum, "MIN": torch.minimum, "PRODUCT": torch.mul}[op]
    want = ins[0].double()
    for x in ins[1:]:
        want = fold(want, x.double())
    return want


def _cuda_pg(pg):
    if rshmem.backend() != "cuda":
        pytest.skip("CUDA tensors go through rshmem only on the cuda backend (on the host backend there are none)")
    return torch.device("cuda", torch.cuda.current_device())


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("op", ["SUM", "AVG", "MAX", "MIN", "PRODUCT"])
def test_cuda_all_reduce(pg, dtype, op):
    # SUM/AVG/MAX/MIN of these dtypes take the ops' kernels in place on the caller's stream (the
    # first call of a shape makes its plan, the second launches it); PRODUCT the staged path.
    dev = _cuda_pg(pg)
    ins = [data(r, (3, 257), dtype, seed=5) for r in range(n())]
    want = _want(ins, op).to(dtype)
    for _ in range(2):
        t = ins[me()].to(dev)
        dist.all_reduce(t, getattr(dist.ReduceOp, op), group=pg)
        torch.testing.assert_close(t.cpu(), want)
    # not 16-byte aligned: the plan of an aligned call cannot write over it
    buf = torch.zeros(1 + ins[0].numel(), dtype=dtype, device=dev)
    for _ in range(2):
        t = buf[1:].view(3, 257)
        t.copy_(ins[me()])
        dist.all_reduce(t, getattr(dist.ReduceOp, op), group=pg)
        torch.testing.assert_close(t.cpu(), want)
        assert buf[0].item() == 0


@pytest.mark.gpu
def test_cuda_all_reduce_streams_and_futures(pg):
    dev = _cuda_pg(pg)
    side = torch.cuda.Stream(dev)
    for k in range(3):
        t = torch.full((4096,), float(me() + k), device=dev)
        work = dist.all_reduce(t, group=pg, async_op=True)
        with torch.cuda.stream(side):
            work.wait()  # the side stream waits for the caller's
            got = t * 2
        torch.cuda.current_stream(dev).wait_stream(side)
        want = 2.0 * sum(r + k for r in range(n()))
        assert torch.all(got == want).item()
    fut = dist.all_reduce(t, group=pg, async_op=True).get_future()
    (res,) = fut.wait()
    assert torch.all(res == 2.0 * sum(r + 2 for r in range(n()))).item()
    work = dist.all_reduce(t, group=pg, async_op=True)
    torch.cuda.synchronize(dev)
    assert work.is_completed()
    # larger than the fast path takes: the group's stream, the staged copies
    big = torch.full((3 << 20,), float(me() + 1), device=dev)
    dist.all_reduce(big, group=pg)
    assert torch.all(big == sum(range(1, n() + 1))).item()


def test_all_reduce_chunked_and_empty(pg):
    # 4 Mi floats: more than one chunk of the 8 MiB workspace.
    big = torch.full((4 << 20,), float(me() + 1))
    dist.all_reduce(big, group=pg)
    assert torch.all(big == sum(range(1, n() + 1)))
    empty = torch.empty(0)
    dist.all_reduce(empty, group=pg)
    assert empty.numel() == 0


def test_async_work_and_future(pg):
    t = torch.full((10,), float(me()))
    work = dist.all_reduce(t, group=pg, async_op=True)
    assert work.wait()
    assert work.is_completed()
    torch.testing.assert_close(t, torch.full((10,), float(sum(range(n())))))
    fut = dist.all_reduce(t, group=pg, async_op=True).get_future()
    (got,) = fut.wait()
    assert got is t or torch.equal(got, t)


@pytest.mark.parametrize("dtype", DTYPES)
def test_broadcast(pg, dtype):
    for root in range(n()):
        want = data(root, (3, 11), dtype, seed=root + 7)
        t = want.clone() if me() == root else torch.zeros_like(want)
        dist.broadcast(t, root, group=pg)
        assert torch.equal(t, want), f"root {root}"


@pytest.mark.parametrize("dtype", DTYPES)
def test_all_gather(pg, dtype):
    ins = [data(r, (4, 3), dtype) for r in range(n())]
    outs = [torch.zeros_like(ins[0]) for _ in range(n())]
    dist.all_gather(outs, ins[me()], group=pg)
    for r in range(n()):
        assert torch.equal(outs[r], ins[r])
    flat = torch.zeros((n() * 4, 3), dtype=dtype)
    dist.all_gather_into_tensor(flat, ins[me()], group=pg)
    assert torch.equal(flat, torch.cat(ins))


@pytest.mark.parametrize("dtype", DTYPES)
def test_reduce_scatter(pg, dtype):
    ins = [data(r, (n() * 6,), dtype, seed=5) for r in range(n())]
    total = ins[0].clone()
    for x in ins[1:]:
        total = total + x
    want = total.view(n(), 6)[me()]
    out = torch.zeros(6, dtype=dtype)
    dist.reduce_scatter(out, list(ins[me()].view(n(), 6).unbind(0)), group=pg)
    torch.testing.assert_close(out, want)
    out2 = torch.zeros(6, dtype=dtype)
    dist.reduce_scatter_tensor(out2, ins[me()], group=pg)
    torch.testing.assert_close(out2, want)


def test_reduce_scatter_avg_max(pg):
    ins = [data(r, (n() * 4,), torch.float32, seed=9) for r in range(n())]
    out = torch.zeros(4)
    dist.reduce_scatter_tensor(out, ins[me()], op=dist.ReduceOp.MAX, group=pg)
    torch.testing.assert_close(out, torch.stack(ins).max(0).values.view(n(), 4)[me()])
    dist.reduce_scatter_tensor(out, ins[me()], op=dist.ReduceOp.AVG, group=pg)
    torch.testing.assert_close(out, (torch.stack(ins).sum(0) / n()).view(n(), 4)[me()])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.uint8])
def test_all_to_all_single_even(pg, dtype):
    ins = [data(r, (n() * 3, 2), dtype, seed=11) for r in range(n())]
    out = torch.zeros_like(ins[0])
    dist.all_to_all_single(out, ins[me()], group=pg)
    want = torch.cat([ins[r].view(n(), 3, 2)[me()] for r in range(n())])
    assert torch.equal(out, want)


def test_all_to_all_single_uneven(pg):
    # rank r sends (r + j + 1) rows to rank j
    send = [me() + j + 1 for j in range(n())]
    recv = [r + me() + 1 for r in range(n())]
    ins = torch.cat([torch.full((s, 3), float(100 * me() + j)) for j, s in enumerate(send)])
    out = torch.zeros((sum(recv), 3))
    dist.all_to_all_single(out, ins, recv, send, group=pg)
    want = torch.cat([torch.full((s, 3), float(100 * r + me())) for r, s in enumerate(recv)])
    assert torch.equal(out, want)


def test_all_to_all_list(pg):
    ins = [torch.arange(j + 2, dtype=torch.int32) + 10 * me() for j in range(n())]
    outs = [torch.zeros(me() + 2, dtype=torch.int32) for _ in range(n())]
    dist.all_to_all(outs, ins, group=pg)
    for r in range(n()):
        assert torch.equal(outs[r], torch.arange(me() + 2, dtype=torch.int32) + 10 * r)


def test_barrier(pg):
    dist.barrier(group=pg)
    dist.barrier(group=pg)


@pytest.mark.parametrize("numel", [0, 5, 300_000])  # 300k floats: several mailbox loads
def test_send_recv(pg, numel):
    peer = (me() + 1) % n()
    prev = (me() - 1) % n()
    out = torch.arange(numel, dtype=torch.float32) + me()
    got = torch.zeros(numel)
    if me() % 2 == 0:
        dist.send(out, peer, group=pg)
        dist.recv(got, prev, group=pg)
    else:
        dist.recv(got, prev, group=pg)
        dist.send(out, peer, group=pg)
    assert torch.equal(got, torch.arange(numel, dtype=torch.float32) + prev)


def test_send_recv_in_order(pg):
    """Back-to-back messages of one pair arrive in order (tag 0 matches by order)."""
    if me() == 0:
        for k in range(5):
            dist.send(torch.full((64,), float(k)), 1, group=pg)
    elif me() == 1:
        for k in range(5):
            got = torch.zeros(64)
            dist.recv(got, 0, group=pg)
            assert torch.all(got == k)
    dist.barrier(group=pg)


def _two_steps(model, params):
    """Two SGD steps of `model` on this rank's batches; the parameters after them, by `params`."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(me())
    for _ in range(2):
        x, y = torch.randn(6, 8, generator=g), torch.randn(6, 4, generator=g)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return [params(p).detach().clone() for p in model.parameters()]


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def test_ddp_step_equals_gloo(pg):
    from torch.nn.parallel import DistributedDataParallel as DDP

    def step(group):
        return _two_steps(DDP(_model(), process_group=group), lambda p: p)

    ours, theirs = step(pg), step(dist.group.WORLD)
    assert dist.get_backend(dist.group.WORLD) == "gloo"
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    for a, b in zip(ours, _reference_two_steps()):  # what the GPU test compares with
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_functional_collectives(pg):
    # torch's functional collectives reach the group from C++ (DTensor, FSDP2's full tensors,
    # traced graphs): each by value, as the eager forms above.
    import torch.distributed._functional_collectives as funcol

    x = data(me(), (5,), torch.float32)
    got = funcol.all_gather_tensor(x, 0, pg).wait()
    assert torch.equal(got, torch.cat([data(r, (5,), torch.float32) for r in range(n())]))
    full = torch.stack([data(r, (4 * n(),), torch.float32, seed=1) for r in range(n())]).sum(0)
    got = funcol.reduce_scatter_tensor(data(me(), (4 * n(),), torch.float32, seed=1), "sum", 0, pg).wait()
    assert torch.equal(got, full[4 * me():4 * (me() + 1)])
    got = funcol.all_reduce(data(me(), (3,), torch.int32, seed=2), "sum", pg).wait()
    assert torch.equal(got, sum(data(r, (3,), torch.int32, seed=2) for r in range(n())))
    ins = [data(me(), (2 * n(),), torch.float32, seed=s) for s in (3, 4)]
    outs = funcol.all_gather_into_tensor_coalesced(ins, pg)
    for s, out in zip((3, 4), outs):
        assert torch.equal(out.wait(), torch.cat([data(r, (2 * n(),), torch.float32, seed=s) for r in range(n())]))
    outs = funcol.reduce_scatter_tensor_coalesced(ins, "sum", [0, 0], pg)
    for s, out in zip((3, 4), outs):
        full = torch.stack([data(r, (2 * n(),), torch.float32, seed=s) for r in range(n())]).sum(0)
        assert torch.equal(out.wait(), full[2 * me():2 * (me() + 1)])


def test_fsdp2_step_equals_gloo(pg):
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import fully_shard

    def step(group):
        model = _model()
        mesh = DeviceMesh.from_group(group, "cpu")
        for layer in model:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
        # full_tensor() all-gathers each sharded parameter through the functional collectives
        return _two_steps(model, lambda p: p.full_tensor())

    ours, theirs = step(pg), step(dist.group.WORLD)
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def _reference_two_steps():
    """The unsharded model trained on every rank's batches at once (the mean of the ranks'
    losses), as DDP and FSDP2 with their default gradient averaging train it."""
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    gens = [torch.Generator().manual_seed(r) for r in range(n())]
    for _ in range(2):
        batches = [(torch.randn(6, 8, generator=g), torch.randn(6, 4, generator=g)) for g in gens]
        opt.zero_grad()
        loss = sum(torch.nn.functional.mse_loss(model(x), y) for x, y in batches) / n()
        loss.backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


@pytest.mark.gpu
def test_cuda_ddp_and_fsdp2_steps_equal_the_unsharded_model(pg):
    # DDP and FSDP2 (fully_shard over a CUDA DeviceMesh of the group) on CUDA tensors over
    # cuda:rshmem: all_reduce (the fast path for DDP's small buckets), all_gather_into_tensor
    # and reduce_scatter_tensor (FSDP2's, through the coalesced overrides).
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import fully_shard
    from torch.nn.parallel import DistributedDataParallel as DDP

    dev = _cuda_pg(pg)
    want = _reference_two_steps()

    def on_gpu(model, params):
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        g = torch.Generator().manual_seed(me())
        for _ in range(2):
            x, y = torch.randn(6, 8, generator=g).to(dev), torch.randn(6, 4, generator=g).to(dev)
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
        return [params(p).detach().cpu() for p in model.parameters()]

    ddp = on_gpu(DDP(_model().to(dev), device_ids=[dev.index], process_group=pg), lambda p: p)
    model = _model().to(dev)
    mesh = DeviceMesh.from_group(pg, "cuda")
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    fsdp = on_gpu(model, lambda p: p.full_tensor())
    for got, what in ((ddp, "DDP"), (fsdp, "FSDP2")):
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=what)


# ------------------------------------------------------------------------------ groups


def test_subgroups():
    groups = [tb.new_group([r]) for r in range(n())]
    mine = groups[me()]
    assert dist.get_backend(mine) == "rshmem" and mine.size() == 1
    t = torch.full((4,), float(me() + 1))
    dist.all_reduce(t, group=mine)
    assert torch.all(t == me() + 1)
    outs = [torch.zeros(4)]
    dist.all_gather(outs, t, group=mine)
    assert torch.equal(outs[0], t)
    for r, g in enumerate(groups):
        if r != me():
            assert g == dist.GroupMember.NON_GROUP_MEMBER


def test_subgroup_of_every_rank_through_new_group(pg):
    g = tb.new_group(list(range(n())))
    t = torch.ones(3)
    dist.all_reduce(t, group=g)
    assert torch.all(t == n())


def test_plain_new_group_of_some_ranks_refused():
    if me() == 0:
        with pytest.raises(rshmem.UnsupportedError, match="rshmem.torch_backend.new_group"):
            dist.new_group([0], backend="rshmem")
    else:
        assert dist.new_group([0], backend="rshmem") == dist.GroupMember.NON_GROUP_MEMBER
    dist.barrier()


def test_new_group_bad_ranks():
    with pytest.raises(rshmem.InvalidArgumentError, match="world ranks"):
        tb.new_group([0, n()])


# ------------------------------------------------------------------------------ errors


def test_unsupported_reduce_ops(pg):
    with pytest.raises(rshmem.UnsupportedError, match="AVG of torch.int32"):
        dist.all_reduce(torch.ones(3, dtype=torch.int32), dist.ReduceOp.AVG, group=pg)
    with pytest.raises(rshmem.UnsupportedError, match="PREMUL_SUM"):
        dist.all_reduce(torch.ones(3), dist._make_nccl_premul_sum(2.0), group=pg)
    with pytest.raises(rshmem.DTypeError, match="bitwise"):
        dist.all_reduce(torch.ones(3), dist.ReduceOp.BOR, group=pg)


@pytest.mark.parametrize("dtype", [torch.bool, torch.float8_e4m3fn])
def test_unsupported_dtypes(pg, dtype):
    with pytest.raises(rshmem.DTypeError, match="no rshmem collective"):
        dist.all_reduce(torch.zeros(3, dtype=dtype), group=pg)


def test_complex_sum(pg):
    # torch hands a complex SUM to the backend as its real view
    t = torch.full((3,), complex(me(), 1), dtype=torch.complex64)
    dist.all_reduce(t, group=pg)
    assert torch.all(t == complex(sum(range(n())), n()))


def test_bad_arguments(pg):
    with pytest.raises(rshmem.InvalidArgumentError, match="contiguous"):
        dist.all_reduce(torch.ones(4, 4).t(), group=pg)
    with pytest.raises(rshmem.InvalidArgumentError, match="group size"):
        dist.all_gather_into_tensor(torch.zeros(3), torch.ones(2), group=pg)
    with pytest.raises(rshmem.InvalidArgumentError, match="splits"):
        dist.all_to_all_single(torch.zeros(4), torch.zeros(4), [1] * n(), [1] * n(), group=pg)
    with pytest.raises((rshmem.InvalidArgumentError, ValueError, RuntimeError)):
        dist.broadcast(torch.ones(2), n(), group=pg)


def test_mismatched_splits_raise_on_every_rank(pg):
    # Both ranks expect one element more from rank 0 than it sends: all raise, none waits.
    send = [1] * n()
    recv = [2 if r == 0 else 1 for r in range(n())]
    with pytest.raises(rshmem.InvalidArgumentError, match="must agree"):
        dist.all_to_all_single(torch.zeros(sum(recv)), torch.zeros(sum(send)), recv, send, group=pg)


def test_unsupported_calls(pg):
    with pytest.raises(rshmem.UnsupportedError, match="tag"):
        dist.send(torch.ones(2), (me() + 1) % n(), group=pg, tag=3)
    with pytest.raises(rshmem.UnsupportedError, match="named rank"):
        dist.recv(torch.ones(2), group=pg)
    with pytest.raises(rshmem.UnsupportedError, match="gather is not supported"):
        dist.gather(torch.ones(2), [torch.ones(2) for _ in range(n())] if me() == 0 else None, dst=0, group=pg)
    with pytest.raises(rshmem.UnsupportedError, match="reduce is not supported"):
        dist.reduce(torch.ones(2), 0, group=pg)
