"""Tutorial 01: notify and wait, a producer and a consumer on two GPUs.

Run it (2 PEs or more; on GPUs if present, else on the host backend with CPU tensors):

    torchrun --nproc-per-node 2 tutorials/01_notify_wait.py [--rounds 50 --elems 16384]

PE 0 produces ``--rounds`` messages of ``--elems`` float32 each and hands them to PE 1 through
one symmetric *slot* on PE 1 (with more PEs, PE 2j produces for PE 2j+1; an odd last PE sits
out). Two 64-bit signal words make the hand-over safe in both directions:

- ``ready`` (on the consumer): the producer puts message k into the slot and *in the same call*
  sets ``ready = k + 1``: ``putmem_signal_block(slot, msg_k, nbytes, ready, k + 1, SIGNAL_SET,
  consumer)``. The signal is written with release semantics at system scope after all of the
  data, so a consumer that sees ``ready >= k + 1`` also sees message k.
- ``free`` (on the producer): when the consumer has read message k out of the slot, it sets
  ``free = k + 1`` on the producer (``signal_op``). The producer waits for ``free >= k`` before
  it overwrites the slot with message k, so it never writes over a message still being read.

Counting the rounds in the signal values (instead of setting 1 and resetting to 0) means the
words never need a reset, and a waiter can use ``CMP_GE``.

What you learn here:

- ``putmem_signal_block``: data plus a signal, called by every thread of the program (block
  scope). The library splits the copy over the threads, then one thread releases the signal.
- ``signal_wait_until`` and ``signal_op`` are thread-scope: Triton runs the kernel's scalar code
  in every thread of the program, so they are guarded with ``if tid(0) == 0``. The other threads
  wait for thread 0 at ``syncthreads()`` (a CTA barrier); the acquire of thread 0's wait plus the
  barrier make the message visible to all of them.
- The consumer's ``syncthreads()`` *before* ``signal_op(free)`` makes sure every thread is done
  reading the slot before the producer may overwrite it.

On the host backend (no GPU) the same protocol runs through the host API (``rshmem.putmem_signal``,
``rshmem.signal_wait_until``, ``rshmem.signal_op``) and the program says that it skipped the
Triton kernels and why.
"""

from __future__ import annotations

import argparse

import torch
import torch.distributed as dist
import triton.language as tl

import rshmem
import rshmem.torch as rtorch
import rshmem.triton as rt
from rshmem.triton import libshmem_device as shm
from rshmem.triton.language import syncthreads, tid

from _common import agree, setup


@rt.jit
def producer_kernel(slot, messages, ready, free, n_elems, rounds, consumer):
    """Sends message k (row k of `messages`) into `slot` on `consumer`, for k < rounds."""
    for k in range(rounds):
        # Wait until the consumer has emptied the slot of message k - 1 (free >= k).
        if tid(0) == 0:
            shm.signal_wait_until(free, shm.CMP_GE, k)
        syncthreads()
        src = messages + k.to(tl.int64) * n_elems
        shm.putmem_signal_block(slot, src, n_elems * 4, ready, k + 1, shm.SIGNAL_SET, consumer)


@rt.jit
def consumer_kernel(slot, received, ready, free, n_elems, rounds, producer, BLOCK: tl.constexpr):
    """Copies each message out of `slot` into row k of `received`, then frees the slot."""
    offs = tl.arange(0, BLOCK)
    for k in range(rounds):
        if tid(0) == 0:
            shm.signal_wait_until(ready, shm.CMP_GE, k + 1)
        syncthreads()  # everyone waits for thread 0's acquire: message k is visible to all
        row = received + k.to(tl.int64) * n_elems
        for start in range(0, n_elems, BLOCK):
            idx = start + offs
            mask = idx < n_elems
            tl.store(row + idx, tl.load(slot + idx, mask=mask), mask=mask)
        syncthreads()  # every thread is done reading the slot ...
        if tid(0) == 0:
            shm.signal_op(free, k + 1, shm.SIGNAL_SET, producer)  # ... before the producer may reuse it


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=50, help="messages to send")
    p.add_argument("--elems", type=int, default=16384, help="float32 elements per message")
    p.add_argument("--backend", choices=["cuda", "host"], default=None, help="default: cuda if a GPU is present")
    return p.parse_args()


