"""Lifecycle and failure handling on the cuda backend.

Two PEs (under `torchrun --nproc-per-node 2 -m pytest -m gpu`): 10,000 stream barriers in a row,
finalize then init again. One process (`pytest -m gpu`, marker `single`): jobs of two plain
processes started with torchrun's variables, for what must fail cleanly: two PEs on one GPU
without `RSHMEM_ALLOW_SHARED_GPU=1`, and a peer killed while the other waits in a barrier (on
the host; and on a stream, where the barrier kernel gives up after `RSHMEM_DEBUG_WAIT_TIMEOUT_MS`
and `check_device_error` reports it). Each job has a deadline; a hang fails the test.
"""

import sys
import textwrap
import time

import pytest
import torch

import rshmem
import rshmem.torch as rtorch
from conftest import shared_gpu_allowed, start
from cuda_util import Job, dev, rand, same_bits, settle, sym, wait_for_file


@pytest.fixture(scope="module")
def on_cuda(cuda_backend):
    yield
    settle()


# ------------------------------------------------------------------------------------- 2 PEs


@pytest.mark.gpu
@pytest.mark.multi
def test_10000_barrier_all_on_stream_in_a_row(on_cuda, me, peer, npes):
    t = sym((256,), torch.int64)
    remote = rtorch.peer_tensor(t, peer)
    for _ in range(10_000):
        rtorch.barrier_all_on_stream()
    remote.fill_(me)  # after all of them, a barrier still orders a peer's write before a read
    rtorch.barrier_all_on_stream()
    seen = t.clone()
    torch.cuda.synchronize()
    assert torch.equal(seen, torch.full((256,), (me - 1) % npes, dtype=torch.int64, device=dev()))
    del remote
    settle()
    rtorch.free_tensor(t)


@pytest.mark.gpu
@pytest.mark.multi
def test_finalize_then_init_again(on_cuda, me, peer, npes):
    old = sym((1024,), torch.float32, fill=1.0)
    torch.cuda.synchronize()
    rshmem.finalize()
    assert not rshmem.is_initialized()
    rshmem.finalize()  # idempotent
    start("cuda")
    from rshmem import _cuda

    assert rshmem.backend() == "cuda" and torch.cuda.current_device() == _cuda.ordinal()
    # The old tensor's memory went with the old heap: using it is refused, not a crash.
    with pytest.raises(rshmem.NotSymmetricError, match="freed"):
        rtorch.putmem_on_stream(old, torch.zeros(1024, device=dev()), peer)
    for round_ in range(2):
        t = sym(((1 << 20) + round_,), torch.float16)
        rtorch.putmem_on_stream(t, rand(t.numel(), torch.float16, seed=me), peer)
        rtorch.barrier_all_on_stream()
        torch.cuda.synchronize()
        assert same_bits(t, rand(t.numel(), torch.float16, seed=(me - 1) % npes))
        settle()
        rtorch.free_tensor(t)


# --------------------------------------------------------------------- jobs of two processes

INIT_JOB = textwrap.dedent(
    """
    import sys
    import rshmem
    try:
        rshmem.init(backend="cuda")
    except rshmem.RshmemError as e:
        print(f"RAISED {type(e).__name__}: {e}", flush=True)
        sys.exit(0)
    import torch
    import rshmem.torch as rt
    me, n = rshmem.my_pe(), rshmem.n_pes()
    t = rt.create_symmetric_tensor((4096,), torch.float32)
    here = torch.device("cuda", torch.cuda.current_device())
    rt.putmem_on_stream(t, torch.full((4096,), float(me), device=here), (me + 1) % n)
    rt.barrier_all_on_stream()
    torch.cuda.synchronize()
    ok = torch.equal(t, torch.full((4096,), float((me - 1) % n), device=here))
    print(f"INIT_OK data_ok={ok}", flush=True)
    rt.free_tensor(t)
    rshmem.finalize()
    """
)

WRONG_DEVICE_JOB = textwrap.dedent(
    """
    import os
    import torch
    import rshmem
    torch.cuda.set_device(1 - int(os.environ["LOCAL_RANK"]))  # the other PE's GPU
    try:
        rshmem.init(backend="cuda")
    except rshmem.InvalidArgumentError as e:
        print(f"RAISED InvalidArgumentError: {e}", flush=True)
    else:
        print("STARTED on", torch.cuda.current_device(), flush=True)
        rshmem.finalize()
    """
)

