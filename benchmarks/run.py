"""The benchmarks' entry point (run from the repository root):

    torchrun --nproc-per-node 2 -m benchmarks.run --suite all|put|latency|allgather|init [--quick] --out DIR
    python -m benchmarks.run --nproc 2 ...            # the same without torchrun
    python -m benchmarks.run --report-only --out DIR  # rebuild results.md and the plots

Under torchrun, rank 0 drives and the other ranks exit at once: every job (see `jobs.py`) runs in
a fresh group of `--nproc` processes started by `launch.py`, with a time limit, so a crash, a
hang or a process-wide setting of one library cannot affect the others. Results go to
`DIR/results.json` (merged with an existing one unless `--fresh`: a suite run replaces only its
own jobs), `DIR/results.md` and `DIR/*.png`; per-job data and logs to `DIR/jobs/` and `DIR/logs/`.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from benchmarks.harness import env

env.apply()  # before anything else is imported that could initialise a library

from benchmarks.harness import table as job_table  # noqa: E402
from benchmarks.harness import launch  # noqa: E402
from benchmarks.reporting import report  # noqa: E402

_ENV_PREFIXES = ("NCCL_", "NVSHMEM_", "RSHMEM_", "TORCH_SYMM", "TORCH_NCCL", "CUDA_VISIBLE", "TRITON_")


def _invocation() -> str:
    args = " ".join(sys.argv[1:])
    if "TORCHELASTIC_RUN_ID" in os.environ or "LOCAL_WORLD_SIZE" in os.environ:
        return f"torchrun --nproc-per-node {os.environ.get('LOCAL_WORLD_SIZE', '?')} -m benchmarks.run {args}"
    return f"{Path(sys.executable).name} -m benchmarks.run {args}"


NOT_RUNNABLE = "not runnable (shared GPU)"
# A baseline library may hang rather than fail with several ranks on one GPU: its jobs get this
# long there (they run quick sizes; nothing they time means anything on a shared GPU anyway).
SHARED_BASELINE_LIMIT_S = 60.0
SHARED_NCCL = ("not runnable with several PEs on one GPU: NCCL refuses two ranks on one device "
               "(ncclInvalidUsage); run on a GPU per PE")


def skip_reason(job, backend: str, shared: bool, left_s: float, budget_s: float) -> str | None:
    """Why `job` does not run in this run, or None."""
    if backend == "host" and not job.host_ok:
        return "needs CUDA (host backend run)"
    if shared and job.nccl:
        return SHARED_NCCL
    if left_s < 30:
        return f"time budget: {left_s:.0f} s left of {budget_s:.0f} s"
    return None


def shared_gpu_verdict(job, rec: dict, shared: bool) -> dict:
    """On a shared GPU, a baseline that cannot run with several ranks on one GPU (NCCL, and any
    other library's job that failed there) is recorded as not runnable, not as a failure of the
    run; rshmem's own jobs must pass there like anywhere."""
    if shared and (rec.get("error") == SHARED_NCCL or (rec["status"] != "ok" and job.library != "rshmem")):
        rec["status"] = NOT_RUNNABLE
    return rec


def _gpu_count() -> int:
    try:
        import torch

        return torch.cuda.device_count()
    except Exception:  # noqa: BLE001 (no torch or no driver: no GPU)
        return 0


def _load(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _job_record(job, launched: dict | None, worker: dict, skipped: str | None) -> dict:
    """One job's entry of results.json: the worker's data plus how the launch went."""
    rec = dict(worker) if worker else {"series": [], "notes": []}
    rec.update(job=job.name, suite=job.suite)
    if skipped:
        rec.update(status="skipped", error=skipped)
        return rec
    rec["launch"] = {k: launched[k] for k in ("status", "returncodes", "wall_s", "logs")}
    wstatus = worker.get("status") if worker else None
    if launched["status"] == "timeout":
        during = worker.get("current") if worker else None
        rec["status"] = "timeout"
        rec["error"] = f"killed at its time limit after {launched['wall_s']} s" + (
            f", during series '{during}'" if during else "")
    elif wstatus == "ok" and launched["status"] == "ok":
        rec["status"] = "ok"
    else:
        rec["status"] = "error"
        codes = launched["returncodes"]
        died = ", ".join(f"PE {r} exited with {c}" for r, c in enumerate(codes) if c != 0)
        rec["error"] = "; ".join(e for e in ((worker.get("error") if worker else None), died or None,
                                            None if worker else "no results were written") if e)
    if rec["status"] != "ok":
        rec["log_tail"] = launched.get("log_tail", "")
    return rec


class SeriesProgress:
    """Prints a line per finished series of a running job, read from the JSON its rank 0 writes
    after every point (`common.Recorder`): its name, implementation, points, time into the job."""

    def __init__(self, job: str, path: Path, started: float):
        self.job, self.path, self.started, self.reported = job, path, started, 0

    def __call__(self) -> None:
        data = _load(self.path)
        if not data:
            return
        series = data.get("series", [])
        done = len(series) - (1 if data.get("current") and data.get("status") == "running" else 0)
        for i in range(self.reported, max(done, self.reported)):
            s = series[i]
            err = f", error: {s['error']}" if s.get("error") else ""
            print(f"    {self.job:<18} series {i + 1}: {s.get('name')} ({s.get('impl')}), "
                  f"{len(s.get('points', []))} points{err} [{time.monotonic() - self.started:.0f} s]", flush=True)
        self.reported = max(done, self.reported)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="benchmarks.run", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", default="all", help="all, or a comma list of: " + ", ".join(job_table.SUITES)
                    + " (selftest: the harness's own checks, never part of all)")
    ap.add_argument("--quick", action="store_true", help="fewer sizes and repetitions")
    ap.add_argument("--out", default="bench-out", help="output folder (default bench-out)")
    ap.add_argument("--backend", choices=("auto", "cuda", "host"), default="auto",
                    help="cuda: one GPU per PE, or PEs sharing fewer GPUs (RSHMEM_ALLOW_SHARED_GPU=1 is set; "
                         "timings then mean nothing for speed, and NCCL baselines cannot run); host runs rshmem's "
                         "host backend (no GPU; the CUDA-only jobs are skipped). auto: cuda when a GPU is present")
    ap.add_argument("--nproc", type=int, default=None, help="PEs per job (default: torchrun's WORLD_SIZE, else 2)")
    ap.add_argument("--jobs", default=None, help="comma list of job names or prefixes (e.g. put.rshmem,init.nccl)")
    ap.add_argument("--time-budget-s", type=float, default=570.0,
                    help="stop starting jobs when less than this is left of the whole run (default 570)")
    ap.add_argument("--init-repeats", type=int, default=None, help="fresh-process repeats of each init job "
                    "(default 3, quick 1)")
    ap.add_argument("--fresh", action="store_true", help="do not merge with an existing results.json")
    ap.add_argument("--report-only", action="store_true", help="rebuild results.md and plots from results.json")
    args = ap.parse_args(argv)

    if "RANK" in os.environ and int(os.environ["RANK"]) != 0:
        print(f"benchmarks.run: rank {os.environ['RANK']} leaves the driving to rank 0", flush=True)
        return 0

    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    path = out / "results.json"
    if args.report_only:
        written = report.write_all(_load(path), out)
        print("\n".join(written))
        return 0

    t_start = time.monotonic()
    nproc = args.nproc or int(os.environ.get("WORLD_SIZE", "2"))
    gpus = _gpu_count()
    backend = args.backend if args.backend != "auto" else ("cuda" if gpus >= 1 else "host")
    shared = backend == "cuda" and 0 < gpus < nproc
    if shared:
        os.environ["RSHMEM_ALLOW_SHARED_GPU"] = "1"  # every job's processes inherit it (launch.child_env)
    repeats = args.init_repeats if args.init_repeats is not None else (1 if args.quick else 3)
    only = [s.strip() for s in args.jobs.split(",")] if args.jobs else None
    selected = job_table.select(args.suite, only, repeats)

    results = {} if args.fresh else _load(path)
    results.setdefault("jobs", {})
    results["meta"] = {**env.machine_info(), "command": _invocation(), "argv": sys.argv[1:], "backend": backend,
                       "nproc": nproc, "gpus_visible": gpus, "shared_gpu": shared, "quick": args.quick,
                       "env": {k: v for k, v in sorted(os.environ.items()) if k.startswith(_ENV_PREFIXES)}}
    if shared:
        print(f"benchmarks.run: {nproc} PEs share {gpus} GPU(s) (RSHMEM_ALLOW_SHARED_GPU=1): results are checked, "
              "but timings mean nothing for speed; NCCL baselines cannot run (NCCL refuses two ranks on one GPU)",
              flush=True)
    elif backend == "cuda" and gpus == 0:
        print("benchmarks.run: --backend cuda with no GPU visible; jobs will fail", flush=True)

    def save() -> None:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(results, indent=1, default=str))
        os.replace(tmp, path)

    print(f"benchmarks.run: {len(selected)} job(s), backend {backend}, {nproc} PEs, out {out}", flush=True)
    for job in selected:
        left = args.time_budget_s - (time.monotonic() - t_start)
        skipped = skip_reason(job, backend, shared, left, args.time_budget_s)
        launched, worker = None, {}
        if skipped is None:
            limit = max(10.0, min(job.time_limit(args.quick), left - 10))
            if shared and job.library != "rshmem":
                limit = min(limit, SHARED_BASELINE_LIMIT_S)  # one that cannot share a GPU may hang there
            argv_w = ["--job", job.name, "--out", str(out), "--backend", backend] + (["--quick"] if args.quick else [])
            jpath = out / "jobs" / f"{job.name}.json"
            if jpath.exists():
                jpath.unlink()
            print(f"  {job.name:<20} running (limit {limit:.0f} s) ...", flush=True)
            launched = launch.run_job(job.name, argv_w, nproc, limit, out, dict(job.env_for()),
                                      progress=SeriesProgress(job.name, jpath, time.monotonic()))
            worker = _load(jpath)
        rec = shared_gpu_verdict(job, _job_record(job, launched, worker, skipped), shared)
        results["jobs"][job.name] = rec
        save()
        bad = sum(1 for s in rec.get("series", []) if s.get("error"))
        extra = f", {bad} series with errors" if bad else ""
        wall = f" in {launched['wall_s']} s" if launched else ""
        print(f"  {job.name:<20} {rec['status']}{wall}{extra}" + (f": {rec.get('error')}" if rec.get("error") else ""),
              flush=True)

    results["meta"]["run_wall_s"] = round(time.monotonic() - t_start, 1)
    save()
    for line in report.write_all(results, out):
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
