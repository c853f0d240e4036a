"""Where the device library's bitcode is (``libshmem_device.bc``, or its check-mode variant), for
``rshmem.triton`` and its link hook (``_link.py``)."""
from __future__ import annotations

import os
from pathlib import Path

#: The key of the library in Triton's ``extern_libs``.
LIBRARY_NAME = "libshmem_device"

_BUNDLED = Path(__file__).resolve().parent / "lib" / "libshmem_device.bc"
_BUNDLED_CHECK = _BUNDLED.with_name("libshmem_device.check.bc")


def check_mode() -> bool:
    """Whether ``RSHMEM_CHECK`` asks for the check-mode device library (the runtime's spelling of
    a bool: 1/0, true/false, yes/no, on/off; unset is off).

    Raises ``rshmem.ConfigError`` (a ``ValueError``) for another value; a plain ValueError where
    the native extension is absent (compile-only use)."""
    value = os.environ.get("RSHMEM_CHECK", "").strip().lower()
    if value in ("", "0", "false", "no", "off"):
        return False
    if value in ("1", "true", "yes", "on"):
        return True
    try:
        from rshmem._native import ConfigError as error
    except ImportError:
        error = ValueError
    raise error(f"RSHMEM_CHECK={value!r}: expected 1/0, true/false, yes/no or on/off")


def bitcode_path() -> Path:
    """Path of ``libshmem_device.bc``: ``$RSHMEM_DEVICE_BC`` if set, else the packaged copy (its
    check-mode variant under ``RSHMEM_CHECK=1``).

    Raises FileNotFoundError naming the path and how to build it.
    """
    path = Path(os.environ.get("RSHMEM_DEVICE_BC") or (_BUNDLED_CHECK if check_mode() else _BUNDLED))
    if not path.is_file():
        raise FileNotFoundError(
            f"rshmem device library not found at {path}: build it with `python triton-lib/build.py` "
            f"(needs clang-19), or point RSHMEM_DEVICE_BC at a libshmem_device.bc")
    return path


def extern_libs() -> dict[str, str]:
    """``{"libshmem_device": path}``, for ``kernel[grid](..., extern_libs=extern_libs())``."""
    return {LIBRARY_NAME: str(bitcode_path())}
