"""Process environment of the benchmarks, and what the results record about the machine.

`apply()` must run before torch, NCCL, NVSHMEM or rshmem initialise: NVLink multicast (NVLS) is
switched off in every library, because the machines these numbers come from do not offer it
reliably and because rshmem does not use it, so a comparison with it on would compare
different hardware paths.
"""
from __future__ import annotations

import datetime
import importlib.metadata
import os
import platform
import shutil
import socket
import subprocess
import sys
from pathlib import Path

#: Set in os.environ before anything initialises (and in every job's environment).
NVLS_OFF = {
    "NCCL_NVLS_ENABLE": "0",
    "NVSHMEM_DISABLE_NVLS": "1",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
}

ROOT = Path(__file__).resolve().parents[2]


def apply() -> None:
    """Switches NVLink multicast off for NCCL, NVSHMEM and torch symmetric memory."""
    os.environ.update(NVLS_OFF)


def _run(cmd: list[str], timeout: float = 10.0) -> str | None:
    """stdout of `cmd`, or None when it is missing, fails or takes longer than `timeout`."""
    if shutil.which(cmd[0]) is None:
        return None
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout.strip() if r.returncode == 0 else None


def _dist_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def git_commit() -> str | None:
    """The commit the GPU bundle's wheel was built from (.gpu/MANIFEST, written by
    scripts/build_gpu_bundle.sh) where there is one: the GPU machine's copy of the tree may carry
    a stale .git. Otherwise HEAD, with '+dirty' when the tree has changes."""
    manifest = ROOT / ".gpu" / "MANIFEST"
    first = manifest.read_text().splitlines()[:1] if manifest.is_file() else []
    if first and first[0].startswith("commit "):
        return first[0].removeprefix("commit ").strip() + " (.gpu/MANIFEST)"
    head = _run(["git", "-C", str(ROOT), "rev-parse", "HEAD"])
    if head is None:
        return None
    dirty = _run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"])
    return head + ("+dirty" if dirty else "")


def machine_info() -> dict:
    """What the driver knows without touching a GPU: host, CPUs, GPUs per nvidia-smi, topology,
    package versions, git commit, the NVLS settings."""
    info = {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "git_commit": git_commit(),
        "nvls_env": dict(NVLS_OFF),
        "versions": {
            pkg: _dist_version(pkg)
            for pkg in ("torch", "triton", "rshmem", "nvidia-nvshmem-cu13", "nvidia-nvshmem-cu12",
                        "nvidia-nccl-cu13", "nvidia-nccl-cu12", "matplotlib", "numpy")
        },
    }
    smi = _run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"])
    if smi is not None:
        info["gpus"] = [line.strip() for line in smi.splitlines() if line.strip()]
    topo = _run(["nvidia-smi", "topo", "-m"])
    if topo is not None:
        info["topology"] = topo
    return info


def torch_info() -> dict:
    """Versions only a process with torch loaded knows (CUDA, NCCL, device names); {} without torch."""
    try:
        import torch
    except ImportError:
        return {}
    out = {"torch": torch.__version__, "cuda": torch.version.cuda}
    try:
        out["nccl"] = ".".join(str(v) for v in torch.cuda.nccl.version())
    except Exception as e:  # noqa: BLE001 (a build without NCCL: record why)
        out["nccl"] = f"unavailable ({type(e).__name__})"
    if torch.cuda.is_available():
        out["devices"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        out["peer_access_0_1"] = (torch.cuda.device_count() > 1 and torch.cuda.can_device_access_peer(0, 1))
    try:
        import triton

        out["triton"] = triton.__version__
    except ImportError:
        pass
    try:
        import rshmem

        out["rshmem"] = rshmem.__version__
        out["rshmem_path"] = str(Path(rshmem.__file__).parent)
    except Exception as e:  # noqa: BLE001 (not built, or a broken build: record why)
        out["rshmem"] = f"unavailable ({type(e).__name__}: {e})"
    return out
