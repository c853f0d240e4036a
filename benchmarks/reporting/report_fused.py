"""The fused-ops part of results.md (suite "fused"): per shape, the fused ops beside their GEMM
alone, the communication alone, the floor and the hidden share, NCCL + cuBLAS and torch's fused
ops; the all-reduce beside NCCL and torch symmetric memory; the targets of the two-GPU issue.

- floor = max(GEMM alone, communication alone), both rshmem's own, from the same job as the fused
  time; fused / floor says how close the fused op gets.
- hidden share = (GEMM alone + communication alone - fused) / min(GEMM alone, communication
  alone): 100% hides all of the shorter one.
- "x" columns: baseline time / rshmem time (above 1: rshmem ahead).
"""
from __future__ import annotations

from benchmarks.harness.common import KiB, MiB, fmt_size
from benchmarks.reporting.tables import fnum, table

OURS = "rshmem"


def _fused(series: list) -> list:
    return [s for s in series if s.get("suite") == "fused"]


def _point(series: list, kind: str, x, xkey: str = "shape", op: str | None = None, impl: str | None = None):
    """The first good point of `kind` at `x` (of series `op` / `impl` when given)."""
    for s in series:
        p = s.get("params", {})
        if p.get("kind") != kind or (op is not None and p.get("op") != op) or (impl is not None and s["impl"] != impl):
            continue
        for pt in s.get("points", []):
            if pt.get(xkey) == x and pt.get("verified") is not False and pt.get("median_us"):
                return pt
    return None


def _us(pt):
    return pt["median_us"] if pt else None


def _ms(v):
    return fnum(v / 1e3) if v is not None else "—"


def _x(base, ours):
    return fnum(base / ours, "x") if base and ours else "—"


def _shapes(series: list, kinds: tuple) -> list:
    seen = []
    for s in series:
        if s.get("params", {}).get("kind") in kinds:
            for pt in s.get("points", []):
                if pt.get("shape") and pt["shape"] not in seen:
                    seen.append(pt["shape"])
    return seen


def gemm_rows(series: list, op: str) -> tuple:
    """(table text, per-shape numbers) of "ag" or "rs"."""
    fused_kind, alone_kind, comm_kind = f"{op}_fused", f"{op}_gemm_alone", f"{op}_comm"
    auto = "AllGather+GEMM (auto)" if op == "ag" else "GEMM+ReduceScatter"
    rows, numbers = [], {}
    for shape in _shapes(series, (fused_kind, alone_kind)):
        fused = _us(_point(series, fused_kind, shape, op=auto, impl=OURS))
        ce = _us(_point(series, fused_kind, shape, op="AllGather+GEMM (copy_engine)", impl=OURS))
        sm = _us(_point(series, fused_kind, shape, op="AllGather+GEMM (sm)", impl=OURS))
        mine = _point(series, alone_kind, shape, impl=OURS)
        cublas = _point(series, alone_kind, shape, impl="cublas")
        comm = _us(_point(series, comm_kind, shape, impl=OURS))
        gemm = _us(mine)
        floor = max(gemm, comm) if gemm and comm else None
        hidden = (gemm + comm - fused) / min(gemm, comm) if gemm and comm and fused else None
        nccl = _us(_point(series, fused_kind, shape, impl="nccl"))
        torch_ = _us(_point(series, fused_kind, shape, impl="torch"))
        ratio = mine["tflops"] / cublas["tflops"] if mine and cublas and cublas.get("tflops") else None
        numbers[shape] = dict(fused=fused, floor=floor, hidden=hidden, nccl=nccl, torch=torch_, gemm_ratio=ratio,
                              gemm_tflops=mine and mine.get("tflops"), cublas_tflops=cublas and cublas.get("tflops"),
                              config=mine and mine.get("config"))
        row = [shape, _ms(fused)]
        if op == "ag":
            row += [_ms(ce), _ms(sm)]
        row += [f"{_ms(gemm)} ({fnum(mine and mine.get('tflops'))})", f"{_ms(_us(cublas))} ({fnum(cublas and cublas.get('tflops'))})",
                fnum(ratio, "x"), _ms(comm), _ms(floor), fnum(fused / floor if fused and floor else None, "x"),
                f"{hidden * 100:.0f}%" if hidden is not None else "—", _ms(nccl), _x(nccl, fused), _ms(torch_),
                _x(torch_, fused)]
        rows.append(row)
    head = ["shape (M x K x N)", "rshmem fused ms"]
    if op == "ag":
        head += ["copy engine", "SM push"]
    head += ["GEMM alone ms (TFLOP/s)", "cuBLAS ms (TFLOP/s)", "GEMM / cuBLAS", "comm alone ms", "floor ms",
             "fused / floor", "hidden", "NCCL + cuBLAS ms", "x", "torch fused ms", "x"]
    return table(head, rows), numbers


