"""A peer that dies or finalizes while this PE waits on the GPU backend: host waits on device
memory, on-stream barriers and waits (kernels), and a fused op's waits. Two PEs share one GPU
(`RSHMEM_ALLOW_SHARED_GPU=1`); each test starts its own job (`peer_jobs.Job`).

Host waits see a peer leave as on the host backend (docs/errors.md, "When a peer fails"); waits
inside kernels do not, and end at `RSHMEM_DEBUG_WAIT_TIMEOUT_MS` with a record that names the
team's barrier, which the next host call raises."""

import signal
import time

import pytest

from peer_jobs import SEEN_WITHIN_S, Job, assert_leaving_seen, describe, finalize_while_waiting

pytestmark = [pytest.mark.gpu, pytest.mark.single]


def _cuda_or_skip():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")


PRELUDE = """
import os, signal, sys, time, torch, rshmem, rshmem.torch as rt
torch.cuda.set_device(rt.device())
rshmem.init(backend="cuda")
me = rshmem.my_pe()
"""


def test_host_barrier_on_device_memory_sees_a_killed_peer():
    _cuda_or_skip()
    code = PRELUDE + """
if me == 1:
    print("READY", flush=True)
    time.sleep(60)
rshmem.barrier_all()
print("PASSED THE BARRIER")
"""
    job = Job(code, backend="cuda")
    job.wait_for_line(1, "READY", timeout=120)
    time.sleep(0.5)
    killed_at = job.signal(1, signal.SIGKILL) - job.started
    ended = job.finish(timeout=120)
    assert ended[0].returncode != 0 and "PASSED" not in ended[0].stdout, describe(ended)
    assert "PeerDiedError" in ended[0].stderr and "PE 1 died" in ended[0].stderr and "barrier_all" in ended[0].stderr, describe(ended)
    assert ended[0].exited_after - killed_at < SEEN_WITHIN_S + 5, describe(ended)  # + CUDA teardown


@pytest.mark.parametrize("call", ["barrier_all", "signal_wait_until", "fcollect"])
def test_host_waits_see_a_peer_finalize(call):
    _cuda_or_skip()
    calls = {
        "barrier_all": "rshmem.barrier_all()",
        "signal_wait_until": "rshmem.signal_wait_until(word, rshmem.CMP_GE, 1)",
        "fcollect": "rshmem.fcollect(dst, src)",
    }
    setup = """
word = rt.create_symmetric_tensor((1,), torch.int64)
src = rt.create_symmetric_tensor((4,), torch.float32)
dst = rt.create_symmetric_tensor((8,), torch.float32)"""
    ended = Job(finalize_while_waiting(PRELUDE, setup, calls[call], 0.5), backend="cuda").finish(timeout=120)
    assert_leaving_seen(ended, call)


@pytest.mark.parametrize("call", ["barrier_all_on_stream", "signal_wait_until_on_stream", "all_gather_matmul"])
def test_waits_in_kernels_end_at_the_debug_timeout_naming_the_wait(call):
    # PE 1 dies; PE 0's kernel waits for it and cannot see that: it stops at the debug timeout
    # and the next host call raises TimeoutError naming the wait (a team's barrier words for a
    # barrier), and the process exits instead of hanging.
    _cuda_or_skip()
    calls = {
        "barrier_all_on_stream": "rshmem.barrier_all_on_stream()",
        "signal_wait_until_on_stream": "rshmem.signal_wait_until_on_stream(word, rshmem.CMP_GE, 1)",
        "all_gather_matmul": "rshmem.ops.all_gather_matmul(torch.ones(64, 64, device='cuda', dtype=torch.float16), "
                             "torch.ones(64, 64, device='cuda', dtype=torch.float16))",
    }
    code = PRELUDE + f"""
word = rt.create_symmetric_tensor((1,), torch.int64)
rshmem.barrier_all()
if me == 1:
    print("READY", flush=True)
    time.sleep(60)
time.sleep(0.5)
{calls[call]}
torch.cuda.synchronize()
rshmem.check_device_error()
print("NO ERROR", flush=True)
"""
    job = Job(code, backend="cuda", env={"RSHMEM_DEBUG_WAIT_TIMEOUT_MS": "3000"})
    job.wait_for_line(1, "READY", timeout=120)
    job.signal(1, signal.SIGKILL)
    ended = job.finish(timeout=120)
    survivor = ended[0]
    assert survivor.returncode != 0 and "NO ERROR" not in survivor.stdout, describe(ended)
    text = survivor.stderr
    assert "PeerDiedError" in text or "TimeoutError" in text or "DriverError" in text, describe(ended)
    if "TimeoutError" in text and call != "signal_wait_until_on_stream":
        assert "barrier words of team" in text or "timed out" in text, describe(ended)
