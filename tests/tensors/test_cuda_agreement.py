"""On the cuda backend: on-stream collectives whose members disagree on their
arguments fail on every PE with an error naming both calls, instead of moving wrong data or
waiting for ever (runtime/src/runtime/agree.rs: the first barrier kernel carries each member's
call, and a difference stops every member's kernel with a mismatch record).

    RSHMEM_ALLOW_SHARED_GPU=1 pytest -m gpu tests/tensors/test_cuda_agreement.py

One process (marker `single`): each case is a job of two plain processes of its own, because a
kernel that stops leaves its CUDA context unusable. Every job first runs each on-stream
collective once with matching arguments and checks the data (the agreement lets the right calls
through), then makes the mismatched call, drains the stream and reports. A job has a deadline,
and RSHMEM_DEBUG_WAIT_TIMEOUT_MS turns a kernel that would wait for ever into an error that
fails the assertions instead of the deadline.
"""

import sys
import textwrap

import pytest
import torch

from conftest import shared_gpu_allowed
from cuda_util import Job

pytestmark = [pytest.mark.gpu, pytest.mark.single]

JOB = textwrap.dedent(
    """
    import faulthandler, os, sys, time
    # A hang anywhere in Python prints every thread's stack and ends the PE (before the test's
    # job limit), so a failing case always shows where it stopped.
    faulthandler.dump_traceback_later(float(os.environ["AGREE_JOB_LIMIT_S"]) - 10, exit=True)
    def step(what):
        print(f"STEP {time.monotonic() - T0:6.1f}s {what}", flush=True)
    T0 = time.monotonic()
    import torch
    import rshmem
    import rshmem.torch as rt
    case = sys.argv[1]
    rshmem.init(backend="cuda")
    step("init done")
    me, n = rshmem.my_pe(), rshmem.n_pes()
    here = torch.device("cuda", torch.cuda.current_device())
    src = rt.create_symmetric_tensor((4096,), torch.float32)
    dst = rt.create_symmetric_tensor((4096 * n,), torch.float32)
    isrc = rt.create_symmetric_tensor((64,), torch.int32)
    big = rt.create_symmetric_tensor((1 << 17,), torch.float32)  # 512 KiB: too large to stage
    bigdst = rt.create_symmetric_tensor(((1 << 17) * n,), torch.float32)
    src.copy_(torch.arange(4096, device=here, dtype=torch.float32) + 1000 * me)
    isrc.fill_(me)
    torch.cuda.synchronize()
    rshmem.barrier_all()

    def want(cond, what):
        if not bool(cond):
            print(f"WRONG DATA: {what}", flush=True)
            os._exit(4)

    # Matching calls of every form pass the agreement and move the right data.
    rt.reduce_on_stream(dst[:64], src[:64], "sum")
    torch.cuda.synchronize()
    want(torch.equal(dst[:64], sum(torch.arange(64, device=here, dtype=torch.float32) + 1000 * p for p in range(n))), "reduce")
    rt.broadcast_on_stream(dst[:16], src[:16], root=1)
    torch.cuda.synchronize()
    want(torch.equal(dst[:16], torch.arange(16, device=here, dtype=torch.float32) + 1000), "broadcast")
    rt.fcollect_on_stream(dst[: 8 * n], src[:8])  # staged (TEAM_WORLD, small)
    torch.cuda.synchronize()
    want(all(torch.equal(dst[8 * p : 8 * p + 8], torch.arange(8, device=here, dtype=torch.float32) + 1000 * p) for p in range(n)), "fcollect")
    rt.alltoall_on_stream(dst[: 2 * n], src[: 2 * n])
    torch.cuda.synchronize()
    want(all(torch.equal(dst[2 * p : 2 * p + 2], torch.arange(2 * me, 2 * me + 2, device=here, dtype=torch.float32) + 1000 * p) for p in range(n)), "alltoall")
    rshmem.barrier_all()
    step("matching calls ok")

    def drain():
        stream = torch.cuda.current_stream()
        deadline = time.monotonic() + 60
        while True:
            try:
                if stream.query():
                    break
            except RuntimeError:  # the kernel stopped: the runtime's record says why
                rshmem._native.check_device_error()
                raise
            rshmem._native.check_device_error()
            if time.monotonic() > deadline:
                print("HUNG: the stream neither finished nor reported an error in 60 s", flush=True)
                os._exit(3)
            time.sleep(0.01)
        rshmem._native.check_device_error()

    try:
        if case == "reduce_op":
            rt.reduce_on_stream(dst[:8], src[:8], ["sum", "max"][me % 2])
        elif case == "reduce_dtype":
            (rt.reduce_on_stream(dst[:8], src[:8]) if me == 0 else rt.reduce_on_stream(isrc[8:16], isrc[:8]))
        elif case == "reduce_zero":
            rt.reduce_on_stream(dst[: 8 * me], src[: 8 * me])
        elif case == "reduce_vs_reducescatter":
            (rt.reduce_on_stream(dst[:8], src[:8]) if me == 0 else rt.reducescatter_on_stream(dst[:8], src[: 8 * n]))
        elif case == "broadcast_root":
            rt.broadcast_on_stream(dst[:8], src[:8], root=me)
        elif case == "fcollect_count":
            k = 4 + 4 * me
            rt.fcollect_on_stream(dst[: k * n], src[:k])
        elif case == "fcollect_staged_vs_pulled":
            (rt.fcollect_on_stream(dst[: 4 * n], src[:4]) if me == 0 else rt.fcollect_on_stream(bigdst, big))
        elif case == "alltoall_count":
            k = 1 + me
            rt.alltoall_on_stream(dst[: k * n], src[: k * n])
        elif case == "refused":
            mine = torch.zeros(8, device=here) if me == 1 else dst[:8]  # PE 1: not symmetric
            rt.reduce_on_stream(mine, src[:8])
        elif case == "barrier_vs_reduce":
            (rt.barrier_all_on_stream() if me == 0 else rt.reduce_on_stream(dst[:8], src[:8]))
        else:
            raise SystemExit(f"unknown case {case}")
        step("mismatched call queued")
        drain()
        step("stream drained without an error")
        # A PE whose own call found nothing (it made another call) meets the peer's failure here.
        rshmem.barrier_all()
        print("NO_ERROR", flush=True)
    except rshmem.RshmemError as e:
        print(f"RAISED {type(e).__name__}: {e}", flush=True)
        # A PE that refused its own call: its queued agreement runs before the process ends
        # (bounded: a stream that neither finishes nor fails in 10 s is left to the exit).
        t = time.monotonic()
        while time.monotonic() - t < 10:
            try:
                if torch.cuda.current_stream().query():
                    break
            except RuntimeError:
                break
            time.sleep(0.01)
    step("exit")
    os._exit(0)
    """
)

