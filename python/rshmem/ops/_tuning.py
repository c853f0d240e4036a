"""GEMM configurations of the fused ops: the candidates, the choice per shape, the cache.

On the first call of a shape (per op, dtype and team) each candidate runs as "the GEMM alone"
(the op's own kernel with its communication off, on the call's own inputs) a few times; the
fastest on PE 0 is taken by every PE (one exchange), because GEMM+ReduceScatter numbers its
flags by tile and the PEs must therefore tile alike. The choice is cached for the process. With
`rshmem.ops.config.autotune = False` the first candidate is taken without timing.

The candidates are for Hopper (sm_90: 227 KiB of shared memory, wgmma): 128x256 and 256x128
tiles with 64-deep K steps in 3 stages (128x256 also in 4, its C stored in halves to make room),
128x128 in 4, all with 8 warps (two warpgroups). The
pointer form (shapes TMA cannot describe) has one configuration.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass

import torch

from . import _checks, _group
from ._config import config


@dataclass(frozen=True)
class GemmConfig:
    """One tiling of a persistent GEMM: tile BM x BN, K step BK, GROUP_M row blocks per group,
    `warps`, pipeline `stages`, and whether the tile loop is flattened into the K loop."""

    BM: int
    BN: int
    BK: int
    GROUP_M: int
    warps: int
    stages: int
    flatten: bool
    split_c: bool = False  # store C in two halves (less shared memory: one more stage fits)

    def describe(self) -> str:
        return (f"{self.BM}x{self.BN}x{self.BK} group {self.GROUP_M}, {self.warps} warps, {self.stages} stages"
                + (", flattened" if self.flatten else "") + (", C in halves" if self.split_c else ""))


AG_CANDIDATES = (
    GemmConfig(128, 256, 64, 8, 8, 3, True),
    GemmConfig(128, 256, 64, 8, 8, 4, True, True),
    GemmConfig(128, 128, 64, 8, 8, 4, True),
    GemmConfig(256, 128, 64, 8, 8, 3, True),
    GemmConfig(128, 256, 64, 8, 8, 3, False),
)
# GEMM+ReduceScatter flattens the loop over the other PEs' chunks (its epilogue is only the pushes)
# and keeps its own chunk's loop (waits in the epilogue) around a pipelined K loop either way.
RS_CANDIDATES = (
    GemmConfig(128, 256, 64, 8, 8, 3, True),
    GemmConfig(128, 256, 64, 8, 8, 3, False),
    GemmConfig(128, 128, 64, 8, 8, 4, True),
    GemmConfig(128, 128, 64, 8, 8, 4, False),
    GemmConfig(256, 128, 64, 8, 8, 3, True),
    GemmConfig(256, 128, 64, 8, 8, 3, False),
)
POINTER_CONFIG = GemmConfig(128, 128, 32, 8, 8, 3, False)
# fp8 (e4m3) AllGather+GEMM: 128-deep K steps (128 bytes a row, TMA's widest swizzle; wgmma takes
# fp8 32 deep at a time), C in bf16.
AG_FP8_CANDIDATES = (
    GemmConfig(128, 256, 128, 8, 8, 3, True),
    GemmConfig(128, 256, 128, 8, 8, 4, True, True),
    GemmConfig(256, 128, 128, 8, 8, 3, True),
    GemmConfig(128, 128, 128, 8, 8, 4, True),
)
POINTER_FP8_CONFIG = GemmConfig(128, 128, 64, 8, 8, 3, False)

# float32 (TF32 wgmma): 32-deep K steps (128 bytes a row, as fp8's 128) and a C tile of 4-byte
# elements, so 128x128 tiles (3 or 4 stages), or 128x256 with C stored in halves.
AG_F32_CANDIDATES = (
    GemmConfig(128, 128, 32, 8, 8, 3, True),
    GemmConfig(128, 128, 32, 8, 8, 4, True),
    GemmConfig(128, 256, 32, 8, 8, 3, True, True),
)
RS_F32_CANDIDATES = (
    GemmConfig(128, 128, 32, 8, 8, 3, True),
    GemmConfig(128, 128, 32, 8, 8, 3, False),
    GemmConfig(128, 128, 32, 8, 8, 4, True),
)
POINTER_F32_CONFIG = GemmConfig(128, 128, 32, 8, 8, 2, False)

_chosen: dict = {}
_sms: dict = {}


def forget() -> None:
    _chosen.clear()


def num_sms() -> int:
    dev = _group.device()
    found = _sms.get(dev.index)
    if found is None:
        found = _sms[dev.index] = torch.cuda.get_device_properties(dev).multi_processor_count
    return found


def _time_ms(run, reps: int = 3) -> float:
    run()  # compiles, and warms the caches
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def choose(what: str, info: _group.TeamInfo, key: tuple, candidates: tuple, run_alone) -> GemmConfig:
    """The configuration for `key` (cached). `run_alone(cfg)` launches the GEMM alone once."""
    full = (what, info.team) + tuple(key)
    found = _chosen.get(full)
    if found is not None:
        return found
    best = 0
    if config.autotune and len(candidates) > 1:
        _checks.not_capturing(what, f"tuning for {key}")
        times = []
        for cfg in candidates:
            try:
                times.append(_time_ms(lambda cfg=cfg: run_alone(cfg)))
            except Exception as e:  # noqa: BLE001 - a candidate that does not compile or run is skipped
                if "out of resource" not in str(e).lower() and "OutOfResources" not in type(e).__name__:
                    raise
                times.append(float("inf"))
        best = min(range(len(candidates)), key=lambda i: times[i])
        # Every PE takes PE 0's choice (see the module docstring).
        best = _checks.exchange(info, [best])[0][0]
    found = _chosen[full] = candidates[best]
    return found


def chosen() -> dict:
    """The configurations chosen so far: {(op, team, *key): GemmConfig} (for benchmarks' reports)."""
    return dict(_chosen)
