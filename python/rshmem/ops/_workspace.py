"""Symmetric workspaces of the ops, allocated once per (op, team, dtype, size class) and reused.

A size class is the power of two at or above the bytes a call needs (at least `MIN_CLASS`), so
calls of nearby shapes share one workspace and a training loop allocates only on its first
step. Allocation is collective over every PE; it happens on the first call of a key, which every
PE makes at the same point (the ops agree on shapes before, see `_checks.agree`), never during
CUDA graph capture. `rshmem.finalize()` drops every workspace (its memory goes with the heap).

Each workspace holds what its op's protocol needs (data buffer, flag words, a done counter, the
team's PE numbers on the device); the protocol itself is described in the kernels' modules.
"""
from __future__ import annotations

import torch

from . import _checks, _group

MIN_CLASS = 1 << 20

_spaces: dict = {}
_pes: dict = {}


def forget() -> None:
    _spaces.clear()
    _pes.clear()


def size_class(nbytes: int, minimum: int = MIN_CLASS) -> int:
    """The power of two >= max(nbytes, minimum)."""
    n = max(int(nbytes), minimum, 1)
    return 1 << (n - 1).bit_length()


def pes(info: _group.TeamInfo) -> torch.Tensor:
    """The world PE of each team member, as an int32 tensor on this PE's device."""
    found = _pes.get(info.team)
    if found is None:
        found = _pes[info.team] = torch.tensor(info.pes, dtype=torch.int32, device=_group.device())
    return found


class Space:
    """One workspace: `buf` (bytes), `flags` (int64 words), `busy` (int64 words), all symmetric,
    and `counter` (local int32 done counters)."""

    def __init__(self, info: _group.TeamInfo, buf_bytes: int, flag_words: int, busy_words: int, what: str = "op"):
        self.info = info
        self.buf_bytes = buf_bytes
        self.buf = _group.symmetric(info, (buf_bytes,), torch.uint8, what)
        self.flags = _group.symmetric(info, (max(flag_words, 1),), torch.int64, what)
        self.busy = _group.symmetric(info, (max(busy_words, 1),), torch.int64, what)
        self.counter = torch.zeros(4, dtype=torch.int32, device=_group.device())
        self.extra: dict = {}

    def view(self, dtype, shape, offset: int = 0) -> torch.Tensor:
        """The buffer from byte `offset` as a `dtype` tensor of `shape`."""
        n = 1
        for d in shape:
            n *= d
        nbytes = n * dtype.itemsize
        return self.buf[offset:offset + nbytes].view(dtype).view(shape)


def get(what: str, key: tuple, make) -> Space:
    """The workspace of `key` (allocated by `make()` on first use, collectively)."""
    found = _spaces.get(key)
    if found is None:
        _checks.not_capturing(what, f"a new workspace {key}")
        found = _spaces[key] = make()
    return found
