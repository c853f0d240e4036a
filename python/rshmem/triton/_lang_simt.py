"""Per-thread (SIMT) programming in stock Triton: ``simt_exec_region`` and small register
vectors (``vector``, ``make_vector``, ``zeros_vector``), under Triton-distributed's names.

Triton already runs a kernel's scalar code in every thread; what its code generator lacks is
the spelling Triton-distributed uses, ``with dl.simt_exec_region() as (thread_idx, block_size):``
(a tuple target in a ``with``). ``rshmem.triton.jit`` rewrites that line, before Triton parses
the kernel, into ``with dl.simt_exec_region("thread") as thread_idx,
dl.simt_exec_region("threads") as block_size:``, which stock Triton accepts and which keeps
every line where it was (so error locations stay right). Inside the region each thread has its
own values; scalar ``tl.store`` / ``tl.atomic_*`` there act once per program, as everywhere in
Triton, so a per-thread body writes memory through ``st`` / ``atomic_add`` of this module's
language (inline PTX, executed by every thread), as Triton-distributed's kernels do.

A ``vector`` is a short list of scalars of one dtype held in registers (``ld_vector`` /
``st_vector`` move 128 bits at a time). It supports ``+ - *`` (with a vector or a scalar),
indexing, ``recast`` (bit reinterpretation to another element width) and ``to``.
"""
from __future__ import annotations

import ast
import builtins
from typing import List, Sequence

import triton
import triton.language as tl
from triton.language import core

from rshmem.triton._extern import DeviceApiTypeError
from rshmem.triton._lang_thread import tid

__all__ = ["simt_exec_region", "vector", "make_vector", "zeros_vector", "extract", "insert", "rewrite_simt_regions"]


class vector_type(core.base_type):
    """``vec_size`` scalars of ``elem_type`` (vec_size a power of two)."""

    def __init__(self, elem_type, vec_size: int):
        if vec_size <= 0 or vec_size != triton.next_power_of_2(vec_size):
            raise ValueError(f"rshmem.triton.language.vector: the size must be a power of two, got {vec_size}")
        self.elem_type = elem_type
        self.vec_size = vec_size
        self.name = f"{elem_type}_v{vec_size}"
        self.element_nbits = elem_type.primitive_bitwidth
        self.vector_nbits = self.element_nbits * vec_size

    def __str__(self):
        return self.name

    def __eq__(self, other):
        return type(self) is type(other) and self.elem_type == other.elem_type and self.vec_size == other.vec_size

    def mangle(self) -> str:
        return "VECTOR_" + self.name

    def _flatten_ir_types(self, builder, out: List) -> None:
        for _ in range(self.vec_size):
            self.elem_type._flatten_ir_types(builder, out)

    def _unflatten_ir(self, handles, cursor: int):
        values = []
        for _ in range(self.vec_size):
            v, cursor = self.elem_type._unflatten_ir(handles, cursor)
            values.append(v)
        return vector(values), cursor


def _elementwise(x, y, op, _semantic):
    if isinstance(y, vector):
        if len(y) != len(x):
            raise ValueError(f"rshmem.triton.language.vector: sizes differ ({len(x)} and {len(y)})")
        return vector([op(a, b, _semantic=_semantic) for a, b in zip(x.values, y.values)])
    return vector([op(a, y, _semantic=_semantic) for a in x.values])


