"""What every job shares: sizes, statistics, the timer, the job context and the recorder.

Timing rule: GPU work is timed with CUDA events on the stream that runs it, after warm-up, and a
number is the median over many timed runs (p10 and p90 are kept too). Host-backend work (no GPU)
is timed with `time.perf_counter_ns` around each call, which completes before it returns.
"""
from __future__ import annotations

import json
import os
import statistics
import traceback
from dataclasses import dataclass, field
from pathlib import Path

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30


def pow2_sizes(lo: int, hi: int, step: int = 2) -> list[int]:
    """lo, lo*step, ... up to hi (inclusive)."""
    out, n = [], lo
    while n <= hi:
        out.append(n)
        n *= step
    return out


def fmt_size(n: int) -> str:
    """1024 -> '1 KiB', 3 << 20 -> '3 MiB', 12 -> '12 B'."""
    for unit, scale in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def summarize(values_us: list[float]) -> dict:
    """Median, p10, p90, min and count of timings in microseconds."""
    v = sorted(values_us)
    if not v:
        raise ValueError("no timings to summarize")

    def q(p: float) -> float:
        return v[min(len(v) - 1, max(0, round(p * (len(v) - 1))))]

    return {"median_us": statistics.median(v), "p10_us": q(0.1), "p90_us": q(0.9), "min_us": v[0], "reps": len(v)}


def gbps(nbytes: int, us: float) -> float:
    """Bytes per microsecond as GB/s (10^9 bytes per second)."""
    return nbytes / us / 1e3 if us > 0 else float("nan")


def short_error(e: BaseException) -> str:
    """`Type: message` plus the innermost frame, on one line; what a results table can show."""
    tb = traceback.extract_tb(e.__traceback__)
    where = f" (at {Path(tb[-1].filename).name}:{tb[-1].lineno})" if tb else ""
    msg = " ".join(str(e).split())
    if len(msg) > 600:
        msg = msg[:600] + " ..."
    return f"{type(e).__name__}: {msg}{where}"


class Timer:
    """Times a callable: CUDA events on the current stream, or the host clock.

    `each(fn)` records an event pair around every call and synchronizes once at the end, so the
    calls run back to back on the GPU; a pair measures the GPU time between its two events, which
    includes any gap while the CPU was still launching (what an eager caller gets).
    `batched(fn, k)` times `k` back-to-back calls per pair and divides by `k`.
    """

    def __init__(self, cuda: bool):
        self.cuda = cuda

    def _sync(self) -> None:
        if self.cuda:
            import torch

            torch.cuda.synchronize()

    def batched(self, fn, calls: int, rounds: int, warmup: int) -> list[float]:
        """Per-call microseconds of `rounds` rounds of `calls` calls each, after `warmup` calls."""
        import time

        for _ in range(warmup):
            fn()
        self._sync()
        if not self.cuda:
            out = []
            for _ in range(rounds):
                t0 = time.perf_counter_ns()
                for _ in range(calls):
                    fn()
                out.append((time.perf_counter_ns() - t0) / 1e3 / calls)
            return out
        import torch

        pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(rounds)]
        for start, end in pairs:
            start.record()
            for _ in range(calls):
                fn()
            end.record()
        torch.cuda.synchronize()
        return [s.elapsed_time(e) * 1e3 / calls for s, e in pairs]

    def each(self, fn, reps: int, warmup: int) -> list[float]:
        """Microseconds of each of `reps` calls, after `warmup` calls."""
        return self.batched(fn, 1, reps, warmup)


def reps_for(nbytes: int, quick: bool) -> tuple[int, int]:
    """(warm-up calls, timed calls) for a transfer of `nbytes`: fewer for large ones, which are
    stable and slow."""
    if nbytes >= 256 * MiB:
        return (2, 5) if quick else (3, 10)
    if nbytes >= 16 * MiB:
        return (3, 10) if quick else (5, 20)
    return (5, 20) if quick else (10, 50)


# ------------------------------------------------------------------------------- recorder


