"""PNG plots of results.json (matplotlib, Agg backend). Sizes and values on log axes; bandwidth
plots carry the physical reference line (about 450 GB/s per direction: 18 NVLink4 links).
rshmem curves are solid, baselines dashed; points whose bytes did not arrive intact are left out.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

from benchmarks.harness.common import fmt_size  # noqa: E402
from benchmarks.reporting.tables import OURS, _good, all_series, pick  # noqa: E402

NVLINK_GBPS = 450.0


def _size_axis(ax) -> None:
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: fmt_size(int(v)) if v >= 1 else ""))
    for label in ax.get_xticklabels():
        label.set_rotation(45)


def _curves(ax, series: list[dict], xkey: str, ykey: str, label=None) -> int:
    drawn = 0
    for s in series:
        pts = sorted((p[xkey], _good(p, ykey)) for p in s.get("points", []) if xkey in p)
        pts = [(x, y) for x, y in pts if y is not None and y > 0]
        if not pts:
            continue
        xs, ys = zip(*pts)
        ax.plot(xs, ys, marker="o", markersize=3, linestyle="-" if s["impl"] == OURS else "--",
                label=label(s) if label else f"{s['impl']}: {s['name']}")
        drawn += 1
    return drawn


def _save(fig, ax, path: Path, reference: bool, drawn: int) -> Path | None:
    if not drawn:
        plt.close(fig)
        return None
    if reference:
        ax.axhline(NVLINK_GBPS, color="grey", linestyle=":", label="18 x NVLink4, one direction (~450 GB/s)")
    ax.set_yscale("log")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _size_plot(series, ykey, ylabel, title, path: Path, reference: bool) -> Path | None:
    fig, ax = plt.subplots(figsize=(10, 6))
    drawn = _curves(ax, series, "bytes", ykey)
    _size_axis(ax)
    ax.set_xlabel("bytes" + (" per rank" if "all-gather" in title else ""))
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    return _save(fig, ax, path, reference, drawn)


def _sweep_plot(series, path: Path) -> Path | None:
    fig, ax = plt.subplots(figsize=(10, 6))
    drawn = _curves(ax, series, "ctas", "gbps", label=lambda s: f"{s['impl']}, {s['params'].get('warps')} warps")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("CTAs")
    ax.set_ylabel("GB/s")
    ax.set_title("putmem_block at 256 MiB: CTAs x warps")
    return _save(fig, ax, path, True, drawn)


def _latency_plot(series, path: Path) -> Path | None:
    bars = []
    for s in series:
        for p in s.get("points", []):
            v = _good(p, "median_us")
            if v is not None:
                bars.append((f"{s['params'].get('op', s['name'])} [{s['impl']}]", v, s["impl"] == OURS))
    if not bars:
        return None
    bars.sort()
    fig, ax = plt.subplots(figsize=(10, 0.45 * len(bars) + 1.5))
    ax.barh([b[0] for b in bars], [b[1] for b in bars], color=["tab:blue" if b[2] else "tab:orange" for b in bars])
    ax.set_xscale("log")
    ax.set_xlabel("microseconds (median)")
    ax.set_title("Latency (rshmem blue, baselines orange)")
    ax.tick_params(axis="y", labelsize=7)
    ax.grid(True, axis="x", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write(results: dict, out: Path) -> list[Path]:
    """Writes every plot that has data; returns their paths."""
    series = all_series(results)
    put = pick(series, "put", "put_bw")
    ag = pick(series, "allgather")
    made = [
        _size_plot(put, "gbps", "GB/s", "Put bandwidth, PE 0 -> PE 1", out / "put_bandwidth.png", True),
        _size_plot(put, "median_us", "microseconds (median)", "Put time, PE 0 -> PE 1", out / "put_latency.png",
                   False),
        _sweep_plot(pick(series, "put", "cta_sweep"), out / "put_cta_sweep.png"),
        _latency_plot(pick(series, "latency"), out / "latency.png"),
        _size_plot(ag, "busbw_gbps", "bus bandwidth GB/s", "all-gather bus bandwidth", out / "allgather_busbw.png",
                   True),
        _size_plot(ag, "median_us", "microseconds (median)", "all-gather time per call", out / "allgather_latency.png",
                   False),
    ]
    return [p for p in made if p is not None]
