"""Helpers shared by the `test_cuda_*.py` modules (GPU tests of the cuda backend).

Random data is made from a seed on this PE's GPU, so any PE can rebuild what another PE wrote
(`rand(..., seed=peer)`) and compare bit for bit without moving it.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import time
from pathlib import Path

import torch

import rshmem
import rshmem.torch as rtorch

ROOT = Path(__file__).resolve().parents[1]


def dev() -> torch.device:
    """This PE's GPU."""
    from rshmem import _cuda

    return _cuda.device()


def generator(seed: int) -> torch.Generator:
    g = torch.Generator(device=dev())
    g.manual_seed(seed)
    return g


def rand(numel: int, dtype, seed: int) -> torch.Tensor:
    """`numel` random elements of `dtype` on this PE's GPU, the same for the same seed on every
    PE: normal samples for floating dtypes (no NaN, so min/max/sum compare), random bits for the
    rest (integers, fp8, bool as raw bytes)."""
    g = generator(seed)
    if dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        return torch.randn(numel, dtype=torch.float32, device=dev(), generator=g).to(dtype)
    raw = torch.randint(0, 256, (numel * dtype.itemsize,), dtype=torch.uint8, device=dev(), generator=g)
    if dtype == torch.bool:
        return (raw & 1).view(torch.bool)
    return raw.view(dtype)


def sym(shape, dtype, fill=None) -> torch.Tensor:
    """A symmetric tensor, optionally filled, ready on every PE (ends in a barrier)."""
    t = rtorch.create_symmetric_tensor(shape, dtype)
    if fill is not None:
        t.fill_(fill)
    settle()
    return t


def settle() -> None:
    """Finishes this PE's GPU work, then waits for every PE to do the same."""
    torch.cuda.synchronize(dev())
    rshmem.barrier_all()


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equality (NaN payloads and -0.0 included), on any device."""
    a, b = a.contiguous(), b.contiguous()
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return torch.equal(a.view(torch.uint8), b.to(a.device).view(torch.uint8))


def _fold(op: str, xs):
    f = {
        "sum": torch.add,
        "prod": torch.mul,
        "min": torch.minimum,
        "max": torch.maximum,
        "and": torch.bitwise_and,
        "or": torch.bitwise_or,
        "xor": torch.bitwise_xor,
    }[op]
    return functools.reduce(f, xs)


def ref_reduce(op: str, xs) -> torch.Tensor:
    """The element-wise `op` of the CPU tensors `xs` in their dtype, wrapping like C. torch's CPU
    kernels lack add/min/max for the wide unsigned types, which go through int64 here."""
    dt = xs[0].dtype
    if dt in (torch.uint16, torch.uint32):
        wide = _fold(op, [x.to(torch.int64) for x in xs])
        return (wide & ((1 << (8 * dt.itemsize)) - 1)).to(dt)
    if dt == torch.uint64:
        signed = [x.view(torch.int64) for x in xs]
        if op in ("min", "max"):  # order unsigned values by flipping the top bit
            top = torch.tensor(-(1 << 63), dtype=torch.int64)
            return (_fold(op, [s ^ top for s in signed]) ^ top).view(torch.uint64)
        return _fold(op, signed).view(torch.uint64)
    return _fold(op, xs)


# ---------------------------------------------------------------------- jobs of plain processes


from conftest import free_port  # noqa: E402,F401 - the one helper, re-exported for GPU tests


def job_env(rank: int, world: int, port: int, **extra) -> dict:
    """The environment torchrun would give rank `rank` (plus `extra`; None removes a variable),
    without this test run's own launcher and RSHMEM_* variables."""
    # The run's opt-in to a shared GPU carries over: on one GPU the job's PEs share it too.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TORCHELASTIC_", "RSHMEM_")) or k == "RSHMEM_ALLOW_SHARED_GPU"}
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK"):
        env.pop(k, None)
    env.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        WORLD_SIZE=str(world),
        LOCAL_RANK=str(rank),
        LOCAL_WORLD_SIZE=str(world),
        RSHMEM_BACKEND="cuda",
        RSHMEM_BOOTSTRAP_TIMEOUT_S="30",
        RSHMEM_BOOTSTRAP_SECRET=f"cuda-test-{port}",
    )
    for k, v in extra.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


class Job:
    """`world` processes running `script` with torchrun's variables, one per rank; every process
    still running at `close()` (or at the deadline of `wait`) is killed, so nothing outlives the
    test."""

    def __init__(self, script: Path, world: int = 2, args=(), **extra_env):
        port = free_port()
        self.procs = [
            subprocess.Popen(
                [sys.executable, str(script), *map(str, args)],
                env=job_env(r, world, port, **extra_env),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for r in range(world)
        ]

    def wait(self, rank: int, timeout: float):
        """(exit code, output) of `rank`; kills it and returns code None past `timeout`."""
        p = self.procs[rank]
        try:
            out, _ = p.communicate(timeout=timeout)
            return p.returncode, out
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
            return None, out

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.communicate()


def wait_for_file(path: Path, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            return True
        time.sleep(0.05)
    return False