class Series:
    """One measured curve (or single value) of one implementation; see `Recorder.series`."""

    def __init__(self, rec: "Recorder", meta: dict):
        self.rec = rec
        self.meta = meta
        self.meta.setdefault("points", [])
        self.meta["error"] = None

    def point(self, **values) -> dict:
        """Adds one measured point (plain numbers / strings / bools) and saves the results."""
        self.meta["points"].append(values)
        self.rec.flush()
        return values

    def __enter__(self) -> "Series":
        self.rec.data["current"] = self.meta["name"]
        self.rec.data["series"].append(self.meta)
        self.rec.flush()
        return self

    def __exit__(self, typ, exc, tb) -> bool:
        mine = short_error(exc) if exc is not None else None
        # Every rank reports how the series went, so an error on one rank is recorded (and all
        # ranks agree that the series is over before the next one starts).
        try:
            verdicts = self.rec.ctx.gather(mine) if self.rec.ctx is not None else [mine]
            errors = [f"rank {r}: {v}" for r, v in enumerate(verdicts) if v]
        except Exception as e:  # noqa: BLE001 (the group itself broke: keep what this rank knows)
            errors = [f"rank {self.rec.rank}: {v}" for v in (mine, "could not compare ranks after the series: "
                                                               + short_error(e)) if v]
        if errors:
            self.meta["error"] = "; ".join(errors)
        self.rec.data["current"] = None
        self.rec.flush()
        return True  # an error ends this series only; the job goes on with the next one


class Recorder:
    """The results of one job, written to `path` (JSON) after every point, so that a job killed
    at its time limit still leaves what it measured. Only rank 0 writes."""

    def __init__(self, path: Path | None, job: str, rank: int):
        self.path = path
        self.rank = rank
        self.ctx = None  # set by the worker once the process group exists
        self.data = {"job": job, "status": "running", "error": None, "current": None, "series": [],
                     "notes": [], "env": {}}

    def series(self, suite: str, name: str, impl: str, *, x: str, y: str, better: str, **params) -> Series:
        """A context manager for one series: `with rec.series(...) as s: s.point(...)`.

        `impl` is "rshmem" or the baseline's name; `x` names the point key on the x axis
        ("bytes", "ctas", "op"), `y` the value key ("gbps", "busbw_gbps", "median_us", "s");
        `better` is "higher" or "lower". An exception inside ends the series with its error.
        """
        meta = {"suite": suite, "name": name, "impl": impl, "x": x, "y": y, "better": better, "params": params}
        return Series(self, meta)

    def note(self, text: str) -> None:
        """A remark shown under the job in the report (e.g. why a baseline is absent)."""
        if text not in self.data["notes"]:
            self.data["notes"].append(text)
            self.flush()

    def flush(self) -> None:
        if self.path is None or self.rank != 0:
            return
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1, default=str))
        os.replace(tmp, self.path)


# ------------------------------------------------------------------------------- context


@dataclass
class Ctx:
    """What a job function gets: who it is, the options, the recorder and group helpers."""

    job: str
    rank: int
    world: int
    local_rank: int  # this PE's GPU ordinal (rshmem's rule: rshmem.torch.device()); local rank on host
    quick: bool
    backend: str  # "cuda" or "host"
    rec: Recorder
    cpu_group: object = None  # a gloo group for barriers and object exchange
    options: dict = field(default_factory=dict)
    shared_gpu: bool = False  # several PEs on one GPU (RSHMEM_ALLOW_SHARED_GPU=1): timings mean nothing

    @property
    def cuda(self) -> bool:
        return self.backend == "cuda"

    @property
    def device(self):
        import torch

        return torch.device("cuda", self.local_rank) if self.cuda else torch.device("cpu")

    @property
    def peer(self) -> int:
        return (self.rank + 1) % self.world

    def sync(self) -> None:
        """Waits for this PE's GPU work (nothing on the host backend)."""
        if self.cuda:
            import torch

            torch.cuda.synchronize()

    def barrier(self) -> None:
        """Host barrier of all ranks over gloo (never touches NCCL or the GPU)."""
        import torch.distributed as dist

        dist.barrier(group=self.cpu_group)

    def gather(self, obj) -> list:
        """Every rank's `obj`, in rank order, over gloo."""
        import torch.distributed as dist

        out = [None] * self.world
        dist.all_gather_object(out, obj, group=self.cpu_group)
        return out

    def timer(self) -> Timer:
        return Timer(self.cuda)
