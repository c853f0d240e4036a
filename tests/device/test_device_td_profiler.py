"""rshmem.compat.td_profiler, the counterpart of Triton-distributed's in-kernel profiler: a plain
``@triton.jit`` kernel written as theirs are (``Profiler.create`` / ``profiler.record``) compiles
for sm_90 on stock Triton, to nothing when profiling is off; the host side decodes a buffer in
the documented layout. Compile-only: no GPU.
"""
from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")
triton = pytest.importorskip("triton", reason="triton is not installed")
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402
import triton.language as tl  # noqa: E402

from rshmem.compat.td_profiler import (EMPTY_VALUE, Profiler, export_to_perfetto_trace,  # noqa: E402
                                       parse_to_tracks)
from rshmem.triton.language import tid  # noqa: E402

pytestmark = pytest.mark.single


@pytest.fixture(autouse=True)
def always_compile(monkeypatch):
    monkeypatch.setattr(triton.knobs.compilation, "always_compile", True)


@triton.jit
def profiled_copy_kernel(x, y, n, profiler_buf, BLOCK: tl.constexpr, ENABLE_PROFILING: tl.constexpr):
    profiler = Profiler.create(profiler_buffer=profiler_buf, group_id=0, num_groups=1, is_leader=(tid(0) == 0),
                               ENABLE_PROFILING=ENABLE_PROFILING)
    profiler = profiler.record(is_start=True, task_type=0)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + offs, tl.load(x + offs, mask=offs < n), mask=offs < n)
    profiler = profiler.record(is_start=False, task_type=0)
    profiler = profiler.record(is_start=True, task_type=1)
    profiler = profiler.record(is_start=False, task_type=1)


def _ptx(enable: bool) -> str:
    sig = {"x": "*fp32", "y": "*fp32", "n": "i32", "profiler_buf": "*u64", "BLOCK": "constexpr",
           "ENABLE_PROFILING": "constexpr"}
    src = ASTSource(fn=profiled_copy_kernel, signature=sig, constexprs={"BLOCK": 256, "ENABLE_PROFILING": enable})
    k = triton.compile(src, target=GPUTarget("cuda", 90, 32))
    assert k.asm["cubin"]
    return k.asm["ptx"]


def test_profiled_kernel_compiles_and_records_timestamps():
    ptx = _ptx(True)
    assert ptx.count("%globaltimer_lo") == 4 and "%smid" in ptx


def test_profiling_off_compiles_to_nothing():
    ptx = _ptx(False)
    assert "globaltimer" not in ptx and "%smid" not in ptx


def _entry(program: int, task: int, start: bool, t: int) -> int:
    tag = (program << 12) | (task << 1) | int(start)
    return (t << 32) | tag


def test_parse_and_export(tmp_path):
    # 2 programs, 1 group: header, (program, sm) pairs, then records k * 2 + program.
    slots = [2 | (1 << 32), 0 | (5 << 32), 1 | (9 << 32),
             _entry(0, 0, True, 1000), _entry(1, 0, True, 1500),
             _entry(0, 0, False, 4000), _entry(1, 0, False, 2500),
             _entry(0, 1, True, 4100), EMPTY_VALUE,
             _entry(0, 1, False, 4600), EMPTY_VALUE, EMPTY_VALUE]
    buf = torch.tensor([s - (1 << 64) if s >= 1 << 63 else s for s in slots], dtype=torch.int64).view(torch.uint64)
    tracks = parse_to_tracks(buf)
    assert tracks[(0, 0)] == {"sm": 5, "spans": [(0, 0, 3000), (1, 3100, 3600)]}
    assert tracks[(1, 0)] == {"sm": 9, "spans": [(0, 500, 1500)]}
    path = export_to_perfetto_trace(buf, ["copy", "flush"], str(tmp_path / "trace"))
    events = json.loads(path.read_text())["traceEvents"]
    assert path.name == "trace.json" and len(events) == 3
    assert {"name": "copy", "ph": "X", "ts": 0.0, "dur": 3.0, "pid": "program 0 (SM 5)", "tid": "group 0"} in events
    with pytest.raises(TypeError, match="uint64"):
        parse_to_tracks(torch.zeros(4, dtype=torch.int32))
