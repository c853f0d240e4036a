"""Which PEs an op runs over (the `group=` argument), this PE's device, and the symmetric
memory of teams of only some PEs.

An op runs over an rshmem team. `group` may be None (every PE), `rshmem.Team.WORLD`, a
`torch.distributed` process group, or an `rshmem.Team`. A group or team of every PE (group rank
i = PE i) needs nothing more. A group of only some PEs (`dist.new_group([0, 1])` of 4) must first
be registered by `rshmem.ops.register_group` (see `_register`), a call every PE makes, as every
process makes `dist.new_group`: symmetric memory is allocated collectively over all PEs, and the
PEs outside the group never call the group's ops, so the team and a symmetric `Arena` for the
group's workspaces are made then, while every PE takes part. The group's ops then carve their
workspaces from the arena (`symmetric`), in the same order on every member (they make the same
op calls), hence at the same offsets: symmetric within the team with no collective at all.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .. import _native, _teams
from .._native import HeapExhaustedError, InvalidArgumentError, NotInitializedError, UnsupportedError


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



def _public(what: str) -> str:
    """The public name of the call that passed `what`: `rshmem.ops.<op>` for an op, or a layer's
    own module path (`"nn.ColumnParallelLinear"` -> `rshmem.nn.ColumnParallelLinear`)."""
    return f"rshmem.{what}" if "." in what else f"rshmem.ops.{what}"


def device() -> torch.device:
    """The torch device of this PE: its GPU on the cuda backend, the CPU on the host backend."""
    from .. import torch as rtorch

    return rtorch.device()


def _require_init(what: str) -> None:
    if not _native.is_initialized():
        raise NotInitializedError(f"rshmem is not initialized: call rshmem.init() before {_public(what)}()")


def _not_registered(what: str, described: str) -> UnsupportedError:
    return UnsupportedError(
        f"{_public(what)}: {described}, which has only some of the {_native.n_pes()} PEs and was not registered "
        "for rshmem.ops: call rshmem.ops.register_group(group) on every PE first (collective over all PEs, like "
        "dist.new_group; each PE passes the group it belongs to, or None), then pass the group to the ops")


def _is_non_member(group) -> bool:
    """Whether `group` is what `dist.new_group` gives the processes outside the group."""
    import torch.distributed as dist

    return dist.is_available() and type(group) is type(dist.GroupMember.NON_GROUP_MEMBER) and \
        group == dist.GroupMember.NON_GROUP_MEMBER


def process_group_ranks(group, what: str) -> tuple:
    """The global torch.distributed ranks of `group`'s members, in group-rank order."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        raise InvalidArgumentError(f"{_public(what)}: group={group!r} is a torch.distributed group, but "
                                   "torch.distributed is not initialized")
    if _is_non_member(group):
        raise InvalidArgumentError(f"{_public(what)}: this process is not a member of the group it passed "
                                   "(dist.new_group gave it GroupMember.NON_GROUP_MEMBER): only members call the "
                                   "group's ops")
    try:
        ranks = tuple(dist.get_process_group_ranks(group))
        member = dist.get_rank(group)
    except (RuntimeError, ValueError, TypeError, AttributeError, KeyError) as e:
        raise InvalidArgumentError(f"{_public(what)}: group={group!r} is not a torch.distributed group this "
                                   f"process can use ({e})") from None
    if member < 0:
        raise InvalidArgumentError(f"{_public(what)}: this process (rank {dist.get_rank()}) is not a member of the "
                                   f"group of ranks {list(ranks)}: only members call the group's ops")
    return ranks


def _team_of_process_group(group, what: str) -> int:
    # A process group's members never change: its team is worked out once (a few
    # torch.distributed queries, which a call of an op would feel) and kept until finalize.
    try:
        found = _group_teams.get(group)
    except TypeError:  # not hashable: not a process group either; _team_of_ranks says so
        found = None
    if found is not None:
        return found
    team = _team_of_ranks(group, what)
    _process_groups[team] = group
    _group_teams[group] = team
    return team


def _team_of_ranks(group, what: str) -> int:
    import torch.distributed as dist

    ranks = process_group_ranks(group, what)
    n = _native.n_pes()
    # Each PE checks its own position: if every member's group rank is its PE number and the
    # group has every PE, group rank i is PE i for all i, with no exchange at all.
    if len(ranks) == n and dist.get_rank(group) == _native.my_pe():
        return int(_teams.Team.WORLD)
    found = _registered_ranks.get(ranks)
    if found is None:
        if len(ranks) == n:
            raise UnsupportedError(
                f"{_public(what)}: the torch.distributed group has every rank but this process is rank "
                f"{dist.get_rank(group)} in it and PE {_native.my_pe()} of rshmem: the ops need group rank i to be "
                "PE i (the group rshmem.init() was given, or group=None)")
        raise _not_registered(what, f"the torch.distributed group of ranks {list(ranks)}")
    return found


