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

`Kernel.bind` goes one step further for the ops' steady state (`_plan`): after the first call of a
key it returns a `Bound` launch whose grid, constexprs and every argument that does not change
from call to call are packed once; a call passes only the tensors that change (its inputs and
output) and goes straight to the compiled launcher's C entry point.

A `Bound` launch goes one step further still where it can: its parameters are packed once
(`_native.PackedLaunch`: a word per scalar or pointer, a TMA descriptor's 128 bytes), and a call
is one call into the Rust extension that writes the changed pointers and calls `cuLaunchKernel`.
A descriptor that changes with the call's tensors is encoded there from the tensor's address
(`PackedLaunch.vary_map`: Triton's `fill_tma_descriptor` arguments, one driver call, only when the
address differs from the last call's), so a step whose every layer has new activations pays no
Python per descriptor. Triton's C launcher parses every argument and asks the driver about every
pointer on each call (several µs, most of an all-reduce's host time). The packing is checked once
against the driver's own parameter layout (`cuFuncGetParamInfo`); a kernel the check refuses (a
driver without that call or without `cuTensorMapEncodeTiled`, a parameter list Triton passes
another way) keeps Triton's launcher, and so does a call on a thread where the launch fails (no
CUDA context current), from then on. Under Triton's launcher a changed descriptor is encoded by
Triton's `make_tensordesc_arg` once per base address and kept in a small cache per argument, so a
loop over the same weights and recycled outputs encodes nothing.

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

import ctypes

import torch
from triton.backends.compiler import BaseBackend
from triton.tools.tensor_descriptor import TensorDescriptor
from triton.runtime.jit import native_specialize_impl

from .. import _cuda, _native
from .._native import RshmemError
from . import _checks
from ._config import config


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

    def bind(self, grid, args: tuple, consts: tuple, varying: tuple, **options) -> "Bound":
        """The launch of these arguments, compiled and loaded (see the module docstring), taking
        per call the tensors at runtime-argument positions `varying` (a tensor, or the base tensor
        of a descriptor: the new descriptor keeps the first one's shape, strides and block)."""
        self.prepare(grid, args, consts, **options)
        return Bound(self._compiled[_key(args, consts, options)], grid, args + consts, varying)


_MAX_MAPS = 32  # encoded TMA descriptors kept per descriptor argument


class _DescLike:
    """What Triton's `make_tensordesc_arg` reads of a host TensorDescriptor."""

    __slots__ = ("base", "shape", "strides", "padding")

    def __init__(self, base, shape, strides, padding):
        self.base, self.shape, self.strides, self.padding = base, shape, strides, padding


def _raw_launcher(run):
    """The C launch function under Triton's launcher and its descriptor metadata, or (None, None)
    where this Triton's launcher is not the shape read here (then `Bound` goes through `run`)."""
    launch = getattr(run, "launch", None)
    if launch is None or getattr(run, "global_scratch_size", 1) or getattr(run, "profile_scratch_size", 1):
        return None, None
    names = getattr(getattr(launch, "__code__", None), "co_freevars", ())
    if "launcher" not in names:
        return launch, None  # no descriptor argument: Triton hands the C function itself
    cells = dict(zip(names, (c.cell_contents for c in launch.__closure__)))
    return cells.get("launcher"), cells.get("tensordesc_meta")


_INT_BITS = {"i1": 8, "u1": 8, "i8": 8, "u8": 8, "i16": 16, "u16": 16, "i32": 32, "u32": 32, "i64": 64, "u64": 64}
_FLOAT_FORMATS = {"fp32": ("<f", "<I"), "f32": ("<f", "<I"), "fp64": ("<d", "<Q"), "fp16": ("<e", "<H")}


def _word(ty: str, value) -> int:
    """The 64-bit word holding `value` as a kernel parameter of Triton type `ty`, as Triton's
    launcher passes it (low bytes, little-endian); KeyError for a type packed no other way."""
    if ty[0] == "*":
        return 0 if value is None else value
    bits = _INT_BITS.get(ty)
    if bits is not None:
        return int(value) & ((1 << bits) - 1)
    import struct

    if ty == "bf16":  # Triton's launcher truncates the float32 bits
        return struct.unpack("<I", struct.pack("<f", value))[0] >> 16
    pack, unpack = _FLOAT_FORMATS[ty]
    return struct.unpack(unpack, struct.pack(pack, value))[0]


def _map_bytes(m) -> bytes:
    """The 128 bytes of a Triton `PyCUtensorMap`: the C object is `{PyObject_HEAD;
    _Alignas(128) CUtensorMap tensorMap;}` (256 bytes, the map at offset 128), the bytes Triton's
    launcher itself passes."""
    return ctypes.string_at(id(m) + 128, 128)


def _packed(ck, run, grid, types: list, final: list, where: dict, varying: tuple):
    """A `_native.PackedLaunch` of this launch, or None where Triton's launcher must do it (an
    aggregate argument, launch attributes, scratch memory, a driver that cannot check the
    layout). `types` are the Triton types of `final`, Triton's launcher's arguments."""
    config.check()
    if config.launcher != "rshmem":
        return None
    if getattr(run, "launch_cooperative_grid", True) or getattr(run, "launch_pdl", True) or \
            getattr(run, "num_ctas", 2) != 1 or grid[0] * grid[1] * grid[2] == 0:
        return None
    if len(types) != len(final) or not all(isinstance(t, str) for t in types):
        return None
    values, slot = [], {}
    try:
        for i, (ty, v) in enumerate(zip(types, final)):
            if ty == "constexpr":
                continue
            slot[i] = len(values)
            if ty == "nvTmaDesc":
                if type(v).__basicsize__ != 256:
                    return None  # not the layout `_map_bytes` reads
                values.append(_map_bytes(v))
            else:
                values.append(_word(ty, v))
    except (KeyError, TypeError):
        return None
    values += [0, 0]  # global and profile scratch: none (`_raw_launcher` checked)
    num_warps, _, shared = ck.packed_metadata
    try:
        return _native.PackedLaunch(ck.function, grid, 32 * num_warps, shared, values,
                                    [slot[where[i]] for i in varying])
    except (RshmemError, KeyError):
        return None


def _vary_maps(native, slots) -> bool:
    """Has `native` encode the descriptor of each varying descriptor slot from an address, with
    the arguments Triton's `make_tensordesc_arg` gives `fill_tma_descriptor`; False (nothing to
    rely on) where a slot's metadata is not what is read here or the driver cannot encode."""
    try:
        for k, (_, like, meta, _) in enumerate(slots):
            if like is not None:
                native.vary_map(k, _map_args(like, meta))
    except (RshmemError, KeyError, TypeError, OverflowError):
        return False
    return True


def _map_args(like, meta) -> tuple:
    """The view of descriptor `like` with Triton metadata `meta` as `PackedLaunch.vary_map` and
    `_native.tensor_map_bytes` take it: what `make_tensordesc_arg` gives `fill_tma_descriptor`."""
    from triton.backends.nvidia.driver import TMA_DTYPE_DEVICE_TO_HOST

    shape = list(like.shape)
    if meta["fp4_padded"]:
        shape[-1] *= 2
    return (TMA_DTYPE_DEVICE_TO_HOST[meta["elem_type"]], meta["elem_size"], shape, list(like.strides),
            list(meta["block_size"]), meta["swizzle"], like.padding == "nan")


class Bound:
    """One compiled kernel with its grid and arguments packed; `launch(stream, *tensors)` runs it
    with the tensors of the positions given to `Kernel.bind` replaced."""

    def __init__(self, ck, grid, all_args: tuple, varying: tuple):
        run = ck.run  # loads the module if needed
        self.grid = (grid[0], grid[1] if len(grid) > 1 else 1, grid[2] if len(grid) > 2 else 1)
        self._run, self._ck = run, ck
        raw, metas = _raw_launcher(run)
        sig = list(getattr(getattr(ck, "src", None), "signature", {}).values())
        descs = [i for i, a in enumerate(all_args) if isinstance(a, TensorDescriptor)]
        if raw is None or len(sig) != len(all_args) or (descs and (not metas or None in metas)) or \
                [i for i, s in enumerate(sig) if isinstance(s, str) and s.startswith("tensordesc")] != descs:
            raw = None
        self._raw = raw
        # The first call's own tensors (the varying ones) are not kept: they would stay alive with
        # the plan. Only the fixed arguments (workspaces, sizes, constexprs) are.
        self._args = [None if i in varying else a for i, a in enumerate(all_args)]
        self._slots = []
        self._native = None
        if raw is not None:
            from triton.backends.nvidia.driver import make_tensordesc_arg

            self._make = make_tensordesc_arg
            final, types, where, k = [], [], {}, 0
            for i, a in enumerate(all_args):
                where[i] = len(final)
                if isinstance(a, TensorDescriptor):
                    final.extend(make_tensordesc_arg(a, metas[k]))
                    n = len(a.shape)
                    types += ["nvTmaDesc"] + ["i32"] * n + ["i64"] * n
                    k += 1
                else:
                    final.append(a.data_ptr() if hasattr(a, "data_ptr") else a)
                    types.append(sig[i])
            meta_of = dict(zip(descs, metas or ()))
            for i in varying:
                a = all_args[i]
                if isinstance(a, TensorDescriptor):
                    like = _DescLike(None, a.shape, a.strides, a.padding)
                    self._slots.append((where[i], like, meta_of[i], {a.base.data_ptr(): final[where[i]]}))
                else:
                    self._slots.append((where[i], None, None, None))
            self._head = (*self.grid, 0, ck.function, run.launch_cooperative_grid, run.launch_pdl, None, None,
                          ck.packed_metadata, None, None, None)
            self._final = final
            native = _packed(ck, run, self.grid, types, final, where, varying)
            # A packed launch takes addresses alone: it encodes each varying descriptor itself.
            self._native = native if native is not None and _vary_maps(native, self._slots) else None
        else:
            for i in varying:
                a = all_args[i]
                like = (a.shape, a.strides, a.block_shape, a.padding) if isinstance(a, TensorDescriptor) else None
                self._slots.append((i, like, None, None))
        if raw is not None:
            self._args = None  # the packed `final` list is all a launch needs

    def _map(self, slot, t):
        """The `PyCUtensorMap` of varying descriptor `slot` over tensor `t` for Triton's launcher,
        cached per base address."""
        _, like, meta, maps = slot
        ptr = t.data_ptr()
        m = maps.get(ptr)
        if m is None:
            if len(maps) >= _MAX_MAPS:
                maps.clear()
            like.base = t
            m = maps[ptr] = self._make(like, meta)[0]
            like.base = None
        return m

    def launch(self, stream: int, *tensors) -> None:
        native = self._native
        if native is not None:
            try:
                native.launch(stream, *[t.data_ptr() for t in tensors])
                return
            except RshmemError:
                # e.g. a thread with no CUDA context current, which Triton's launcher makes
                # current: it takes this call and every later one.
                self._native = None
        if self._raw is None:
            self._launch_run(stream, tensors)
            return
        final = self._final.copy()
        for slot, t in zip(self._slots, tensors):
            final[slot[0]] = t.data_ptr() if slot[1] is None else self._map(slot, t)
        gx, gy, gz, _, fn, coop, pdl, gs, ps, pm, lm, h1, h2 = self._head
        self._raw(gx, gy, gz, stream, fn, coop, pdl, gs, ps, pm, lm, h1, h2, *final)

    def _launch_run(self, stream: int, tensors) -> None:
        args = self._args.copy()
        for (pos, desc, _, _), t in zip(self._slots, tensors):
            args[pos] = t if desc is None else TensorDescriptor(t, *desc)
        ck = self._ck
        self._run(*self.grid, stream, ck.function, ck.packed_metadata, None, None, None, *args)
