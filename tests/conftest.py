"""Shared setup of the Python tests.

Two ways to run them (both on the host backend, no GPU needed):

    pytest tests                                   # one PE
    torchrun --nproc-per-node 2 -m pytest tests    # two PEs

On a GPU machine, `-m gpu` alone (`torchrun --nproc-per-node 2 -m pytest -m gpu tests`) runs the
session on the cuda backend; `RSHMEM_TEST_BACKEND=cuda|host` forces one. GPU tests that need the
cuda backend inside a host session take the `cuda_backend` fixture, which switches for a module.

Under torchrun, torch.distributed (gloo) and rshmem are initialized once per session; every rank
runs the same tests in the same order, so collective calls line up. Tests that need more PEs
than there are skip (marker `multi`), tests that start torchrun themselves run only as one
process (marker `single`), GPU tests skip where there is no GPU (marker `gpu`).
"""

from __future__ import annotations

import os

import pytest

UNDER_TORCHRUN = "RANK" in os.environ and "WORLD_SIZE" in os.environ

# A failing test on one rank must not leave the other waiting forever in a collective or a wait.
os.environ.setdefault("RSHMEM_BOOTSTRAP_TIMEOUT_S", "60")
os.environ.setdefault("RSHMEM_DEBUG_WAIT_TIMEOUT_MS", "60000")


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU per PE, or one GPU that the PEs share under "
                            "RSHMEM_ALLOW_SHARED_GPU=1 (skipped where there is none)")
    config.addinivalue_line("markers", "distinct_gpus(n=2): needs n different GPUs (peer links, per-GPU "
                            "speed); skipped on a shared GPU with the reason")
    config.addinivalue_line("markers", "multi: needs at least 2 PEs (run under torchrun --nproc-per-node 2)")
    config.addinivalue_line("markers", "single: runs only as one process (plain pytest)")
    SESSION["backend"] = _session_backend(config)


def _session_backend(config) -> str:
    """cuda when asked (RSHMEM_TEST_BACKEND), or when this run selects exactly the GPU tests
    (`-m gpu`) and every local PE has a GPU; host otherwise (the host tests expect CPU tensors)."""
    asked = os.environ.get("RSHMEM_TEST_BACKEND")
    if asked:
        return asked
    local = int(os.environ.get("LOCAL_WORLD_SIZE", os.environ.get("WORLD_SIZE", "1"))) if UNDER_TORCHRUN else 1
    if (config.getoption("markexpr", "") or "").strip() == "gpu" and _gpus_for(local):
        return "cuda"
    return "host"


def shared_gpu_allowed() -> bool:
    return os.environ.get("RSHMEM_ALLOW_SHARED_GPU", "").strip().lower() in ("1", "true", "yes", "on")


def _gpus_for(pes: int) -> bool:
    """Whether `pes` PEs of this host can run on the cuda backend: a GPU each, or a shared one."""
    gpus = _gpu_count()
    return gpus >= pes or (gpus >= 1 and shared_gpu_allowed())


# The backend `start()` uses; pytest_configure settles it.
SESSION = {"backend": "host"}


def _gpu_count() -> int:
    try:
        import torch

        return torch.cuda.device_count()
    except Exception:  # no torch, or a broken CUDA install: no GPU tests
        return 0


def pytest_collection_modifyitems(config, items):
    world = int(os.environ.get("WORLD_SIZE", "1")) if UNDER_TORCHRUN else 1
    gpus = _gpu_count()
    for item in items:
        if "gpu" in item.keywords and not _gpus_for(world):
            why = f"needs {world} CUDA GPU(s), {gpus} present"
            if gpus:
                why += " (RSHMEM_ALLOW_SHARED_GPU=1 lets the PEs share them)"
            item.add_marker(pytest.mark.skip(reason=why))
        distinct = item.get_closest_marker("distinct_gpus")
        if distinct is not None:
            n = distinct.kwargs.get("n", max(world, 2))
            if gpus < n:
                item.add_marker(pytest.mark.skip(reason=f"needs {n} distinct CUDA GPUs, {gpus} present"))
        if "multi" in item.keywords and world < 2:
            item.add_marker(pytest.mark.skip(reason="needs 2 PEs: run under torchrun --nproc-per-node 2"))
        if "single" in item.keywords and UNDER_TORCHRUN:
            item.add_marker(pytest.mark.skip(reason="runs as one process only (it starts its own PEs, or re-inits alone)"))


# Skips that say why the machine cannot run a test (no GPU, one PE where two are needed, two PEs
# where one is needed). With RSHMEM_TEST_STRICT_SKIPS=1 (CI sets it) any other skip fails the
# run: a missing tool (clang-19, triton) must not quietly turn tests off.
EXPECTED_SKIPS = ("GPU", "needs 2 PEs", "runs as one process only")
_unexpected_skips: list = []


