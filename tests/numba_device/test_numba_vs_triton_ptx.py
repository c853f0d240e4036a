"""The Numba put_block loop compiles to the same memory traffic as its Triton twin (no GPU).

benchmarks/numba_vs_triton.py times a put_block loop written in Numba and in Triton; its first
GPU run found Numba's 256-thread puts at 0.72x Triton's. Part of that was the copy loop: NVVM
(which optimizes Numba kernels with the LTO-IR) built the 16 addresses of a round as a chain of
dependent adds, where clang's LLVM (Triton's bitcode) keeps them independent; the device library
now computes each from the round's base (triton-lib/src/copy_device.h). Both benchmark kernels
are compiled here for sm_90 exactly as the benchmark launches them, and their PTX must keep:

- about as many loads from memory (global or generic addressing: Numba's PTX marks global the
  loads Triton leaves generic, so those counts differ by design), and the same 16-byte accesses;
- no 16-byte load in a copy loop whose address is an add to the previous load's address.

The Triton bitcode rshmem ships keeps 16 vectors per thread in its copy loop where the LTO-IR
keeps 4 (triton-lib/build.py, TRITON_DEFINES; docs/device-footprint.md), so the comparison
compiles the Triton kernel against the library built as the LTO-IR is (clang-19, ~1 min), and
checks the shipped bitcode's loop apart.

Compile-only (~20 s with warm caches, plus the library build): marker `single`, not again under
torchrun.
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.single

pytest.importorskip("numba", reason="numba-cuda is not installed (scripts/setup.sh installs it)")
bench = pytest.importorskip("benchmarks.numba_vs_triton")
from ptx_calls import foreign_calls  # noqa: E402 - tests/ptx_calls.py

# Numba may read a little more per call than Triton (its device-state reads are not merged the
# same way: 322 against 312 loads when this was written); "well above" is anything past this.
LOAD_RATIO_LIMIT = 1.25


ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def put_block_ptx(tmp_path_factory):
    """The benchmark's kernels, Triton's linked with the library built with the LTO-IR's defines."""
    if shutil.which("clang-19") is None:
        pytest.skip("clang-19 is not installed (needed to build the library as the LTO-IR has it)")
    import triton

    sys.path.insert(0, str(ROOT / "triton-lib"))
    import build as device_build  # triton-lib/build.py

    bc, _ = device_build.build_library(tmp_path_factory.mktemp("lib-as-ltoir"), "libshmem_device.bc")
    knobs = triton.knobs.compilation
    before, knobs.always_compile = knobs.always_compile, True  # Triton's cache keys the bitcode by path
    try:
        return bench.ptx_without_gpu("put_block", triton_bitcode=str(bc))
    finally:
        knobs.always_compile = before


def test_the_shipped_triton_bitcode_keeps_the_wider_copy_loops(put_block_ptx, monkeypatch):
    import triton

    monkeypatch.setattr(triton.knobs.compilation, "always_compile", True)  # the cache keys the bitcode by path
    # 256 threads: copy_device.h's rshmemi_copy_unrolled_scaled carries loops of 16, 8 and 4
    # vectors at RSHMEM_COPY_UNROLL=16 and one of 4 at the default, each as many 16-byte
    # accesses per vector (global and generic, full and partial rounds).
    shipped = bench.ptx_summary(bench.ptx_without_gpu("put_block")["triton"])
    numba = bench.ptx_summary(put_block_ptx["numba"])
    assert shipped["vec16_loads"] == (16 + 8 + 4) // 4 * numba["vec16_loads"] > 0
    assert shipped["vec16_stores"] == (16 + 8 + 4) // 4 * numba["vec16_stores"] > 0


def test_put_block_loads_from_memory_stay_near_triton(put_block_ptx):
    numba, triton = (bench.ptx_summary(put_block_ptx[fe]) for fe in ("numba", "triton"))
    for fe in ("numba", "triton"):
        # Calls to the library's out-of-line rare paths stay (tests/ptx_calls.py).
        assert not foreign_calls(put_block_ptx[fe]), f"{fe}: the device library did not inline"
    assert numba["ld_memory"] <= LOAD_RATIO_LIMIT * triton["ld_memory"], (
        f"Numba's put_block loads from memory {numba['ld_memory']} times, Triton's {triton['ld_memory']}: "
        f"over {LOAD_RATIO_LIMIT}x (diff the two listings of benchmarks.numba_vs_triton.ptx_without_gpu)")
    # The copy loop (RSHMEM_COPY_UNROLL vectors per thread), global and generic, full and partial rounds.
    assert numba["vec16_loads"] == triton["vec16_loads"] > 0
    assert numba["vec16_stores"] == triton["vec16_stores"] > 0


