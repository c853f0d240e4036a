"""The device library's footprint in Triton kernels, without a GPU (tools/device_footprint.py).

For each sampled device function, one small Triton kernel (4 warps) linked with rshmem's bitcode
must keep its rare paths (proxy ring, debug-wait timeout, error record) as calls rather than
inline, and must match docs/device-footprint.md; each `_block` one must also compile with 32
warps (1024 threads) within 64 registers per thread; a few NVSHMEM kernels are measured too, to check that the page's
NVSHMEM columns are current (`tools/device_footprint.py --write` regenerates all of them).

Needs triton and clang-19 (as test_device_compile.py); the NVSHMEM part needs torch's
`nvidia-nvshmem-cu13` wheel and is skipped without it.
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytest.importorskip("triton", reason="triton is not installed")
if shutil.which("clang-19") is None:
    pytest.skip("clang-19 is not installed (needed to build libshmem_device.bc)", allow_module_level=True)

sys.path.insert(0, str(ROOT / "tools"))
import device_footprint as fp  # noqa: E402
from test_device_compile import bitcode  # noqa: E402,F401 - the session fixture (builds the bitcode if stale)

# NVSHMEM kernels measured here (each links a 31 MB bitcode): a thread-scope single element, a
# block-scope copy, a wait.
NVSHMEM_SAMPLE = ("g", "putmem_block", "signal_wait_until")


@pytest.fixture(scope="module")
def rshmem_results(bitcode):  # noqa: F811
    return fp.measure_all(Path(bitcode), None)


@pytest.fixture(scope="module")
def launch_results(bitcode):  # noqa: F811
    return fp.measure_launch(Path(bitcode))


def test_every_kernel_keeps_rare_paths_out_of_line_and_block_ones_fit_1024_threads(rshmem_results, launch_results):
    assert set(launch_results) == set(fp.BLOCK_ROWS) and len(fp.BLOCK_ROWS) >= 5
    assert fp.problems(rshmem_results, launch_results) == []


def test_the_triton_bitcode_keeps_the_16_vector_copy_loop(rshmem_results):
    # Triton kernels fit their registers to the launch (.reqntid), so the Triton bitcode keeps the
    # faster loop (triton-lib/build.py, TRITON_DEFINES): at 4 warps a block-scope put needs more
    # than a 1024-thread block of a kernel without launch bounds could give it.
    assert "RSHMEM_COPY_UNROLL=16" in fp.ROOT.joinpath("triton-lib", "build.py").read_text()
    assert rshmem_results[("putmem_block", "rshmem")].regs > fp.MAX_REGS_1024


def test_rare_paths_are_calls_in_the_sass_too(bitcode, monkeypatch):  # noqa: F811
    # ptxas could inline a .func again; the register counts above would then hide nothing, but
    # the common path of g would carry the proxy code. Its SASS must keep the CALL.
    import subprocess
    import tempfile

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    src = ASTSource(fn=fp._kernels(), signature=fp.SIGNATURE,
                    constexprs={"row": "g", "lib": "rshmem", "symbol": "", "kind": "g"})
    monkeypatch.setattr(triton.knobs.compilation, "always_compile", True)  # the cache keys the bitcode by path
    k = triton.compile(src, target=GPUTarget("cuda", fp.ARCH, 32),
                       options={"extern_libs": (("libshmem_device", bitcode),), "num_warps": fp.NUM_WARPS})
    with tempfile.TemporaryDirectory() as d:
        cubin = Path(d) / "k.cubin"
        cubin.write_bytes(k.asm["cubin"])
        sass = subprocess.run([fp._tool("cuobjdump"), "-sass", str(cubin)], capture_output=True, text=True,
                              check=True).stdout
    assert "CALL" in sass, "the rare paths of g were inlined by ptxas"


def test_the_page_states_what_rshmem_measures(rshmem_results, launch_results):
    assert fp.stale(rshmem_results, fp.PAGE.read_text(), launch_results) == []


def test_the_page_states_what_nvshmem_measures(bitcode):  # noqa: F811
    nv = fp.nvshmem_bitcode()
    if nv is None or not nv.is_file():
        pytest.skip("NVSHMEM's libnvshmem_device.bc is not installed (pip install nvidia-nvshmem-cu13)")
    results = {k: v for k, v in fp.measure_all(Path(bitcode), nv, NVSHMEM_SAMPLE).items() if k[1] == "nvshmem"}
    assert len(results) == len(NVSHMEM_SAMPLE)
    assert fp.stale(results, fp.PAGE.read_text()) == []


def test_problems_flags_a_kernel_over_the_limit_and_an_inlined_rare_path():
    # The check itself: made-up measurements. Registers at 4 warps are not limited (ptxas fits
    # them to the launch); a 1024-thread kernel over 64 is refused, as is a kernel with no call left.
    fake = {("p", "rshmem"): fp.Measure(regs=168, ptx=10, calls=1, callees=("_ZL12rshmemi_failjPKvmmm",)),
            ("g", "rshmem"): fp.Measure(regs=20, ptx=10, calls=0, callees=()),
            ("quiet", "rshmem"): fp.Measure(regs=20, ptx=10, calls=1, callees=("rshmem_quiet",))}
    launch = {"putmem_block": fp.Measure(regs=65, ptx=10, calls=2, callees=()),
              "getmem_block": fp.Measure(regs=64, ptx=10, calls=2, callees=())}
    found = fp.problems(fake, launch)
    assert any(s.startswith("putmem_block: 65 registers per thread at 32 warps") for s in found), found
    assert not any(s.startswith(("p:", "getmem_block:")) for s in found), found
    assert any(s.startswith("g: no call left") for s in found), found
    assert any(s.startswith("quiet: calls ['rshmem_quiet'] were not inlined") for s in found), found
    page = "| `putmem_block` | 64 | 0 |\n"
    assert fp.stale({}, page, {"putmem_block": fp.Measure(64, 1, 1, (), stack=8)})[0].startswith("putmem_block / rshmem")