def pytest_runtest_logreport(report):
    # RSHMEM_TEST_DURATIONS=1 prints each test's time as it ends (gpu_check sets it): a run cut
    # short by its deadline still says where its time went, which --durations cannot.
    if report.when == "call" and os.environ.get("RSHMEM_TEST_DURATIONS") == "1":
        print(f"\n[duration] {report.duration:8.2f} s  {report.outcome:7s} {report.nodeid}", flush=True)
    if report.skipped and isinstance(report.longrepr, tuple):
        reason = str(report.longrepr[2])
        if not any(word in reason for word in EXPECTED_SKIPS):
            _unexpected_skips.append(f"{report.nodeid}: {reason}")


def pytest_collectreport(report):
    if report.skipped and isinstance(report.longrepr, tuple):  # a module skipped as a whole
        reason = str(report.longrepr[2])
        if not any(word in reason for word in EXPECTED_SKIPS):
            _unexpected_skips.append(f"{report.nodeid}: {reason}")


def pytest_sessionfinish(session, exitstatus):
    if _unexpected_skips and os.environ.get("RSHMEM_TEST_STRICT_SKIPS") == "1":
        lines = "\n  ".join(_unexpected_skips)
        print(f"\nRSHMEM_TEST_STRICT_SKIPS=1 and these tests skipped for a reason other than GPUs or PE count:\n  {lines}")
        session.exitstatus = 1


def free_port() -> int:
    """A TCP port free on 127.0.0.1, with its successor (the bootstrap of a job started from
    torchrun's variables listens on MASTER_PORT + 1): the one helper, `benchmarks.launch`'s."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from benchmarks.harness.launch import free_port as pair

    return pair()


def run_pes(code: str, n: int, env: dict | None = None, timeout: float = 120) -> list:
    """Runs `code` (Python source) as `n` PEs of a new job, the way torchrun would start them
    (RANK, WORLD_SIZE, MASTER_ADDR/PORT, LOCAL_RANK, ...), without torch; returns one
    `subprocess.CompletedProcess` per PE (text output). A PE still running at `timeout` is
    killed and its output ends with "TIMED OUT", so a hang fails the test instead of hanging it."""
    import subprocess
    import sys

    base = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHELASTIC_", "RSHMEM_")) and k not in (
        "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT")}
    base.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE=str(n), LOCAL_WORLD_SIZE=str(n),
                RSHMEM_BOOTSTRAP_TIMEOUT_S="30", RSHMEM_BACKEND="host")
    base.update(env or {})
    procs = [
        subprocess.Popen([sys.executable, "-c", code], env={**base, "RANK": str(r), "LOCAL_RANK": str(r)},
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for r in range(n)
    ]
    import time

    deadline = time.monotonic() + timeout
    done = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            err += "\nTIMED OUT"
        done.append(subprocess.CompletedProcess(p.args, p.returncode, out, err))
    return done


def start(backend=None):
    """Starts rshmem the way the session does (tests that finalize call this to restart);
    `backend` overrides the session's."""
    import rshmem

    backend = backend or SESSION["backend"]
    if backend == "cuda":
        import torch
        import rshmem.torch as rtorch

        torch.cuda.set_device(rtorch.device())  # what a program does before init: the rule's GPU
    if UNDER_TORCHRUN:
        import torch.distributed as dist

        rshmem.init(dist.group.WORLD, backend=backend)
    else:
        rshmem.init(backend=backend)


@pytest.fixture(scope="session", autouse=True)
def rshmem_session():
    import rshmem

    if UNDER_TORCHRUN:
        import torch.distributed as dist

        dist.init_process_group("gloo")
    start()
    yield
    rshmem.finalize()
    if UNDER_TORCHRUN:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def cuda_backend():
    """Runs a module on the cuda backend: restarts rshmem on cuda when the session runs on the
    host backend, and restores the session's backend after the module."""
    import rshmem

    switched = not rshmem.is_initialized() or rshmem.backend() != "cuda"
    if switched:
        rshmem.finalize()
        start("cuda")
    yield
    if switched:
        rshmem.finalize()
        start()


@pytest.fixture
def sym():
    """`sym(shape, dtype)` makes a symmetric tensor; the test's tensors are freed at teardown
    (after a barrier, so no peer still uses them), newest first."""
    import rshmem
    import rshmem.torch as rtorch

    made = []

    def make(shape, dtype):
        made.append(rtorch.create_symmetric_tensor(shape, dtype))
        return made[-1]

    yield make
    rshmem.barrier_all()
    for t in reversed(made):
        rtorch.free_tensor(t)


@pytest.fixture
def me():
    import rshmem

    return rshmem.my_pe()


@pytest.fixture
def npes():
    import rshmem

    return rshmem.n_pes()


@pytest.fixture
def peer(me, npes):
    """The next PE (this PE itself when running alone)."""
    return (me + 1) % npes


@pytest.fixture
def mapped_peer():
    """The next PE whose memory this PE reaches by load/store (team SHARED): the one a peer
    view (`peer_tensor`) can show. Under `RSHMEM_VIRTUAL_HOSTS` the next PE may be on another
    host, reached only through the network transport."""
    import rshmem

    shared = rshmem.Team.SHARED
    n = rshmem.team_n_pes(shared)
    return rshmem.team_translate_pe(shared, (rshmem.team_my_pe(shared) + 1) % n, rshmem.Team.WORLD)
