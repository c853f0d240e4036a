"""The memory model of the device API on 2 GPUs: each line of the "Memory model" section of
docs/memory-model.md is its own test, plus a stress test and the debug wait timeout.

| contract line | tests |
|---|---|
| `putmem_signal*`: target sees signal => sees data | `test_putmem_signal_target_sees_data_with_signal[form]` |
| `signal_wait_until`, `wait_until`: acquire | `test_wait_acquires[...]` |
| `fence()`: issue order to one PE | `test_fence_orders_operations_to_one_pe[first]` |
| `quiet()`: completion, blocking and nbi, to any PE | `test_quiet_completes_operations_to_every_pe[op]` |
| `barrier_all*` = quiet + arrival; 10,000 back to back | `test_barrier_is_quiet[scope]`, `test_ten_thousand_barriers_count_every_arrival[scope]` |
| no lost or early-seen data under load | `test_stress_put_with_signal_random_sizes` (10^5 rounds) |
| debug wait timeout | `test_debug_wait_timeout_names_pe_address_and_values` |

Run the 2-PE tests on a machine with 2 GPUs joined by NVLink:

    PYTHONPATH=python torchrun --nproc-per-node 2 -m pytest tests/device/test_device_memory_model.py -m gpu -q

and the debug-wait test (it starts its own 2-PE torchrun job) as one process:

    PYTHONPATH=python pytest tests/device/test_device_memory_model.py -m gpu -k debug_wait -q

Every PE runs the same tests in the same order (collective allocations and barriers require
it); results are asserted after the closing barrier, so a failure on one PE cannot leave the
other waiting. Without GPUs every test skips; the kernels are still compiled for sm_90 by
tests/tutorials/test_tutorial_kernels_compile.py.

Roles: PE 0 is the producer (origin) and PE 1 the consumer (target); further PEs only join the
barriers. Consumers read what they check *inside* the kernel, right after the wait, so a late
arrival cannot be hidden by the end of the kernel.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")
triton = pytest.importorskip("triton", reason="triton is not installed")
import triton.language as tl  # noqa: E402

import rshmem  # noqa: E402
import rshmem.torch as rtorch  # noqa: E402
import rshmem.triton as rt  # noqa: E402
from rshmem.triton import language as L  # noqa: E402
from rshmem.triton import libshmem_device as shm  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
WORLD = int(os.environ.get("WORLD_SIZE", "1"))
from conftest import _gpus_for, free_port  # noqa: E402

# Back-to-back barriers per test. On a GPU that the PEs share each barrier waits for the GPU to
# switch processes (about 2 ms, docs/gpu-configurations.md): 1,000 there prove the same counting.
BARRIERS = 1_000 if rtorch.gpu_shared() else 10_000

# 2-PE tests: conftest skips `gpu` without a GPU per PE and `multi` below 2 PEs.
two_gpu_pes = [pytest.mark.gpu, pytest.mark.multi]

# Element i of round r holds r * PATTERN + i: every round differs everywhere. A constexpr global,
# so kernels may read it.
PATTERN = tl.constexpr(7919)


# ====================================================================== kernels
@rt.jit
def signal_then_data_kernel(buf, src, sig, ack, errors, n_elems, rounds, FORM: tl.constexpr, BLOCK: tl.constexpr):
    """PE 0 sends round r with `FORM`, signal SET r; PE 1 spins on the signal with its own
    acquire load (not a library wait) and checks the data; it acks so PE 0 can reuse `buf`."""
    me = shm.my_pe()
    offs = tl.arange(0, BLOCK)
    mask = offs < n_elems
    nbytes = n_elems * 4
    err = 0
    if me == 0:
        for r in range(1, rounds + 1):
            if L.tid(0) == 0:
                shm.signal_wait_until(ack, shm.CMP_GE, r - 1)
            L.syncthreads()
            tl.store(src + offs, r * PATTERN + offs, mask=mask)
            L.syncthreads()
            if FORM == "putmem_signal":
                if L.tid(0) == 0:
                    shm.putmem_signal(buf, src, nbytes, sig, r, shm.SIGNAL_SET, 1)
            elif FORM == "putmem_signal_nbi":
                if L.tid(0) == 0:
                    shm.putmem_signal_nbi(buf, src, nbytes, sig, r, shm.SIGNAL_SET, 1)
            elif FORM == "putmem_signal_warp":
                if L.tid(0) < 32:
                    shm.putmem_signal_warp(buf, src, nbytes, sig, r, shm.SIGNAL_SET, 1)
            elif FORM == "putmem_signal_nbi_warp":
                if L.tid(0) < 32:
                    shm.putmem_signal_nbi_warp(buf, src, nbytes, sig, r, shm.SIGNAL_SET, 1)
            elif FORM == "putmem_signal_block":
                shm.putmem_signal_block(buf, src, nbytes, sig, r, shm.SIGNAL_SET, 1)
            else:
                shm.putmem_signal_nbi_block(buf, src, nbytes, sig, r, shm.SIGNAL_SET, 1)
    if me == 1:
        for r in range(1, rounds + 1):
            if L.tid(0) == 0:
                L.wait_value(sig, r, "sys")
            L.syncthreads()
            x = tl.load(buf + offs, mask=mask, other=0)
            err += tl.sum(((x != r * PATTERN + offs) & mask).to(tl.int32))
            L.syncthreads()
            if L.tid(0) == 0:
                shm.signal_op(ack, r, shm.SIGNAL_SET, 0)
        tl.store(errors, err)


@rt.jit
def acquire_kernel(buf, src, flag, ack, errors, bad_seen, n_elems, rounds, WAIT: tl.constexpr, BLOCK: tl.constexpr):
    """PE 0 puts round r with a plain putmem_block, then releases `flag` = r (signal_op, or
    fence + atomic_set for a 32-bit flag); PE 1 waits with `WAIT` (thread 0) and the whole block
    checks the data."""
    me = shm.my_pe()
    offs = tl.arange(0, BLOCK)
    mask = offs < n_elems
    err = 0
    bad = 0
    if me == 0:
        for r in range(1, rounds + 1):
            if L.tid(0) == 0:
                shm.signal_wait_until(ack, shm.CMP_GE, r - 1)
            L.syncthreads()
            tl.store(src + offs, r * PATTERN + offs, mask=mask)
            shm.putmem_block(buf, src, n_elems * 4, 1)
            if L.tid(0) == 0:
                if WAIT == "wait_until_int32":
                    shm.fence()
                    shm.atomic_set(flag, r, 1)
                else:
                    shm.signal_op(flag, r, shm.SIGNAL_SET, 1)
    if me == 1:
        for r in range(1, rounds + 1):
            if L.tid(0) == 0:
                if WAIT == "signal_wait_until":
                    v = shm.signal_wait_until(flag, shm.CMP_GE, r)
                else:
                    v = shm.wait_until(flag, shm.CMP_GE, r)
                bad += (v != r).to(tl.int32)  # PE 0 waits for our ack: nothing newer can be there
            L.syncthreads()
            x = tl.load(buf + offs, mask=mask, other=0)
            err += tl.sum(((x != r * PATTERN + offs) & mask).to(tl.int32))
            L.syncthreads()
            if L.tid(0) == 0:
                shm.signal_op(ack, r, shm.SIGNAL_SET, 0)
        tl.store(errors, err)
        if L.tid(0) == 0:
            tl.store(bad_seen, bad)


@rt.jit
def fence_kernel(data, src, flag, errors, rounds, FIRST: tl.constexpr):
    """One thread. PE 0: `FIRST` (round k's data to PE 1), fence(), then a relaxed atomic_set of
    `flag` = k on PE 1, with no waiting between rounds. PE 1: whenever the flag shows k, the data
    must show round k or later (values only grow)."""
    me = shm.my_pe()
    if L.tid(0) == 0:
        err = 0
        if me == 0:
            for k in range(1, rounds + 1):
                if FIRST == "putmem":
                    for j in tl.static_range(8):
                        tl.store(src + j, tl.cast(k, tl.int64))
                    shm.putmem(data, src, 64, 1)
                elif FIRST == "p":
                    shm.p(data, tl.cast(k, tl.int64), 1)
                elif FIRST == "atomic_add":
                    shm.atomic_add(data, 1, 1)
                else:
                    shm.atomic_set(data, tl.cast(k, tl.int64), 1)
                shm.fence()
                shm.atomic_set(flag, tl.cast(k, tl.int64), 1)
        if me == 1:
            k = tl.cast(0, tl.int64)
            while k < rounds:
                k = shm.wait_until(flag, shm.CMP_GT, k)
                if FIRST == "putmem":
                    for j in tl.static_range(8):
                        err += (shm.atomic_fetch(data + j, me) < k).to(tl.int32)
                else:
                    err += (shm.atomic_fetch(data, me) < k).to(tl.int32)
        tl.store(errors, err)


@rt.jit
def quiet_kernel(buf, src, ctr, sigw, flag, ack, errors, n_elems, rounds, OP: tl.constexpr, BLOCK: tl.constexpr):
    """PE 0, round r: `OP` to PE 1 and to itself, quiet() by thread 0, then a *relaxed* flag store
    to PE 1 (only quiet orders it after the operations). PE 1, after the flag: the effects are
    complete and visible in its own memory and in PE 0's (read through remote_ptr)."""
    me = shm.my_pe()
    offs = tl.arange(0, BLOCK)
    mask = offs < n_elems
    nbytes = n_elems * 4
    err = 0
    if me == 0:
        for r in range(1, rounds + 1):
            if L.tid(0) == 0:
                shm.signal_wait_until(ack, shm.CMP_GE, r - 1)
            L.syncthreads()
            tl.store(src + offs, r * PATTERN + offs, mask=mask)
            L.syncthreads()
            for t in tl.static_range(2):
                pe = 1 - t  # the peer first, then this PE
                if OP == "putmem":
                    if L.tid(0) == 0:
                        shm.putmem(buf, src, nbytes, pe)
                elif OP == "putmem_nbi":
                    if L.tid(0) == 0:
                        shm.putmem_nbi(buf, src, nbytes, pe)
                elif OP == "putmem_nbi_warp":
                    if L.tid(0) < 32:
                        shm.putmem_nbi_warp(buf, src, nbytes, pe)
                elif OP == "putmem_nbi_block":
                    shm.putmem_nbi_block(buf, src, nbytes, pe)
                elif OP == "int_p":
                    if L.tid(0) == 0:
                        shm.int_p(buf, r, pe)
                elif OP == "atomic_add":
                    if L.tid(0) == 0:
                        shm.atomic_add(ctr, 1, pe)
                else:
                    if L.tid(0) == 0:
                        shm.signal_op(sigw, 1, shm.SIGNAL_ADD, pe)
            L.syncthreads()  # every thread's share of a warp/block operation precedes the quiet
            if L.tid(0) == 0:
                shm.quiet()
                shm.atomic_set(flag, tl.cast(r, tl.int64), 1)
    if me == 1:
        for r in range(1, rounds + 1):
            if L.tid(0) == 0:
                shm.wait_until(flag, shm.CMP_EQ, r)
            L.syncthreads()
            for t in tl.static_range(2):
                if t == 0:
                    b = buf
                    c = ctr
                    s = sigw
                else:
                    b = L.symm_at(buf, 0)
                    c = L.symm_at(ctr, 0)
                    s = L.symm_at(sigw, 0)
                if OP == "int_p":
                    err += (tl.load(b) != r).to(tl.int32)
                elif OP == "atomic_add":
                    err += (tl.load(c) != r).to(tl.int32)
                elif OP == "signal_op":
                    err += (tl.load(s) != r).to(tl.int32)
                else:
                    x = tl.load(b + offs, mask=mask, other=0)
                    err += tl.sum(((x != r * PATTERN + offs) & mask).to(tl.int32))
            L.syncthreads()
            if L.tid(0) == 0:
                shm.signal_op(ack, r, shm.SIGNAL_SET, 0)
        tl.store(errors, err)


@rt.jit
def barrier_quiet_kernel(buf, src, errors, n_elems, rounds, SCOPE: tl.constexpr, BLOCK: tl.constexpr):
    """Every PE, round r: putmem_nbi_block of its round-r data into half r % 2 of the right
    neighbour's `buf`, a barrier of `SCOPE`, then the check of what the left neighbour put.
    The barrier alone must complete the nbi puts (its quiet) and wait for every PE (arrival)."""
    me = shm.my_pe()
    world = shm.n_pes()
    right = (me + 1) % world
    left = (me + world - 1) % world
    offs = tl.arange(0, BLOCK)
    mask = offs < n_elems
    err = 0
    for r in range(1, rounds + 1):
        half = buf + (r % 2) * n_elems
        tl.store(src + offs, r * PATTERN + me * 13 + offs, mask=mask)
        shm.putmem_nbi_block(half, src, n_elems * 4, right)
        if SCOPE == "thread":
            if L.tid(0) == 0:
                shm.barrier_all()
            L.syncthreads()
        elif SCOPE == "warp":
            if L.tid(0) < 32:
                shm.barrier_all_warp()
            L.syncthreads()
        else:
            shm.barrier_all_block()
        x = tl.load(half + offs, mask=mask, other=0)
        err += tl.sum(((x != r * PATTERN + left * 13 + offs) & mask).to(tl.int32))
    tl.store(errors, err)


@rt.jit
def arrival_kernel(ctr, errors, iters, SCOPE: tl.constexpr):
    """`iters` back-to-back barriers. Before barrier i each PE adds 1 to `ctr` on PE 0 (relaxed);
    after it, every PE reads ctr on PE 0: all (i + 1) * W adds are there (the barrier's quiet plus
    everyone's arrival) and at most W - 1 of the next round (nobody passes barrier i + 1 early)."""
    me = shm.my_pe()
    world = shm.n_pes()
    err = 0
    for i in range(iters):
        if L.tid(0) == 0:
            shm.atomic_add(ctr, 1, 0)
        if SCOPE == "thread":
            if L.tid(0) == 0:
                shm.barrier_all()
            L.syncthreads()
        elif SCOPE == "warp":
            if L.tid(0) < 32:
                shm.barrier_all_warp()
            L.syncthreads()
        else:
            shm.barrier_all_block()
        if L.tid(0) == 0:
            seen = shm.atomic_fetch(ctr, 0)
            low = tl.cast(i + 1, tl.int64) * world
            err += ((seen < low) | (seen > low + world - 1)).to(tl.int32)
    if L.tid(0) == 0:
        tl.store(errors, err)


@rt.jit
def stress_kernel(inbox, outbox, sizes, offsets, sig, ack, errors, rounds, BLOCK: tl.constexpr):
    """Two CTAs per PE, both directions at once. CTA 0 sends round r (sizes[r] bytes of a
    round-specific pattern, at offsets[r] in `outbox` and `inbox`) to the right neighbour with a
    put-with-signal whose form cycles block / nbi_block / warp, signal SET r. CTA 1 waits for
    round r from the left, checks every byte and acks. A lost, short, stale or early-seen byte
    shows in `errors`."""
    me = shm.my_pe()
    world = shm.n_pes()
    right = (me + 1) % world
    left = (me + world - 1) % world
    role = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    err = 0
    for r in range(1, rounds + 1):
        size = tl.load(sizes + r)
        off = tl.load(offsets + r)
        src_off = off & 15
        dst_off = off >> 4
        if role == 0:
            if L.tid(0) == 0:
                shm.signal_wait_until(ack, shm.CMP_GE, r - 1)  # the right neighbour checked round r - 1
            L.syncthreads()
            for t in range(0, size, BLOCK):
                i = t + offs
                tl.store(outbox + src_off + i, ((r * 131 + i * 7 + me) & 255).to(tl.uint8), mask=i < size)
            form = r % 3
            if form == 0:
                shm.putmem_signal_block(inbox + dst_off, outbox + src_off, size, sig, r, shm.SIGNAL_SET, right)
            elif form == 1:
                shm.putmem_signal_nbi_block(inbox + dst_off, outbox + src_off, size, sig, r, shm.SIGNAL_SET, right)
            else:
                L.syncthreads()
                if L.tid(0) < 32:
                    shm.putmem_signal_warp(inbox + dst_off, outbox + src_off, size, sig, r, shm.SIGNAL_SET, right)
                L.syncthreads()
        else:
            if L.tid(0) == 0:
                shm.signal_wait_until(sig, shm.CMP_EQ, r)
            L.syncthreads()
            for t in range(0, size, BLOCK):
                i = t + offs
                x = tl.load(inbox + dst_off + i, mask=i < size, other=0)
                want = ((r * 131 + i * 7 + left) & 255).to(tl.uint8)
                err += tl.sum(((x != want) & (i < size)).to(tl.int32))
            L.syncthreads()
            if L.tid(0) == 0:
                shm.signal_op(ack, r, shm.SIGNAL_SET, left)
    if role == 1:
        tl.store(errors, err)


@rt.jit
def unmatched_wait_kernel(sig, WHICH: tl.constexpr):
    """Waits for a value nobody writes (the debug-wait test)."""
    if L.tid(0) == 0:
        shm.signal_wait_until(sig + WHICH, shm.CMP_EQ, 7)


# ====================================================================== fixtures and helpers
@pytest.fixture(scope="module")
def pe():
    """rshmem on the cuda backend for this module; the session's host-backend rshmem (see
    conftest.py) is restored afterwards."""
    if not _gpus_for(WORLD) or WORLD < 2:
        pytest.skip("needs 2 PEs with a GPU each, or one GPU shared under RSHMEM_ALLOW_SHARED_GPU=1")
    import torch.distributed as dist
    restore = None
    if rshmem.is_initialized() and rshmem.backend() != "cuda":
        restore = rshmem.backend()
        rshmem.finalize()
    if not rshmem.is_initialized():
        group = dist.group.WORLD if dist.is_available() and dist.is_initialized() else None
        torch.cuda.set_device(rtorch.device())
        rshmem.init(group, backend="cuda")
    rt.install_load_hook()
    yield rshmem.my_pe()
    torch.cuda.synchronize()
    rshmem.barrier_all()
    if restore is not None:
        from conftest import start

        rshmem.finalize()
        start()


def symmetric(shape, dtype, fill=0):
    t = rtorch.create_symmetric_tensor(shape, dtype)
    t.fill_(fill)
    torch.cuda.synchronize()
    return t


def cuda_zeros(n, dtype=torch.int32):
    return torch.zeros(n, dtype=dtype, device="cuda")


def finish():
    """Kernel done here, then every PE is done (asserts come after this, never before)."""
    torch.cuda.synchronize()
    rshmem.barrier_all()


def pattern(rounds_value: int, n: int) -> torch.Tensor:
    return rounds_value * PATTERN.value + torch.arange(n, dtype=torch.int32, device="cuda")


# ====================================================================== tests
PUT_SIGNAL_FORMS = ["putmem_signal", "putmem_signal_nbi", "putmem_signal_warp", "putmem_signal_nbi_warp",
                    "putmem_signal_block", "putmem_signal_nbi_block"]


@pytest.mark.parametrize("form", PUT_SIGNAL_FORMS)
@pytest.mark.gpu
@pytest.mark.multi
def test_putmem_signal_target_sees_data_with_signal(pe, form):
    n, rounds = 4096, 1000
    buf = symmetric((n,), torch.int32, fill=-1)
    sig = symmetric((1,), torch.int64)
    ack = symmetric((1,), torch.int64)
    src = cuda_zeros(n)
    errors = torch.full((1,), -1, dtype=torch.int32, device="cuda")
    rshmem.barrier_all()
    signal_then_data_kernel[(1,)](buf, src, sig, ack, errors, n, rounds, FORM=form, BLOCK=n, num_warps=4)
    finish()
    if pe == 1:
        assert int(errors.item()) == 0, f"{form}: {int(errors.item())} elements older than the signal they came with"
        assert int(sig.item()) == rounds
        assert torch.equal(buf, pattern(rounds, n))


@pytest.mark.parametrize("wait,flag_dtype", [("signal_wait_until", torch.int64), ("wait_until_int64", torch.int64),
                                             ("wait_until_int32", torch.int32)])
@pytest.mark.gpu
@pytest.mark.multi
def test_wait_acquires(pe, wait, flag_dtype):
    n, rounds = 4096, 1000
    buf = symmetric((n,), torch.int32, fill=-1)
    flag = symmetric((1,), flag_dtype)
    ack = symmetric((1,), torch.int64)
    src = cuda_zeros(n)
    errors = torch.full((1,), -1, dtype=torch.int32, device="cuda")
    bad_seen = torch.full((1,), -1, dtype=torch.int32, device="cuda")
    rshmem.barrier_all()
    acquire_kernel[(1,)](buf, src, flag, ack, errors, bad_seen, n, rounds, WAIT=wait, BLOCK=n, num_warps=4)
    finish()
    if pe == 1:
        assert int(errors.item()) == 0, f"{wait}: {int(errors.item())} elements not visible after the wait returned"
        assert int(bad_seen.item()) == 0, f"{wait} returned a value other than the one that satisfied it"


@pytest.mark.parametrize("first", ["putmem", "p", "atomic_add", "atomic_set"])
@pytest.mark.gpu
@pytest.mark.multi
def test_fence_orders_operations_to_one_pe(pe, first):
    rounds = 20_000
    data = symmetric((8,), torch.int64)
    flag = symmetric((1,), torch.int64)
    src = cuda_zeros(8, torch.int64)
    errors = torch.full((1,), -1, dtype=torch.int32, device="cuda")
    rshmem.barrier_all()
    fence_kernel[(1,)](data, src, flag, errors, rounds, FIRST=first, num_warps=1)
    finish()
    if pe == 1:
        assert int(errors.item()) == 0, f"{first} then fence: the flag overtook the data {int(errors.item())} times"
        assert int(flag.item()) == rounds


@pytest.mark.parametrize("op", ["putmem", "putmem_nbi", "putmem_nbi_warp", "putmem_nbi_block", "int_p", "atomic_add",
                                "signal_op"])
@pytest.mark.gpu
@pytest.mark.multi
def test_quiet_completes_operations_to_every_pe(pe, op):
    n, rounds = 4096, 500
    buf = symmetric((n,), torch.int32, fill=-1)
    ctr = symmetric((1,), torch.int64)
    sigw = symmetric((1,), torch.int64)
    flag = symmetric((1,), torch.int64)
    ack = symmetric((1,), torch.int64)
    src = cuda_zeros(n)
    errors = torch.full((1,), -1, dtype=torch.int32, device="cuda")
    rshmem.barrier_all()
    quiet_kernel[(1,)](buf, src, ctr, sigw, flag, ack, errors, n, rounds, OP=op, BLOCK=n, num_warps=4)
    finish()
    if pe == 1:
        assert int(errors.item()) == 0, f"{op}: {int(errors.item())} effects not visible after quiet()"
    if pe in (0, 1):
        # Both copies (PE 1's, and PE 0's own) hold the last round's effect.
        if op == "atomic_add":
            assert int(ctr.item()) == rounds
        elif op == "signal_op":
            assert int(sigw.item()) == rounds
        elif op == "int_p":
            assert int(buf[0].item()) == rounds
        else:
            assert torch.equal(buf, pattern(rounds, n))


@pytest.mark.parametrize("scope", ["thread", "warp", "block"])
@pytest.mark.gpu
@pytest.mark.multi
def test_barrier_is_quiet(pe, scope):
    n, rounds = 4096, 1000
    buf = symmetric((2 * n,), torch.int32, fill=-1)
    src = cuda_zeros(n)
    errors = torch.full((1,), -1, dtype=torch.int32, device="cuda")
    rshmem.barrier_all()
    barrier_quiet_kernel[(1,)](buf, src, errors, n, rounds, SCOPE=scope, BLOCK=n, num_warps=4)
    finish()
    assert int(errors.item()) == 0, f"barrier_all ({scope}): {int(errors.item())} elements of nbi puts missing after it"


@pytest.mark.parametrize("scope", ["thread", "warp", "block"])
@pytest.mark.gpu
@pytest.mark.multi
def test_ten_thousand_barriers_count_every_arrival(pe, scope):
    ctr = symmetric((1,), torch.int64)
    errors = torch.full((1,), -1, dtype=torch.int32, device="cuda")
    rshmem.barrier_all()
    arrival_kernel[(1,)](ctr, errors, BARRIERS, SCOPE=scope, num_warps=4)
    finish()
    first = int(errors.item())
    total = int(ctr.item())  # PE 0's copy holds every add
    # No reset: the barrier words simply go on, after a host barrier too.
    ctr.zero_()
    torch.cuda.synchronize()
    rshmem.barrier_all()
    arrival_kernel[(1,)](ctr, errors, 100, SCOPE=scope, num_warps=4)
    finish()
    assert first == 0, f"barrier_all ({scope}): {first} of 10,000 barriers let a PE through early or lost an add"
    assert int(errors.item()) == 0, f"barrier_all ({scope}): the next 100 barriers went wrong without a reset"
    if pe == 0:
        assert total == BARRIERS * WORLD
        assert int(ctr.item()) == 100 * WORLD


@pytest.mark.gpu
@pytest.mark.multi
def test_stress_put_with_signal_random_sizes(pe):
    # A round is a round trip between the PEs: microseconds on two GPUs, but ~4.4 ms where two
    # processes time-slice one GPU (docs/gpu-configurations.md), where 100,000 would take 7 min.
    shared = torch.cuda.device_count() < rshmem.team_n_pes(rshmem.Team.NODE)
    rounds, max_bytes = (2_000 if shared else 100_000), 16384
    gen = torch.Generator().manual_seed(20261122)  # the same sizes and offsets on every PE
    sizes = torch.randint(0, max_bytes + 1, (rounds + 1,), generator=gen, dtype=torch.int32).cuda()
    # low 4 bits: source misalignment, high bits: destination misalignment (0..15 each)
    offsets = torch.randint(0, 256, (rounds + 1,), generator=gen, dtype=torch.int32).cuda()
    inbox = symmetric((max_bytes + 16,), torch.uint8)
    sig = symmetric((1,), torch.int64)
    ack = symmetric((1,), torch.int64)
    outbox = torch.zeros(max_bytes + 16, dtype=torch.uint8, device="cuda")
    errors = torch.full((1,), -1, dtype=torch.int32, device="cuda")
    rshmem.barrier_all()
    stress_kernel[(2,)](inbox, outbox, sizes, offsets, sig, ack, errors, rounds, BLOCK=4096, num_warps=4)
    finish()
    assert int(errors.item()) == 0, f"{int(errors.item())} bytes wrong over {rounds} rounds of put-with-signal"
    assert int(sig.item()) == rounds


# ---------------------------------------------------------------------- debug wait timeout
DEBUG_WAIT_JOB = textwrap.dedent('''
    import os, sys
    import torch, torch.distributed as dist
    sys.path[:0] = [{device!r}, {tests!r}]  # this module, and the conftest it imports
    import rshmem, rshmem.torch as rtorch, rshmem.triton as rt
    from test_device_memory_model import unmatched_wait_kernel

    torch.cuda.set_device(rtorch.device())
    dist.init_process_group("gloo")
    rshmem.init(dist.group.WORLD, backend="cuda")
    sig = rtorch.create_symmetric_tensor((4,), torch.int64)   # an allocation of 32 bytes
    sig[2] = 3                                                # the "last seen" value
    torch.cuda.synchronize()
    rshmem.barrier_all()
    if rshmem.my_pe() == 1:
        try:
            unmatched_wait_kernel[(1,)](sig, WHICH=2, num_warps=4)  # waits for sig[2] == 7
            torch.cuda.synchronize()
            print("KERNEL-RETURNED", flush=True)
        except Exception as e:  # the trap: CUDA reports the kernel failed
            print("CUDA-ERROR", type(e).__name__, str(e).splitlines()[0], flush=True)
        try:
            rshmem._native.check_device_error()
            print("NO-DEVICE-ERROR", flush=True)
        except rshmem.RshmemError as e:
            print("DEVICE-ERROR", type(e).__name__, "::", e, flush=True)
    dist.barrier()
    os._exit(0)  # PE 1's CUDA context is gone after the trap: no finalize
''')


@pytest.mark.gpu
@pytest.mark.single
@pytest.mark.skipif(not _gpus_for(2), reason="needs 2 GPUs, or 1 with RSHMEM_ALLOW_SHARED_GPU=1 (it starts a 2-PE job)")
def test_debug_wait_timeout_names_pe_address_and_values(tmp_path):
    job = tmp_path / "unmatched_wait.py"
    job.write_text(DEBUG_WAIT_JOB.format(tests=str(ROOT / "tests"), device=str(ROOT / "tests" / "device")))
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT")}
    env["RSHMEM_DEBUG_WAIT_TIMEOUT_MS"] = "500"
    # The job must import the rshmem this test imported (an installed wheel, or python/ with a build).
    rshmem_parent = os.path.dirname(os.path.dirname(rshmem.__file__))
    env["PYTHONPATH"] = os.pathsep.join([rshmem_parent, env.get("PYTHONPATH", "")])
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr", "127.0.0.1",
           "--master-port", str(free_port()), str(job)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    log = out.stdout + out.stderr
    assert "KERNEL-RETURNED" not in log, log
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("DEVICE-ERROR")]
    assert lines, f"PE 1 saw no device error record:\n{log}"
    kind, msg = lines[0].split("::", 1)
    assert "TimeoutError" in kind, log
    assert "PE 1" in msg, msg                                      # the PE
    assert "allocation of 32 bytes" in msg and "+16" in msg, msg   # allocation and offset of sig[2]
    assert "== 7" in msg, msg                                      # the expected value
    assert "last seen 3" in msg, msg                               # the last value seen