def test_put_block_copy_loop_addresses_are_independent(put_block_ptx):
    for fe in ("numba", "triton"):
        assert bench.chained_vec16_loads(put_block_ptx[fe]) == 0, (
            f"{fe}: the copy loop computes each 16-byte load's address from the previous one's "
            "(see rshmemi_round_offsets in triton-lib/src/copy_device.h)")


# The loop NVVM made of the 4-vector round before the fix (abridged from its PTX).
CHAINED = """
$L__BB0_546:
	ld.global.L1::no_allocate.v2.u64 {%rd2211, %rd2212}, [%rd2689];
	add.s64 	%rd2216, %rd2689, %rd580;
	ld.global.L1::no_allocate.v2.u64 {%rd2214, %rd2215}, [%rd2216];
	add.s64 	%rd2219, %rd2216, %rd580;
	ld.global.L1::no_allocate.v2.u64 {%rd2217, %rd2218}, [%rd2219];
	add.s64 	%rd2222, %rd2219, %rd580;
	add.s64 	%rd2689, %rd2222, %rd580;
	ld.global.L1::no_allocate.v2.u64 {%rd2220, %rd2221}, [%rd2222];
	st.global.v2.u64 [%rd2690], {%rd2211, %rd2212};
	setp.lt.u64 	%p321, %rd2689, %rd569;
	@%p321 bra 	$L__BB0_546;
"""
# The same round with each address an add to the round's base %rd2700 (as both compilers emit it
# now: the offsets %rd581.. are computed before the loop).
INDEPENDENT = """
$L__BB0_546:
	add.s64 	%rd2213, %rd2700, %rd580;
	ld.global.L1::no_allocate.v2.u64 {%rd2211, %rd2212}, [%rd2213];
	add.s64 	%rd2216, %rd2700, %rd581;
	ld.global.L1::no_allocate.v2.u64 {%rd2214, %rd2215}, [%rd2216];
	add.s64 	%rd2219, %rd2700, %rd582;
	ld.global.L1::no_allocate.v2.u64 {%rd2217, %rd2218}, [%rd2219];
	add.s64 	%rd2222, %rd2700, %rd583;
	ld.global.L1::no_allocate.v2.u64 {%rd2220, %rd2221}, [%rd2222];
	st.global.v2.u64 [%rd2690], {%rd2211, %rd2212};
	add.s64 	%rd2700, %rd2700, %rd584;
	setp.lt.u64 	%p321, %rd2700, %rd569;
	@%p321 bra 	$L__BB0_546;
"""


def test_the_chain_check_sees_a_chain():
    assert bench.chained_vec16_loads(CHAINED) == 3
    assert bench.chained_vec16_loads(INDEPENDENT) == 0
    # Outside a loop (the branch leaves the block: a partial round, which runs once) a chain is
    # not counted.
    assert bench.chained_vec16_loads(CHAINED.replace("$L__BB0_546:", "$L__BB0_545:")) == 0


def test_before_first_barrier_counts_the_kernels_own_code_ahead_of_the_put():
    ptx = """
.visible .entry k(
	.param .u64 k_param_0
)
{
	.reg .b64 	%rd<9>;
	ld.param.u64 	%rd1, [k_param_0];
	mov.u32 	%r1, %ctaid.x;
	shr.s64 	%rd2, %rd1, 63;
	max.s64 	%rd3, %rd2, 0;
$L__BB0_1:
	barrier.sync 	0;
	add.s64 	%rd4, %rd3, 1;
	bar.sync 	0;
}
"""
    summary = bench.ptx_summary(ptx)
    assert summary["before_first_barrier"] == 3  # mov, shr, max: not the parameter load
    assert summary["instructions"] == 7 and summary["bar_sync"] == 2
    assert bench.ptx_summary(ptx.replace("barrier.sync", "add.s64").replace("bar.sync", "add.s64"))[
        "before_first_barrier"] == 6  # no barrier: everything after the parameter load
