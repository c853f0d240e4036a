"""Triton kernels of AllGather+GEMM and GEMM+ReduceScatter (sm_90: TMA descriptors and wgmma
through `tl.dot`; a pointer form of each for shapes TMA cannot describe).

Both GEMMs are persistent: `num_sms` programs walk the output tiles in steps of `num_sms`, each
tile a pipelined K loop, the tile loop flattened into it (`tl.range(..., flatten=FLATTEN)`), so
the loads of a program's next tile start while the current one finishes.

**AllGather+GEMM** (`ag_gemm_kernel`): C rows of shard `s` = shard `s` of A @ B. Shard `me` is
read from the caller's `a_loc` and computed first, with no wait; the other shards arrive in the
symmetric buffer `a_buf` ([W, m, K]), pushed by the peers' producers, each chunk of `chunk_rows`
rows with a flag SET to 1 (`flags[src, chunk]`). A tile waits for its chunk's flag (one flag: chunks are
whole tiles high), and the wait's result feeds the tile's loads (`consume_token` on the TMA
descriptor, or on the row coordinate of the pointer form), so no load of the tile, pipelined
early or not, can be issued before the wait returns. The last program to finish (a done counter) sets
the flags back to 0 and tells each producer that its slot is free again (`busy[me] = 0` on it),
unless the caller still copies out of the buffer (`RELEASE=False`; `release_kernel` does it then).

**GEMM+ReduceScatter** (`gemm_rs_kernel`): PE `me` computes A @ B for every chunk of rows, in
two loops. The first walks the chunks of the other PEs (starting with `me + 1`), storing each
finished tile straight into its owner's symmetric `recv[me]`; its epilogue is nothing but those
stores, so with `FLATTEN` it is one flattened, pipelined loop over all its tiles like
AllGather+GEMM's (a barrier or a signal in the epilogue stops Triton's pipeliner, and a
conditional signal stops its loop fusion, in Triton 3.6). When a program has stored all its
tiles, it raises one flag on every peer: `flags[me, program]`. The second loop walks the own
chunk, continuing the programs' round-robin: for each tile it waits for the flag of the program
that computed that tile on each peer (the peers tile and number their programs alike: the shapes,
the configuration and the SM count are agreed), adds their partial tiles to its accumulator and
stores the sum. The peers computed this chunk first, so the flags are long set. The last program
resets the flags and frees the peers' slots, as above.

Flags only ever go 0 -> 1 (producer) and 1 -> 0 (consumer, after every program is done), and a
producer writes a peer's slot only once the peer said it is free (`busy`), so calls may follow
each other on a stream and be replayed from a CUDA graph with nothing reset by the host.

With `COMM=False` the same kernels are "the GEMM alone": every tile computed, no wait, no flag,
no push (what the benchmarks time beside cuBLAS).
"""
from __future__ import annotations

import triton
import triton.language as tl

import rshmem.triton as rt
from rshmem.triton import libshmem_device as shm
from rshmem.triton import language as dl
from rshmem.triton.language import syncthreads, tid


