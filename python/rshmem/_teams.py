"""Teams, ordering and barriers of `rshmem`: `Team`, `fence`, `quiet`, `barrier_all`, `sync_all`,
`barrier`, `sync`, the team queries and splits. Each passes its arguments through to the runtime
(`rshmem._native`), taking a `Team`, an int or None where a team goes."""

from __future__ import annotations

from . import _native
from ._errors import api


class Team(int):
    """A team of PEs, as its integer id. `Team.WORLD`, `Team.SHARED`, `Team.NODE` and
    `Team.SAME_MYPE_NODE` always exist; `team_split_strided` makes more. `Team.INVALID` (or
    `None`, what a split returns on the PEs it leaves out) is no team: as in NVSHMEM,
    `team_my_pe` / `team_n_pes` / `team_translate_pe` give -1 for it, `team_destroy` does
    nothing, a split of it gives None, and other calls raise `InvalidArgumentError`."""

    WORLD: "Team"
    SHARED: "Team"
    NODE: "Team"
    SAME_MYPE_NODE: "Team"
    INVALID: "Team"

    def __repr__(self) -> str:
        names = {0: "WORLD", 1: "SHARED", 2: "NODE", 3: "SAME_MYPE_NODE", -1: "INVALID"}
        return f"Team.{names[int(self)]}" if int(self) in names else f"Team({int(self)})"


Team.WORLD = Team(_native.TEAM_WORLD)
Team.SHARED = Team(_native.TEAM_SHARED)
Team.NODE = Team(_native.TEAM_NODE)
Team.SAME_MYPE_NODE = Team(_native.TEAM_SAME_MYPE_NODE)
Team.INVALID = Team(_native.TEAM_INVALID)


def _int_arg(value, what: str, team: bool = False) -> int:
    """`value` as an int for argument `what` (a Team, an int, a numpy integer), else
    ArgumentTypeError naming the argument and the value (not int()'s generic message). A team
    argument of None is Team.INVALID: what team_split_strided gives the PEs it leaves out."""
    if team and value is None:
        return _native.TEAM_INVALID
    if isinstance(value, bool) or not isinstance(value, int):
        index = getattr(type(value), "__index__", None)
        if index is None:
            kind = "a Team (e.g. rshmem.Team.WORLD, or one of team_split_strided)" if team else "an int"
            raise _native.ArgumentTypeError(f"{what} must be {kind}, not {value!r}")
        value = index(value)
    return int(value)


__all__ = [
    "fence",
    "quiet",
    "barrier_all",
    "sync_all",
    "barrier",
    "sync",
    "team_my_pe",
    "team_n_pes",
    "team_translate_pe",
    "team_split_strided",
    "team_destroy",
    "team_split_2d",
]


@api
def fence() -> None:
    """Orders this PE's puts, atomics and signals to each PE (`nvshmem_fence`)."""
    _native.fence()


@api
def quiet() -> None:
    """Completes every put, atomic and signal this PE issued (`nvshmem_quiet`)."""
    _native.quiet()


@api
def barrier_all() -> None:
    """Collective: completes this PE's puts, then waits for every PE (`nvshmem_barrier_all`)."""
    _native.barrier_all()


@api
def sync_all() -> None:
    """Collective: waits for every PE, without completing puts (`nvshmem_sync_all`)."""
    _native.sync_all()


@api
def barrier(team: Team | int | None = Team.WORLD) -> None:
    """Collective over `team`: quiet, then wait for the team (`nvshmem_barrier`)."""
    _native.barrier(_int_arg(team, "rshmem.barrier(): team", team=True))


@api
def sync(team: Team | int | None = Team.WORLD) -> None:
    """Collective over `team`: wait for the team (`nvshmem_team_sync`)."""
    _native.sync(_int_arg(team, "rshmem.sync(): team", team=True))


@api
def team_my_pe(team: Team | int | None = Team.WORLD) -> int:
    """This PE's number in `team`; -1 for `TEAM_INVALID` / None, what a split gives the PEs it leaves out (`nvshmem_team_my_pe`)."""
    return _native.team_my_pe(_int_arg(team, "rshmem.team_my_pe(): team", team=True))


@api
def team_n_pes(team: Team | int | None = Team.WORLD) -> int:
    """How many PEs `team` has; -1 for `TEAM_INVALID` / None (`nvshmem_team_n_pes`)."""
    return _native.team_n_pes(_int_arg(team, "rshmem.team_n_pes(): team", team=True))


@api
def team_translate_pe(src_team: Team | int | None, pe: int, dest_team: Team | int | None) -> int:
    """PE `pe` of `src_team` as numbered in `dest_team`; -1 when not there or when either team is `TEAM_INVALID` / None (`nvshmem_team_translate_pe`)."""
    return _native.team_translate_pe(_int_arg(src_team, "rshmem.team_translate_pe(): src_team", team=True), _int_arg(pe, "rshmem.team_translate_pe(): pe"), _int_arg(dest_team, "rshmem.team_translate_pe(): dest_team", team=True))


@api
def team_split_strided(parent: Team | int | None, start: int, stride: int, size: int) -> Team | None:
    """Collective over `parent`: the team of PEs `start, start+stride, ...` (`size` of them), as numbered in `parent`. Returns a `Team` on its members and None (`TEAM_INVALID` in C) elsewhere; a `TEAM_INVALID` / None parent gives None at once (`nvshmem_team_split_strided`)."""
    made = _native.team_split_strided(_int_arg(parent, "rshmem.team_split_strided(): parent", team=True), _int_arg(start, "rshmem.team_split_strided(): start"), _int_arg(stride, "rshmem.team_split_strided(): stride"), _int_arg(size, "rshmem.team_split_strided(): size"))
    return None if made is None else Team(made)


@api
def team_destroy(team: Team | int | None) -> None:
    """Collective over `team`: releases a team made by `team_split_strided`; `TEAM_INVALID` / None does nothing, so every PE of the parent may call it (`nvshmem_team_destroy`)."""
    _native.team_destroy(_int_arg(team, "rshmem.team_destroy(): team", team=True))


@api
def team_split_2d(parent: Team | int | None, xrange: int) -> tuple[Team | None, Team | None]:
    """Collective over `parent`: splits it into rows of `xrange` consecutive PEs (the x-axis teams) and the columns across them (the y-axis teams); returns this PE's (x-axis, y-axis) teams, None (`TEAM_INVALID` in C) for both when `parent` is `TEAM_INVALID` / None (`nvshmem_team_split_2d`)."""
    x, y = _native.team_split_2d(_int_arg(parent, "rshmem.team_split_2d(): parent", team=True), _int_arg(xrange, "rshmem.team_split_2d(): xrange"))
    return (None if x is None else Team(x), None if y is None else Team(y))
