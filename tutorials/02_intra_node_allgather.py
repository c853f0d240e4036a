"""Tutorial 02: intra-node AllGather on symmetric memory.

Run it (2 PEs; on GPUs if present, else on the host backend with CPU tensors):

    torchrun --nproc-per-node 2 tutorials/02_intra_node_allgather.py [--M 8192 --N 12288]

The job: an (M, N) fp16 matrix is split by rows; rank r owns rows [r*M/W, (r+1)*M/W) of it
(W = world size). Afterwards every rank must hold all M rows. That is AllGather, the first half
of a tensor-parallel layer.

What you learn here:

1. `rshmem.init(group)`: rshmem starts on the torch.distributed group (PE 0 makes a unique id, the
   group broadcasts it). PE numbers equal the group's ranks.
2. Symmetric tensors: `rshmem.torch.create_symmetric_tensor(shape, dtype)` is a *collective*
   allocation; every PE gets its own copy at the same heap offset, so a PE can name "the same
   tensor on PE p" with the local tensor and p. `peer_tensor(t, p)` even gives a view of it.
3. Signals: a 64-bit word in symmetric memory that peers set or add to. `signal_op(sig[r], v,
   SIGNAL_SET, p)` writes v into element r of PE p's signal array; PE p waits for it with
   `signal_wait_until(sig[r], CMP_GE, v)`.
4. The *pull* pattern (the "copy-engine" variant): each rank
      a. copies its own rows into its symmetric buffer,
      b. tells every peer "my rows of iteration k are ready" (signal SET k on the peer),
      c. for every peer, waits for that peer's signal, then *gets* the peer's rows into its own
         buffer (one bulk copy per peer; on GPUs this is the copy engine, not SMs).
   Signalling with the iteration number k (instead of 1) means the signal words never need a
   reset: "ready for iteration k" is `sig >= k`.
   Before a rank overwrites its rows in iteration k+1, its peers must be done pulling them: a
   barrier at the end of each iteration says so.
5. The *push* pattern (the Triton variant, GPUs only): one Triton kernel in which every rank
   stores its rows straight into every peer's buffer with `putmem_signal_block`. The grid's
   CTAs split the rows: CTA c moves slice c to every peer and adds 1 to the peer's signal word
   for this rank (`SIGNAL_ADD`), released after the data. After call number k, rank p's rows
   have fully arrived when `sig[p] >= k * n_ctas`; CTA 0 waits for that from every peer (thread
   0 waits, `tid(0) == 0`), so when the kernel is done the gather is done. SMs do the copy
   (loads and stores over NVLink), where the pull variant leaves it to the copy engines.
   Before each call a barrier (`barrier_all_on_stream`) makes sure no peer still reads the rows
   about to be overwritten.
6. Checking both against `torch.distributed.all_gather_into_tensor`, the reference.

On the host backend (no GPU) the program runs the pull variant and says that it skipped the push
kernel and why. On GPUs it prints the time of each variant beside `all_gather_into_tensor`
(NCCL), measured in the same run with CUDA events: warm-up, then the median of `--iters` calls.
On the host backend the times are wall-clock medians. Either way they show the shape of the
cost; they are not benchmarks (see benchmarks/ for those).
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


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--M", type=int, default=8192, help="rows of the full matrix (divisible by the world size)")
    p.add_argument("--N", type=int, default=12288, help="columns")
    p.add_argument("--iters", type=int, default=5, help="timed iterations per variant")
    p.add_argument("--warmup", type=int, default=2, help="untimed iterations before timing")
    p.add_argument("--push-ctas", type=int, default=32, help="CTAs of the push kernel")
    p.add_argument("--backend", choices=["cuda", "host"], default=None, help="default: cuda if a GPU is present")
    return p.parse_args()


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


# ------------------------------------------------------------------ the pull (copy-engine) variant
def pull_allgather(local, full, sig, epoch, rank, world, stream=None):
    """One AllGather by pulling. `full` is the symmetric (M, N) buffer, `sig` the symmetric
    int64 signal array of `world` words, `epoch` this iteration's number (1, 2, ...)."""
    rows = local.shape[0]
    mine = full[rank * rows:(rank + 1) * rows]
    # a. own rows into the symmetric buffer (a local copy)
    mine.copy_(local)
    # b. "my rows of this epoch are ready" -> element `rank` of every peer's signal array.
    #    On the host backend the copy above is done when copy_ returns, and fence() orders it
    #    before the signals. On GPUs the stream orders them: the signal runs after the copy.
    if rshmem.backend() == "host":
        rshmem.fence()
    for peer in range(world):
        if peer != rank:
            rtorch.signal_op_on_stream(sig[rank], epoch, rshmem.SIGNAL_SET, peer, stream)
    # c. wait for each peer's signal, then pull its rows from its buffer into ours
    for step in range(1, world):
        peer = (rank + step) % world  # start with the next rank so not everyone reads PE 0 first
        rtorch.signal_wait_until_on_stream(sig[peer], rshmem.CMP_GE, epoch, stream)
        theirs = full[peer * rows:(peer + 1) * rows]
        rtorch.getmem_on_stream(theirs, theirs, peer, stream)  # same offset: symmetric
    # nobody may overwrite its rows (next iteration) while a peer still reads them
    rtorch.barrier_all_on_stream(stream)


