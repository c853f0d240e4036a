"""What the generated raw bindings (``_raw.py``) call: argument typing, the call into the device
library, and the library itself with its module hooks.

Every raw binding is a Numba intrinsic over one C function of ``triton-lib/api.toml``. Its typer
checks the arguments against the table's signature (a wrong dtype is a compile-time error naming
the function and its signature) and picks the dtype of a typed family from one pointer argument.
Its lowering declares the C function in the kernel's LLVM module with exactly the parameter types
the library defines (typed pointers: a mismatch would make LLVM call through a cast instead of
inlining), converts the arguments, calls it, and adds the library to the kernel's link.

The library is ``lib/libshmem_device.ltoir``: the device library's sources compiled to LTO-IR by
NVRTC (``triton-lib/ltoir.py``). Numba links it with nvJitLink link-time optimization, so the
calls inline into the kernel. Its setup callback hands every loaded module to the runtime
(``device_init_module``), which writes the device state into it: now when rshmem is running,
else at the next ``rshmem.init``; the teardown callback makes the runtime forget the module
before Numba unloads it.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from llvmlite import ir

from rshmem._dtype_facts import DEVICE_DTYPES

try:  # numba-cuda >= 0.21 carries its own typing core; older ones use numba's
    from numba.cuda import types
    from numba.cuda.core.errors import TypingError
    from numba.cuda.extending import intrinsic
    from numba.cuda.typing import signature
except ImportError:  # pragma: no cover - depends on the installed numba-cuda
    from numba import types
    from numba.core.errors import TypingError
    from numba.core.extending import intrinsic
    from numba.core.typing import signature

from numba.cuda.cudadrv.linkable_code import LTOIR

__all__ = ["Arg", "Row", "intrinsic", "signature", "typed", "library_path", "library", "DeviceApiTypeError"]

LIBRARY = Path(__file__).resolve().parent / "lib" / "libshmem_device.ltoir"

# void * (what untyped pointers are in the library) and the 64-bit words of signals
_I8, _I64 = ir.IntType(8), ir.IntType(64)

# device dtype name -> Numba scalar type, from the dtype table (Numba's type of the runtime name;
# bf16 only where numba-cuda has a bfloat16)
NUMBA_DTYPES = {
    device: getattr(types, name) for device, (name, *_) in DEVICE_DTYPES.items() if hasattr(types, name)
}


def _llvm_type(kind: str, size: int, cuda: str | None) -> ir.Type:
    """The LLVM type of a dtype's C definition in the library."""
    if cuda is not None:
        # NVRTC compiles the types C lacks (fp16 / bf16) as the CUDA headers' structs (`struct
        # __half { unsigned short }`); a call must use the same named type to match the
        # definition and be inlined.
        ty = ir.global_context.get_identified_type(f"struct.{cuda}")
        if ty.is_opaque:
            ty.set_body(ir.IntType(8 * size))
        return ty
    if kind == "float":
        return {4: ir.FloatType(), 8: ir.DoubleType()}[size]
    return ir.IntType(8 * size)


# device dtype name -> LLVM type of the C definition
LLVM_TYPES = {device: _llvm_type(kind, size, cuda) for device, (_, kind, size, cuda, _) in DEVICE_DTYPES.items()}


class DeviceApiTypeError(TypingError):
    """A device API function got an argument of the wrong kind or dtype (a compile-time error)."""


@dataclass(frozen=True)
class Arg:
    """One argument of a table row: ``kind`` is "scalar" or "ptr"; ``dtype`` a table dtype name,
    "T" (the row's dtype), "signal" (a 64-bit word) or None (any pointee)."""

    name: str
    kind: str
    dtype: str | None


@dataclass(frozen=True)
class Row:
    """One row of the table: ``symbols`` maps a dtype name (None for a plain function) to the C
    symbol; ``on`` names the argument whose pointee picks the dtype of a family."""

    name: str
    symbols: dict
    args: tuple
    ret: str
    scope: str
    signature: str
    on: str | None = None


