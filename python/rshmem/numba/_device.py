"""The Pythonic device API for Numba-CUDA kernels, over the generated raw bindings (``_raw``).

Each function here is a stub that Numba replaces inside kernels (``overload``): arrays go in
where the raw functions take pointers, sizes come from the arrays, the dtype from the arrays (and
must agree between them), and checks that Numba can make while compiling raise a compile-time
error naming the function. Names and argument orders follow nvshmem4py's
``nvshmem.core.device.numba``, so its kernels port by changing the import.

Sizes: where two arrays meet (``put(dst, src, pe)``, reductions), the smaller one sets how many
elements move, as in nvshmem4py; slice an array to move part of it. Arrays must be contiguous.
"""
from __future__ import annotations

try:
    from numba.cuda import types
    from numba.cuda.core.errors import TypingError
    from numba.cuda.extending import intrinsic, overload
except ImportError:  # pragma: no cover - older numba-cuda
    from numba import types
    from numba.core.errors import TypingError
    from numba.core.extending import intrinsic, overload

from rshmem._dtype_facts import DEVICE_DTYPES
from rshmem.numba import _raw
from rshmem.numba._lower import NUMBA_DTYPES, _codegen, signature

__all__: list = []


class DeviceApiError(TypingError):
    """An rshmem.numba call that cannot compile as written; the message says what to change."""


def _fail(fn: str, problem: str) -> DeviceApiError:
    return DeviceApiError(f"rshmem.numba.{fn}: {problem}")


def _array(fn: str, name: str, ty, dtypes=None) -> None:
    if not isinstance(ty, types.Array):
        raise _fail(fn, f"`{name}` must be an array (slice one to pick a part), got {ty}")
    if ty.layout not in ("C", "F"):
        raise _fail(fn, f"`{name}` must be contiguous (a slice without a step), got a {ty.layout}-layout array")
    if dtypes is not None and ty.dtype not in dtypes:
        raise _fail(fn, f"`{name}` holds {ty.dtype}; this function takes {', '.join(map(str, dtypes))}")


def _same_dtype(fn: str, a, b, an="dst", bn="src") -> None:
    if a.dtype != b.dtype:
        raise _fail(fn, f"`{an}` holds {a.dtype} but `{bn}` holds {b.dtype}; use one dtype")


def _itemsize(ty) -> int:
    return ty.dtype.bitwidth // 8


ALL_DTYPES = tuple(NUMBA_DTYPES.values())
AMO_DTYPES = tuple(NUMBA_DTYPES[d] for d, (_, _, _, _, atomic) in DEVICE_DTYPES.items() if atomic)
SIGNAL_DTYPES = (types.int64, types.uint64)  # signal words are 64 bits (NVSHMEM's uint64_t)
INTEGER_DTYPES = tuple(NUMBA_DTYPES[d] for d, (_, kind, *_) in DEVICE_DTYPES.items() if kind != "float")


def _define(name: str, params: str, doc: str):
    """A stub named `name` with `params` and `doc`, exported from rshmem.numba; Numba replaces it
    in kernels by the overload registered on it. Called outside a kernel, it says so."""
    text = f"def {name}({params}):\n    raise NotImplementedError(_OUTSIDE.format(name={name!r}))\n"
    scope: dict = {"_OUTSIDE": _OUTSIDE}
    exec(text, scope)  # noqa: S102 - builds a plain function with real parameter names for Numba
    fn = scope[name]
    fn.__module__ = "rshmem.numba"
    fn.__doc__ = doc
    globals()[name] = fn
    __all__.append(name)
    return fn


_OUTSIDE = ("rshmem.numba.{name} runs inside Numba-CUDA kernels (@cuda.jit); on the host use rshmem's host API "
            "or rshmem.compat.nvshmem.core")


# ------------------------------------------------------------------------------- queries

for _name in ("my_pe", "n_pes", "team_my_pe", "team_n_pes", "team_translate_pe"):
    globals()[_name] = getattr(_raw, _name)
    __all__.append(_name)


