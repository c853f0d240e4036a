"""Tutorial 06: ring all-reduce in a Numba-CUDA kernel, written the nvshmem4py way.

Run it with either launcher (2 PEs or more; on GPUs if present, else on the host backend):

    mpirun -np 2 python tutorials/06_numba_ring_allreduce.py
    torchrun --nproc-per-node 2 tutorials/06_numba_ring_allreduce.py [--elems 1024 --ctas 32]

The program is an nvshmem4py program: its imports name ``rshmem.compat.nvshmem`` where
nvshmem4py's name ``nvshmem``, and nothing else changes. Every PE holds ``src`` (all ``my_pe +
1``); afterwards ``dst`` holds the sum over the PEs, ``n (n + 1) / 2``, on every PE.

The kernel cuts the vector into one range per CTA and each range into chunks. A chunk travels
the ring twice:

1. *Reduce*: PE 0 sends its chunk to PE 1; PE i waits for the chunk of PE i - 1, adds its own
   and sends the sum on. Each send is ``put_signal_nbi`` with ``SIGNAL_ADD`` 1 on the CTA's
   signal word, so the receiver waits for "at least k chunks arrived" with ``signal_wait``.
2. *Broadcast*: the last PE now holds the full sum and sends it to PE 0, which passes it on,
   until every PE has it (the second pass waits for counts above the first pass's).

Signals count chunks and are never reset inside a run; a new run zeroes them first, behind a
barrier. On the host backend (no GPU) the same ring runs through the host API
(``put_signal`` / ``signal_wait`` on numpy arrays over the symmetric heap), and the program
says that it skipped the kernel.
"""
from __future__ import annotations

import argparse
import os

import numpy as np
from numba import cuda, uint64

import rshmem.compat.nvshmem as nvshmem  # nvshmem4py: import nvshmem
import rshmem.compat.nvshmem.bindings  # noqa: F401 - nvshmem4py: import nvshmem.bindings
import rshmem.compat.nvshmem.core  # noqa: F401 - nvshmem4py: import nvshmem.core
from rshmem.compat.nvshmem.core import ComparisonType, SignalOp
from rshmem.compat.nvshmem.core.device.numba import my_pe, n_pes, put_signal_nbi, signal_wait


@cuda.jit
def ring_allreduce(dst, src, nelems, signal, chunk):
    """dst = sum over PEs of src; `signal` holds one word per CTA (zero at the start)."""
    me = my_pe()
    npes = n_pes()
    right = (me + 1) % npes
    tid = cuda.threadIdx.x
    per_cta = nelems // cuda.gridDim.x
    first = cuda.blockIdx.x * per_cta
    if first + per_cta > nelems:
        return
    word = signal[cuda.blockIdx.x:cuda.blockIdx.x + 1]
    chunks = per_cta // chunk

    # Pass 1: reduce along the ring 0 -> 1 -> ... -> npes - 1.
    for c in range(chunks):
        lo = first + c * chunk
        mine = src[lo:lo + chunk]
        acc = dst[lo:lo + chunk]
        if me > 0:
            if tid == 0:
                signal_wait(word, ComparisonType.CMP_GE, c + 1)  # chunk c of the left PE is in acc
            cuda.syncthreads()
            for i in range(tid, chunk, cuda.blockDim.x):
                acc[i] += mine[i]
            cuda.syncthreads()  # the whole block's sums before thread 0 sends them
        if tid == 0:
            # PE 0 starts the chunk with its own data; the last PE's sum is complete and goes to PE 0.
            put_signal_nbi(acc, mine if me == 0 else acc, word, uint64(1), SignalOp.SIGNAL_ADD, right)

    # Pass 2: the full sums travel npes - 1 -> 0 -> 1 -> ... -> npes - 2.
    if tid == 0:
        for c in range(chunks):
            lo = first + c * chunk
            acc = dst[lo:lo + chunk]
            if me < npes - 1:
                # PE 0 saw nothing in pass 1; the others saw `chunks` signals there.
                seen = c + 1 if me == 0 else chunks + c + 1
                signal_wait(word, ComparisonType.CMP_GE, seen)
            if me < npes - 2:
                put_signal_nbi(acc, acc, word, uint64(1), SignalOp.SIGNAL_ADD, right)


def host_ring(dst, src, signal, chunk, me, npes):
    """The same ring through the host API (one "CTA", column 0 of `signal`)."""
    core = nvshmem.core
    right = (me + 1) % npes
    word = signal[0:1]
    chunks = src.size // chunk
    for c in range(chunks):
        part = slice(c * chunk, (c + 1) * chunk)
        if me > 0:
            core.signal_wait(word, c + 1, ComparisonType.CMP_GE)
            dst[part] += src[part]
        core.put_signal(dst[part], src[part] if me == 0 else dst[part], word, 1, SignalOp.SIGNAL_ADD, right)
    for c in range(chunks):
        part = slice(c * chunk, (c + 1) * chunk)
        if me < npes - 1:
            core.signal_wait(word, c + 1 if me == 0 else chunks + c + 1, ComparisonType.CMP_GE)
        if me < npes - 2:
            core.put_signal(dst[part], dst[part], word, 1, SignalOp.SIGNAL_ADD, right)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--elems", type=int, default=1024, help="int32 elements per PE")
    p.add_argument("--ctas", type=int, default=32, help="CTAs of the kernel (each owns elems / ctas elements)")
    p.add_argument("--chunks", type=int, default=4, help="chunks per CTA")
    # 512, as nvshmem4py's guide launches it: a Numba kernel has no launch bound, so this fits only
    # because the library's code stays within 128 registers per thread (docs/device-footprint.md).
    p.add_argument("--threads", type=int, default=512, help="threads per CTA")
    p.add_argument("--backend", choices=["cuda", "host"], default=None, help="default: cuda if a GPU is present")
    return p.parse_args()


