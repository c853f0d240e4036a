"""torch's symm_mem API on RSHMEM gives what torch's CUDA backend gives (its ops too: one- and
two-shot all-reduce, fused all-gather + matmul and matmul + reduce-scatter, and Inductor's
micro-pipeline TP compiling all_gather + mm into the fused op), DDP over `cuda:rshmem` what DDP
over gloo gives, and the `cuda:rshmem` group's all_reduce replays from a CUDA graph: two 2-PE
jobs of symm_mem_gpu_program.py (one per backend; a backend cannot change once a tensor exists),
compared here. Marked `gpu`; 2 PEs may share one GPU (RSHMEM_ALLOW_SHARED_GPU=1,
TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES=1)."""
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
        for key in ("peer", "signalled", "one_shot", "ag", "ag_mm", "mm_rs", "mptp", "mptp_rs"):
            torch.testing.assert_close(a[key], b[key], msg=f"rank {r}: {key}")
        # torch's two-shot all-reduce: what the CUDA backend computes, RSHMEM must too.
        print(f"rank {r}: two_shot_all_reduce_ on RSHMEM: {a['two_shot'] if isinstance(a['two_shot'], str) else 'ran'}"
              f"; on CUDA: {b['two_shot'] if isinstance(b['two_shot'], str) else 'ran'}")
        if not isinstance(b["two_shot"], str):
            assert not isinstance(a["two_shot"], str), f"rank {r}: two_shot_all_reduce_ on RSHMEM: {a['two_shot']}"
            torch.testing.assert_close(a["two_shot"], b["two_shot"], msg=f"rank {r}: two_shot")
        assert a["mptp_fused"] and b["mptp_fused"], "micro-pipeline TP did not fuse the all-gather and the GEMM"
        assert a["mptp_rs_fused"] and b["mptp_rs_fused"], "micro-pipeline TP did not fuse the GEMM and the reduce-scatter"
        assert not isinstance(a["pg_graph"], str), f"rank {r}: all_reduce over cuda:rshmem in a CUDA graph: {a['pg_graph']}"
        torch.testing.assert_close(a["pg_graph"], torch.full((1024,), 3.0))
        for p, q in zip(a["ddp"], b["ddp"]):
            torch.testing.assert_close(p, q, rtol=0, atol=0)