def _void(name: str, raw_fn, params: str, doc: str):
    """A Pythonic wrapper returning None around a raw function of no arguments or of `team`."""
    stub = _define(name, params, doc)
    if params:
        @overload(stub)
        def _ol_team(team):
            return lambda team: _none(raw_fn(team))
    else:
        @overload(stub)
        def _ol():
            return lambda: _none(raw_fn())
    return stub


@intrinsic
def _none(typingctx, x):
    """Drops a value (the int32 0 of functions SHMEM declares void)."""
    return signature(types.none, x), lambda context, builder, sig, args: context.get_dummy_value()


# --------------------------------------------------------------------- ordering, barriers

_void("fence", _raw.fence, "", "Puts, AMOs and signals of this thread to each PE arrive in issue order.")
_void("quiet", _raw.quiet, "", "Every earlier put, AMO and signal of this thread is complete and visible.")
for _scope, _suffix in (("thread", ""), ("warp", "_warp"), ("block", "_block")):
    _who = {"thread": "one thread", "warp": "every thread of a warp", "block": "every thread of the block"}[_scope]
    _void("barrier_all" + _suffix, getattr(_raw, "barrier_all" + _suffix), "",
          f"Quiet, then wait for every PE (called by {_who}).")
    _void("sync_all" + _suffix, getattr(_raw, "sync_all" + _suffix), "",
          f"Wait for every PE, without completing puts (called by {_who}).")
    _void("barrier" + _suffix, getattr(_raw, "barrier" + _suffix), "team",
          f"Quiet, then wait for every member of `team` (called by {_who}).")
_void("sync", _raw.sync, "team", "Wait for every member of `team` (one thread).")
_void("sync_warp", _raw.team_sync_warp, "team", "Wait for every member of `team` (every thread of a warp).")
_void("sync_block", _raw.team_sync_block, "team", "Wait for every member of `team` (every thread of the block).")


# ------------------------------------------------------------------------------------ RMA

_SCOPE_DOC = {"": "One thread", "_warp": "Every thread of a warp, with the same arguments,",
              "_block": "Every thread of the block, with the same arguments,"}


def _rma(name: str, raw_fn, direction: str, suffix: str):
    doc = (f"{_SCOPE_DOC[suffix]} copies `min(dst.size, src.size)` elements from "
           f"{'local `src` to symmetric `dst` on' if direction == 'put' else 'symmetric `src` on'} PE `pe`"
           f"{'' if direction == 'put' else ' to local `dst`'}. Arrays of one dtype, contiguous.")
    stub = _define(name, "dst, src, pe", doc)

    @overload(stub)
    def _ol(dst, src, pe):
        _array(name, "dst", dst, ALL_DTYPES)
        _array(name, "src", src, ALL_DTYPES)
        _same_dtype(name, dst, src)
        item = _itemsize(dst)

        def impl(dst, src, pe):
            raw_fn(dst, src, min(dst.size, src.size) * item, pe)

        return impl

    return stub


for _dir in ("put", "get"):
    for _nbi in ("", "_nbi"):
        for _suffix in ("", "_warp", "_block"):
            _rma(f"{_dir}{_nbi}{_suffix}", getattr(_raw, f"{_dir}mem{_nbi}{_suffix}"), _dir, _suffix)


def _put_signal(name: str, raw_fn, suffix: str):
    doc = (f"{_SCOPE_DOC[suffix]} copies `min(dst.size, src.size)` elements of local `src` to symmetric `dst` "
           "on PE `pe`, then applies `signal_op` (SIGNAL_SET / SIGNAL_ADD) with `signal_val` to `signal_var[0]` on "
           "`pe`, released at system scope: a PE that sees the signal sees the data. `signal_var` holds int64 or "
           "uint64.")
    stub = _define(name, "dst, src, signal_var, signal_val, signal_op, pe", doc)

    @overload(stub)
    def _ol(dst, src, signal_var, signal_val, signal_op, pe):
        _array(name, "dst", dst, ALL_DTYPES)
        _array(name, "src", src, ALL_DTYPES)
        _same_dtype(name, dst, src)
        _array(name, "signal_var", signal_var, SIGNAL_DTYPES)
        item = _itemsize(dst)

        def impl(dst, src, signal_var, signal_val, signal_op, pe):
            raw_fn(dst, src, min(dst.size, src.size) * item, signal_var, signal_val, signal_op, pe)

        return impl

    return stub


