"""``nvshmem.core`` on rshmem: ``finalize``, ``Teams``, ``SignalOp``."""
from __future__ import annotations

import enum

import rshmem

__all__ = ["finalize", "Teams", "SignalOp"]


class Teams(enum.IntEnum):
    """The predefined teams (values are rshmem's team handles)."""
    TEAM_INVALID = int(rshmem.Team.INVALID)
    TEAM_WORLD = int(rshmem.Team.WORLD)
    TEAM_SHARED = int(rshmem.Team.SHARED)
    TEAM_NODE = int(rshmem.Team.NODE)
    TEAM_SAME_MYPE_NODE = int(rshmem.Team.SAME_MYPE_NODE)


class SignalOp(enum.IntEnum):
    """Signal operations of put-with-signal."""
    SIGNAL_SET = 9
    SIGNAL_ADD = 10


def finalize() -> None:
    """Collective: stops rshmem (``rshmem.finalize``); does nothing when it is not running, so a
    program may call it after ``finalize_distributed`` or twice."""
    if rshmem.is_initialized():
        rshmem.finalize()


def __getattr__(name: str):
    raise AttributeError(f"nvshmem.core.{name} is not provided by rshmem.compat.nvshmem yet (only finalize, Teams "
                         "and SignalOp are); use the rshmem API for it")
