"""Triton kernels of the all-reduce: one-shot and two-shot, with signals and no barrier.

Program `c` of the grid (`G` programs, fixed per workspace) owns region `c` of every slot of
the workspace, whatever the call's size, so programs never share a flag or a byte and need no
synchronization with each other:

- `buf[src, c]`: where PE `src` puts its data for this PE (two-shot: `buf` for the
  reduce-scatter, `buf2` for the all-gather);
- `flags[src, c]` (two-shot: `flags[k, src, c]`, k = phase): set to 1 by `src` once its data is
  there (`putmem_signal_block`: data first), reset to 0 by this PE when it has consumed it;
- `busy[c, dst]` on the sender: 1 while the sender's data may still sit unread in `dst`'s
  region; the sender sets it before putting, `dst` clears it (a remote store) after consuming.
  A sender waits for 0 before it puts again, so the next call never overwrites unread data.

Every value is 0 or 1 and returns to 0 within the call, so calls follow each other on a stream and
replay from a CUDA graph with nothing reset by the host. Sums are computed in fp32 in PE order
0, 1, ..., W-1 on every PE, so every PE gets the same bits.

- **one-shot**: every PE puts its whole vector into every peer and sums all W copies itself.
- **two-shot**: PE `o` owns chunk `o`; every PE puts chunk `o` into PE `o` (reduce-scatter), `o`
  sums it, puts the sum into every peer (all-gather), and every PE copies the other sums out.
"""
from __future__ import annotations

import triton
import triton.language as tl

import rshmem.triton as rt
from rshmem.triton import libshmem_device as shm
from rshmem.triton.language import syncthreads, tid

SUM, AVG, MAX, MIN = 0, 1, 2, 3


@triton.jit
def _combine(acc, v, OP: tl.constexpr):
    if OP == 2:
        return tl.maximum(acc, v)
    elif OP == 3:
        return tl.minimum(acc, v)
    else:
        return acc + v


@triton.jit
def _claim(busy, pes, me, W, c):
    """Waits until this program's region is free on every peer, then marks it taken."""
    if tid(0) == 0:
        for j in range(1, W):
            p = (me + j) % W
            shm.wait_until(busy + c * W + p, shm.CMP_EQ, 0)
            tl.store(busy + c * W + p, 1)
    syncthreads()


@triton.jit
def _wait_all(flags, me, W, c, G):
    if tid(0) == 0:
        for j in range(1, W):
            src = (me + j) % W
            shm.signal_wait_until(flags + src * G + c, shm.CMP_GE, 1)
    syncthreads()


@triton.jit
def _reset(flags, W, c, G):
    if tid(0) == 0:
        for s in range(W):
            tl.store(flags + s * G + c, 0)


@triton.jit
def _free_senders(busy, pes, me, W, c):
    """Tells every peer that this PE consumed what it sent to region `c` (after this program's
    every thread is done with it)."""
    syncthreads()
    if tid(0) == 0:
        for j in range(1, W):
            src = (me + j) % W
            shm.signal_op(busy + c * W + me, 0, shm.SIGNAL_SET, tl.load(pes + src))


@triton.jit
def _reduce_slice(out, x, buf, me, W, lo, hi, slot_stride, region, OP: tl.constexpr, BLOCK: tl.constexpr):
    """out[lo:hi] = op over PEs of (x[lo:hi] for this PE, buf[src, region + i - lo] for the others)."""
    offs = tl.arange(0, BLOCK)
    for start in range(lo, hi, BLOCK):
        i = start + offs
        mask = i < hi
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for s in range(W):
            if s == me:
                v = tl.load(x + i, mask=mask, other=0.0).to(tl.float32)
            else:
                v = tl.load(buf + s * slot_stride + region + (i - lo), mask=mask, other=0.0).to(tl.float32)
            if s == 0:
                acc = v
            else:
                acc = _combine(acc, v, OP)
        if OP == 1:
            acc = acc / W
        tl.store(out + i, acc.to(out.dtype.element_ty), mask=mask)