for _nbi in ("", "_nbi"):
    for _suffix in ("", "_warp", "_block"):
        _put_signal(f"put_signal{_nbi}{_suffix}", getattr(_raw, f"putmem_signal{_nbi}{_suffix}"), _suffix)

_p = _define("p", "dst, value, pe", "Stores `value` (cast to dst's dtype) at `dst[0]` on PE `pe` (one thread).")


@overload(_p)
def _p_ol(dst, value, pe):
    _array("p", "dst", dst, ALL_DTYPES)
    return lambda dst, value, pe: _none(_raw.p(dst, value, pe))


_g = _define("g", "src, pe", "Returns `src[0]` of PE `pe` (one thread).")


@overload(_g)
def _g_ol(src, pe):
    _array("g", "src", src, ALL_DTYPES)
    return lambda src, pe: _raw.g(src, pe)


# -------------------------------------------------------------------------- signals, waits

_signal_op = _define("signal_op", "signal_var, signal_val, signal_op, pe",
                     "Applies `signal_op` (SIGNAL_SET / SIGNAL_ADD) with `signal_val` to `signal_var[0]` on PE `pe`, "
                     "released at system scope (one thread).")


@overload(_signal_op)
def _signal_op_ol(signal_var, signal_val, signal_op, pe):
    _array("signal_op", "signal_var", signal_var, SIGNAL_DTYPES)
    return lambda signal_var, signal_val, signal_op, pe: _none(_raw.signal_op(signal_var, signal_val, signal_op, pe))


def _signal_wait(name: str):
    stub = _define(name, "signal_var, cmp, cmp_value",
                   "Waits (acquire) until local `signal_var[0]` compares to `cmp_value` as `cmp` (CMP_EQ, CMP_GE, ...) "
                   "says; returns the value seen (uint64). One thread.")

    @overload(stub)
    def _ol(signal_var, cmp, cmp_value):
        _array(name, "signal_var", signal_var, SIGNAL_DTYPES)
        return lambda signal_var, cmp, cmp_value: _raw.signal_wait_until(signal_var, cmp, cmp_value)

    return stub


_signal_wait("signal_wait")  # nvshmem4py's name
_signal_wait("signal_wait_until")

_signal_fetch = _define("signal_fetch", "signal_var", "Reads local `signal_var[0]` with acquire (uint64).")


@overload(_signal_fetch)
def _signal_fetch_ol(signal_var):
    _array("signal_fetch", "signal_var", signal_var, SIGNAL_DTYPES)
    return lambda signal_var: _raw.signal_fetch(signal_var)


_wait_until = _define("wait_until", "ivar, cmp, cmp_value",
                      "Waits (acquire) until local `ivar[0]` compares to `cmp_value` as `cmp` says; returns the value "
                      "seen. `ivar` holds int32, int64, uint32 or uint64.")


@overload(_wait_until)
def _wait_until_ol(ivar, cmp, cmp_value):
    _array("wait_until", "ivar", ivar, AMO_DTYPES)
    return lambda ivar, cmp, cmp_value: _raw.wait_until(ivar, cmp, cmp_value)


_test = _define("test", "ivar, cmp, cmp_value",
                "Whether local `ivar[0]` compares to `cmp_value` as `cmp` says (acquire load).")


@overload(_test)
def _test_ol(ivar, cmp, cmp_value):
    _array("test", "ivar", ivar, AMO_DTYPES)
    return lambda ivar, cmp, cmp_value: _raw.test(ivar, cmp, cmp_value) != 0


