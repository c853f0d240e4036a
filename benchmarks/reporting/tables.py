"""What the report and the plots share: picking series out of results.json, ratios, and
formatting numbers and Markdown tables."""
from __future__ import annotations

from benchmarks.harness.common import fmt_size

OURS = "rshmem"
BAD = "!"


# ------------------------------------------------------------------------------ selection


def all_series(results: dict) -> list[dict]:
    """Every series of every job, each with its job name added (key 'job')."""
    out = []
    for name, job in sorted(results.get("jobs", {}).items()):
        for s in job.get("series", []):
            out.append({**s, "job": name})
    return sorted(out, key=lambda s: s.get("impl") != OURS)  # rshmem's columns first, order kept otherwise


def pick(series: list[dict], suite: str, kind: str | None = None) -> list[dict]:
    return [s for s in series if s.get("suite") == suite and (kind is None or s.get("params", {}).get("kind") == kind)]


def _points(s: dict, xkey: str) -> dict:
    """x -> point of a series (last one wins)."""
    return {p[xkey]: p for p in s.get("points", []) if xkey in p}


def _good(p: dict | None, ykey: str):
    """The value of point `p`, or None when missing or not verified."""
    if p is None or p.get(ykey) is None or p.get("verified") is False:
        return None
    return p[ykey]


def ratio(ours, base, better: str):
    """How much better `ours` is than `base` (>1: rshmem ahead); None when either is missing."""
    if ours is None or base is None or ours <= 0 or base <= 0:
        return None
    return ours / base if better == "higher" else base / ours


# ------------------------------------------------------------------------------ formatting


def fnum(v, unit: str = "") -> str:
    if v is None:
        return "—"
    if unit == "x":
        return f"{v:.2f}x"
    if abs(v) >= 100:
        return f"{v:.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def fcell(p: dict | None, ykey: str) -> str:
    if p is None or p.get(ykey) is None:
        return "—"
    return fnum(p[ykey]) + (BAD if p.get("verified") is False else "")


def fx(xkey: str, x) -> str:
    return fmt_size(x) if xkey == "bytes" else str(x)


def table(header: list[str], rows: list[list[str]]) -> str:
    if not rows:
        return "_no data_\n"
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"
