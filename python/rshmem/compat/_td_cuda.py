"""The CUDA bindings of Triton-distributed's host helpers (``from cuda import cuda, cudart`` there),
loaded on first use, and the GPU topology questions the other helper modules share."""
from __future__ import annotations

import functools
import importlib
import shutil
import subprocess
import warnings

import torch


class _LazyModule:
    """A module imported on first use, so that importing the compat layer needs no cuda-bindings."""

    def __init__(self, name: str):
        self._name = name
        self._module = None

    def __getattr__(self, attr):
        if self._module is None:
            try:
                self._module = importlib.import_module(self._name)
            except ImportError as e:
                raise ImportError(f"rshmem.compat.triton_dist: {self._name} is needed here; install cuda-bindings "
                                  f"(pip install cuda-bindings): {e}") from e
        return getattr(self._module, attr)

    def __repr__(self):
        return f"<lazy module {self._name}>"


cuda = _LazyModule("cuda.bindings.driver")
"""The CUDA driver API (``from cuda import cuda`` in Triton-distributed)."""
cudart = _LazyModule("cuda.bindings.runtime")
"""The CUDA runtime API (``from cuda import cudart``)."""


def CUDA_CHECK(err) -> None:  # noqa: N802 (their name)
    """Raises RuntimeError naming the error unless ``err`` (a driver ``CUresult`` or runtime
    ``cudaError_t``) is success."""
    # The enum's own name: asking the driver for a string needs a driver.
    if isinstance(err, cuda.CUresult):
        if err != cuda.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"CUDA driver error {int(err)} ({getattr(err, 'name', err)})")
    elif isinstance(err, cudart.cudaError_t):
        if err != cudart.cudaError_t.cudaSuccess:
            raise RuntimeError(f"CUDA runtime error {int(err)} ({getattr(err, 'name', err)})")
    else:
        raise RuntimeError(f"CUDA_CHECK: not a CUDA status: {err!r}")


def _nvlink_matrix() -> list:
    """``nvidia-smi topo -m``: 1 where two GPUs are joined by NVLink."""
    out = subprocess.check_output(["nvidia-smi", "topo", "-m"], text=True)
    rows = [line.split() for line in out.splitlines() if line.startswith("GPU")]
    return [[1 if cell.startswith("NV") else 0 for cell in row[1:len(rows) + 1]] for row in rows]


@functools.lru_cache()
def has_fullmesh_nvlink() -> bool:
    """Whether every pair of visible GPUs is joined by NVLink (true with one GPU: no pairs)."""
    n = torch.cuda.device_count()
    if n <= 1:
        return True
    if shutil.which("nvidia-smi") is None:
        warnings.warn("has_fullmesh_nvlink: nvidia-smi not found; assuming no NVLink")
        return False
    m = _nvlink_matrix()
    return all(i == j or m[i][j] == 1 for i in range(min(n, len(m))) for j in range(min(n, len(m))))
