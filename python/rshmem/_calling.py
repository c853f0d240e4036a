"""How the public functions that take tensors are called: op arguments as names or constants, the
order of a host call with CUDA streams, and the errors they raise.

Each such function (in `_rma.py`, `_atomics.py`, `_signals.py`, `_collectives.py` and
`_on_stream.py`) carries one decorator that says how it orders with CUDA streams
(docs/streams.md), and turns its arguments that name an op into the runtime's form first
(`as_reduce_op`, `as_sig_op`, `as_cmp`):

- `after_stream`: a host call that moves data. Given a CUDA tensor it refuses CUDA graph capture
  (a host call would run once, at capture, not at replay) and first waits for torch's current
  stream, so `t.fill_(1); rshmem.putmem(dst, t, pe)` sends the ones;
- `not_stream_ordered`: a host call that reads what peers write (signals, waits): refused inside
  capture, not ordered with any stream (a kernel there may itself wait for what this PE does);
- `on_stream`: queued on a stream (`rshmem.torch.*_on_stream`), so it may be captured.

All three turn a stray `TypeError` / `OverflowError` / `ValueError` into an `RshmemError` named
after the call (as `_errors.api` does).
"""

from __future__ import annotations

import enum
import functools
import sys

from . import _native
from ._errors import convert
from ._native import ArgumentTypeError, InvalidArgumentError, RshmemError, UnsupportedError

REDUCE_OPS = ("sum", "prod", "min", "max", "and", "or", "xor")
"""The reductions, by the names every reduce call accepts."""


class ReduceOp(str, enum.Enum):
    """The reductions as constants: `rshmem.reduce(dst, src, rshmem.ReduceOp.MAX)`. Each member
    equals its name (`ReduceOp.SUM == "sum"`)."""

    SUM = "sum"
    PROD = "prod"
    MIN = "min"
    MAX = "max"
    AND = "and"
    OR = "or"
    XOR = "xor"


# torch.distributed.ReduceOp's members by name; AVG and PREMUL_SUM have no SHMEM reduction.
_TORCH_REDUCE = {"SUM": "sum", "PRODUCT": "prod", "MIN": "min", "MAX": "max", "BAND": "and", "BOR": "or", "BXOR": "xor"}
_SIGNAL_OPS = {"set": _native.SIGNAL_SET, "add": _native.SIGNAL_ADD}
_CMPS = {
    "eq": _native.CMP_EQ, "ne": _native.CMP_NE, "gt": _native.CMP_GT,
    "ge": _native.CMP_GE, "lt": _native.CMP_LT, "le": _native.CMP_LE,
    "==": _native.CMP_EQ, "!=": _native.CMP_NE, ">": _native.CMP_GT,
    ">=": _native.CMP_GE, "<": _native.CMP_LT, "<=": _native.CMP_LE,
}


def _torch_reduce_name(op):
    """The member name of a `torch.distributed.ReduceOp` (or of its `RedOpType`), else None;
    torch is not imported for it."""
    inner = getattr(op, "op", op) if type(op).__name__ == "ReduceOp" else op
    if type(inner).__name__ == "RedOpType":
        return inner.name
    return None


def as_reduce_op(op) -> str:
    """`op` as the runtime's reduction name: a name in any case, a `ReduceOp`, or a
    `torch.distributed.ReduceOp`."""
    if isinstance(op, ReduceOp):
        return op.value
    if isinstance(op, str):
        name = op.strip().lower()
        if name in REDUCE_OPS:
            return name
        raise InvalidArgumentError(f"unknown reduction {op!r}: take one of {', '.join(REDUCE_OPS)}")
    torch_name = _torch_reduce_name(op)
    if torch_name is not None:
        if torch_name in _TORCH_REDUCE:
            return _TORCH_REDUCE[torch_name]
        raise InvalidArgumentError(
            f"torch.distributed.ReduceOp.{torch_name} has no SHMEM reduction; take one of "
            f"{', '.join(_TORCH_REDUCE)} (for AVG: SUM, then divide by the team size)"
        )
    raise ArgumentTypeError(
        f"reduce op must be a name ({', '.join(REDUCE_OPS)}), rshmem.ReduceOp or torch.distributed.ReduceOp, "
        f"not {type(op).__name__}"
    )


def _named(value, names: dict, what: str, constants: str) -> int:
    if isinstance(value, str):
        found = names.get(value.strip().lower())
        if found is None:
            raise InvalidArgumentError(f"{what} {value!r} is not one of {', '.join(k for k in names if k.isalpha())}")
        return found
    if isinstance(value, bool) or not isinstance(value, int):
        raise ArgumentTypeError(f"{what} must be a name or one of {constants}, not {type(value).__name__}")
    return value  # the runtime checks the range and names the constants


def as_sig_op(op) -> int:
    """`op` as SIGNAL_SET / SIGNAL_ADD: the constant itself, or `"set"` / `"add"`."""
    return _named(op, _SIGNAL_OPS, "signal op", "SIGNAL_SET, SIGNAL_ADD")


def as_cmp(c) -> int:
    """`c` as a CMP_* constant: the constant itself, or `"eq"`, `"ne"`, `"gt"`, `"ge"`, `"lt"`,
    `"le"` (or `"=="`, `"!="`, ...)."""
    return _named(c, _CMPS, "comparison", "CMP_EQ, CMP_NE, CMP_GT, CMP_GE, CMP_LT, CMP_LE")


def _first_cuda_tensor(args, kwargs):
    for x in args:
        if getattr(x, "is_cuda", False) is True:
            return x
    for x in kwargs.values():
        if getattr(x, "is_cuda", False) is True:
            return x
    return None


def _calling(fn, where: str, host: bool, wait: bool):
    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            if host:
                t = _first_cuda_tensor(args, kwargs)
                if t is not None:
                    torch = sys.modules["torch"]  # a CUDA tensor exists, so torch is imported
                    if torch.cuda.is_current_stream_capturing():
                        raise UnsupportedError(
                            f"{where}() runs on the host, so inside CUDA graph capture it would run once now and never "
                            "on replay; call it outside the capture, or use the on-stream form (rshmem.torch.*_on_stream)"
                        )
                    if wait:
                        torch.cuda.current_stream(t.get_device()).synchronize()
            return fn(*args, **kwargs)
        except RshmemError:
            raise
        except (OverflowError, TypeError, ValueError) as e:
            raise convert(where, e, fn, args, kwargs) from e

    return call


def after_stream(fn):
    """Decorator of a public `rshmem` host call that moves data (see the module docs)."""
    return _calling(fn, f"rshmem.{fn.__name__}", host=True, wait=True)


def not_stream_ordered(fn):
    """Decorator of a public `rshmem` host call that waits for or reads what peers write."""
    return _calling(fn, f"rshmem.{fn.__name__}", host=True, wait=False)


def on_stream(fn):
    """Decorator of a public `rshmem.torch.*_on_stream` call."""
    return _calling(fn, f"rshmem.torch.{fn.__name__}", host=False, wait=False)