# ------------------------------------------------------------------ the push (Triton) variant
@rt.jit
def push_allgather_kernel(full, local, sig, rows, n_cols, epoch, ELEM_BYTES: tl.constexpr):
    """CTA c stores slice c of this rank's `rows` rows (`local`) into rows `rank * rows + ...`
    of `full` on every PE, then adds 1 to `sig[rank]` there. CTA 0 waits until every peer's
    slices have all arrived here (call number `epoch`: `sig[p] >= epoch * n_ctas`)."""
    me = shm.my_pe()
    world = shm.n_pes()
    c = tl.program_id(0)
    n_ctas = tl.num_programs(0)
    per_cta = tl.cdiv(rows, n_ctas)
    r0 = tl.minimum(c * per_cta, rows)
    r1 = tl.minimum(r0 + per_cta, rows)
    row_elems = tl.cast(n_cols, tl.int64)
    src = local + r0 * row_elems
    dst = full + (me * rows + r0) * row_elems  # the same offset on every PE: symmetric
    nbytes = (r1 - r0) * row_elems * ELEM_BYTES
    # Own rows: a put to myself is a local copy.
    shm.putmem_block(dst, src, nbytes, me)
    # Every peer, starting with the next rank so not everyone writes to PE 0 first. Every CTA
    # signals, even one with no rows left (nbytes 0), so the count per call is n_ctas.
    for step in range(1, world):
        peer = (me + step) % world
        shm.putmem_signal_block(dst, src, nbytes, sig + me, 1, shm.SIGNAL_ADD, peer)
    if c == 0:
        if tid(0) == 0:
            for step in range(1, world):
                peer = (me + world - step) % world
                shm.signal_wait_until(sig + peer, shm.CMP_GE, tl.cast(epoch, tl.int64) * n_ctas)
        syncthreads()


def push_allgather(local, full, sig, epoch, n_ctas, stream=None):
    """One AllGather by pushing: a barrier on the stream (no peer still reads the rows we are
    about to overwrite), then the push kernel."""
    rows, n_cols = local.shape
    rtorch.barrier_all_on_stream(stream)
    with torch.cuda.stream(stream or torch.cuda.current_stream()):
        push_allgather_kernel[(n_ctas,)](full, local, sig, rows, n_cols, epoch, ELEM_BYTES=local.element_size(),
                                         num_warps=16)


