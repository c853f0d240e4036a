"""Triton-distributed's ``dl.wait`` / ``dl.notify`` / ``dl.consume_token`` compile for sm_90 with
their semantics, without a GPU.

The kernels are in td_style_kernels.py, written as Triton-distributed's are. Each compiles with
the device library linked and no ``call`` left in the PTX; the PTX shows who acts (every lane
polls its flags, thread 0 signals). For ``consume_token`` on TMA descriptors the test checks
what matters under software pipelining: in the TTGIR and in the PTX every TMA load of A comes
after a wait, in the prologue Triton's pipeliner peels and in the loop. The same kernel without
``consume_token`` is the control: its loads are issued before the wait, so the check can fail.
"""
from __future__ import annotations

import re

import pytest

triton = pytest.importorskip("triton", reason="triton is not installed")
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402
from triton.compiler.errors import CompilationError  # noqa: E402
import triton.language as tl  # noqa: E402

import rshmem.triton as rt  # noqa: E402
import rshmem.triton.language as dl  # noqa: E402
import td_style_kernels as K  # noqa: E402
from ptx_calls import foreign_calls  # noqa: E402 - tests/ptx_calls.py

# Compiling needs one process only; under torchrun the other ranks would repeat the same work.
pytestmark = pytest.mark.single

TARGET = GPUTarget("cuda", 90, 32)


@pytest.fixture(autouse=True)
def always_compile(monkeypatch):
    # Triton's cache key does not cover the Python of core.extern builtins: a kernel cached
    # before a change to rshmem.triton.language would hide it.
    monkeypatch.setattr(triton.knobs.compilation, "always_compile", True)


def compile_kernel(fn, signature: dict, constexprs: dict | None = None, **options):
    constexprs = constexprs or {}
    signature = {**signature, **{k: "constexpr" for k in constexprs}}
    src = ASTSource(fn=fn, signature=signature, constexprs=constexprs)
    options = {"extern_libs": (("libshmem_device", str(rt.bitcode_path())),), **options}
    k = triton.compile(src, target=TARGET, options=options)
    assert k.asm["cubin"]
    assert not foreign_calls(k.asm["ptx"]), "a library call was not inlined"
    return k


def compile_error(fn, signature: dict, constexprs: dict | None = None) -> str:
    with pytest.raises(CompilationError) as info:
        compile_kernel(fn, signature, constexprs)
    return str(info.value) + str(info.value.__cause__)


# ---------------------------------------------------------------- dl.wait
def test_wait_lanes_poll_flags_below_num_barriers():
    ptx = compile_kernel(K.multi_flag_kernel, {"flags": "*i32", "data": "*i32", "out": "*i32", "n_flags": "i32",
                                               "epoch": "i32"}, {"SEG": 256, "DELAY_NS": 20000}).asm["ptx"]
    # Lane i polls flag i with the asked semantic and scope, then i + 32, ...; the warp meets after.
    assert "mov.u32 %i, %laneid;" in ptx
    assert re.search(r"ld\.acquire\.gpu\.global\.b32 %v, \[%a\];", ptx)
    assert "add.s32 %i, %i, 32;" in ptx
    assert "bar.warp.sync -1;" in ptx


@triton.jit
def _wait_u64(flags, n, out, SCOPE: tl.constexpr, SEM: tl.constexpr):
    token = dl.wait(flags, n, SCOPE, SEM, waitValue=7)
    tl.store(dl.consume_token(out, token), 1)


@pytest.mark.parametrize("scope,sem", [("sys", "relaxed"), ("cta", "acquire")])
def test_wait_on_64_bit_flags(scope, sem):
    ptx = compile_kernel(_wait_u64, {"flags": "*u64", "n": "i32", "out": "*i32"}, {"SCOPE": scope, "SEM": sem}).asm["ptx"]
    assert f"ld.{sem}.{scope}.global.b64 %v, [%a];" in ptx
    assert "mul.wide.s32 %a, %i, 8;" in ptx


@triton.jit
def _old_wait_form(flag):
    dl.wait(flag, 1, "sys")


def test_wait_in_rshmems_old_form_names_wait_value():
    msg = compile_error(_old_wait_form, {"flag": "*i64"})
    assert "needs `semantic`" in msg and "wait_value" in msg


@triton.jit
def _wait_bad(flags, KIND: tl.constexpr):
    if KIND == "float":
        dl.wait(flags, 1, "gpu", "acquire")
    else:
        dl.wait(flags, 1, "gpu", "release")


def test_wait_misuse_fails_at_compile_time():
    assert "32- or 64-bit integers" in compile_error(_wait_bad, {"flags": "*fp32"}, {"KIND": "float"})
    assert "`semantic` must be one of ('relaxed', 'acquire')" in compile_error(_wait_bad, {"flags": "*i32"},
                                                                              {"KIND": "release"})


# ---------------------------------------------------------------- dl.notify
NOTIFY_SIG = {"sig": "*i64", "target": "i32", "signal": "i32"}


