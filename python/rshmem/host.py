"""The argument helpers of the host API on symmetric memory, shared by its public functions
(`_rma.py`, `_atomics.py`, `_signals.py`, `_collectives.py`), and the signal and comparison
constants.

Each function takes tensors (CPU tensors on the host backend), numpy arrays, or raw addresses
(ints). With tensors, sizes and dtypes come from the tensors and are checked; with raw
addresses the caller passes `nbytes` / `nelems` / `dtype` and vouches that the local side is
valid memory of that size. Symmetric arguments (the remote side) must lie inside the symmetric
heap, which the runtime checks (`NotSymmetricError`).

A signal word or a waited-on element is named by a 0-d view, e.g. `sig[peer]`.

Arguments come in one order (destination first: `dst`, `src`; sizes and dtypes the tensors give
are keyword-only), the same as the on-stream forms of `rshmem.torch`. Given CUDA tensors, the
calls that move data first wait for torch's current stream (`_calling.py`, docs/streams.md).
"""
from __future__ import annotations

from . import _native
from ._dtype_names import ATOMIC_DTYPES, itemsize, runtime_name
from ._native import DTypeError, InvalidArgumentError, NotSymmetricError

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
        try:
            return data_ptr()
        except RuntimeError as e:  # a storage free_tensor released
            error = NotSymmetricError if "free_tensor" in str(e) else InvalidArgumentError
            raise error(f"{what}: {e}") from None
    interface = getattr(x, "__array_interface__", None)
    if interface is not None:
        return interface["data"][0]
    raise InvalidArgumentError(f"{what} must be a tensor, a numpy array or an address (int), not {type(x).__name__}")


def _out(x, what: str) -> int:
    """The first byte of local destination `x`, refused when `x` says it is read-only (a numpy
    array with `writeable` off: a read-only memmap, `np.frombuffer` over `bytes`). The runtime
    also checks that the memory may be written (a tensor over a read-only mapping)."""
    interface = getattr(x, "__array_interface__", None) if not _is_addr(x) else None
    if interface is not None and interface["data"][1]:
        raise InvalidArgumentError(
            f"{what} is a read-only array (its writeable flag is off: a memmap opened with mode='r', or a view of "
            "immutable bytes); pass a writable array (e.g. a copy: np.array(x))"
        )
    return _addr(x, what)


def _same_dtype(dst, src, what: str) -> None:
    """Typed copies move elements: `dst` and `src` hold one dtype (the rule of the collectives;
    putmem / getmem copy bytes whatever the dtypes)."""
    a, b = (runtime_name(x.dtype) if hasattr(x, "dtype") else None for x in (dst, src))
    if a is not None and b is not None and a != b:
        raise DTypeError(
            f"{what}() copies elements of one dtype, but dst is {a} and src is {b}; pass tensors of one dtype "
            f"(e.g. src.view(dst.dtype) to reinterpret the bits), or {what}mem() to copy bytes"
        )


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
            raise InvalidArgumentError(
                f"{what} must be contiguous, but its shape {tuple(x.shape)} has strides {tuple(x.stride())} "
                "(call .contiguous() first)"
            )
        return x.numel() * x.element_size()
    if hasattr(x, "__array_interface__"):
        if not x.flags["C_CONTIGUOUS"]:
            raise InvalidArgumentError(
                f"{what} must be C-contiguous, but its shape {x.shape} has strides {x.strides} (in bytes; "
                "call np.ascontiguousarray first)"
            )
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


def _strided_fits(x, stride: int, nelems: int, size: int, what: str) -> None:
    """With a tensor / array, the elements 0, stride, ..., (nelems - 1) * stride must lie inside
    it (a raw address is checked by the runtime alone)."""
    nbytes = _nbytes(x, what)
    if nbytes is None or nelems <= 0:
        return
    if stride < 0:
        raise InvalidArgumentError(f"{what}: a negative stride ({stride}) would run before the tensor's first element")
    need = ((nelems - 1) * stride + 1) * size
    if need > nbytes:
        raise InvalidArgumentError(
            f"{what}: {nelems} elements at stride {stride} need {need} bytes, but the tensor holds {nbytes}"
        )


def _count(given, *have, what: str) -> int:
    """`given` elements (or bytes) if not None, else the known size, which every tensor passed must
    share; checked against every known size so no copy runs past a tensor."""
    known = [h for h in have if h is not None]
    if given is None:
        if not known:
            raise InvalidArgumentError(f"with raw addresses, pass {what}")
        if len(set(known)) > 1:
            # Copying the smaller size silently would leave the rest of the larger tensor stale.
            unit = "bytes" if what == "nbytes" else "elements"
            raise InvalidArgumentError(
                f"the tensors passed differ in size ({' and '.join(map(str, known))} {unit}) and {what} is not "
                f"given; pass tensors of one size, or {what}= to move only part of them")
        given = known[0]
    if given < 0:
        raise InvalidArgumentError(f"{what} is {given}; it must be >= 0")
    for h in known:
        if given > h:
            raise InvalidArgumentError(f"{what} is {given}, but a tensor passed holds only {h}")
    return given


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


# -------------------------------------------------------------------------------------- waits


def _vector(ivars, cmp, value, status, nelems, dtype):
    name = _dtype(dtype, ivars)
    n = _count(nelems, _elems(ivars, name, "ivars"), what="nelems")
    if status is not None:
        status = [int(s) for s in (status.tolist() if hasattr(status, "tolist") else status)]
        if len(status) < n:
            raise InvalidArgumentError(f"status has {len(status)} entries for {n} elements")
    return (_addr(ivars, "ivars"), n, status, name, cmp, int(value))
