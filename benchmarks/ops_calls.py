"""rshmem.ops as a training or inference step calls them: per op, shape and B layout, four times
of one call, beside the paths users have today, in the same process.

    python -m benchmarks.ops_calls [--json ops_calls.json] [--quick]          # one PE (W=1), one GPU
    RSHMEM_ALLOW_SHARED_GPU=1 torchrun --nproc-per-node 2 -m benchmarks.ops_calls --host-only --json ops_calls_2pe.json

The four times of a path, medians:
- `single_us`: one call after a synchronize, CUDA events around it (what a step with a sync
  before it meets; host work shows here whenever it exceeds the GPU's);
- `eager_us`: wall time per call of back-to-back eager calls, synchronized at the end;
- `graph_us`: per call, replaying a CUDA graph of 50 calls (10, 5 with `--quick`, for calls of
  over 200 µs): a model step's graph holds many ops, which share the graph's own launch, so a
  graph of few short calls would time that launch more than the op (tables before 2026-12-03's
  fifth session used 10 for every op);
- `host_us`: CPU time inside the call (`perf_counter_ns` from entry to return), with the GPU
  synchronized every few calls so that a full launch queue never blocks the call.

Paths: `rshmem` (the op as `rshmem.ops` exposes it, and `rshmem in place` for
`rshmem.ops.all_reduce_`, which at W=1 has nothing to do after its first call; `rshmem fused` is the same with
`config.gemm_small_rows = 0`, the fused kernel at every size, where the installed rshmem has that
rule), `mm` (cuBLAS `torch.mm` of the whole A: nothing to gather at W=1), `nccl` (NCCL
`all_gather_into_tensor` + `mm`, or `mm` + `reduce_scatter_tensor`; `all_reduce` in place),
`torch` (torch's symmetric-memory `fused_all_gather_matmul` / `fused_matmul_reduce_scatter`,
`one_shot_all_reduce` / `two_shot_all_reduce_` on symmetric inputs). B is row-major (`b`) or the
transpose of a row-major `[N, K]` weight (`w.t()`, as `nn.Linear` holds it). Ratios are against
`mm` for the GEMM ops and NCCL for the all-reduce. With `--host-only` (2 PEs sharing one GPU,
where GPU times mean nothing and NCCL refuses two ranks on one GPU) only rshmem's host time is
measured. Not a test: it prints a table and writes JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time

AG_SHAPES = [(4096, 8192, 28672), (256, 8192, 8192), (1, 8192, 8192), (16, 8192, 8192), (128, 8192, 8192),
             (512, 8192, 8192)]
RS_SHAPES = [(8192, 8192, 5120), (256, 8192, 8192), (1, 8192, 8192), (16, 8192, 8192), (128, 8192, 8192),
             (512, 8192, 8192)]
AR_BYTES = [4 << 10, 16 << 10, 64 << 10, 256 << 10]


def _sync():
    import torch

    torch.cuda.synchronize()


def measure(fn, *, host_only: bool, quick: bool, graph: bool = True) -> dict:
    """The four times of `fn` (see the module docstring), in microseconds."""
    import torch

    n = 5 if quick else 10
    out = {}
    fn()
    _sync()
    host = []
    for i in range(4 * n):
        if i % 4 == 0:
            _sync()
        t = time.perf_counter_ns()
        fn()
        host.append(time.perf_counter_ns() - t)
    _sync()
    out["host_us"] = statistics.median(host) / 1e3
    if host_only:
        return out
    single = []
    for _ in range(n):
        _sync()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        single.append(s.elapsed_time(e) * 1e3)
    out["single_us"] = statistics.median(single)
    eager = []
    for _ in range(3):
        _sync()
        t = time.perf_counter()
        for _ in range(2 * n):
            fn()
        _sync()
        eager.append((time.perf_counter() - t) / (2 * n) * 1e6)
    out["eager_us"] = statistics.median(eager)
    if graph:
        try:
            g = torch.cuda.CUDAGraph()
            calls = n if out["single_us"] > 200 else 50
            with torch.cuda.graph(g):
                for _ in range(calls):
                    fn()
            g.replay()
            _sync()
            times = []
            for _ in range(3):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                g.replay()
                e.record()
                e.synchronize()
                times.append(s.elapsed_time(e) * 1e3 / calls)
            out["graph_us"] = statistics.median(times)
            del g
        except Exception as e:  # noqa: BLE001 - a path that cannot be captured is reported as such
            out["graph_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
            _sync()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default="ops_calls.json")
    ap.add_argument("--quick", action="store_true", help="fewer repetitions, fewer shapes")
    ap.add_argument("--host-only", action="store_true", help="rshmem's host time only (PEs sharing a GPU)")
    ap.add_argument("--label", default="", help="a name for this build in the JSON and table")
    ap.add_argument("--ops", default="ag,rs,ar", help="which ops: ag (all_gather_matmul), rs "
                    "(matmul_reduce_scatter), ar (all_reduce), comma-separated")
    args = ap.parse_args()
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "31311")
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    import torch
    import torch.distributed as dist

    import rshmem
    import rshmem.ops as ops
    import rshmem.torch as rtorch

    torch.cuda.set_device(rtorch.device())
    dist.init_process_group("gloo" if args.host_only else "cpu:gloo,cuda:nccl")
    rshmem.init(dist.group.WORLD, backend="cuda")
    W, me = dist.get_world_size(), dist.get_rank()
    dev = rtorch.device()
    name = dist.group.WORLD.group_name
    ops.config.autotune = os.environ.get("RSHMEM_OPS_AUTOTUNE", "1") != "0"
    has_rule = hasattr(ops.config, "gemm_small_rows")
    rows = []
    bf16 = torch.bfloat16

    def record(op, shape, layout, path, fn, **kw):
        r = {"op": op, "shape": "x".join(map(str, shape)) if isinstance(shape, tuple) else shape, "layout": layout,
             "path": path, "W": W, "label": args.label}
        try:
            r.update(measure(fn, host_only=args.host_only, quick=args.quick, **kw))
        except Exception as e:  # noqa: BLE001
            r["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
            _sync()
        rows.append(r)
        if me == 0:
            print(json.dumps(r), flush=True)

    def rshmem_paths(op, shape, layout, call):
        record(op, shape, layout, "rshmem", call)
        if has_rule and shape[0] <= 512 and not args.host_only:
            old = ops.config.gemm_small_rows
            ops.config.gemm_small_rows = 0
            try:
                record(op, shape, layout, "rshmem fused", call)
            finally:
                ops.config.gemm_small_rows = old

    torch_ok = False
    if not args.host_only:
        try:
            import torch.distributed._symmetric_memory as symm_mem

            enable = getattr(symm_mem, "enable_symm_mem_for_group", None)
            if enable is not None:
                enable(name)
            torch_ok = True
        except Exception as e:  # noqa: BLE001
            print(f"torch symmetric memory unavailable: {e}")
    which = set(args.ops.split(","))
    ag_shapes = (AG_SHAPES[:3] if args.quick or args.host_only else AG_SHAPES) if "ag" in which else []
    rs_shapes = (RS_SHAPES[:3] if args.quick or args.host_only else RS_SHAPES) if "rs" in which else []
    g = torch.Generator(device=dev).manual_seed(1)
    for M, K, N in ag_shapes:
        m = max(1, M // W)
        shard = torch.randn((m, K), generator=g, device=dev).to(bf16)
        weight = (torch.randn((N, K), generator=g, device=dev) / K ** 0.5).to(bf16)
        for layout, b in (("b", weight.t().contiguous()), ("w.t()", weight.t())):
            shape = (M, K, N)
            rshmem_paths("all_gather_matmul", shape, layout, lambda: ops.all_gather_matmul(shard, b))
            if args.host_only:
                continue
            record("all_gather_matmul", shape, layout, "mm", lambda: torch.mm(shard, b))

            def nccl():
                full = torch.empty((W * m, K), dtype=bf16, device=dev)
                dist.all_gather_into_tensor(full, shard)
                return torch.mm(full, b)

            record("all_gather_matmul", shape, layout, "nccl", nccl)
            if torch_ok:
                record("all_gather_matmul", shape, layout, "torch",
                       lambda: torch.ops.symm_mem.fused_all_gather_matmul(shard, [b], 0, name, return_A=False)[1][0])
            del b
        del shard, weight
    for M, K, N in rs_shapes:
        Mw = max(W, M - M % W)
        a = torch.randn((Mw, K), generator=g, device=dev).to(bf16)
        weight = (torch.randn((N, K), generator=g, device=dev) / K ** 0.5).to(bf16)
        for layout, b in (("b", weight.t().contiguous()), ("w.t()", weight.t())):
            shape = (M, K, N)
            rshmem_paths("matmul_reduce_scatter", shape, layout, lambda: ops.matmul_reduce_scatter(a, b))
            if args.host_only:
                continue
            record("matmul_reduce_scatter", shape, layout, "mm", lambda: torch.mm(a, b))

            def nccl():
                part = torch.mm(a, b)
                out = torch.empty((Mw // W, N), dtype=bf16, device=dev)
                dist.reduce_scatter_tensor(out, part)
                return out

            record("matmul_reduce_scatter", shape, layout, "nccl", nccl)
            if torch_ok:
                record("matmul_reduce_scatter", shape, layout, "torch",
                       lambda: torch.ops.symm_mem.fused_matmul_reduce_scatter(a, b, "sum", 0, name))
            del b
        del a, weight
    for nbytes in (AR_BYTES[::3] if args.host_only else AR_BYTES) if "ar" in which else []:
        x = torch.randn(nbytes // 2, generator=g, device=dev).to(bf16)
        label = f"{nbytes >> 10} KiB"
        record("all_reduce", label, "-", "rshmem", lambda: ops.all_reduce(x))
        # in place (the values grow from call to call; the time does not depend on them)
        y = x.clone()
        record("all_reduce", label, "-", "rshmem in place", lambda: ops.all_reduce_(y))
        if args.host_only:
            continue
        record("all_reduce", label, "-", "nccl", lambda: dist.all_reduce(x))
        if torch_ok:
            try:
                import torch.distributed._symmetric_memory as symm_mem

                inp = symm_mem.empty(nbytes // 2, dtype=bf16, device=dev)
                symm_mem.rendezvous(inp, name)
                inp.copy_(x)
                record("all_reduce", label, "-", "torch one_shot",
                       lambda: torch.ops.symm_mem.one_shot_all_reduce(inp, "sum", name))
                record("all_reduce", label, "-", "torch two_shot",
                       lambda: torch.ops.symm_mem.two_shot_all_reduce_(inp, "sum", name))
            except Exception as e:  # noqa: BLE001
                print(f"torch symmetric-memory all-reduce: {type(e).__name__}: {e}")
    _sync()
    if me == 0:
        with open(args.json, "w") as f:
            json.dump({"W": W, "label": args.label, "device": torch.cuda.get_device_name(dev),
                       "autotune": ops.config.autotune, "rows": rows}, f, indent=1)
        print_table(rows)
    dist.barrier()
    rshmem.finalize()
    dist.destroy_process_group()


def print_table(rows: list) -> None:
    """One line per (op, shape, layout, path): the four times and the ratio of each to the baseline
    (`mm` for the GEMM ops, `nccl` for the all-reduce) of the same op, shape and layout."""
    base = {}
    for r in rows:
        if r["path"] == ("nccl" if r["op"] == "all_reduce" else "mm"):
            base[(r["op"], r["shape"], r["layout"])] = r
    keys = ("single_us", "eager_us", "graph_us", "host_us")
    print(f"{'op':22} {'shape':18} {'B':6} {'path':14} " + " ".join(f"{k[:-3]:>16}" for k in keys))
    for r in rows:
        b = base.get((r["op"], r["shape"], r["layout"]), {})
        cells = []
        for k in keys:
            v = r.get(k)
            if v is None:
                cells.append(f"{'-':>16}")
            elif b.get(k):
                cells.append(f"{v:9.1f} {v / b[k]:5.2f}x")
            else:
                cells.append(f"{v:9.1f}       ")
        print(f"{r['op']:22} {r['shape']:18} {r['layout']:6} {r['path']:14} " + " ".join(cells)
              + (f"  {r['error']}" if "error" in r else ""))


if __name__ == "__main__":
    main()
