"""rshmem.numba compiles into Numba-CUDA kernels for sm_90, without a GPU.

Every function of ``rshmem.numba`` is called from a kernel (with a dtype it takes; fp16 too
where the value crosses the call) that is compiled by NVVM and linked with the device library's
LTO-IR by nvJitLink with link-time optimization (``rshmem.numba.compile_ptx``). The PTX must
hold no call but to the library's out-of-line rare paths (the library inlined) and, for the functions that signal, wait, fence or
synchronize, the system-scope release / acquire / fence the memory model needs. Then every row
of ``triton-lib/api.toml``, for every dtype, is called through ``rshmem.numba.raw`` and linked
(without optimizing, which is what makes this fast), so every C symbol links from Numba: the
Pythonic functions differ between dtypes only in which raw row they call. Misuse (a dtype
mismatch, a scalar for an array, an unknown reduction) fails at compile time with a message
naming the function.

Needs numba-cuda with NVVM and nvJitLink (scripts/setup.sh installs them); compile-only, so it
runs once (marker `single`), not again under torchrun.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.single

numba = pytest.importorskip("numba", reason="numba-cuda is not installed (scripts/setup.sh installs it)")
from numba import types  # noqa: E402

import rshmem  # noqa: E402
import rshmem.numba as shm  # noqa: E402
from rshmem.numba import _lower, _raw  # noqa: E402
from ptx_calls import foreign_calls  # noqa: E402 - tests/ptx_calls.py

DTYPES = {
    "int8": types.int8, "int16": types.int16, "int32": types.int32, "int64": types.int64,
    "uint8": types.uint8, "uint16": types.uint16, "uint32": types.uint32, "uint64": types.uint64,
    "fp16": types.float16, "fp32": types.float32, "fp64": types.float64,
}
if "bf16" in _lower.NUMBA_DTYPES:
    DTYPES["bf16"] = _lower.NUMBA_DTYPES["bf16"]
# The dtype each function case compiles with (the raw rows cover every dtype).
ALL = ["fp32"]
AMO = ["uint64"]
INTS = ["int32"]
SCALAR = ["fp16", "int8"]  # p / g pass the value itself: fp16 crosses the call as CUDA's __half

# Kernel parameters: one array per dtype (a_<dtype>), signal words, a status mask, a PE, results.
PARAMS = [f"a_{t}" for t in DTYPES] + ["sig", "sig64", "status", "pe", "out"]
SIG = tuple(types.Array(DTYPES[t], 1, "C") for t in DTYPES) + (
    types.Array(types.uint64, 1, "C"), types.Array(types.int64, 1, "C"), types.Array(types.int32, 1, "C"),
    types.int32, types.Array(types.int64, 1, "C"))

RELEASE = r"(st|red|atom)\.release\.sys"
ACQUIRE = r"ld\.acquire\.sys"
# Both halves of a barrier / collective: it completes this PE's stores, then waits for the others.
SYNC = (RELEASE, ACQUIRE)

# name -> (call template with {a} = the dtype's array, dtypes, PTX patterns that must appear)
CASES = {
    "my_pe": ("out[0] = shm.my_pe()", None, ()),
    "n_pes": ("out[0] = shm.n_pes()", None, ()),
    "team_my_pe": ("out[0] = shm.team_my_pe(shm.TEAM_NODE)", None, ()),
    "team_n_pes": ("out[0] = shm.team_n_pes(shm.TEAM_WORLD)", None, ()),
    "team_translate_pe": ("out[0] = shm.team_translate_pe(shm.TEAM_NODE, 0, shm.TEAM_WORLD)", None, ()),
    "fence": ("shm.fence()", None, (r"fence\.acq_rel\.sys",)),
    "quiet": ("shm.quiet()", None, (r"fence\.sc\.sys",)),
    "p": ("shm.p({a}, 1, pe)", SCALAR, ()),
    "g": ("{a}[1] = shm.g({a}, pe)", SCALAR, ()),
    "signal_op": ("shm.signal_op(sig, 1, shm.SIGNAL_ADD, pe)\n    shm.signal_op(sig64, 1, shm.SIGNAL_SET, pe)",
                  None, (RELEASE,)),
    "signal_wait": ("out[0] = shm.signal_wait(sig, shm.CMP_GE, 1)\n    out[1] = shm.signal_wait(sig64, shm.CMP_EQ, 2)",
                    None, (ACQUIRE,)),
    "signal_wait_until": ("out[0] = shm.signal_wait_until(sig, shm.CMP_GE, 1)", None, (ACQUIRE,)),
    "signal_fetch": ("out[0] = shm.signal_fetch(sig)", None, (ACQUIRE,)),
    "wait_until": ("out[0] = shm.wait_until({a}, shm.CMP_NE, 0)", AMO, (ACQUIRE,)),
    "test": ("out[0] = shm.test({a}, shm.CMP_EQ, 1)", AMO, (ACQUIRE,)),
    "wait_until_all": ("shm.wait_until_all({a}, shm.CMP_EQ, 1)\n    shm.wait_until_all({a}, shm.CMP_EQ, 1, status)",
                       AMO, (ACQUIRE,)),
    "wait_until_any": ("out[0] = shm.wait_until_any({a}, shm.CMP_EQ, 1, status)", AMO, (ACQUIRE,)),
    "wait_until_some": ("out[0] = shm.wait_until_some({a}, shm.CMP_EQ, 1)", AMO, (ACQUIRE,)),
    "test_all": ("out[0] = shm.test_all({a}, shm.CMP_EQ, 1)", AMO, (ACQUIRE,)),
    "test_any": ("out[0] = shm.test_any({a}, shm.CMP_EQ, 1)", AMO, (ACQUIRE,)),
    "test_some": ("out[0] = shm.test_some({a}, shm.CMP_EQ, 1, status)", AMO, (ACQUIRE,)),
    "atomic_fetch": ("out[0] = shm.atomic_fetch({a}, pe)", AMO, (r"sys",)),
    "atomic_set": ("shm.atomic_set({a}, 1, pe)", AMO, (r"sys",)),
    "atomic_swap": ("out[0] = shm.atomic_swap({a}, 1, pe)", AMO, (r"atom\.\w*\.?sys",)),
    "atomic_compare_swap": ("out[0] = shm.atomic_compare_swap({a}, 0, 1, pe)", AMO, (r"atom\.\w*\.?sys",)),
    "peer_array": ("v = shm.peer_array({a}, pe)\n    v[0] = {a}[1]", ALL, ()),
    "is_reachable": ("out[0] = shm.is_reachable({a}, pe)", ALL, ()),
    "reduce_and": ('shm.reduce(shm.TEAM_WORLD, {a}, {a}, "and")', INTS, SYNC),
    "reduce_block_or": ('shm.reduce_block(shm.TEAM_WORLD, {a}, {a}, "or")', INTS, SYNC),
    "reduce_xor": ('shm.reduce(shm.TEAM_WORLD, {a}, {a}, "xor")', INTS, SYNC),
    "reduce_block_xor": ('shm.reduce_block(shm.TEAM_WORLD, {a}, {a}, "xor")', INTS, SYNC),
    "reduce_block_and": ('shm.reduce_block(shm.TEAM_WORLD, {a}, {a}, "and")', INTS, SYNC),
    "reduce_or": ('shm.reduce(shm.TEAM_WORLD, {a}, {a}, "or")', INTS, SYNC),
    "alltoall": ("shm.alltoall(shm.TEAM_WORLD, {a}, {a})", ALL, SYNC),
    "alltoall_block": ("shm.alltoall_block(shm.TEAM_WORLD, {a}, {a})", ALL, SYNC),
}
for _op in ("sum", "prod", "min", "max"):
    CASES[f"reduce_{_op}"] = (f'shm.reduce(shm.TEAM_WORLD, {{a}}, {{a}}, "{_op}")', ALL, SYNC)
    CASES[f"reduce_block_{_op}"] = (f'shm.reduce_block(shm.TEAM_WORLD, {{a}}, {{a}}, "{_op}")', ALL, SYNC)
# One op per scope for the newer forms: the op only picks which raw row is called, and every
# row links in test_every_table_row_links.
CASES["reduce_warp_sum"] = ('shm.reduce_warp(shm.TEAM_WORLD, {a}, {a}, "sum")', ALL, SYNC)
CASES["reduce_warp_xor"] = ('shm.reduce_warp(shm.TEAM_WORLD, {a}, {a}, "xor")', INTS, SYNC)
CASES["reducescatter_sum"] = ('shm.reducescatter(shm.TEAM_WORLD, {a}[:4], {a}, "sum")', ALL, SYNC)
CASES["reducescatter_warp_max"] = ('shm.reducescatter_warp(shm.TEAM_WORLD, {a}[:4], {a}, "max")', ALL, SYNC)
CASES["reducescatter_block_prod"] = ('shm.reducescatter_block(shm.TEAM_WORLD, {a}[:4], {a}, "prod")', ALL, SYNC)
CASES["reducescatter_block_and"] = ('shm.reducescatter_block(shm.TEAM_WORLD, {a}[:4], {a}, "and")', INTS, SYNC)
CASES["alltoall_warp"] = ("shm.alltoall_warp(shm.TEAM_WORLD, {a}, {a})", ALL, SYNC)
for _s in ("", "_warp", "_block"):
    for _nbi in ("", "_nbi"):
        CASES[f"put{_nbi}{_s}"] = (f"shm.put{_nbi}{_s}({{a}}, {{a}}, pe)", ALL, ())
        CASES[f"get{_nbi}{_s}"] = (f"shm.get{_nbi}{_s}({{a}}, {{a}}, pe)", ALL, ())
        CASES[f"put_signal{_nbi}{_s}"] = (
            f"shm.put_signal{_nbi}{_s}({{a}}, {{a}}, sig, 1, shm.SIGNAL_ADD, pe)", ALL, (RELEASE,))
    for _b in ("barrier_all", "sync_all"):
        CASES[_b + _s] = (f"shm.{_b}{_s}()", None, SYNC if _b == "barrier_all" else (ACQUIRE,))
    CASES["barrier" + _s] = (f"shm.barrier{_s}(shm.TEAM_WORLD)", None, SYNC)
    CASES["sync" + _s] = (f"shm.sync{_s}(shm.TEAM_NODE)", None, (ACQUIRE,))
    CASES["broadcast" + _s] = (f"shm.broadcast{_s}(shm.TEAM_WORLD, {{a}}, {{a}}, 0)", ALL, SYNC)
    CASES["fcollect" + _s] = (f"shm.fcollect{_s}(shm.TEAM_WORLD, {{a}}, {{a}})", ALL, SYNC)
for _name in ("atomic_inc", "atomic_fetch_inc"):
    CASES[_name] = (f"out[0] = shm.{_name}({{a}}, pe)" if "fetch" in _name else f"shm.{_name}({{a}}, pe)", AMO,
                    (r"(atom|red)\.\w*\.?sys",))
for _op in ("add", "and", "or", "xor"):
    CASES[f"atomic_{_op}"] = (f"shm.atomic_{_op}({{a}}, 1, pe)", AMO, (r"(atom|red)\.\w*\.?sys",))
    CASES[f"atomic_fetch_{_op}"] = (f"out[0] = shm.atomic_fetch_{_op}({{a}}, 1, pe)", AMO, (r"atom\.\w*\.?sys",))



def _kernel(body: str):
    src = f"def kernel({', '.join(PARAMS)}):\n    {body}\n"
    scope = {"shm": shm}
    exec(compile(src, "<rshmem.numba compile check>", "exec"), scope)  # noqa: S102 - a generated test kernel
    return scope["kernel"]


def _body(template: str, dtypes) -> str:
    if dtypes is None:
        return template
    return "\n    ".join(template.format(a=f"a_{t}") for t in dtypes)


def test_every_exported_function_is_checked():
    """Every function rshmem.numba exports for kernels has a case here (or is a documented
    compile-time refusal)."""
    offered = {n for n in shm.__all__ if callable(getattr(shm, n)) and n not in (
        "jit", "compile_ptx", "cuda_available", "library_path", "DeviceApiError", "DeviceApiTypeError")}
    checked = {name for name in CASES} | {re.sub(r"_(sum|prod|min|max|and|or|xor)$", "", n) for n in CASES}
    assert offered - checked == set()


@pytest.mark.parametrize("name", sorted(CASES))
def test_function_compiles_inlined_with_its_ordering(name):
    template, dtypes, patterns = CASES[name]
    ptx = shm.compile_ptx(_kernel(_body(template, dtypes)), SIG)
    assert ".target sm_90" in ptx
    assert not foreign_calls(ptx), f"{name}: the PTX still calls an exported function (the library was not inlined)"
    for pattern in patterns:
        assert re.search(pattern, ptx), f"{name}: no `{pattern}` in the PTX"


def _supported_archs() -> tuple:
    """build.py's SUPPORTED ("sm_80", ...), the GPUs rshmem supports, as compute capabilities."""
    text = (ROOT / "triton-lib" / "build.py").read_text()
    archs = re.search(r"^SUPPORTED = \(([^)]*)\)", text, re.M).group(1)
    return tuple((int(a[:-1]), int(a[-1])) for a in re.findall(r'"sm_(\d+)"', archs))