@triton.jit
def _tile(t, tiles_m, tiles_n, GROUP_M: tl.constexpr):
    """Tile `t` as (row block, column block), in groups of GROUP_M row blocks (L2 reuse of B)."""
    per_group = GROUP_M * tiles_n
    first_m = (t // per_group) * GROUP_M
    size_m = tl.minimum(tiles_m - first_m, GROUP_M)
    pm = first_m + (t % per_group) % size_m
    pn = (t % per_group) // size_m
    return pm, pn


@triton.jit
def _mainloop(a, a_base, a_idx, om, on, rows, b, N, K, stride_bk, stride_bn, BM: tl.constexpr, BN: tl.constexpr,
              BK: tl.constexpr, TMA: tl.constexpr, A3D: tl.constexpr, B_T: tl.constexpr):
    """The fp32 tile at (om, on) of A @ B. A: a descriptor ([a_idx, row, k] when A3D) or a
    pointer (`a + a_base` is row 0, `rows` rows of K); B: [K, N], or [N, K] when B_T."""
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    k_tiles = tl.cdiv(K, BK)
    if TMA:
        for ki in range(k_tiles):
            ok = ki * BK
            if A3D:
                x = a.load([a_idx, om, ok]).reshape(BM, BK)
            else:
                x = a.load([om, ok])
            if B_T:
                y = b.load([on, ok]).T
            else:
                y = b.load([ok, on])
            acc = tl.dot(x, y, acc)
    else:
        rm = om + tl.arange(0, BM)
        rn = on + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        a_ptrs = a + a_base + rm[:, None].to(tl.int64) * K + rk[None, :]
        b_ptrs = b + rk[:, None].to(tl.int64) * stride_bk + rn[None, :].to(tl.int64) * stride_bn
        for ki in range(k_tiles):
            left = K - ki * BK
            x = tl.load(a_ptrs, mask=(rm[:, None] < rows) & (rk[None, :] < left), other=0.0)
            y = tl.load(b_ptrs, mask=(rk[:, None] < left) & (rn[None, :] < N), other=0.0)
            acc = tl.dot(x, y, acc)
            a_ptrs += BK
            b_ptrs += BK * stride_bk
    return acc


@triton.jit
def _store_c(c, c_idx, om, on, acc, rows, N, BM: tl.constexpr, BN: tl.constexpr, TMA: tl.constexpr,
             C3D: tl.constexpr, SPLIT_C: tl.constexpr = False):
    """Stores tile (om, on) of matrix `c_idx` of C ([c_idx, row, col] when C3D). With SPLIT_C
    (TMA, C3D) the tile goes out as two halves of BN / 2 columns (the descriptor's block), which
    halves the shared memory the store stages and leaves room for one more pipeline stage."""
    if TMA:
        if SPLIT_C:
            halves = acc.reshape(BM, 2, BN // 2).permute(0, 2, 1)
            left, right = tl.split(halves)
            c.store([c_idx, om, on], left.to(c.dtype).reshape(1, BM, BN // 2))
            c.store([c_idx, om, on + BN // 2], right.to(c.dtype).reshape(1, BM, BN // 2))
        elif C3D:
            c.store([c_idx, om, on], acc.to(c.dtype).reshape(1, BM, BN))
        else:
            c.store([om, on], acc.to(c.dtype))
    else:
        rm = om + tl.arange(0, BM)
        rn = on + tl.arange(0, BN)
        ptrs = c + tl.cast(c_idx * rows + rm[:, None], tl.int64) * N + rn[None, :]
        tl.store(ptrs, acc.to(c.dtype.element_ty), mask=(rm[:, None] < rows) & (rn[None, :] < N))


@triton.jit
def _release(flags, counter, busy, pes, me, W, n_flags, flag_stride, RESET_BLOCK: tl.constexpr):
    """Called by every program once it is done with the received data: the last one to arrive
    sets `flags[s, :n_flags]` back to 0 for every PE `s`, then tells every other PE (on its
    `busy[me]`) that this PE's slot for it is free; it also rearms the done counter."""
    old = tl.atomic_add(counter, 1, sem="acq_rel", scope="gpu")
    if old == tl.num_programs(0) * tl.num_programs(1) - 1:
        tl.atomic_xchg(counter, 0, sem="relaxed", scope="gpu")
        offs = tl.arange(0, RESET_BLOCK)
        for s in range(W):
            for o in range(0, n_flags, RESET_BLOCK):
                tl.store(flags + s * flag_stride + o + offs, 0, mask=o + offs < n_flags)
        # Every thread's reset is done before thread 0's release (bar.sync orders them at CTA
        # scope, and the release is cumulative).
        syncthreads()
        if tid(0) == 0:
            for j in range(1, W):
                p = (me + j) % W
                shm.signal_op(busy + me, 0, shm.SIGNAL_SET, tl.load(pes + p))


# Sizes are not specialized (Triton would compile a kernel per divisibility pattern of every
# shape, a cost each new shape pays at its first call); the B strides are, for the pointer form.
_SIZES = ["me", "W", "m", "N", "K", "chunk_rows", "n_chunks", "flag_stride", "num_sms"]


@rt.jit(do_not_specialize=_SIZES)
def ag_gemm_kernel(a_loc, a_buf, b, c, flags, counter, busy, pes, me, W, m, N, K, stride_bk, stride_bn, chunk_rows,
                   n_chunks, flag_stride, num_sms, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                   TMA: tl.constexpr, B_T: tl.constexpr, COMM: tl.constexpr, RELEASE: tl.constexpr,
                   FLATTEN: tl.constexpr, RESET_BLOCK: tl.constexpr, SPLIT_C: tl.constexpr):
    """C ([W, m, N]) = all_gather(A) @ B; see the module docstring. A pointer-form `a_buf` is the
    whole [W, m, K] buffer, `c` the whole [W * m, N] output."""
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(m, BM)
    tiles_n = tl.cdiv(N, BN)
    per_shard = tiles_m * tiles_n
    for t in tl.range(pid, per_shard, num_sms, flatten=FLATTEN):
        pm, pn = _tile(t, tiles_m, tiles_n, GROUP_M)
        om = pm * BM
        on = pn * BN
        acc = _mainloop(a_loc, 0, 0, om, on, m, b, N, K, stride_bk, stride_bn, BM, BN, BK, TMA, False, B_T)
        _store_c(c, me, om, on, acc, m, N, BM, BN, TMA, True, SPLIT_C)
    # The other shards continue this program's round-robin where the own shard left it, so the
    # programs share the whole tile range as evenly as one loop would.
    first = pid
    if pid < per_shard:
        first = pid + ((per_shard - pid + num_sms - 1) // num_sms) * num_sms
    for t in tl.range(first, W * per_shard, num_sms, flatten=FLATTEN):
        j = t // per_shard
        src = (me + j) % W
        pm, pn = _tile(t - j * per_shard, tiles_m, tiles_n, GROUP_M)
        om = pm * BM
        on = pn * BN
        a_src = a_buf
        om_a = om
        if COMM:
            # The library's wait (it honours RSHMEM_DEBUG_WAIT_TIMEOUT_MS); its value is the token
            # every load of the tile depends on, through the descriptor (which also fences the
            # async proxy that TMA reads through) or through the row coordinate.
            token = shm.signal_wait_until(flags + src * flag_stride + om // chunk_rows, shm.CMP_GE, 1)
            if TMA:
                a_src = dl.consume_token(a_buf, token)
            else:
                om_a = dl.consume_token(om, token)
        acc = _mainloop(a_src, tl.cast(src * m, tl.int64) * K, src, om_a, on, m, b, N, K, stride_bk, stride_bn, BM, BN,
                        BK, TMA, True, B_T)
        _store_c(c, src, om, on, acc, m, N, BM, BN, TMA, True, SPLIT_C)
    if COMM:
        if RELEASE:
            _release(flags, counter, busy, pes, me, W, n_chunks, flag_stride, RESET_BLOCK)


@rt.jit(do_not_specialize=["me", "W", "m", "row_bytes", "chunk_rows", "flag_stride"])
def ag_push_kernel(a_shard, buf, flags, pes, me, W, m, row_bytes, chunk_rows, flag_stride):
    """The SM producer of AllGather+GEMM: program (c, j) puts chunk c of this PE's shard (bytes)
    into slot `me` of the buffer on PE `me + 1 + j` and sets that PE's `flags[me, c]`.
    `putmem_signal_block` makes the data visible before the flag."""
    c = tl.program_id(0)
    p = (me + 1 + tl.program_id(1)) % W
    pe = tl.load(pes + p)
    row0 = c * chunk_rows
    rows = tl.minimum(chunk_rows, m - row0)
    off = tl.cast(row0, tl.int64) * row_bytes
    dst = buf + tl.cast(me * m, tl.int64) * row_bytes + off
    shm.putmem_signal_block(dst, a_shard + off, tl.cast(rows, tl.int64) * row_bytes, flags + me * flag_stride + c, 1,
                            shm.SIGNAL_SET, pe)


@rt.jit(do_not_specialize=["me", "W", "my_pe", "m", "row_bytes", "flag_stride"])
def ag_gather_kernel(a_shard, buf, flags, busy, pes, me, W, my_pe, m, row_bytes, flag_stride):
    """The whole gather of a decode-sized AllGather+GEMM (one chunk per shard) in one launch,
    program j for PE `me + 1 + j`: for a peer p, wait until p has freed this PE's slot
    (`busy[p] == 0`), mark it taken, put the shard into it and set `flags[me, 0]` there; the last
    program (this PE) copies the shard into its own slot and waits for every peer's flag, so the
    caller's stream can multiply the gathered A when the kernel ends. One program per peer and
    one thread of it waits and marks, so nothing can see the slot taken before the wait ends."""
    p = (me + 1 + tl.program_id(0)) % W
    pe = tl.load(pes + p)
    nbytes = tl.cast(m, tl.int64) * row_bytes
    dst = buf + tl.cast(me * m, tl.int64) * row_bytes
    if p != me:
        if tid(0) == 0:
            shm.signal_wait_until(busy + p, shm.CMP_EQ, 0)
            shm.signal_op(busy + p, 1, shm.SIGNAL_SET, my_pe)
        # No thread writes the peer's slot before the wait (bar.sync after thread 0's acquire).
        syncthreads()
    shm.putmem_signal_block(dst, a_shard, nbytes, flags + me * flag_stride, 1, shm.SIGNAL_SET, pe)
    if p == me:
        for s in range(0, W):
            if s != me:
                shm.signal_wait_until(flags + s * flag_stride, shm.CMP_GE, 1)


@rt.jit(do_not_specialize=["me", "W", "n_flags", "flag_stride"])
def release_kernel(flags, counter, busy, pes, me, W, n_flags, flag_stride, RESET_BLOCK: tl.constexpr):
    """One program: the end of a call whose consumer left the release to the caller
    (AllGather+GEMM when the gathered A is copied out of the buffer after the GEMM)."""
    _release(flags, counter, busy, pes, me, W, n_flags, flag_stride, RESET_BLOCK)


@triton.jit
def gathered_a_kernel(a_loc, buf, full, lo, hi, total, BLOCK: tl.constexpr):
    """`full` = the gathered A, as bytes: [lo, hi) from this PE's shard `a_loc`, the rest from
    the buffer, where the peers' shards arrived (this PE's own slot there holds nothing: the GEMM
    reads `a_loc`). One launch where two copies were (the buffer, then the own rows over it):
    AllGather+GEMM's `return_a`, which every training forward asks for. The sizes are
    specialized (divisibility by 16), so that the masks are uniform over 16-byte vectors."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    valid = offs < total
    own = (offs >= lo) & (offs < hi)
    peers = tl.load(buf + offs, mask=valid & ~own)
    mine = tl.load(a_loc + (offs - lo), mask=own)
    tl.store(full + offs, tl.where(own, mine, peers), mask=valid)


@triton.jit
def _push_tile(recv, pe, slot, om, on, acc, rows, N, BM: tl.constexpr, BN: tl.constexpr):
    """Stores the tile into slot `slot` ([rows, N]) of `recv` on PE `pe`."""
    rm = om + tl.arange(0, BM)
    rn = on + tl.arange(0, BN)
    dst = shm.remote_ptr(recv, pe)
    ptrs = dst + tl.cast(slot * rows + rm[:, None], tl.int64) * N + rn[None, :]
    tl.store(ptrs, acc.to(recv.dtype.element_ty), mask=(rm[:, None] < rows) & (rn[None, :] < N))


@triton.jit
def _add_partial(acc, recv, slot, token, om, on, rows, N, BM: tl.constexpr, BN: tl.constexpr):
    """acc + tile (om, on) of slot `slot` of the local `recv`, loaded after `token`'s wait."""
    base = dl.consume_token(recv, token)
    rm = om + tl.arange(0, BM)
    rn = on + tl.arange(0, BN)
    ptrs = base + tl.cast(slot * rows + rm[:, None], tl.int64) * N + rn[None, :]
    part = tl.load(ptrs, mask=(rm[:, None] < rows) & (rn[None, :] < N), other=0.0)
    return acc + part.to(tl.float32)


@rt.jit(do_not_specialize=_SIZES[:5] + ["flag_stride", "num_sms"])
def gemm_rs_kernel(a, b, c, recv, flags, counter, busy, pes, me, W, m, N, K, stride_bk, stride_bn, flag_stride, num_sms,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr, TMA: tl.constexpr,
                   B_T: tl.constexpr, COMM: tl.constexpr, FLATTEN: tl.constexpr, RESET_BLOCK: tl.constexpr):
    """C ([m, N]) = chunk `me` of reduce_scatter(A @ B), A [W, m, K]; see the module docstring.
    With COMM=False, C is [W, m, N]: the whole A @ B. `num_sms` is the grid (it numbers the flags)."""
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(m, BM)
    tiles_n = tl.cdiv(N, BN)
    per_chunk = tiles_m * tiles_n
    others = (W - 1) * per_chunk
    for t in tl.range(pid, others, num_sms, flatten=FLATTEN):
        j = t // per_chunk
        owner = (me + 1 + j) % W
        pm, pn = _tile(t - j * per_chunk, tiles_m, tiles_n, GROUP_M)
        om = pm * BM
        on = pn * BN
        acc = _mainloop(a, tl.cast(owner * m, tl.int64) * K, owner, om, on, m, b, N, K, stride_bk, stride_bn, BM, BN, BK,
                        TMA, True, B_T)
        if COMM:
            _push_tile(recv, tl.load(pes + owner), me, om, on, acc, m, N, BM, BN)
        else:
            _store_c(c, owner, om, on, acc, m, N, BM, BN, TMA, True)
    if COMM:
        # Every thread's pushes are done before thread 0's release (bar.sync, cumulative release).
        syncthreads()
        if tid(0) == 0:
            for j in range(1, W):
                shm.signal_op(flags + me * flag_stride + pid, 1, shm.SIGNAL_SET, tl.load(pes + (me + j) % W))
    first = pid
    if pid < others:
        first = pid + ((others - pid + num_sms - 1) // num_sms) * num_sms
    for t in tl.range(first, others + per_chunk, num_sms):
        ti = t - others
        pm, pn = _tile(ti, tiles_m, tiles_n, GROUP_M)
        om = pm * BM
        on = pn * BN
        acc = _mainloop(a, tl.cast(me * m, tl.int64) * K, me, om, on, m, b, N, K, stride_bk, stride_bn, BM, BN, BK,
                        TMA, True, B_T)
        if COMM:
            for s in range(1, W):
                src = (me + s) % W
                # PE src computed this chunk in its first loop at step W - 1 - s, as tile
                # (W - 1 - s) * per_chunk + ti, in its program of that number modulo the grid.
                prog = ((W - 1 - s) * per_chunk + ti) % num_sms
                token = shm.signal_wait_until(flags + src * flag_stride + prog, shm.CMP_GE, 1)
                acc = _add_partial(acc, recv, src, token, om, on, m, N, BM, BN)
            _store_c(c, 0, om, on, acc, m, N, BM, BN, TMA, False)
        else:
            _store_c(c, me, om, on, acc, m, N, BM, BN, TMA, True)
    if COMM:
        _release(flags, counter, busy, pes, me, W, num_sms, flag_stride, RESET_BLOCK)