_VECTOR_DOC = {
    "wait_until_all": "Waits until every element of `ivars` not masked by `status` (nonzero = skip) compares true.",
    "wait_until_any": "Waits until an unmasked element compares true; returns its index (-1 if all are masked).",
    "wait_until_some": "Waits until at least one unmasked element compares true; returns how many do.",
    "test_all": "Whether every unmasked element compares true.",
    "test_any": "The index of an unmasked element that compares true, or -1.",
    "test_some": "How many unmasked elements compare true.",
}


def _vector(name: str):
    raw_fn = getattr(_raw, name)
    stub = _define(name, "ivars, cmp, cmp_value, status=None",
                   _VECTOR_DOC[name] + " `ivars` is local, int32/int64/uint32/uint64; `status` an int32 array or None.")
    as_bool = name == "test_all"

    @overload(stub)
    def _ol(ivars, cmp, cmp_value, status=None):
        _array(name, "ivars", ivars, AMO_DTYPES)
        if isinstance(status, (types.NoneType, types.Omitted)) or status is None:
            def impl(ivars, cmp, cmp_value, status=None):
                r = raw_fn(ivars, ivars.size, None, cmp, cmp_value)
                return r != 0 if as_bool else r
            return impl
        _array(name, "status", status, (types.int32,))

        def impl_status(ivars, cmp, cmp_value, status=None):
            r = raw_fn(ivars, min(ivars.size, status.size), status, cmp, cmp_value)
            return r != 0 if as_bool else r

        return impl_status

    return stub


for _name in _VECTOR_DOC:
    _vector(_name)


# -------------------------------------------------------------------------------- atomics

_AMO = {
    # name: (params, raw function, returns the old value)
    "atomic_fetch": ("src, pe", "Atomically reads `src[0]` on PE `pe`."),
    "atomic_set": ("dst, value, pe", "Atomically writes `value` to `dst[0]` on PE `pe`."),
    "atomic_swap": ("dst, value, pe", "Atomically writes `value`; returns the old value."),
    "atomic_compare_swap": ("dst, cond, value, pe", "Writes `value` if `dst[0]` equals `cond`; returns the old value."),
    "atomic_inc": ("dst, pe", "Atomically adds 1."),
    "atomic_fetch_inc": ("dst, pe", "Atomically adds 1; returns the old value."),
    "atomic_add": ("dst, value, pe", "Atomically adds `value`."),
    "atomic_fetch_add": ("dst, value, pe", "Atomically adds `value`; returns the old value."),
    "atomic_and": ("dst, value, pe", "Atomic bitwise and."),
    "atomic_fetch_and": ("dst, value, pe", "Atomic bitwise and; returns the old value."),
    "atomic_or": ("dst, value, pe", "Atomic bitwise or."),
    "atomic_fetch_or": ("dst, value, pe", "Atomic bitwise or; returns the old value."),
    "atomic_xor": ("dst, value, pe", "Atomic bitwise xor."),
    "atomic_fetch_xor": ("dst, value, pe", "Atomic bitwise xor; returns the old value."),
}


def _amo(name: str, params: str, doc: str):
    raw_fn = getattr(_raw, name)
    fetches = name in ("atomic_fetch", "atomic_swap", "atomic_compare_swap") or name.startswith("atomic_fetch_")
    stub = _define(name, params, doc + " The array holds int32, int64, uint32 or uint64; one thread.")
    if params == "src, pe":
        @overload(stub)
        def _ol_fetch(src, pe):
            _array(name, "src", src, AMO_DTYPES)
            return lambda src, pe: raw_fn(src, pe)
    elif params == "dst, pe":
        @overload(stub)
        def _ol_inc(dst, pe):
            _array(name, "dst", dst, AMO_DTYPES)
            return (lambda dst, pe: raw_fn(dst, pe)) if fetches else (lambda dst, pe: _none(raw_fn(dst, pe)))
    elif params == "dst, value, pe":
        @overload(stub)
        def _ol_value(dst, value, pe):
            _array(name, "dst", dst, AMO_DTYPES)
            if fetches:
                return lambda dst, value, pe: raw_fn(dst, value, pe)
            return lambda dst, value, pe: _none(raw_fn(dst, value, pe))
    else:
        @overload(stub)
        def _ol_cas(dst, cond, value, pe):
            _array(name, "dst", dst, AMO_DTYPES)
            return lambda dst, cond, value, pe: raw_fn(dst, cond, value, pe)
    return stub