# ----------------------------------------------------------------------------------- typing


def _fail(row: Row, argname: str, problem: str) -> DeviceApiTypeError:
    return DeviceApiTypeError(
        f"rshmem.numba.raw.{row.name}: argument `{argname}` {problem}. Expected signature: {row.signature}")


def _pointee(ty):
    """The element type of a pointer-like argument (an array or a pointer), else None."""
    if isinstance(ty, types.Array):
        return ty.dtype
    if isinstance(ty, types.CPointer):
        return ty.dtype
    if ty == types.voidptr:
        return types.void
    return None


def _dtype_name(nbty) -> str | None:
    for name, t in NUMBA_DTYPES.items():
        if t == nbty:
            return name
    return None


def _is_null(ty) -> bool:
    return isinstance(ty, (types.NoneType, types.Omitted)) or (
        isinstance(ty, types.IntegerLiteral) and ty.literal_value == 0)


def _check_ptr(row: Row, arg: Arg, ty, t: str | None) -> None:
    if arg.name == "status" and _is_null(ty):
        return
    pointee = _pointee(ty)
    if pointee is None:
        raise _fail(row, arg.name, f"must be an array or a pointer, got {ty}")
    want = t if arg.dtype == "T" else arg.dtype
    if want is None:
        return
    names = ("int64", "uint64") if want == "signal" else (want,)
    if _dtype_name(pointee) not in names:
        raise _fail(row, arg.name, f"must hold {' or '.join(names)}, got {pointee}")


def _check_scalar(row: Row, arg: Arg, ty) -> None:
    if not isinstance(ty, (types.Integer, types.Float, types.Boolean, types.IntEnumMember)) and \
            not (_BF16 is not None and ty == _BF16):
        raise _fail(row, arg.name, f"must be a number, got {ty}")


def typed(row: Row, typingctx, *argtys):
    """The typer of a raw binding: checks ``argtys`` and returns (signature, codegen)."""
    if row.on is None:
        t = None
    else:
        on = next(i for i, a in enumerate(row.args) if a.name == row.on)
        pointee = _pointee(argtys[on])
        t = None if pointee is None else _dtype_name(pointee)
        if t not in row.symbols:
            got = argtys[on] if pointee is None else f"{argtys[on]} (elements {pointee})"
            raise _fail(row, row.on, f"picks the dtype and must hold one of {', '.join(row.symbols)}; got {got}")
    for arg, ty in zip(row.args, argtys):
        if arg.kind == "ptr":
            _check_ptr(row, arg, ty, t)
        else:
            _check_scalar(row, arg, ty)
    ret = _return_type(row, t, argtys)
    return signature(ret, *argtys), _codegen(row, t)


def _return_type(row: Row, t, argtys):
    if row.ret == "ptr":
        return types.voidptr
    return NUMBA_DTYPES[t if row.ret == "T" else row.ret]


# --------------------------------------------------------------------------------- lowering


def _llvm_param(arg: Arg, t) -> ir.Type:
    if arg.kind == "ptr":
        if arg.dtype is None:
            return _I8.as_pointer()
        if arg.dtype == "signal":
            return _I64.as_pointer()
        return LLVM_TYPES[t if arg.dtype == "T" else arg.dtype].as_pointer()
    return LLVM_TYPES[t if arg.dtype == "T" else arg.dtype]


def _llvm_ret(row: Row, t) -> ir.Type:
    if row.ret == "ptr":
        return _I8.as_pointer()
    return LLVM_TYPES[t if row.ret == "T" else row.ret]


def _pointer_value(context, builder, ty, val, want: ir.Type):
    if _is_null(ty):
        return ir.Constant(want, None)
    if isinstance(ty, types.Array):
        val = context.make_array(ty)(context, builder, val).data
    return builder.bitcast(val, want)


