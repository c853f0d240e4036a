"""The pieces of the cuda path that run without a GPU: the tensor exporters of `rshmem._cuda`
(DLPack checked end to end on CPU memory, the `__cuda_array_interface__` dict), argument
checks, and the Triton load hook against Triton's own hook protocol."""

import ctypes
import gc
import inspect

import pytest
import torch

import rshmem
from rshmem import _cuda


def test_dlpack_bytes_views_memory_without_copying_and_releases_it():
    buf = (ctypes.c_uint8 * 64)(*range(64))
    addr = ctypes.addressof(buf)
    owner = object()
    live_before = len(_cuda._dl_live)
    t = _cuda._dlpack_bytes(addr, 64, _cuda._KDL_CPU, 0, owner=owner)
    assert t.dtype == torch.uint8 and t.shape == (64,) and t.data_ptr() == addr
    assert t.tolist() == list(range(64))
    t.view(torch.int32)[1] = -1  # writes land in the buffer: a view, not a copy
    assert list(buf[4:8]) == [255] * 4
    assert len(_cuda._dl_live) == live_before + 1  # owner kept while torch holds the memory
    view = t[8:].view(torch.float16)
    del t
    gc.collect()
    assert len(_cuda._dl_live) == live_before + 1  # a view still shares the storage
    assert view.data_ptr() == addr + 8
    del view
    gc.collect()
    assert len(_cuda._dl_live) == live_before  # torch called the deleter


def test_cuda_array_interface_describes_raw_bytes():
    record = _cuda._Allocation(0x7F0000000000, 4096)
    exporter = _cuda._HeapBytes(0x7F0000000000, 4096, owner=record)
    assert exporter.__cuda_array_interface__ == {
        "version": 3,
        "typestr": "|u1",
        "shape": (4096,),
        "data": (0x7F0000000000, False),
        "strides": None,
        "stream": None,
    }
    assert exporter.owner is record


def test_stream_handle_takes_ints_and_refuses_the_rest():
    assert _cuda.stream_handle(0) == 0
    assert _cuda.stream_handle(0x5555) == 0x5555
    for bad in ("default", 1.5, True, object()):
        with pytest.raises(rshmem.InvalidArgumentError, match="stream"):
            _cuda.stream_handle(bad)
    with pytest.raises(rshmem.InvalidArgumentError, match="negative"):
        _cuda.stream_handle(-1)


def test_pe_argument_check():
    assert _cuda._pe(3) == 3
    assert _cuda._pe(torch.tensor(2)) == 2
    for bad in ("1", 1.0, True, None):
        with pytest.raises(rshmem.InvalidArgumentError, match="pe must be an int"):
            _cuda._pe(bad)


def test_signal_value_wraps_to_64_bits():
    assert _cuda._u64(-1, "t") == (1 << 64) - 1
    assert _cuda._u64((1 << 64) - 1, "t") == (1 << 64) - 1
    with pytest.raises(rshmem.InvalidArgumentError, match="64 bits"):
        _cuda._u64(1 << 64, "t")
    with pytest.raises(rshmem.InvalidArgumentError, match="64 bits"):
        _cuda._u64(-(1 << 63) - 1, "t")


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
