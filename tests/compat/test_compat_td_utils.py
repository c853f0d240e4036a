"""rshmem.compat.triton_dist's helpers beyond the tutorials' first set, and the small
nvshmem4py-shaped rshmem.compat.nvshmem. Host backend, any PE count; the helpers
that need a GPU are tested in test_device_td_gpu.py."""
from __future__ import annotations

import pytest
import torch

import rshmem
import rshmem.compat.nvshmem as nvshmem
import rshmem.compat.nvshmem.bindings.nvshmem as pynvshmem
from rshmem.compat import triton_dist as td


def test_import_triton_dist_names():
    # `import triton_dist` ports to this module: jit, language and tune hang off it.
    import rshmem.triton

    assert td.jit is rshmem.triton.jit and td.language is rshmem.triton.language
    assert td.is_cuda() and not td.is_hip() and not td.is_maca()
    assert td.launch_cooperative_grid_options() == {"launch_cooperative_grid": True}
    assert td.is_nvshmem_multimem_supported() is False


def test_cuda_check_names_the_error_without_a_driver():
    td.CUDA_CHECK(td.cuda.CUresult.CUDA_SUCCESS)
    td.CUDA_CHECK(td.cudart.cudaError_t.cudaSuccess)
    with pytest.raises(RuntimeError, match="CUDA driver error 1 .CUDA_ERROR_INVALID_VALUE"):
        td.CUDA_CHECK(td.cuda.CUresult.CUDA_ERROR_INVALID_VALUE)
    with pytest.raises(RuntimeError, match="cudaErrorMemoryAllocation"):
        td.CUDA_CHECK(td.cudart.cudaError_t.cudaErrorMemoryAllocation)
    with pytest.raises(RuntimeError, match="not a CUDA status"):
        td.CUDA_CHECK(0)


def test_aot_compile_spaces_records_and_checks():
    space = {"k_fp16": {"signature": "*fp16:16, i32", "grid": ["1", "1", "1"],
                        "triton_algo_infos": [{"num_warps": 4}]}}

    @td.aot_compile_spaces(space)
    def kernel():
        pass

    assert kernel.__aot_compile_spaces__ == space
    with pytest.raises(ValueError, match="needs signature, grid"):
        td.aot_compile_spaces({"k": {"signature": "i32", "grid": ["1"], "triton_algo_infos": []}})


def test_requires_checks_at_call_time():
    ok = [False]

    def ready():
        return ok[0]

    @td.requires(ready)
    def f(x):
        return x + 1

    with pytest.raises(RuntimeError, match="f needs ready"):
        f(1)
    ok[0] = True
    assert f(1) == 2


def test_tune_runs_the_first_kept_configuration():
    calls = []

    @td.tune.autotune(config_space=[{"cfg": 1}, {"cfg": 2}, {"cfg": 3}], key_fn=lambda *a, **k: 0,
                      prune_fn=lambda c, x: c["cfg"] != 1)
    def op(x, cfg):
        calls.append(cfg)
        return x * cfg

    assert op(5) == 10 and op(5, cfg=3) == 15 and calls == [2, 3]
    assert td.tune.to_hashable(torch.zeros(2, 3)) == ((2, 3), (3, 1), torch.float32)

    @td.tune.autotune(config_space=[{"cfg": 1}], key_fn=None, prune_fn=lambda c, x: False)
    def none(x, cfg):
        return x

    with pytest.raises(ValueError, match="prune_fn left no configuration for none"):
        none(1)


def test_barrier_all_context(me, npes):
    for intra in (True, False):
        ctx = td.BarrierAllContext(intra)
        assert (ctx.rank, ctx.local_rank, ctx.num_local_ranks) == (me, rshmem.team_my_pe(rshmem.Team.NODE),
                                                                   rshmem.team_n_pes(rshmem.Team.NODE))
        td.barrier_all_on_stream(ctx)
        ctx.finalize()


def test_get_group_numa_world_size_and_world():
    class Group:
        def size(self):
            return 4

    assert td.get_group_numa_world_size(Group()) == 4


def test_nvshmem_compat(me, npes, monkeypatch):
    assert pynvshmem.my_pe() == me and pynvshmem.n_pes() == npes
    assert pynvshmem.team_my_pe(nvshmem.core.Teams.TEAM_NODE) == rshmem.team_my_pe(rshmem.Team.NODE)
    assert pynvshmem.team_n_pes(nvshmem.core.Teams.TEAM_WORLD) == npes
    assert int(nvshmem.core.SignalOp.SIGNAL_SET) == 9 and int(nvshmem.core.SignalOp.SIGNAL_ADD) == 10
    # What the nvshmem4py-shaped package does not cover says so by name.
    with pytest.raises(AttributeError, match="nvshmem.core.no_such_call is not provided"):
        nvshmem.core.no_such_call  # noqa: B018
    with pytest.raises(AttributeError, match="nvshmem.bindings.nvshmem.no_such_call is not provided"):
        pynvshmem.no_such_call  # noqa: B018
    stopped = []
    monkeypatch.setattr(rshmem, "finalize", lambda: stopped.append(1))
    nvshmem.core.finalize()
    monkeypatch.setattr(rshmem, "is_initialized", lambda: False)
    nvshmem.core.finalize()  # not running: nothing to do
    assert stopped == [1]


@pytest.mark.multi
def test_stage_cuda_collectives_through_cpu(me, npes, monkeypatch):
    import torch.distributed as dist

    from rshmem.compat import _td_utils

    for name in _td_utils._STAGED:  # undone at teardown
        monkeypatch.setattr(dist, name, getattr(dist, name))
    td.stage_cuda_collectives_through_cpu()
    td.stage_cuda_collectives_through_cpu()  # idempotent: wrapped once
    assert dist.all_gather.__rshmem_staged__.__name__ == "all_gather"
    # CPU tensors on gloo pass straight through; make them take the staging path to check it.
    staged = []
    monkeypatch.setattr(_td_utils, "_needs_staging", lambda group, ts: staged.append(len(ts)) or True)
    x = torch.full((3,), float(me))
    out = torch.empty(3 * npes)
    dist.all_gather_into_tensor(out, x)
    assert torch.equal(out, torch.arange(npes, dtype=torch.float32).repeat_interleave(3))
    parts = [torch.empty(3) for _ in range(npes)]
    dist.all_gather(parts, x)
    assert all(torch.equal(p, torch.full((3,), float(i))) for i, p in enumerate(parts))
    rs = torch.empty(2)
    dist.reduce_scatter_tensor(rs, torch.ones(2 * npes) * (me + 1))
    assert torch.equal(rs, torch.full((2,), float(npes * (npes + 1) // 2)))
    a2a = torch.empty(npes)
    dist.all_to_all_single(a2a, torch.arange(npes, dtype=torch.float32) + 10 * me)
    assert torch.equal(a2a, torch.arange(npes, dtype=torch.float32) * 10 + me)
    got = torch.empty(4)
    if me % 2 == 0 and me + 1 < npes:
        dist.send(torch.arange(4.0) + me, me + 1)
    elif me % 2 == 1:
        dist.recv(got, me - 1)
        assert torch.equal(got, torch.arange(4.0) + me - 1)
    pairs = [1] if me + 1 < npes or me % 2 == 1 else []
    assert staged == [2, 1 + npes, 2, 2, *pairs]  # each call went through the staging path
