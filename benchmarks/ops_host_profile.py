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
- the floors of this host, what no launch path gets under (`floor: ...` rows): one trivial Triton
  kernel launched through rshmem's packed launch (`rshmem.ops._launch.Bound`, a Python call into
  the extension and `cuLaunchKernel`) and through Triton's `JITFunction` (what a user's own Triton
  call pays); torch's smallest kernel launch (`zero_()` of 4 KiB); a driver call through ctypes
  (`cuStreamQuery`) and a 4 KiB device copy through it (`cuMemcpyAsync`); `clone()` of 4 KiB
  (an all-reduce at W=1); a trivial `torch.autograd.Function` (forward `empty_like`) beside
  `torch.empty_like` alone.
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


def floors(record, dev, idx) -> None:
    """The `floor: ...` rows (see the module docstring)."""
    import ctypes

    import torch
    import triton
    import triton.language as tl

    from rshmem import _cuda
    from rshmem.ops import _launch

    @triton.jit
    def touch(x_ptr, n):
        offs = tl.arange(0, 16)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

    x = torch.zeros(2048, dtype=torch.bfloat16, device=dev)
    y = torch.empty_like(x)
    bound = _launch.Kernel(touch, "floor").bind((1,), (x, 16), (), (0,), num_warps=1)
    packed = "packed" if bound._native is not None else "Triton's C launcher: no packed launch here"
    record("-", "-", "-", f"floor: trivial kernel, rshmem launch ({packed})",
           lambda: bound.launch(_cuda.current_raw_stream(idx), x))
    record("-", "-", "-", "floor: trivial kernel, Triton JIT call", lambda: touch[(1,)](x, 16, num_warps=1))
    record("-", "-", "-", "floor: torch kernel (zero_ 4 KiB)", lambda: x.zero_())
    cu = ctypes.CDLL("libcuda.so.1")
    stream = _cuda.current_raw_stream(idx)
    query = cu.cuStreamQuery
    query.argtypes = [ctypes.c_void_p]
    record("-", "-", "-", "floor: driver call via ctypes (cuStreamQuery)", lambda: query(stream))
    memcpy = cu.cuMemcpyAsync
    memcpy.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p]
    dst, src, nbytes = y.data_ptr(), x.data_ptr(), x.numel() * x.element_size()
    record("-", "-", "-", "floor: cuMemcpyAsync 4 KiB via ctypes", lambda: memcpy(dst, src, nbytes, stream))
    record("-", "-", "-", "floor: clone 4 KiB", lambda: x.clone())
    record("-", "-", "-", "floor: torch.empty_like 4 KiB", lambda: torch.empty_like(x))

    class Empty(torch.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return torch.empty_like(t)

        @staticmethod
        def backward(ctx, g):
            return g

    xg = x.detach().requires_grad_()
    record("-", "-", "-", "floor: autograd.Function of empty_like", lambda: Empty.apply(xg))


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
    floors(record, dev, idx)
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