# ------------------------------------------------------------------ timing and main
def timed(fn, iters, warmup, device):
    """Median seconds per call of `fn`: CUDA events on GPUs, wall clock on the host backend."""
    for _ in range(warmup):
        fn()
    sync(device)
    times = []
    for _ in range(iters):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    args = parse_args()
    device = setup(args.backend)
    rank, world = rshmem.my_pe(), rshmem.n_pes()
    M, N = args.M, args.N
    if M % world:
        raise SystemExit(f"--M {M} must be divisible by the world size {world}")
    rows = M // world
    say = print if rank == 0 else (lambda *a, **k: None)
    say(f"AllGather of a ({M}, {N}) fp16 matrix over {world} PEs on the {rshmem.backend()} backend "
        f"({rows} rows = {rows * N * 2 / 2**20:.1f} MiB per rank)")

    # this rank's rows: a recognisable pattern (random + rank), so mistakes show
    torch.manual_seed(rank)
    local = (torch.randn(rows, N, device=device) + rank).to(torch.float16)

    # the reference: torch.distributed's all_gather
    ref = torch.empty(M, N, dtype=torch.float16, device=device)
    reference(dist.all_gather_into_tensor, ref, local)

    full = rtorch.create_symmetric_tensor((M, N), torch.float16)
    sig = rtorch.create_symmetric_tensor((world,), rtorch.SIGNAL_DTYPE)
    sig_push = rtorch.create_symmetric_tensor((world,), rtorch.SIGNAL_DTYPE)
    rshmem.barrier_all()

    epoch = 0

    def one_pull():
        nonlocal epoch
        epoch += 1
        pull_allgather(local, full, sig, epoch, rank, world)

    one_pull()  # the checked run
    sync(device)
    if not agree(torch.equal(full, ref), device):
        raise SystemExit(f"rank {rank}: pull allgather differs from torch.distributed.all_gather_into_tensor")
    say("pull allgather: correct (equal to torch.distributed.all_gather_into_tensor on every rank)")

    gathered_bytes = (world - 1) * rows * N * 2  # what each rank receives
    results = [("rshmem pull (signal + get per peer)", timed(one_pull, args.iters, args.warmup, device))]

    on_gpu = rshmem.backend() == "cuda"
    if on_gpu:
        # Start from zeros so rows left over from the pull runs cannot hide a push that missed.
        full.zero_()
        sync(device)
        rshmem.barrier_all()
        push_epoch = 0

        def one_push():
            nonlocal push_epoch
            push_epoch += 1
            push_allgather(local, full, sig_push, push_epoch, args.push_ctas)

        one_push()  # the checked run
        sync(device)
        if not agree(torch.equal(full, ref), device):
            raise SystemExit(f"rank {rank}: push allgather differs from torch.distributed.all_gather_into_tensor")
        say(f"push allgather: correct (Triton putmem_signal_block kernel, {args.push_ctas} CTAs; equal to "
            "torch.distributed.all_gather_into_tensor on every rank)")
        results.append((f"rshmem push (Triton kernel, {args.push_ctas} CTAs)",
                         timed(one_push, args.iters, args.warmup, device)))

    t_ref = timed(lambda: reference(dist.all_gather_into_tensor, ref, local), args.iters, args.warmup, device)
    results.append((f"torch.distributed all_gather ({dist.get_backend()})", t_ref))
    clock = "CUDA events" if on_gpu else "wall clock"
    say(f"times ({clock}, median of {args.iters} after {args.warmup} warm-up){timing_caveat()}:")
    for name, t in results:
        say(f"  {name + ':':45s} {t * 1e3:8.2f} ms  {gathered_bytes / t / 1e9:7.2f} GB/s received per rank")

    if not on_gpu:
        say("skipped the Triton push-kernel variant: it runs a Triton kernel on the GPU that stores "
            "into peers' GPU memory, and this run uses the host backend (no GPU here, or --backend host)")

    sync(device)
    rshmem.barrier_all()
    rtorch.free_tensor(sig_push)
    rtorch.free_tensor(sig)
    rtorch.free_tensor(full)
    rshmem.finalize()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
