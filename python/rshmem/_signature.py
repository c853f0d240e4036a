"""How a public function that takes tensors is called: its names and order as api/host.toml's
[[py]] rows declare them (read from the generated `_signatures.py`), op arguments as names or
constants, and its order with CUDA streams.

`@public` goes on each such function in `host.py`, `torch.py` and the generated `_host_calls.py`. At import it refuses a
definition whose parameters differ from the table's row, so the table stays the one place the
names and order are declared. On each call it:

- normalises the arguments the row marks `reduce_op`, `sig_op` or `cmp` (names, rshmem
  constants, `torch.distributed.ReduceOp`);
- for a host call given a CUDA tensor: refuses CUDA graph capture (a host call would run once,
  at capture, not at replay), and for rows with `order = "after_stream"` first waits for torch's
  current stream, so `t.fill_(1); rshmem.putmem(dst, t, pe)` sends the ones (docs/streams.md);
- turns a stray `TypeError` / `OverflowError` / `ValueError` into `RshmemError`s (as `_errors.api`).
"""

from __future__ import annotations

import ast
import enum
import functools
import inspect
import sys

from . import _native
from ._core import Team
from ._errors import convert
from ._native import ArgumentTypeError, InvalidArgumentError, RshmemError, UnsupportedError
from ._signatures import SIGNATURES

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


def reduce_op(op) -> str:
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


def sig_op(op) -> int:
    """`op` as SIGNAL_SET / SIGNAL_ADD: the constant itself, or `"set"` / `"add"`."""
    return _named(op, _SIGNAL_OPS, "signal op", "SIGNAL_SET, SIGNAL_ADD")


def cmp(c) -> int:
    """`c` as a CMP_* constant: the constant itself, or `"eq"`, `"ne"`, `"gt"`, `"ge"`, `"lt"`,
    `"le"` (or `"=="`, `"!="`, ...)."""
    return _named(c, _CMPS, "comparison", "CMP_EQ, CMP_NE, CMP_GT, CMP_GE, CMP_LT, CMP_LE")


_NORMALISE = {"reduce_op": reduce_op, "sig_op": sig_op, "cmp": cmp}
_MODULES = {"rshmem.host": "rshmem", "rshmem._host_calls": "rshmem", "rshmem.torch": "rshmem.torch", "rshmem._torch_calls": "rshmem.torch"}


def _default(source):
    if source is None:
        return inspect.Parameter.empty
    return Team.WORLD if source == "WORLD" else ast.literal_eval(source)


def _signature(params) -> inspect.Signature:
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return inspect.Signature([inspect.Parameter(n, kinds[kw], default=_default(d)) for n, _, d, kw in params])


def _shape(sig: inspect.Signature) -> list:
    return [(p.name, p.kind, p.default) for p in sig.parameters.values()]


def _text(sig: inspect.Signature) -> str:
    return str(sig.replace(return_annotation=inspect.Signature.empty)).replace("<Team.WORLD: 0>", "Team.WORLD")


def _first_cuda_tensor(args, kwargs):
    for x in args:
        if getattr(x, "is_cuda", False) is True:
            return x
    for x in kwargs.values():
        if getattr(x, "is_cuda", False) is True:
            return x
    return None


def _host_order(where: str, order: str, t) -> None:
    """A host call given CUDA tensor `t`: refuse capture, then wait for torch's current stream."""
    torch = sys.modules["torch"]  # a CUDA tensor exists, so torch is imported
    if torch.cuda.is_current_stream_capturing():
        raise UnsupportedError(
            f"{where}() runs on the host, so inside CUDA graph capture it would run once now and never on replay; "
            "call it outside the capture, or use the on-stream form (rshmem.torch.*_on_stream)"
        )
    if order == "after_stream":
        torch.cuda.current_stream(t.get_device()).synchronize()


def public(fn):
    """Decorator: `fn` called as its [[py]] row of api/host.toml says (see the module docs)."""
    module = _MODULES[fn.__module__]
    where = f"{module}.{fn.__name__}"
    try:
        params, order = SIGNATURES[where]
    except KeyError:
        raise RuntimeError(f"{where} is marked @public but api/host.toml has no [[py]] row for it") from None
    new_sig = _signature(params)
    have = inspect.signature(fn)
    if _shape(have) != _shape(new_sig):
        raise RuntimeError(
            f"{where} is defined as {where}{_text(have)}, but api/host.toml declares {where}{_text(new_sig)}: "
            "change the row (and run tools/gen_host_api.py) or the definition"
        )
    kinds = [(i, name, _NORMALISE[kind]) for i, (name, kind, _, _) in enumerate(params) if kind]
    host = order != "on_stream"

    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            if kinds:
                args = list(args)
                for i, name, norm in kinds:
                    if i < len(args):
                        args[i] = norm(args[i])
                    elif name in kwargs:
                        kwargs[name] = norm(kwargs[name])
            if host:
                t = _first_cuda_tensor(args, kwargs)
                if t is not None:
                    _host_order(where, order, t)
            return fn(*args, **kwargs)
        except RshmemError:
            raise
        except (OverflowError, TypeError, ValueError) as e:
            raise convert(where, e, fn, args, kwargs) from e

    call.__rshmem_row__ = (params, order)
    return call
