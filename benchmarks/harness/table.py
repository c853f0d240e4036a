"""The jobs: each measures one library (or baseline) in one suite, in its own processes.

A job is `module:function` called with a `common.Ctx` on every PE. `host_ok` jobs also run on
rshmem's host backend (no GPU: that is how CI exercises the harness); the others need CUDA and
are recorded as skipped without it. Jobs run in this order, the most important first, so a run
cut short by its time budget still has the headline numbers.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass

SUITES = ("put", "latency", "allgather", "init", "fused")
EXTRA_SUITES = ("selftest",)  # chosen by name only, never part of "all"


@dataclass(frozen=True)
class Job:
    """One job: `name` is '<suite>.<library>' (init jobs add '#<repeat>')."""

    name: str
    suite: str
    target: str  # "module:function" inside benchmarks.jobs
    host_ok: bool
    timeout_s: int  # full run; quick runs get half (but at least 60 s, or all of it if less)
    env: tuple = ()  # extra environment variables, (name, value) pairs
    nccl: bool = False  # uses NCCL between the PEs, which refuses two ranks on one GPU

    @property
    def library(self) -> str:
        """The library measured: the part of the name after the suite ('rshmem', 'nccl', ...)."""
        return self.name.split(".", 1)[1].split("#")[0]

    def env_for(self) -> dict:
        """The job's extra environment, minus the variables the caller has set (theirs win)."""
        import os

        return {k: v for k, v in self.env if k not in os.environ}

    def function(self):
        """The job's entry point (imports its module)."""
        mod, fn = self.target.split(":")
        return getattr(importlib.import_module(f"benchmarks.jobs.{mod}"), fn)

    def time_limit(self, quick: bool) -> int:
        return max(self.timeout_s // 2, min(self.timeout_s, 60)) if quick else self.timeout_s


# NVSHMEM's symmetric heap must hold a 1 GiB source and a 1 GiB destination (2 GiB per rank for
# the all-gather output); its default is 1 GiB. Only the jobs moving large buffers set it (the
# init and latency jobs keep NVSHMEM's default). A value the caller exported wins.
_NVSHMEM_ENV = (("NVSHMEM_SYMMETRIC_SIZE", "8G"),)

_MAIN = (
    Job("put.rshmem", "put", "put_rshmem:run", True, 240),
    Job("put.nvshmem", "put", "put_nvshmem:run", False, 240, _NVSHMEM_ENV),
    Job("put.torch", "put", "put_torch:run", False, 150),
    Job("latency.rshmem", "latency", "latency_rshmem:run", True, 150),
    Job("latency.nvshmem", "latency", "latency_nvshmem:run", False, 150),
    Job("latency.torch", "latency", "latency_torch:run", False, 120),
    Job("allgather.rshmem", "allgather", "allgather_rshmem:run", True, 240),
    Job("allgather.nccl", "allgather", "allgather_nccl:run", False, 180, nccl=True),
    Job("allgather.nvshmem", "allgather", "allgather_nvshmem:run", False, 180, _NVSHMEM_ENV),
    Job("allgather.torch", "allgather", "allgather_torch:run", False, 180),
    # The fused ops (rshmem.ops) beside NCCL + cuBLAS and torch's fused ops. The rshmem job tunes
    # and compiles its kernels on the first call of each shape, inside its time.
    Job("fused.rshmem", "fused", "fused_rshmem:run", True, 540),
    Job("fused.nccl", "fused", "fused_nccl:run", False, 240, nccl=True),
    Job("fused.torch", "fused", "fused_torch:run", False, 240),
)

_SELFTEST = (
    Job("selftest.ok", "selftest", "selftest:ok", True, 60),
    Job("selftest.series_error", "selftest", "selftest:series_error", True, 60),
    Job("selftest.crash", "selftest", "selftest:crash", True, 60),
    Job("selftest.hang", "selftest", "selftest:hang", True, 15),
)

_INIT = (
    ("init.rshmem", "init_jobs:rshmem", True, ()),
    ("init.nvshmem", "init_jobs:nvshmem", False, ()),  # NVSHMEM's default heap: a bigger one costs init time
    ("init.nccl", "init_jobs:nccl", False, ()),
)


def all_jobs(init_repeats: int) -> list[Job]:
    """Every job, in run order; each init job appears `init_repeats` times (fresh processes each)."""
    jobs = list(_MAIN) + list(_SELFTEST)
    for i in range(init_repeats):
        for name, target, host_ok, env in _INIT:
            jobs.append(Job(f"{name}#{i + 1}", "init", target, host_ok, 120, env, nccl=name == "init.nccl"))
    return jobs


def find(name: str, init_repeats: int = 3) -> Job:
    """The job called `name` (KeyError naming the known ones otherwise)."""
    for j in all_jobs(max(init_repeats, 9)):
        if j.name == name:
            return j
    raise KeyError(f"no job {name!r}; known: {', '.join(j.name for j in all_jobs(1))} (init jobs take #N)")


def select(suite: str, only: list[str] | None, init_repeats: int) -> list[Job]:
    """Jobs of `suite` ('all' or a comma list of suites), narrowed to the names or name prefixes
    in `only` when given."""
    suites = SUITES if suite == "all" else tuple(s.strip() for s in suite.split(","))
    unknown = [s for s in suites if s not in SUITES + EXTRA_SUITES]
    if unknown:
        raise ValueError(f"unknown suite(s) {unknown}; choose from all, {', '.join(SUITES + EXTRA_SUITES)}")
    jobs = [j for j in all_jobs(init_repeats) if j.suite in suites]
    if only:
        jobs = [j for j in jobs if any(j.name == o or j.name.startswith(o + "#") or j.name.startswith(o + ".")
                                       for o in only)]
    return jobs
