"""Tutorial 04: the simple shift, the "hello world" of SHMEM.

Run it (any number of PEs; on GPUs if present, else on the host backend with CPU tensors):

    torchrun --nproc-per-node 2 tutorials/04_simple_shift.py

Every PE writes its PE number into a symmetric word on the next PE (PE W-1 writes to PE 0), all
PEs meet at a barrier, and then every PE finds the number of the previous PE in its word. Two
kernels do it on GPUs:

1. ``shift_kernel``: one thread of the program stores ``my_pe()`` into ``dest`` on
   ``(my_pe() + 1) % n_pes()`` with ``int_p``. A thread-scope call acts once per calling
   thread, and Triton runs a kernel's scalar code in *every* thread of the program, so it is
   guarded with ``if tid(0) == 0``. The same kernel also shifts a small vector with
   ``putmem_block``, a block-scope call that every thread of the program makes (the threads
   share the copy).
2. ``barrier_kernel``: ``barrier_all_block()``, the collective barrier of all PEs, called by the
   whole program. A barrier is ``quiet`` (every store this PE issued is complete and visible
   where it went) plus "every PE has arrived". After it, each PE's word holds its left
   neighbour's number, and the host reads it once the kernel is done.

What you learn here:

- ``rshmem.triton.jit``: ``triton.jit`` plus the device library (``extern_libs``) and the hook
  that hands each loaded module the runtime's device state (my PE, the heap layout, ...).
- Symmetric addresses: ``dest`` is this PE's own tensor; ``int_p(dest, v, pe)`` names the
  same tensor on ``pe``. No peer pointer is ever passed to the kernel.
- Thread-scope versus block-scope calls and the ``tid(0) == 0`` guard.

On the host backend (no GPU) the same shift runs through the host API (``rshmem.p`` and
``rshmem.putmem``, then ``rshmem.barrier_all()``), and the program says that it skipped the
kernels and why.
"""

from __future__ import annotations

import argparse

import torch
import torch.distributed as dist

import rshmem
import rshmem.torch as rtorch
import rshmem.triton as rt
from rshmem.triton import libshmem_device as shm
from rshmem.triton.language import tid

from _common import agree, setup

VEC = 64  # elements of the shifted vector


@rt.jit
def shift_kernel(dest, vec_dest, vec_src, vec_bytes):
    me = shm.my_pe()
    right = (me + 1) % shm.n_pes()
    # Thread scope: exactly one thread stores the word.
    if tid(0) == 0:
        shm.int_p(dest, me, right)
    # Block scope: all threads of the program call it with the same arguments.
    shm.putmem_block(vec_dest, vec_src, vec_bytes, right)


@rt.jit
def barrier_kernel():
    shm.barrier_all_block()


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backend", choices=["cuda", "host"], default=None, help="default: cuda if a GPU is present")
    return p.parse_args()


def main():
    args = parse_args()
    device = setup(args.backend)
    me, world = rshmem.my_pe(), rshmem.n_pes()
    left = (me - 1) % world
    say = print if me == 0 else (lambda *a, **k: None)
    say(f"simple shift over {world} PEs on the {rshmem.backend()} backend")

    # Collective allocations: every PE makes the same calls in the same order.
    dest = rtorch.create_symmetric_tensor((1,), torch.int32)
    vec_dest = rtorch.create_symmetric_tensor((VEC,), torch.int32)
    dest.fill_(-1)
    vec_dest.fill_(-1)
    # The vector this PE sends: 1000 * me + i, so a misplaced element shows whose it was.
    vec_src = torch.arange(VEC, dtype=torch.int32, device=device) + 1000 * me
    # Nobody writes into a peer's tensor before the peer has filled it. On GPUs fill_ is only
    # queued on the stream: wait for it before the (host) barrier.
    if device.type == "cuda":
        torch.cuda.synchronize()
    rshmem.barrier_all()

    if rshmem.backend() == "cuda":
        shift_kernel[(1,)](dest, vec_dest, vec_src, VEC * 4, num_warps=4)
        barrier_kernel[(1,)](num_warps=4)
        torch.cuda.synchronize()
        how = "Triton kernels int_p + putmem_block, then barrier_all_block"
    else:
        rshmem.p(dest, me, (me + 1) % world)
        rshmem.putmem(vec_dest, vec_src, (me + 1) % world, nbytes=VEC * 4)
        rshmem.barrier_all()
        how = "host API p + putmem, then barrier_all"

    want_vec = torch.arange(VEC, dtype=torch.int32, device=device) + 1000 * left
    ok = int(dest.item()) == left and torch.equal(vec_dest, want_vec)
    if not ok:
        print(f"PE {me}: dest = {int(dest.item())} (want {left}), vector {vec_dest[:4].tolist()}... "
              f"(want {want_vec[:4].tolist()}...)")
    if not agree(ok, device):
        raise SystemExit("simple shift: some PE did not receive its left neighbour's values (see above)")
    say(f"shift ({how}): correct (every PE holds its left neighbour's PE number and {VEC}-element vector)")
    if rshmem.backend() != "cuda":
        say("skipped the Triton kernels (shift_kernel, barrier_kernel): they store into peers' GPU memory "
            "from the GPU, and this run uses the host backend (no GPU here, or --backend host)")

    rshmem.barrier_all()
    rtorch.free_tensor(vec_dest)
    rtorch.free_tensor(dest)
    rshmem.finalize()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