# A vector is a tl.tensor to the code generator, which applies binary operators only to tensors.
class vector(core.tensor):
    """A register vector: ``vector([a, b, c, d])`` of scalars of one dtype."""
    __triton_builtin__ = True

    def __init__(self, values: Sequence):
        self.values = list(values)
        if not self.values:
            raise ValueError("rshmem.triton.language.vector: needs at least one value")
        for v in self.values:
            if not isinstance(v, core.tensor) or v.type.is_block():
                raise DeviceApiTypeError(f"rshmem.triton.language.vector: elements must be scalars, got {v!r}")
            if v.dtype != self.values[0].dtype:
                raise DeviceApiTypeError("rshmem.triton.language.vector: elements must share one dtype, got "
                                         f"{self.values[0].dtype} and {v.dtype}")
        self.type = vector_type(self.values[0].dtype, len(self.values))

    @property
    def dtype(self):
        return self.type.elem_type

    def __getitem__(self, idx):
        idx = core._unwrap_if_constexpr(idx)
        if isinstance(idx, (builtins.slice, core.slice)):
            c = core._unwrap_if_constexpr
            return vector(self.values[builtins.slice(c(idx.start), c(idx.stop), c(idx.step))])
        return self.values[idx]

    def __setitem__(self, idx, value):
        self.values[core._unwrap_if_constexpr(idx)] = value

    def __iter__(self):
        return iter(self.values)

    def __len__(self):
        return len(self.values)

    def __repr__(self):
        return f"vector({self.values!r})"

    def _flatten_ir(self, handles) -> None:
        for v in self.values:
            v._flatten_ir(handles)

    @core.builtin
    def __add__(self, other, _semantic=None):
        return _elementwise(self, other, tl.add, _semantic)

    @core.builtin
    def __sub__(self, other, _semantic=None):
        return _elementwise(self, other, tl.sub, _semantic)

    @core.builtin
    def __mul__(self, other, _semantic=None):
        return _elementwise(self, other, tl.mul, _semantic)

    @core.builtin
    def to(self, dtype, fp_downcast_rounding=None, bitcast=False, _semantic=None):
        return vector([tl.cast(v, dtype, fp_downcast_rounding=fp_downcast_rounding, bitcast=bitcast,
                               _semantic=_semantic) for v in self.values])

    @core.builtin
    def recast(self, elem_dtype, _semantic=None):
        """The same bits read as elements of ``elem_dtype`` (the count changes with the width)."""
        elem_dtype = core._unwrap_if_constexpr(elem_dtype)
        old = self.dtype.primitive_bitwidth
        new = elem_dtype.primitive_bitwidth
        if old == new:
            return vector([tl.cast(v, elem_dtype, bitcast=True, _semantic=_semantic) for v in self.values])
        if old % new == 0:
            out = []
            for v in self.values:
                bits = tl.cast(v, core.get_int_dtype(old, False), bitcast=True, _semantic=_semantic)
                out.extend(unpack(bits, elem_dtype, _semantic=_semantic).values)
            return vector(out)
        if new % old == 0:
            ratio = new // old
            if len(self.values) % ratio:
                raise ValueError(f"rshmem.triton.language.vector.recast: {len(self.values)} x {self.dtype} does not "
                                 f"fill whole {elem_dtype} elements")
            out = []
            for i in range(0, len(self.values), ratio):
                word = pack(vector(self.values[i:i + ratio]), core.get_int_dtype(new, False), _semantic=_semantic)
                out.append(tl.cast(word, elem_dtype, bitcast=True, _semantic=_semantic))
            return vector(out)
        raise ValueError(f"rshmem.triton.language.vector.recast: cannot recast {self.dtype} to {elem_dtype}")


@core.builtin
def make_vector(values, _semantic=None):
    """A vector of the given scalars."""
    return vector(values)


@core.builtin
def zeros_vector(vec_size, dtype, _semantic=None):
    """A vector of ``vec_size`` (constexpr) zeros of ``dtype``."""
    n = core._unwrap_if_constexpr(vec_size)
    zero = tl.cast(_semantic.to_tensor(0), core._unwrap_if_constexpr(dtype), _semantic=_semantic)
    return vector([zero] * n)


_PARTS = {"thread": "the thread index in the program", "threads": "the number of threads in the program"}


class simt_exec_region:
    """``with simt_exec_region() as (thread_idx, block_size):`` (rewritten by rshmem.triton.jit)
    or ``with simt_exec_region("thread") as thread_idx, simt_exec_region("threads") as n:``."""

    def __init__(self, part=None, _semantic=None):
        part = core._unwrap_if_constexpr(part)
        if part is not None and part not in _PARTS:
            raise ValueError(f"rshmem.triton.language.simt_exec_region: part must be one of {tuple(_PARTS)}, got {part!r}")
        self._part = part
        self._semantic = _semantic

    def __enter__(self):
        s = self._semantic
        if self._part == "thread":
            return tid(0, _semantic=s)
        threads = s.to_tensor(s.builder.options.num_warps * 32)
        if self._part == "threads":
            return threads
        return core.tuple([tid(0, _semantic=s), threads])

    def __exit__(self, *exc):
        return False


def extract(input, indices, _semantic=None):  # noqa: A002 (their name)
    raise NotImplementedError("rshmem.triton.language.extract (one element of a block tensor) needs Triton-distributed's "
                              "compiler; stock Triton has no such operation. Keep per-thread values as scalars or a vector")


def insert(input, scalar, indices, _semantic=None):  # noqa: A002 (their name)
    raise NotImplementedError("rshmem.triton.language.insert (one element into a block tensor) needs Triton-distributed's "
                              "compiler; stock Triton has no such operation. Keep per-thread values as scalars or a vector")


def _is_simt_region(call: ast.expr) -> bool:
    if not isinstance(call, ast.Call):
        return False
    f = call.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
    return name == "simt_exec_region"


