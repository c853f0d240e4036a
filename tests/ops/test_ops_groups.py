"""rshmem.ops over groups of only some PEs (`register_group`), on the session's backend (the host
backend in CI), against torch's unfused result over the group's members; and every misuse.

Written for any even PE count: with 2 PEs the groups are single PEs, with 4 (run by hand:
`torchrun --nproc-per-node 4 -m pytest tests/ops/test_ops_groups.py`) two groups of 2, both as
halves ([0, 1], [2, 3]) and as even and odd PEs ([0, 2], [1, 3]). Every PE builds the global
inputs from one seed and checks its group's whole result itself.
"""
from __future__ import annotations

import pytest
import torch

import rshmem
import rshmem.nn as rnn
import rshmem.ops as ops

pytestmark = pytest.mark.multi
WS = 1 << 20  # workspace bytes of each registered group: plenty for these shapes


def _global(shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g, dtype=torch.float32).to(dtype)


def _close(got, want, dtype, what):
    tol = 2e-2 if dtype == torch.bfloat16 else 3e-3
    err = (got.float() - want.float()).abs().max().item()
    scale = max(want.float().abs().max().item(), 1.0)
    assert err <= tol * scale, f"{what}: max error {err} against a largest value {scale}"


def _groups(npes, how):
    """Every group of a split (each a list of PEs), made with dist.new_group by every rank, and
    the one this PE belongs to as (torch group, its PEs)."""
    import torch.distributed as dist

    if npes % 2:
        pytest.skip("needs an even number of PEs")
    half = npes // 2
    lists = [list(range(half)), list(range(half, npes))] if how == "halves" else \
        [list(range(0, npes, 2)), list(range(1, npes, 2))]
    made = [dist.new_group(pes) for pes in lists]  # collective: every rank makes every group
    me = rshmem.my_pe()
    for pg, pes in zip(made, lists):
        if me in pes:
            return pg, pes
    raise AssertionError("this PE is in no group")