def ar_rows(series: list) -> tuple:
    sizes = sorted({pt["bytes"] for s in series if s.get("params", {}).get("kind") == "ar"
                    for pt in s.get("points", []) if "bytes" in pt})
    rows, numbers = [], {}
    for n in sizes:
        get = lambda op, impl: _point(series, "ar", n, "bytes", op=op, impl=impl)  # noqa: E731
        auto, one, two = (get(f"all_reduce {f}", OURS) for f in ("auto", "one_shot", "two_shot"))
        nccl, t1, t2 = get("NCCL all_reduce", "nccl"), get("torch symm_mem one_shot_all_reduce", "torch"), \
            get("torch symm_mem two_shot_all_reduce", "torch")
        a = _us(auto)
        numbers[n] = dict(auto=a, auto_busbw=auto and auto.get("busbw_gbps"), nccl=_us(nccl),
                          nccl_busbw=nccl and nccl.get("busbw_gbps"), torch_one=_us(t1))
        rows.append([fmt_size(n), fnum(a), fnum(_us(one)), fnum(_us(two)), fnum(_us(nccl)), _x(_us(nccl), a),
                     fnum(_us(t1)), _x(_us(t1), a), fnum(_us(t2)),
                     fnum(auto and auto.get("busbw_gbps")), fnum(nccl and nccl.get("busbw_gbps"))])
    head = ["bytes", "rshmem auto us", "one-shot", "two-shot", "NCCL us", "x", "torch one-shot us", "x",
            "torch two-shot us", "rshmem busbw GB/s", "NCCL busbw GB/s"]
    return table(head, rows), numbers


def targets(ag: dict, rs: dict, ar: dict) -> str:
    rows = []

    def row(what, goal, measured, met):
        rows.append([what, goal, measured, "—" if met is None else ("met" if met else "not met")])

    for name, numbers in (("AllGather+GEMM", ag), ("GEMM+ReduceScatter", rs)):
        for shape, v in numbers.items():
            f = v["fused"]
            for base in ("nccl", "torch"):
                b = v[base]
                label = "NCCL + cuBLAS" if base == "nccl" else "torch's fused op"
                row(f"{name} {shape} vs {label}", "faster", f"{_ms(f)} vs {_ms(b)} ms",
                    None if not f or not b else f < b)
            h = v["hidden"]
            row(f"{name} {shape} hidden share", ">= 90%", "—" if h is None else f"{h * 100:.0f}%",
                None if h is None else h >= 0.9)
            r = v["gemm_ratio"]
            row(f"{name} {shape} GEMM alone vs cuBLAS", ">= 1.0x",
                f"{fnum(v['gemm_tflops'])} vs {fnum(v['cublas_tflops'])} TFLOP/s = {fnum(r, 'x')}",
                None if r is None else r >= 1.0)
    for n, v in ar.items():
        if n <= 256 * KiB:
            a, b, t = v["auto"], v["nccl"], v["torch_one"]
            row(f"all-reduce {fmt_size(n)} vs NCCL", "<= 0.5x NCCL's time", f"{fnum(a)} vs {fnum(b)} us",
                None if not a or not b else a <= 0.5 * b)
            row(f"all-reduce {fmt_size(n)} vs torch one-shot", "<= torch's time", f"{fnum(a)} vs {fnum(t)} us",
                None if not a or not t else a <= t)
        elif MiB <= n <= 64 * MiB:
            a, b = v["auto_busbw"], v["nccl_busbw"]
            row(f"all-reduce {fmt_size(n)} bus bandwidth", ">= NCCL's", f"{fnum(a)} vs {fnum(b)} GB/s",
                None if not a or not b else a >= b)
    return table(["target", "goal", "measured", ""], rows)


def section(series: list) -> str:
    """The whole "Fused ops" section ("" when the run has no fused series)."""
    series = _fused(series)
    if not series:
        return ""
    shared = any(pt.get("shared_gpu") for s in series for pt in s.get("points", []))
    ag_text, ag = gemm_rows(series, "ag")
    rs_text, rs = gemm_rows(series, "rs")
    ar_text, ar = ar_rows(series)
    parts = ["\n## Fused ops (rshmem.ops)\n\n"]
    if shared:
        parts.append("_The PEs shared one GPU in this run: the fused ops' times, the communication and the "
                     "baselines mean nothing for speed (the PEs' kernels time-slice the GPU). The GEMM-alone "
                     "columns (PE 0 alone) are single-GPU figures._\n\n")
    parts += [
        "floor = max(GEMM alone, communication alone); hidden = (GEMM alone + communication alone - fused) / "
        "min(GEMM alone, communication alone); x = baseline time / rshmem fused time. GEMM alone is the op's own "
        "kernel with its signals set (PE 0 alone), cuBLAS `torch.matmul` beside it.\n\n",
        "### AllGather+GEMM\n\n", ag_text,
        "\n### GEMM+ReduceScatter\n\n", rs_text,
        "\n### AllReduce (time per call, eager)\n\n", ar_text,
        "\n### Configurations chosen\n\n",
        table(["op", "shape", "GEMM configuration"],
              [[op, shape, v["config"] or "—"] for op, numbers in (("AllGather+GEMM", ag), ("GEMM+ReduceScatter", rs))
               for shape, v in numbers.items()]),
        "\n### Targets of the fused ops\n\n", targets(ag, rs, ar),
    ]
    return "".join(parts)
