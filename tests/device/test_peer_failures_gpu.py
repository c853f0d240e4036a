"""A peer that dies or finalizes while this PE waits on the GPU backend: host waits on device
memory, on-stream barriers and waits (kernels), and a fused op's waits. Two PEs share one GPU
(`RSHMEM_ALLOW_SHARED_GPU=1`); each test starts its own job (`peer_jobs.Job`).

Host waits see a peer leave as on the host backend (docs/errors.md, "When a peer fails"); waits
inside kernels see it in the word the runtime writes for them (`DeviceState::peer_left`) and stop
with a record naming the wait, which the next host call raises."""

import signal
import time

import pytest

from peer_jobs import SEEN_WITHIN_S, Job, assert_leaving_seen, describe, finalize_while_waiting, wait_on_device

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


KERNEL_WAITS = {
    # (set-up both PEs run, the call PE 0 then makes alone)
    "barrier_all_on_stream": ("", "rt.barrier_all_on_stream()"),
    # A one-thread kernel polling the word (not a stream memory operation, which nothing ends).
    "signal_wait_until_on_stream": ("", "rt.signal_wait_until_on_stream(word[0], rshmem.CMP_GE, 1)"),
    # The op's first call agrees on its shapes through the bootstrap (a host wait); the second
    # is its plan alone, so PE 0 then waits inside the GEMM kernel for PE 1's shard.
    # The fused kernel at every size (not the decode rule's gathered A + cuBLAS).
    "all_gather_matmul": ("import rshmem.ops\nrshmem.ops.config.gemm_small_rows = 0\n"
                          "a = torch.ones(128, 256, device='cuda', dtype=torch.float16)\n"
                          "b = torch.ones(256, 256, device='cuda', dtype=torch.float16)\n"
                          "rshmem.ops.all_gather_matmul(a, b)\ntorch.cuda.synchronize()",
                          "rshmem.ops.all_gather_matmul(a, b)"),
}


# How PE 1 leaves while PE 0 waits: (its code after READY, the signal the test sends it once PE 0
# waits, what PE 0's error then says of it).
LEAVING = {
    "killed": ("time.sleep(60)", signal.SIGKILL, ("PeerDiedError", "PE 1 died")),
    "finalized": ("time.sleep(1.0)\n    print('LEAVING', time.time(), flush=True)\n    rshmem.finalize()\n    sys.exit(0)",
                  None, ("PeerExitedError", "PE 1 left the job (rshmem.finalize())")),
    "exception": ("time.sleep(1.0)\n    raise RuntimeError('boom on PE 1')", None,
                  ("PeerExitedError", "PE 1 left the job", "uncaught RuntimeError: boom on PE 1")),
    "ctrl_c": ("time.sleep(60)", signal.SIGINT, ("PeerExitedError", "PE 1 left the job", "uncaught KeyboardInterrupt")),
}


@pytest.mark.parametrize("how", list(LEAVING))
@pytest.mark.parametrize("call", list(KERNEL_WAITS))
def test_waits_in_kernels_see_a_peer_leave(call, how):
    # PE 0's kernel waits for PE 1, which dies (SIGKILL), finalizes, raises or gets Ctrl-C. The
    # kernel sees the departure in the word the runtime writes (DeviceState::peer_left), gives
    # arrivals in flight RSHMEM_PEER_LEFT_GRACE_NS, and stops; CUDA reports the stopped kernel,
    # and rshmem's next call names the peer, how it left and the wait. No debug timeout is set:
    # nothing else would end the wait.
    _cuda_or_skip()
    setup, waits = KERNEL_WAITS[call]
    leave, sig, said = LEAVING[how]
    code = PRELUDE + f"""
word = rt.create_symmetric_tensor((1,), torch.int64)
{setup}
rshmem.barrier_all()
if me == 1:
    print("READY", flush=True)
    {leave}
time.sleep(0.5)
started = time.time()
print("CALLING", flush=True)
""" + wait_on_device(waits)
    job = Job(code, backend="cuda")
    job.wait_for_line(1, "READY", timeout=120)
    if sig is not None:
        # Once PE 0 waits in the kernel (before, its host call would see the departure itself).
        job.wait_for_line(0, "CALLING", timeout=120)
        time.sleep(1.0)
        job.signal(1, sig)
    ended = job.finish(timeout=120)
    out = ended[0].stdout
    assert "RAISED" in out and "NO ERROR" not in out, describe(ended)
    raised = out.split("RAISED", 1)[1]
    took = float(raised.split()[0])
    assert all(n in raised for n in said), describe(ended)
    waiter = "signal_wait_until_on_stream" if call == "signal_wait_until_on_stream" else "a wait in a kernel"
    assert f"{waiter} on PE 0" in raised, describe(ended)
    if call == "barrier_all_on_stream":
        assert "barrier" in raised, describe(ended)  # the word is described as the team's barrier
    # PE 1 leaves about 1 s after READY or 1 s after PE 0 called; PE 0 waited from 0.5 s.
    assert took < SEEN_WITHIN_S + 1.0, describe(ended)
    assert ended[1].returncode != 0 or how == "finalized", describe(ended)


