"""results.json -> results.md (Markdown tables with ratios to each baseline) and the plots.

Ratio columns ("x") say how much better rshmem is than the baseline at the same point:
rshmem / baseline for bandwidths, baseline / rshmem for times, so above 1 means rshmem is ahead.
A value measured on bytes that did not arrive intact is marked `!` and left out of every ratio.
"""
from __future__ import annotations

import statistics
from pathlib import Path

from benchmarks.harness.common import GiB, KiB, MiB, fmt_size
from benchmarks.reporting import report_fused
from benchmarks.reporting.tables import BAD, OURS, _good, _points, all_series, fcell, fnum, fx, pick, ratio, table


def _launch(s: dict) -> str:
    """"graph" for a series replayed from a CUDA graph, else "eager"."""
    return s.get("params", {}).get("launch", "eager")


def _label(s: dict) -> str:
    return f"{s['impl']}: {s['name']}"


# ------------------------------------------------------------------------------ tables


def value_table(series: list[dict], xkey: str, ykey: str) -> str:
    """Rows: x values; columns: series."""
    if not series:
        return "_not measured_\n"
    pts = [_points(s, xkey) for s in series]
    xs = sorted({x for p in pts for x in p})
    rows = [[fx(xkey, x)] + [fcell(p.get(x), ykey) for p in pts] for x in xs]
    return table([xkey] + [_label(s) for s in series], rows)


def ratio_tables(series: list[dict], xkey: str, ykey: str, better: str) -> str:
    """For each rshmem series: its values beside every baseline's, with the ratio to each."""
    ours = [s for s in series if s["impl"] == OURS]
    bases = [s for s in series if s["impl"] != OURS]
    if not ours or not bases:
        return ""
    out = []
    for o in ours:
        # Eager against eager, CUDA graph against CUDA graph: a graph removes the CPU's launch
        # cost, so comparing across the two would credit the launch method, not the library.
        same = [b for b in bases if _launch(b) == _launch(o)]
        if not same:
            continue
        op = _points(o, xkey)
        bps = [_points(b, xkey) for b in same]
        xs = sorted(op)
        header = [xkey, f"rshmem: {o['name']}"]
        for b in same:
            header += [_label(b), "x"]
        rows = []
        for x in xs:
            row = [fx(xkey, x), fcell(op.get(x), ykey)]
            for bp in bps:
                row += [fcell(bp.get(x), ykey), fnum(ratio(_good(op.get(x), ykey), _good(bp.get(x), ykey), better), "x")]
            rows.append(row)
        out.append(f"**rshmem `{o['name']}` vs each baseline** ({ykey})\n\n" + table(header, rows))
    return "\n".join(out)


def sweep_table(series: list[dict]) -> str:
    """CTA sweep: rows CTAs, columns (impl, warps); then rshmem / NVSHMEM per cell."""
    if not series:
        return "_not measured_\n"
    series = sorted(series, key=lambda s: (s["impl"] != OURS, s["impl"], s["params"].get("warps", 0)))
    pts = [_points(s, "ctas") for s in series]
    xs = sorted({x for p in pts for x in p})
    header = ["CTAs"] + [f"{s['impl']} {s['params'].get('warps')} warps" for s in series]
    text = table(header, [[str(x)] + [fcell(p.get(x), "gbps") for p in pts] for x in xs])
    ours = {s["params"].get("warps"): _points(s, "ctas") for s in series if s["impl"] == OURS}
    others = [s for s in series if s["impl"] != OURS and s["params"].get("warps") in ours]
    if ours and others:
        header = ["CTAs"] + [f"rshmem / {s['impl']} {s['params'].get('warps')} warps" for s in others]
        rows = []
        for x in xs:
            row = [str(x)]
            for s in others:
                o = ours[s["params"]["warps"]].get(x)
                row.append(fnum(ratio(_good(o, "gbps"), _good(_points(s, "ctas").get(x), "gbps"), "higher"), "x"))
            rows.append(row)
        text += "\n" + table(header, rows)
    return text