def launcher():
    """'mpi' under mpirun (Open MPI / MPICH / Slurm's PMI), 'torchrun' under torchrun."""
    if any(k in os.environ for k in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK")):
        return "mpi"
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        return "torchrun"
    raise SystemExit("run me with mpirun -np 2 or torchrun --nproc-per-node 2")


def start(backend):
    """Picks this PE's device (rshmem's rule: one GPU per PE, shared when there are fewer GPUs
    than PEs on the host) and starts the job with the launcher's bootstrap."""
    if backend is not None:
        os.environ["RSHMEM_BACKEND"] = backend
    local = int(os.environ.get("LOCAL_WORLD_SIZE") or os.environ.get("OMPI_COMM_WORLD_LOCAL_SIZE") or "1")
    on_gpu = backend != "host" and cuda.is_available()
    if on_gpu and len(cuda.gpus) < local and "RSHMEM_ALLOW_SHARED_GPU" not in os.environ:
        os.environ["RSHMEM_ALLOW_SHARED_GPU"] = "1"  # the tutorial runs anywhere; times would mean nothing
    if not on_gpu:
        os.environ.setdefault("RSHMEM_BACKEND", "host")
    import rshmem.torch as rtorch  # noqa: PLC0415 (rshmem's rule for this PE's GPU, before init)

    dev = None
    if on_gpu:
        try:
            from cuda.core import Device  # noqa: PLC0415
        except ImportError:  # cuda.core before 0.4
            from cuda.core.experimental import Device  # noqa: PLC0415
        dev = Device(rtorch.device().index)
        dev.set_current()
        cuda.select_device(dev.device_id)
    if launcher() == "mpi":
        from mpi4py import MPI  # noqa: PLC0415

        nvshmem.core.init(device=dev, mpi_comm=MPI.COMM_WORLD, initializer_method="mpi")
    else:
        nvshmem.core.init(device=dev)  # torchrun's variables: rshmem's own bootstrap
    return dev


def to_host(a):
    if hasattr(a, "get"):  # CuPy
        return a.get()
    if hasattr(a, "copy_to_host"):  # Numba
        return a.copy_to_host()
    return np.asarray(a)


def main():
    args = parse_args()
    dev = start(args.backend)
    core = nvshmem.core
    me, npes = nvshmem.bindings.my_pe(), nvshmem.bindings.n_pes()
    say = print if me == 0 else (lambda *a, **k: None)
    on_gpu = dev is not None
    per_cta = args.elems // args.ctas
    chunk = per_cta // args.chunks
    if per_cta * args.ctas != args.elems or chunk * args.chunks != per_cta or chunk == 0:
        raise SystemExit("--elems must be a multiple of --ctas x --chunks")
    say(f"ring all-reduce of {args.elems} int32 over {npes} PEs ({launcher()}), "
        f"{'cuda' if on_gpu else 'host'} backend")

    src = core.array((args.elems,), dtype="int32")
    dst = core.array((args.elems,), dtype="int32")
    signal = core.array((args.ctas,), dtype="uint64")
    src[:] = me + 1
    want = npes * (npes + 1) // 2

    if on_gpu:
        nb_stream = cuda.stream()
        try:
            from cuda.core import Stream  # noqa: PLC0415
        except ImportError:
            from cuda.core.experimental import Stream  # noqa: PLC0415
        handle = nb_stream.handle
        stream = Stream.from_handle(int(getattr(handle, "value", handle) or 0))  # a cuda.core stream, as in nvshmem4py
        core.barrier(core.Teams.TEAM_WORLD, stream=stream)  # every PE's arrays are ready
        ring_allreduce[args.ctas, args.threads, nb_stream, 0](dst, src, args.elems, signal, chunk)
        core.barrier(core.Teams.TEAM_WORLD, stream=stream)
        dev.sync()
        how = f"Numba kernel, {args.ctas} CTAs x {args.threads} threads, put_signal_nbi + signal_wait"
    else:
        core.barrier_all()
        host_ring(dst, src, signal, chunk * args.chunks, me, npes)
        core.barrier_all()
        how = "host API: put_signal + signal_wait on numpy arrays"

    got = to_host(dst)
    ok = bool((got == want).all())
    if not ok:
        bad = np.flatnonzero(got != want)
        print(f"PE {me}: {bad.size} elements differ, first at {bad[0]}: {got[bad[0]]} (want {want})")
    # Every PE learns whether all are right: a min-reduction through the host API.
    flag = core.array((1,), dtype="int32")
    agreed = core.array((1,), dtype="int32")
    flag[:] = int(ok)
    core.reduce(core.Teams.TEAM_WORLD, agreed, flag, "min", stream=None)
    if on_gpu:
        dev.sync()
    if int(to_host(agreed)[0]) != 1:
        raise SystemExit("ring all-reduce: wrong result (see above)")
    say(f"ring all-reduce ({how}): correct, every element is {want} on every PE")
    if not on_gpu:
        say("skipped the Numba kernel (ring_allreduce): it runs on GPUs, and this run uses the host backend "
            "(no GPU here, or --backend host)")

    core.barrier_all()
    for a in (agreed, flag, signal, dst, src):
        core.free_array(a)
    core.finalize()


if __name__ == "__main__":
    main()
