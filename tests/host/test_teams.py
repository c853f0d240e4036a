"""Teams: predefined ones, translation, split and destroy."""

import os

import pytest
import torch

import rshmem
import rshmem.torch as rtorch
from rshmem import Team


def test_predefined_teams(me, npes):
    assert (int(Team.WORLD), int(Team.SHARED), int(Team.NODE), int(Team.SAME_MYPE_NODE)) == (0, 1, 2, 3)
    assert rshmem.team_my_pe(Team.WORLD) == me
    assert rshmem.team_n_pes(Team.WORLD) == npes
    # One machine, split into RSHMEM_VIRTUAL_HOSTS hosts of consecutive PEs (1: one host, where
    # NODE and SHARED are the whole job and SAME_MYPE_NODE is this PE alone).
    hosts = min(int(os.environ.get("RSHMEM_VIRTUAL_HOSTS") or 1), npes)
    host_of = [pe * hosts // npes for pe in range(npes)]
    node = [pe for pe in range(npes) if host_of[pe] == host_of[me]]
    local = node.index(me)
    same_index = [pe for pe in range(npes) if [q for q in range(npes) if host_of[q] == host_of[pe]].index(pe) == local]
    assert rshmem.team_n_pes(Team.NODE) == len(node)
    assert rshmem.team_n_pes(Team.SHARED) == len(node)
    assert rshmem.team_n_pes(Team.SAME_MYPE_NODE) == len(same_index)
    assert rshmem.team_my_pe(Team.SAME_MYPE_NODE) == same_index.index(me)
    assert rshmem.team_translate_pe(Team.NODE, local, Team.WORLD) == me
    assert rshmem.team_translate_pe(Team.SAME_MYPE_NODE, 0, Team.WORLD) == same_index[0]
    assert repr(Team.NODE) == "Team.NODE"


def test_split_strided_and_destroy(me, npes):
    evens = rshmem.team_split_strided(Team.WORLD, 0, 2, (npes + 1) // 2)
    if me % 2 == 0:
        assert isinstance(evens, Team)
        assert rshmem.team_my_pe(evens) == me // 2
        assert rshmem.team_n_pes(evens) == (npes + 1) // 2
        assert rshmem.team_translate_pe(evens, 0, Team.WORLD) == 0
        rshmem.barrier(evens)
    else:
        assert evens is None
    if evens is not None:
        rshmem.team_destroy(evens)
    rshmem.barrier_all()


def test_collective_on_split_team(me, npes):
    team = rshmem.team_split_strided(Team.WORLD, 0, 1, npes)  # a copy of WORLD
    assert team is not None
    src = rtorch.create_symmetric_tensor((4,), torch.int64)
    dst = rtorch.create_symmetric_tensor((4 * npes,), torch.int64)
    src.fill_(me)
    rshmem.barrier_all()
    rshmem.fcollect(dst, src, team)
    assert dst.tolist() == [pe for pe in range(npes) for _ in range(4)]
    rshmem.team_destroy(team)
    rshmem.barrier_all()
    rtorch.free_tensor(dst)
    rtorch.free_tensor(src)


def test_bad_team_and_pe_raise(npes):
    with pytest.raises(rshmem.RshmemError):
        rshmem.team_n_pes(Team(25))
    with pytest.raises(rshmem.InvalidArgumentError):
        rshmem.barrier(Team.INVALID)
    with pytest.raises(rshmem.InvalidArgumentError):
        rshmem.sync(None)
    with pytest.raises(rshmem.InvalidArgumentError):
        rtorch.create_symmetric_tensors((2,), torch.float32, rshmem.my_pe(), npes + 1)


def test_invalid_team_as_nvshmem(me, npes):
    # None (what a split gives the PEs it leaves out) and Team.INVALID: -1 from the queries, destroy
    # does nothing, a split of it gives None.
    for invalid in (None, Team.INVALID):
        assert rshmem.team_my_pe(invalid) == -1
        assert rshmem.team_n_pes(invalid) == -1
        assert rshmem.team_translate_pe(invalid, 0, Team.WORLD) == -1
        assert rshmem.team_translate_pe(Team.WORLD, me, invalid) == -1
        rshmem.team_destroy(invalid)
        assert rshmem.team_split_strided(invalid, 0, 1, 1) is None
        assert rshmem.team_split_2d(invalid, 2) == (None, None)
    # The spec's pattern: a team of PE 0 alone, destroyed on every PE.
    first = rshmem.team_split_strided(Team.WORLD, 0, 1, 1)
    assert (first is not None) == (me == 0)
    assert rshmem.team_n_pes(first) == (1 if me == 0 else -1)
    rshmem.team_destroy(first)
    rshmem.barrier_all()


def test_split_2d(me, npes):
    xteam, yteam = rshmem.team_split_2d(Team.WORLD, 2)
    row = [pe for pe in range(npes) if pe // 2 == me // 2]
    column = [pe for pe in range(npes) if pe % 2 == me % 2]
    assert rshmem.team_n_pes(xteam) == len(row) and rshmem.team_my_pe(xteam) == row.index(me)
    assert rshmem.team_n_pes(yteam) == len(column) and rshmem.team_my_pe(yteam) == column.index(me)
    assert [rshmem.team_translate_pe(yteam, i, Team.WORLD) for i in range(len(column))] == column
    rshmem.team_destroy(xteam)
    rshmem.team_destroy(yteam)
    with pytest.raises(rshmem.InvalidArgumentError, match="xrange"):
        rshmem.team_split_2d(Team.WORLD, 0)
    rshmem.barrier_all()


_GLOBAL_EXIT = """
import sys, time, rshmem
rshmem.init()
rshmem.barrier_all()
if rshmem.my_pe() == CALLER:
    time.sleep(0.2)  # the others are inside the barrier below
    print("exiting", flush=False)  # global_exit flushes Python's stdout
    rshmem.global_exit(7)
    print("global_exit returned")
rshmem.barrier_all()
print("the barrier completed")
"""


@pytest.mark.single
@pytest.mark.parametrize("caller", [0, 2])
def test_global_exit_ends_every_pe_with_the_status(caller):
    from conftest import run_pes

    pes = run_pes(_GLOBAL_EXIT.replace("CALLER", str(caller)), 3, timeout=60)
    for rank, pe in enumerate(pes):
        assert pe.returncode == 7, f"PE {rank}: {pe.returncode}\n{pe.stdout}{pe.stderr}"
        assert "completed" not in pe.stdout and "returned" not in pe.stdout
    assert pes[caller].stdout.strip() == "exiting"
