"""The host helpers Triton-distributed's test scripts, tutorials and layers import, used as its
scripts use them (`from ... import rand_tensor, group_profile, ...`). Host backend, any PE count;
GPU facts come from a stand-in `nvidia-smi` on PATH, so nothing reads (or could change) a real
GPU's clocks."""
from __future__ import annotations

import json
import os
import stat
import textwrap
import warnings

import pytest
import torch
import torch.distributed as dist

import rshmem
from rshmem.compat import _td_host
from rshmem.compat import triton_dist as td
from rshmem.compat.triton_dist import (NVSHMEMLazyAllocator, calculate_pcie_bandwidth_gbps, contextual_autotune,
                                       get_intranode_max_speed_gbps, get_torch_prof_ctx, group_profile,
                                       is_fp8_dtype, nvshmem_free_lazy_tensor, print_benchmark_comparison,
                                       rand_tensor, support_launch_cooperative_grid,
                                       wait_until_max_gpu_clock_or_warning)


@pytest.fixture
def dist_group(monkeypatch):
    if not dist.is_initialized():  # one PE: a gloo group of one
        from conftest import free_port

        monkeypatch.setenv("MASTER_PORT", str(free_port()))
        td.initialize_distributed()
    return dist.group.WORLD


def test_rand_tensor_ranges():
    x = rand_tensor((64, 64), torch.float32, device="cpu")
    assert x.dtype == torch.float32 and x.min() >= -1 and x.max() < 1 and x.std() > 0.4
    assert rand_tensor((8,), torch.bfloat16, device="cpu").dtype == torch.bfloat16
    f8 = rand_tensor((256,), torch.float8_e4m3fn, device="cpu")
    assert f8.dtype == torch.float8_e4m3fn and f8.float().abs().max() <= 1
    i8 = rand_tensor((4096,), torch.int8, device="cpu")
    assert i8.min() < -100 and i8.max() > 100  # the whole range, not [-1, 1]
    u32 = rand_tensor((16,), torch.uint32, device="cpu")
    assert u32.dtype == torch.uint32
    with pytest.raises(rshmem.DTypeError, match="rand_tensor: dtype torch.complex64"):
        rand_tensor((2,), torch.complex64, device="cpu")
    assert is_fp8_dtype(torch.float8_e5m2) and not is_fp8_dtype(torch.int8) and not is_fp8_dtype(torch.float16)


def test_cooperative_grid_support_follows_the_triton_version(monkeypatch):
    import triton

    assert support_launch_cooperative_grid()
    assert td.launch_cooperative_grid_options() == {"launch_cooperative_grid": True}
    monkeypatch.setattr(triton, "__version__", "3.2.0")
    assert not support_launch_cooperative_grid() and td.launch_cooperative_grid_options() == {}


