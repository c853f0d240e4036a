"""Collectives of `rshmem` over a team: `broadcast`, `fcollect`, `alltoall`, `reduce`,
`reducescatter`. Every PE of the team calls them; they block until done.

The argument helpers they share are in `host.py`; `_calling.py` orders them with CUDA streams."""

from __future__ import annotations

from . import _native
from ._calling import after_stream, as_reduce_op
from ._native import InvalidArgumentError
from ._teams import Team, team_n_pes
from .host import _addr, _count, _dtype, _elems

__all__ = [
    "broadcast",
    "fcollect",
    "alltoall",
    "reduce",
    "reducescatter",
]


@after_stream
def broadcast(dst, src, root: int, team=Team.WORLD, *, nelems=None, dtype=None) -> None:
    """Collective over `team`: copies `src` on PE `root` (team numbering) into `dst` on every
    PE of the team (`nvshmem_broadcast`)."""
    name = _dtype(dtype, dst, src)
    n = _count(nelems, _elems(src, name, "src"), _elems(dst, name, "dst"), what="nelems")
    _native.broadcast(int(team), _addr(dst, "dst"), _addr(src, "src"), n, int(root), name)


@after_stream
def fcollect(dst, src, team=Team.WORLD, *, nelems=None, dtype=None) -> None:
    """Collective over `team`: `dst` gets every PE's `src`, in team order (`nvshmem_fcollect`)."""
    name = _dtype(dtype, dst, src)
    size = team_n_pes(team)
    d = _elems(dst, name, "dst")
    n = _count(nelems, _elems(src, name, "src"), None if d is None else d // size, what="nelems")
    _native.fcollect(int(team), _addr(dst, "dst"), _addr(src, "src"), n, name)


@after_stream
def alltoall(dst, src, team=Team.WORLD, *, nelems=None, dtype=None) -> None:
    """Collective over `team`: block `j` of `src` (`nelems` elements each, default
    `src.numel() // team size`) lands in block `my_pe` of `dst` on PE `j` (`nvshmem_alltoall`)."""
    name = _dtype(dtype, dst, src)
    size = team_n_pes(team)
    s, d = _elems(src, name, "src"), _elems(dst, name, "dst")
    n = _count(nelems, *(None if x is None else x // size for x in (s, d)), what="nelems (per PE)")
    _native.alltoall(int(team), _addr(dst, "dst"), _addr(src, "src"), n, name)


@after_stream
def reduce(dst, src, op='sum', team=Team.WORLD, *, nelems=None, dtype=None) -> None:
    """Collective over `team`: `dst` on every PE gets the element-wise `op` of every PE's `src`
    (`nvshmem_<op>_reduce`). `op` is a name of `REDUCE_OPS`, a `rshmem.ReduceOp` or a
    `torch.distributed.ReduceOp` (SUM, PRODUCT, MIN, MAX, BAND, BOR, BXOR)."""
    op = as_reduce_op(op)
    name = _dtype(dtype, dst, src)
    n = _count(nelems, _elems(src, name, "src"), _elems(dst, name, "dst"), what="nelems")
    _native.reduce(int(team), op, _addr(dst, "dst"), _addr(src, "src"), n, name)


@after_stream
def reducescatter(dst, src, op='sum', team=Team.WORLD, *, nelems=None, dtype=None) -> None:
    """Collective over `team`: `dst` on PE `me` gets the element-wise `op` of block `me` of every
    PE's `src` (`nvshmem_<op>_reducescatter`). `src` holds one block of `nelems` elements per
    team member (default `nelems`: `src`'s elements // team size, which must divide them); `dst`
    holds `nelems`. `op` as for `reduce`."""
    op = as_reduce_op(op)
    name = _dtype(dtype, dst, src)
    size = team_n_pes(team)
    s = _elems(src, name, "src")
    if nelems is None and s is not None and s % size:
        raise InvalidArgumentError(f"reducescatter: src holds {s} elements, not a multiple of the team size {size}")
    n = _count(nelems, None if s is None else s // size, _elems(dst, name, "dst"), what="nelems (per PE)")
    _native.reducescatter(int(team), op, _addr(dst, "dst"), _addr(src, "src"), n, name)