for _name, (_params, _doc) in _AMO.items():
    _amo(_name, _params, _doc)


# ---------------------------------------------------------------------------- collectives

_REDUCE_OPS = ("sum", "prod", "min", "max", "and", "or", "xor")


def _literal_op(fn: str, op) -> str:
    if not isinstance(op, types.StringLiteral):
        raise _fail(fn, f"`op` must be a string constant (one of {', '.join(_REDUCE_OPS)}), got {op}")
    value = op.literal_value
    if value not in _REDUCE_OPS:
        raise _fail(fn, f"`op` is {value!r}; use one of {', '.join(_REDUCE_OPS)}")
    return value


def _reduction_row(name: str, family: str, suffix: str, dst_array, src_array, op):
    """The raw row `<op>_<family><suffix>` for these arrays, after checking them and `op`."""
    value = _literal_op(name, op)
    _array(name, "dst_array", dst_array, ALL_DTYPES)
    _array(name, "src_array", src_array, ALL_DTYPES)
    _same_dtype(name, dst_array, src_array, "dst_array", "src_array")
    if value in ("and", "or", "xor") and dst_array.dtype not in INTEGER_DTYPES:
        raise _fail(name, f"op {value!r} takes integer arrays, not {dst_array.dtype}")
    return getattr(_raw, f"{value}_{family}{suffix}")


def _reduce(name: str, suffix: str):
    stub = _define(name, "team, dst_array, src_array, op",
                   f"{_SCOPE_DOC[suffix]} reduces `src_array` over the members of `team` into `dst_array` "
                   f"(`op`: {', '.join(_REDUCE_OPS)}, a string constant; min of the two sizes).")

    @overload(stub, prefer_literal=True)
    def _ol(team, dst_array, src_array, op):
        raw_fn = _reduction_row(name, "reduce", suffix, dst_array, src_array, op)

        def impl(team, dst_array, src_array, op):
            raw_fn(team, dst_array, src_array, min(dst_array.size, src_array.size))

        return impl

    return stub


for _suffix in ("", "_warp", "_block"):
    _reduce("reduce" + _suffix, _suffix)


