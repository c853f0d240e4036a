"""The rshmem Triton kernels the benchmarks launch (twins of `kernels_nvshmem`).

Every pointer is the LOCAL address of a symmetric tensor (or inside one); the library turns it
into the peer's address. Byte buffers are uint8 tensors. Arguments that change from launch to
launch (sizes, PE numbers, signal targets) are not specialized, so one compiled kernel serves
every size instead of Triton recompiling on values such as 1 or multiples of 16.
"""
import triton
import triton.language as tl

import rshmem.triton as rt
from rshmem.triton import libshmem_device as shm

from benchmarks.kernels.ptx import globaltimer, thread_id


@rt.jit(do_not_specialize=["nbytes", "slice_bytes", "pe"])
def put_kernel(dst, src, nbytes, slice_bytes, pe, NBI: tl.constexpr):
    """CTA i puts bytes [i*slice_bytes, min(nbytes, (i+1)*slice_bytes)) of `src` into `dst` on
    `pe` with `putmem_block` (or `putmem_nbi_block` then `quiet`). The host launches exactly
    ceil(nbytes / slice_bytes) CTAs."""
    start = tl.program_id(0).to(tl.int64) * slice_bytes
    n = tl.minimum(nbytes - start, slice_bytes)
    if NBI:
        shm.putmem_nbi_block(dst + start, src + start, n, pe)
        shm.quiet()
    else:
        shm.putmem_block(dst + start, src + start, n, pe)


@triton.jit
def _signal_round(me, peer, buf, src, sig, nbytes, v):
    # PE 0 sends first and waits for the answer; PE 1 waits, then answers.
    if me == 0:
        shm.putmem_signal_block(buf, src, nbytes, sig, v, shm.SIGNAL_SET, peer)
        shm.signal_wait_until(sig, shm.CMP_GE, v)
    else:
        shm.signal_wait_until(sig, shm.CMP_GE, v)
        shm.putmem_signal_block(buf, src, nbytes, sig, v, shm.SIGNAL_SET, peer)


@rt.jit(do_not_specialize=["nbytes", "iters", "base"])
def pingpong_signal_kernel(buf, src, sig, t_out, nbytes, iters, base):
    """`iters` round trips of `putmem_signal_block` (`nbytes`, signal SET to base+k) between PEs
    0 and 1, one CTA each; the first round (not timed) absorbs the launch skew between the two
    GPUs. Writes the nanoseconds of the timed rounds to `t_out`."""
    me = shm.my_pe()
    peer = 1 - me
    _signal_round(me, peer, buf, src, sig, nbytes, (base + 1).to(tl.int64))
    t0 = globaltimer()
    for i in range(iters):
        _signal_round(me, peer, buf, src, sig, nbytes, (base + i + 2).to(tl.int64))
    t1 = globaltimer()
    tl.store(t_out, t1 - t0)


@triton.jit
def _p_round(me, peer, flag, v):
    if me == 0:
        shm.int_p(flag, v, peer)
        shm.wait_until(flag, shm.CMP_GE, v)
    else:
        shm.wait_until(flag, shm.CMP_GE, v)
        shm.int_p(flag, v, peer)


@rt.jit(do_not_specialize=["iters", "base"])
def pingpong_p_kernel(flag, t_out, iters, base):
    """As `pingpong_signal_kernel` with `int_p` of an int32 flag and `wait_until`, by thread 0
    alone (thread-scope calls)."""
    me = shm.my_pe()
    peer = 1 - me
    if thread_id() == 0:
        _p_round(me, peer, flag, (base + 1).to(tl.int32))
        t0 = globaltimer()
        for i in range(iters):
            _p_round(me, peer, flag, (base + i + 2).to(tl.int32))
        t1 = globaltimer()
        tl.store(t_out, t1 - t0)


@rt.jit(do_not_specialize=["iters"])
def barrier_kernel(t_out, iters):
    """`iters` calls of `barrier_all_block` in one CTA, after one untimed call."""
    shm.barrier_all_block()
    t0 = globaltimer()
    for i in range(iters):
        shm.barrier_all_block()
    t1 = globaltimer()
    tl.store(t_out, t1 - t0)


@rt.jit(do_not_specialize=["nbytes", "slice_bytes", "target", "npes"])
def allgather_push_kernel(out, inp, sig, nbytes, slice_bytes, target, npes, SET: tl.constexpr):
    """All-gather by pushing. Grid (ctas, npes): CTA (i, j) puts slice i of this PE's `nbytes`
    input into block `me` of `out` on PE (me + j) % npes with `putmem_signal_block`, signalling
    `sig[me]` there: +1 per CTA (SET=False), or set to `target` (SET=True, one CTA per PE).
    CTA (0, 0) then waits until `sig[p] >= target` for every other PE p, so the kernel ends only
    when every block has arrived. `target` grows from launch to launch; nothing is reset."""
    me = shm.my_pe()
    i = tl.program_id(0)
    j = tl.program_id(1)
    peer = (me + j) % npes
    start = i.to(tl.int64) * slice_bytes
    n = tl.minimum(nbytes - start, slice_bytes)
    dst = out + me.to(tl.int64) * nbytes + start
    if SET:
        shm.putmem_signal_block(dst, inp + start, n, sig + me, target, shm.SIGNAL_SET, peer)
    else:
        shm.putmem_signal_block(dst, inp + start, n, sig + me, 1, shm.SIGNAL_ADD, peer)
    if (i == 0) & (j == 0):
        if thread_id() == 0:
            for p in range(npes):
                if p != me:
                    shm.signal_wait_until(sig + p, shm.CMP_GE, target)
        tl.debug_barrier()
