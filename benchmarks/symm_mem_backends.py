"""torch's symm_mem all-reduces and a process group's all_reduce on rshmem, beside torch's own
backends: torch's CUDA SymmetricMemory backend and NCCL.

    python -m benchmarks.symm_mem_backends [--pes 1] [--calls 500] [--repeats 5] [--json out.json] [--png out.png]

One GPU, W=1 by default, where issue 31 sets its targets: nothing crosses a link, so each path's
own cost shows (one PE's all-reduce is the identity: it measures each path's fixed cost). With
`--pes 2` two processes share the GPU (RSHMEM_ALLOW_SHARED_GPU, torch's
TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES): the host time per call is what a 2-GPU job's would be,
the GPU times are not (the PEs' kernels share the SMs); NCCL refuses two ranks on one GPU, so the
CUDA side has no `dist.all_reduce` there. Each backend runs in a process of its own (a process cannot change its symm_mem backend
once a tensor exists):

- `CUDA`: torch's CUDA symm_mem backend, process group `cpu:gloo,cuda:nccl`;
- `RSHMEM`: `rshmem.torch_symm_mem`'s backend, process group `cpu:gloo,cuda:rshmem`.

For 4 KiB to 256 KiB of bf16: torch's `one_shot_all_reduce` (a new tensor) and
`two_shot_all_reduce_` (in place) on a symm_mem input, and `dist.all_reduce` of an ordinary CUDA
tensor on the group (NCCL against rshmem's process group). For each: the wall time per call of
back-to-back eager calls (synchronized at the end) and the CPU time inside a call (the GPU
synchronized every 64 calls, so a full launch queue never blocks). Medians of `--repeats`
rounds; ratios are RSHMEM / CUDA (rshmem / NCCL for all_reduce). Not a test.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

SIZES = [4 << 10, 16 << 10, 64 << 10, 256 << 10]
BATCH = 64
BACKENDS = ("CUDA", "RSHMEM")


def _worker(backend: str, calls: int, repeats: int) -> None:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    import torch
    import torch.distributed as dist
    import torch.distributed._symmetric_memory as symm_mem

    torch.cuda.set_device(0)
    dev = torch.device("cuda", 0)
    if backend == "RSHMEM":
        import rshmem.torch_backend  # noqa: F401 - registers cuda:rshmem

        dist.init_process_group("cpu:gloo,cuda:rshmem")
        import rshmem.torch_symm_mem  # noqa: F401 - registers the RSHMEM symm_mem backend

        symm_mem.set_backend("RSHMEM")
    else:
        dist.init_process_group("cpu:gloo,cuda:nccl")
    group = dist.group.WORLD.group_name

    def host_us(fn) -> float:
        per = []
        for _ in range(repeats):
            spent = 0
            for start in range(0, calls, BATCH):
                torch.cuda.synchronize()
                t0 = time.perf_counter_ns()
                for _ in range(min(BATCH, calls - start)):
                    fn()
                spent += time.perf_counter_ns() - t0
            per.append(spent / calls / 1e3)
        return statistics.median(per)

    def eager_us(fn) -> float:
        per = []
        for _ in range(repeats):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            torch.cuda.synchronize()
            per.append((time.perf_counter() - t0) / calls * 1e6)
        return statistics.median(per)

    for nbytes in SIZES:
        n = nbytes // 2
        inp = symm_mem.empty(n, dtype=torch.bfloat16, device=dev)
        symm_mem.rendezvous(inp, group)
        inp.normal_()
        plain = torch.randn(n, device=dev).to(torch.bfloat16)
        paths = {
            "one_shot_all_reduce": lambda: torch.ops.symm_mem.one_shot_all_reduce(inp, "sum", group),
            "two_shot_all_reduce_": lambda: torch.ops.symm_mem.two_shot_all_reduce_(inp, "sum", group),
            "dist.all_reduce": lambda: dist.all_reduce(plain),
        }
        if backend == "CUDA" and world > 1:
            del paths["dist.all_reduce"]  # NCCL: one GPU per rank
        for op, fn in paths.items():
            row = {"backend": backend, "op": op, "bytes": nbytes}
            try:
                fn()  # the first call (workspaces, kernels) is not timed
                torch.cuda.synchronize()
                row.update(eager_us=eager_us(fn), host_us=host_us(fn))
            except Exception as e:  # noqa: BLE001 - a path that fails is reported as such
                row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
            if rank == 0:
                print("ROW " + json.dumps(row), flush=True)
    dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pes", type=int, default=1, help="processes sharing the GPU (1 or 2)")
    ap.add_argument("--calls", type=int, default=500)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", default=None)
    ap.add_argument("--png", default=None)
    ap.add_argument("--worker", choices=BACKENDS, help=argparse.SUPPRESS)
    args = ap.parse_args()
    for k, v in (("NCCL_NVLS_ENABLE", "0"), ("NVSHMEM_DISABLE_NVLS", "1"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")):
        os.environ.setdefault(k, v)
    if args.worker:
        _worker(args.worker, args.calls, args.repeats)
        return
    rows = []
    for backend in BACKENDS:
        port = str(_free_port())
        procs = []
        for rank in range(args.pes):
            env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(args.pes),
                       MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RSHMEM_BACKEND="cuda", RSHMEM_ALLOW_SHARED_GPU="1",
                       TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES="1")
            procs.append(subprocess.Popen([sys.executable, "-m", "benchmarks.symm_mem_backends", "--worker", backend,
                                           "--calls", str(args.calls), "--repeats", str(args.repeats)], env=env,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        for rank, proc in enumerate(procs):
            try:
                out, err = proc.communicate(timeout=900)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
            if rank == 0:
                rows += [json.loads(line[4:]) for line in out.splitlines() if line.startswith("ROW ")]
            if proc.returncode != 0:
                print(f"{backend} worker {rank} failed ({proc.returncode}):\n{err[-3000:]}")
    table = {(r["op"], r["bytes"], r["backend"]): r for r in rows}
    print(f"torch's symm_mem all-reduces and dist.all_reduce, W={args.pes}, bf16, medians (us per call):")
    print(f"  {'op':22s} {'size':>8s} {'CUDA eager':>11s} {'RSHMEM eager':>13s} {'ratio':>6s} "
          f"{'CUDA host':>10s} {'RSHMEM host':>12s} {'ratio':>6s}")
    out = []
    for op in ("one_shot_all_reduce", "two_shot_all_reduce_", "dist.all_reduce"):
        for nbytes in SIZES:
            base, mine = table.get((op, nbytes, "CUDA"), {}), table.get((op, nbytes, "RSHMEM"), {})
            if "eager_us" in mine and not base:
                out.append({"op": op, "bytes": nbytes, "rshmem": mine})
                print(f"  {op:22s} {nbytes >> 10:>6d}Ki {'-':>11s} {mine['eager_us']:13.2f} {'':6s} "
                      f"{'-':>10s} {mine['host_us']:12.2f}")
                continue
            if "eager_us" not in base or "eager_us" not in mine:
                print(f"  {op:22s} {nbytes >> 10:>6d}Ki  CUDA: {base.get('error', 'no result')}; "
                      f"RSHMEM: {mine.get('error', 'no result')}")
                continue
            eager, host = mine["eager_us"] / base["eager_us"], mine["host_us"] / base["host_us"]
            out.append({"op": op, "bytes": nbytes, "cuda": base, "rshmem": mine, "eager_ratio": eager,
                        "host_ratio": host})
            print(f"  {op:22s} {nbytes >> 10:>6d}Ki {base['eager_us']:11.2f} {mine['eager_us']:13.2f} {eager:5.2f}x "
                  f"{base['host_us']:10.2f} {mine['host_us']:12.2f} {host:5.2f}x")
    print("  (CUDA: torch's CUDA symm_mem backend, and NCCL for dist.all_reduce; RSHMEM: rshmem's backend "
          "and process group)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"pes": args.pes, "rows": rows, "compared": out, "calls": args.calls, "repeats": args.repeats}, f,
                      indent=1)
    if args.png and out:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, 3, figsize=(11, 3.4), sharey=False)
        for ax, op in zip(axes, ("one_shot_all_reduce", "two_shot_all_reduce_", "dist.all_reduce")):
            pts = [r for r in out if r["op"] == op and "cuda" in r]
            xs = [r["bytes"] >> 10 for r in pts]
            ax.plot(xs, [r["cuda"]["eager_us"] for r in pts], "o-", label="CUDA backend / NCCL")
            ax.plot(xs, [r["rshmem"]["eager_us"] for r in pts], "s-", label="RSHMEM / rshmem PG")
            ax.set_xscale("log", base=2)
            ax.set_title(op, fontsize=9)
            ax.set_xlabel("KiB")
        axes[0].set_ylabel("us per eager call")
        axes[0].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(args.png, dpi=120)


if __name__ == "__main__":
    main()
