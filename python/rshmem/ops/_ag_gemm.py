"""AllGather+GEMM on the cuda backend: `C = all_gather(A_shard) @ B`.

One call, in stream order (the protocol is in `_kernels_gemm`):

1. An event on the caller's stream marks the inputs ready.
2. The consumer GEMM is launched on the caller's stream first, so the GPU starts on the local
   shard at once; it waits for the other shards tile row by tile row.
3. The producer runs on a side stream per peer, after that event: it waits until the peer has
   finished reading this PE's slot (`busy[p] == 0`, `signal_wait_until_on_stream`), marks it taken, then
   moves the shard in `n_chunks` chunks of rows, each with a flag on the peer: by the copy engine
   (`putmem_signal_on_stream`) or by `ag_push_kernel`'s `putmem_signal_block` (a few CTAs, whose
   SMs the GEMM leaves free so both always run). `rshmem.ops.config.ag_producer` picks one;
   `auto` takes the SM producer for small shards, where the copy engine's per-copy latency
   dominates, and the copy engine for large ones, where SMs are worth more to the GEMM.
4. The caller's stream waits for the side streams: everything later on it sees the call done.
5. With `return_a`, the caller's stream then copies the gathered A out of the buffer (the GEMM
   waited for every chunk, so the buffer is whole), the peers' rows from the buffer and this
   PE's from its shard, in one launch (`gathered_a_kernel`: with two torch copies a call with
   `return_a` took 1.1-1.7x the host time, docs/benchmarks.md), and `release_kernel` ends the
   call after it instead of the GEMM's last CTA. A copy per chunk on a stream of its own, each
   after a wait on the chunk's flag, overlapped the GEMM but cost 2 launches per chunk: with 2
   PEs sharing one H200 the copy after the GEMM takes 1.3-1.75x less host time per call with
   `return_a` and 1.4-1.85x less in a training forward (docs/benchmarks.md). Its GPU cost, one
   more pass over the gathered A after the GEMM, is not measured within a call (that needs 2
   GPUs); alone, the kernel takes 38.6 us on one H200 for a 64 MiB gathered A (W=2), where the
   two copies it replaced took 54.4.

Decode sizes (`small_rows`: the gathered A, then one cuBLAS GEMM) run every step on the caller's
stream instead: the GEMM waits for all of A anyway, so side streams would overlap nothing and
cost their events (about 10 us of CPU per call). With the SM producer and one chunk per shard
(the usual decode case) one launch, `ag_gather_kernel`, does the whole gather: the busy waits, the
puts, this PE's own rows, the waits for the peers' flags; then `torch.mm` and the release. With
more chunks (a `gemm_small_rows` raised above the default) or the copy-engine producer, the steps
are those of the fused path, queued on the caller's stream, and this PE's rows are copied in.

Nothing here allocates or synchronizes on the host after the first call of a shape, so the op
may be called back to back and captured in a CUDA graph (side streams fork from and join the
capturing stream). The side streams exist and the producer and release kernels are loaded
before the GEMM is launched: once it spins on the peers' flags, creating a stream or loading a
module in this context would wait for it, and the peers' GEMMs would wait for this PE's producer
(on one shared H100 every first call deadlocked until the debug wait timeout trapped).
"""
from __future__ import annotations

import torch
from triton.tools.tensor_descriptor import TensorDescriptor

from ..host import CMP_EQ, CMP_GE, SIGNAL_SET
from . import _checks, _group, _kernels_gemm as kg, _tuning, _workspace
from ._config import config
from .. import _cuda, _native
from ._launch import Bound, Kernel

FLAG_STRIDE = 64  # chunks per shard at most
RESET_BLOCK = 64
CHUNK_ALIGN = 256  # chunk rows are a multiple of every tile height, so a tile needs one flag
CE_CHUNKS = 2  # copy-engine chunks per shard: the first lands early, and each costs a few us of CPU
PUSH_WARPS = 16

_consumer = Kernel(kg.ag_gemm_kernel, "all_gather_matmul")
_push = Kernel(kg.ag_push_kernel, "all_gather_matmul")
_gather = Kernel(kg.ag_gather_kernel, "all_gather_matmul")
_release = Kernel(kg.release_kernel, "all_gather_matmul")
_gathered_a = Kernel(kg.gathered_a_kernel, "all_gather_matmul")
GATHERED_A_BLOCK = 16384  # bytes per program of `gathered_a_kernel`
_streams: dict = {}  # device index -> side streams
_callers: dict = {}  # raw handle -> the caller's stream as a torch object