# One function of each family, with the scopes and a 16-bit float: what differs between
# architectures (ordering, group synchronisation, half-precision arithmetic) appears at least once.
ARCH_SAMPLE = "\n    ".join([
    "shm.put_signal_nbi_block(a_fp32, a_fp32, sig, 1, shm.SIGNAL_ADD, pe)",
    "shm.get_nbi_warp(a_int8, a_int8, pe)",
    "out[0] = shm.signal_wait(sig, shm.CMP_GE, 1)",
    "out[1] = shm.atomic_fetch_add(a_uint64, 1, pe)",
    "shm.p(a_fp16, 1, pe)",
    'shm.reduce_block(shm.TEAM_WORLD, a_fp16, a_fp16, "sum")',
    "shm.fcollect_warp(shm.TEAM_WORLD, a_int32, a_int32)",
    "shm.barrier_all_block()",
])


def _assemble(ptx: str, cc) -> int:
    """Assembles linked PTX for `cc` with nvJitLink (ptxas inside): the size of the cubin. Fails
    on an instruction that architecture lacks."""
    from cuda.bindings import nvjitlink

    options = [f"-arch=sm_{cc[0]}{cc[1]}"]
    handle = nvjitlink.create(len(options), options)
    try:
        data = ptx.encode()
        try:
            nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), "kernel.ptx")
            nvjitlink.complete(handle)
        except nvjitlink.nvJitLinkError as e:
            log = bytearray(nvjitlink.get_error_log_size(handle))
            nvjitlink.get_error_log(handle, log)
            raise AssertionError(f"ptxas refused the kernel for sm_{cc[0]}{cc[1]} ({e}): {log.decode(errors='replace')}")
        return nvjitlink.get_linked_cubin_size(handle)
    finally:
        nvjitlink.destroy(handle)


