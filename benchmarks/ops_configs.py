"""The fused ops' GEMMs alone, one row per GEMM configuration the tuner may choose, beside cuBLAS:
which tilings (and whether the flattened tile loop) pay at the fused-ops issue's shapes.

    python -m benchmarks.ops_configs [--op rs|ag|both] [--out bench-out/ops_configs.json]   # 1 GPU
    python -m benchmarks.ops_configs --op ag --fp8      # fp8 (e4m3) AllGather+GEMM beside torch._scaled_mm

One process on one GPU (the cuda backend, 1 PE). Each kernel runs as "the GEMM alone" of a call
over `--world` PEs (default 2: the issue's 2-way tensor parallelism), communication off: for
GEMM+ReduceScatter, A `[M, K / W]` @ B `[K / W, N]` with the first loop over the W - 1 other
chunks (flattened where the configuration says so) and the own chunk after; for AllGather+GEMM,
the gathered `[M, K]` @ `[K, N]`, the own shard first. The shapes are `benchmarks.jobs.fusedlib`'s
(bf16; with `--fp8`, AllGather+GEMM in fp8 e4m3 with B as `weight.t()`, C in bf16, beside
cuBLAS's fp8 GEMM `torch._scaled_mm` with unit scales). Times are CUDA-event medians of `--reps` calls after warm-up; TFLOP/s = 2 M N K' / time,
K' the inner dimension of this PE's GEMM. The result of each configuration is checked against
`torch.matmul` once.
"""
from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import torch

import rshmem

from benchmarks.jobs.fusedlib import AG_SHAPES, RS_SHAPES


def _time_ms(fn, reps: int) -> float:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def _row(op, shape, name, ms, flops, ok):
    tflops = flops / (ms * 1e-3) / 1e12
    print(f"{op:3s} {str(shape):22s} {name:58s} {ms * 1e3:9.1f} us {tflops:7.1f} TFLOP/s {'ok' if ok else 'WRONG'}",
          flush=True)
    return {"op": op, "shape": list(shape), "config": name, "median_us": ms * 1e3, "tflops": tflops, "verified": ok}


def _close(got, want) -> bool:
    err = (got.float() - want.float()).abs().max().item()
    return err <= 2e-2 * max(want.float().abs().max().item(), 1.0)


def rs_rows(W: int, reps: int) -> list:
    from rshmem.ops import _ag_gemm, _gemm_rs, _group, _tuning

    info = _group.TeamInfo(0, W, 0, tuple(range(W)), "cuda", _group.device().index)
    out = []
    for M, K, N in RS_SHAPES:
        k = K // W
        a = torch.randn((M, k), dtype=torch.bfloat16, device="cuda")
        b = torch.randn((k, N), dtype=torch.bfloat16, device="cuda") / k ** 0.5
        want = a @ b
        flops = 2.0 * M * N * k
        call = _gemm_rs._Call(a, b, False, info)
        c = torch.empty((M, N), dtype=a.dtype, device=a.device)
        dummy = _ag_gemm._Dummy(a.device)
        for cfg in _tuning.RS_CANDIDATES:
            def run(cfg=cfg):
                call.launch(cfg, c, False, dummy, c, _tuning.num_sms())

            run()
            ok = _close(c, want)
            out.append(_row("rs", (M, K, N), cfg.describe(), _time_ms(run, reps), flops, ok))
        out.append(_row("rs", (M, K, N), "cuBLAS torch.matmul", _time_ms(lambda: torch.matmul(a, b), reps), flops, True))
    return out


def ag_rows(W: int, reps: int, fp8: bool) -> list:
    from rshmem.ops import _ag_gemm, _group, _tuning

    info = _group.TeamInfo(0, W, 0, tuple(range(W)), "cuda", _group.device().index)
    out = []
    op = "ag8" if fp8 else "ag"
    for M, K, N in AG_SHAPES:
        m = M // W
        if fp8:
            A = torch.randn((M, K), device="cuda").to(torch.float8_e4m3fn)
            b = (torch.randn((N, K), device="cuda") * 4 / K ** 0.5).to(torch.float8_e4m3fn).t()  # weight.t()
            want = (A.float() @ b.float()).to(torch.bfloat16)
        else:
            A = torch.randn((M, K), dtype=torch.bfloat16, device="cuda")
            b = torch.randn((K, N), dtype=torch.bfloat16, device="cuda") / K ** 0.5
            want = A @ b
        flops = 2.0 * M * N * K
        c = torch.empty((M, N), dtype=torch.bfloat16 if fp8 else A.dtype, device=A.device)
        call = _ag_gemm._Call(A[:m], b, fp8, c, A.view(W, m, K), _ag_gemm._Dummy(A.device), info)
        for cfg in (_tuning.AG_FP8_CANDIDATES if fp8 else _tuning.AG_CANDIDATES):
            def run(cfg=cfg):
                call.launch(cfg, False, False, _tuning.num_sms())

            try:
                run()
            except Exception as e:  # noqa: BLE001 - a configuration this GPU cannot run is reported, not fatal
                print(f"{op:3s} {str((M, K, N)):22s} {cfg.describe():58s} did not run: {e}", flush=True)
                continue
            ok = _close(c, want)
            out.append(_row(op, (M, K, N), cfg.describe(), _time_ms(run, reps), flops, ok))
        if fp8:
            one = torch.ones((), device="cuda")
            out.append(_row(op, (M, K, N), "cuBLAS torch._scaled_mm", _time_ms(
                lambda: torch._scaled_mm(A, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16), reps), flops, True))
        else:
            out.append(_row(op, (M, K, N), "cuBLAS torch.matmul", _time_ms(lambda: torch.matmul(A, b), reps), flops,
                            True))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--op", choices=("rs", "ag", "both"), default="rs")
    ap.add_argument("--world", type=int, default=2, help="the PE count the GEMMs are cut for")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--fp8", action="store_true", help="AllGather+GEMM in fp8 e4m3 (with --op ag)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("benchmarks.ops_configs needs a CUDA GPU")
    rshmem.init(backend="cuda")
    try:
        rows = []
        if args.op in ("rs", "both"):
            rows += rs_rows(args.world, args.reps)
        if args.op in ("ag", "both"):
            rows += ag_rows(args.world, args.reps, args.fp8)
        torch.cuda.synchronize()
    finally:
        rshmem.finalize()
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"device": torch.cuda.get_device_name(), "world": args.world, "rows": rows},
                                       indent=1))


if __name__ == "__main__":
    main()
