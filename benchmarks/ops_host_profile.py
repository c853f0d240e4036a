"""Where the host time of an rshmem.ops call goes: the call taken apart, each part timed alone.

    python -m benchmarks.ops_host_profile [--json ops_host_profile.json]          # one PE (W=1)
    RSHMEM_ALLOW_SHARED_GPU=1 torchrun --nproc-per-node 2 -m benchmarks.ops_host_profile

For each op and shape, the CPU time (`perf_counter_ns`, median of many calls, the GPU
synchronized every few calls so that a full launch queue never blocks one) of:
- `call`: the public op as `benchmarks.ops_calls` times it (the same inputs each call, the
  result dropped, so the allocator hands back the same output address);
- `call, new tensors`: inputs taken in turn from 8 tensors and outputs kept in a ring of 8, so
  every call sees addresses the previous one did not (a model step: each layer has its own);
- `call, autograd`: the weight requires grad with grad mode on (a training step's forward; the
  op in a `torch.autograd.Function`), and `custom op, autograd`: the same through the custom op
  (`torch.ops.rshmem.*`: torch's dispatcher and the custom op's autograd layer, the path such a
  call took before, and the one it takes under `torch.compile`);
- `impl`: the op's implementation under the public function (the plan lookup and the plan);
- `plan`: the plan object's call alone;
- `launch`: the plan's main kernel launch alone, with its output allocated beforehand;
- the pieces torch spends in the same call: `torch.empty` of the output, `torch.mm` (the
  cuBLAS launch, allocation included), the current-stream lookup; and `noop`, a Python call.
Parts that a path does not have are left out. Not a test: prints a table and writes JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time


def host_us(fn, calls: int = 400, sync_every: int = 8) -> float:
    """Median CPU time of `fn()` in microseconds."""
    import torch

    fn()
    torch.cuda.synchronize()
    times = []
    for i in range(calls):
        if i % sync_every == 0:
            torch.cuda.synchronize()
        t = time.perf_counter_ns()
        fn()
        times.append(time.perf_counter_ns() - t)
    torch.cuda.synchronize()
    return statistics.median(times) / 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default="ops_host_profile.json")
    ap.add_argument("--calls", type=int, default=400)
    args = ap.parse_args()
    for k, v in (("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", "31313"), ("RANK", "0"), ("WORLD_SIZE", "1")):
        os.environ.setdefault(k, v)
    import torch
    import torch.distributed as dist

    import rshmem
    import rshmem.ops as ops
    import rshmem.torch as rtorch
    from rshmem import _cuda
    from rshmem.ops import _launch, _library

    torch.cuda.set_device(rtorch.device())
    dist.init_process_group("gloo")
    rshmem.init(dist.group.WORLD, backend="cuda")
    ops.config.autotune = False
    W, me = dist.get_world_size(), dist.get_rank()
    dev = rtorch.device()
    idx = torch.device(dev).index if not isinstance(dev, int) else dev
    bf16 = torch.bfloat16
    rows = []

    def record(op, shape, layout, part, fn):
        try:
            us = host_us(fn, args.calls)
            r = {"op": op, "shape": shape, "layout": layout, "part": part, "host_us": round(us, 2), "W": W}
        except Exception as e:  # noqa: BLE001 - a part that cannot run is reported as such
            r = {"op": op, "shape": shape, "layout": layout, "part": part, "W": W,
                 "error": f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"}
        rows.append(r)
        if me == 0:
            print(json.dumps(r), flush=True)

    def plan_of(prefix):
        return next(p for k, p in _library._plans.items() if k[0] == prefix)

    def gemm(op, shape, a_rows, K, N):
        impl = {"all_gather_matmul": lambda a, b: _library.all_gather_matmul_impl(a, b, 0, False),
                "matmul_reduce_scatter": lambda a, b: _library.matmul_reduce_scatter_impl(a, b, 0)}[op]
        public = getattr(ops, op)
        g = torch.Generator(device=dev).manual_seed(1)
        xs = [torch.randn((a_rows, K), generator=g, device=dev).to(bf16) for _ in range(8)]
        weight = (torch.randn((N, K), generator=g, device=dev) / K ** 0.5).to(bf16)
        for layout, b in (("b", weight.t().contiguous()), ("w.t()", weight.t())):
            _library.forget_plans()
            a = xs[0]
            record(op, shape, layout, "call", lambda: public(a, b))
            ring, turn = [None] * 8, [0]

            def fresh():
                i = turn[0] = (turn[0] + 1) % 8
                ring[i] = public(xs[i], b)

            record(op, shape, layout, "call, new tensors", fresh)
            ring.clear()
            bp = b.detach().requires_grad_()
            record(op, shape, layout, "call, autograd", lambda: public(a, bp))
            custom = {"all_gather_matmul": lambda: torch.ops.rshmem.all_gather_matmul(a, bp, 0, True),
                      "matmul_reduce_scatter": lambda: torch.ops.rshmem.matmul_reduce_scatter(a, bp, 0)}[op]
            record(op, shape, layout, "custom op, autograd", custom)
            record(op, shape, layout, "impl", lambda: impl(a, b))
            plan = plan_of(op)
            if callable(plan) and not isinstance(plan, type(lambda: 0)):
                record(op, shape, layout, "plan", lambda: plan(a, b))
            # At W=1 the fused path is one launch: AG's consumer(a, a, b, c), RS's kernel(a, b, c, c).
            bound = getattr(plan, "consumer", None) or getattr(plan, "kernel", None)
            if isinstance(bound, _launch.Bound) and getattr(plan, "W", 0) == 1:
                c = torch.empty((a_rows, N), dtype=bf16, device=dev)
                tensors = (a, a, b, c) if op == "all_gather_matmul" else (a, b, c, c)
                record(op, shape, layout, "launch", lambda: bound.launch(_cuda.current_raw_stream(idx), *tensors))
            out_rows = a_rows * W if op == "all_gather_matmul" else a_rows
            record(op, shape, layout, "torch.empty (output)", lambda: torch.empty((out_rows, N), dtype=bf16, device=dev))
            record(op, shape, layout, "torch.mm", lambda: torch.mm(a, b))
        del xs, weight

    for M, K, N in ((4096, 8192, 28672), (256, 8192, 8192), (16, 8192, 8192)):
        gemm("all_gather_matmul", f"{M}x{K}x{N}", max(1, M // W), K, N)
    for M, K, N in ((8192, 8192, 5120), (256, 8192, 8192)):
        gemm("matmul_reduce_scatter", f"{M}x{K}x{N}", max(W, M - M % W), K // W if W > 1 else K, N)
    for nbytes in (4 << 10, 256 << 10):
        x = torch.randn(nbytes // 2, device=dev).to(bf16)
        label = f"{nbytes >> 10} KiB"
        _library.forget_plans()
        record("all_reduce", label, "-", "call", lambda: ops.all_reduce(x))
        record("all_reduce", label, "-", "call, in place", lambda: ops.all_reduce_(x))
        xg = x.detach().clone().requires_grad_()
        record("all_reduce", label, "-", "call, autograd", lambda: ops.all_reduce(xg))
        record("all_reduce", label, "-", "custom op, autograd", lambda: torch.ops.rshmem.all_reduce(xg, "sum", 0))
        record("all_reduce", label, "-", "impl", lambda: _library.all_reduce_impl(x, "sum", 0))
        plan = plan_of("all_reduce")
        record("all_reduce", label, "-", "plan", lambda: plan(x))
        record("all_reduce", label, "-", "torch.empty (output)", lambda: torch.empty_like(x))
    record("-", "-", "-", "current stream", lambda: _cuda.current_raw_stream(idx))
    record("-", "-", "-", "noop", lambda: None)
    torch.cuda.synchronize()
    if me == 0:
        with open(args.json, "w") as f:
            json.dump({"W": W, "device": torch.cuda.get_device_name(dev), "rows": rows}, f, indent=1)
        print(f"\n{'op':24} {'shape':18} {'B':6} {'part':22} host µs")
        for r in rows:
            print(f"{r['op']:24} {r['shape']:18} {r['layout']:6} {r['part']:22} {r.get('host_us', r.get('error'))}")
    dist.barrier()
    rshmem.finalize()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