def op_table(series: list[dict], ykey: str, unit: str) -> str:
    """Rows: operations (params.op); columns: implementations; then rshmem vs each other one.
    Several series of one (op, impl) (repeated init jobs) are merged: the median of their values."""
    if not series:
        return "_not measured_\n"
    vals: dict = {}
    names: dict = {}
    for s in series:
        op = s["params"].get("op", s["name"])
        for p in s.get("points", []):
            v = _good(p, ykey)
            if v is not None:
                vals.setdefault((op, s["impl"]), []).append(v)
        names.setdefault((op, s["impl"]), s["name"])
    ops = list(dict.fromkeys(s["params"].get("op", s["name"]) for s in series))
    impls = list(dict.fromkeys([OURS] + [s["impl"] for s in series]))
    impls = [i for i in impls if any((op, i) in names for op in ops)]
    others = [i for i in impls if i != OURS]
    header = ["operation"] + [f"{i} ({unit})" for i in impls] + [f"vs {i}" for i in others if OURS in impls]
    rows = []
    for op in ops:
        med = {i: statistics.median(vals[(op, i)]) if vals.get((op, i)) else None for i in impls}
        row = [op] + [fnum(med[i]) + (f" (n={len(vals[(op, i)])})" if len(vals.get((op, i), [])) > 1 else "")
                      for i in impls]
        if OURS in impls:
            row += [fnum(ratio(med[OURS], med[i], "lower"), "x") for i in others]
        rows.append(row)
    legend = "\n".join(f"- {i} / {op}: `{n}`" for (op, i), n in names.items())
    return table(header, rows) + "\n" + legend + "\n"


# ------------------------------------------------------------------------------ targets


def _best_at(series: list[dict], impl: str, xkey: str, x, ykey: str, pred=None):
    best = None
    for s in series:
        if s["impl"] != impl or (pred is not None and not pred(s)):
            continue
        v = _good(_points(s, xkey).get(x), ykey)
        if v is not None and (best is None or v > best):
            best = v
    return best


def targets(series: list[dict]) -> str:
    """TARGETS.md's goals beside what this run measured (goals, not pass/fail tests)."""
    put = pick(series, "put", "put_bw")
    sweep = pick(series, "put", "cta_sweep")
    lat = pick(series, "latency")
    ag = pick(series, "allgather")
    rows = []

    def row(what, goal, measured, met):
        rows.append([what, goal, measured, "—" if met is None else ("met" if met else "not met")])

    ce = [s for s in put if s["name"] == "putmem_on_stream" and s["impl"] == OURS]
    torch_ce = [s for s in put if s["impl"] == "torch"]
    for size in (GiB, 64 * MiB):
        o = _best_at(ce, OURS, "bytes", size, "gbps")
        b = _best_at(torch_ce, "torch", "bytes", size, "gbps")
        r = ratio(o, b, "higher")
        row(f"putmem_on_stream vs torch peer copy, {fmt_size(size)}", ">= 0.97x",
            f"{fnum(o)} vs {fnum(b)} GB/s = {fnum(r, 'x')}", None if r is None else r >= 0.97)
    def sweep_best(impl, max_ctas=None):
        best = None
        for s in sweep:
            if s["impl"] != impl:
                continue
            for p in s.get("points", []):
                v = _good(p, "gbps")
                if v is not None and (max_ctas is None or p.get("ctas", 0) <= max_ctas) and (best is None or v > best):
                    best = v
        return best

    few, nv_few = sweep_best(OURS, 8), sweep_best("nvshmem", 8)
    row("putmem_block 256 MiB, <= 8 CTAs", ">= 300 GB/s", f"{fnum(few)} GB/s (NVSHMEM {fnum(nv_few)})",
        None if few is None else few >= 300)
    top, nv_top = sweep_best(OURS), sweep_best("nvshmem")
    row("putmem_block 256 MiB, best config", ">= 380 GB/s", f"{fnum(top)} GB/s (NVSHMEM {fnum(nv_top)})",
        None if top is None else top >= 380)

    def ping_of(impl):
        vals = [_good(p, "median_us") for s in lat if s["impl"] == impl and "ping-pong 8 B, in kernel" in
                s["params"].get("op", "") for p in s.get("points", [])]
        return next((v for v in vals if v is not None), None)

    ping = ping_of(OURS)
    row("putmem_signal_block 8 B ping-pong, half round trip", "<= 1.5 us",
        f"{fnum(ping)} us (NVSHMEM {fnum(ping_of('nvshmem'))} us)", None if ping is None else ping <= 1.5)
    nccl = [s for s in ag if s["impl"] == "nccl"]
    ours = [s for s in ag if s["impl"] == OURS]
    for size in (16 * MiB, 64 * MiB, 256 * MiB, GiB):
        o = _best_at(ours, OURS, "bytes", size, "busbw_gbps")
        b = _best_at(nccl, "nccl", "bytes", size, "busbw_gbps")
        r = ratio(o, b, "higher")
        if o is None and b is None:
            continue
        row(f"all-gather bus bandwidth, {fmt_size(size)} per rank", ">= 1.4x NCCL",
            f"{fnum(o)} vs {fnum(b)} GB/s = {fnum(r, 'x')}", None if r is None else r >= 1.4)
    for launch in ("eager", "graph"):
        for size in (KiB, 4 * KiB, 16 * KiB, 64 * KiB):
            best = b = None
            for s in ours:
                v = _good(_points(s, "bytes").get(size), "median_us") if _launch(s) == launch else None
                best = v if v is not None and (best is None or v < best) else best
            for s in nccl:
                v = _good(_points(s, "bytes").get(size), "median_us") if _launch(s) == launch else None
                b = v if v is not None else b
            if best is None and b is None:
                continue
            how = "eager calls" if launch == "eager" else "CUDA graph"
            row(f"all-gather time, {fmt_size(size)} per rank ({how})", "<= 10 us",
                f"{fnum(best)} us (NCCL {fnum(b)} us)", None if best is None else best <= 10)
    return table(["target (shared/TARGETS.md)", "goal", "measured", ""], rows)