def test_supported_archs_are_read():
    assert _supported_archs() == ((8, 0), (8, 9), (9, 0), (10, 0))


@pytest.mark.parametrize("cc", _supported_archs(), ids=lambda cc: f"sm_{cc[0]}{cc[1]}")
def test_sample_kernel_links_for_every_supported_arch(cc):
    """The one LTO-IR library (compute_80, triton-lib/ltoir.py) links, inlines and assembles into
    a kernel for every supported GPU, keeping the memory model's release / acquire. A library
    built for a newer virtual architecture than `cc` is refused by nvJitLink here."""
    ptx = shm.compile_ptx(_kernel(ARCH_SAMPLE), SIG, cc=cc)
    assert f".target sm_{cc[0]}{cc[1]}\n" in ptx
    assert not foreign_calls(ptx), f"sm_{cc[0]}{cc[1]}: the PTX still calls an exported function (not inlined)"
    for pattern in SYNC:
        assert re.search(pattern, ptx), f"sm_{cc[0]}{cc[1]}: no `{pattern}` in the PTX"
    assert _assemble(ptx, cc) > 0


def _raw_argument(arg: _lower.Arg, t) -> str:
    if arg.kind == "ptr":
        if arg.dtype == "signal":
            return "sig"
        if arg.name == "status":
            return "status"
        dtype = t if arg.dtype == "T" else (arg.dtype or "uint8")
        return f"a_{dtype}"
    return {"team": "shm.TEAM_WORLD", "src_team": "shm.TEAM_WORLD", "dest_team": "shm.TEAM_WORLD", "pe": "pe",
            "pe_root": "0", "cmp": "shm.CMP_GE", "sig_op": "shm.SIGNAL_ADD"}.get(arg.name, "1")


