"""Every exception a public rshmem function raises is an `RshmemError`.

Arguments travel to the runtime as C integers and names; a float where a byte count goes, a
negative or 2**70 address, a string where a PE goes would otherwise surface as the bare
`TypeError` / `OverflowError` / `ValueError` of the conversion. `api` wraps each public function
so that those become `ArgumentTypeError` (also a `TypeError`), `ArgumentRangeError` (also an
`OverflowError`) or `InvalidArgumentError` (a `ValueError`), named after the call; code that
catches the builtin keeps working.
"""

from __future__ import annotations

import functools
import inspect

from ._native import ArgumentRangeError, ArgumentTypeError, InvalidArgumentError, RshmemError


def _out_of_range(fn, args, kwargs) -> str | None:
    """The integer arguments of `fn(*args, **kwargs)` that no C integer of the call holds, as
    "name=value" (those beyond 64 bits, else those beyond 32), or None when none is found."""
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return None
    ints = [(k, v) for k, v in bound.arguments.items() if isinstance(v, int) and not isinstance(v, bool)]
    for lo, hi, bits in ((-(1 << 63), 1 << 64, 64), (-(1 << 31), 1 << 31, 32)):
        found = [f"{k}={v}" for k, v in ints if not lo <= v < hi]
        if found:
            return f"{', '.join(found)} beyond {bits} bits"
    return None


def convert(where: str, e: Exception, fn=None, args=(), kwargs=None) -> RshmemError:
    """The `RshmemError` that stands for a builtin error `e` raised inside `where()` (called as
    `fn(*args, **kwargs)`, which lets an overflow name the argument)."""
    if isinstance(e, OverflowError):
        culprit = _out_of_range(fn, args, kwargs or {}) if fn is not None else None
        if culprit is not None:
            return ArgumentRangeError(
                f"{where}(): {culprit}, outside what the call takes (PEs, teams and counts are C integers); "
                "pass a value in range"
            )
        return ArgumentRangeError(f"{where}(): {e}")
    if isinstance(e, TypeError):
        return ArgumentTypeError(f"{where}(): {e}")
    return InvalidArgumentError(f"{where}(): {e}")


def api(fn):
    """Decorator: `fn`'s stray `TypeError` / `OverflowError` / `ValueError` become `RshmemError`s."""
    where = f"{fn.__module__}.{fn.__qualname__}".replace("rshmem._core.", "rshmem.").replace("rshmem._teams.", "rshmem.").replace("rshmem.host.", "rshmem.")

    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except RshmemError:
            raise
        except (OverflowError, TypeError, ValueError) as e:
            raise convert(where, e, fn, args, kwargs) from e

    return call
