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
5. Checking against `torch.distributed.all_gather_into_tensor`, the reference.

A second variant, a Triton kernel that *pushes* each rank's rows into every peer with
`putmem_signal_block`, needs GPUs (the cuda backend) and `rshmem.triton`; without them the
program says that it skipped it and why.

Times printed are wall-clock medians over `--iters` iterations on this machine; they show the
shape of the cost, they are not benchmarks (see benchmarks/ for those).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist

import rshmem
import rshmem.torch as rtorch


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--M", type=int, default=8192, help="rows of the full matrix (divisible by the world size)")
    p.add_argument("--N", type=int, default=12288, help="columns")
    p.add_argument("--iters", type=int, default=5, help="timed iterations per variant")
    p.add_argument("--backend", choices=["cuda", "host"], default=None, help="default: cuda if a GPU is present")
    return p.parse_args()


def setup(backend: str | None):
    """torch.distributed first (nccl on GPUs, gloo otherwise), then rshmem on the same group."""
    use_gpu = torch.cuda.is_available() if backend is None else backend == "cuda"
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if use_gpu:
        torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl" if use_gpu else "gloo")
    rshmem.init(dist.group.WORLD, backend="cuda" if use_gpu else "host", device=local_rank if use_gpu else None)
    return torch.device("cuda", local_rank) if use_gpu else torch.device("cpu")


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def pull_allgather(local, full, sig, epoch, rank, world, stream=None):
    """One AllGather by pulling. `full` is the symmetric (M, N) buffer, `sig` the symmetric
    int64 signal array of `world` words, `epoch` this iteration's number (1, 2, ...)."""
    rows = local.shape[0]
    mine = full[rank * rows:(rank + 1) * rows]
    # a. own rows into the symmetric buffer (a local copy)
    mine.copy_(local)
    # b. "my rows of this epoch are ready" -> element `rank` of every peer's signal array.
    #    On the host backend the copy above is done when copy_ returns; fence() orders it before
    #    the signals anyway, which is what a GPU version needs.
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


def timed(fn, iters, device):
    times = []
    for _ in range(iters):
        sync(device)
        t0 = time.perf_counter()
        fn()
        sync(device)
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

    # this rank's rows: a recognisable pattern (row index + rank), so mistakes show
    torch.manual_seed(rank)
    local = (torch.randn(rows, N, device=device) + rank).to(torch.float16)

    # the reference: torch.distributed's all_gather
    ref = torch.empty(M, N, dtype=torch.float16, device=device)
    dist.all_gather_into_tensor(ref, local)

    full = rtorch.create_symmetric_tensor((M, N), torch.float16)
    sig = rtorch.create_symmetric_tensor((world,), rtorch.SIGNAL_DTYPE)
    rshmem.barrier_all()

    epoch = 0

    def one_pull():
        nonlocal epoch
        epoch += 1
        pull_allgather(local, full, sig, epoch, rank, world)

    one_pull()  # warm-up, also the checked run
    ok = torch.equal(full, ref)
    ok_all = torch.tensor([int(ok)], device=device)
    dist.all_reduce(ok_all, op=dist.ReduceOp.MIN)
    if not ok_all.item():
        raise SystemExit(f"rank {rank}: pull allgather differs from torch.distributed.all_gather_into_tensor")
    say("pull allgather: correct (equal to torch.distributed.all_gather_into_tensor on every rank)")

    gathered_bytes = (world - 1) * rows * N * 2  # what each rank receives
    t_pull = timed(one_pull, args.iters, device)
    t_ref = timed(lambda: dist.all_gather_into_tensor(ref, local), args.iters, device)
    say(f"  rshmem pull (signal + get per peer): {t_pull * 1e3:8.2f} ms  {gathered_bytes / t_pull / 1e9:6.2f} GB/s received per rank")
    say(f"  torch.distributed all_gather ({dist.get_backend()}):  {t_ref * 1e3:8.2f} ms  {gathered_bytes / t_ref / 1e9:6.2f} GB/s received per rank")

    if rshmem.backend() != "cuda":
        say("skipped the Triton push-kernel variant: it runs a Triton kernel on the GPU that stores "
            "into peers' GPU memory, and this run uses the host backend (no GPU here, or --backend host)")
    else:
        say("skipped the Triton push-kernel variant: it arrives with rshmem.triton's putmem_signal_block")

    rshmem.barrier_all()
    rtorch.free_tensor(sig)
    rtorch.free_tensor(full)
    rshmem.finalize()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
