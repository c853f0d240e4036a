"""Puts and gets of `rshmem`: contiguous (`putmem`, `getmem`, `put`, `get`), strided (`iput`,
`iget`) and single elements (`p`, `g`). They block until done.

The argument helpers they share are in `host.py`; `_calling.py` orders them with CUDA streams."""

from __future__ import annotations

from . import _native
from ._calling import after_stream
from ._native import InvalidArgumentError
from .host import _addr, _count, _dtype, _is_addr, _nbytes, _one, _out, _same_dtype, _strided_fits, itemsize

__all__ = [
    "putmem",
    "getmem",
    "put",
    "iput",
    "iget",
    "get",
    "p",
    "g",
]


@after_stream
def putmem(dst, src, pe: int, *, nbytes: int | None = None) -> None:
    """Copies local `src` to symmetric `dst` on `pe` (`nvshmem_putmem`): `nbytes` bytes, by
    default the size of the tensors (needed with raw addresses)."""
    n = _count(nbytes, _nbytes(dst, "dst"), _nbytes(src, "src"), what="nbytes")
    # A raw local address is checked by the runtime (mapped, readable); a tensor's is not.
    _native.putmem(_addr(dst, "dst"), _addr(src, "src"), n, pe, _is_addr(src))


@after_stream
def getmem(dst, src, pe: int, *, nbytes: int | None = None) -> None:
    """Copies symmetric `src` on `pe` to local `dst` (`nvshmem_getmem`): `nbytes` bytes, by
    default the size of the tensors (needed with raw addresses)."""
    n = _count(nbytes, _nbytes(dst, "dst"), _nbytes(src, "src"), what="nbytes")
    _native.getmem(_out(dst, "dst"), _addr(src, "src"), n, pe, _is_addr(dst))


@after_stream
def put(dst, src, pe: int) -> None:
    """Copies tensor `src` into symmetric tensor `dst` on `pe`; both hold the same bytes and one
    dtype (`DTypeError` otherwise, as in the collectives; `putmem` copies bytes)."""
    _native.putmem(_addr(dst, "dst"), _addr(src, "src"), _same_bytes(dst, src, "put"), pe, False)


@after_stream
def iput(dst, src, dst_stride: int, src_stride: int, nelems: int, pe: int, *, dtype=None) -> None:
    """Copies `nelems` elements of `src`, every `src_stride`-th, into symmetric `dst` on `pe`, every
    `dst_stride`-th (`nvshmem_<type>_iput`; strides count elements). With tensors the strided
    range must lie inside each; both sides are checked before anything is copied."""
    size = _strided_size(dst, src, dst_stride, src_stride, nelems, dtype)
    _native.iput(_addr(dst, "dst"), _addr(src, "src"), dst_stride, src_stride, nelems, size, pe)


@after_stream
def iget(dst, src, dst_stride: int, src_stride: int, nelems: int, pe: int, *, dtype=None) -> None:
    """Copies `nelems` elements of symmetric `src` on `pe`, every `src_stride`-th, into `dst`, every
    `dst_stride`-th (`nvshmem_<type>_iget`; strides count elements)."""
    size = _strided_size(dst, src, dst_stride, src_stride, nelems, dtype)
    _native.iget(_addr(dst, "dst"), _addr(src, "src"), dst_stride, src_stride, nelems, size, pe)


@after_stream
def get(dst, src, pe: int) -> None:
    """Copies symmetric tensor `src` on `pe` into local tensor `dst`; both hold the same bytes and one
    dtype (`DTypeError` otherwise, as in the collectives; `getmem` copies bytes)."""
    _native.getmem(_out(dst, "dst"), _addr(src, "src"), _same_bytes(dst, src, "get"), pe, False)


@after_stream
def p(dst, value, pe: int, dtype=None) -> None:
    """Stores one element at symmetric `dst` on `pe` (`nvshmem_<type>_p`)."""
    _native.p(_one(dst, 'dst'), value, pe, _dtype(dtype, dst))


@after_stream
def g(src, pe: int, dtype=None):
    """Loads one element from symmetric `src` on `pe` (`nvshmem_<type>_g`)."""
    return _native.g(_one(src, 'src'), pe, _dtype(dtype, src))


def _same_bytes(dst, src, call: str) -> int:
    """The bytes of `dst` and `src`, which must be tensors of one dtype and size."""
    _same_dtype(dst, src, call)
    a, b = _nbytes(dst, "dst"), _nbytes(src, "src")
    if a is None or b is None or a != b:
        raise InvalidArgumentError(f"{call}() takes two tensors of the same size; dst holds {a} bytes, src {b}")
    return b


def _strided_size(dst, src, dst_stride: int, src_stride: int, nelems: int, dtype) -> int:
    """The element size of a strided copy, after checking both strided ranges lie inside their tensors."""
    size = itemsize(_dtype(dtype, dst, src))
    _strided_fits(dst, dst_stride, nelems, size, "dst")
    _strided_fits(src, src_stride, nelems, size, "src")
    return size
