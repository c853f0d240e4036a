"""torch's Triton NVSHMEM extension runs on the RSHMEM backend: nvshmem_triton_gpu_program.py's
kernels (written as torch's own tests write them, every function of the extension) on 2 PEs,
each case checking its result there. Marked `gpu`; the 2 PEs may share one GPU
(RSHMEM_ALLOW_SHARED_GPU=1, TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES=1)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import free_port

pytestmark = [pytest.mark.gpu, pytest.mark.single]
PROGRAM = Path(__file__).with_name("nvshmem_triton_gpu_program.py")
CASES = 30  # the `ok` lines each PE prints


def test_torch_triton_nvshmem_kernels_on_rshmem():
    pytest.importorskip("torch.distributed._symmetric_memory._nvshmem_triton")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RANK", "WORLD_SIZE", "LOCAL_", "MASTER_"))}
    env.update(RSHMEM_BACKEND="cuda", TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES="1", RSHMEM_BOOTSTRAP_TIMEOUT_S="120",
               RSHMEM_DEBUG_WAIT_TIMEOUT_MS="60000")
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port",
                           str(free_port()), str(PROGRAM)], env=env, capture_output=True, text=True, timeout=900)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-12000:]
    for pe in (0, 1):
        assert out.count(f"(PE {pe})") == CASES + 1, out[-6000:]
        assert f"all cases passed (PE {pe})" in out
