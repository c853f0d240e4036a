"""Which PEs an op runs over (the `group=` argument), and which device this PE computes on.

An op runs over an rshmem team. `group` may be None (every PE), `rshmem.Team.WORLD`, a
`torch.distributed` process group whose ranks are the PEs in PE order (the group rshmem was
initialized with, or one spanning the same processes), or an `rshmem.Team` whose members are
every PE. The ops' symmetric workspaces are allocated collectively over all PEs, the first time
an op needs one; a team of only some PEs would leave the others out of that collective, so it is
refused with a message saying so.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .. import _core, _native
from .._native import InvalidArgumentError, NotInitializedError, UnsupportedError


@dataclass(frozen=True)
class TeamInfo:
    """The team an op runs over: its id, size, this PE's index in it, the world PE of each member
    (in team order), and the device this PE computes on."""

    team: int
    size: int
    rank: int
    pes: tuple
    backend: str
    device_index: int  # this PE's GPU, -1 on the host backend

    @property
    def device(self) -> torch.device:
        return device()


def device() -> torch.device:
    """The torch device of this PE: its GPU on the cuda backend, the CPU on the host backend."""
    from .. import torch as rtorch

    return rtorch.device()


def _require_init(what: str) -> None:
    if not _native.is_initialized():
        raise NotInitializedError(f"rshmem is not initialized: call rshmem.init() before rshmem.ops.{what}()")


def _team_of_process_group(group, what: str) -> int:
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        raise InvalidArgumentError(f"rshmem.ops.{what}: group={group!r} is a torch.distributed group, but "
                                   "torch.distributed is not initialized")
    try:
        size = dist.get_world_size(group)
        rank = dist.get_rank(group)
    except (RuntimeError, ValueError) as e:
        raise InvalidArgumentError(f"rshmem.ops.{what}: group={group!r} is not a torch.distributed group this "
                                   f"process can use ({e})") from None
    n = _native.n_pes()
    me = _native.my_pe()
    # Each PE checks its own position: if every member's group rank is its PE number and the
    # group has every PE, group rank i is PE i for all i, with no exchange at all.
    if size != n or rank != me:
        raise UnsupportedError(
            f"rshmem.ops.{what}: the torch.distributed group has {size} ranks and this process is rank {rank} in "
            f"it, but rshmem has {n} PEs and this is PE {me}: the ops run over all PEs in PE order (the group "
            "rshmem.init() was given, or group=None). Ops over a subset of the PEs are not supported: their "
            "symmetric workspaces are allocated collectively over all PEs")
    return int(_core.Team.WORLD)


def team_of(group, what: str) -> int:
    """The rshmem team id an op with `group=` runs over (see the module docstring)."""
    _require_init(what)
    if group is None:
        return int(_core.Team.WORLD)
    if isinstance(group, bool):
        raise InvalidArgumentError(f"rshmem.ops.{what}: group must be None, a torch.distributed group or an "
                                   f"rshmem.Team, not {group!r}")
    if isinstance(group, int):
        team = int(group)
        try:
            size = _native.team_n_pes(team)
        except _native.RshmemError as e:
            raise InvalidArgumentError(f"rshmem.ops.{what}: group={group!r} is not a live rshmem team ({e})") from None
        if size != _native.n_pes():
            raise UnsupportedError(
                f"rshmem.ops.{what}: team {_core.Team(team)!r} has {size} of the {_native.n_pes()} PEs; the ops run "
                "over teams of every PE only (their symmetric workspaces are allocated collectively over all PEs)")
        return team
    return _team_of_process_group(group, what)


_infos: dict = {}


def info(team: int, what: str = "op") -> TeamInfo:
    """The `TeamInfo` of `team` (cached until `rshmem.finalize()`)."""
    found = _infos.get(team)
    if found is None:
        _require_init(what)
        size = _native.team_n_pes(team)
        rank = _native.team_my_pe(team)
        if rank < 0:
            raise InvalidArgumentError(f"rshmem.ops.{what}: this PE is not a member of team {team}")
        pes = tuple(_native.team_translate_pe(team, i, int(_core.Team.WORLD)) for i in range(size))
        backend = _native.backend()
        index = device().index if backend == "cuda" else -1
        found = _infos[team] = TeamInfo(team, size, rank, pes, backend, index)
    return found


def forget() -> None:
    _infos.clear()