@pytest.mark.parametrize("op,comm_scope,instruction", [
    ("add", "gpu", "red.release.gpu.global.add.u64"),
    ("set", "gpu", "st.release.gpu.global.b64"),
    ("add", "intra_node", "red.release.sys.add.u64"),
    ("set", "inter_node", "st.release.sys.b64"),
])
def test_notify_is_one_update_by_thread_zero(op, comm_scope, instruction):
    ptx = compile_kernel(K.notify_kernel, NOTIFY_SIG, {"SIG_OP": op, "COMM_SCOPE": comm_scope}, num_warps=4).asm["ptx"]
    # Every thread reads %tid.x; all but thread 0 branch over the update.
    m = re.search(r"mov\.u32 (%r\d+), %tid\.x;(?:\s|//[^\n]*)*setp\.ne\.b32\s+(%p\d+), \1, 0;\s*@\2 bra", ptx)
    assert m, "no tid.x == 0 guard"
    guard = ptx.index(m.group(0))
    assert ptx.index(instruction, guard) > guard
    assert ptx.count(instruction) == 1


@triton.jit
def _notify_bad(sig, KIND: tl.constexpr):
    if KIND == "op":
        dl.notify(sig, 0, sig_op="xor")
    elif KIND == "scope":
        dl.notify(sig, 0, comm_scope="node")
    else:
        dl.notify(sig, 0)


def test_notify_misuse_fails_at_compile_time():
    assert "signal words are 64-bit" in compile_error(_notify_bad, {"sig": "*i32"}, {"KIND": "dtype"})
    assert "`sig_op` must be one of ('set', 'add')" in compile_error(_notify_bad, {"sig": "*i64"}, {"KIND": "op"})
    assert "`comm_scope` must be one of" in compile_error(_notify_bad, {"sig": "*i64"}, {"KIND": "scope"})


# ---------------------------------------------------------------- consume_token on descriptors
GEMM = {"NUM_CONSUMERS": 4, "BM": 128, "BN": 64, "BK": 64, "DELAY_NS": 20000}
GEMM_ARGS = {"ready": "*i32", "M": "i32", "N": "i32", "K": "i32", "SEG_M": "i32", "epoch": "i32"}
A_DESC = "tensordesc<tensor<128x64"  # A's tiles are 128x64, B's 64x64: TTGIR names them by type


def compile_gemm(form: str, consume: bool, wait_at_tile_start: bool):
    constexprs = dict(GEMM, CONSUME=consume, WAIT_AT_TILE_START=wait_at_tile_start)
    if form == "host":
        sig = {"a_desc": "tensordesc<fp16[128, 64]>", "b_desc": "tensordesc<fp16[64, 64]>", "c_ptr": "*fp32",
               "a_ptr": "*fp16", "a_src": "*fp16", **GEMM_ARGS}
        return compile_kernel(K.ag_gemm_host_desc_kernel, sig, constexprs, num_warps=4, num_stages=3)
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "a_src": "*fp16", **GEMM_ARGS}
    return compile_kernel(K.ag_gemm_device_desc_kernel, sig, constexprs, num_warps=4, num_stages=3)


def ttgir_events(ttgir: str) -> str:
    """W for a dl.wait, A for a TMA load of A, in text order."""
    out = []
    for line in ttgir.splitlines():
        if "rshmem_wait_lane" in line:
            out.append("W")
        elif "ttng.async_tma_copy_global_to_local" in line and A_DESC in line:
            out.append("A")
    return "".join(out)


def ptx_events(ptx: str) -> str:
    """W for a dl.wait, F for the proxy fence, T for any TMA load (A's or B's), in text order."""
    found = re.findall(r"rshmem_wait_spin_\d+:|fence\.proxy\.async\.global|cp\.async\.bulk\.tensor\.\dd\.shared", ptx)
    return "".join("W" if f.startswith("rshmem") else "F" if f.startswith("fence") else "T" for f in found)


@pytest.mark.parametrize("wait_at_tile_start", [True, False], ids=["wait-at-tile-start", "wait-every-step"])
@pytest.mark.parametrize("form", ["host", "device"])
def test_tma_loads_through_a_consumed_descriptor_follow_the_wait(form, wait_at_tile_start):
    k = compile_gemm(form, True, wait_at_tile_start)
    events = ttgir_events(k.asm["ttgir"])
    # Pipelined (two loads peeled into the prologue, one in the loop), each after its wait.
    assert events == "WAWAWA", events
    assert ptx_events(k.asm["ptx"]) == "WFTT" * 3, ptx_events(k.asm["ptx"])


@pytest.mark.parametrize("form", ["host", "device"])
def test_without_consume_token_the_pipeliner_loads_before_the_wait(form):
    events = ttgir_events(compile_gemm(form, False, False).asm["ttgir"])
    assert events.startswith("A"), events


@triton.jit
def _consume_bad(x, token):
    dl.consume_token(x, token)


