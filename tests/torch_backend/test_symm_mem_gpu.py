"""torch's symm_mem API on RSHMEM gives what torch's CUDA backend gives, and DDP over
`cuda:rshmem` what DDP over gloo gives: two 2-PE jobs of symm_mem_gpu_program.py (one per
backend; a backend cannot change once a tensor exists), compared here. Marked `gpu`; 2 PEs may
share one GPU (RSHMEM_ALLOW_SHARED_GPU=1, TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES=1)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import free_port

pytestmark = [pytest.mark.gpu, pytest.mark.single]
PROGRAM = Path(__file__).with_name("symm_mem_gpu_program.py")


def _run(backend, out):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RANK", "WORLD_SIZE", "LOCAL_", "MASTER_"))}
    env.update(RSHMEM_BACKEND="cuda", TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES="1", RSHMEM_BOOTSTRAP_TIMEOUT_S="120")
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port",
                           str(free_port()), str(PROGRAM), backend, str(out)], env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, f"{backend}:\n{done.stdout[-4000:]}\n{done.stderr[-8000:]}"
    return [torch.load(out / f"{backend}_{r}.pt") for r in range(2)]


def test_rshmem_equals_cuda_backend(tmp_path):
    ours, theirs = _run("RSHMEM", tmp_path), _run("CUDA", tmp_path)
    for r in range(2):
        a, b = ours[r], theirs[r]
        assert a["pg"] == "rshmem" or "rshmem" in str(a["pg"]), a["pg"]
        assert a["pad_zero"] and b["pad_zero"]
        for key in ("peer", "signalled", "one_shot", "ag", "ag_mm"):
            torch.testing.assert_close(a[key], b[key], msg=f"rank {r}: {key}")
        for p, q in zip(a["ddp"], b["ddp"]):
            torch.testing.assert_close(p, q, rtol=0, atol=0)