@pytest.mark.parametrize("name", sorted(_raw.ROWS))
def test_every_table_row_links(name):
    """Row `name` for every dtype, called through rshmem.numba.raw: every C symbol of the table
    links from a Numba kernel (bf16 where numba-cuda has the type)."""
    row = _raw.ROWS[name]
    dtypes = [t for t in row.symbols if t is None or t in DTYPES]
    calls = [f"_x = shm.raw.{name}({', '.join(_raw_argument(a, t) for a in row.args)})" for t in dtypes]
    ptx = shm.compile_ptx(_kernel("\n    ".join(calls)), SIG, optimize=False)
    assert not _undefined(ptx), f"raw.{name}: the library does not define {_undefined(ptx)}"
    for t in dtypes:
        assert re.search(rf"^(?!\.extern)[^\n;]*\.func\b[^\n;]*\b{row.symbols[t]}\b", ptx, re.M), \
            f"raw.{name}: {row.symbols[t]} is not defined in the linked PTX"


def _undefined(ptx: str) -> list:
    """Functions the linked PTX declares but does not define (unoptimized links keep the
    library's functions out of line, so every call's target must be defined)."""
    return re.findall(r"^\.extern \.func\b[^\n]*?(\w+)\(?\s*$", ptx, re.M)


def test_the_link_fails_on_a_symbol_the_library_lacks():
    """The link check above can fail: a function the library does not define does not link."""
    missing = _lower.Row("missing", {None: "rshmem_not_a_function"}, (), "int32", "thread", "missing() -> int32")

    @_lower.intrinsic
    def not_there(typingctx):
        return _lower.typed(missing, typingctx)

    def kernel(out):
        out[0] = not_there()

    ptx = shm.compile_ptx(kernel, (types.Array(types.int64, 1, "C"),), optimize=False)
    assert _undefined(ptx) == ["rshmem_not_a_function"]


