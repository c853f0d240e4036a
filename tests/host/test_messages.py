"""Messages in the terms of the call the user made, and size mismatches that are errors."""

import pytest
import torch

import rshmem
import rshmem.nn
import rshmem.torch as rt
from conftest import run_pes


def test_putmem_and_getmem_of_tensors_of_different_sizes_are_refused():
    x4 = rt.create_symmetric_tensor((4,), torch.float32)
    eight = torch.arange(1.0, 9.0)
    for call in (rshmem.putmem, rshmem.getmem):
        with pytest.raises(rshmem.InvalidArgumentError) as e:
            call(x4, eight, rshmem.my_pe())
        assert "16 and 32 bytes" in str(e.value) and "nbytes" in str(e.value), str(e.value)
    # An explicit nbytes moves part of the larger tensor, as asked.
    rshmem.putmem(x4, eight, rshmem.my_pe(), nbytes=16)
    assert x4.tolist() == [1.0, 2.0, 3.0, 4.0]
    rshmem.barrier_all()
    rt.free_tensor(x4)


def test_layers_name_themselves():
    with pytest.raises(rshmem.InvalidArgumentError) as e:
        rshmem.nn.ColumnParallelLinear(8, 8, group=rshmem.Team(31))  # no such team
    assert "rshmem.nn.ColumnParallelLinear" in str(e.value) and "rshmem.ops" not in str(e.value), str(e.value)


@pytest.mark.single
def test_create_symmetric_tensor_before_init_names_itself():
    code = """
import torch, rshmem, rshmem.torch as rt
try:
    rt.create_symmetric_tensor((4,), torch.float32)
except rshmem.NotInitializedError as e:
    print("RAISED", e)
"""
    (r,) = run_pes(code, 1, timeout=60)
    assert "RAISED" in r.stdout and "create_symmetric_tensor()" in r.stdout and "calloc" not in r.stdout, r.stdout + r.stderr
