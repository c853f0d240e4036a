"""`rshmem.buffer_register_symmetric` on GPUs: the program's own `cuMemCreate` buffer made
symmetric (`nvshmemx_buffer_register_symmetric`), 2 PEs (a shared GPU included).

    torchrun --nproc-per-node 2 -m pytest -m gpu tests/tensors/test_cuda_user_buffer.py

The buffer is made through the driver API with ctypes, as a program using cuda-python or its own
C extension would; the C form is capi/tests/nvshmem_user_buffer.cu.
"""

import ctypes

import pytest
import torch

import rshmem
from cuda_util import dev, settle

pytestmark = [pytest.mark.gpu, pytest.mark.multi]


@pytest.fixture(scope="module", autouse=True)
def on_cuda(cuda_backend):
    yield
    settle()


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _Prop(ctypes.Structure):
    # CUmemAllocationProp (cuda.h)
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int), ("location", _Location),
                ("win32HandleMetaData", ctypes.c_void_p), ("compressionType", ctypes.c_ubyte),
                ("gpuDirectRDMACapable", ctypes.c_ubyte), ("usage", ctypes.c_ushort),
                ("reserved", ctypes.c_ubyte * 4)]


class _Access(ctypes.Structure):
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


PINNED, ON_DEVICE, POSIX_FD, READ_WRITE, RECOMMENDED = 1, 1, 1, 3, 1


def _cu():
    cu = ctypes.CDLL("libcuda.so.1")

    def call(name, *args):
        rc = getattr(cu, name)(*args)
        assert rc == 0, f"{name} returned CUresult {rc}"

    return call


def _prop(handle_types: int) -> _Prop:
    return _Prop(type=PINNED, requestedHandleTypes=handle_types, location=_Location(ON_DEVICE, dev().index))


def _granularity() -> int:
    g = ctypes.c_size_t()
    _cu()("cuMemGetAllocationGranularity", ctypes.byref(g), ctypes.byref(_prop(POSIX_FD)), RECOMMENDED)
    return g.value


def _user_buffer(size: int, handle_types: int = POSIX_FD) -> int:
    """`size` bytes of this PE's GPU, created and mapped the way the program would."""
    call = _cu()
    torch.cuda.init()  # the primary context current on this thread
    handle, at = ctypes.c_uint64(), ctypes.c_uint64()
    call("cuMemCreate", ctypes.byref(handle), ctypes.c_size_t(size), ctypes.byref(_prop(handle_types)), ctypes.c_ulonglong(0))
    call("cuMemAddressReserve", ctypes.byref(at), ctypes.c_size_t(size), ctypes.c_size_t(0), ctypes.c_uint64(0), ctypes.c_ulonglong(0))
    call("cuMemMap", at, ctypes.c_size_t(size), ctypes.c_size_t(0), handle, ctypes.c_ulonglong(0))
    call("cuMemRelease", handle)
    access = _Access(_Location(ON_DEVICE, dev().index), READ_WRITE)
    call("cuMemSetAccess", at, ctypes.c_size_t(size), ctypes.byref(access), ctypes.c_size_t(1))
    return at.value


def _drop(addr: int, size: int) -> None:
    call = _cu()
    torch.cuda.synchronize()
    call("cuMemUnmap", ctypes.c_uint64(addr), ctypes.c_size_t(size))
    call("cuMemAddressFree", ctypes.c_uint64(addr), ctypes.c_size_t(size))


def _read_u64(addr: int) -> int:
    out = ctypes.c_uint64()
    torch.cuda.synchronize()
    _cu()("cuMemcpyDtoH_v2", ctypes.byref(out), ctypes.c_uint64(addr), ctypes.c_size_t(8))
    return out.value


def test_a_registered_buffer_is_reached_by_the_peers_and_read_through_the_programs_own_address():
    me, n = rshmem.my_pe(), rshmem.n_pes()
    size = 2 * _granularity()
    buf = _user_buffer(size)
    reg = rshmem.buffer_register_symmetric(buf, size)
    try:
        assert reg != buf
        assert all(rshmem.ptr(reg, pe) is not None for pe in range(n))
        rshmem.p(reg + 8 * me, 1000 + me, (me + 1) % n, dtype="int64")
        rshmem.barrier_all()
        left = (me + n - 1) % n
        assert _read_u64(buf + 8 * left) == 1000 + left
        assert rshmem.g(reg + 8 * left, me, dtype="int64") == 1000 + left
        with pytest.raises(rshmem.InvalidArgumentError, match="buffer_unregister_symmetric"):
            rshmem.free(reg)
    finally:
        rshmem.buffer_unregister_symmetric(reg, size)
    # Registered again: the same address, the bytes the program's memory kept.
    again = rshmem.buffer_register_symmetric(buf, size)
    assert again == reg and _read_u64(buf + 8 * ((me + n - 1) % n)) == 1000 + (me + n - 1) % n
    rshmem.buffer_unregister_symmetric(again, size)
    with pytest.raises(rshmem.InvalidArgumentError, match="not an address nvshmemx_buffer_register_symmetric returned"):
        rshmem.buffer_unregister_symmetric(again, size)
    _drop(buf, size)


def test_memory_that_cannot_be_shared_is_refused_on_every_pe():
    size = _granularity()
    # cudaMalloc'd memory (PyTorch's allocator): not a cuMemCreate mapping of the program's.
    t = torch.empty(size, dtype=torch.uint8, device=dev())
    with pytest.raises(rshmem.RshmemError, match="cuMemCreate"):
        rshmem.buffer_register_symmetric(t.data_ptr(), size)
    # A cuMemCreate buffer without the file-descriptor handle type: the peers could not map it.
    plain = _user_buffer(size, handle_types=0)
    with pytest.raises(rshmem.RshmemError, match="POSIX_FILE_DESCRIPTOR"):
        rshmem.buffer_register_symmetric(plain, size)
    _drop(plain, size)
    # Not a multiple of the granularity.
    with pytest.raises(rshmem.InvalidArgumentError, match="granularity"):
        rshmem.buffer_register_symmetric(t.data_ptr(), size - 256)
    settle()
