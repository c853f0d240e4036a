"""Init, finalize, re-init, PE queries and calls before init."""

import os
import subprocess
import sys

import pytest

import rshmem
from conftest import UNDER_TORCHRUN, start


def test_queries_match_the_launcher():
    assert rshmem.is_initialized()
    assert rshmem.backend() == "host"
    if UNDER_TORCHRUN:
        import torch.distributed as dist

        assert rshmem.my_pe() == dist.get_rank()
        assert rshmem.n_pes() == dist.get_world_size()
    else:
        assert (rshmem.my_pe(), rshmem.n_pes()) == (0, 1)


def test_second_init_raises():
    with pytest.raises(rshmem.AlreadyInitializedError, match="finalize"):
        start()
    assert rshmem.is_initialized()


def test_finalize_is_idempotent_and_reinit_works():
    rshmem.finalize()
    assert not rshmem.is_initialized()
    rshmem.finalize()  # no-op
    start()
    assert rshmem.is_initialized()
    rshmem.barrier_all()


def test_reinit_starts_a_fresh_heap_and_forgets_old_tensors(me, npes, mapped_peer):
    import torch

    import rshmem.torch as rtorch

    old = rtorch.create_symmetric_tensor((16,), torch.int64)
    with pytest.warns(rshmem.LiveTensorsWarning, match=r"1 symmetric tensor\(s\) \(128 bytes\)"):
        rshmem.finalize()  # frees everything, `old` included
    start()
    base = rshmem.heap_in_use()
    t = rtorch.create_symmetric_tensor((16,), torch.int64)  # may get the address `old` had
    with pytest.raises(rshmem.NotSymmetricError, match="already freed"):
        rtorch.free_tensor(old)  # a tensor of the previous run is not one of this run
    assert not t.any()
    t.fill_(me + 1)
    rshmem.barrier_all()
    peer = mapped_peer
    assert torch.equal(rtorch.peer_tensor(t, peer), torch.full((16,), peer + 1, dtype=torch.int64))
    rshmem.barrier_all()
    rtorch.free_tensor(t)
    assert rshmem.heap_in_use() == base
    assert (rshmem.my_pe(), rshmem.n_pes()) == (me, npes)


CALLS = [
    ("my_pe", lambda: rshmem.my_pe()),
    ("n_pes", lambda: rshmem.n_pes()),
    ("barrier_all", lambda: rshmem.barrier_all()),
    ("quiet", lambda: rshmem.quiet()),
    ("fence", lambda: rshmem.fence()),
    ("malloc", lambda: rshmem.malloc(64)),
    ("team_n_pes", lambda: rshmem.team_n_pes(rshmem.Team.WORLD)),
    ("signal_fetch", lambda: rshmem.signal_fetch(4096)),
    ("atomic", lambda: rshmem.atomic_fetch(4096, 0, dtype="int64")),
    ("heap_in_use", lambda: rshmem.heap_in_use()),
]


def test_calls_before_init_raise_not_initialized():
    import torch

    import rshmem.torch as rtorch

    rshmem.finalize()
    try:
        for name, call in CALLS + [("create_symmetric_tensor", lambda: rtorch.create_symmetric_tensor((4,), torch.float32))]:
            with pytest.raises(rshmem.NotInitializedError, match=r"call rshmem.init\(\) before") as info:
                call()
            assert isinstance(info.value, rshmem.RshmemError), name
    finally:
        start()


def test_partial_uid_arguments_raise():
    with pytest.raises(rshmem.InvalidArgumentError, match="together"):
        rshmem.init(uid=b"x", rank=0)


def test_unique_id_is_bytes():
    uid = rshmem.get_unique_id()
    assert isinstance(uid, bytes) and len(uid) > 0


@pytest.mark.single
def test_explicit_uid_single_pe_and_bad_uid():
    rshmem.finalize()
    try:
        rshmem.init(uid=rshmem.get_unique_id(), rank=0, nranks=1, backend="host")
        assert (rshmem.my_pe(), rshmem.n_pes()) == (0, 1)
        rshmem.finalize()
        with pytest.raises(rshmem.RshmemError):
            rshmem.init(uid=b"definitely not a unique id", rank=0, nranks=1, backend="host")
        assert not rshmem.is_initialized()
        with pytest.raises(rshmem.ConfigError, match="cuda"):
            rshmem.init(backend="tpu")
        assert not rshmem.is_initialized()
    finally:
        rshmem.finalize()
        start()


@pytest.mark.single
def test_import_needs_neither_torch_nor_triton():
    code = "import sys, rshmem; assert 'torch' not in sys.modules and 'triton' not in sys.modules; print(len(rshmem.__all__))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ}, timeout=120)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) > 50


def test_all_names_exist():
    for name in rshmem.__all__:
        assert hasattr(rshmem, name), name
    import rshmem.torch as rtorch

    for name in rtorch.__all__:
        assert hasattr(rtorch, name), name


def test_exception_hierarchy():
    assert issubclass(rshmem.PeOutOfRangeError, IndexError)
    assert issubclass(rshmem.NotSymmetricError, ValueError)
    assert issubclass(rshmem.InvalidArgumentError, ValueError)
    assert issubclass(rshmem.DTypeError, TypeError)
    assert issubclass(rshmem.TimeoutError, TimeoutError)
    for name in rshmem.__all__:
        obj = getattr(rshmem, name)
        if isinstance(obj, type) and issubclass(obj, BaseException) and not issubclass(obj, Warning):
            assert issubclass(obj, rshmem.RshmemError), name
    assert issubclass(rshmem.LiveTensorsWarning, RuntimeWarning)


def test_every_error_class_is_public():
    """Each exception class of the error table (api/errors.toml, built into rshmem._native) is
    `rshmem.<name>` and in `rshmem.__all__`, so any runtime error can be caught by its name."""
    native = rshmem._native
    classes = [name for name in dir(native)
               if isinstance(getattr(native, name), type) and issubclass(getattr(native, name), native.RshmemError)]
    assert "TransportError" in classes and len(classes) >= 19, classes
    for name in classes:
        assert getattr(rshmem, name, None) is getattr(native, name), name
        assert name in rshmem.__all__, name