def team_of(group, what: str) -> int:
    """The rshmem team id an op with `group=` runs over (see the module docstring)."""
    _require_init(what)
    if group is None:
        return int(_teams.Team.WORLD)
    if isinstance(group, bool):
        raise InvalidArgumentError(f"{_public(what)}: group must be None, a torch.distributed group or an "
                                   f"rshmem.Team, not {group!r}")
    if isinstance(group, int) and not _is_non_member(group):
        team = int(group)
        try:
            size = _native.team_n_pes(team)
        except _native.RshmemError as e:
            raise InvalidArgumentError(f"{_public(what)}: group={group!r} is not a live rshmem team ({e})") from None
        if size != _native.n_pes() and team not in _arenas:
            raise _not_registered(what, f"team {_teams.Team(team)!r} has {size} PEs")
        if _native.team_my_pe(team) < 0:
            raise InvalidArgumentError(f"{_public(what)}: this PE is not a member of team {_teams.Team(team)!r}: "
                                       "only members call the team's ops")
        return team
    return _team_of_process_group(group, what)


class Arena:
    """Symmetric memory of one registered team's workspaces: a zero-filled symmetric tensor
    allocated over all PEs by `register_group`, handed out front to back and never taken back
    (the ops keep their workspaces until `rshmem.finalize()`), so every piece is zero when
    first handed out and lies at the same offset on every member."""

    ALIGN = 256

    def __init__(self, team: int, memory: torch.Tensor):
        self.team = team
        self.memory = memory
        self.used = 0

    def take(self, shape, dtype, what: str) -> torch.Tensor:
        """A zero-filled `dtype` tensor of `shape` from the arena, symmetric within the team."""
        n = 1
        for d in shape:
            n *= int(d)
        nbytes = max(n * dtype.itemsize, 1)
        start = -(-self.used // self.ALIGN) * self.ALIGN
        if start + nbytes > self.memory.numel():
            raise HeapExhaustedError(
                f"{_public(what)}: team {_teams.Team(self.team)!r} needs {nbytes} more bytes of workspace, but "
                f"{start} of the {self.memory.numel()} bytes that rshmem.ops.register_group gave it are taken: "
                "register the group with a larger workspace_bytes (or set rshmem.ops.config.group_workspace_bytes "
                "before registering)")
        self.used = start + nbytes
        return self.memory[start:start + nbytes].view(dtype).view(tuple(int(d) for d in shape))


_arenas: dict = {}  # team -> Arena
_registered_ranks: dict = {}  # global torch ranks of a registered group -> team
_process_groups: dict = {}  # team -> the torch.distributed group last passed for it
_group_teams: dict = {}  # torch.distributed group -> its team


def process_group(team: int):
    """The torch.distributed group of `team`'s PEs: the last one an op was given for it, or for
    the world team torch's WORLD group when it is every PE in PE order; None when there is none."""
    found = _process_groups.get(team)
    if found is not None or team != int(_teams.Team.WORLD):
        return found
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized() and dist.get_world_size() == _native.n_pes() and \
            dist.get_rank() == _native.my_pe():
        return dist.group.WORLD
    return None


def register(team: int, ranks: tuple, arena: "Arena | None") -> None:
    """Records a registered team (`_register` makes it): the torch ranks of its members, its arena."""
    if ranks:
        _registered_ranks[ranks] = team
    if arena is not None:
        _arenas[team] = arena


def symmetric(info: "TeamInfo", shape, dtype, what: str) -> torch.Tensor:
    """A zero-filled tensor symmetric over `info`'s team: collective over every PE for a team of
    all PEs, carved from the team's arena (no collective) for a registered team of some."""
    if info.size == _native.n_pes():
        import rshmem.torch as rtorch

        return rtorch.create_symmetric_tensor(tuple(shape), dtype)
    arena = _arenas.get(info.team)
    if arena is None:
        raise _not_registered(what, f"team {_teams.Team(info.team)!r} has {info.size} PEs")
    return arena.take(shape, dtype, what)


_infos: dict = {}


def info(team: int, what: str = "op") -> TeamInfo:
    """The `TeamInfo` of `team` (cached until `rshmem.finalize()`)."""
    found = _infos.get(team)
    if found is None:
        _require_init(what)
        size = _native.team_n_pes(team)
        rank = _native.team_my_pe(team)
        if rank < 0:
            raise InvalidArgumentError(f"{_public(what)}: this PE is not a member of team {team}")
        pes = tuple(_native.team_translate_pe(team, i, int(_teams.Team.WORLD)) for i in range(size))
        backend = _native.backend()
        index = device().index if backend == "cuda" else -1
        found = _infos[team] = TeamInfo(team, size, rank, pes, backend, index)
    return found


def forget() -> None:
    """rshmem.finalize(): the teams and the heap go away."""
    _infos.clear()
    _arenas.clear()
    _registered_ranks.clear()
    _process_groups.clear()
    _group_teams.clear()
