"""finalize with symmetric tensors still alive, and processes that exit without finalize.

Each test starts its own small job with `run_pes` (separate processes on a fresh port), so it
runs the same alone and under torchrun."""

import time

from conftest import run_pes

KEPT = """
import gc, warnings, torch, rshmem, rshmem.torch as rt
rshmem.init()
kept = rt.create_symmetric_tensor((4, 8), torch.float32)        # 128 bytes, kept
gone = rt.create_symmetric_tensor((16,), torch.int64)           # freed: does not count
rt.free_tensor(gone)
dropped = rt.create_symmetric_tensor((1024,), torch.uint8)      # collected: does not count
del dropped
gc.collect()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    rshmem.finalize()
live = [w for w in caught if issubclass(w.category, rshmem.LiveTensorsWarning)]
assert len(live) == 1, [str(w.message) for w in caught]
assert issubclass(live[0].category, RuntimeWarning)
print("WARNING:", live[0].message)
def refused(call, label):
    try:
        call()
    except rshmem.NotSymmetricError as e:
        print(label, e)
    else:
        raise AssertionError("a tensor kept across finalize was still accepted")
refused(lambda: rt.free_tensor(kept), "RAISED:")
rshmem.init()  # the next run's heap may reuse the address: the old tensor is still refused
fresh = rt.create_symmetric_tensor((4, 8), torch.float32)
refused(lambda: rt.free_tensor(kept), "RAISED AFTER REINIT:")
refused(lambda: rt.peer_tensor(kept, 0), "RAISED AFTER REINIT:")
rt.free_tensor(fresh)
rshmem.finalize()
"""


def _ok(results):
    for pe, r in enumerate(results):
        assert r.returncode == 0, f"PE {pe} exited {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"


def test_finalize_warns_about_live_tensors_and_frees_them():
    (r,) = run_pes(KEPT, 1)
    _ok([r])
    assert "WARNING: rshmem.finalize(): 1 symmetric tensor(s) (128 bytes) are still alive" in r.stdout
    assert "freed" in r.stdout.split("WARNING:")[1].splitlines()[0]
    assert "RAISED: free_tensor takes" in r.stdout and "already freed" in r.stdout
    assert r.stdout.count("RAISED AFTER REINIT:") == 2 and "freed by rshmem.finalize()" in r.stdout


def test_finalize_without_live_tensors_does_not_warn():
    code = """
import warnings, torch, rshmem, rshmem.torch as rt
warnings.simplefilter("error")
rshmem.init()
ts = rt.create_symmetric_tensors((8,), torch.int32, rshmem.my_pe(), rshmem.n_pes())
rt.free_tensor(ts[rshmem.my_pe()])
rshmem.finalize()
print("CLEAN")
"""
    results = run_pes(code, 2)
    _ok(results)
    assert all("CLEAN" in r.stdout and "still alive" not in r.stderr for r in results)


def test_exit_without_finalize_is_clean():
    code = """
import logging, torch, rshmem, rshmem.torch as rt
logging.basicConfig(level=logging.INFO)
rshmem.init()
t = rt.create_symmetric_tensor((64,), torch.int64)  # left alive: exit must not warn or crash
rshmem.barrier_all()
print("PE", rshmem.my_pe(), "leaving")
"""
    started = time.monotonic()
    results = run_pes(code, 2, timeout=60)
    elapsed = time.monotonic() - started
    _ok(results)
    assert elapsed < 20, f"exiting without finalize took {elapsed:.1f} s"
    for r in results:  # the exit handler finalized both PEs together: nothing failed, nothing warned
        assert "finalizing at interpreter exit" in r.stderr, r.stderr
        assert "still alive" not in r.stderr and "failed" not in r.stderr, r.stderr


def test_exit_after_destroy_process_group_without_finalize():
    code = """
import torch, torch.distributed as dist, rshmem, rshmem.torch as rt
dist.init_process_group("gloo")
rshmem.init(dist.group.WORLD)
t = rt.create_symmetric_tensor((8,), torch.float32)
t.fill_(rshmem.my_pe() + 1)
rshmem.barrier_all()
dist.destroy_process_group()  # rshmem's bootstrap is its own connection: it keeps working
peer = rt.peer_tensor(t, (rshmem.my_pe() + 1) % rshmem.n_pes())
assert float(peer[0]) == (rshmem.my_pe() + 1) % rshmem.n_pes() + 1
rshmem.barrier_all()
print("PE", rshmem.my_pe(), "done")
"""
    started = time.monotonic()
    results = run_pes(code, 2, timeout=60)
    _ok(results)
    assert time.monotonic() - started < 20
    assert all("done" in r.stdout for r in results)


def test_exit_while_a_peer_is_gone_does_not_hang():
    # PE 1 dies without any teardown; PE 0 then exits without finalize: the exit-time finalize
    # must notice the lost peer (or time out) and log it, not hang or crash.
    code = """
import os, rshmem
rshmem.init()
rshmem.barrier_all()
if rshmem.my_pe() == 1:
    os._exit(0)
print("PE 0 leaving")
"""
    started = time.monotonic()
    results = run_pes(code, 2, env={"RSHMEM_BOOTSTRAP_TIMEOUT_S": "10"}, timeout=60)
    _ok(results)
    assert time.monotonic() - started < 20
    assert "finalize at interpreter exit failed" in results[0].stderr, results[0].stderr