def rewrite_simt_regions(src: str) -> str:
    """``src`` (a kernel's source, starting at ``def``) with every
    ``with X.simt_exec_region() as (a, b):`` turned into
    ``with X.simt_exec_region("thread") as a, X.simt_exec_region("threads") as b:``.

    Only the text between ``X.simt_exec_region`` and the colon changes, on the same line, so
    Triton's line numbers stay right. Raises ValueError for a form it cannot rewrite.
    """
    if "simt_exec_region" not in src:
        return src
    tree = ast.parse(src)
    edits = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.With):
            continue
        for item in node.items:
            target = item.optional_vars
            if not _is_simt_region(item.context_expr) or not isinstance(target, (ast.Tuple, ast.List)):
                continue
            call = item.context_expr
            names = [e.id for e in target.elts if isinstance(e, ast.Name)]
            if call.args or call.keywords or len(names) != 2 or len(target.elts) != 2:
                raise ValueError(f"line {node.lineno}: simt_exec_region() as (thread_idx, block_size) takes no "
                                 "arguments and binds exactly two names")
            if call.lineno != target.end_lineno:
                raise ValueError(f"line {node.lineno}: write `with ...simt_exec_region() as (a, b):` on one line")
            func = ast.get_source_segment(src, call.func)
            new = f'{func}("thread") as {names[0]}, {func}("threads") as {names[1]}'
            edits.append((call.lineno, call.col_offset, target.end_col_offset, new))
    lines = src.splitlines(keepends=True)
    for lineno, start, end, new in sorted(edits, reverse=True):
        line = lines[lineno - 1]
        # ast offsets are in UTF-8 bytes
        raw = line.encode()
        lines[lineno - 1] = (raw[:start] + new.encode() + raw[end:]).decode()
    return "".join(lines)


# ---------------------------------------------------------------- packing
# Vectors as one wider value and back (`vector.recast` builds on them; `language_extra` exports them).
_REG = {8: "h", 16: "h", 32: "r", 64: "l"}


@core.extern
def pack_b32_v2(val0, val1, _semantic=None):
    """uint64 with ``val0`` in the low and ``val1`` in the high 32 bits."""
    return tl.inline_asm_elementwise("mov.b64 $0, {$1, $2};", "=l,r,r", [val0, val1], dtype=tl.uint64, is_pure=True,
                                     pack=1, _semantic=_semantic)


@core.extern
def pack(src, dst_type, _semantic=None):
    """The elements of vector ``src`` as one ``dst_type`` value (first element lowest)."""
    src = core._unwrap_if_constexpr(src)
    dst_type = core._unwrap_if_constexpr(dst_type)
    if not isinstance(src, vector) or src.type.vector_nbits != dst_type.primitive_bitwidth:
        raise DeviceApiTypeError(f"rshmem.triton.language.pack: needs a vector of exactly {dst_type.primitive_bitwidth} bits")
    eb = src.dtype.primitive_bitwidth
    vals = [tl.cast(v, core.get_int_dtype(eb, False), bitcast=True, _semantic=_semantic) for v in src.values]
    if eb == 8:
        vals = [tl.cast(v, tl.uint16, _semantic=_semantic) for v in vals]
    ins = ", ".join("$" + str(i + 1) for i in range(len(vals)))
    cons = f"={_REG[dst_type.primitive_bitwidth]}," + ",".join([_REG[eb] if eb != 8 else "h"] * len(vals))
    if eb == 8:  # mov.b32 {b8, ...} does not exist: shift the bytes into place
        out = tl.cast(vals[0], core.get_int_dtype(dst_type.primitive_bitwidth, False), _semantic=_semantic)
        for i, v in enumerate(vals[1:], 1):
            wide = tl.cast(v, out.dtype, _semantic=_semantic)
            out = out.__or__(wide.__lshift__(8 * i, _semantic=_semantic), _semantic=_semantic)
        return tl.cast(out, dst_type, bitcast=True, _semantic=_semantic)
    word = tl.inline_asm_elementwise(f"mov.b{dst_type.primitive_bitwidth} $0, {{{ins}}};", cons, vals,
                                     dtype=core.get_int_dtype(dst_type.primitive_bitwidth, False), is_pure=True,
                                     pack=1, _semantic=_semantic)
    return tl.cast(word, dst_type, bitcast=True, _semantic=_semantic)


@core.extern
def unpack(src, dst_type, _semantic=None):
    """``src`` split into a vector of ``dst_type`` elements (lowest bits first)."""
    src = core._unwrap_if_constexpr(src)
    dst_type = core._unwrap_if_constexpr(dst_type)
    sb, db = src.dtype.primitive_bitwidth, dst_type.primitive_bitwidth
    if sb % db or db not in (16, 32, 64) or sb not in (32, 64):
        raise DeviceApiTypeError(f"rshmem.triton.language.unpack: cannot split {src.dtype} into {dst_type}")
    n = sb // db
    bits = tl.cast(src, core.get_int_dtype(sb, False), bitcast=True, _semantic=_semantic)
    outs = ", ".join("$" + str(i) for i in range(n))
    parts = tl.inline_asm_elementwise(f"mov.b{sb} {{{outs}}}, ${n};", ",".join(["=" + _REG[db]] * n) + "," + _REG[sb],
                                      [bits], dtype=(core.get_int_dtype(db, False),) * n, is_pure=True, pack=1,
                                      _semantic=_semantic)
    return vector([tl.cast(p, dst_type, bitcast=True, _semantic=_semantic) for p in parts.values])
