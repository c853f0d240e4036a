"""What `signal_wait_until_on_stream` costs, beside the driver's stream wait it replaced.

    python -m benchmarks.stream_wait [--calls 2000] [--json out.json] [--png out.png]

One process, one GPU (W=1: the word is this PE's own and already satisfied, so only each path's
own cost shows). rshmem's wait is a one-thread kernel that polls the word (it also watches the
debug timeout and departed peers); the baseline is `cuStreamWaitValue64`, the stream memory
operation rshmem used before and NVSHMEM uses, called through `cuda.bindings` on the same word.
For each: the CPU time inside a call (`perf_counter_ns` around back-to-back calls, the GPU
synchronized every 64 calls so a full launch queue never blocks), the wall time per call of
back-to-back eager calls, each followed by a one-element `add_` that depends on it, and the time
per wait of a replayed CUDA graph of 64 such pairs. Medians of `--repeats` rounds.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time

BATCH = 64


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", default=None)
    ap.add_argument("--png", default=None)
    args = ap.parse_args()
    for k, v in (("NCCL_NVLS_ENABLE", "0"), ("NVSHMEM_DISABLE_NVLS", "1"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")):
        os.environ.setdefault(k, v)
    import torch
    from cuda.bindings import driver

    import rshmem
    import rshmem.torch as rtorch

    torch.cuda.set_device(rtorch.device())
    rshmem.init(backend="cuda")
    sig = rtorch.create_symmetric_tensor((1,), torch.int64)
    sig.fill_(1)
    x = torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    geq = driver.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_GEQ

    def rshmem_wait():
        rtorch.signal_wait_until_on_stream(sig[0], rshmem.CMP_GE, 1)

    def driver_wait():
        (err,) = driver.cuStreamWaitValue64(torch.cuda.current_stream().cuda_stream, sig.data_ptr(), 1, geq)
        if err != driver.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"cuStreamWaitValue64: {err}")

    def host_us(wait) -> float:
        per = []
        for _ in range(args.repeats):
            spent = 0
            for start in range(0, args.calls, BATCH):
                torch.cuda.synchronize()
                t0 = time.perf_counter_ns()
                for _ in range(min(BATCH, args.calls - start)):
                    wait()
                spent += time.perf_counter_ns() - t0
            per.append(spent / args.calls / 1e3)
        return statistics.median(per)

    def eager_us(wait) -> float:
        per = []
        for _ in range(args.repeats):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(args.calls):
                wait()
                x.add_(1)
            torch.cuda.synchronize()
            per.append((time.perf_counter() - t0) / args.calls * 1e6)
        return statistics.median(per)

    def graph_us(wait) -> float:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                wait()
                x.add_(1)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(BATCH):
                wait()
                x.add_(1)
        per = []
        for _ in range(args.repeats):
            g.replay()
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            reps = max(1, args.calls // BATCH)
            start.record()
            for _ in range(reps):
                g.replay()
            end.record()
            end.synchronize()
            per.append(start.elapsed_time(end) * 1e3 / (reps * BATCH))
        return statistics.median(per)

    rows = {}
    for name, wait in (("rshmem signal_wait_until_on_stream", rshmem_wait), ("cuStreamWaitValue64", driver_wait)):
        rows[name] = {"host_us": host_us(wait), "eager_us": eager_us(wait), "graph_us": graph_us(wait)}
    base = rows["cuStreamWaitValue64"]
    print(f"signal_wait_until_on_stream vs cuStreamWaitValue64, one PE, {torch.cuda.get_device_name()}, "
          f"{args.calls} calls x {args.repeats} rounds, medians (us per call):")
    print(f"  {'':38s} {'host':>8s} {'eager + add_':>13s} {'graph + add_':>13s}")
    for name, r in rows.items():
        print(f"  {name:38s} {r['host_us']:8.2f} {r['eager_us']:13.2f} {r['graph_us']:13.2f}")
    mine = rows["rshmem signal_wait_until_on_stream"]
    ratios = {k: mine[k] / base[k] for k in base}
    print("  ratio rshmem / driver:               " + "  ".join(f"{k} {v:.2f}x" for k, v in ratios.items()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "ratios": ratios, "calls": args.calls, "repeats": args.repeats,
                       "gpu": torch.cuda.get_device_name()}, f, indent=1)
    if args.png:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        keys = ["host_us", "eager_us", "graph_us"]
        fig, ax = plt.subplots(figsize=(6, 3.5))
        for i, (name, r) in enumerate(rows.items()):
            ax.bar([k + i * 0.38 for k in range(len(keys))], [r[k] for k in keys], width=0.38, label=name)
        ax.set_xticks([k + 0.19 for k in range(len(keys))], ["host", "eager + add_", "graph + add_"])
        ax.set_ylabel("us per call")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(args.png, dpi=120)
    rtorch.free_tensor(sig)
    rshmem.finalize()


if __name__ == "__main__":
    main()