KILL_JOB = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    import torch
    import rshmem
    import rshmem.torch as rt
    mode, ready, go = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    rshmem.init(backend="cuda")
    me = rshmem.my_pe()
    t = rt.create_symmetric_tensor((1024,), torch.float32)
    rshmem.barrier_all()
    if me == 1:
        ready.touch()
        time.sleep(600)  # killed by the test
        os._exit(5)
    while not go.exists():
        time.sleep(0.02)
    try:
        if mode == "host":
            rshmem.barrier_all()
        else:
            rt.barrier_all_on_stream()
            check = getattr(rshmem._native, "check_device_error", lambda: None)
            stream = torch.cuda.current_stream()
            deadline = time.monotonic() + 60
            while True:
                try:
                    if stream.query():
                        break
                except RuntimeError:  # the barrier kernel trapped: the runtime's record says why
                    check()
                    raise
                check()
                if time.monotonic() > deadline:
                    print("HUNG: the stream barrier neither finished nor reported an error in 60 s", flush=True)
                    os._exit(3)
                time.sleep(0.01)
            check()
            rshmem.barrier_all()
        print("NO_ERROR", flush=True)
        os._exit(2)
    except rshmem.RshmemError as e:
        print(f"RAISED {type(e).__name__}: {e}", flush=True)
        os._exit(0)
    """
)


def _script(tmp_path, text, name):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.gpu
@pytest.mark.single
def test_two_pes_on_one_gpu_without_opt_in_fail_with_a_clear_error(tmp_path):
    job = Job(_script(tmp_path, INIT_JOB, "init_job.py"), CUDA_VISIBLE_DEVICES="0", RSHMEM_ALLOW_SHARED_GPU=None)
    try:
        for rank in (0, 1):
            code, out = job.wait(rank, timeout=120)
            assert code == 0, f"rank {rank} exited with {code}:\n{out}"
            assert "RAISED InvalidArgumentError" in out, f"rank {rank}:\n{out}"
            assert "RSHMEM_ALLOW_SHARED_GPU=1" in out and "same GPU" in out, out
    finally:
        job.close()


@pytest.mark.gpu
@pytest.mark.single
def test_two_pes_on_one_gpu_with_opt_in_work(tmp_path):
    """The control of the test above: the same job with the opt-in runs and moves data."""
    job = Job(_script(tmp_path, INIT_JOB, "init_job.py"), CUDA_VISIBLE_DEVICES="0", RSHMEM_ALLOW_SHARED_GPU="1")
    try:
        for rank in (0, 1):
            code, out = job.wait(rank, timeout=120)
            assert code == 0 and "INIT_OK data_ok=True" in out, f"rank {rank} exited with {code}:\n{out}"
    finally:
        job.close()


@pytest.mark.gpu
@pytest.mark.single
@pytest.mark.distinct_gpus
def test_init_refuses_a_torch_device_that_is_not_the_pes_gpu(tmp_path):
    """init never changes the device the program chose: it names both and says what to do."""
    job = Job(_script(tmp_path, WRONG_DEVICE_JOB, "wrong_device_job.py"), CUDA_VISIBLE_DEVICES="0,1")
    try:
        for rank in (0, 1):
            code, out = job.wait(rank, timeout=120)
            assert code == 0, f"rank {rank} exited with {code}:\n{out}"
            want = f"torch's current CUDA device is cuda:{1 - rank}, but this PE's GPU is cuda:{rank}"
            assert "RAISED InvalidArgumentError" in out and want in out, out
            assert "torch.cuda.set_device(rshmem.torch.device())" in out, out
    finally:
        job.close()


@pytest.mark.gpu
@pytest.mark.single
@pytest.mark.parametrize("mode", ["host", "stream"])
def test_a_killed_peer_makes_the_other_fail_not_hang(tmp_path, mode):
    shared = torch.cuda.device_count() < 2
    if shared and not shared_gpu_allowed():
        pytest.skip("needs 2 GPUs, or 1 with RSHMEM_ALLOW_SHARED_GPU=1")
    ready, go = tmp_path / "ready", tmp_path / "go"
    # A barrier kernel cannot hear that a peer died; it gives up after the device wait timeout
    # and records why (check_device_error). The host barrier must notice the death by itself.
    wait_ms = "10000" if mode == "stream" else None
    job = Job(
        _script(tmp_path, KILL_JOB, "kill_job.py"),
        args=(mode, ready, go),
        CUDA_VISIBLE_DEVICES="0" if shared else "0,1",
        RSHMEM_DEBUG_WAIT_TIMEOUT_MS=wait_ms,
    )
    try:
        if not wait_for_file(ready, timeout=120):
            outs = [job.wait(r, timeout=1)[1] for r in (0, 1)]
            pytest.fail(f"the job did not start:\nrank 0:\n{outs[0]}\nrank 1:\n{outs[1]}")
        job.procs[1].kill()  # SIGKILL: no goodbye to the bootstrap
        job.procs[1].wait()
        go.touch()
        started = time.monotonic()
        code, out = job.wait(0, timeout=150)
        took = time.monotonic() - started
        assert code is not None, f"PE 0 hung for {took:.0f} s after its peer was killed ({mode} barrier):\n{out}"
        assert code == 0, f"PE 0 exited with {code} after {took:.0f} s ({mode} barrier):\n{out}"
        assert "RAISED PeerDiedError" in out or "RAISED TimeoutError" in out, out
        sys.stdout.write(f"\n[{mode} barrier] PE 0 failed after {took:.1f} s: {out.strip()}\n")
    finally:
        job.close()
