"""Remote atomics of `rshmem` on 4- and 8-byte integer words (`nvshmem_atomic_*`). They block until
done and return the old value where NVSHMEM's do.

The argument helpers they share are in `host.py`; `_calling.py` orders them with CUDA streams."""

from __future__ import annotations

from ._calling import after_stream
from .host import _amo, _atomic_dtype, _wrap

__all__ = [
    "atomic_fetch",
    "atomic_set",
    "atomic_swap",
    "atomic_compare_swap",
    "atomic_fetch_add",
    "atomic_add",
    "atomic_fetch_inc",
    "atomic_inc",
    "atomic_fetch_and",
    "atomic_and",
    "atomic_fetch_or",
    "atomic_or",
    "atomic_fetch_xor",
    "atomic_xor",
]


@after_stream
def atomic_fetch(dst, pe: int, dtype=None) -> int:
    """Atomically reads the word at `dst` on `pe` (`nvshmem_atomic_fetch`)."""
    return _amo(dst, pe, dtype, 'fetch')


@after_stream
def atomic_set(dst, value, pe: int, dtype=None) -> None:
    """Atomically stores `value` (`nvshmem_atomic_set`)."""
    _amo(dst, pe, dtype, 'set', value)


@after_stream
def atomic_swap(dst, value, pe: int, dtype=None) -> int:
    """Atomically exchanges; returns the old value (`nvshmem_atomic_swap`)."""
    return _amo(dst, pe, dtype, 'swap', value)


@after_stream
def atomic_compare_swap(dst, cond, value, pe: int, dtype=None) -> int:
    """Stores `value` if the word equals `cond`; returns the old value (`nvshmem_atomic_compare_swap`)."""
    return _amo(dst, pe, dtype, 'compare_swap', cond, value)


@after_stream
def atomic_fetch_add(dst, value, pe: int, dtype=None) -> int:
    """Atomically adds; returns the old value (`nvshmem_atomic_fetch_add`)."""
    return _amo(dst, pe, dtype, 'add', _wrap(value, _atomic_dtype(dst, dtype)))


@after_stream
def atomic_add(dst, value, pe: int, dtype=None) -> None:
    """Atomically adds (`nvshmem_atomic_add`)."""
    atomic_fetch_add(dst, value, pe, dtype)


@after_stream
def atomic_fetch_inc(dst, pe: int, dtype=None) -> int:
    """Atomically adds one; returns the old value (`nvshmem_atomic_fetch_inc`)."""
    return atomic_fetch_add(dst, 1, pe, dtype)


@after_stream
def atomic_inc(dst, pe: int, dtype=None) -> None:
    """Atomically adds one (`nvshmem_atomic_inc`)."""
    atomic_fetch_add(dst, 1, pe, dtype)


@after_stream
def atomic_fetch_and(dst, value, pe: int, dtype=None) -> int:
    """Atomic bitwise and; returns the old value."""
    return _amo(dst, pe, dtype, 'and', value)


@after_stream
def atomic_and(dst, value, pe: int, dtype=None) -> None:
    """Atomic bitwise and."""
    _amo(dst, pe, dtype, 'and', value)


@after_stream
def atomic_fetch_or(dst, value, pe: int, dtype=None) -> int:
    """Atomic bitwise or; returns the old value."""
    return _amo(dst, pe, dtype, 'or', value)


@after_stream
def atomic_or(dst, value, pe: int, dtype=None) -> None:
    """Atomic bitwise or."""
    _amo(dst, pe, dtype, 'or', value)


@after_stream
def atomic_fetch_xor(dst, value, pe: int, dtype=None) -> int:
    """Atomic bitwise xor; returns the old value."""
    return _amo(dst, pe, dtype, 'xor', value)


@after_stream
def atomic_xor(dst, value, pe: int, dtype=None) -> None:
    """Atomic bitwise xor."""
    _amo(dst, pe, dtype, 'xor', value)
