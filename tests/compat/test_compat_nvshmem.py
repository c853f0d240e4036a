"""rshmem.compat.nvshmem: nvshmem4py's host API on rshmem, on the host backend (1 and 2 PEs).

On the host backend `array()` gives numpy arrays over the symmetric heap and the stream
arguments are None (calls complete on return); the same calls take CUDA arrays and streams on
the cuda backend (tests/numba_device/test_numba_gpu.py). Init is tested in jobs of its own (`run_pes`).
"""
from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

import rshmem
import rshmem.compat.nvshmem as nvshmem
import rshmem.compat.nvshmem.bindings  # noqa: F401 - `nvshmem.bindings.my_pe()` as programs write it
import rshmem.compat.nvshmem.core as core
from rshmem.compat.nvshmem.core import ComparisonType, SignalOp, Teams
from rshmem.compat.nvshmem.core._interop import device_index, stream_handle

from conftest import run_pes


def test_import_paths_match_nvshmem4py():
    import rshmem.compat.nvshmem.core.device.numba as dev

    assert nvshmem.core is core
    assert nvshmem.bindings.my_pe() == rshmem.my_pe() == core.my_pe()
    assert nvshmem.bindings.n_pes() == rshmem.n_pes() == core.n_pes()
    for name in ("put_signal_nbi", "signal_wait", "my_pe", "n_pes", "put_block", "reduce", "barrier_all_block"):
        assert callable(getattr(dev, name)), name


def test_enums_carry_rshmem_values():
    assert int(SignalOp.SIGNAL_ADD) == rshmem.SIGNAL_ADD and int(SignalOp.SIGNAL_SET) == rshmem.SIGNAL_SET
    assert int(ComparisonType.CMP_GE) == rshmem.CMP_GE and int(ComparisonType.CMP_EQ) == rshmem.CMP_EQ
    assert int(Teams.TEAM_WORLD) == int(rshmem.Team.WORLD) and int(Teams.TEAM_NODE) == int(rshmem.Team.NODE)
    assert core.init_status() == core.InitStatus.STATUS_IS_INITIALIZED


def test_unique_id_pickles_and_empty_is_empty():
    uid = core.get_unique_id(empty=True)
    assert bytes(uid) == b""
    assert pickle.loads(pickle.dumps(uid)).data == b""


def test_array_is_symmetric_numpy_on_the_host_backend(me, npes, peer):
    a = core.array((4, 3), dtype="int32")
    assert isinstance(a, np.ndarray) and a.shape == (4, 3) and a.dtype == np.int32
    assert not a.any()  # zero-filled
    a[:] = me + 1
    core.barrier_all()
    remote = core.get_peer_array(a, peer)
    assert isinstance(remote, np.ndarray) and (remote == peer + 1).all()
    core.barrier_all()
    core.free_array(a)


def test_tensor_and_put_get_on_the_default_stream(me, npes, peer):
    dst = core.tensor((8,), dtype=torch.float32)
    src = torch.full((8,), float(me), dtype=torch.float32)
    core.put(dst, src, peer)
    core.barrier(Teams.TEAM_WORLD)
    assert torch.equal(dst, torch.full((8,), float((me - 1) % npes)))
    back = torch.zeros(8)
    core.get(back, dst, peer)
    assert torch.equal(back, torch.full((8,), float(me)))
    core.barrier_all()
    core.free_tensor(dst)


def test_put_signal_and_signal_wait(me, npes, peer):
    data = core.array((16,), dtype="float64")
    sig = core.array((2,), dtype="uint64")
    src = np.arange(16, dtype=np.float64) + me
    core.barrier_all()
    core.put_signal(data, src, sig, 1, SignalOp.SIGNAL_ADD, peer)
    core.signal_wait(sig, 1, ComparisonType.CMP_GE)
    assert (data == np.arange(16) + (me - 1) % npes).all()
    core.signal_op(sig[1:], 7, SignalOp.SIGNAL_SET, peer)
    core.signal_wait(sig[1:], 7, ComparisonType.CMP_EQ)
    core.quiet()
    core.barrier_all()
    core.free_array(sig)
    core.free_array(data)


