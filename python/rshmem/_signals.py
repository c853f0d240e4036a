"""Signals and point-to-point waits of `rshmem`: `putmem_signal` / `signal_op` set a peer's signal
word, `signal_wait_until`, `wait_until*` and `test*` wait for or test local memory.

The argument helpers they share are in `host.py`; `_calling.py` orders them with CUDA streams."""

from __future__ import annotations

from . import _native
from ._calling import after_stream, as_cmp, as_sig_op, not_stream_ordered
from .host import _addr, _count, _dtype, _is_addr, _nbytes, _one, _sig, _u64, _vector

__all__ = [
    "putmem_signal",
    "signal_op",
    "signal_fetch",
    "signal_wait_until",
    "wait_until",
    "test",
    "wait_until_all",
    "wait_until_any",
    "wait_until_some",
    "test_all",
    "test_any",
    "test_some",
]


@after_stream
def putmem_signal(dst, src, sig, value: int, sig_op, pe: int, *, nbytes: int | None = None) -> None:
    """Copies `src` to `dst` on `pe` (`nbytes`, by default the tensors' size), then applies
    `sig_op` (`SIGNAL_SET` / `SIGNAL_ADD`, or `"set"` / `"add"`) with `value` to the signal word
    `sig` on `pe`; a PE that sees the signal sees the data (`nvshmem_putmem_signal`)."""
    sig_op = as_sig_op(sig_op)
    n = _count(nbytes, _nbytes(dst, "dst"), _nbytes(src, "src"), what="nbytes")
    _native.putmem_signal(_addr(dst, "dst"), _addr(src, "src"), n, _sig(sig), _u64(value), sig_op, pe, _is_addr(src))


@after_stream
def signal_op(sig, value: int, sig_op, pe: int) -> None:
    """Applies `sig_op` (`SIGNAL_SET` / `SIGNAL_ADD`, or `"set"` / `"add"`) with `value` to the
    signal word `sig` on `pe` (`nvshmemx_signal_op`)."""
    sig_op = as_sig_op(sig_op)
    _native.signal_op(_sig(sig), _u64(value), sig_op, pe)


@not_stream_ordered
def signal_fetch(sig) -> int:
    """Reads the local signal word `sig` (`nvshmem_signal_fetch`)."""
    return _native.signal_fetch(_sig(sig))


@not_stream_ordered
def signal_wait_until(sig, cmp, value: int) -> int:
    """Waits until the local signal word `sig` compares `cmp` (`CMP_*` or `"eq"`, `"ge"`, ...)
    against `value`; returns the value seen (`nvshmem_signal_wait_until`)."""
    cmp = as_cmp(cmp)
    return _native.signal_wait_until(_sig(sig), cmp, _u64(value))


@not_stream_ordered
def wait_until(ivar, cmp, value: int, dtype=None) -> int:
    """Waits until the local element `ivar` compares `cmp` (`CMP_*` or `"eq"`, `"ge"`, ...)
    against `value`; returns the value seen (`nvshmem_wait_until`)."""
    cmp = as_cmp(cmp)
    return _native.wait_until(_one(ivar, 'ivar'), _dtype(dtype, ivar), cmp, int(value))


@not_stream_ordered
def test(ivar, cmp, value: int, dtype=None) -> bool:
    """Whether the local element `ivar` compares true against `value` (`nvshmem_test`)."""
    cmp = as_cmp(cmp)
    return _native.test(_one(ivar, 'ivar'), _dtype(dtype, ivar), cmp, int(value))


@not_stream_ordered
def wait_until_all(ivars, cmp, value: int, status=None, *, nelems=None, dtype=None) -> None:
    """Waits until every element not masked by `status` (nonzero = skip) compares true."""
    cmp = as_cmp(cmp)
    _native.wait_until_all(*_vector(ivars, cmp, value, status, nelems, dtype))


@not_stream_ordered
def wait_until_any(ivars, cmp, value: int, status=None, *, nelems=None, dtype=None):
    """Waits until one unmasked element compares true; returns its index (None if all are masked)."""
    cmp = as_cmp(cmp)
    return _native.wait_until_any(*_vector(ivars, cmp, value, status, nelems, dtype))


@not_stream_ordered
def wait_until_some(ivars, cmp, value: int, status=None, *, nelems=None, dtype=None) -> list:
    """Waits until at least one unmasked element compares true; returns the indices that do."""
    cmp = as_cmp(cmp)
    return _native.wait_until_some(*_vector(ivars, cmp, value, status, nelems, dtype))


@not_stream_ordered
def test_all(ivars, cmp, value: int, status=None, *, nelems=None, dtype=None) -> bool:
    """Whether every unmasked element compares true."""
    cmp = as_cmp(cmp)
    return _native.test_all(*_vector(ivars, cmp, value, status, nelems, dtype))


@not_stream_ordered
def test_any(ivars, cmp, value: int, status=None, *, nelems=None, dtype=None):
    """The index of one unmasked element that compares true, or None."""
    cmp = as_cmp(cmp)
    return _native.test_any(*_vector(ivars, cmp, value, status, nelems, dtype))


@not_stream_ordered
def test_some(ivars, cmp, value: int, status=None, *, nelems=None, dtype=None) -> list:
    """The indices of the unmasked elements that compare true."""
    cmp = as_cmp(cmp)
    return _native.test_some(*_vector(ivars, cmp, value, status, nelems, dtype))
