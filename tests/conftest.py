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

import os

import pytest

UNDER_TORCHRUN = "RANK" in os.environ and "WORLD_SIZE" in os.environ

# A failing test on one rank must not leave the other waiting forever in a collective or a wait.
os.environ.setdefault("RSHMEM_BOOTSTRAP_TIMEOUT_S", "60")
os.environ.setdefault("RSHMEM_DEBUG_WAIT_TIMEOUT_MS", "60000")


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU per PE (skipped where none is present)")
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
    if (config.getoption("markexpr", "") or "").strip() == "gpu" and _gpu_count() >= local:
        return "cuda"
    return "host"


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
        if "gpu" in item.keywords and gpus < world:
            item.add_marker(pytest.mark.skip(reason=f"needs {world} CUDA GPU(s), {gpus} present"))
        if "multi" in item.keywords and world < 2:
            item.add_marker(pytest.mark.skip(reason="needs 2 PEs: run under torchrun --nproc-per-node 2"))
        if "single" in item.keywords and UNDER_TORCHRUN:
            item.add_marker(pytest.mark.skip(reason="runs as one process only (it starts torchrun itself)"))


def start(backend=None):
    """Starts rshmem the way the session does (tests that finalize call this to restart);
    `backend` overrides the session's."""
    import rshmem

    backend = backend or SESSION["backend"]
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
