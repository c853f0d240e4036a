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


def api(fn):
    """Decorator: `fn`'s stray `TypeError` / `OverflowError` / `ValueError` become `RshmemError`s."""
    where = f"{fn.__module__}.{fn.__qualname__}".replace("rshmem._core.", "rshmem.").replace("rshmem._api.", "rshmem.").replace("rshmem.host.", "rshmem.")

    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except RshmemError:
            raise
        except OverflowError as e:
            raise ArgumentRangeError(f"{where}(): {e}") from e
        except TypeError as e:
            raise ArgumentTypeError(f"{where}(): {e}") from e
        except ValueError as e:
            raise InvalidArgumentError(f"{where}(): {e}") from e

    return call
