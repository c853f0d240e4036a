"""The ops' choices that a user or a benchmark may want to fix: `rshmem.ops.config`.

Each field starts from an environment variable (read once, at import) and may be changed at run
time; every PE must use the same values (they decide collective behaviour).

| field | variable | default | meaning |
|---|---|---|---|
| `autotune` | `RSHMEM_OPS_AUTOTUNE` | `1` | time the candidate GEMM configurations on the first call of a shape (on PE 0's pick every PE agrees); `0`: the first candidate, no timing |
| `ag_producer` | `RSHMEM_OPS_AG_PRODUCER` | `auto` | how AllGather+GEMM moves the shards: `copy_engine` (`putmem_signal_on_stream` on a side stream), `sm` (`putmem_signal_block` from a few CTAs beside the GEMM), `auto` (by shard size) |
| `ag_sm_max_bytes` | `RSHMEM_OPS_AG_SM_MAX_BYTES` | 4 MiB | `auto` uses the SM producer for shards up to this many bytes, the copy engine above |
| `ag_sm_ctas` | `RSHMEM_OPS_AG_SM_CTAS` | 8 | CTAs per peer of the SM producer (chunks per shard); the GEMM leaves them their SMs |
| `allreduce_form` | `RSHMEM_OPS_ALLREDUCE` | `auto` | `one_shot`, `two_shot` or `auto` (one-shot on 2 PEs and up to `allreduce_one_shot_max` bytes, two-shot above) |
| `allreduce_one_shot_max` | `RSHMEM_OPS_ALLREDUCE_ONE_SHOT_MAX` | 256 KiB | see `allreduce_form` |
| `allreduce_piece_bytes` | `RSHMEM_OPS_ALLREDUCE_PIECE_BYTES` | 64 MiB | larger all-reduces run as pieces of this size (the largest workspace) |
| `allreduce_nccl_min_bytes` | `RSHMEM_OPS_ALLREDUCE_NCCL_MIN_BYTES` | 8 MiB | on GPUs, all-reduces of at least this many bytes over a group whose torch.distributed backend is NCCL are NCCL's `all_reduce` (see `_allreduce`); `0`: never |
| `gemm_small_rows` | `RSHMEM_OPS_GEMM_SMALL_ROWS` | 512 | AllGather+GEMM with at most this many rows of C (all PEs' tokens), and GEMM+ReduceScatter on one PE with at most this many rows of A, run as the gathered A and one cuBLAS GEMM (`torch.mm`) instead of the fused kernel: at decode sizes the GEMM is latency-bound and cuBLAS's small-M kernels win (measured in `docs/benchmarks.md`); `0`: always the fused kernel |
| `group_workspace_bytes` | `RSHMEM_OPS_GROUP_WORKSPACE_BYTES` | `0`: 1 GiB on the cuda backend, 64 MiB on the host backend | symmetric memory `register_group` sets aside on every PE for the workspaces of a group of only some PEs (1 GiB holds AllGather+GEMM, GEMM+ReduceScatter and all-reduce workspaces at 8192 x 8192 bf16) |
| `launcher` | `RSHMEM_OPS_LAUNCHER` | `rshmem` | how a planned call launches its kernels: `rshmem` (the packed launch, `_launch`), `triton` (Triton's C launcher with the same packed arguments: the comparison, and a way around the packed launch should it ever be wrong) |
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from .._native import ConfigError

_PRODUCERS = ("auto", "copy_engine", "sm")
_ON_CHANGE: list = []  # called after any field of `config` is set
_FORMS = ("auto", "one_shot", "two_shot")
_LAUNCHERS = ("rshmem", "triton")


def _int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw, 0)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not an integer") from None
    if value < 0:
        raise ConfigError(f"{name}={raw!r} must be >= 0")
    return value


def _choice(name: str, default: str, allowed: tuple) -> str:
    raw = os.environ.get(name) or default
    if raw not in allowed:
        raise ConfigError(f"{name}={raw!r}; allowed values: {', '.join(allowed)}")
    return raw


@dataclass
class Config:
    """See the module docstring."""

    autotune: bool = bool(_int("RSHMEM_OPS_AUTOTUNE", 1))
    ag_producer: str = _choice("RSHMEM_OPS_AG_PRODUCER", "auto", _PRODUCERS)
    ag_sm_max_bytes: int = _int("RSHMEM_OPS_AG_SM_MAX_BYTES", 4 << 20)
    ag_sm_ctas: int = max(1, _int("RSHMEM_OPS_AG_SM_CTAS", 8))
    allreduce_form: str = _choice("RSHMEM_OPS_ALLREDUCE", "auto", _FORMS)
    allreduce_one_shot_max: int = _int("RSHMEM_OPS_ALLREDUCE_ONE_SHOT_MAX", 256 << 10)
    allreduce_piece_bytes: int = max(1 << 16, _int("RSHMEM_OPS_ALLREDUCE_PIECE_BYTES", 64 << 20))
    allreduce_nccl_min_bytes: int = _int("RSHMEM_OPS_ALLREDUCE_NCCL_MIN_BYTES", 8 << 20)
    gemm_small_rows: int = _int("RSHMEM_OPS_GEMM_SMALL_ROWS", 512)
    group_workspace_bytes: int = _int("RSHMEM_OPS_GROUP_WORKSPACE_BYTES", 0)
    launcher: str = _choice("RSHMEM_OPS_LAUNCHER", "rshmem", _LAUNCHERS)

    def __setattr__(self, name, value) -> None:
        # The ops' plans (`_library`) hold choices made from these values: a change drops them.
        object.__setattr__(self, name, value)
        for hook in _ON_CHANGE:
            hook()

    def check(self) -> None:
        """Raises ConfigError for a value set at run time that no op can use."""
        if self.ag_producer not in _PRODUCERS:
            raise ConfigError(f"rshmem.ops.config.ag_producer={self.ag_producer!r}; allowed: {', '.join(_PRODUCERS)}")
        if self.allreduce_form not in _FORMS:
            raise ConfigError(f"rshmem.ops.config.allreduce_form={self.allreduce_form!r}; allowed: {', '.join(_FORMS)}")
        if self.launcher not in _LAUNCHERS:
            raise ConfigError(f"rshmem.ops.config.launcher={self.launcher!r}; allowed: {', '.join(_LAUNCHERS)}")


config = Config()