MISMATCH = "RAISED MismatchError: on-stream collective call"
# (case, what each PE's output must contain: PE 0, PE 1)
CASES = [
    ("broadcast_root", [MISMATCH, "from root 0", "from root 1"], [MISMATCH, "from root 1", "from root 0"]),
    # The same kernel, count and operator: the collective's kind tells them apart.
    ("reduce_vs_reducescatter", [MISMATCH, "reduce sum of 8 x float32", "reducescatter sum of 8 x float32"],
     [MISMATCH, "reducescatter sum of 8 x float32", "reduce sum of 8 x float32"]),
    ("reduce_op", [MISMATCH, "reduce sum of 8 x float32", "reduce max of 8 x float32"],
     [MISMATCH, "reduce max of 8 x float32", "reduce sum of 8 x float32"]),
    ("reduce_dtype", [MISMATCH, "of 8 x float32", "of 8 x int32"], [MISMATCH, "of 8 x int32", "of 8 x float32"]),
    ("reduce_zero", [MISMATCH, "reduce sum of 0 x float32", "of 8 x float32"], [MISMATCH, "of 8 x float32", "of 0 x float32"]),
    ("fcollect_count", [MISMATCH, "fcollect of 4 x float32", "fcollect of 8 x float32"],
     [MISMATCH, "fcollect of 8 x float32", "fcollect of 4 x float32"]),
    # PE 0 stages its small fcollect (it waits on flags); PE 1's is too large to stage (it starts
    # with a barrier): PE 0 sees PE 1's words of this call and completes PE 1's barrier.
    ("fcollect_staged_vs_pulled", [MISMATCH, "fcollect of 4 x float32", "fcollect of 131072 x float32"],
     [MISMATCH, "fcollect of 131072 x float32", "fcollect of 4 x float32"]),
    ("alltoall_count", [MISMATCH, "alltoall of 1 x float32", "alltoall of 2 x float32"],
     [MISMATCH, "alltoall of 2 x float32", "alltoall of 1 x float32"]),
    ("refused", ["RAISED InvalidArgumentError", "PE 1 refused its arguments"], ["RAISED NotSymmetricError"]),
    # PE 0's barrier kernel completes (the barrier counts the same); PE 1's reduction finds PE
    # 0's words of its previous collective, and PE 0 learns of PE 1's failure at its next host
    # barrier.
    ("barrier_vs_reduce", ["RAISED"], [MISMATCH, "reduce sum of 8 x float32 as its on-stream collective #5 of team 0",
                                       "alltoall of 2 x float32 as its on-stream collective #4", "different places"]),
]


@pytest.mark.parametrize("case,want0,want1", CASES, ids=[c[0] for c in CASES])
def test_mismatched_on_stream_collectives_fail_on_every_pe(tmp_path, case, want0, want1):
    shared = torch.cuda.device_count() < 2
    if shared and not shared_gpu_allowed():
        pytest.skip("needs 2 GPUs, or 1 with RSHMEM_ALLOW_SHARED_GPU=1")
    script = tmp_path / "agree_job.py"
    script.write_text(JOB)
    limit = 60
    job = Job(script, args=(case,), CUDA_VISIBLE_DEVICES="0" if shared else "0,1",
              RSHMEM_DEBUG_WAIT_TIMEOUT_MS="15000", AGREE_JOB_LIMIT_S=str(limit))
    try:
        outs = {}
        for rank in (0, 1):
            outs[rank] = job.wait(rank, timeout=limit)
            sys.stdout.write(f"\n[{case}] PE {rank} exit {outs[rank][0]}:\n{outs[rank][1]}")
            sys.stdout.flush()
        both = "\n".join(f"--- PE {r} (exit {c}) ---\n{o}" for r, (c, o) in outs.items())
        for rank, want in ((0, want0), (1, want1)):
            code, out = outs[rank]
            assert code == 0, f"{case}: PE {rank} exited with {code} (None: still running after {limit} s):\n{both}"
            assert "WRONG DATA" not in out and "NO_ERROR" not in out, f"{case}: PE {rank}:\n{both}"
            for piece in want:
                assert piece in out, f"{case}: PE {rank} should say {piece!r}:\n{both}"
    finally:
        job.close()
