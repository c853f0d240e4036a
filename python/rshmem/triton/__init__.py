"""rshmem for Triton kernels.

- ``libshmem_device``: the device API (put/get, signals, waits, barriers, atomics, collectives),
  a drop-in for Triton-distributed's module of the same name.
- ``language``: thread geometry and memory-ordering helpers (tid, ld_acquire, wait, notify, ...).
- ``jit``: ``triton.jit`` that links the device library and makes sure every loaded module gets
  its device state, plus the source adaptations Triton-distributed's kernels need.
- Plain ``@triton.jit`` kernels work as well: importing this package installs the link hook
  (``_link.install_link_hook``: a kernel whose module calls one of our symbols gets the library
  linked; other kernels compile exactly as on stock Triton) and the module-load hook.
  ``RSHMEM_TRITON_LINK=0`` turns both off; then launch with ``extern_libs=extern_libs()``.

The bitcode is built by ``triton-lib/build.py`` into ``rshmem/triton/lib/libshmem_device.bc``;
``RSHMEM_DEVICE_BC`` overrides the path. With ``RSHMEM_CHECK=1`` the check-mode variant
``libshmem_device.check.bc`` is linked instead: its puts, gets, signals and atomics stop the kernel
with an error naming the address, PE and operation when the range is not program memory (the
runtime's own words, or past the heap bound; docs/security.md). Triton's cache key includes the
bitcode, so the two modes never share a compiled kernel.
"""
from __future__ import annotations

import threading

from rshmem.triton import language, libshmem_device
from rshmem.triton._bitcode import _BUNDLED, _BUNDLED_CHECK, LIBRARY_NAME, bitcode_path, check_mode, extern_libs  # noqa: F401
from rshmem.triton._lang_simt import rewrite_simt_regions
from rshmem.triton._link import install_link_hook, references_device_library

__all__ = ["libshmem_device", "language", "jit", "extern_libs", "bitcode_path", "check_mode", "install_load_hook",
           "install_link_hook", "references_device_library", "LIBRARY_NAME"]

# ---------------------------------------------------------------- module load hook
_hook_lock = threading.Lock()
_hook_installed = False


def _on_kernel_load(module, function, name, metadata_group, hash, **_ignored) -> None:
    """Triton calls this after loading each compiled module (CUmodule as an int).

    Hands the module to the runtime, which writes the device state into its
    ``rshmemi_device_state_d`` and returns quietly for modules without it. Does nothing when the
    native extension (or its ``device_init_module``) is not there, e.g. in compile-only use.
    """
    try:
        from rshmem import _native  # noqa: PLC0415 (optional, loaded lazily)
    except ImportError:
        return
    init = getattr(_native, "device_init_module", None)
    if init is not None:
        init(int(module))


def install_load_hook() -> None:
    """Registers the load hook with ``triton.knobs.runtime.kernel_load_end_hook`` (idempotent)."""
    global _hook_installed
    if _hook_installed:
        return
    with _hook_lock:
        if _hook_installed:
            return
        from triton import knobs  # noqa: PLC0415

        knobs.runtime.kernel_load_end_hook.add(_on_kernel_load)
        _hook_installed = True


def _without_constexprs(f, jit_kwargs: dict) -> dict:
    """``jit_kwargs`` with constexpr parameters left out of ``do_not_specialize*``: stock Triton
    refuses a constexpr there, and Triton-distributed's jit (whose kernels list some) ignores it."""
    import inspect  # noqa: PLC0415

    const = {n for n, p in inspect.signature(f).parameters.items()
             if "constexpr" in (p.annotation if isinstance(p.annotation, str) else getattr(p.annotation, "__name__", ""))}
    out = dict(jit_kwargs)
    for key in ("do_not_specialize", "do_not_specialize_on_alignment"):
        if key in out and out[key]:
            out[key] = [a for a in out[key] if a not in const]
    return out


def jit(fn=None, **jit_kwargs):
    """``triton.jit`` plus the device library: every launch (and warmup) gets
    ``extern_libs`` merged with ours, and the load hook is installed. Use as ``@jit`` or
    ``@jit(...)`` with the arguments of ``triton.jit``.

    Constexpr parameters named in ``do_not_specialize`` are dropped from it (Triton-distributed's
    jit allows them; stock Triton refuses). It also rewrites Triton-distributed's ``with dl.simt_exec_region() as (thread_idx, n):``,
    which stock Triton's code generator refuses, into a form it accepts (same lines; see
    ``rshmem.triton._lang_simt``)."""
    import triton  # noqa: PLC0415

    def decorate(f):
        kernel = triton.jit(f, **_without_constexprs(f, jit_kwargs))
        try:
            src = rewrite_simt_regions(kernel.src)
        except ValueError as e:
            raise ValueError(f"rshmem.triton.jit: {getattr(f, '__qualname__', f)}: {e}") from None
        if src != kernel.src:
            kernel._unsafe_update_src(src)
        plain_run = kernel.run

        def run(*args, **kwargs):
            install_load_hook()
            libs = dict(kwargs.get("extern_libs") or {})
            libs.setdefault(LIBRARY_NAME, str(bitcode_path()))
            kwargs["extern_libs"] = libs
            return plain_run(*args, **kwargs)

        kernel.run = run
        return kernel

    return decorate if fn is None else decorate(fn)


if install_link_hook():
    install_load_hook()
