"""torch / numpy dtypes <-> the runtime's dtype names (the table itself is api/dtypes.toml).

Every torch dtype can be *allocated* symmetrically (`rshmem.torch` views raw bytes, so fp8,
bool and complex work too). Only the dtypes with a runtime name can be used by typed operations
(`p`/`g`, waits, atomics, collectives); the others raise `rshmem.DTypeError` there.
"""

from __future__ import annotations

from ._native import DTypeError

# runtime name -> (itemsize, torch attribute, numpy name or None); the dtypes of atomics and waits:
# generated from api/dtypes.toml, the one dtype table.
from ._dtype_facts import ATOMIC_DTYPES, RUNTIME_DTYPES, SYNC_DTYPES  # noqa: F401


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