@rt.jit(do_not_specialize=["me"])
def one_shot_kernel(out, x, buf, flags, busy, pes, me, W, n, per, slot_stride, ELEM: tl.constexpr,
                    OP: tl.constexpr, BLOCK: tl.constexpr):
    """out = op over PEs of x (n elements); program c handles x[c*per : (c+1)*per]."""
    c = tl.program_id(0)
    G = tl.num_programs(0)
    lo = tl.minimum(c * per, n)
    hi = tl.minimum(lo + per, n)
    region = c * per
    _claim(busy, pes, me, W, c)
    for j in range(1, W):
        p = (me + j) % W
        shm.putmem_signal_block(buf + me * slot_stride + region, x + lo, tl.cast(hi - lo, tl.int64) * ELEM,
                                flags + me * G + c, 1, shm.SIGNAL_SET, tl.load(pes + p))
    _wait_all(flags, me, W, c, G)
    _reduce_slice(out, x, buf, me, W, lo, hi, slot_stride, region, OP, BLOCK)
    _reset(flags, W, c, G)
    _free_senders(busy, pes, me, W, c)


@rt.jit(do_not_specialize=["me"])
def two_shot_kernel(out, x, buf, buf2, flags, busy, pes, me, W, n, chunk, per, slot_stride, ELEM: tl.constexpr,
                    OP: tl.constexpr, BLOCK: tl.constexpr):
    """out = op over PEs of x (n elements); chunk o = x[o*chunk : (o+1)*chunk] belongs to PE o,
    and program c handles slice [c*per, (c+1)*per) of every chunk."""
    c = tl.program_id(0)
    G = tl.num_programs(0)
    region = c * per
    _claim(busy, pes, me, W, c)
    # reduce-scatter: slice c of chunk p goes to PE p
    for j in range(1, W):
        p = (me + j) % W
        lo = tl.minimum(p * chunk + region, tl.minimum((p + 1) * chunk, n))
        hi = tl.minimum(lo + per, tl.minimum((p + 1) * chunk, n))
        shm.putmem_signal_block(buf + me * slot_stride + region, x + lo, tl.cast(hi - lo, tl.int64) * ELEM,
                                flags + me * G + c, 1, shm.SIGNAL_SET, tl.load(pes + p))
    _wait_all(flags, me, W, c, G)
    end = tl.minimum((me + 1) * chunk, n)
    lo = tl.minimum(me * chunk + region, end)
    hi = tl.minimum(lo + per, end)
    # The sum of this PE's slice, in PE order, written where it belongs in `out`.
    _reduce_slice(out, x, buf, me, W, lo, hi, slot_stride, region, OP, BLOCK)
    # all-gather: the sum goes to every peer (putmem_signal_block synchronizes the block first,
    # so every thread's part of `out` is written before it is read)
    flags2 = flags + W * G
    for j in range(1, W):
        p = (me + j) % W
        shm.putmem_signal_block(buf2 + me * slot_stride + region, out + lo, tl.cast(hi - lo, tl.int64) * ELEM,
                                flags2 + me * G + c, 1, shm.SIGNAL_SET, tl.load(pes + p))
    _wait_all(flags2, me, W, c, G)
    offs = tl.arange(0, BLOCK)
    for j in range(1, W):
        src = (me + j) % W
        s_end = tl.minimum((src + 1) * chunk, n)
        s_lo = tl.minimum(src * chunk + region, s_end)
        s_hi = tl.minimum(s_lo + per, s_end)
        for start in range(s_lo, s_hi, BLOCK):
            i = start + offs
            v = tl.load(buf2 + src * slot_stride + region + (i - s_lo), mask=i < s_hi)
            tl.store(out + i, v, mask=i < s_hi)
    _reset(flags, W, c, G)
    _reset(flags2, W, c, G)
    _free_senders(busy, pes, me, W, c)
