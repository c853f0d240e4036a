"""The tutorials run end to end under torchrun on the host backend."""

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
