"""`rshmem.ops.register_group`: makes a group of only some PEs usable as the ops' `group=`.

Why a call of every PE: an op over a group runs over an rshmem team with symmetric workspaces,
and both are made collectively over all PEs (`team_split_strided` over the world team, symmetric
allocation), which the PEs outside the group would never join from inside the group's ops.
`torch.distributed.new_group` asks the same of every process, so the call goes right after it:

    tp = dist.new_group([0, 1]) ... ; dist.new_group([2, 3])      # or dist.new_subgroups(2)
    rshmem.ops.register_group(my_tp_group)                         # every PE, its own group or None

One call, collective over all PEs:

1. Each PE describes the group it passed as (start, stride, size) in PE numbers; a group rshmem
   can map is an arithmetic progression of PEs (what `team_split_strided` makes) whose torch
   ranks are their PE numbers. A PE whose group cannot be mapped sends a refusal instead of
   raising, so that no PE is left alone in the exchange.
2. One exchange over all PEs (`_checks.exchange`): every PE sees every PE's description. Every
   PE checks the same table: every member of a described group describes the same group (so
   the groups are disjoint), every PE passes the same `workspace_bytes`; all raise alike.
3. Each distinct new group, in order of its first PE: `team_split_strided(WORLD, ...)` (every
   PE calls it, members get the team); a group already registered, or an rshmem team passed
   in, keeps its team.
4. One symmetric arena of `workspace_bytes` over all PEs (`_group.Arena`), if some group is new;
   the groups of one call are disjoint, so each PE's copy serves the one group it belongs to.
"""
from __future__ import annotations

from .. import _native, _teams
from .._native import InvalidArgumentError, MismatchError, UnsupportedError
from . import _checks, _group
from ._config import config

# The words of one PE's description (the exchange carries at most 16).
_NONE, _TORCH, _TEAM, _REFUSED = 0, 1, 2, -1

_known: dict = {}  # (kind, start, stride, size, team) of each group registered so far -> its team here (or None)
_memories: list = []  # every arena allocated, kept until rshmem.finalize() frees the heap


def forget() -> None:
    _known.clear()
    _memories.clear()


def _progression(pes: list, what: str) -> tuple:
    """(start, stride, size) of PEs that form an arithmetic progression, or InvalidArgumentError."""
    size = len(pes)
    stride = pes[1] - pes[0] if size > 1 else 1
    if stride < 1 or any(pes[i] != pes[0] + i * stride for i in range(size)):
        raise UnsupportedError(
            f"rshmem.ops.register_group: {what} has the PEs {pes} in group-rank order, which is not an evenly "
            "spaced increasing run (start, start + stride, ...): rshmem teams are made by team_split_strided, "
            "which can only make those")
    return pes[0], stride, size


def _describe(group) -> tuple:
    """(kind, start, stride, size, team id or -1) of the group this PE passed (raises for one it
    cannot map). Team ids are the same on every member of a team."""
    if group is None or _group._is_non_member(group):
        return _NONE, 0, 0, 0, -1
    if isinstance(group, bool):
        raise InvalidArgumentError(f"rshmem.ops.register_group: group must be a torch.distributed group, an "
                                   f"rshmem.Team or None, not {group!r}")
    if isinstance(group, int):
        team = int(group)
        try:
            size = _native.team_n_pes(team)
            rank = _native.team_my_pe(team)
        except _native.RshmemError as e:
            raise InvalidArgumentError(f"rshmem.ops.register_group: {group!r} is not a live rshmem team ({e})") from None
        if rank < 0:
            raise InvalidArgumentError(f"rshmem.ops.register_group: this PE is not a member of team "
                                       f"{_teams.Team(team)!r}: pass None on the PEs outside it")
        pes = [_native.team_translate_pe(team, i, int(_teams.Team.WORLD)) for i in range(size)]
        return (_TEAM,) + _progression(pes, f"team {_teams.Team(team)!r}") + (team,)
    import torch.distributed as dist

    if not (dist.is_available() and isinstance(group, dist.ProcessGroup)):
        raise InvalidArgumentError(f"rshmem.ops.register_group: group must be a torch.distributed group, an "
                                   f"rshmem.Team or None, not {group!r}")
    ranks = list(_group.process_group_ranks(group, "register_group"))
    if dist.get_world_size() != _native.n_pes() or dist.get_rank() != _native.my_pe():
        raise UnsupportedError(
            f"rshmem.ops.register_group: this process is torch.distributed rank {dist.get_rank()} of "
            f"{dist.get_world_size()} but PE {_native.my_pe()} of {_native.n_pes()}: a torch group maps to PEs "
            "only when every rank is its PE number (rshmem.init() on the WORLD group)")
    return (_TORCH,) + _progression(ranks, f"the group of ranks {ranks}") + (-1,)