STATE = re.compile(r"\.visible \.global \.align \d+ \.b8 rshmemi_device_state_d\[(\d+)\]")


def test_device_state_reaches_the_kernel():
    """The library's state global keeps its name in the linked PTX (so the setup callback's
    device_init_module finds it with cuModuleGetGlobal) and the size clang gives it in the
    library Triton links (whose layout runtime/tests/device_state_header.rs checks against Rust)."""
    ptx = shm.compile_ptx(_kernel("out[0] = shm.my_pe()"), SIG)
    found = STATE.search(ptx)
    assert found, "rshmemi_device_state_d is not a visible global of the linked module"
    clang_ptx = ROOT / "triton-lib" / "build" / "libshmem_device.ptx"  # written by triton-lib/build.py
    assert clang_ptx.is_file(), "run triton-lib/build.py (scripts/setup.sh does)"
    assert found.group(1) == STATE.search(clang_ptx.read_text()).group(1)


def test_the_library_hooks_every_loaded_module():
    lib = _lower.library()
    assert lib is _lower.library(), "one linkable object, so Numba links it once per kernel"
    assert lib.setup_callback is _lower._init_module and lib.teardown_callback is _lower._forget_module
    assert rshmem._native.device_forget_module(0x1234) is False  # never given: nothing to forget