def test_collectives(me, npes):
    src = core.array((6,), dtype="int64")
    dst = core.array((6,), dtype="int64")
    gathered = core.array((6 * npes,), dtype="int64")
    src[:] = me + 1
    core.barrier_all()
    core.reduce(Teams.TEAM_WORLD, dst, src, "sum")
    assert (dst == npes * (npes + 1) // 2).all()
    core.fcollect(Teams.TEAM_WORLD, gathered, src)
    assert (gathered == np.repeat(np.arange(1, npes + 1), 6)).all()
    core.broadcast(Teams.TEAM_WORLD, dst, src, root=0)
    assert (dst == 1).all()
    core.sync_all()
    # Element i of block j of PE p's gathered is 100 * j + 10 * i + p: block `me` reduced.
    gathered[:] = (100 * np.arange(npes)[:, None] + 10 * np.arange(6)[None, :] + me).ravel()
    core.barrier_all()
    core.reducescatter(Teams.TEAM_WORLD, dst, gathered, "max")
    assert (dst == 100 * me + 10 * np.arange(6) + npes - 1).all()
    core.reducescatter(Teams.TEAM_WORLD, dst, gathered, "sum")
    assert (dst == npes * (100 * me + 10 * np.arange(6)) + npes * (npes - 1) // 2).all()
    # nvshmem4py's rule: src_array holds exactly one dst_array per member (checked before any
    # member waits, so it fails alike on every PE).
    with pytest.raises(core.NvshmemInvalid, match=r"src_array holds 5 elements, but \d+ members"):
        core.reducescatter(Teams.TEAM_WORLD, dst, gathered[:5], "sum")
    core.barrier_all()
    for a in (gathered, dst, src):
        core.free_array(a)


def test_teams_as_nvshmem4py(me, npes):
    # A split returns None on the PEs it leaves out; None and TEAM_INVALID answer -1 and destroy
    # does nothing, so every PE may destroy what it got.
    first = core.team_split_strided(Teams.TEAM_WORLD, 0, 1, 1)
    assert (first is None) == (me != 0)
    for team in (first, Teams.TEAM_INVALID) if first is None else (Teams.TEAM_INVALID,):
        assert core.team_my_pe(team) == core.team_n_pes(team) == -1
        assert core.team_translate_pe(team, 0, Teams.TEAM_WORLD) == -1
    core.team_destroy(first)
    xteam, yteam = core.team_split_2d(Teams.TEAM_WORLD, 2, None, 0, None, 0)
    assert core.team_my_pe(xteam) == me % 2 and core.team_my_pe(yteam) == me // 2
    core.team_destroy(xteam)
    core.team_destroy(yteam)
    core.barrier_all()


def test_mismatched_sizes_fail_at_the_host_call(peer):
    a = core.array((4,), dtype="int32")
    b = core.array((5,), dtype="int32")
    # One message on both backends (rshmem.torch's on-stream checks): dst must hold all of src.
    with pytest.raises(rshmem.InvalidArgumentError, match="dst holds 4 elements, but 5 are needed"):
        core.put(a, b, peer)
    core.barrier_all()
    core.free_array(b)
    core.free_array(a)


def test_misuse_is_an_rshmem_error():
    with pytest.raises(core.NvshmemInvalid, match="not made by array"):
        core.free_array(np.zeros(3))
    with pytest.raises(core.NvshmemInvalid, match="pass remote_pe"):
        core.put(np.zeros(3), np.zeros(3))
    with pytest.raises(core.NvshmemInvalid, match="array or tensor"):
        core.put([1, 2], [3, 4], 0)
    with pytest.raises(core.NvshmemInvalid, match="initializer_method"):
        core.init(initializer_method="shmem")
    with pytest.raises(AttributeError, match="multicast"):
        core.get_multicast_array  # noqa: B018
    assert issubclass(core.NvshmemInvalid, rshmem.InvalidArgumentError)
    assert issubclass(core.NvshmemError, rshmem.RshmemError)


class _CoreStream:
    def __cuda_stream__(self):
        return (0, 1234)


class _NumbaStream:
    class handle:  # noqa: N801 - the shape of numba's ctypes handle
        value = 77


class _TorchStream:
    cuda_stream = 99


class _Device:
    device_id = 3


def test_streams_and_devices_of_every_kind():
    assert stream_handle(None) is None and stream_handle(5) == 5
    assert stream_handle(_CoreStream()) == 1234
    assert stream_handle(_NumbaStream()) == 77
    assert stream_handle(_TorchStream()) == 99
    with pytest.raises(core.NvshmemInvalid, match="stream must be"):
        stream_handle("default")
    assert device_index(_Device()) == 3 and device_index("cuda:1") == 1 and device_index(torch.device("cuda", 2)) == 2
    assert device_index(None) is None and device_index(0) == 0
    with pytest.raises(core.NvshmemInvalid, match="device must be"):
        device_index(object())


INIT_BY_UID = """
import os, pickle, sys
import rshmem.compat.nvshmem.core as core
rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
path = sys.argv[0] if False else os.environ["UID_FILE"]
if rank == 0:
    uid = core.get_unique_id()
    open(path + ".tmp", "wb").write(pickle.dumps(uid)); os.rename(path + ".tmp", path)
import time
while not os.path.exists(path):
    time.sleep(0.01)
uid = pickle.loads(open(path, "rb").read())
core.init(uid=uid, rank=rank, nranks=n, initializer_method="uid")
assert core.my_pe() == rank and core.n_pes() == n
a = core.array((3,), dtype="float32")
a[:] = rank
core.barrier_all()
assert (core.get_peer_array(a, (rank + 1) % n) == (rank + 1) % n).all()
core.barrier_all()
core.free_array(a)
core.finalize()
core.finalize()  # twice is fine
print("uid init ok", rank)
"""


@pytest.mark.single
def test_init_by_uid_in_a_job_of_its_own(tmp_path):
    out = run_pes(INIT_BY_UID, 2, env={"UID_FILE": str(tmp_path / "uid")})
    for r, p in enumerate(out):
        assert p.returncode == 0, p.stdout + p.stderr
        assert f"uid init ok {r}" in p.stdout
