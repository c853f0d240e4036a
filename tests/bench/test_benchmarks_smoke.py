"""The benchmark harness (benchmarks/) without a GPU: it never measures speed here, it checks the
machinery that must work the first time it runs on the GPU machine.

- The report turns results into tables with the right ratios (synthetic results, no processes).
- `benchmarks.run` on rshmem's host backend: the host-capable jobs run in their own processes
  and record verified points; the CUDA-only jobs are recorded as skipped; results.md is written.
- The selftest suite: a series failing on one rank, a PE that dies and a PE that hangs are each
  recorded as such, and the run goes on to the next job.
- Every benchmark kernel (rshmem's, and NVSHMEM's when its bitcode is installed) compiles to an
  sm_90 cubin.

Run: `pytest tests/bench/test_benchmarks_smoke.py` (one process: these tests start their own).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.reporting import report  # noqa: E402
from benchmarks.harness.common import GiB, KiB, MiB  # noqa: E402

pytestmark = pytest.mark.single


def _native_available() -> bool:
    try:
        import rshmem._native  # noqa: F401
    except ImportError:
        return False
    return True


needs_runtime = pytest.mark.skipif(not _native_available(), reason="rshmem._native is not built")


def _run_bench(tmp_path: Path, *args: str, timeout: float = 400) -> dict:
    """Runs `python -m benchmarks.run` on the host backend into tmp_path; returns results.json."""
    import importlib.util

    paths = [str(ROOT), str(Path(importlib.util.find_spec("rshmem").origin).parent.parent)]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(paths + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    out = tmp_path / "bench"
    r = subprocess.run([sys.executable, "-m", "benchmarks.run", "--backend", "host", "--nproc", "2", "--quick",
                        "--out", str(out), *args], cwd=str(ROOT), env=env, capture_output=True, text=True,
                       timeout=timeout)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (out / "results.md").is_file()
    res = json.loads((out / "results.json").read_text())
    res["_stdout"] = r.stdout
    return res


# ------------------------------------------------------------------------------ report


def _series(suite, name, impl, points, x="bytes", y="gbps", better="higher", **params):
    return {"suite": suite, "name": name, "impl": impl, "x": x, "y": y, "better": better, "params": params,
            "points": points, "error": None}


def _synthetic() -> dict:
    """Made-up numbers with known ratios (never results of a run)."""
    put = [
        _series("put", "putmem_block 8 CTAs x 16 warps", "rshmem",
                [{"bytes": MiB, "gbps": 200.0, "median_us": 5.0, "verified": True},
                 {"bytes": GiB, "gbps": 400.0, "median_us": 2600.0, "verified": False}], kind="put_bw",
                op="SM put, <= 8 CTAs"),
        _series("put", "nvshmemx_putmem_block 8 CTAs x 16 warps", "nvshmem",
                [{"bytes": MiB, "gbps": 100.0, "median_us": 10.0, "verified": True},
                 {"bytes": GiB, "gbps": 300.0, "median_us": 3500.0, "verified": True}], kind="put_bw",
                op="SM put, <= 8 CTAs"),
        _series("put", "putmem_block @ 256 MiB, 16 warps", "rshmem",
                [{"ctas": 8, "warps": 16, "gbps": 330.0, "verified": True}], x="ctas", kind="cta_sweep", warps=16),
        _series("put", "nvshmemx_putmem_block @ 256 MiB, 16 warps", "nvshmem",
                [{"ctas": 8, "warps": 16, "gbps": 220.0, "verified": True}], x="ctas", kind="cta_sweep", warps=16),
    ]
    lat = [
        _series("latency", "ping rshmem", "rshmem", [{"op": "ping", "median_us": 1.0}], x="op", y="median_us",
                better="lower", op="ping"),
        _series("latency", "ping nvshmem", "nvshmem", [{"op": "ping", "median_us": 2.0}], x="op", y="median_us",
                better="lower", op="ping"),
    ]
    ag = [
        _series("allgather", "push", "rshmem", [{"bytes": 16 * MiB, "busbw_gbps": 350.0, "median_us": 48.0,
                                                 "verified": True},
                                                {"bytes": KiB, "busbw_gbps": 0.2, "median_us": 5.0, "verified": True}],
                y="busbw_gbps", kind="ag_bw"),
        _series("allgather", "NCCL all_gather_into_tensor", "nccl",
                [{"bytes": 16 * MiB, "busbw_gbps": 175.0, "median_us": 96.0, "verified": True},
                 {"bytes": KiB, "busbw_gbps": 0.03, "median_us": 33.0, "verified": True}], y="busbw_gbps",
                kind="ag_bw"),
        # Graph series pair with graph series only: an eager baseline never faces a graph.
        _series("allgather", "fcollect, CUDA graph", "rshmem",
                [{"bytes": KiB, "busbw_gbps": 0.3, "median_us": 4.0, "verified": True}], y="busbw_gbps",
                kind="ag_bw", launch="graph"),
        _series("allgather", "NCCL, CUDA graph", "nccl",
                [{"bytes": KiB, "busbw_gbps": 0.1, "median_us": 12.0, "verified": True}], y="busbw_gbps",
                kind="ag_bw", launch="graph"),
    ]
    init = [_series("init", "a", "rshmem", [{"op": "startup", "s": v}], x="op", y="s", better="lower", op="startup")
            for v in (0.5, 0.7, 0.6)]
    init.append(_series("init", "b", "nvshmem", [{"op": "startup", "s": 3.0}], x="op", y="s", better="lower",
                        op="startup"))
    return {"meta": {"command": "synthetic"},
            "jobs": {"put.x": {"status": "ok", "series": put}, "latency.x": {"status": "ok", "series": lat},
                     "allgather.x": {"status": "ok", "series": ag}, "init.x": {"status": "ok", "series": init}}}


def test_report_ratios_follow_the_better_direction():
    md = report.markdown(_synthetic())
    # bandwidth: rshmem / NVSHMEM at 1 MiB = 200 / 100
    assert "| 1 MiB | 200 | 100 | 2.00x |" in md
    # an unverified point is marked and left out of the ratio
    assert "| 1 GiB | 400! | 300 | — |" in md
    # CTA sweep ratio 330 / 220; latency ratio nvshmem / rshmem time = 2 / 1
    assert "1.50x" in md
    assert "| ping | 1.00 | 2.00 | 2.00x |" in md
    # all-gather: bandwidth 350 / 175 and time 33 / 5
    assert "2.00x" in md and "6.60x" in md
    # graph against graph (12 / 4), and no table puts a graph beside an eager series
    assert "| 1 KiB | 4.00 | 12.0 | 3.00x |" in md
    assert "8.25x" not in md and "1.00x |" not in md.split("vs each baseline** (median_us)")[-1].split("##")[0]
    for block in md.split("**rshmem `")[1:]:
        head = block.split("\n\n")[1].splitlines()[0]
        assert ("CUDA graph" in head.split("|")[2]) == ("CUDA graph" in head.split("|")[3]), head
    # repeated init runs merge into a median (0.6 of three), and 3.0 / 0.6 = 5x
    assert "0.60 (n=3)" in md and "5.00x" in md


def test_report_targets_use_measured_values_only():
    md = report.markdown(_synthetic())
    assert "| all-gather bus bandwidth, 16 MiB per rank | >= 1.4x NCCL | 350 vs 175 GB/s = 2.00x | met |" in md
    assert "| all-gather time, 1 KiB per rank (eager calls) | <= 10 us | 5.00 us (NCCL 33.0 us) | met |" in md
    assert "| all-gather time, 1 KiB per rank (CUDA graph) | <= 10 us | 4.00 us (NCCL 12.0 us) | met |" in md
    assert "| putmem_signal_block 8 B ping-pong, half round trip | <= 1.5 us | — us (NVSHMEM — us) | — |" in md
    assert "| putmem_block 256 MiB, <= 8 CTAs | >= 300 GB/s | 330 GB/s (NVSHMEM 220) | met |" in md


def test_plots_are_written(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib is not installed")
    from benchmarks.reporting import plots

    made = {p.name for p in plots.write(_synthetic(), tmp_path)}
    assert {"put_bandwidth.png", "put_cta_sweep.png", "latency.png", "allgather_busbw.png"} <= made


def _fused_synthetic() -> dict:
    """Made-up fused-suite numbers with known floor, hidden share and ratios."""
    def gemm(kind, name, impl, us, tflops=None, op=None):
        pt = {"shape": "4096x8192x5120", "median_us": us, "verified": True}
        if tflops is not None:
            pt["tflops"] = tflops
        return _series("fused", name, impl, [pt], x="shape", y="median_us", better="lower", kind=kind,
                       op=op or name)

    def ar(name, impl, us, bw):
        return _series("fused", name, impl, [{"bytes": KiB, "median_us": us, "busbw_gbps": bw, "verified": True}],
                       y="median_us", better="lower", kind="ar", op=name)

    series = [
        gemm("ag_fused", "AllGather+GEMM (auto)", "rshmem", 1100.0),
        gemm("ag_gemm_alone", "consumer GEMM alone (signals set)", "rshmem", 1000.0, tflops=700.0),
        gemm("ag_gemm_alone", "cuBLAS torch.matmul alone", "cublas", 1050.0, tflops=666.0),
        gemm("ag_comm", "all-gather alone", "rshmem", 200.0),
        gemm("ag_fused", "NCCL all_gather_into_tensor + cuBLAS", "nccl", 1320.0),
        gemm("ag_fused", "torch symm_mem fused_all_gather_matmul", "torch", 1210.0),
        ar("all_reduce auto", "rshmem", 8.0, 0.1), ar("NCCL all_reduce", "nccl", 40.0, 0.02),
        ar("torch symm_mem one_shot_all_reduce", "torch", 10.0, 0.08),
    ]
    return {"meta": {"command": "synthetic"}, "jobs": {"fused.x": {"status": "ok", "series": series},
                                                       "fused.nccl": {"status": "ok", "series": [],
                                                                      "not_runnable": "NCCL refuses it"}}}


def test_report_fused_section_floor_hidden_share_and_targets():
    md = report.markdown(_fused_synthetic())
    # floor = max(1000, 200) us; fused / floor = 1.10; hidden = (1000 + 200 - 1100) / 200 = 50%
    assert "| 4096x8192x5120 | 1.10 | — | — | 1.00 (700) | 1.05 (666) | 1.05x | 0.20 | 1.00 | 1.10x | 50% |" in md
    assert "| 1.32 | 1.20x | 1.21 | 1.10x |" in md
    assert "| AllGather+GEMM 4096x8192x5120 hidden share | >= 90% | 50% | not met |" in md
    assert "| AllGather+GEMM 4096x8192x5120 GEMM alone vs cuBLAS | >= 1.0x | 700 vs 666 TFLOP/s = 1.05x | met |" in md
    assert "| all-reduce 1 KiB vs NCCL | <= 0.5x NCCL's time | 8.00 vs 40.0 us | met |" in md
    assert "| all-reduce 1 KiB vs torch one-shot | <= torch's time | 8.00 vs 10.0 us | met |" in md
    assert "| fused.nccl | not runnable |" in md


# ------------------------------------------------------------------------------ runs


@needs_runtime
def test_host_backend_run_measures_and_skips(tmp_path):
    res = _run_bench(tmp_path, "--suite", "put,init", "--init-repeats", "1")
    jobs = res["jobs"]
    assert jobs["put.rshmem"]["status"] == "ok", jobs["put.rshmem"]
    series = {s["name"]: s for s in jobs["put.rshmem"]["series"]}
    on_stream = series["putmem_on_stream"]
    assert on_stream["error"] is None
    assert on_stream["points"] and all(p["verified"] and p["median_us"] > 0 for p in on_stream["points"])
    assert jobs["init.rshmem#1"]["status"] == "ok"
    assert jobs["init.rshmem#1"]["series"][0]["points"][0]["s"] > 0
    for name in ("put.nvshmem", "put.torch", "init.nvshmem#1", "init.nccl#1"):
        assert jobs[name]["status"] == "skipped", name
    assert res["meta"]["nvls_env"]["NCCL_NVLS_ENABLE"] == "0"


@needs_runtime
def test_fused_suite_on_the_host_backend(tmp_path):
    jobs = _run_bench(tmp_path, "--suite", "fused")["jobs"]
    assert jobs["fused.rshmem"]["status"] == "ok", jobs["fused.rshmem"]
    series = jobs["fused.rshmem"]["series"]
    kinds = {s["params"]["kind"] for s in series}
    assert {"ag_fused", "rs_fused", "ar"} <= kinds
    assert all(s["error"] is None for s in series), [s["error"] for s in series if s["error"]]
    assert all(p["verified"] and p["median_us"] > 0 for s in series for p in s["points"])
    for name in ("fused.nccl", "fused.torch"):
        assert jobs[name]["status"] == "skipped", name


@needs_runtime
def test_selftest_suite_records_every_outcome(tmp_path):
    res = _run_bench(tmp_path, "--suite", "selftest")
    jobs = res["jobs"]
    # The driver prints a line per job and one per finished series, while the job runs.
    lines = res["_stdout"].splitlines()
    assert any(line.split()[:2] == ["selftest.ok", "running"] for line in lines), res["_stdout"]
    assert any(line.split()[:3] == ["selftest.ok", "series", "1:"] for line in lines), res["_stdout"]
    assert any("series 1:" in line and "deliberate failure" in line for line in lines), res["_stdout"]
    assert jobs["selftest.ok"]["status"] == "ok"
    assert len(jobs["selftest.ok"]["series"][0]["points"]) == 2
    failing, after = jobs["selftest.series_error"]["series"]
    assert "rank 1: ValueError: deliberate failure" in failing["error"]
    assert after["error"] is None and after["points"]
    assert jobs["selftest.crash"]["status"] == "error"
    assert "PE 1 exited with 3" in jobs["selftest.crash"]["error"]
    assert jobs["selftest.hang"]["status"] == "timeout"
    assert "never ends" in jobs["selftest.hang"]["error"]


# ------------------------------------------------------------------------------ kernels


def test_rshmem_benchmark_kernels_compile_for_sm90():
    pytest.importorskip("triton", reason="triton is not installed")
    import rshmem.triton as rt

    try:
        rt.bitcode_path()
    except FileNotFoundError as e:
        pytest.skip(str(e))
    from benchmarks.kernels import compile_check

    rows = compile_check.check_rshmem()
    bad = [r for r in rows if not r["ok"]]
    assert not bad, bad
    # rshmem's calls are all inlined into the kernels (no call left in the PTX but to its rare paths)
    assert all(r["calls_left"] == 0 for r in rows), rows


def test_nvshmem_benchmark_kernels_compile_for_sm90():
    pytest.importorskip("triton", reason="triton is not installed")
    from benchmarks.kernels import compile_check

    try:
        import torch.utils._triton as tu

        tu_has = tu.has_triton
        rows = compile_check.check_nvshmem()
    finally:
        tu.has_triton = tu_has
    if len(rows) == 1 and "not found" in (rows[0].get("error") or ""):
        pytest.skip(rows[0]["error"])
    bad = [r for r in rows if not r["ok"]]
    assert not bad, bad


def test_shared_gpu_runs_report_baselines_that_cannot_share_as_not_runnable():
    """With PEs sharing one GPU, NCCL jobs do not start and other baselines that fail
    there are 'not runnable', while a failing rshmem job stays a failure."""
    from benchmarks.harness import table
    from benchmarks.run import NOT_RUNNABLE, SHARED_NCCL, shared_gpu_verdict, skip_reason

    nccl, nvshmem, mine = table.find("allgather.nccl"), table.find("allgather.nvshmem"), table.find("put.rshmem")
    assert skip_reason(nccl, "cuda", True, 500, 570) == SHARED_NCCL
    assert skip_reason(table.find("init.nccl#1"), "cuda", True, 500, 570) == SHARED_NCCL
    assert skip_reason(nccl, "cuda", False, 500, 570) is None
    assert skip_reason(nvshmem, "cuda", True, 500, 570) is None
    assert shared_gpu_verdict(nccl, {"status": "skipped", "error": SHARED_NCCL}, True)["status"] == NOT_RUNNABLE
    assert shared_gpu_verdict(nvshmem, {"status": "error", "error": "x"}, True)["status"] == NOT_RUNNABLE
    assert shared_gpu_verdict(nvshmem, {"status": "error", "error": "x"}, False)["status"] == "error"
    assert shared_gpu_verdict(mine, {"status": "error", "error": "x"}, True)["status"] == "error"
    assert shared_gpu_verdict(mine, {"status": "ok"}, True)["status"] == "ok"