# --------------------------------------------------------------------------------- misuse


@pytest.mark.parametrize("body, message", [
    ("shm.put(a_int32, a_fp32, pe)", r"put: `dst` holds int32 but `src` holds float32"),
    ("shm.put(pe, a_int32, pe)", r"put: `dst` must be an array"),
    ("shm.put_signal(a_int32, a_int32, a_int32, 1, shm.SIGNAL_SET, pe)", r"put_signal: `signal_var` holds int32"),
    ("shm.signal_wait(a_fp32, shm.CMP_EQ, 1)", r"signal_wait: `signal_var` holds float32"),
    ("shm.atomic_add(a_fp32, 1, pe)", r"atomic_add: `dst` holds float32"),
    ('shm.reduce(shm.TEAM_WORLD, a_fp32, a_fp32, "xor")', r"reduce: op 'xor' takes integer arrays"),
    ('shm.reduce(shm.TEAM_WORLD, a_fp32, a_fp32, "mean")', r"reduce: `op` is 'mean'"),
    ("shm.reducescatter(shm.TEAM_WORLD, a_fp32, a_fp32, 'and')", r"reducescatter: op 'and' takes integer arrays"),
    ("shm.reducescatter_warp(shm.TEAM_WORLD, a_int32, a_int64, 'sum')", r"reducescatter_warp: `dst_array` holds int32"),
    ("shm.reduce_warp(shm.TEAM_WORLD, a_fp32, a_fp32, pe)", r"reduce_warp: `op` must be a string constant"),
    ("shm.alltoall_warp(shm.TEAM_WORLD, a_fp32, pe)", r"alltoall_warp: `src_array` must be an array"),
    ("shm.put(a_int32[::2], a_int32[::2], pe)", r"put: `dst` must be contiguous"),
    ("shm.raw.putmem_signal(a_int32, a_int32, 4, a_fp32, 1, 9, pe)", r"raw.putmem_signal: argument `sig_addr`"),
    ("shm.raw.put(a_int32, a_fp32, 1, pe)", r"raw.put: argument `source` must hold int32"),
    ("shm.raw.putmem(pe, a_int32, 4, pe)", r"raw.putmem: argument `dest` must be an array or a pointer"),
])
def test_misuse_fails_at_compile_time(body, message):
    with pytest.raises(Exception, match=message):
        shm.compile_ptx(_kernel(body), SIG)


def test_host_call_of_a_device_function_says_where_it_runs():
    with pytest.raises(NotImplementedError, match="runs inside Numba-CUDA kernels"):
        shm.put(None, None, 0)