def _reducescatter(name: str, suffix: str):
    stub = _define(name, "team, dst_array, src_array, op",
                   f"{_SCOPE_DOC[suffix]} reduces block `team_my_pe(team)` of `src_array` over the members of "
                   "`team` into `dst_array`: `src_array` holds one block per member, `dst_array` one block "
                   f"(`op`: {', '.join(_REDUCE_OPS)}, a string constant; block = min(dst_array.size, "
                   "src_array.size // team size)). The arrays must not overlap.")

    @overload(stub, prefer_literal=True)
    def _ol(team, dst_array, src_array, op):
        raw_fn = _reduction_row(name, "reducescatter", suffix, dst_array, src_array, op)

        def impl(team, dst_array, src_array, op):
            raw_fn(team, dst_array, src_array, min(dst_array.size, src_array.size // _raw.team_n_pes(team)))

        return impl

    return stub


for _suffix in ("", "_warp", "_block"):
    _reducescatter("reducescatter" + _suffix, _suffix)


def _broadcast(name: str, suffix: str):
    raw_fn = getattr(_raw, "broadcast" + suffix)
    stub = _define(name, "team, dst_array, src_array, root=0",
                   f"{_SCOPE_DOC[suffix]} copies `src_array` of member `root` of `team` into `dst_array` on every "
                   "member (min of the two sizes).")

    @overload(stub)
    def _ol(team, dst_array, src_array, root=0):
        _array(name, "dst_array", dst_array, ALL_DTYPES)
        _array(name, "src_array", src_array, ALL_DTYPES)
        _same_dtype(name, dst_array, src_array, "dst_array", "src_array")

        def impl(team, dst_array, src_array, root=0):
            raw_fn(team, dst_array, src_array, min(dst_array.size, src_array.size), root)

        return impl

    return stub


def _fcollect(name: str, suffix: str):
    raw_fn = getattr(_raw, "fcollect" + suffix)
    stub = _define(name, "team, dst_array, src_array",
                   f"{_SCOPE_DOC[suffix]} gathers every member's `src_array` into `dst_array` in team order "
                   "(`dst_array` holds team size x the elements moved).")

    @overload(stub)
    def _ol(team, dst_array, src_array):
        _array(name, "dst_array", dst_array, ALL_DTYPES)
        _array(name, "src_array", src_array, ALL_DTYPES)
        _same_dtype(name, dst_array, src_array, "dst_array", "src_array")

        def impl(team, dst_array, src_array):
            raw_fn(team, dst_array, src_array, min(src_array.size, dst_array.size // _raw.team_n_pes(team)))

        return impl

    return stub


def _alltoall(name: str, suffix: str):
    raw_fn = getattr(_raw, "alltoall" + suffix)
    stub = _define(name, "team, dst_array, src_array",
                   f"{_SCOPE_DOC[suffix]} sends block j of `src_array` to member j, into block `team_my_pe` of its "
                   "`dst_array` (block = min of the two sizes / team size).")

    @overload(stub)
    def _ol(team, dst_array, src_array):
        _array(name, "dst_array", dst_array, ALL_DTYPES)
        _array(name, "src_array", src_array, ALL_DTYPES)
        _same_dtype(name, dst_array, src_array, "dst_array", "src_array")

        def impl(team, dst_array, src_array):
            raw_fn(team, dst_array, src_array, min(dst_array.size, src_array.size) // _raw.team_n_pes(team))

        return impl

    return stub


for _suffix in ("", "_warp", "_block"):
    _broadcast("broadcast" + _suffix, _suffix)
    _fcollect("fcollect" + _suffix, _suffix)
    _alltoall("alltoall" + _suffix, _suffix)

# --------------------------------------------------------------------------- peer arrays
# An intrinsic, not an overload: Numba's device functions may return only arrays they were
# given, and this one makes a new array (the same one over the peer's memory).

_REMOTE_PTR = _raw.ROWS["remote_ptr"]


@intrinsic
def peer_array(typingctx, array, pe):
    """The view of symmetric `array` on PE `pe` (`nvshmem_ptr`): loads and stores through it go
    to `pe`'s memory. Only for PEs this one reaches by load/store (node-local); for another PE
    the view's data pointer is null, which `is_reachable(array, pe)` tells beforehand."""
    _array("peer_array", "array", array)
    if not isinstance(pe, (types.Integer, types.IntEnumMember)):
        raise _fail("peer_array", f"`pe` must be an integer, got {pe}")
    remote_ptr = _codegen(_REMOTE_PTR, None)

    def codegen(context, builder, sig, args):
        remote = remote_ptr(context, builder, signature(types.voidptr, *sig.args), args)
        src = context.make_array(sig.args[0])(context, builder, args[0])
        out = context.make_array(sig.return_type)(context, builder)
        for field in ("meminfo", "parent", "nitems", "itemsize", "shape", "strides"):
            setattr(out, field, getattr(src, field))
        out.data = builder.bitcast(remote, src.data.type)
        return out._getvalue()

    return signature(array, array, pe), codegen


__all__.append("peer_array")

_is_reachable = _define("is_reachable", "array, pe",
                        "Whether this PE reaches symmetric `array` on PE `pe` by load/store (so `peer_array` works).")


@intrinsic
def _not_null(typingctx, ptr):
    def codegen(context, builder, sig, args):
        return builder.icmp_unsigned("!=", args[0], args[0].type(None))

    return signature(types.boolean, ptr), codegen


@overload(_is_reachable)
def _is_reachable_ol(array, pe):
    _array("is_reachable", "array", array)
    return lambda array, pe: _not_null(_raw.remote_ptr(array, pe))
