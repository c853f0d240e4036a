"""Links the device library into plain ``@triton.jit`` kernels on stock Triton, without the
caller passing ``extern_libs``.

Triton-distributed's fork links its device library into every kernel that calls it. Stock
Triton links only what a launch names in ``extern_libs``. Two patches make it automatic:

- ``CUDABackend.parse_options`` (run when a kernel is compiled, never on a cached launch) adds
  the library to ``extern_libs``, so Triton's cache key covers its bitcode (and the check-mode
  variant under ``RSHMEM_CHECK=1`` gets kernels of its own);
- ``knobs.runtime.add_stages_inspection_hook`` wraps the LLVM stage: a module none of whose
  ``tt.extern_elementwise`` operations names one of our symbols is lowered with ``extern_libs``
  as the caller gave it, so such kernels link exactly what stock Triton links. Only modules
  with an unresolved symbol of ours get the library linked.

Both are installed by ``install_link_hook()``; importing ``rshmem.triton`` calls it.
``RSHMEM_TRITON_LINK=0`` leaves Triton alone (then launch with ``extern_libs`` or use
``rshmem.triton.jit``).
"""
from __future__ import annotations

import dataclasses
import os
import re
import threading

from rshmem.triton._bitcode import LIBRARY_NAME, bitcode_path

#: Prefixes of the device library's C symbols (``rshmem_*``, ``rshmemx_*``, ``rshmemi_*``).
SYMBOL_PREFIXES = ("rshmem",)
_EXTERN_SYMBOL = re.compile(r'symbol\s*=\s*"(' + "|".join(SYMBOL_PREFIXES) + r')[A-Za-z0-9_]*"')

_KERNEL_NAME = re.compile(r"tt\.func public @([\w$.]+)")

_lock = threading.Lock()
_installed = False
LINKED: set = set()
"""Names of the kernels this process compiled with the device library linked in."""


def references_device_library(ttgir_text: str) -> bool:
    """Whether a TTGIR module's text calls one of the device library's symbols (what becomes an
    unresolved ``declare @rshmem_*`` in its LLVM module)."""
    return _EXTERN_SYMBOL.search(ttgir_text) is not None


def _without_library(options):
    name = LIBRARY_NAME
    libs = tuple((k, v) for k, v in options.extern_libs if k != name)
    return dataclasses.replace(options, extern_libs=libs)


def _patched_parse_options(plain):

    def parse_options(self, opts):
        libs = dict(opts.get("extern_libs") or {})
        if LIBRARY_NAME not in libs:
            try:
                libs[LIBRARY_NAME] = str(bitcode_path())
            except FileNotFoundError:
                pass  # kernels of ours then fail in the LLVM stage, with the path and how to build it
            opts = dict(opts, extern_libs=libs)
        return plain(self, opts)

    parse_options.__rshmem_plain__ = plain
    return parse_options


def _stages_hook(previous):

    def hook(backend, stages, options, language, capability):
        if previous is not None:
            previous(backend, stages, options, language, capability)
        if "llir" not in stages or capability is None or not hasattr(backend, "make_llir"):
            return  # not the CUDA backend
        name = LIBRARY_NAME
        ours = any(k == name for k, _ in (options.extern_libs or ()))
        stock = _without_library(options) if ours else options

        def make_llir(src, metadata):
            text = str(src)
            if references_device_library(text):
                if not ours:
                                bitcode_path()  # raises FileNotFoundError naming the path and how to build it
                kernel = _KERNEL_NAME.search(text)
                LINKED.add(kernel.group(1) if kernel else "")
                return backend.make_llir(src, metadata, options, capability)
            return backend.make_llir(src, metadata, stock, capability)

        stages["llir"] = make_llir

    hook.__rshmem_previous__ = previous
    return hook


def install_link_hook() -> bool:
    """Makes plain ``@triton.jit`` kernels that call ``libshmem_device`` link the device library
    (idempotent). Returns whether the hook is installed (False under ``RSHMEM_TRITON_LINK=0`` or
    without Triton's CUDA backend)."""
    global _installed
    if _installed:
        return True
    if os.environ.get("RSHMEM_TRITON_LINK", "1").strip().lower() in ("0", "false", "no", "off"):
        return False
    with _lock:
        if _installed:
            return True
        try:
            from triton import knobs  # noqa: PLC0415
            from triton.backends.nvidia.compiler import CUDABackend  # noqa: PLC0415
        except ImportError:
            return False
        if not hasattr(CUDABackend.parse_options, "__rshmem_plain__"):
            CUDABackend.parse_options = _patched_parse_options(CUDABackend.parse_options)
        current = knobs.runtime.add_stages_inspection_hook
        if not hasattr(current, "__rshmem_previous__"):
            knobs.runtime.add_stages_inspection_hook = _stages_hook(current)
        _installed = True
        return True