def _fake_smi(tmp_path, monkeypatch, *, sm_now=1980, sm_max=1980, nvlink="", pcie=(4, 16)):
    """A stand-in nvidia-smi answering the queries the helpers make; it records every call."""
    log = tmp_path / "smi-calls"
    script = tmp_path / "nvidia-smi"
    script.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        echo "$@" >> {log}
        case "$*" in
          *clocks.max.sm*) echo {sm_max} ;;
          *clocks.sm*) echo {sm_now} ;;
          *pcie.link.gen*) echo "{pcie[0]}, {pcie[1]}" ;;
          nvlink*) printf '{nvlink}' ;;
          *) exit 3 ;;
        esac
    """))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    for f in (_td_host.get_pcie_link_max_speed_gbps, _td_host.get_nvlink_max_speed_gbps):
        f.cache_clear()
    return log


def test_wait_until_max_gpu_clock_only_reads_clocks(tmp_path, monkeypatch):
    log = _fake_smi(tmp_path, monkeypatch, sm_now=1200, sm_max=1980)
    monkeypatch.delenv("TRITON_DIST_WAIT_GPU_CLOCK", raising=False)
    assert wait_until_max_gpu_clock_or_warning() is True and not log.exists()  # off by default: no query
    monkeypatch.setenv("TRITON_DIST_WAIT_GPU_CLOCK", "1")
    with pytest.warns(UserWarning, match="1200000 kHz did not reach its maximum 1980000 kHz"):
        assert wait_until_max_gpu_clock_or_warning(device_id=0, timeout_sec=0.3) is False
    calls = log.read_text().splitlines()
    assert calls and all(c.startswith("--query-gpu=clocks.") for c in calls)  # queries only
    _fake_smi(tmp_path, monkeypatch, sm_now=1980, sm_max=1980)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert wait_until_max_gpu_clock_or_warning(device_id=0, timeout_sec=5) is True


def test_intranode_speed_from_nvlink_or_pcie(tmp_path, monkeypatch):
    _fake_smi(tmp_path, monkeypatch, nvlink="GPU 0: H200\\n\\t Link 0: 26.562 GB/s\\n\\t Link 1: 26.562 GB/s\\n")
    assert get_intranode_max_speed_gbps(0) == pytest.approx(53.124)
    assert get_intranode_max_speed_gbps(0, with_scale=True) == pytest.approx(53.124 * 0.8)
    _fake_smi(tmp_path, monkeypatch, nvlink="", pcie=(5, 16))
    assert get_intranode_max_speed_gbps(0) == pytest.approx(32 * 128 / 130 * 16 / 8)
    assert get_intranode_max_speed_gbps(0, with_scale=True) == pytest.approx(32 * 128 / 130 * 2 * 0.7)
    assert calculate_pcie_bandwidth_gbps(3, 8) == pytest.approx(8 * 128 / 130)
    with pytest.raises(ValueError, match="generation 7"):
        calculate_pcie_bandwidth_gbps(7, 16)
    with pytest.raises(ValueError, match="lanes 0"):
        calculate_pcie_bandwidth_gbps(4, 0)


def test_numa_node_count_in_group(dist_group, monkeypatch):
    assert td.get_numa_node_count_in_group(dist_group) == (1 if not torch.cuda.is_available() else
                                                             td.get_numa_node_count_in_group(dist_group))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # as on a GPU machine
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    n = dist_group.size()
    # Every rank on one node: 1. First half on node 0, second on node 1: 2 (needs >= 2 ranks).
    monkeypatch.setattr(_td_host, "get_numa_node", lambda gpu: 0)
    assert td.get_numa_node_count_in_group(dist_group) == 1
    assert td.get_group_numa_world_size(dist_group) == n
    rank = dist.get_rank()
    monkeypatch.setattr(_td_host, "get_numa_node", lambda gpu: 0 if rank < n // 2 else 1)
    assert td.get_numa_node_count_in_group(dist_group) == (2 if n >= 2 else 1)
    assert td.get_group_numa_world_size(dist_group) == (n // 2 if n >= 2 else 1)


def test_lazy_symmetric_allocation(me, npes):
    alloc = NVSHMEMLazyAllocator(lazy=True)
    a = alloc.create_tensor("a", [16, 4], torch.float32)
    b = alloc.create_tensor("b", [32], torch.int32, fill_value=7)
    assert alloc.get_total_nvshmem_size() == 16 * 4 * 4 + 32 * 4 and len(alloc) == 2
    assert alloc.get_tensor_breakdown() == {"a": 256, "b": 128}
    assert not a.is_materialized and a.shape == (16, 4) and b.numel() == 32
    with pytest.raises(rshmem.InvalidArgumentError, match="lazy tensor 'a' is not allocated yet"):
        a.fill_(1)
    alloc.sync()  # collective: every PE allocates the same list
    assert a.is_materialized and torch.equal(b.tensor, torch.full((32,), 7, dtype=torch.int32))
    a.fill_(float(me))
    assert torch.empty_like(a).shape == (16, 4) and torch.sum(a).item() == 64 * me  # torch functions reach it
    c = alloc.create_tensor("c", [4], torch.int64)  # after sync: allocated at once
    assert c.is_materialized
    rshmem.barrier_all()
    for t in (c, b, a):
        nvshmem_free_lazy_tensor(t)
    nvshmem_free_lazy_tensor(None)


def test_autotune_fn_is_the_undecorated_function():
    @td.tune.autotune(config_space=[{"cfg": 1}, {"cfg": 2}], key_fn=lambda x: x)
    def op(x, cfg):
        return (x, cfg)

    assert op(3) == (3, 1) and op.fn(3, cfg=2) == (3, 2) and op.fn.__name__ == "op"


def test_contextual_autotune_runs_the_first_kept_config_inside(monkeypatch):
    import triton
    import triton.language as tl

    @triton.autotune(configs=[triton.Config({"B": 64}), triton.Config({"B": 128}), triton.Config({"B": 256})],
                     key=["n"], prune_configs_by={"early_config_prune": lambda cfgs, nargs, **kw: cfgs[1:]})
    @triton.jit
    def kernel(x, n, B: tl.constexpr):
        pass

    seen = []
    monkeypatch.setattr(kernel.fn, "run", lambda *a, **kw: seen.append(kw["B"]))
    plain = triton.runtime.autotuner.Autotuner.run

    @contextual_autotune(is_dist=True)
    def step(n):
        kernel.run(torch.zeros(4), n, grid=(1,), warmup=False)
        kernel.run(torch.zeros(4), n, grid=(1,), warmup=False)

    step(4)
    assert seen == [128, 128]  # the first config prune kept, never benchmarked
    assert triton.runtime.autotuner.Autotuner.run is plain  # outside the function: Triton's own autotuning


def test_torch_prof_ctx_and_group_profile(dist_group, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert type(get_torch_prof_ctx(False)).__name__ == "nullcontext"
    with get_torch_prof_ctx(True) as prof:
        torch.ones(8).sum()
    assert any("aten::sum" in e.name for e in prof.events())
    with group_profile("off", do_prof=False):
        torch.ones(4).sum()
    assert not (tmp_path / "prof").exists()
    with group_profile("step", do_prof=True, compress=False):
        torch.ones(16).mul(2)
    if dist.get_rank() == 0:
        merged = json.loads((tmp_path / "prof" / "step_merged.json").read_text())
        pids = {str(e.get("pid", "")).split(":")[0] for e in merged["traceEvents"]}
        assert {f"rank{r}" for r in range(dist.get_world_size())} <= pids
    dist.barrier()
    assert not (tmp_path / "prof" / "step" / f"rank{dist.get_rank()}.json").exists()  # keep_merged_only


def test_print_benchmark_comparison(capsys):
    print_benchmark_comparison({(128, 1024): {"torch": {"latency": 0.5, "memory": 2.0, "precision": True},
                                              "triton": {"latency": 0.25, "memory": 1.0, "precision": True}}},
                               test_name="gemm", param_names=["M", "N"], title_params={"SM": 8})
    out = capsys.readouterr().out
    assert "=== gemm (SM=8) ===" in out and "128 | 1024 | 0.5000 | 2.0 | True | 0.2500 | 1.0 | True" in out


def test_explicit_nccl_groups_become_gloo_where_torch_distributed_is_gloo(dist_group):
    import rshmem.torch as rt

    td.stage_cuda_collectives_through_cpu()
    assert rt.dist_backend() == "gloo"  # host backend, no GPU
    g = dist.new_group(ranks=list(range(dist.get_world_size())), backend="nccl")
    assert dist.get_backend(g) == "gloo"
    t = torch.ones(2)
    dist.all_reduce(t, group=g)
    assert t.tolist() == [dist.get_world_size()] * 2
    from rshmem.compat._td_utils import _gloo_for_nccl

    assert _gloo_for_nccl("cpu:gloo,cuda:nccl") == "gloo" and _gloo_for_nccl("gloo") == "gloo"


def test_initialize_distributed_seeds_as_triton_distributed(dist_group):
    td.initialize_distributed(seed=11)
    a = torch.rand(4)
    td.initialize_distributed(seed=11)
    assert torch.equal(a, torch.rand(4))  # the same data on every call (and on every rank)
    assert torch.backends.cuda.matmul.allow_tf32 is False
    td.initialize_distributed(initialize_shmem=False)  # accepted; rshmem stays as it is
    assert rshmem.is_initialized()


def test_bitcode_and_tmap_scratch_helpers(monkeypatch, tmp_path):
    # NVSHMEM's internal transfer layer (putmem_rma*) has no counterpart, whatever bitcode is there.
    (tmp_path / "lib.bc").write_bytes(b"BC")
    monkeypatch.setenv("RSHMEM_DEVICE_BC", str(tmp_path / "lib.bc"))
    assert td.has_nvshmemi_bc_built() is False
    with pytest.raises(ValueError, match="num_ctas .0. and num_descs_per_cta .1. must be positive"):
        td.create_tmap_scratch(0)
    assert td.TENSORMAP_SIZE_BYTES == 128


def test_set_device_past_the_visible_gpus_takes_rshmems_gpu_where_shared(monkeypatch):
    import rshmem.torch as rt
    from rshmem.compat._td_utils import _shared_set_device

    chosen = []
    set_device = _shared_set_device(chosen.append)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(rt, "device", lambda: torch.device("cuda", 0))
    monkeypatch.setattr(rt, "gpu_shared", lambda: True)
    set_device(1)  # LOCAL_RANK 1 of 2 PEs sharing GPU 0
    set_device("cuda:1")
    set_device(0)
    assert chosen == [torch.device("cuda", 0), torch.device("cuda", 0), 0]
    monkeypatch.setattr(rt, "gpu_shared", lambda: False)  # a GPU per PE: unchanged (torch's own error)
    set_device(1)
    assert chosen[-1] == 1