def test_a_stopped_peer_ends_a_kernels_barrier_at_the_debug_timeout():
    # PE 1 stops itself (SIGSTOP) before its on-stream barrier. PE 0's barrier kernel stops at
    # RSHMEM_DEBUG_WAIT_TIMEOUT_MS with a record naming the barrier and PE 1 as the member that
    # never entered it, and PE 0 exits; PE 1, resumed, finishes or raises, and exits in time.
    _cuda_or_skip()
    code = PRELUDE + """
rshmem.barrier_all()
if me == 1:
    os.kill(os.getpid(), signal.SIGSTOP)
started = time.time()
""" + wait_on_device("rt.barrier_all_on_stream()")
    job = Job(code, backend="cuda", env={"RSHMEM_DEBUG_WAIT_TIMEOUT_MS": "3000"})
    deadline = time.monotonic() + 120
    while not job.stopped(1):
        assert time.monotonic() < deadline, "PE 1 never stopped"
        time.sleep(0.05)
    time.sleep(3.0 + SEEN_WITHIN_S)  # past PE 0's timeout and its stopping
    resumed_at = job.signal(1, signal.SIGCONT) - job.started
    ended = job.finish(timeout=120)
    out = ended[0].stdout
    assert "RAISED" in out and "NO ERROR" not in out, describe(ended)
    raised = out.split("RAISED", 1)[1]
    assert raised.split()[1] == "TimeoutError" and "PEs not in this barrier yet: [1]" in raised, describe(ended)
    assert float(raised.split()[0]) < 3.0 + SEEN_WITHIN_S, describe(ended)
    assert ended[1].exited_after - resumed_at < SEEN_WITHIN_S + 5, describe(ended)  # + CUDA teardown


# PEs sharing one GPU whose kernels stop (trap) at the same moment: on one H200 (2026-12-03) one
# of them never stopped, though its host had seen the others die (2 PEs waiting from the same
# instant: PE 0 raised at 3.6 s, PE 1's kernel ran until killed; started 1.5 s apart both raised).
# So sharers stop one at a time: a PE's waits give up DeviceState::stop_delay_ms later
# (STOP_STAGGER_MS per index among the GPU's sharers). These tests are that case.


@pytest.mark.parametrize("n", [2, 3])
def test_kernels_of_pes_sharing_a_gpu_that_time_out_together_all_stop(n):
    # Every PE's kernel waits from the same instant, with the same debug timeout, for a signal
    # nobody sends. Each one stops and raises (its own timeout, or the departure of a PE that
    # stopped before it), one stagger step after the last.
    _cuda_or_skip()
    code = PRELUDE + """
word = rt.create_symmetric_tensor((1,), torch.int64)
rshmem.barrier_all()
started = time.time()
""" + wait_on_device("rt.signal_wait_until_on_stream(word[0], rshmem.CMP_GE, 1)")
    ended = Job(code, n=n, backend="cuda", env={"RSHMEM_DEBUG_WAIT_TIMEOUT_MS": "3000"}).finish(timeout=90)
    for pe in range(n):
        out = ended[pe].stdout
        assert "RAISED" in out and "NO ERROR" not in out, describe(ended)
        raised = out.split("RAISED", 1)[1]
        assert "signal_wait_until_on_stream" in raised and f"PE {pe}" in raised, describe(ended)
        assert raised.split()[1] in ("TimeoutError", "PeerDiedError"), describe(ended)
        assert float(raised.split()[0]) < 3.0 + (n - 1) * 1.0 + SEEN_WITHIN_S, describe(ended)


def test_on_stream_barrier_one_of_three_never_calls_times_out():
    # 3 PEs; PEs 0 and 1 call barrier_all_on_stream, PE 2 never does and stays alive (it sleeps
    # past the debug timeout, then finalizes). The two waiting kernels stop at
    # RSHMEM_DEBUG_WAIT_TIMEOUT_MS (PE 1 one stagger step later: they share a GPU) with a record
    # naming the barrier and PE 2 as the member that never entered it, their next call raises, and
    # every process exits: no PE is left waiting for another.
    _cuda_or_skip()
    code = PRELUDE + """
rshmem.barrier_all()
started = time.time()
if me == 2:
    print("READY", flush=True)
    time.sleep(8.0)
    try:
        rshmem.finalize()
    except rshmem.RshmemError as e:
        print("FINALIZE RAISED", type(e).__name__, flush=True)
    os._exit(0)
""" + wait_on_device("rt.barrier_all_on_stream()")
    job = Job(code, n=3, backend="cuda", env={"RSHMEM_DEBUG_WAIT_TIMEOUT_MS": "3000"})
    ended = job.finish(timeout=90)
    for pe in (0, 1):
        out = ended[pe].stdout
        assert "RAISED" in out and "NO ERROR" not in out, describe(ended)
        raised = out.split("RAISED", 1)[1]
        # The kernel read the members' ticket words before it stopped: PE 2 never entered.
        assert "barrier" in raised and "PEs not in this barrier yet: [2]" in raised, describe(ended)
        assert float(raised.split()[0]) < 3.0 + SEEN_WITHIN_S, describe(ended)
