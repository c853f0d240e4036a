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

from ._native import ArgumentRangeError, ArgumentTypeError, InvalidArgumentError, RshmemError


def convert(where: str, e: Exception) -> RshmemError:
    """The `RshmemError` that stands for a builtin error `e` raised inside `where()`."""
    if isinstance(e, OverflowError):
        return ArgumentRangeError(f"{where}(): {e}")
    if isinstance(e, TypeError):
        return ArgumentTypeError(f"{where}(): {e}")
    return InvalidArgumentError(f"{where}(): {e}")


def api(fn):
    """Decorator: `fn`'s stray `TypeError` / `OverflowError` / `ValueError` become `RshmemError`s."""
    where = f"{fn.__module__}.{fn.__qualname__}".replace("rshmem._core.", "rshmem.").replace("rshmem._api.", "rshmem.").replace("rshmem.host.", "rshmem.")

    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except RshmemError:
            raise
        except (OverflowError, TypeError, ValueError) as e:
            raise convert(where, e) from e

    return call
