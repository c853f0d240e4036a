"""Launching the ops' Triton kernels with little CPU time per call.

`JITFunction.run` binds the arguments by name, computes the specialization key, merges the
options (and `rshmem.triton.jit` merges `extern_libs`) on every launch; for the ops' small
collectives that is a large part of an eager call. `Kernel` does the full launch once per
specialization and keeps the compiled kernel; later calls with the same specialization go to the
compiled kernel's launcher directly. The specialization is Triton's own (`native_specialize_impl`
on every runtime argument: integer value 1, divisibility by 16, pointer alignment, descriptor
types), so a cached kernel is reused exactly where Triton would reuse it.

Every kernel of the ops takes its runtime arguments first and its `tl.constexpr` arguments last,
which is what lets a call pass them positionally here.

`prepare` compiles and loads a kernel without launching it. An op whose kernels wait for each
other (a GEMM spinning on flags that a producer kernel sets) must prepare every kernel of the call
before the first one launches: loading a module while a kernel of the context runs waits for that
kernel (CUDA's lazy loading, which PyTorch turns on, synchronizes the context on a load), so a
producer loaded after its consumer started would never start. `prepare=True` on a call does the
same in place of the launch, so that an op can be prepared (`rshmem.ops.prepare`) by its own code
path with every launch turned into a prepare.

During CUDA graph capture a kernel that is not compiled for the call's specialization raises
instead of compiling: compiling, loading the module and writing rshmem's device state into it
are no stream work and cannot be captured (the write synchronizes a stream of its own). The
message says to prepare the call eagerly first.
"""
from __future__ import annotations

import torch
from triton.backends.compiler import BaseBackend
from triton.runtime.jit import native_specialize_impl

from .. import _cuda
from .._native import RshmemError
from . import _checks


def _spec(arg):
    if isinstance(arg, bool):
        return ("u1", arg)
    if isinstance(arg, (int, float)) or hasattr(arg, "data_ptr") or hasattr(arg, "block_shape"):
        return native_specialize_impl(BaseBackend, arg, False, True, True)
    return ("o", arg)


def _key(args: tuple, consts: tuple, options: dict) -> tuple:
    """The cache key of a launch: Triton's specialization of each argument, constexprs, options."""
    return (tuple(_spec(a) for a in args), consts, tuple(sorted(options.items())))


class Kernel:
    """A Triton kernel launched as `kernel(grid, runtime_args, constexprs, num_warps=..., ...)`.

    `runtime_args` are the kernel's non-constexpr parameters in order, `constexprs` its
    constexpr values in order (the kernel lists them last)."""

    def __init__(self, fn, what: str):
        self.fn = fn
        self.what = what  # the op, for messages
        self._compiled: dict = {}

    def _miss(self) -> None:
        if _checks.capturing():
            raise RshmemError(
                f"rshmem.ops.{self.what}: this call needs its kernel {self.fn.__name__} compiled for new arguments "
                "(shapes, dtype, alignment or layout no earlier call had), and it happens during CUDA graph capture, "
                "where a kernel cannot be compiled and loaded. Before capturing, call "
                f"rshmem.ops.prepare(rshmem.ops.{self.what}, *args, **kwargs) with tensors like the captured call's "
                "(or the op itself once eagerly), on every PE; with torch.compile(mode='reduce-overhead') and dynamic "
                "shapes, once per shape")

    def compiled(self, grid, args: tuple, consts: tuple, options: dict):
        """The compiled kernel for these arguments (compiles through Triton on a miss, which also
        launches it once: the caller's launch)."""
        key = _key(args, consts, options)
        found = self._compiled.get(key)
        if found is None:
            self._miss()
            found = self.fn[grid](*args, *consts, **options)
            self._compiled[key] = found
            return found, True
        return found, False

    def prepare(self, grid, args: tuple, consts: tuple = (), **options) -> None:
        """Compiles and loads the kernel for these arguments (its module in the context, the device
        state written into it), launching nothing; the next call with them only launches."""
        key = _key(args, consts, options)
        found = self._compiled.get(key)
        if found is None:
            self._miss()
            found = self.fn.warmup(*args, *consts, grid=grid, **options)
            self._compiled[key] = found
        found._init_handles()

    def __call__(self, grid, args: tuple, consts: tuple = (), *, prepare: bool = False, **options) -> None:
        if prepare:
            self.prepare(grid, args, consts, **options)
            return
        ck, launched = self.compiled(grid, args, consts, options)
        if launched:
            return
        stream = _cuda.current_raw_stream(torch.cuda.current_device())
        ck.run(grid[0], grid[1] if len(grid) > 1 else 1, grid[2] if len(grid) > 2 else 1, stream, ck.function,
               ck.packed_metadata, None, None, None, *args, *consts)
