"""One PE of one job (started by `benchmarks.launch`, never by hand):

    python -m benchmarks.worker --job put.rshmem --out DIR --backend cuda [--quick] [--opt K=V]

Sets the NVLS variables first, picks the GPU by rshmem's rule (`rshmem.torch.device()`: one per
PE, or shared round-robin under RSHMEM_ALLOW_SHARED_GPU=1), starts torch.distributed (a GPU per
PE: "cpu:gloo,cuda:nccl", so NCCL starts only if a job uses it; a shared GPU or the host backend:
"gloo", as NCCL refuses two ranks on one GPU) plus a gloo group for barriers, runs the job and writes `DIR/jobs/<job>.json` (rank 0). The process ends with
`os._exit`, so no library's teardown can hang a finished job.
"""
from __future__ import annotations

import argparse
import datetime
import os
import sys
import time
import traceback
from pathlib import Path

from benchmarks.harness import env

env.apply()  # before torch (or anything that loads NCCL / NVSHMEM) is imported

from benchmarks.harness import table as jobs  # noqa: E402
from benchmarks.harness.common import Ctx, Recorder, short_error  # noqa: E402


def _options(pairs: list[str]) -> dict:
    out = {}
    for p in pairs:
        k, _, v = p.partition("=")
        out[k.strip()] = v.strip()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="benchmarks.worker")
    ap.add_argument("--job", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--backend", choices=("cuda", "host"), required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--pg-timeout-s", type=float, default=180.0)
    ap.add_argument("--opt", action="append", default=[], help="K=V passed to the job as ctx.options")
    args = ap.parse_args(argv)

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    out = Path(args.out) / "jobs"
    out.mkdir(parents=True, exist_ok=True)
    rec = Recorder(out / f"{args.job}.json", args.job, rank)
    rec.data["started_utc"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    rec.flush()
    t0 = time.monotonic()
    code = 0
    try:
        job = jobs.find(args.job)
        if args.backend == "host":
            os.environ["RSHMEM_BACKEND"] = "host"
        import torch
        import torch.distributed as dist

        shared = False
        if args.backend == "cuda":
            import rshmem.torch as rtorch

            dev = rtorch.device()
            torch.cuda.set_device(dev)
            local, shared = dev.index, rtorch.gpu_shared()
        timeout = datetime.timedelta(seconds=args.pg_timeout_s)
        dist.init_process_group(backend="cpu:gloo,cuda:nccl" if args.backend == "cuda" and not shared else "gloo",
                                timeout=timeout)
        cpu_group = dist.new_group(backend="gloo", timeout=timeout) if args.backend == "cuda" and not shared \
            else dist.group.WORLD
        ctx = Ctx(job=args.job, rank=rank, world=world, local_rank=local, quick=args.quick, backend=args.backend,
                  rec=rec, cpu_group=cpu_group, options=_options(args.opt), shared_gpu=shared)
        rec.ctx = ctx
        rec.data["env"] = env.torch_info()
        rec.data["world"] = world
        rec.data["shared_gpu"] = shared
        job.function()(ctx)
        rec.data["status"] = "ok"
    except BaseException as e:  # noqa: BLE001 (record any failure, then exit non-zero)
        rec.data["status"] = "error"
        rec.data["error"] = short_error(e)
        traceback.print_exc()
        code = 1
    rec.data["wall_s"] = round(time.monotonic() - t0, 2)
    try:
        rec.flush()
    except Exception:  # noqa: BLE001 (nothing left to report to)
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