def forget() -> None:
    _streams.clear()
    _callers.clear()


def _stream(handle: int, dev) -> torch.cuda.Stream:
    """The caller's stream (current, raw `handle`) as a torch Stream object for events, kept per
    handle: `torch.cuda.current_stream()` builds a new object on every call (a few us). (Not
    `ExternalStream(handle)`: for handle 0, the default stream, torch hands out a pool stream.)"""
    found = _callers.get(handle)
    if found is None:
        found = _callers[handle] = torch.cuda.current_stream(dev)
    return found


def _side_streams(count: int) -> list:
    """`count` side streams of this PE's device (kept for the process)."""
    dev = _group.device()
    found = _streams.setdefault(dev.index, [])
    while len(found) < count:
        found.append(torch.cuda.Stream(device=dev))
    return found[:count]


def _space(info: _group.TeamInfo, dtype, need: int) -> _workspace.Space:
    size = _workspace.size_class(need)
    key = ("all_gather_matmul", info.team, str(dtype), size)
    return _workspace.get("all_gather_matmul", key,
                          lambda: _workspace.Space(info, size, info.size * FLAG_STRIDE, info.size,
                                                                   "all_gather_matmul"))


def chunking(m: int, chunks: int) -> tuple:
    """(rows per chunk, chunk count) of a shard of `m` rows cut into about `chunks` chunks."""
    chunks = max(1, min(chunks, FLAG_STRIDE))
    rows = -(-m // chunks)
    rows = max(CHUNK_ALIGN, -(-rows // CHUNK_ALIGN) * CHUNK_ALIGN)
    return rows, -(-m // rows)


def shape_tma_ok(elt: int, *row_lengths) -> bool:
    """Whether rows of these lengths (elements of `elt` bytes) give TMA its 16-byte strides. The
    GEMM tiling is chosen from this, the shapes alone, so every PE tiles alike; a PE whose
    tensors are misaligned runs the pointer form of the kernel with the same tiling."""
    return all((n * elt) % 16 == 0 for n in row_lengths)


def tma_ok(*mats) -> bool:
    """Whether TMA descriptors can describe these matrices: 16-byte aligned bases and row strides."""
    for t in mats:
        if t.data_ptr() % 16 or any((s * t.element_size()) % 16 for s in t.stride()[:-1]) or t.stride()[-1] != 1:
            return False
    return True


def small_rows(rows: int, dtype) -> bool:
    """Whether a GEMM of `rows` rows of C in all (every PE's shard) runs as gathered A and cuBLAS
    (`config.gemm_small_rows`; not fp8, which `torch.mm` does not multiply)."""
    return rows <= config.gemm_small_rows and dtype != _checks.FP8


def producer(shard_bytes: int) -> str:
    """"sm" or "copy_engine" for a shard of this size, per `config.ag_producer`."""
    config.check()
    if config.ag_producer != "auto":
        return config.ag_producer
    return "sm" if shard_bytes <= config.ag_sm_max_bytes else "copy_engine"


class _Call:
    """The arguments of one consumer launch that do not depend on the configuration."""

    def __init__(self, a, b, b_t, c, buf3d, space, info):
        self.a, self.b, self.b_t, self.c, self.buf3d, self.space, self.info = a, b, b_t, c, buf3d, space, info
        self.m, self.K = a.shape
        self.N = b.shape[1]
        self.bmat = b.t() if b_t else b
        self.shape_tma = shape_tma_ok(a.element_size(), self.K, self.N)
        self.tma = self.shape_tma and tma_ok(a, self.bmat, c, buf3d)

    def pack(self, cfg: _tuning.GemmConfig, comm: bool, release: bool, sms: int, chunk_rows: int = CHUNK_ALIGN,
             n_chunks: int = 1):
        """(grid, runtime arguments, constexprs, options) of the consumer launch."""
        info, m, K, N = self.info, self.m, self.K, self.N
        W = info.size
        c3d = self.c.view(W, m, N)
        if self.tma:
            a_loc = TensorDescriptor.from_tensor(self.a, [cfg.BM, cfg.BK])
            a_buf = TensorDescriptor.from_tensor(self.buf3d, [1, cfg.BM, cfg.BK])
            b = TensorDescriptor.from_tensor(self.bmat, [cfg.BN, cfg.BK] if self.b_t else [cfg.BK, cfg.BN])
            c = TensorDescriptor.from_tensor(c3d, [1, cfg.BM, cfg.BN // 2 if cfg.split_c else cfg.BN])
            sbk = sbn = 0
        else:
            a_loc, a_buf, b, c = self.a, self.buf3d, self.b, self.c
            sbk, sbn = self.b.stride()
        tiles = W * (-(-m // cfg.BM)) * (-(-N // cfg.BN))
        grid = max(1, min(sms, tiles))
        space = self.space
        args = (a_loc, a_buf, b, c, space.flags, space.counter, space.busy, _workspace.pes(info), info.rank, W, m, N, K,
                sbk, sbn, chunk_rows, n_chunks, FLAG_STRIDE, grid)
        consts = (cfg.BM, cfg.BN, cfg.BK, cfg.GROUP_M, self.tma, self.b_t, comm, release,
                  cfg.flatten and self.tma, RESET_BLOCK, cfg.split_c and self.tma)
        return (grid,), args, consts, {"num_warps": cfg.warps, "num_stages": cfg.stages}

    def launch(self, cfg: _tuning.GemmConfig, comm: bool, release: bool, sms: int, chunk_rows: int = CHUNK_ALIGN,
               n_chunks: int = 1, prepare: bool = False) -> None:
        grid, args, consts, opts = self.pack(cfg, comm, release, sms, chunk_rows, n_chunks)
        _consumer(grid, args, consts, prepare=prepare, **opts)

    def bind(self, cfg: _tuning.GemmConfig, comm: bool, release: bool, sms: int, chunk_rows: int = CHUNK_ALIGN,
             n_chunks: int = 1, varying: tuple = ()) -> Bound:
        grid, args, consts, opts = self.pack(cfg, comm, release, sms, chunk_rows, n_chunks)
        return _consumer.bind(grid, args, consts, varying, **opts)


def _config(call: _Call, key: tuple) -> _tuning.GemmConfig:
    dtype = call.a.dtype
    if dtype == _checks.FP8:
        pointer, candidates = _tuning.POINTER_FP8_CONFIG, _tuning.AG_FP8_CANDIDATES
    elif dtype == torch.float32:
        pointer, candidates = _tuning.POINTER_F32_CONFIG, _tuning.AG_F32_CANDIDATES
    else:
        pointer, candidates = _tuning.POINTER_CONFIG, _tuning.AG_CANDIDATES
    if not call.shape_tma:
        return pointer
    return _tuning.choose("all_gather_matmul", call.info, key, candidates,
                          lambda cfg: call.launch(cfg, False, False, _tuning.num_sms()))


class Plan:
    """Everything of a call that depends only on its key (shapes, dtype, layout, alignment, team,
    `return_a`), made on the first call: the configuration, the workspace and its addresses, the
    side streams, every kernel loaded and its arguments packed (`Bound`). `plan(a, b)` is a call:
    two allocations (C and the gathered A or an empty tensor), the launches, no host sync.
    Building it prepares every kernel of the call before any launches (see `_launch`)."""

    def __init__(self, a, b, b_t: bool, info: _group.TeamInfo, return_a: bool, key: tuple):
        W, me = info.size, info.rank
        m, K = a.shape
        N = b.shape[1]
        dtype, elt = a.dtype, a.element_size()
        dev = a.device
        self.W, self.m, self.return_a, self.dtype, self.dev = W, m, return_a, dtype, dev
        self.c_shape, self.c_dtype = (W * m, N), _checks.out_dtype(dtype)
        self.full_shape = (W * m, K) if return_a else (0,)
        self.index = dev.index
        # Without return_a the second output is an empty placeholder: one per plan, not per call.
        self.no_a = None if return_a else torch.empty((0,), dtype=dtype, device=dev)
        c = torch.empty(self.c_shape, dtype=self.c_dtype, device=dev)  # packed against, then dropped
        # Few rows (decode): the gathered A then one cuBLAS GEMM (`small_rows`); the fused kernel
        # otherwise. Decided from the shapes alone, so every PE decides alike.
        self.small = small_rows(W * m, dtype)
        if W == 1 and self.small:
            return
        if W == 1:
            self.dummy = _Dummy(dev)
            call = _Call(a, b, b_t, c, a.view(1, m, K), self.dummy, info)
            self.consumer = call.bind(_config(call, key), False, False, _tuning.num_sms(), varying=(0, 1, 2, 3))
            return
        shard_bytes = m * K * elt
        space = _space(info, dtype, W * shard_bytes)
        buf3d = space.view(dtype, (W, m, K))
        call = _Call(a, b, b_t, c, buf3d, space, info)
        cfg = None if self.small else _config(call, key)
        how = self.how = producer(shard_bytes)
        chunk_rows, n_chunks = chunking(m, config.ag_sm_ctas if how == "sm" else CE_CHUNKS)
        sms = _tuning.num_sms()
        if how == "sm":
            sms -= n_chunks * (W - 1)  # the producer's CTAs must find SMs while the GEMM runs
        my_pe = self.my_pe = info.pes[me]
        flags, busy, pes = space.flags, space.busy, _workspace.pes(info)
        self.sides = [] if self.small else _side_streams(W - 1)
        self.side_handles = [s.cuda_stream for s in self.sides]
        self.ready = torch.cuda.Event()
        row = K * elt
        # Per peer: its side stream, this PE's busy word for it, its PE, and the copy engine's
        # chunks as (destination address, offset in the shard, bytes, flag address).
        self.peers = []
        for j in range(1, W):
            p = (me + j) % W
            side = 0 if how == "sm" else j - 1
            chunks = tuple((buf3d[me, ci * chunk_rows].data_ptr(), ci * chunk_rows * row,
                            (min(m, (ci + 1) * chunk_rows) - ci * chunk_rows) * row,
                            flags[me * FLAG_STRIDE + ci].data_ptr()) for ci in range(n_chunks))
            if self.small:
                self.peers.append((None, None, busy[p].data_ptr(), info.pes[p], chunks))
                continue
            self.peers.append((self.sides[side], self.side_handles[side], busy[p].data_ptr(), info.pes[p], chunks))
        # The gathered A's source (step 5).
        self.buf3d = buf3d
        push_args = (a.view(torch.uint8), space.buf, flags, pes, me, W, m, row, chunk_rows, FLAG_STRIDE)
        release_args = (flags, space.counter, busy, pes, me, W, n_chunks, FLAG_STRIDE)
        # Loaded before the GEMM ever starts waiting for the peers: a load while it runs would wait
        # for it (`_launch`'s docstring), and the peers' GEMMs for this PE's producer.
        # Decode sizes with one chunk per shard (the usual case) and the SM producer: the busy
        # waits, the puts and the flag waits are one kernel (`ag_gather_kernel`).
        gather = self.small and how == "sm" and n_chunks == 1
        self.gather = _gather.bind((W,), (a.view(torch.uint8), space.buf, flags, busy, pes, me, W, my_pe, m, row,
                                          FLAG_STRIDE), (), (0,), num_warps=PUSH_WARPS) if gather else None
        self.push = _push.bind((n_chunks, W - 1), push_args, (), (0,), num_warps=PUSH_WARPS) \
            if how == "sm" and not gather else None
        self.release = _release.bind((1,), release_args, (RESET_BLOCK,), (), num_warps=4) \
            if return_a or self.small else None
        if self.small:
            # The other PEs' chunks that the GEMM waits for, and where the gathered A lies.
            self.waits = [flags[((me + j) % W) * FLAG_STRIDE + ci].data_ptr() for j in range(1, W)
                          for ci in range(n_chunks)]
            self.own, self.gathered = buf3d[me], buf3d.view(W * m, K)
            return
        self.consumer = call.bind(cfg, True, not return_a, sms, chunk_rows, n_chunks, varying=(0, 2, 3))
        if return_a:
            total, lo = W * shard_bytes, me * shard_bytes
            full = torch.empty(self.full_shape, dtype=dtype, device=dev)  # bound against, then dropped
            self.gathered_a = _gathered_a.bind((-(-total // GATHERED_A_BLOCK),),
                                               (a.view(torch.uint8), buf3d.view(torch.uint8), full.view(torch.uint8),
                                                lo, lo + shard_bytes, total), (GATHERED_A_BLOCK,), (0, 2),
                                               num_warps=4)

    def __call__(self, a, b):
        if self.W == 1 and self.small:
            return torch.mm(a, b), (a.clone() if self.return_a else self.no_a)
        c = torch.empty(self.c_shape, dtype=self.c_dtype, device=self.dev)
        full = self.no_a if self.no_a is not None else torch.empty(self.full_shape, dtype=self.dtype, device=self.dev)
        if self.W == 1:
            self.consumer.launch(_cuda.current_raw_stream(self.index), a, a, b, c)
            if self.return_a:
                full.copy_(a)
            return c, full
        if self.small:
            return self._small(a, b, c, full)
        handle = _cuda.current_raw_stream(self.index)
        main = _stream(handle, self.dev)
        ready = self.ready
        ready.record(main)
        self.consumer.launch(handle, a, b, c)
        a_ptr = a.data_ptr()
        my_pe, copy_engine = self.my_pe, self.how == "copy_engine"
        for side, side_handle, busy, pe, chunks in self.peers:
            side.wait_event(ready)
            # The peer has read what this PE put into its slot last time, before anything new goes there.
            _native.signal_wait_until_on_stream(busy, CMP_EQ, 0, side_handle)
            _native.signal_op_on_stream(busy, 1, SIGNAL_SET, my_pe, side_handle)
            if copy_engine:
                for dst, off, nbytes, flag in chunks:
                    _native.putmem_signal_on_stream(dst, a_ptr + off, nbytes, flag, 1, SIGNAL_SET, pe, side_handle,
                                                    False)
        if self.push is not None:
            self.push.launch(self.side_handles[0], a)
        for s in self.sides:
            main.wait_stream(s)
        if self.return_a:
            # Before the release: until then no peer writes into the buffer again.
            self.gathered_a.launch(handle, a, full)
        if self.release is not None:
            self.release.launch(handle)
        return c, full

    def _small(self, a, b, c, full):
        """A call at decode sizes, every step on the caller's stream (see the module docstring)."""
        handle = _cuda.current_raw_stream(self.index)
        if self.gather is not None:
            self.gather.launch(handle, a)
            torch.mm(self.gathered, b, out=c)
            if self.return_a:
                full.copy_(self.gathered)
            self.release.launch(handle)
            return c, full
        my_pe = self.my_pe
        for _, _, busy, _, _ in self.peers:
            _native.signal_wait_until_on_stream(busy, CMP_EQ, 0, handle)
            _native.signal_op_on_stream(busy, 1, SIGNAL_SET, my_pe, handle)
        self.own.copy_(a)
        if self.push is not None:
            self.push.launch(handle, a)
        else:
            a_ptr = a.data_ptr()
            for _, _, _, pe, chunks in self.peers:
                for dst, off, nbytes, flag in chunks:
                    _native.putmem_signal_on_stream(dst, a_ptr + off, nbytes, flag, 1, SIGNAL_SET, pe, handle, False)
        for flag in self.waits:
            _native.signal_wait_until_on_stream(flag, CMP_GE, 1, handle)
        torch.mm(self.gathered, b, out=c)
        if self.return_a:
            full.copy_(self.gathered)
        self.release.launch(handle)
        return c, full


class _Dummy:
    """The workspace arguments of a launch without communication (never read by the kernel)."""

    def __init__(self, dev):
        z = torch.zeros(1, dtype=torch.int64, device=dev)
        self.flags = self.busy = z
        self.counter = torch.zeros(1, dtype=torch.int32, device=dev)


def gemm_alone(a, b, info: _group.TeamInfo, key: tuple):
    """The consumer GEMM with its signals as if set: C from `a` (this PE's shard) and the buffer
    as the last call left it (benchmarks time this beside cuBLAS; the values of the other shards'
    rows are whatever the buffer holds)."""
    W = info.size
    m, K = a.shape
    b_t = _checks.weight_layout(b, "all_gather_matmul")
    c = torch.empty((W * m, b.shape[1]), dtype=_checks.out_dtype(a.dtype), device=a.device)
    if W == 1:
        buf3d, space = a.view(1, m, K), _Dummy(a.device)
    else:
        space = _space(info, a.dtype, W * m * K * a.element_size())
        buf3d = space.view(a.dtype, (W, m, K))
    call = _Call(a, b, b_t, c, buf3d, space, info)
    call.launch(_config(call, key), False, False, _tuning.num_sms())
    return c

