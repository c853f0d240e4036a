"""The tutorials run end to end under torchrun on the host backend."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import free_port

ROOT = Path(__file__).resolve().parents[2]




@pytest.mark.single
def test_allgather_tutorial_under_torchrun():
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT")}
    env["RSHMEM_BACKEND"] = "host"
    env["CUDA_VISIBLE_DEVICES"] = ""  # the tutorial's host path, even on a GPU machine
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
        "--master-addr", "127.0.0.1", "--master-port", str(free_port()),
        str(ROOT / "tutorials" / "02_intra_node_allgather.py"), "--M", "256", "--N", "384", "--iters", "3",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "host backend" in out.stdout
    assert "skipped the Triton push-kernel variant" in out.stdout
    assert "pull allgather: correct" in out.stdout


# ---------------------------------------------------------------- tutorials 01, 03, 04 and the GPU runs
# Each tutorial checks its own result and exits non-zero when it is wrong; these tests run them
# under torchrun and check what they say they checked (and, on the host backend, skipped).


def _run_tutorial(script: str, *args: str, nproc: int = 2, host: bool = True) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT")}
    if host:
        env["RSHMEM_BACKEND"] = "host"
        env["CUDA_VISIBLE_DEVICES"] = ""  # the tutorial's host path, even on a GPU machine
    else:
        env.pop("RSHMEM_BACKEND", None)
        env.pop("RSHMEM_ALLOW_SHARED_GPU", None)  # a tutorial opts in to a shared GPU by itself
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc),
        "--master-addr", "127.0.0.1", "--master-port", str(free_port()),
        str(ROOT / "tutorials" / script), *args,
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


@pytest.mark.single
def test_notify_wait_tutorial_on_the_host_backend():
    out = _run_tutorial("01_notify_wait.py", "--rounds", "20", "--elems", "1000")
    assert "producer/consumer (host API" in out and "correct (20 messages" in out
    assert "skipped the Triton kernels" in out


@pytest.mark.single
def test_ring_allreduce_tutorial_on_the_host_backend_3_pes():
    out = _run_tutorial("03_ring_allreduce.py", "--elems", "30000", nproc=3)
    assert "over 3 PEs on the host backend" in out
    assert "ring allreduce (host API" in out and "correct (equal to torch.distributed.all_reduce" in out
    assert "second call (no reset between calls): correct" in out
    assert "skipped the Triton kernel" in out


@pytest.mark.single
def test_simple_shift_tutorial_on_the_host_backend_3_pes():
    out = _run_tutorial("04_simple_shift.py", nproc=3)
    assert "shift (host API p + putmem, then barrier_all): correct" in out
    assert "skipped the Triton kernels" in out


@pytest.mark.single
def test_tensor_parallel_mlp_tutorial_on_the_host_backend():
    out = _run_tutorial("05_tensor_parallel_mlp.py", "--steps", "2", "--iters", "2")
    assert "2 PEs on the host backend" in out
    assert out.count("gradients match") == 4  # 2 steps in each of the two forms
    assert "training with the fused ops matches the unparallel block" in out
    assert "replicated-input form matches the unparallel block too" in out
    assert "fused (rshmem.ops" in out and "unfused (gloo + torch.matmul)" in out
    assert "mean nothing for speed" in out


def _gpus() -> int:
    try:
        import torch

        return torch.cuda.device_count()
    except Exception:
        return 0


# On one GPU the tutorials opt in to sharing it (2 PEs, torch.distributed on gloo) and say so.
needs_gpu = pytest.mark.skipif(_gpus() < 1, reason="needs a CUDA GPU (the tutorials' Triton kernels)")
SHARED = 0 < _gpus() < 2
DIST = "gloo" if SHARED else "nccl"


def _says_how_gpus_are_used(out: str) -> None:
    if SHARED:
        assert "note: 2 PEs share 1 GPU(s)" in out and "mean nothing for speed" in out, out
    else:
        assert "share" not in out, out


@pytest.mark.gpu
@pytest.mark.single
@needs_gpu
def test_notify_wait_tutorial_on_gpus():
    out = _run_tutorial("01_notify_wait.py", host=False)
    _says_how_gpus_are_used(out)
    assert "on the cuda backend" in out
    assert "producer/consumer (Triton kernels" in out and "correct (50 messages" in out
    assert "skipped" not in out


@pytest.mark.gpu
@pytest.mark.single
@needs_gpu
def test_allgather_tutorial_on_gpus_runs_both_variants_and_times_them():
    out = _run_tutorial("02_intra_node_allgather.py", "--M", "2048", "--N", "4096", host=False)
    _says_how_gpus_are_used(out)
    assert "on the cuda backend" in out
    assert "pull allgather: correct" in out and "push allgather: correct" in out
    assert "times (CUDA events" in out
    for name in ("rshmem pull", "rshmem push (Triton kernel", f"torch.distributed all_gather ({DIST})"):
        assert name in out, out
    assert "skipped" not in out


@pytest.mark.gpu
@pytest.mark.single
@needs_gpu
def test_ring_allreduce_tutorial_on_gpus():
    out = _run_tutorial("03_ring_allreduce.py", "--elems", str(1 << 20), host=False)
    _says_how_gpus_are_used(out)
    assert "ring allreduce (one Triton kernel" in out and "correct (equal to torch.distributed.all_reduce" in out
    assert "second call (no reset between calls): correct" in out
    assert f"torch.distributed all_reduce ({DIST})" in out
    assert "skipped" not in out


@pytest.mark.gpu
@pytest.mark.single
@needs_gpu
def test_simple_shift_tutorial_on_gpus():
    out = _run_tutorial("04_simple_shift.py", host=False)
    _says_how_gpus_are_used(out)
    assert "shift (Triton kernels int_p + putmem_block, then barrier_all_block): correct" in out
    assert "skipped" not in out


@pytest.mark.gpu
@pytest.mark.single
@pytest.mark.skipif(_gpus() < 1, reason="needs a CUDA GPU (the fused ops' Triton kernels)")
def test_tensor_parallel_mlp_tutorial_on_gpus(monkeypatch):
    # On one GPU the tutorial's setup lets the 2 PEs share it (and says the times mean nothing).
    # No GEMM tuning: it would only cost GPU time here (the benchmarks tune).
    monkeypatch.setenv("RSHMEM_OPS_AUTOTUNE", "0")
    out = _run_tutorial("05_tensor_parallel_mlp.py", "--hidden", "1024", "--tokens", "2048", "--steps", "2",
                        "--iters", "3", host=False)
    assert "2 PEs on the cuda backend" in out
    assert out.count("gradients match") == 4
    assert "training with the fused ops matches the unparallel block" in out
    assert "replicated-input form matches the unparallel block too" in out
    assert "fused (rshmem.ops AllGather+GEMM, GEMM+ReduceScatter)" in out and "unfused (" in out