def test_consume_token_misuse_fails_at_compile_time():
    assert "a pointer or a 16-, 32- or 64-bit value, got int8" in compile_error(_consume_bad, {"x": "i8",
                                                                                               "token": "i32"})
    msg = compile_error(_consume_bad, {"x": "i32", "token": "fp32"})
    assert "`token` must be an integer scalar" in msg


# ---------------------------------------------------------------- simt_exec_region and language_extra
def test_simt_region_rewrite_keeps_lines():
    src = ("def k(x):\n"
           "    with dl.simt_exec_region() as (thread_idx, block_size):\n"
           "        pass\n"
           "    with ops.simt_exec_region()  as  [a, b]:\n"
           "        pass\n")
    out = rt._lang_simt.rewrite_simt_regions(src)
    assert out.splitlines()[1] == ('    with dl.simt_exec_region("thread") as thread_idx, '
                                   'dl.simt_exec_region("threads") as block_size:')
    assert out.splitlines()[3] == '    with ops.simt_exec_region("thread") as a, ops.simt_exec_region("threads") as b:'
    assert len(out.splitlines()) == len(src.splitlines())
    with pytest.raises(ValueError, match="binds exactly two names"):
        rt._lang_simt.rewrite_simt_regions("def k():\n    with dl.simt_exec_region() as (a, b, c):\n        pass\n")


def test_simt_region_compiles_to_per_thread_atomics():
    k = compile_kernel(K.bincount_kernel, {"input": "*i32", "output": "*i32", "n": "i32", "length": "i32"})
    ptx = k.asm["ptx"]
    assert "%tid.x" in ptx and "atom.relaxed.gpu.global.add" in ptx
    # Not predicated (as tl.atomic_add's scalar form is, on thread 0): every thread counts its own.
    assert re.search(r"^\s*atom\.relaxed\.gpu\.global\.add", ptx, re.M) and not re.search(r"@%p\d+ atom", ptx)


@pytest.mark.parametrize("sig,vec,loads", [({"src": "*fp16", "dst": "*fp16"}, 8, "ld.global.v4.b32"),
                                           ({"src": "*fp32", "dst": "*fp32"}, 2, "ld.relaxed.gpu.global.u32")])
def test_vectors_and_shuffles(sig, vec, loads):
    ptx = compile_kernel(K.vector_copy_kernel, {**sig, "n": "i32"}, {"VEC": vec}).asm["ptx"]
    for needle in (loads, "shfl.sync.up.b32", "shfl.sync.idx.b32", "shfl.sync.down.b32", "vote.sync.ballot.b32"):
        assert needle in ptx, needle


EXTRA_PTX = ("ld.acquire.gpu.global.u32", "ld.relaxed.sys.global.u64", "st.global.release.sys.b32",
             "st.global.relaxed.gpu.b8", "st.global.relaxed.gpu.b16", "ld.acquire.gpu.global.v4.b32",
             "ld.global.v4.u32", "ld.volatile.global.v2.b64", "st.release.gpu.global.v4.b32",
             "st.volatile.global.v2.b32", "membar.gl", "fence.acq_rel.sys", "fence.sc.gpu",
             "red.release.gpu.global.add.s32", "shfl.sync.bfly.b32", "elect.sync", "cp.async.bulk.wait_group 0",
             "atom.acq_rel.sys.global.cas.b64", "%smid", "%globaltimer_hi", "%globaltimer_lo", "bar.sync")


def test_language_extra_names_lower_to_their_ptx():
    sig = {"i32": "*i32", "i64": "*i64", "f32": "*fp32", "f16": "*fp16", "u8": "*u8", "out64": "*u64", "pe": "i32"}
    ptx = compile_kernel(K.extra_helpers_kernel, sig).asm["ptx"]
    missing = [n for n in EXTRA_PTX if n not in ptx]
    assert not missing, missing


@triton.jit
def _multicast(p):
    dl.multimem_st_b32(p, 1)


def test_multicast_names_fail_with_the_reason():
    msg = compile_error(_multicast, {"p": "*i32"})
    assert "multimem_st_b32 uses NVLink multicast" in msg and "does not support" in msg


def test_constexpr_function_is_where_triton_distributed_kernels_look():
    assert tl.constexpr_function is triton.runtime.jit.constexpr_function


def test_jit_drops_constexprs_from_do_not_specialize():
    # Stock Triton refuses a constexpr in do_not_specialize; Triton-distributed's jit ignores it.
    assert [p.name for p in K.fill_kernel.params if p.do_not_specialize] == ["n"]
    compile_kernel(K.fill_kernel, {"x": "*i32", "n": "i32"}, {"BLOCK": 128})


def test_warp_barriers_called_from_one_lane_elect_among_the_lanes_that_called():
    # Triton-distributed's test_nvshmem_api calls barrier_all_warp from lane 0 alone; the warp
    # barrier reads which lanes called (activemask) instead of waiting for all 32.
    ptx = compile_kernel(K.lone_lane_warp_barrier_kernel, {"out": "*i32", "team": "i32"}, num_warps=4).asm["ptx"]
    assert "activemask.b32" in ptx
