"""The host API on symmetric memory: puts and gets, atomics, signals, waits, collectives.

Each function takes tensors (CPU tensors on the host backend), numpy arrays, or raw addresses
(ints). With tensors, sizes and dtypes come from the tensors and are checked; with raw
addresses the caller passes `nbytes` / `nelems` / `dtype` and vouches that the local side is
valid memory of that size. Symmetric arguments (the remote side) must lie inside the symmetric
heap, which the runtime checks (`NotSymmetricError`).

A signal word or a waited-on element is named by a 0-d view, e.g. `sig[peer]`.

Arguments come in one order (destination first: `dst`, `src`; sizes and dtypes the tensors give
are keyword-only), the same as the on-stream forms of `rshmem.torch`; api/host.toml's [[py]] rows
declare it and `_signature.public` holds every function here to it. Given CUDA tensors, the calls
that move data first wait for torch's current stream (docs/streams.md).
"""

from __future__ import annotations

from . import _native
from ._core import Team, team_n_pes
from ._dtypes import ATOMIC_DTYPES, itemsize, runtime_name
from ._native import DTypeError, InvalidArgumentError
from ._signature import REDUCE_OPS, ReduceOp, public  # noqa: F401 - re-exported by rshmem

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


@public
def putmem(dst, src, pe: int, *, nbytes: int | None = None) -> None:
    """Copies local `src` to symmetric `dst` on `pe` (`nvshmem_putmem`): `nbytes` bytes, by
    default the size of the tensors (needed with raw addresses)."""
    n = _count(nbytes, _nbytes(dst, "dst"), _nbytes(src, "src"), what="nbytes")
    # A raw local address is checked by the runtime (mapped, readable); a tensor's is not.
    _native.putmem(_addr(dst, "dst"), _addr(src, "src"), n, pe, _is_addr(src))


@public
def getmem(dst, src, pe: int, *, nbytes: int | None = None) -> None:
    """Copies symmetric `src` on `pe` to local `dst` (`nvshmem_getmem`): `nbytes` bytes, by
    default the size of the tensors (needed with raw addresses)."""
    n = _count(nbytes, _nbytes(dst, "dst"), _nbytes(src, "src"), what="nbytes")
    _native.getmem(_addr(dst, "dst"), _addr(src, "src"), n, pe, _is_addr(dst))


@public
def put(dst, src, pe: int) -> None:
    """Copies tensor `src` into symmetric tensor `dst` on `pe`; both hold the same bytes."""
    a, b = _nbytes(dst, "dst"), _nbytes(src, "src")
    if a is None or b is None or a != b:
        raise InvalidArgumentError(f"put() takes two tensors of the same size; dst holds {a} bytes, src {b}")
    _native.putmem(_addr(dst, "dst"), _addr(src, "src"), b, pe, False)


@public
def get(dst, src, pe: int) -> None:
    """Copies symmetric tensor `src` on `pe` into local tensor `dst`; both hold the same bytes."""
    a, b = _nbytes(dst, "dst"), _nbytes(src, "src")
    if a is None or b is None or a != b:
        raise InvalidArgumentError(f"get() takes two tensors of the same size; dst holds {a} bytes, src {b}")
    _native.getmem(_addr(dst, "dst"), _addr(src, "src"), b, pe, False)


# ------------------------------------------------------------------------------------ atomics


def _atomic_dtype(dst, dtype) -> str:
    name = _dtype(dtype, dst)
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


def _amo(dst, pe, dtype, op, a=0, b=0) -> int:
    name = _atomic_dtype(dst, dtype)
    old = _native.atomic(_one(dst, "dst"), itemsize(name), op, pe, _bits(a, name), _bits(b, name))
    return _value(old, name)


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


def _sig(sig, what="sig") -> int:
    if not _is_addr(sig) and hasattr(sig, "dtype") and runtime_name(sig.dtype) not in ("int64", "uint64"):
        raise DTypeError(f"signal words are 64-bit: pass an int64 or uint64 element, not {sig.dtype}")
    return _one(sig, what)