# ------------------------------------------------------------------------------ document


def _meta(results: dict) -> str:
    m = results.get("meta", {})
    jobs = results.get("jobs", {})
    tenv = next((j.get("env") for j in jobs.values() if j.get("env")), {}) or {}
    v = m.get("versions", {})
    nvshmem = v.get("nvidia-nvshmem-cu13") or v.get("nvidia-nvshmem-cu12")
    lines = [
        f"- command: `{m.get('command', '?')}` (backend {m.get('backend')}, {m.get('nproc')} PEs per job"
        f"{', quick' if m.get('quick') else ''}; run took {m.get('run_wall_s', '?')} s)",
        f"- date: {m.get('date_utc', '?')}; host {m.get('hostname', '?')}; {m.get('cpus', '?')} CPUs",
        f"- GPUs: {'; '.join(m.get('gpus', []) or tenv.get('devices', []) or ['none seen'])}",
        f"- versions: python {m.get('python')}, torch {tenv.get('torch') or v.get('torch')}, "
        f"CUDA {tenv.get('cuda')}, triton {tenv.get('triton') or v.get('triton')}, NCCL {tenv.get('nccl')}, "
        f"NVSHMEM {nvshmem}, rshmem {tenv.get('rshmem') or v.get('rshmem')} at commit {m.get('git_commit')}",
        f"- NVLink multicast off: {', '.join(f'{k}={val}' for k, val in m.get('nvls_env', {}).items())}",
    ]
    topo = m.get("topology")
    if topo:
        lines.append("- topology (`nvidia-smi topo -m`):\n\n```\n" + topo + "\n```")
    return "\n".join(lines) + "\n"


def _jobs(results: dict) -> str:
    rows = []
    for name, j in results.get("jobs", {}).items():
        n = len(j.get("series", []))
        bad = sum(1 for s in j.get("series", []) if s.get("error"))
        wall = j.get("launch", {}).get("wall_s")
        err = (j.get("error") or "").replace("|", "/").replace("\n", " ")
        status = j.get("status", "?")
        if j.get("not_runnable"):  # a baseline this configuration cannot run (e.g. NCCL, 2 ranks on one GPU)
            status, err = "not runnable", j["not_runnable"].replace("|", "/")
        rows.append([name, status, fnum(wall) if wall is not None else "—", f"{n - bad}/{n}", err[:300]])
    return table(["job", "status", "wall s", "series ok", "error"], rows)


