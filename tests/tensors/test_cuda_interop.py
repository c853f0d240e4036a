"""The pieces of the device path that run without a GPU: the runtime's DLPack views of heap
memory (checked end to end on the host backend, whose capsules name the CPU; on the cuda backend
the same capsules name this PE's GPU), argument checks, and the Triton load hook against Triton's
own hook protocol."""

import gc
import inspect

import pytest
import torch

import rshmem
import rshmem.torch as rtorch
from rshmem import _cuda, _native, _tensor_args


def test_heap_view_is_a_dlpack_view_without_a_copy_and_pins_the_heap(sym):
    t = sym((64,), torch.uint8)
    addr = t.data_ptr()
    capsule, alloc_id = _native.heap_view(addr, 64)
    assert alloc_id == _native.allocation_of(addr)["id"] == t._rshmem_id
    flat = torch.from_dlpack(capsule)
    assert flat.dtype == torch.uint8 and flat.shape == (64,) and flat.data_ptr() == addr
    assert flat.device == rtorch.device()
    flat.view(torch.int32)[1] = -1  # writes land in the heap: a view, not a copy
    assert t[4:8].tolist() == [255] * 4
    view = flat[8:].view(torch.float16)
    del flat
    gc.collect()
    assert view.data_ptr() == addr + 8  # the storage (and its heap pin) lives on in the view
    del view
    # A capsule nobody consumed is released by its own destructor.
    unused, _ = _native.heap_view(addr, 8)
    del unused
    gc.collect()
    rshmem.barrier_all()


def test_heap_view_refuses_memory_outside_live_allocations(sym):
    t = sym((16,), torch.uint8)
    with pytest.raises(rshmem.NotSymmetricError, match="not inside a live allocation"):
        _native.heap_view(t.data_ptr() + 8, 64)  # runs past the allocation
    plain = torch.zeros(16, dtype=torch.uint8)
    with pytest.raises(rshmem.NotSymmetricError, match="not inside a live allocation"):
        _native.heap_view(plain.data_ptr(), 16)
    rshmem.barrier_all()


def test_live_tensors_counts_the_tensors_create_returned_while_they_live():
    before = _native.live_tensors()
    t = rtorch.create_symmetric_tensor((32,), torch.int32)
    assert _native.live_tensors() == (before[0] + 1, before[1] + 128)
    peer = rtorch.peer_tensor(t, rshmem.my_pe())  # a peer view does not count
    assert _native.live_tensors() == (before[0] + 1, before[1] + 128)
    del peer
    rtorch.free_tensor(t)  # freed: no longer counted, although `t` lives
    assert _native.live_tensors() == before
    del t
    gc.collect()
    assert _native.live_tensors() == before


def test_stream_handle_takes_ints_and_refuses_the_rest():
    assert _cuda.stream_handle(0) == 0
    assert _cuda.stream_handle(0x5555) == 0x5555
    for bad in ("default", 1.5, True, object()):
        with pytest.raises(rshmem.InvalidArgumentError, match="stream"):
            _cuda.stream_handle(bad)
    with pytest.raises(rshmem.InvalidArgumentError, match="negative"):
        _cuda.stream_handle(-1)


def test_pe_argument_check():
    assert _tensor_args._pe(3) == 3
    assert _tensor_args._pe(torch.tensor(2)) == 2
    for bad in ("1", 1.0, True, None):
        with pytest.raises(rshmem.InvalidArgumentError, match="pe must be an int"):
            _tensor_args._pe(bad)


def test_signal_value_wraps_to_64_bits():
    assert _tensor_args._u64(-1, "t") == (1 << 64) - 1
    assert _tensor_args._u64((1 << 64) - 1, "t") == (1 << 64) - 1
    with pytest.raises(rshmem.InvalidArgumentError, match="64 bits"):
        _tensor_args._u64(1 << 64, "t")
    with pytest.raises(rshmem.InvalidArgumentError, match="64 bits"):
        _tensor_args._u64(-(1 << 63) - 1, "t")


def test_host_backend_has_no_device_ordinal():
    if rshmem.backend() != "host":
        pytest.skip("this session runs on the cuda backend")
    with pytest.raises(rshmem.UnsupportedError, match="host backend"):
        _cuda.ordinal()


def test_triton_load_hook_matches_tritons_hook_protocol(monkeypatch):
    """`rshmem.triton` registers with `knobs.runtime.kernel_load_end_hook`, which Triton calls
    as `hook(module, function, name, metadata_group, hash)` with the CUmodule as an int."""
    knobs = pytest.importorskip("triton.knobs")
    import rshmem.triton as rt

    protocol = [p for p in inspect.signature(knobs.InitHandleHook.__call__).parameters if p != "self"]
    assert protocol == ["module", "function", "name", "metadata_group", "hash"]
    inspect.signature(rt._on_kernel_load).bind(0x1234, None, "kernel", {}, "hash")
    assert isinstance(knobs.runtime.kernel_load_end_hook, knobs.HookChain)

    seen = []
    monkeypatch.setattr(rshmem._native, "device_init_module", lambda handle: seen.append(handle) or True, raising=False)
    chain = knobs.HookChain(reversed=True)
    chain.add(rt._on_kernel_load)
    chain(0x1234, None, "kernel", {"kernel.cubin": "/tmp/x"}, "abc")  # as CompiledKernel._init_handles does
    assert seen == [0x1234]
