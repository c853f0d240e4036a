"""What the generated bindings in ``libshmem_device.py`` call: argument checks, the
address-space conversion of pointers, and the extern call itself.

Triton pointers are ``ptr addrspace(1)`` in LLVM; the library's C functions take generic
pointers (``ptr``), as CUDA C++ callers pass them. Every pointer argument is therefore converted
to the generic address space of the same value (ptrtoint + inttoptr, which the NVPTX backend folds
away) so that the call's type equals the definition's and LLVM inlines it after linking. A
pointer result is converted back to the type of the call's first pointer argument.

``core.extern_elementwise`` is not used directly because it keys its dispatch dict by argument
dtypes, and Triton's pointer types are not hashable; the bindings dispatch on the pointee dtype
name instead and then emit the same ``tt.extern_elementwise`` operation.
"""
from __future__ import annotations

from triton.language import core


class DeviceApiTypeError(TypeError):
    """A libshmem_device function got an argument of the wrong kind or dtype."""


def _fn_name(sig: str) -> str:
    return sig.split("(", 1)[0]


def _fail(sig: str, argname: str, problem: str) -> DeviceApiTypeError:
    return DeviceApiTypeError(
        f"libshmem_device.{_fn_name(sig)}: argument `{argname}` {problem}. Expected signature: {sig}")


def _describe(x) -> str:
    if isinstance(x, core.tensor):
        return f"a {'block' if x.type.is_block() else 'scalar'} of {x.dtype}"
    return f"{type(x).__name__} {x!r}"


def unsupported(name: str, reason: str) -> NotImplementedError:
    """The error a binding that rshmem does not offer raises at compile time."""
    return NotImplementedError(f"libshmem_device.{name} is not available: {reason}")


def pointee(x, argname: str, table: dict, sig: str):
    """The pointee dtype of pointer argument ``x``, which must be a key of ``table``."""
    x = core._unwrap_if_constexpr(x)
    if not isinstance(x, core.tensor) or not x.dtype.is_ptr():
        raise _fail(sig, argname, f"must be a pointer, got {_describe(x)}")
    if x.type.is_block():
        raise _fail(sig, argname, f"must be one pointer per thread (a scalar), got a block of shape {x.shape}")
    t = x.dtype.element_ty
    if t.name not in table:
        raise _fail(sig, argname, f"points to {t.name}, which this function does not take "
                    f"(it takes {', '.join(table)})")
    return t


def _generic(x: core.tensor, _semantic) -> core.tensor:
    b = _semantic.builder
    ty = core.pointer_type(x.dtype.element_ty, 0)
    as_int = b.create_ptr_to_int(x.handle, b.get_int64_ty())
    return core.tensor(b.create_int_to_ptr(as_int, ty.to_ir(b)), ty)


def pointer(x, argname: str, want, sig: str, _semantic) -> core.tensor:
    """Checks a pointer argument and returns it in the generic address space.

    ``want`` is None (any pointee) or a tuple of accepted pointee dtypes. A literal ``0`` is a
    null pointer (for optional arguments such as ``status``).
    """
    x = core._unwrap_if_constexpr(x)
    if isinstance(x, int) and not isinstance(x, bool) and x == 0:
        b = _semantic.builder
        ty = core.pointer_type(want[0] if want else core.int8, 0)
        zero = b.get_int64(0)
        return core.tensor(b.create_int_to_ptr(zero, ty.to_ir(b)), ty)
    if not isinstance(x, core.tensor) or not x.dtype.is_ptr():
        raise _fail(sig, argname, f"must be a pointer, got {_describe(x)}")
    if x.type.is_block():
        raise _fail(sig, argname, f"must be one pointer per thread (a scalar), got a block of shape {x.shape}")
    if want is not None and x.dtype.element_ty not in want:
        names = " or ".join(str(w) for w in want)
        raise _fail(sig, argname, f"must point to {names}, got a pointer to {x.dtype.element_ty}")
    return _generic(x, _semantic)


def scalar(x, argname: str, sig: str, _semantic):
    """Checks a scalar argument (a number or a scalar tensor, not a pointer) and returns it for
    ``tl.cast``."""
    x = core._unwrap_if_constexpr(x)
    if isinstance(x, core.tensor):
        if x.dtype.is_ptr():
            raise _fail(sig, argname, f"must be a number, got a pointer ({x.dtype})")
        if x.type.is_block():
            raise _fail(sig, argname, f"must be a scalar (one value per thread), got a block of shape {x.shape}")
        return x
    if isinstance(x, (bool, int, float)):
        return x
    raise _fail(sig, argname, f"must be a number, got {_describe(x)}")


class _PointerResult:
    """Return type marker: a pointer of the same type as ``like``."""

    def __init__(self, like: core.tensor):
        self.like = core._unwrap_if_constexpr(like)


def result_like(x) -> _PointerResult:
    """The result is a pointer typed like pointer argument ``x``."""
    return _PointerResult(x)


def call(symbol: str, ret, is_pure: bool, args: list, _semantic) -> core.tensor:
    """Emits one call of C function ``symbol`` (a ``tt.extern_elementwise`` on scalars)."""
    b = _semantic.builder
    handles = [a.handle for a in args]
    if isinstance(ret, _PointerResult):
        like = ret.like.dtype
        generic = core.pointer_type(like.element_ty, 0)
        h = b.create_extern_elementwise("", "", symbol, handles, generic.to_ir(b), is_pure)
        as_int = b.create_ptr_to_int(h, b.get_int64_ty())
        return core.tensor(b.create_int_to_ptr(as_int, like.to_ir(b)), like)
    h = b.create_extern_elementwise("", "", symbol, handles, ret.to_ir(b), is_pure)
    return core.tensor(h, ret)
