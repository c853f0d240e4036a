"""The one table of dtypes: torch / numpy names <-> the runtime's dtype names.

Every torch dtype can be *allocated* symmetrically (`rshmem.torch` views raw bytes, so fp8,
bool and complex work too). Only the dtypes with a runtime name can be used by typed operations
(`p`/`g`, waits, atomics, collectives); the others raise `rshmem.DTypeError` there.
"""

from __future__ import annotations

from ._native import DTypeError

# runtime name -> (itemsize in bytes, torch attribute name, numpy name or None)
RUNTIME_DTYPES = {
    "int8": (1, "int8", "int8"),
    "int16": (2, "int16", "int16"),
    "int32": (4, "int32", "int32"),
    "int64": (8, "int64", "int64"),
    "uint8": (1, "uint8", "uint8"),
    "uint16": (2, "uint16", "uint16"),
    "uint32": (4, "uint32", "uint32"),
    "uint64": (8, "uint64", "uint64"),
    "float16": (2, "float16", "float16"),
    "bfloat16": (2, "bfloat16", None),
    "float32": (4, "float32", "float32"),
    "float64": (8, "float64", "float64"),
}

# Atomics act on whole 4- and 8-byte integer words.
ATOMIC_DTYPES = ("int32", "int64", "uint32", "uint64")


def _torch_name(dtype) -> str | None:
    """`"float16"` for `torch.float16`, None when `dtype` is not a torch dtype."""
    text = str(dtype)
    if type(dtype).__name__ == "dtype" and text.startswith("torch."):
        return text[len("torch."):]
    return None


# dtypes already named (torch dtypes are hashable singletons): every on-stream call names one.
_NAMED: dict = {}


def runtime_name(dtype) -> str:
    """The runtime name of `dtype` (a torch dtype, a numpy dtype or a runtime name string).

    Raises `rshmem.DTypeError` naming the dtypes that are accepted.
    """
    try:
        return _NAMED[dtype]
    except (KeyError, TypeError):
        pass
    if isinstance(dtype, str):
        name = dtype
    else:
        # torch.half and torch.float16 are one object whose str() is the canonical name; numpy
        # dtypes carry `.name`, numpy scalar types `__name__`; numpy itself is never imported.
        name = _torch_name(dtype) or getattr(dtype, "name", None) or getattr(dtype, "__name__", None)
    if isinstance(name, str) and name in RUNTIME_DTYPES:
        try:
            _NAMED[dtype] = name
        except TypeError:  # an unhashable dtype-like object: named each time
            pass
        return name
    raise DTypeError(
        f"dtype {dtype!r} is not one rshmem operations take; use one of "
        f"{', '.join(RUNTIME_DTYPES)} (torch or numpy dtypes of those names work too)"
    )


def itemsize(name: str) -> int:
    """Bytes per element of runtime dtype `name`."""
    return RUNTIME_DTYPES[runtime_name(name)][0]


def torch_dtype(name: str):
    """The torch dtype of runtime dtype `name` (imports torch)."""
    import torch

    return getattr(torch, RUNTIME_DTYPES[runtime_name(name)][1])


def check_torch_dtype(dtype) -> None:
    """Raises `rshmem.DTypeError` unless `dtype` is a torch dtype (any torch dtype)."""
    if _torch_name(dtype) is None:
        raise DTypeError(f"expected a torch dtype such as torch.float16, got {dtype!r} ({type(dtype).__name__})")