def register_group(group, *, workspace_bytes: int | None = None):
    """Makes `group`, a `torch.distributed` group or an `rshmem.Team` of only some PEs, usable as
    the `group=` of every op of `rshmem.ops` and layer of `rshmem.nn`.

    Collective over all PEs, like `dist.new_group`: every PE calls it at the same point, passing
    the group of this call that it belongs to (groups of one call must be disjoint: e.g. each
    tensor-parallel group of `dist.new_subgroups`), or None (also `GroupMember.NON_GROUP_MEMBER`)
    when it belongs to none. The group's PEs must be evenly spaced (`[0, 1]`, `[2, 3]`,
    `[0, 2, 4]`), with torch rank i being PE i. `workspace_bytes` (the same on every PE; default
    `rshmem.ops.config.group_workspace_bytes`, else 1 GiB on GPUs and 64 MiB on the host backend) of symmetric memory are set aside on every PE for
    the group's workspaces; an op that needs more raises `HeapExhaustedError` saying so.

    A group of every PE needs no registration (it is accepted as is); registering one again, or
    one already registered, changes nothing. Returns this PE's `rshmem.Team` for its group, or
    None where it passed None.
    """
    what = "register_group"
    _group._require_init(what)
    if workspace_bytes is None:
        workspace_bytes = config.group_workspace_bytes or (1 << 30 if _native.backend() == "cuda" else 64 << 20)
    if isinstance(workspace_bytes, bool) or not isinstance(workspace_bytes, int) or workspace_bytes < 1:
        raise InvalidArgumentError(f"rshmem.ops.register_group: workspace_bytes={workspace_bytes!r} must be a "
                                   "positive number of bytes")
    _checks.not_capturing(what, "a group registration")
    failure = None
    try:
        mine = _describe(group)
    except _native.RshmemError as e:
        failure, mine = e, (_REFUSED, 0, 0, 0, -1)
    world = _group.info(int(_teams.Team.WORLD), what)
    table = [row[:6] for row in _checks.exchange(world, list(mine[:4]) + [workspace_bytes, mine[4]])]
    if failure is not None:
        raise failure
    groups = _check_table(table)
    n, me = world.size, world.rank
    arena_needed = False
    result = joined = None
    for key in groups:
        kind, start, stride, size, _ = key
        members = [start + i * stride for i in range(size)]
        ranks = tuple(members) if kind == _TORCH else ()
        if size == n:
            team = int(_teams.Team.WORLD)
        elif key in _known:
            team = _known[key]
            if me in members:
                _group.register(team, ranks, None)  # known as a team, now also as these torch ranks
        else:
            if kind == _TEAM:
                team = mine[4] if me in members else None  # made by the caller
            else:
                made = _teams.team_split_strided(_teams.Team.WORLD, start, stride, size)  # every PE calls it
                team = None if made is None else int(made)
            _known[key] = team
            arena_needed = True
            if me in members:
                joined = (team, ranks)
        if me in members:
            result = _teams.Team(team)
    if arena_needed:
        import torch

        import rshmem.torch as rtorch

        memory = rtorch.create_symmetric_tensor((workspace_bytes,), torch.uint8)
        _memories.append(memory)  # unused on the PEs outside the new groups, but allocated by all
        if joined is not None:
            _group.register(joined[0], joined[1], _group.Arena(joined[0], memory))
    return result


def _check_table(table: list) -> list:
    """The distinct groups of an exchange, (kind, start, stride, size, team) in order of the first PE;
    raises alike on every PE for a refusal, groups that overlap or disagree, or workspace sizes
    that differ."""
    n = len(table)
    sizes = {row[4] for row in table}
    if len(sizes) > 1:
        first = table[0][4]
        pe = next(i for i, row in enumerate(table) if row[4] != first)
        raise MismatchError(f"rshmem.ops.register_group: PE 0 passed workspace_bytes={first} and PE {pe} "
                            f"{table[pe][4]}; every PE must pass the same")
    refused = [i for i, row in enumerate(table) if row[0] == _REFUSED]
    if refused:
        raise UnsupportedError(f"rshmem.ops.register_group: PE(s) {refused} passed a group that rshmem cannot map "
                               "to a team (their own error says why); no group was registered")
    groups = {}
    def group(row):
        return row[:4] + row[5:6]

    for pe, row in enumerate(table):
        kind, start, stride, size = row[:4]
        if kind == _NONE:
            continue
        for i in range(size):
            other = start + i * stride
            if not 0 <= other < n or group(table[other]) != group(row):
                theirs = "nothing" if not 0 <= other < n or table[other][0] == _NONE else \
                    f"the PEs {_members(table[other])}"
                raise MismatchError(
                    f"rshmem.ops.register_group: PE {pe} passed a group of the PEs {_members(table[pe])}, but PE "
                    f"{other} passed {theirs}: every PE passes the one group of this call that it belongs to (the "
                    "groups of one call must not overlap), or None")
        groups[tuple(group(row))] = True
    return sorted(groups, key=lambda g: (g[1], g[0], g[2], g[3], g[4]))


def _members(row) -> list:
    _, start, stride, size = row[:4]
    return [start + i * stride for i in range(size)]