@public
def putmem_signal(dst, src, sig, value: int, sig_op, pe: int, *, nbytes: int | None = None) -> None:
    """Copies `src` to `dst` on `pe` (`nbytes`, by default the tensors' size), then applies
    `sig_op` (`SIGNAL_SET` / `SIGNAL_ADD`, or `"set"` / `"add"`) with `value` to the signal word
    `sig` on `pe`; a PE that sees the signal sees the data (`nvshmem_putmem_signal`)."""
    n = _count(nbytes, _nbytes(dst, "dst"), _nbytes(src, "src"), what="nbytes")
    _native.putmem_signal(_addr(dst, "dst"), _addr(src, "src"), n, _sig(sig), _u64(value), sig_op, pe, _is_addr(src))


# -------------------------------------------------------------------------------------- waits


def _vector(ivars, cmp, value, status, nelems, dtype):
    name = _dtype(dtype, ivars)
    n = _count(nelems, _elems(ivars, name, "ivars"), what="nelems")
    if status is not None:
        status = [int(s) for s in (status.tolist() if hasattr(status, "tolist") else status)]
        if len(status) < n:
            raise InvalidArgumentError(f"status has {len(status)} entries for {n} elements")
    return (_addr(ivars, "ivars"), n, status, name, cmp, int(value))


# -------------------------------------------------------------------------------- collectives


@public
def broadcast(dst, src, root: int, team=Team.WORLD, *, nelems=None, dtype=None) -> None:
    """Collective over `team`: copies `src` on PE `root` (team numbering) into `dst` on every
    PE of the team (`nvshmem_broadcast`)."""
    name = _dtype(dtype, dst, src)
    n = _count(nelems, _elems(src, name, "src"), _elems(dst, name, "dst"), what="nelems")
    _native.broadcast(int(team), _addr(dst, "dst"), _addr(src, "src"), n, int(root), name)


@public
def fcollect(dst, src, team=Team.WORLD, *, nelems=None, dtype=None) -> None:
    """Collective over `team`: `dst` gets every PE's `src`, in team order (`nvshmem_fcollect`)."""
    name = _dtype(dtype, dst, src)
    size = team_n_pes(team)
    d = _elems(dst, name, "dst")
    n = _count(nelems, _elems(src, name, "src"), None if d is None else d // size, what="nelems")
    _native.fcollect(int(team), _addr(dst, "dst"), _addr(src, "src"), n, name)


@public
def alltoall(dst, src, team=Team.WORLD, *, nelems=None, dtype=None) -> None:
    """Collective over `team`: block `j` of `src` (`nelems` elements each, default
    `src.numel() // team size`) lands in block `my_pe` of `dst` on PE `j` (`nvshmem_alltoall`)."""
    name = _dtype(dtype, dst, src)
    size = team_n_pes(team)
    s, d = _elems(src, name, "src"), _elems(dst, name, "dst")
    n = _count(nelems, *(None if x is None else x // size for x in (s, d)), what="nelems (per PE)")
    _native.alltoall(int(team), _addr(dst, "dst"), _addr(src, "src"), n, name)


@public
def reduce(dst, src, op="sum", team=Team.WORLD, *, nelems=None, dtype=None) -> None:
    """Collective over `team`: `dst` on every PE gets the element-wise `op` of every PE's `src`
    (`nvshmem_<op>_reduce`). `op` is a name of `REDUCE_OPS`, a `rshmem.ReduceOp` or a
    `torch.distributed.ReduceOp` (SUM, PRODUCT, MIN, MAX, BAND, BOR, BXOR)."""
    name = _dtype(dtype, dst, src)
    n = _count(nelems, _elems(src, name, "src"), _elems(dst, name, "dst"), what="nelems")
    _native.reduce(int(team), op, _addr(dst, "dst"), _addr(src, "src"), n, name)
