"""Starts one job as `nproc` fresh processes (one per PE) and waits for them, with a time limit.

The processes get torchrun-style variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
MASTER_ADDR, MASTER_PORT on a free port) and none of torchrun's own agent variables, because a
`TORCHELASTIC_*` variable would make them look for the outer torchrun's store. Each process
leads its own process group (session), so a job past its limit is ended by signalling exactly
the groups started here. Logs go to `<out>/logs/<job>.rank<r>.log`.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.harness import env

# Variables torchrun sets for its workers; a job's processes get their own values or none.
_LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
                  "ROLE_RANK", "ROLE_NAME", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                  "RSHMEM_BOOTSTRAP_PORT", "RSHMEM_BOOTSTRAP_SECRET")

# After one process of a job fails, how long the others get to finish on their own.
FAIL_GRACE_S = 15.0


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A TCP port that is free on 127.0.0.1 and whose successor is free too (a bootstrap that
    reads the torchrun variables listens on MASTER_PORT + 1)."""
    for _ in range(64):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port < 65535 and _port_free(port + 1):
            return port
    raise RuntimeError("found no free pair of TCP ports on 127.0.0.1 in 64 tries")


def child_env(rank: int, nproc: int, port: int, extra: dict) -> dict:
    """The environment of PE `rank` of a job."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("TORCHELASTIC_") and k not in _LAUNCHER_VARS}
    e.update(env.NVLS_OFF)
    e.update({"RANK": str(rank), "WORLD_SIZE": str(nproc), "LOCAL_RANK": str(rank),
              "LOCAL_WORLD_SIZE": str(nproc), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    # The job imports `benchmarks` from this checkout, and `rshmem` from wherever the driver
    # found it (an installed wheel or the in-tree python/ folder).
    paths = [str(env.ROOT)]
    try:
        import importlib.util

        spec = importlib.util.find_spec("rshmem")
        if spec is not None and spec.origin:
            paths.append(str(Path(spec.origin).resolve().parent.parent))
    except (ImportError, ValueError):
        pass
    old = e.get("PYTHONPATH")
    e["PYTHONPATH"] = os.pathsep.join(paths + ([old] if old else []))
    e.update({k: str(v) for k, v in extra.items()})
    return e


def _kill(procs: list[subprocess.Popen]) -> None:
    """SIGTERM, then SIGKILL after 5 s, to the process group of each still-running process."""
    alive = [p for p in procs if p.poll() is None]
    for p in alive:
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 5.0
    for p in alive:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()


def _tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(text[-lines:])


def run_job(job: str, argv: list[str], nproc: int, timeout_s: float, out: Path, extra_env: dict,
            progress=None) -> dict:
    """Runs `python -m benchmarks.worker <argv>` as `nproc` PEs; returns
    {"status": "ok"|"failed"|"timeout", "returncodes", "wall_s", "logs", "log_tail"}. `progress`,
    if given, is called about once a second while the job runs (and once at its end)."""
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    port = free_port()
    procs, files, paths = [], [], []
    t0 = time.monotonic()
    for r in range(nproc):
        path = logs / f"{job}.rank{r}.log"
        f = open(path, "w")  # noqa: SIM115 (closed below, after the process ends)
        files.append(f)
        paths.append(path)
        procs.append(subprocess.Popen([sys.executable, "-m", "benchmarks.worker", *argv],
                                      cwd=str(env.ROOT), env=child_env(r, nproc, port, extra_env),
                                      stdout=f, stderr=subprocess.STDOUT, start_new_session=True))
    status = "ok"
    first_fail = None
    last_progress = t0
    while True:
        codes = [p.poll() for p in procs]
        now = time.monotonic()
        if progress is not None and now - last_progress >= 1.0:
            progress()
            last_progress = now
        if all(c is not None for c in codes):
            break
        if any(c not in (None, 0) for c in codes) and first_fail is None:
            first_fail = now
        if first_fail is not None and now - first_fail > FAIL_GRACE_S:
            status = "failed"
            _kill(procs)
            break
        if now - t0 > timeout_s:
            status = "timeout"
            _kill(procs)
            break
        time.sleep(0.2)
    for f in files:
        f.close()
    if progress is not None:
        progress()
    codes = [p.returncode for p in procs]
    if status == "ok" and any(c != 0 for c in codes):
        status = "failed"
    tail = ""
    if status != "ok":
        tail = "\n".join(f"--- rank {r} (exit {codes[r]}) ---\n{_tail(p)}" for r, p in enumerate(paths))
    return {"status": status, "returncodes": codes, "wall_s": round(time.monotonic() - t0, 2),
            "logs": [str(p) for p in paths], "log_tail": tail}
