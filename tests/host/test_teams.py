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
    with pytest.raises(rshmem.RshmemError):
        rshmem.team_my_pe(Team.INVALID)
    with pytest.raises(rshmem.InvalidArgumentError):
        rtorch.create_symmetric_tensors((2,), torch.float32, rshmem.my_pe(), npes + 1)
