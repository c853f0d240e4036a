"""``triton_dist.profiler_utils`` beyond ``perf_func``: torch-profiler contexts (one trace per
rank, merged on rank 0), timing with the L2 cache flushed, latency and peak memory, and the
comparison table. Re-exported by ``rshmem.compat.triton_dist``."""
from __future__ import annotations

import contextlib
import gc
import gzip
import json
import logging
from pathlib import Path

import torch

from rshmem.compat._td_utils import perf_func

__all__ = ["group_profile", "get_torch_prof_ctx", "AutoExportProfiler", "perf_func_with_l2_reset",
           "benchmark_latency_memory", "print_benchmark_comparison"]

_log = logging.getLogger("rshmem.compat.triton_dist")


def _profiler(with_stack: bool):
    return torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA],
        record_shapes=True, with_stack=with_stack)


def get_torch_prof_ctx(do_prof: bool):
    """A torch profiler (CPU and CUDA) when ``do_prof``, else a context that does nothing."""
    return _profiler(with_stack=False) if do_prof else contextlib.nullcontext()


class group_profile:  # noqa: N801 (their name)
    """Context manager: with ``do_prof``, profiles the block on every rank of ``group`` (default
    WORLD), writes ``prof/NAME/rankR.json``, and with ``merge_group`` gathers the traces on rank 0
    into ``prof/NAME_merged.json[.gz]`` (each rank's events under a process id of its own, so
    the ranks show as separate rows), removing the per-rank files when ``keep_merged_only``.
    Collective when ``do_prof`` and ``merge_group``."""

    def __init__(self, name: str, do_prof: bool = True, merge_group: bool = True, keep_merged_only: bool = True,
                 compress: bool = True, group=None):
        self.name, self.do_prof, self.merge_group = name, do_prof, merge_group
        self.keep_merged_only, self.compress = keep_merged_only, compress
        self.group = group
        self.profile = _profiler(with_stack=True) if do_prof else None

    def _group(self):
        return self.group or torch.distributed.group.WORLD

    def _rank(self) -> int:
        return torch.distributed.get_rank(self._group()) if torch.distributed.is_initialized() else 0

    @property
    def trace_file(self) -> Path:
        return Path("prof") / self.name / f"rank{self._rank()}.json"

    def __enter__(self):
        if self.do_prof:
            self.profile.__enter__()
        return self

    def __exit__(self, exc_type, exc, tb):
        if not self.do_prof:
            return False
        self.profile.__exit__(exc_type, exc, tb)
        if exc_type is not None:
            return False
        self.trace_file.parent.mkdir(parents=True, exist_ok=True)
        self.profile.export_chrome_trace(str(self.trace_file))
        _log.info("chrome trace written to %s", self.trace_file)
        if self.merge_group and torch.distributed.is_initialized():
            self.merge_all()
        return False

    def merge_all(self) -> Path | None:
        """Collective: gathers every rank's trace on rank 0 and writes the merged file; returns
        its path on rank 0, None elsewhere."""
        group = self._group()
        content = self.trace_file.read_bytes()
        gathered = [None] * torch.distributed.get_world_size(group) if self._rank() == 0 else None
        torch.distributed.gather_object(content, gathered, dst=torch.distributed.get_global_rank(group, 0),
                                        group=group)
        out = None
        if self._rank() == 0:
            events = []
            for rank, raw in enumerate(gathered):
                for ev in json.loads(raw).get("traceEvents", []):
                    ev["pid"] = f"rank{rank}:{ev.get('pid', '')}"
                    events.append(ev)
            out = Path("prof") / f"{self.name}_merged.json{'.gz' if self.compress else ''}"
            data = json.dumps({"traceEvents": events}).encode()
            out.write_bytes(gzip.compress(data) if self.compress else data)
        torch.distributed.barrier(group)
        if self.keep_merged_only:
            self.trace_file.unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                self.trace_file.parent.rmdir()  # the last rank to leave removes the folder
        return out


class AutoExportProfiler:
    """A torch profiler that writes its chrome trace to ``trace_file`` on exit (nothing when
    ``trace_file`` is None)."""

    def __init__(self, trace_file: str | None):
        self.trace_file = trace_file
        self.ctx = contextlib.nullcontext() if trace_file is None else _profiler(with_stack=False)

    def __enter__(self):
        self.ctx.__enter__()
        return self

    def __exit__(self, *exc):
        self.ctx.__exit__(*exc)
        if self.trace_file is not None:
            Path(self.trace_file).parent.mkdir(parents=True, exist_ok=True)
            self.ctx.export_chrome_trace(self.trace_file)
        return False


def perf_func_with_l2_reset(func, iters: int, warmup_iters: int):
    """Like perf_func, but zeroes a 256 MiB buffer after every call (more than any GPU's L2) and
    times each call alone; returns (last output, mean milliseconds per call)."""
    flush = torch.empty(64 * 2**20, dtype=torch.int32, device="cuda")
    output = None
    for _ in range(warmup_iters):
        output = func()
        flush.zero_()
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
    for start, stop in pairs:
        start.record()
        output = func()
        stop.record()
        flush.zero_()
    torch.cuda.current_stream().synchronize()
    return output, sum(a.elapsed_time(b) for a, b in pairs) / max(iters, 1)


def benchmark_latency_memory(func, iters: int = 100, warmup_iters: int = 10, pre_func=None):
    """(milliseconds per call, peak MiB one call allocates beyond what was allocated before)."""
    for _ in range(warmup_iters):
        if pre_func:
            pre_func()
        func()
    _, ms = perf_func(func, iters, warmup_iters)
    if pre_func:
        pre_func()
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    result = func()
    torch.cuda.synchronize()
    peak_mib = (torch.cuda.max_memory_allocated() - base) / 2**20
    del result
    gc.collect()
    torch.cuda.empty_cache()
    return ms, peak_mib


def print_benchmark_comparison(all_implementations: dict, test_name: str = "", param_names=None, title_params=None):
    """Prints one table per implementation pass: a row per configuration (the tuple keys of
    ``all_implementations``, columns named by ``param_names``), a column pair (latency ms, memory
    MiB) per implementation, plus its precision check. ``title_params`` go into the title."""
    if not all_implementations:
        print(f"{test_name}: no results")
        return
    title = test_name + (" (" + ", ".join(f"{k}={v}" for k, v in (title_params or {}).items()) + ")"
                         if title_params else "")
    configs = list(all_implementations)
    width = len(configs[0]) if isinstance(configs[0], tuple) else 1
    names = list(param_names or [f"param_{i}" for i in range(width)])
    names = [n for n in names if n not in (title_params or {})]
    impls = []
    for row in all_implementations.values():
        impls += [k for k in row if k not in impls]
    print(f"\n=== {title} ===")
    header = names + [f"{i} {what}" for i in impls for what in ("ms", "MiB", "ok")]
    print(" | ".join(header))
    for cfg, row in all_implementations.items():
        cells = [str(c) for c in (cfg if isinstance(cfg, tuple) else (cfg,))][:len(names)]
        for i in impls:
            r = row.get(i, {})
            cells += [f"{r['latency']:.4f}" if "latency" in r else "-", f"{r['memory']:.1f}" if "memory" in r else "-",
                      str(r.get("precision", "-"))]
        print(" | ".join(cells))