def host_producer(slot, messages, ready, free, consumer):
    """The producer's loop through the host API: the same protocol as producer_kernel."""
    for k in range(messages.shape[0]):
        rshmem.signal_wait_until(free, rshmem.CMP_GE, k)
        rshmem.putmem_signal(slot, messages[k], ready, k + 1, rshmem.SIGNAL_SET, consumer)


def host_consumer(slot, received, ready, free, producer):
    """The consumer's loop through the host API: the same protocol as consumer_kernel."""
    for k in range(received.shape[0]):
        rshmem.signal_wait_until(ready, rshmem.CMP_GE, k + 1)
        received[k].copy_(slot)
        rshmem.signal_op(free, k + 1, rshmem.SIGNAL_SET, producer)


def main():
    args = parse_args()
    device = setup(args.backend)
    me, world = rshmem.my_pe(), rshmem.n_pes()
    if world < 2:
        raise SystemExit("tutorial 01 needs 2 PEs or more: torchrun --nproc-per-node 2 tutorials/01_notify_wait.py")
    rounds, n = args.rounds, args.elems
    say = print if me == 0 else (lambda *a, **k: None)
    pairs = world // 2
    say(f"notify/wait: {pairs} producer -> consumer pair(s) over {world} PEs on the {rshmem.backend()} backend, "
        f"{rounds} messages of {n} float32 ({n * 4 / 1024:.0f} KiB) each")

    # Collective allocations: every PE makes them, whatever its role.
    slot = rtorch.create_symmetric_tensor((n,), torch.float32)
    ready = rtorch.create_symmetric_tensor((1,), rtorch.SIGNAL_DTYPE)
    free = rtorch.create_symmetric_tensor((1,), rtorch.SIGNAL_DTYPE)
    # Message k, element i holds k * n + i: unique, exact in float32 (up to 2**24), so a stale or
    # misplaced element is caught. Both sides can compute it, so the consumer can check.
    messages = torch.arange(rounds * n, dtype=torch.float32, device=device).view(rounds, n)
    received = torch.full((rounds, n), -1.0, dtype=torch.float32, device=device)
    rshmem.barrier_all()

    role = "idle"
    if me < 2 * pairs:
        role = "producer" if me % 2 == 0 else "consumer"
    on_gpu = rshmem.backend() == "cuda"
    if role == "producer":
        if on_gpu:
            producer_kernel[(1,)](slot, messages, ready, free, n, rounds, me + 1, num_warps=4)
        else:
            host_producer(slot, messages, ready, free, me + 1)
    elif role == "consumer":
        if on_gpu:
            consumer_kernel[(1,)](slot, received, ready, free, n, rounds, me - 1, BLOCK=1024, num_warps=4)
        else:
            host_consumer(slot, received, ready, free, me - 1)
    if on_gpu:
        torch.cuda.synchronize()

    ok = True
    if role == "consumer":
        bad = (received != messages).any(dim=1).nonzero().flatten().tolist()
        if bad:
            ok = False
            print(f"PE {me}: messages {bad[:10]} arrived wrong (first bad one starts {received[bad[0], :4].tolist()}, "
                  f"want {messages[bad[0], :4].tolist()})")
        seen = rshmem.signal_fetch(ready) if not on_gpu else int(ready.item())
        if seen != rounds:
            ok = False
            print(f"PE {me}: ready = {seen}, want {rounds}")
    if not agree(ok, device):
        raise SystemExit("notify/wait: a consumer did not receive every message intact (see above)")
    how = ("Triton kernels: putmem_signal_block / signal_wait_until + signal_op" if on_gpu
           else "host API: putmem_signal / signal_wait_until + signal_op")
    say(f"producer/consumer ({how}): correct ({rounds} messages received in order and intact by every consumer)")
    if not on_gpu:
        say("skipped the Triton kernels (producer_kernel, consumer_kernel): they move data between GPUs from "
            "the GPU, and this run uses the host backend (no GPU here, or --backend host)")

    rshmem.barrier_all()
    for t in (free, ready, slot):
        rtorch.free_tensor(t)
    rshmem.finalize()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
