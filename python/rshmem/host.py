"""The host API on symmetric memory: puts and gets, atomics, signals, waits, collectives.

Each function takes tensors (CPU tensors on the host backend), numpy arrays, or raw addresses
(ints). With tensors, sizes and dtypes come from the tensors and are checked; with raw
addresses the caller passes `nbytes` / `nelems` / `dtype` and vouches that the local side is
valid memory of that size. Symmetric arguments (the remote side) must lie inside the symmetric
heap, which the runtime checks (`NotSymmetricError`).

A signal word or a waited-on element is named by a 0-d view, e.g. `sig[peer]`.
"""

from __future__ import annotations

from . import _native
from ._core import Team, team_n_pes
from ._dtypes import ATOMIC_DTYPES, itemsize, runtime_name
from ._native import DTypeError, InvalidArgumentError
from ._errors import api

CMP_EQ, CMP_NE, CMP_GT = _native.CMP_EQ, _native.CMP_NE, _native.CMP_GT
CMP_LE, CMP_LT, CMP_GE = _native.CMP_LE, _native.CMP_LT, _native.CMP_GE
SIGNAL_SET, SIGNAL_ADD = _native.SIGNAL_SET, _native.SIGNAL_ADD


# ---------------------------------------------------------------------------- argument helpers


def _is_addr(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _addr(x, what: str) -> int:
    """The first byte of `x`: an int, a tensor or a numpy array."""
    if _is_addr(x):
        if x < 0:
            raise InvalidArgumentError(f"{what} address {x} is negative")
        return x
    data_ptr = getattr(x, "data_ptr", None)
    if callable(data_ptr):
        device = getattr(x, "device", None)
        if device is not None and device.type != "cpu" and _native.backend() == "host":
            raise InvalidArgumentError(
                f"{what} is a tensor on {device}, but rshmem runs on the host backend: pass CPU tensors "
                "(or init rshmem with backend='cuda' on a GPU machine)"
            )
        return data_ptr()
    interface = getattr(x, "__array_interface__", None)
    if interface is not None:
        return interface["data"][0]
    raise InvalidArgumentError(f"{what} must be a tensor, a numpy array or an address (int), not {type(x).__name__}")


def _one(x, what: str) -> int:
    """The address of a single element: an int, or a tensor / array of exactly one element (a
    larger one would silently stand for its first element)."""
    if not _is_addr(x):
        n = x.numel() if callable(getattr(x, "numel", None)) else getattr(x, "size", None)
        if isinstance(n, int) and n != 1:
            raise InvalidArgumentError(
                f"{what} must be one element (e.g. t[0] or t[i:i+1]), not a tensor of {n} elements"
            )
    return _addr(x, what)


def _nbytes(x, what: str):
    """Bytes of a contiguous tensor / array, None for a raw address."""
    if _is_addr(x):
        return None
    if hasattr(x, "data_ptr"):
        if not x.is_contiguous():
            raise InvalidArgumentError(f"{what} must be contiguous (call .contiguous() first)")
        return x.numel() * x.element_size()
    if hasattr(x, "__array_interface__"):
        if not x.flags["C_CONTIGUOUS"]:
            raise InvalidArgumentError(f"{what} must be C-contiguous")
        return x.nbytes
    raise InvalidArgumentError(f"{what} must be a tensor, a numpy array or an address (int), not {type(x).__name__}")


def _dtype(dtype, *xs) -> str:
    """The runtime dtype: `dtype` if given, else the dtype of the tensors / arrays (which must agree)."""
    if dtype is not None:
        return runtime_name(dtype)
    found = [runtime_name(x.dtype) for x in xs if not _is_addr(x) and hasattr(x, "dtype")]
    if not found:
        raise InvalidArgumentError("with raw addresses, pass dtype= (e.g. dtype=torch.int64 or 'int64')")
    if any(f != found[0] for f in found):
        raise DTypeError(f"the tensors have different dtypes ({', '.join(found)}); use one dtype")
    return found[0]


def _elems(x, name: str, what: str):
    n = _nbytes(x, what)
    return None if n is None else n // itemsize(name)


def _count(given, *have, what: str) -> int:
    """`given` elements (or bytes) if not None, else the first known size; checked against every
    known size so no copy runs past a tensor."""
    known = [h for h in have if h is not None]
    if given is None:
        if not known:
            raise InvalidArgumentError(f"with raw addresses, pass {what}")
        given = known[0]
    if given < 0:
        raise InvalidArgumentError(f"{what} is {given}; it must be >= 0")
    for h in known:
        if given > h:
            raise InvalidArgumentError(f"{what} is {given}, but a tensor passed holds only {h}")
    return given


# ---------------------------------------------------------------------------------------- RMA


@api
def putmem(dest, source, nbytes, pe: int) -> None:
    """Copies `nbytes` from local `source` to symmetric `dest` on `pe` (`nvshmem_putmem`).
    `nbytes=None` takes the size of the tensors."""
    n = _count(nbytes, _nbytes(dest, "dest"), _nbytes(source, "source"), what="nbytes")
    # A raw local address is checked by the runtime (mapped, readable); a tensor's is not.
    _native.putmem(_addr(dest, "dest"), _addr(source, "source"), n, pe, _is_addr(source))


@api
def getmem(dest, source, nbytes, pe: int) -> None:
    """Copies `nbytes` from symmetric `source` on `pe` to local `dest` (`nvshmem_getmem`)."""
    n = _count(nbytes, _nbytes(dest, "dest"), _nbytes(source, "source"), what="nbytes")
    _native.getmem(_addr(dest, "dest"), _addr(source, "source"), n, pe, _is_addr(dest))


@api
def put(dest, source, pe: int) -> None:
    """Copies tensor `source` into symmetric tensor `dest` on `pe`; both hold the same bytes."""
    a, b = _nbytes(dest, "dest"), _nbytes(source, "source")
    if a is None or b is None or a != b:
        raise InvalidArgumentError(f"put() takes two tensors of the same size; dest holds {a} bytes, source {b}")
    _native.putmem(_addr(dest, "dest"), _addr(source, "source"), b, pe, False)


@api
def get(dest, source, pe: int) -> None:
    """Copies symmetric tensor `source` on `pe` into local tensor `dest`; both hold the same bytes."""
    a, b = _nbytes(dest, "dest"), _nbytes(source, "source")
    if a is None or b is None or a != b:
        raise InvalidArgumentError(f"get() takes two tensors of the same size; dest holds {a} bytes, source {b}")
    _native.getmem(_addr(dest, "dest"), _addr(source, "source"), b, pe, False)


@api
def p(dest, value, pe: int, dtype=None) -> None:
    """Stores one element at symmetric `dest` on `pe` (`nvshmem_<type>_p`)."""
    _native.p(_one(dest, "dest"), value, pe, _dtype(dtype, dest))


@api
def g(source, pe: int, dtype=None):
    """Loads one element from symmetric `source` on `pe` (`nvshmem_<type>_g`)."""
    return _native.g(_one(source, "source"), pe, _dtype(dtype, source))


# ------------------------------------------------------------------------------------ atomics


def _atomic_dtype(dest, dtype) -> str:
    name = _dtype(dtype, dest)
    if name not in ATOMIC_DTYPES:
        raise DTypeError(f"atomics take {', '.join(ATOMIC_DTYPES)}, not {name}")
    return name


def _bits(value, name: str) -> int:
    width = itemsize(name) * 8
    v = int(value)
    lo, hi = (-(1 << (width - 1)), (1 << width) - 1) if name.startswith("int") else (0, (1 << width) - 1)
    if not lo <= v <= hi:
        raise InvalidArgumentError(f"value {v} does not fit in {name}")
    return v & ((1 << width) - 1)


def _value(bits: int, name: str) -> int:
    width = itemsize(name) * 8
    bits &= (1 << width) - 1
    if name.startswith("int") and bits >> (width - 1):
        bits -= 1 << width
    return bits


def _amo(dest, pe, dtype, op, a=0, b=0) -> int:
    name = _atomic_dtype(dest, dtype)
    old = _native.atomic(_one(dest, "dest"), itemsize(name), op, pe, _bits(a, name), _bits(b, name))
    return _value(old, name)


@api
def atomic_fetch(dest, pe: int, dtype=None) -> int:
    """Atomically reads the word at `dest` on `pe` (`nvshmem_atomic_fetch`)."""
    return _amo(dest, pe, dtype, "fetch")


@api
def atomic_set(dest, value, pe: int, dtype=None) -> None:
    """Atomically stores `value` (`nvshmem_atomic_set`)."""
    _amo(dest, pe, dtype, "set", value)


@api
def atomic_swap(dest, value, pe: int, dtype=None) -> int:
    """Atomically exchanges; returns the old value (`nvshmem_atomic_swap`)."""
    return _amo(dest, pe, dtype, "swap", value)


@api
def atomic_compare_swap(dest, cond, value, pe: int, dtype=None) -> int:
    """Stores `value` if the word equals `cond`; returns the old value (`nvshmem_atomic_compare_swap`)."""
    return _amo(dest, pe, dtype, "compare_swap", cond, value)


@api
def atomic_fetch_add(dest, value, pe: int, dtype=None) -> int:
    """Atomically adds; returns the old value (`nvshmem_atomic_fetch_add`)."""
    return _amo(dest, pe, dtype, "add", _wrap(value, _atomic_dtype(dest, dtype)))


@api
def atomic_add(dest, value, pe: int, dtype=None) -> None:
    """Atomically adds (`nvshmem_atomic_add`)."""
    atomic_fetch_add(dest, value, pe, dtype)


@api
def atomic_fetch_inc(dest, pe: int, dtype=None) -> int:
    """Atomically adds one; returns the old value (`nvshmem_atomic_fetch_inc`)."""
    return atomic_fetch_add(dest, 1, pe, dtype)


@api
def atomic_inc(dest, pe: int, dtype=None) -> None:
    """Atomically adds one (`nvshmem_atomic_inc`)."""
    atomic_fetch_add(dest, 1, pe, dtype)


@api
def atomic_fetch_and(dest, value, pe: int, dtype=None) -> int:
    """Atomic bitwise and; returns the old value."""
    return _amo(dest, pe, dtype, "and", value)


@api
def atomic_and(dest, value, pe: int, dtype=None) -> None:
    """Atomic bitwise and."""
    _amo(dest, pe, dtype, "and", value)


@api
def atomic_fetch_or(dest, value, pe: int, dtype=None) -> int:
    """Atomic bitwise or; returns the old value."""
    return _amo(dest, pe, dtype, "or", value)


@api
def atomic_or(dest, value, pe: int, dtype=None) -> None:
    """Atomic bitwise or."""
    _amo(dest, pe, dtype, "or", value)


@api
def atomic_fetch_xor(dest, value, pe: int, dtype=None) -> int:
    """Atomic bitwise xor; returns the old value."""
    return _amo(dest, pe, dtype, "xor", value)


@api
def atomic_xor(dest, value, pe: int, dtype=None) -> None:
    """Atomic bitwise xor."""
    _amo(dest, pe, dtype, "xor", value)


def _wrap(value, name: str) -> int:
    # Adding a negative number to an unsigned word wraps, as it does in C.
    v = int(value)
    if not name.startswith("int") and v < 0:
        v &= (1 << (itemsize(name) * 8)) - 1
    return v


# ------------------------------------------------------------------------------------ signals


def _u64(v) -> int:
    """The 64 bits of a signal value (negative values as two's complement)."""
    v = int(v)
    return _bits(v, "uint64" if v >= 0 else "int64")


def _sig(sig, what="sig_addr") -> int:
    if not _is_addr(sig) and hasattr(sig, "dtype") and runtime_name(sig.dtype) not in ("int64", "uint64"):
        raise DTypeError(f"signal words are 64-bit: pass an int64 or uint64 element, not {sig.dtype}")
    return _one(sig, what)


@api
def putmem_signal(dest, source, nbytes, sig_addr, signal: int, sig_op: int, pe: int) -> None:
    """Copies `nbytes` to `dest` on `pe`, then applies `sig_op` (`SIGNAL_SET`/`SIGNAL_ADD`) with
    `signal` to the signal word on `pe`; a PE that sees the signal sees the data
    (`nvshmem_putmem_signal`)."""
    n = _count(nbytes, _nbytes(dest, "dest"), _nbytes(source, "source"), what="nbytes")
    _native.putmem_signal(
        _addr(dest, "dest"), _addr(source, "source"), n, _sig(sig_addr), _u64(signal), sig_op, pe, _is_addr(source)
    )


@api
def signal_op(sig_addr, signal: int, sig_op: int, pe: int) -> None:
    """Applies `sig_op` with `signal` to the signal word on `pe` (`nvshmemx_signal_op`)."""
    _native.signal_op(_sig(sig_addr), _u64(signal), sig_op, pe)


@api
def signal_fetch(sig_addr) -> int:
    """Reads the local signal word (`nvshmem_signal_fetch`)."""
    return _native.signal_fetch(_sig(sig_addr))


@api
def signal_wait_until(sig_addr, cmp: int, value: int) -> int:
    """Waits until the local signal word compares true against `value`; returns the value seen
    (`nvshmem_signal_wait_until`)."""
    return _native.signal_wait_until(_sig(sig_addr), cmp, _u64(value))


# -------------------------------------------------------------------------------------- waits


@api
def wait_until(ivar, cmp: int, value: int, dtype=None) -> None:
    """Waits until the local element `ivar` compares true against `value` (`nvshmem_wait_until`)."""
    _native.wait_until(_one(ivar, "ivar"), _dtype(dtype, ivar), cmp, int(value))


@api
def test(ivar, cmp: int, value: int, dtype=None) -> bool:
    """Whether the local element `ivar` compares true against `value` (`nvshmem_test`)."""
    return _native.test(_one(ivar, "ivar"), _dtype(dtype, ivar), cmp, int(value))


def _vector(ivars, cmp, value, status, nelems, dtype):
    name = _dtype(dtype, ivars)
    n = _count(nelems, _elems(ivars, name, "ivars"), what="nelems")
    if status is not None:
        status = [int(s) for s in (status.tolist() if hasattr(status, "tolist") else status)]
        if len(status) < n:
            raise InvalidArgumentError(f"status has {len(status)} entries for {n} elements")
    return (_addr(ivars, "ivars"), n, status, name, cmp, int(value))


@api
def wait_until_all(ivars, cmp: int, value: int, status=None, nelems=None, dtype=None) -> None:
    """Waits until every element not masked by `status` (nonzero = skip) compares true."""
    _native.wait_until_all(*_vector(ivars, cmp, value, status, nelems, dtype))


@api
def wait_until_any(ivars, cmp: int, value: int, status=None, nelems=None, dtype=None):
    """Waits until one unmasked element compares true; returns its index (None if all are masked)."""
    return _native.wait_until_any(*_vector(ivars, cmp, value, status, nelems, dtype))


@api
def wait_until_some(ivars, cmp: int, value: int, status=None, nelems=None, dtype=None) -> list:
    """Waits until at least one unmasked element compares true; returns the indices that do."""
    return _native.wait_until_some(*_vector(ivars, cmp, value, status, nelems, dtype))


@api
def test_all(ivars, cmp: int, value: int, status=None, nelems=None, dtype=None) -> bool:
    """Whether every unmasked element compares true."""
    return _native.test_all(*_vector(ivars, cmp, value, status, nelems, dtype))


@api
def test_any(ivars, cmp: int, value: int, status=None, nelems=None, dtype=None):
    """The index of one unmasked element that compares true, or None."""
    return _native.test_any(*_vector(ivars, cmp, value, status, nelems, dtype))


@api
def test_some(ivars, cmp: int, value: int, status=None, nelems=None, dtype=None) -> list:
    """The indices of the unmasked elements that compare true."""
    return _native.test_some(*_vector(ivars, cmp, value, status, nelems, dtype))


# -------------------------------------------------------------------------------- collectives


@api
def broadcast(dest, source, root: int, team=Team.WORLD, *, nelems=None, dtype=None) -> None:
    """Collective over `team`: copies `source` on PE `root` (team numbering) into `dest` on every
    PE of the team (`nvshmem_broadcast`)."""
    name = _dtype(dtype, dest, source)
    n = _count(nelems, _elems(source, name, "source"), _elems(dest, name, "dest"), what="nelems")
    _native.broadcast(int(team), _addr(dest, "dest"), _addr(source, "source"), n, int(root), name)


@api
def fcollect(dest, source, team=Team.WORLD, *, nelems=None, dtype=None) -> None:
    """Collective over `team`: `dest` gets every PE's `source`, in team order (`nvshmem_fcollect`)."""
    name = _dtype(dtype, dest, source)
    size = team_n_pes(team)
    d = _elems(dest, name, "dest")
    n = _count(nelems, _elems(source, name, "source"), None if d is None else d // size, what="nelems")
    _native.fcollect(int(team), _addr(dest, "dest"), _addr(source, "source"), n, name)


@api
def alltoall(dest, source, team=Team.WORLD, *, nelems=None, dtype=None) -> None:
    """Collective over `team`: block `j` of `source` (`nelems` elements each, default
    `source.numel() // team size`) lands in block `my_pe` of `dest` on PE `j` (`nvshmem_alltoall`)."""
    name = _dtype(dtype, dest, source)
    size = team_n_pes(team)
    s, d = _elems(source, name, "source"), _elems(dest, name, "dest")
    n = _count(nelems, *(None if x is None else x // size for x in (s, d)), what="nelems (per PE)")
    _native.alltoall(int(team), _addr(dest, "dest"), _addr(source, "source"), n, name)


REDUCE_OPS = ("sum", "prod", "min", "max", "and", "or", "xor")


@api
def reduce(dest, source, op: str = "sum", team=Team.WORLD, *, nelems=None, dtype=None) -> None:
    """Collective over `team`: `dest` on every PE gets the element-wise `op` (one of `REDUCE_OPS`)
    of every PE's `source` (`nvshmem_<op>_reduce`)."""
    name = _dtype(dtype, dest, source)
    n = _count(nelems, _elems(source, name, "source"), _elems(dest, name, "dest"), what="nelems")
    _native.reduce(int(team), op, _addr(dest, "dest"), _addr(source, "source"), n, name)
