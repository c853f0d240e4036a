"""Calls left in a kernel's PTX, for the compile-only tests.

The device library's exported functions must all be inlined (a call to one means a binding's
types differ from the C definition's); its internal rare paths (``rshmemi_*`` functions marked
RSHMEMI_COLD in triton-lib/src/device.h: the proxy ring, debug-wait timeouts, error records)
stay calls on purpose.
"""
from __future__ import annotations

import re

_CALL = re.compile(r"\bcall(?:\.uni)?\s+(?:\([^)]*\)\s*,\s*)?([A-Za-z_$][\w$]*)")


def callees(ptx: str) -> list[str]:
    """Every function the PTX calls, in order."""
    return _CALL.findall(ptx)


def foreign_calls(ptx: str) -> list[str]:
    """The calls that are not the library's internal out-of-line paths."""
    return [c for c in callees(ptx) if "rshmemi_" not in c]
