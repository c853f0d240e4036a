"""Tutorial 03: ring AllReduce in one Triton kernel.

Run it (2 PEs or more; on GPUs if present, else on the host backend with CPU tensors):

    torchrun --nproc-per-node 2 tutorials/03_ring_allreduce.py [--elems 16777216 --ctas 16]

Every rank holds a float32 vector ``x`` of ``n`` elements; afterwards every rank must hold the
element-wise sum over all ranks. The ring algorithm cuts the vector into W segments (W = world
size) and passes them around the ring ``rank -> rank + 1`` in two phases:

1. *Reduce-scatter*, W - 1 steps. At step s, rank r sends its partial sum of segment ``r - s``
   to its right neighbour and adds the partial sum of segment ``r - s - 1`` that arrives from its
   left neighbour into its own. After W - 1 steps rank r holds the full sum of segment ``r + 1``.
2. *All-gather* (a broadcast around the ring), W - 1 steps. At step s, rank r sends the complete
   segment ``r + 1 - s`` to the right and stores the complete segment ``r - s`` arriving from the
   left.

Each rank sends 2 (W - 1) / W of the vector, which is optimal for a ring.

Both phases run in ONE Triton kernel. The grid's CTAs split every segment into chunks: CTA c owns
chunk c of each segment and runs the whole algorithm on its chunks, independently of the other
CTAs, so the chunks travel in parallel. A transfer is ``putmem_signal_nbi_block`` into a staging
slot on the right neighbour (one slot per step, so no step overwrites data that has not been
consumed), and its signal word (one per step and CTA) is set to the call number ``epoch``; the
receiver's thread 0 waits with ``signal_wait_until(flag, CMP_GE, epoch)`` and the block reads the
slot after ``syncthreads()``.

What you learn here:

- Chunking per CTA: every CTA runs the same protocol on its own data and its own signals, so
  CTAs need no synchronization with each other. The waiting CTAs spin, so all CTAs must be
  resident at once: keep ``--ctas`` at most the number of SMs.
- ``_nbi`` puts: SHMEM only promises that a non-blocking put is complete when its signal is seen
  or after ``quiet()``. The kernel never writes a buffer that an earlier put of its own still
  reads, except in phase 2, after a ``quiet()``.
- Calling the kernel again: the signal values count calls (``epoch``), so nothing is reset, and a
  barrier on the stream before each call (``barrier_all_on_stream``) makes sure no rank writes
  into a slot that its right neighbour is still reading from the previous call.

The result is checked against ``torch.distributed.all_reduce`` (the inputs are small integers in
float32, so every summation order gives the same exact result). On GPUs the program prints the
time of the kernel beside ``all_reduce`` (NCCL), measured in the same run with CUDA events.

On the host backend (no GPU) the same ring runs through the host API (``rshmem.putmem_signal``,
``rshmem.signal_wait_until``) with one "CTA", and the program says that it skipped the kernel.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.distributed as dist
import triton.language as tl

import rshmem
import rshmem.torch as rtorch
import rshmem.triton as rt
from rshmem.triton import libshmem_device as shm
from rshmem.triton.language import syncthreads, tid

from _common import agree, reference, setup, timing_caveat

MAX_CTAS = 128  # signal words are allocated for this many CTAs


@rt.jit
def ring_allreduce_kernel(x, out, recv, sig, seg_elems, chunk_elems, epoch, ELEM_BYTES: tl.constexpr,
                          BLOCK: tl.constexpr):
    """`out` = sum over all PEs of `x`; `recv` is the symmetric staging area (2 (W-1) slots of
    `seg_elems`), `sig` the symmetric signal words (2 (W-1) rows of n_ctas)."""
    me = shm.my_pe()
    world = shm.n_pes()
    right = (me + 1) % world
    c = tl.program_id(0)
    n_ctas = tl.num_programs(0)
    offs = tl.arange(0, BLOCK)
    seg = tl.cast(seg_elems, tl.int64)
    # This CTA's chunk of every segment: elements [c0, c0 + clen) of the segment.
    c0 = c * chunk_elems
    clen = tl.maximum(tl.minimum(chunk_elems, seg_elems - c0), 0)
    nbytes = clen * ELEM_BYTES
    flag_value = tl.cast(epoch, tl.int64)

    # out = x on this CTA's chunks
    for s in range(world):
        base = s * seg + c0
        for t in range(0, clen, BLOCK):
            i = t + offs
            m = i < clen
            tl.store(out + base + i, tl.load(x + base + i, mask=m), mask=m)

    # Phase 1: reduce-scatter. Slot `step` carries step `step`.
    for step in range(world - 1):
        send_s = (me - step + world) % world
        recv_s = (me - step - 1 + world) % world
        slot = recv + step * seg + c0
        flag = sig + step * n_ctas + c
        # A block call: it synchronizes the block first, so the sums of the previous step (written
        # by every thread) are complete before they are sent.
        shm.putmem_signal_nbi_block(slot, out + send_s * seg + c0, nbytes, flag, flag_value, shm.SIGNAL_SET, right)
        if tid(0) == 0:
            shm.signal_wait_until(flag, shm.CMP_GE, flag_value)
        syncthreads()
        base = recv_s * seg + c0
        for t in range(0, clen, BLOCK):
            i = t + offs
            m = i < clen
            acc = tl.load(out + base + i, mask=m) + tl.load(slot + i, mask=m)
            tl.store(out + base + i, acc, mask=m)

    # Phase 2 overwrites segments of `out` that phase 1 sent with _nbi puts: each thread
    # completes its own share of those puts first.
    shm.quiet()

    # Phase 2: all-gather. Slot `world - 1 + step` carries step `step`.
    for step in range(world - 1):
        send_s = (me + 1 - step + world) % world
        recv_s = (me - step + world) % world
        slot = recv + (world - 1 + step) * seg + c0
        flag = sig + (world - 1 + step) * n_ctas + c
        shm.putmem_signal_nbi_block(slot, out + send_s * seg + c0, nbytes, flag, flag_value, shm.SIGNAL_SET, right)
        if tid(0) == 0:
            shm.signal_wait_until(flag, shm.CMP_GE, flag_value)
        syncthreads()
        base = recv_s * seg + c0
        for t in range(0, clen, BLOCK):
            i = t + offs
            m = i < clen
            tl.store(out + base + i, tl.load(slot + i, mask=m), mask=m)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--elems", type=int, default=1 << 24, help="float32 elements per rank (divisible by the world size)")
    p.add_argument("--ctas", type=int, default=16, help=f"CTAs of the kernel (at most {MAX_CTAS} and the SM count)")
    p.add_argument("--iters", type=int, default=10, help="timed iterations (GPU)")
    p.add_argument("--warmup", type=int, default=3, help="untimed iterations before timing (GPU)")
    p.add_argument("--backend", choices=["cuda", "host"], default=None, help="default: cuda if a GPU is present")
    return p.parse_args()


def kernel_allreduce(x, out, recv, sig, epoch, n_ctas):
    """One AllReduce on the GPU: a barrier on the stream, then the kernel."""
    world = rshmem.n_pes()
    seg = x.numel() // world
    chunk = -(-seg // n_ctas)
    rtorch.barrier_all_on_stream()
    ring_allreduce_kernel[(n_ctas,)](x, out, recv, sig, seg, chunk, epoch, ELEM_BYTES=x.element_size(),
                                     BLOCK=2048, num_warps=8)


def host_allreduce(x, out, recv, sig, epoch):
    """The same ring through the host API: one "CTA" (column 0 of the signal words)."""
    me, world = rshmem.my_pe(), rshmem.n_pes()
    right = (me + 1) % world
    seg = x.numel() // world
    segment = lambda s: out[s * seg:(s + 1) * seg]  # noqa: E731
    out.copy_(x)
    rshmem.barrier_all()  # as before each kernel call: no slot is still being read
    for step in range(world - 1):  # reduce-scatter
        send_s, recv_s = (me - step) % world, (me - step - 1) % world
        rshmem.putmem_signal(recv[step], segment(send_s), sig[step, 0], epoch, rshmem.SIGNAL_SET, right)
        rshmem.signal_wait_until(sig[step, 0], rshmem.CMP_GE, epoch)
        segment(recv_s).add_(recv[step])
    for step in range(world - 1):  # all-gather
        slot = world - 1 + step
        send_s, recv_s = (me + 1 - step) % world, (me - step) % world
        rshmem.putmem_signal(recv[slot], segment(send_s), sig[slot, 0], epoch, rshmem.SIGNAL_SET, right)
        rshmem.signal_wait_until(sig[slot, 0], rshmem.CMP_GE, epoch)
        segment(recv_s).copy_(recv[slot])


def timed(fn, iters, warmup):
    """Median seconds per call of `fn`, from CUDA events, after `warmup` calls."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def main():
    args = parse_args()
    device = setup(args.backend)
    me, world = rshmem.my_pe(), rshmem.n_pes()
    n = args.elems
    if n % world:
        raise SystemExit(f"--elems {n} must be divisible by the world size {world}")
    if not 1 <= args.ctas <= MAX_CTAS:
        raise SystemExit(f"--ctas {args.ctas} must be between 1 and {MAX_CTAS}")
    seg = n // world
    say = print if me == 0 else (lambda *a, **k: None)
    say(f"ring AllReduce (sum) of {n} float32 ({n * 4 / 2**20:.1f} MiB) over {world} PEs on the "
        f"{rshmem.backend()} backend")

    # Small integers: sums are exact in float32 in any order, so the check can be equality.
    gen = torch.Generator().manual_seed(1234 + me)
    x = torch.randint(-1000, 1000, (n,), generator=gen).to(torch.float32).to(device)
    ref = x.clone()
    reference(dist.all_reduce, ref)

    slots = max(2 * (world - 1), 1)
    recv = rtorch.create_symmetric_tensor((slots, seg), torch.float32)
    sig = rtorch.create_symmetric_tensor((slots, MAX_CTAS), rtorch.SIGNAL_DTYPE)
    out = torch.full_like(x, float("nan"))
    rshmem.barrier_all()

    on_gpu = rshmem.backend() == "cuda"
    epoch = 0

    def one_call():
        nonlocal epoch
        epoch += 1
        if on_gpu:
            kernel_allreduce(x, out, recv, sig, epoch, args.ctas)
        else:
            host_allreduce(x, out, recv, sig, epoch)

    one_call()  # the checked run
    if on_gpu:
        torch.cuda.synchronize()
    ok = torch.equal(out, ref)
    if not ok:
        bad = (out != ref).nonzero().flatten()
        print(f"PE {me}: {bad.numel()} elements differ, first at {int(bad[0])}: {float(out[bad[0]])} "
              f"(want {float(ref[bad[0]])})")
    if not agree(ok, device):
        raise SystemExit("ring allreduce differs from torch.distributed.all_reduce (see above)")
    how = (f"one Triton kernel, {args.ctas} CTAs, putmem_signal_nbi_block + signal_wait_until" if on_gpu
           else "host API: putmem_signal + signal_wait_until")
    say(f"ring allreduce ({how}): correct (equal to torch.distributed.all_reduce on every rank)")

    # A second call must work without resetting anything; check it too.
    out.fill_(float("nan"))
    one_call()
    if on_gpu:
        torch.cuda.synchronize()
    if not agree(torch.equal(out, ref), device):
        raise SystemExit("ring allreduce: the second call differs from torch.distributed.all_reduce")
    say("ring allreduce, second call (no reset between calls): correct")

    if on_gpu:
        t_ring = timed(one_call, args.iters, args.warmup)
        scratch = x.clone()
        t_ref = timed(lambda: reference(dist.all_reduce, scratch), args.iters, args.warmup)
        moved = 2 * (world - 1) * seg * 4  # bytes each rank sends
        say(f"times (CUDA events, median of {args.iters} after {args.warmup} warm-up){timing_caveat()}:")
        say(f"  {'rshmem ring kernel (barrier + kernel):':45s} {t_ring * 1e3:8.3f} ms  "
            f"{moved / t_ring / 1e9:7.2f} GB/s sent per rank")
        say(f"  {f'torch.distributed all_reduce ({dist.get_backend()}):':45s} {t_ref * 1e3:8.3f} ms  "
            f"{moved / t_ref / 1e9:7.2f} GB/s sent per rank (same count)")
    else:
        say("skipped the Triton kernel (ring_allreduce_kernel): it moves data between GPUs from the GPU, and "
            "this run uses the host backend (no GPU here, or --backend host)")

    rshmem.barrier_all()
    rtorch.free_tensor(sig)
    rtorch.free_tensor(recv)
    rshmem.finalize()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