def _scalar_value(context, builder, ty, val, dtype: str, want: ir.Type):
    nbty = NUMBA_DTYPES[dtype]
    val = context.cast(builder, val, ty, nbty)
    if isinstance(want, ir.IdentifiedStructType):  # fp16 / bf16: the 16 bits in the CUDA struct
        bits_t = want.elements[0]
        bits = builder.bitcast(val, bits_t) if val.type != bits_t else val
        return builder.insert_value(ir.Constant(want, None), bits, 0)
    return val


def _result_value(context, builder, row: Row, t, val):
    if row.ret == "ptr":
        return val
    dtype = t if row.ret == "T" else row.ret
    if isinstance(val.type, ir.IdentifiedStructType):
        bits = builder.extract_value(val, 0)
        want = context.get_value_type(NUMBA_DTYPES[dtype])
        return builder.bitcast(bits, want) if want != bits.type else bits
    return val


def _codegen(row: Row, t):
    symbol = row.symbols[t]
    params = [_llvm_param(a, t) for a in row.args]
    fnty = ir.FunctionType(_llvm_ret(row, t), params)

    def codegen(context, builder, sig, args):
        _link(context)
        vals = []
        for arg, ty, val, want in zip(row.args, sig.args, args, params):
            if arg.kind == "ptr":
                vals.append(_pointer_value(context, builder, ty, val, want))
            else:
                dtype = t if arg.dtype == "T" else arg.dtype
                vals.append(_scalar_value(context, builder, ty, val, dtype, want))
        fn = builder.module.globals.get(symbol)
        if fn is None:
            fn = ir.Function(builder.module, fnty, symbol)
        return _result_value(context, builder, row, t, builder.call(fn, vals))

    return codegen


# ---------------------------------------------------------------------------- the library

_lock = threading.Lock()
_library = []


def library_path() -> Path:
    """Path of ``libshmem_device.ltoir``; raises FileNotFoundError saying how to build it."""
    if not LIBRARY.is_file():
        raise FileNotFoundError(
            f"rshmem's device library for Numba is not at {LIBRARY}: build it with `python triton-lib/build.py` "
            "(needs NVRTC: pip install cuda-bindings nvidia-cuda-nvrtc) and reinstall the wheel")
    return LIBRARY


def library() -> LTOIR:
    """The device library as Numba linkable code (one object, so Numba links it once per kernel)."""
    if not _library:
        with _lock:
            if not _library:
                _library.append(LTOIR(library_path().read_bytes(), name="libshmem_device",
                                      setup_callback=_init_module, teardown_callback=_forget_module))
    return _library[0]


def _link(context) -> None:
    # The library of the function being lowered; Numba hands its linking files on to every
    # kernel that calls it. Whether link-time optimization is on is the kernel's setting, which a
    # device function cannot see here (rshmem.numba.jit turns it on).
    context.active_code_library.add_linking_file(library())


def _module_handle(obj) -> int:
    """The CUmodule (as an int) of what Numba hands a setup callback: a cuda.core ObjectCode (a
    CUlibrary, numba-cuda >= 0.21), a CUmodule of cuda.bindings or ctypes (older numba-cuda), or
    an int."""
    import ctypes  # noqa: PLC0415

    from cuda.bindings import driver  # noqa: PLC0415

    handle = getattr(obj, "handle", obj)
    if isinstance(handle, ctypes.c_void_p):
        return int(handle.value or 0)
    if isinstance(handle, driver.CUlibrary):
        err, module = driver.cuLibraryGetModule(handle)
        if err != driver.CUresult.CUDA_SUCCESS:
            from rshmem import DriverError  # noqa: PLC0415

            raise DriverError(f"cuLibraryGetModule failed ({err.name}) for a Numba kernel's library")
        return int(module)
    return int(handle)


def _init_module(obj) -> None:
    from rshmem import _native  # noqa: PLC0415

    _native.device_init_module(_module_handle(obj))


def _forget_module(obj) -> None:
    from rshmem import _native  # noqa: PLC0415

    try:
        handle = _module_handle(obj)
    except Exception:  # noqa: BLE001 - at interpreter exit the driver may be gone; nothing to forget then
        return
    _native.device_forget_module(handle)