def test_tutorial_06_kernel_compiles_inlined():
    """Tutorial 06's kernel (nvshmem4py's ring all-reduce, imports changed) compiles for sm_90
    with the library inlined, its puts releasing and its waits acquiring."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("tutorial06", ROOT / "tutorials" / "06_numba_ring_allreduce.py")
    tutorial = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tutorial)
    i32 = types.Array(types.int32, 1, "C")
    ptx = shm.compile_ptx(tutorial.ring_allreduce.py_func,
                          (i32, i32, types.int64, types.Array(types.uint64, 1, "C"), types.int64))
    assert not foreign_calls(ptx)
    assert re.search(RELEASE, ptx) and re.search(ACQUIRE, ptx)
    # The guide launches it with 512 threads per CTA and no launch bound: 128 registers at most.
    sig = (i32, i32, types.int64, types.Array(types.uint64, 1, "C"), types.int64)
    regs = _kernel_resources(tutorial.ring_allreduce.py_func, sig)
    assert regs and max(r for r, _ in regs.values()) <= 128, f"ring_allreduce cannot launch with 512 threads: {regs}"


def test_put_block_kernel_fits_1024_threads():
    """A Numba kernel calling put_block (no launch bound) needs at most 64 registers per thread,
    so a CTA of 1024 threads launches (the copy loop is short and the rare paths are calls)."""
    regs = _kernel_resources(_kernel("shm.put_block(a_uint8, a_uint8, pe)"), SIG)
    assert regs and max(r for r, _ in regs.values()) <= 64, f"put_block cannot launch with 1024 threads: {regs}"


# Block-scope collectives in a kernel of 1024 threads (no launch bound): every reduction operation
# over a sample of dtypes (half and bfloat16 included), reduce-scatter, broadcast, fcollect,
# alltoall and the barriers. The reduce-scatter alone needs `max_registers=64` for such a block
# (70 registers without it; with it, 64 and no spill): CAPPED.
BLOCK_COLLECTIVES = {
    **{f"reduce_block_{op}_{t}": f'shm.reduce_block(shm.TEAM_WORLD, a_{t}, a_{t}, "{op}")'
       for op, t in (("sum", "fp32"), ("prod", "fp64"), ("min", "int32"), ("max", "int64"), ("sum", "fp16"),
                     ("and", "uint32"), ("or", "int64"), ("xor", "uint8"))},
    "reducescatter_block_sum_fp32": 'shm.reducescatter_block(shm.TEAM_WORLD, a_fp32[:4], a_fp32, "sum")',
    "reducescatter_block_max_int16": 'shm.reducescatter_block(shm.TEAM_WORLD, a_int16[:4], a_int16, "max")',
    "broadcast_block": "shm.broadcast_block(shm.TEAM_WORLD, a_int32, a_int32, 0)",
    "fcollect_block": "shm.fcollect_block(shm.TEAM_WORLD, a_int64, a_int64)",
    "alltoall_block": "shm.alltoall_block(shm.TEAM_WORLD, a_fp32, a_fp32)",
    "barrier_all_block": "shm.barrier_all_block()",
    "sync_all_block": "shm.sync_all_block()",
    "barrier_block": "shm.barrier_block(shm.TEAM_WORLD)",
    "sync_block": "shm.sync_block(shm.TEAM_NODE)",
}
CAPPED = {"reducescatter_block_sum_fp32", "reducescatter_block_max_int16"}
if "bf16" in DTYPES:
    BLOCK_COLLECTIVES["reduce_block_max_bf16"] = 'shm.reduce_block(shm.TEAM_WORLD, a_bf16, a_bf16, "max")'


@pytest.mark.parametrize("name", sorted(BLOCK_COLLECTIVES))
def test_block_collective_kernel_fits_1024_threads(name):
    """A Numba kernel calling a block-scope collective (no launch bound) needs at most 64 registers
    per thread, so a CTA of 1024 threads launches: the library's barriers, staging copy and
    combine loop leave room for each other (docs/device-footprint.md). A reduce-scatter needs
    `max_registers=64` for that, and then spills nothing."""
    cap = 64 if name in CAPPED else None
    regs = _kernel_resources(_kernel(BLOCK_COLLECTIVES[name]), SIG, max_registers=cap)
    assert regs and max(r for r, _ in regs.values()) <= 64, f"{name} cannot launch with 1024 threads: {regs}"
    assert all(spill == 0 for _, spill in regs.values()), f"{name} spills: {regs}"


def _kernel_resources(pyfunc, sig, cc=(9, 0), max_registers=None) -> dict[str, tuple[int, int]]:
    """(registers per thread, spill-store bytes) of each kernel as the GPU gets it: the kernel's
    LTO-IR and the library's linked and assembled in one nvJitLink call, as numba-cuda's
    dispatcher links them at launch (`-lto`, `-maxrregcount` from `max_registers`). Measuring the
    PTX that `compile_ptx` returns instead under-reports by 10-20 registers (42 for a block
    reduction that runs with 62), which once let a 74-register reduce-scatter pass as 59."""
    from cuda.bindings import nvjitlink
    from numba.cuda import compile_all

    with shm._assume_device(cc):
        codes, _ = compile_all(pyfunc, sig, device=False, cc=cc, output="ltoir", abi="numba")
    options = [f"-arch=sm_{cc[0]}{cc[1]}", "-lto", "-verbose"]
    if max_registers:
        options.append(f"-maxrregcount={max_registers}")
    handle = nvjitlink.create(len(options), options)
    try:
        for i, code in enumerate(codes):
            data = code if isinstance(code, bytes) else getattr(code, "data", None) or code.code
            nvjitlink.add_data(handle, nvjitlink.InputType.LTOIR, data, len(data), f"input{i}")
        nvjitlink.complete(handle)
        log = bytearray(nvjitlink.get_info_log_size(handle))
        nvjitlink.get_info_log(handle, log)
    finally:
        nvjitlink.destroy(handle)
    out, entry, spill = {}, None, 0
    for line in log.decode(errors="replace").splitlines():
        m = re.search(r"Compiling entry function '([^']+)'", line)
        if m:
            entry, spill = m.group(1), 0
        m = re.search(r"(\d+) bytes spill stores", line)
        if m and entry is not None:
            spill = int(m.group(1))
        m = re.search(r"Used (\d+) registers", line)
        if m and entry is not None:
            out[entry] = (int(m.group(1)), spill)
            entry = None
    return out


def _arr(t, nd=1):
    return types.Array(DTYPES[t], nd, "C")


GPU_KERNELS = {  # the kernels of tests/numba_device/test_numba_gpu.py with the argument types they run with
    "_rma_kernel": (_arr("int32"), _arr("int32"), _arr("fp32"), _arr("fp32"), _arr("fp32"), _arr("int32"), types.int64),
    "_signal_kernel": (_arr("int64"), _arr("int64"), _arr("uint64"), _arr("uint64"), types.int64, types.int64),
    "_amo_kernel": (_arr("uint64"), _arr("int64"), _arr("int64"), types.int64),
    "_post_kernel": (_arr("int32"), types.int64),
    "_wait_kernel": (_arr("int32"), _arr("int32"), _arr("int32")),
    "_barrier_kernel": (_arr("int32"), types.int64, types.int64),
    "_collective_kernel": (_arr("fp32"), _arr("fp32"), _arr("fp32"), _arr("fp32"), _arr("int32"), _arr("int32")),
    "_scoped_collective_kernel": (_arr("fp32"), _arr("fp32"), _arr("fp32"), _arr("int64"), _arr("fp32"), _arr("int64"),
                                  _arr("int64"), _arr("int32"), _arr("int32")),
    "_peer_kernel": (_arr("int32"), types.int64),
    "_whoami": (_arr("int32"),),
    "_put_block_cases_256": (_arr("uint8"), _arr("uint8"), _arr("int64"), _arr("int64"), _arr("int64"), types.int64),
    **{f"_{c}_block_1024": (_arr("fp32"), _arr("fp32"))
       for c in ("reduce", "reducescatter", "broadcast", "fcollect", "alltoall")},
}


@pytest.mark.parametrize("name", sorted(GPU_KERNELS))
def test_gpu_test_kernels_compile(name):
    """The GPU tests' kernels compile here, so a GPU run is not spent on a typing error."""
    import test_numba_gpu as gpu

    ptx = shm.compile_ptx(getattr(gpu, name).py_func, GPU_KERNELS[name])
    assert not foreign_calls(ptx)
    if name.endswith("_1024"):  # launched with 1024 threads, under the kernel's own register cap
        cap = getattr(gpu, name).targetoptions.get("max_registers")
        regs = _kernel_resources(getattr(gpu, name).py_func, GPU_KERNELS[name], max_registers=cap)
        assert regs and max(r for r, _ in regs.values()) <= 64, f"{name} cannot launch with 1024 threads: {regs}"