def _notes_and_errors(results: dict) -> str:
    out = []
    for name, j in results.get("jobs", {}).items():
        items = [f"  - {n}" for n in j.get("notes", [])]
        items += [f"  - series `{s['name']}` failed: {s['error']}" for s in j.get("series", []) if s.get("error")]
        if items:
            out.append(f"- **{name}**\n" + "\n".join(items))
    return ("\n".join(out) + "\n") if out else "_none_\n"


def markdown(results: dict) -> str:
    """The whole results.md."""
    series = all_series(results)
    put = pick(series, "put", "put_bw")
    ag = pick(series, "allgather")
    parts = [
        "# rshmem benchmarks\n\n",
        _meta(results),
        "\nRatio columns (`x`): rshmem / baseline for bandwidth, baseline / rshmem for time; above 1 means "
        f"rshmem is ahead. `{BAD}` marks a value whose bytes did not arrive intact (left out of ratios); "
        "`—` means not measured. Times are medians (CUDA events after warm-up; host clock on the host backend); "
        "see docs/benchmarks.md.\n\n",
        "## Jobs\n\n", _jobs(results),
        "\n## Targets\n\n",
        ("_This run used rshmem's host backend (no GPU): the goals are for 2 GPUs joined by NVLink, so the "
         "verdicts below mean nothing here._\n\n" if results.get("meta", {}).get("backend") == "host" else ""),
        ("_This run's PEs shared one GPU (RSHMEM_ALLOW_SHARED_GPU=1): every transfer was checked, but the times "
         "and verdicts below mean nothing for speed, and baselines that cannot share a GPU (NCCL) did not "
         "run._\n\n" if results.get("meta", {}).get("shared_gpu") else ""),
        targets(series),
        "\n## Put bandwidth, PE 0 -> PE 1 (GB/s)\n\n",
        "Physical reference: about 450 GB/s per direction (18 NVLink4 links).\n\n",
        value_table(put, "bytes", "gbps"), "\n", ratio_tables(put, "bytes", "gbps", "higher"),
        f"\n## Put: CTAs x warps at {fmt_size(256 * MiB)} (GB/s)\n\n", sweep_table(pick(series, "put", "cta_sweep")),
        "\n## Latency (us)\n\n", op_table(pick(series, "latency"), "median_us", "us"),
        "\n## All-gather: bus bandwidth (GB/s), bytes per rank\n\n",
        value_table(ag, "bytes", "busbw_gbps"), "\n", ratio_tables(ag, "bytes", "busbw_gbps", "higher"),
        "\n## All-gather: time per call (us), bytes per rank\n\n",
        value_table(ag, "bytes", "median_us"), "\n", ratio_tables(ag, "bytes", "median_us", "lower"),
        "\n## Start-up (s): until the first symmetric buffer is usable\n\n", op_table(pick(series, "init"), "s", "s"),
        report_fused.section(series),
        "\n## Notes and errors\n\n", _notes_and_errors(results),
    ]
    return "".join(parts)


def write_all(results: dict, out: Path) -> list[str]:
    """Writes results.md and the PNG plots into `out`; returns lines saying what was written."""
    lines = []
    md = out / "results.md"
    md.write_text(markdown(results))
    lines.append(f"wrote {md}")
    try:
        from benchmarks.reporting import plots  # matplotlib: the tables are written without it

        lines += [f"wrote {p}" for p in plots.write(results, out)]
    except ImportError as e:
        lines.append(f"plots skipped: {e}")
    except Exception as e:  # noqa: BLE001 (a plotting problem must not lose the tables)
        from benchmarks.harness.common import short_error

        lines.append(f"plots failed: {short_error(e)}")
    return lines
