"""`dist.init_process_group` with the rshmem backend as the default group: jobs of 2 PEs of
their own (host backend), one per spelling of the backend."""
from __future__ import annotations

import textwrap

import pytest

from conftest import run_pes

PROGRAM = textwrap.dedent("""
    import torch, torch.distributed as dist
    import rshmem, rshmem.torch_backend
    dist.init_process_group({spec!r})
    me, n = dist.get_rank(), dist.get_world_size()
    t = torch.full((3,), float(me + 1))
    dist.all_reduce(t)
    assert torch.all(t == n * (n + 1) / 2), t
    out = torch.zeros(n * 3)
    dist.all_gather_into_tensor(out, t)
    box = [None]
    if me == 0:
        box = ["hello"]
    dist.broadcast_object_list(box, src=0)
    assert box == ["hello"]
    dist.barrier()
    # torch.ops.symm_mem and the functional collectives find a group by this name.
    name = dist.group.WORLD.group_name
    assert name and dist.distributed_c10d._resolve_process_group(name) is not None, name
    print("OK", dist.get_backend(), rshmem.backend(), rshmem.my_pe(), flush=True)
    dist.destroy_process_group()
    rshmem.finalize()
""")


@pytest.mark.single
@pytest.mark.parametrize("spec", ["rshmem", "cpu:gloo,cuda:rshmem"])
def test_init_process_group(spec):
    done = run_pes(PROGRAM.format(spec=spec), 2, timeout=90)
    for rank, p in enumerate(done):
        assert p.returncode == 0, f"rank {rank}:\n{p.stdout}\n{p.stderr}"
        assert p.stdout.startswith("OK"), p.stdout
        assert f"host {rank}" in p.stdout
