"""Which GPU a PE uses: the one rule (runtime `backend::cuda::select::choose_ordinal`) as every entry
point sees it through `rshmem._native.plan_device` and `rshmem.torch.device()`. No GPU needed:
the rule is a function of the launcher's variables, the GPU count and the opt-in."""

import subprocess
import sys
import textwrap

import pytest

from rshmem import _native

LAUNCHER_VARS = ("LOCAL_RANK", "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
                 "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE",
                 "CUDA_VISIBLE_DEVICES", "RSHMEM_ALLOW_SHARED_GPU")


@pytest.fixture
def place(monkeypatch):
    """`place(rank, size, allow)` sets the launcher's variables of a PE (and the opt-in)."""
    for k in LAUNCHER_VARS:
        monkeypatch.delenv(k, raising=False)

    def set_place(rank, size, allow=False):
        monkeypatch.setenv("LOCAL_RANK", str(rank))
        monkeypatch.setenv("LOCAL_WORLD_SIZE", str(size))
        if allow:
            monkeypatch.setenv("RSHMEM_ALLOW_SHARED_GPU", "1")
        else:
            monkeypatch.delenv("RSHMEM_ALLOW_SHARED_GPU", raising=False)

    return set_place


@pytest.mark.parametrize("pes", [1, 2, 4])
@pytest.mark.parametrize("gpus", [1, 2, 8])
@pytest.mark.parametrize("allow", [False, True], ids=["no-opt-in", "opt-in"])
def test_pe_to_gpu_rule(place, pes, gpus, allow):
    plans = []
    for rank in range(pes):
        place(rank, pes, allow)
        if pes > gpus and not allow:
            with pytest.raises(_native.InvalidArgumentError, match=rf"runs {pes} PEs but {gpus} CUDA GPU\(s\)") as e:
                _native.plan_device(gpus)
            assert "RSHMEM_ALLOW_SHARED_GPU=1" in str(e.value)
            continue
        plans.append(_native.plan_device(gpus))
    if pes > gpus and not allow:
        return
    ordinals = [p[0] for p in plans]
    if pes <= gpus:
        assert ordinals == list(range(pes)) and all(p[1] == 1 for p in plans)
    else:
        assert ordinals == [r % gpus for r in range(pes)]
        # every PE knows how many share its GPU
        assert [p[1] for p in plans] == [ordinals.count(o) for o in ordinals]


def test_requested_device_and_launcher_variables(place, monkeypatch):
    place(1, 2)
    assert _native.plan_device(2, 0) == (0, 1)  # what the program asked for wins
    with pytest.raises(_native.InvalidArgumentError, match="device 3 was requested"):
        _native.plan_device(2, 3)
    for k in ("LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(k)
    assert _native.plan_device(2) is None  # no launcher: init numbers the PEs of a host itself
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1")
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2")
    assert _native.plan_device(2) == (1, 1)  # mpirun's variables count too
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_RANK", "one")
    with pytest.raises(_native.ConfigError, match="OMPI_COMM_WORLD_LOCAL_RANK"):
        _native.plan_device(2)
    with pytest.raises(_native.UnsupportedError, match="no CUDA device is visible"):
        place(0, 1)
        _native.plan_device(0)


def test_one_gpu_per_process_from_the_launcher(place, monkeypatch):
    place(3, 4)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")  # a launcher that gives each process its own GPU
    assert _native.plan_device(1) == (0, 1)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")  # two named, one usable: no per-process split
    with pytest.raises(_native.InvalidArgumentError, match="runs 4 PEs but 1 CUDA GPU"):
        _native.plan_device(1)


@pytest.mark.single
def test_torch_device_before_init_follows_the_backend():
    """`rshmem.torch.device()` works before init: cpu on the host backend, and on a machine
    without a GPU the cuda backend's own error."""
    code = textwrap.dedent(
        """
        import rshmem, rshmem.torch as rt
        print("DEVICE", rt.device(), rt.gpu_shared(), rt.dist_backend(), rshmem.is_initialized())
        """
    )
    env = {"RSHMEM_BACKEND": "host", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "DEVICE cpu False gloo False" in out.stdout
    env.update(RSHMEM_BACKEND="cuda", CUDA_VISIBLE_DEVICES="")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode != 0 and "UnsupportedError" in out.stderr and "no CUDA device is visible" in out.stderr
