"""rshmem.compat.triton_dist: the Triton-distributed host helpers."""

import torch
import torch.distributed

import rshmem
from rshmem.compat import triton_dist as td


def test_helpers(me, npes, capsys, monkeypatch):
    if not torch.distributed.is_initialized():  # one PE: let it start a gloo group of one
        from conftest import free_port

        monkeypatch.setenv("MASTER_PORT", str(free_port()))
    assert td.initialize_distributed(seed=3) is not None  # already initialized: reused
    assert td.NVSHMEM_SIGNAL_DTYPE == torch.int64
    t = td.nvshmem_create_tensor((4, 4), torch.bfloat16)
    ts = td.nvshmem_create_tensors((8,), torch.float32, me, npes)
    assert len(ts) == npes and t.dtype == torch.bfloat16
    ts[me].fill_(me)
    td.nvshmem_barrier_all_on_stream()
    assert all(v[0].item() == i for i, v in enumerate(ts))
    td.nvshmem_free_tensor_sync(ts[me])
    td.nvshmem_free_tensor_sync(t)
    td.dist_print("hello", me, allowed_ranks=[me], prefix=True)
    td.dist_print("quiet", allowed_ranks=[], need_sync=True)
    out = capsys.readouterr().out
    assert f"[rank:{me}] hello {me}" in out and "quiet" not in out
    assert rshmem.is_initialized()