@pytest.mark.parametrize("how", ["halves", "even_odd"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_ops_over_a_registered_group_match_torch(npes, how, dtype):
    pg, pes = _groups(npes, how)
    team = ops.register_group(pg, workspace_bytes=WS)
    assert team is not None and rshmem.team_n_pes(team) == len(pes)
    W, r = len(pes), pes.index(rshmem.my_pe())
    # Each group computes its own data (seeded by its first PE): the groups must not mix.
    seed = 1000 * pes[0]
    m, K, N = 3, 16, 10
    A = _global((W * m, K), dtype, seed + 1)
    B = _global((K, N), dtype, seed + 2)
    c, full = ops.all_gather_matmul(A[r * m:(r + 1) * m].contiguous(), B, group=pg, return_a=True)
    assert torch.equal(full, A)
    _close(c, A.float() @ B.float(), dtype, "all_gather_matmul")

    A2 = _global((W * m, W * K), dtype, seed + 3)
    B2 = _global((N, W * K), dtype, seed + 4).t()  # as linear.weight.t()
    got = ops.matmul_reduce_scatter(A2[:, r * K:(r + 1) * K].contiguous(), B2[r * K:(r + 1) * K], group=pg)
    _close(got, (A2.float() @ B2.float())[r * m:(r + 1) * m], dtype, "matmul_reduce_scatter")

    xs = [_global((5, 7), dtype, seed + 10 + i) for i in range(W)]
    _close(ops.all_reduce(xs[r], op="sum", group=pg), torch.stack([x.float() for x in xs]).sum(0), dtype, "sum")
    assert torch.equal(ops.all_reduce(xs[r], op="max", group=pg), torch.stack(xs).amax(0))
    # The rshmem team works as the group too, and ops over every PE still work beside it.
    assert torch.equal(ops.all_reduce(xs[r], op="max", group=team), torch.stack(xs).amax(0))
    assert torch.equal(ops.all_reduce(torch.ones(4)), torch.full((4,), float(npes)))


def test_groups_run_different_shapes_and_the_layers_take_them(npes):
    """The two halves call the ops with shapes of their own (no exchange crosses the groups),
    and the tensor-parallel layers run over a group with gradients."""
    pg, pes = _groups(npes, "halves")
    ops.register_group(pg, workspace_bytes=WS)
    W, r = len(pes), pes.index(rshmem.my_pe())
    hidden = 8 if pes[0] == 0 else 12
    torch.manual_seed(pes[0])  # the same full layer on every member of a group
    full = torch.nn.Linear(hidden, 4 * W, dtype=torch.bfloat16)
    layer = rnn.ColumnParallelLinear.from_linear(full, group=pg)
    x = _global((2 * W, hidden), torch.bfloat16, 50 + pes[0])
    shard = x[2 * r:2 * (r + 1)].clone().requires_grad_()
    y = layer(shard)
    _close(y, full(x)[:, r * 4:(r + 1) * 4], torch.bfloat16, "ColumnParallelLinear over the group")
    y.float().sum().backward()
    assert shard.grad is not None and layer.weight.grad is not None
    row = rnn.RowParallelLinear.from_linear(torch.nn.Linear(4 * W, hidden, dtype=torch.bfloat16), group=pg)
    assert row(torch.ones((2 * W, 4), dtype=torch.bfloat16)).shape == (2, hidden)


def test_registering_again_and_an_rshmem_team_reuse_the_team(npes):
    pg, pes = _groups(npes, "halves")
    first = ops.register_group(pg, workspace_bytes=WS)
    again = ops.register_group(pg, workspace_bytes=WS)
    assert first == again
    # A team made by team_split_strided (every PE makes both), registered by its members.
    me = rshmem.my_pe()
    teams = [rshmem.team_split_strided(rshmem.Team.WORLD, start, 2, npes // 2) for start in (0, 1)]
    mine = teams[me % 2]
    assert ops.register_group(mine, workspace_bytes=WS) == mine
    want = torch.stack([torch.full((3,), float(p)) for p in range(me % 2, npes, 2)]).sum(0)
    assert torch.equal(ops.all_reduce(torch.full((3,), float(me)), group=mine), want)
    # A whole group needs no registration, and registering it is accepted.
    assert ops.register_group(None, workspace_bytes=WS) is None
    import torch.distributed as dist

    assert ops.register_group(dist.group.WORLD, workspace_bytes=WS) == rshmem.Team.WORLD


# ---------------------------------------------------------------------------------- misuse


def test_an_unregistered_group_is_refused_with_what_to_do(npes):
    import torch.distributed as dist

    # PE 0 is not in this group; with 4 PEs, [1, 2] is a group no test registers.
    pg = dist.new_group([1, 2] if npes >= 4 else [1])
    me = rshmem.my_pe()
    if me == 0:
        with pytest.raises(rshmem.InvalidArgumentError, match="not a member of the group"):
            ops.all_reduce(torch.ones(3), group=pg)
    elif npes >= 4 and me in (1, 2):
        with pytest.raises(rshmem.UnsupportedError, match=r"call rshmem.ops.register_group\(group\) on every PE"):
            ops.all_reduce(torch.ones(3), group=pg)
    sub = rshmem.team_split_strided(rshmem.Team.WORLD, 0, 1, 1)  # every PE makes it, PE 0 is in it
    if sub is not None:
        with pytest.raises(rshmem.UnsupportedError, match="was not registered for rshmem.ops"):
            ops.all_reduce(torch.ones(3), group=sub)
        rshmem.team_destroy(sub)
    with pytest.raises(rshmem.InvalidArgumentError, match="group must be None"):
        ops.all_reduce(torch.ones(3), group=True)
    rshmem.barrier_all()


def test_overlapping_groups_and_differing_workspace_sizes_raise_on_every_pe(npes):
    import torch.distributed as dist

    whole = dist.new_group(list(range(npes)))
    last = dist.new_group([npes - 1])
    # PE 0 passes all PEs, the last PE only itself: they overlap.
    me = rshmem.my_pe()
    mine = whole if me == 0 else (last if me == npes - 1 else None)
    with pytest.raises(rshmem.MismatchError, match="must not overlap"):
        ops.register_group(mine, workspace_bytes=WS)
    with pytest.raises(rshmem.MismatchError, match="same"):
        ops.register_group(None, workspace_bytes=WS + 256 * me)
    with pytest.raises(rshmem.InvalidArgumentError, match="workspace_bytes=0"):
        ops.register_group(None, workspace_bytes=0)
    # A bad group on one PE: that PE says why, the others that no group was registered.
    if me == 0:
        with pytest.raises(rshmem.InvalidArgumentError, match="not 'tp'"):
            ops.register_group("tp", workspace_bytes=WS)
    else:
        with pytest.raises(rshmem.UnsupportedError, match=r"PE\(s\) \[0\] passed a group"):
            ops.register_group(None, workspace_bytes=WS)


def test_groups_that_are_not_evenly_spaced_are_refused(npes):
    import torch.distributed as dist

    from rshmem.ops import _register

    with pytest.raises(rshmem.UnsupportedError, match=r"PEs \[0, 1, 3\] in group-rank order, which is not an evenly"):
        _register._progression([0, 1, 3], "the group")
    assert _register._progression([2, 4, 6], "the group") == (2, 2, 3)
    if npes < 4:
        return  # every group of 2 PEs is evenly spaced: the collective refusal needs 4
    odd = dist.new_group([0, 1, 3])
    me = rshmem.my_pe()
    if me in (0, 1, 3):
        with pytest.raises(rshmem.UnsupportedError, match="not an evenly spaced"):
            ops.register_group(odd, workspace_bytes=WS)
    else:
        with pytest.raises(rshmem.UnsupportedError, match="cannot map"):
            ops.register_group(None, workspace_bytes=WS)


def test_a_full_workspace_says_to_register_a_larger_one(npes):
    pg, pes = _groups(npes, "halves")
    ops.register_group(pg, workspace_bytes=WS)
    # 1 Mi fp32 values need 4 MiB buffers on the host backend, more than the group's workspace.
    with pytest.raises(rshmem.HeapExhaustedError, match="register the group with a larger workspace_bytes"):
        ops.all_reduce(torch.ones(1 << 20), group=pg)
    # Nothing was taken: smaller calls still fit.
    assert torch.equal(ops.all_reduce(torch.ones(8), group=pg), torch.full((8,), float(len(pes))))
