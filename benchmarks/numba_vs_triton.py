"""rshmem.numba beside rshmem.triton: the same kernels written in Numba-CUDA and in Triton,
calling the same device library (Numba links it as LTO-IR, Triton as bitcode), timed in one run.

    python -m benchmarks.numba_vs_triton [--out bench-out/numba_vs_triton.json]      # 1 GPU, 1 PE
    torchrun --nproc-per-node 2 -m benchmarks.numba_vs_triton                         # 2 GPUs
    python -m benchmarks.numba_vs_triton --ptx                                        # no GPU: PTX only

Kernels:
- ``put_block``: CTA i puts its slice of a uint8 buffer with ``put_block`` / ``putmem_block``
  (sizes 64 KiB .. 256 MiB, 8 / 32 / 132 CTAs x 256 / 1024 threads). PE 0 puts to PE 1; alone,
  into its own heap (the copy loop's speed, which is what differs between the front ends).
- ``ring``: a chunked ring all-reduce of float32, the same algorithm in both (per CTA and chunk:
  wait for the left PE's signal, add, ``put_signal_nbi_block`` to the right; then the sums go
  around once more), a barrier on the stream before each call. Alone it degenerates to chunked
  put-with-signal into its own heap.

For each kernel the PTX of both front ends is summarized (instructions, loads from memory and
how many of them the PTX marks global, 16-byte accesses, copy-loop loads whose address waits on
the previous one's, barriers, calls, registers), so a gap over 10% can be read from the code;
``--ptx`` prints these summaries without a GPU.

Each kernel has two times per call, medians over rounds: the GPU's (CUDA events around calls
queued behind a spin kernel, so the calls run back to back whatever the host takes to launch
them) and the host's (how long one call takes to enqueue: Numba's dispatcher or Triton's
launcher, plus the ring's barrier). On a GPU shared by several PEs the times mean nothing (the
script says so).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import time
from pathlib import Path

import numpy as np
import torch
import triton
import triton.language as tl
from numba import cuda

import rshmem
import rshmem.numba as nshm
import rshmem.torch as rtorch
import rshmem.triton as rt
from rshmem.triton import libshmem_device as tshm
from rshmem.triton.language import syncthreads, tid

KiB, MiB = 1 << 10, 1 << 20


# ------------------------------------------------------------------------------ the kernels


def _put_block(dst, src, nbytes, slice_bytes, pe):
    start = cuda.blockIdx.x * slice_bytes
    end = min(nbytes, start + slice_bytes)
    nshm.put_block(dst[start:end], src[start:end], pe)


put_block_numba = nshm.jit(_put_block)
# A CTA of 1024 threads has 64 registers per thread at most (65536 per SM): Numba does not cap a
# kernel by its launch size, and without the cap the 1024-thread launches fail (out of
# resources). Capping every launch would make the 256-thread ones spill.
put_block_numba_1024 = nshm.jit(_put_block, max_registers=64)


@rt.jit(do_not_specialize=["nbytes", "slice_bytes", "pe"])
def put_block_triton(dst, src, nbytes, slice_bytes, pe):
    start = tl.program_id(0).to(tl.int64) * slice_bytes
    n = tl.minimum(nbytes - start, slice_bytes)
    tshm.putmem_block(dst + start, src + start, n, pe)


@nshm.jit(max_registers=128)  # launched with 512 threads: 128 registers each at most
def ring_numba(dst, src, nelems, signal, chunk, base):
    me = nshm.my_pe()
    npes = nshm.n_pes()
    right = (me + 1) % npes
    per_cta = nelems // cuda.gridDim.x
    first = cuda.blockIdx.x * per_cta
    word = signal[cuda.blockIdx.x:cuda.blockIdx.x + 1]
    chunks = per_cta // chunk
    for c in range(chunks):
        lo = first + c * chunk
        acc = dst[lo:lo + chunk]
        mine = src[lo:lo + chunk]
        if me > 0:
            if cuda.threadIdx.x == 0:
                nshm.signal_wait(word, nshm.CMP_GE, base + c + 1)
            cuda.syncthreads()
            for i in range(cuda.threadIdx.x, chunk, cuda.blockDim.x):
                acc[i] += mine[i]
        if me == 0:
            nshm.put_signal_nbi_block(acc, mine, word, 1, nshm.SIGNAL_ADD, right)
        else:
            nshm.put_signal_nbi_block(acc, acc, word, 1, nshm.SIGNAL_ADD, right)
    for c in range(chunks):
        lo = first + c * chunk
        acc = dst[lo:lo + chunk]
        if me < npes - 1:
            if cuda.threadIdx.x == 0:
                nshm.signal_wait(word, nshm.CMP_GE, base + (c + 1 if me == 0 else chunks + c + 1))
            cuda.syncthreads()
        if me < npes - 2:
            nshm.put_signal_nbi_block(acc, acc, word, 1, nshm.SIGNAL_ADD, right)


@rt.jit(do_not_specialize=["nelems", "chunk", "base"])
def ring_triton(dst, src, nelems, signal, chunk, base, BLOCK: tl.constexpr):
    me = tshm.my_pe()
    npes = tshm.n_pes()
    right = (me + 1) % npes
    per_cta = nelems // tl.num_programs(0)
    first = tl.program_id(0) * per_cta
    word = signal + tl.program_id(0)
    chunks = per_cta // chunk
    offs = tl.arange(0, BLOCK)
    for c in range(chunks):
        lo = first + c * chunk
        if me > 0:
            if tid(0) == 0:
                tshm.signal_wait_until(word, tshm.CMP_GE, (base + c + 1).to(tl.uint64))
            syncthreads()
            for t in range(0, chunk, BLOCK):
                m = t + offs < chunk
                a = tl.load(dst + lo + t + offs, mask=m)
                tl.store(dst + lo + t + offs, a + tl.load(src + lo + t + offs, mask=m), mask=m)
        if me == 0:
            tshm.putmem_signal_nbi_block(dst + lo, src + lo, chunk * 4, word, 1, tshm.SIGNAL_ADD, right)
        else:
            tshm.putmem_signal_nbi_block(dst + lo, dst + lo, chunk * 4, word, 1, tshm.SIGNAL_ADD, right)
    for c in range(chunks):
        lo = first + c * chunk
        if me < npes - 1:
            if tid(0) == 0:
                seen = tl.where(me == 0, c + 1, chunks + c + 1)
                tshm.signal_wait_until(word, tshm.CMP_GE, (base + seen).to(tl.uint64))
            syncthreads()
        if me < npes - 2:
            tshm.putmem_signal_nbi_block(dst + lo, dst + lo, chunk * 4, word, 1, tshm.SIGNAL_ADD, right)


# ------------------------------------------------------------------------------------ timing


_SPIN_PER_S: list = []  # cycles of torch.cuda._sleep per second on this GPU, measured once


def _spin_cycles_per_second() -> float:
    if not _SPIN_PER_S:
        torch.cuda._sleep(1 << 16)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.cuda._sleep(1 << 24)
        end.record()
        end.synchronize()
        _SPIN_PER_S.append((1 << 24) / (start.elapsed_time(end) / 1e3))
    return _SPIN_PER_S[0]


def timed(fn, reps: int, rounds: int = 7) -> dict:
    """GPU and host seconds per call of `fn`, medians over `rounds` rounds of `reps` calls.

    GPU time: the calls of a round are enqueued behind a spin kernel (torch.cuda._sleep) twice
    as long as the host took to enqueue a round, so the GPU runs them back to back and the
    events time the kernels, not the host's launch path between them (the first measurements
    had Numba's launch cost inside its GPU times). `ahead` is the share of rounds whose last
    call was in the queue before the spin ended (1.0 unless the host stalled). Host time: how
    long enqueuing one call took. Every PE makes the same number of calls, whatever it measures.
    """
    fn()
    torch.cuda.synchronize()
    rshmem.barrier_all()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    enqueue = time.perf_counter() - t0
    torch.cuda.synchronize()
    rshmem.barrier_all()
    spin = int(max(2 * enqueue, 1e-4) * _spin_cycles_per_second())
    gpu, host, ahead = [], [], 0
    for _ in range(rounds):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(spin)
        start.record()
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        host.append((time.perf_counter() - t0) / reps)
        ahead += not start.query()  # the GPU was still spinning when the last call went in
        end.record()
        end.synchronize()
        gpu.append(start.elapsed_time(end) / 1e3 / reps)
        rshmem.barrier_all()
    return {"gpu_s": statistics.median(gpu), "host_s": statistics.median(host), "ahead": ahead / rounds}


_VEC16_LOAD = re.compile(r"ld(?:\.\S+)?\.(?:v2\.[ub]64|v4\.[ub]32)\s+\{[^}]*\},\s*\[(%rd\d+)\]")
_ADD64 = re.compile(r"add\.s64\s+(%rd\d+),\s*(%rd\d+),\s*(%rd\d+);")
_LABEL = re.compile(r"(\$L__\w+):")
_BRANCH = re.compile(r"(?:@!?%p\d+\s+)?bra(?:\.uni)?\s+(\$L__\w+);")


def chained_vec16_loads(ptx: str) -> int:
    """16-byte loads in single-block loops whose address is an add to the previous load's
    address (add.s64 a_k, a_k-1, stride): the loads of a round then issue one dependent add
    apart. The device library's copy loops compute each address from the round's base (0)."""
    chained = 0
    label, block = None, []
    for line in (ln.strip() for ln in ptx.splitlines()):
        m = _LABEL.match(line)
        if m:
            label, block = m.group(1), []
            continue
        block.append(line)
        m = _BRANCH.match(line)
        if m and m.group(1) == label:  # the end of a loop that is one block
            defs, seen = {}, set()
            for ln in block:
                add = _ADD64.match(ln)
                if add:
                    defs[add.group(1)] = (add.group(2), add.group(3))
                load = _VEC16_LOAD.match(ln)
                if load:
                    chained += any(op in seen for op in defs.get(load.group(1), ()))
                    seen.add(load.group(1))
            label, block = None, []
    return chained


_BARRIER = re.compile(r"(bar|barrier)\.sync")


def before_first_barrier(instr: list) -> int:
    """Instructions (parameter loads aside) ahead of the first CTA barrier in program order. In a
    kernel that calls one block-scope put, that is the kernel's own code before the put's leading
    barrier: every warp of the CTA runs it before any warp reaches the put's device-state loads.
    (In a kernel with branches ahead of its first barrier it counts the branches not taken too.)"""
    n = 0
    for ln in instr:
        if _BARRIER.match(ln):
            return n
        n += not ln.startswith("ld.param")
    return n


def ptx_summary(ptx: str) -> dict:
    """What a gap between two kernels doing the same work is read from.

    ``ld_memory`` counts every load from memory (global or generic addressing: a generic load of
    a global pointer reads global memory too); ``ld_global`` those the PTX marks global. Numba's
    NVVM marks the loads from its arrays global where Triton leaves them generic, so compare
    ``ld_memory`` between the two, not ``ld_global``. ``before_first_barrier``: see that function
    (Numba's slices of the arrays handed to a put run there: docs/numba.md, Speed).
    """
    body = [ln.strip() for ln in ptx.splitlines() if ln.strip() and not ln.strip().startswith(("//", "."))]
    instr = [ln for ln in body if not ln.endswith(":") and ln not in ("{", "}", ")")]
    count = lambda pat: sum(1 for ln in instr if re.match(pat, ln))  # noqa: E731
    regs = sum(int(n) for n in re.findall(r"\.reg \.\w+ \s*%\w+<(\d+)>", ptx))
    return {
        "instructions": len(instr),
        "before_first_barrier": before_first_barrier(instr),
        "ld_memory": count(r"ld\.(?!\S*\b(param|shared|local|const)\b)"),
        "ld_global": count(r"ld\.global"), "st_global": count(r"st\.global"),
        # the copy loops' 16-byte accesses, global and generic (inline PTX of the library: v2.u64 / v4.b32)
        "vec16_loads": count(r"ld(\.\S+)?\.(v2\.[ub]64|v4\.[ub]32)"), "vec16_stores": count(r"st(\.\S+)?\.(v2\.[ub]64|v4\.[ub]32)"),
        "chained_vec16_loads": chained_vec16_loads(ptx),
        "bulk_copies": count(r"cp\.async\.bulk"),
        "ld_nc": count(r"ld\.global\.nc"), "bar_sync": count(_BARRIER.pattern),
        "release_acquire": count(r"\S+\.(release|acquire)\.sys"), "calls": count(r"call"),
        "registers_declared": regs,
    }


# Argument types of the kernels as the runs below call them (Python ints are int64 in Numba).
def _numba_sigs():
    from numba import types  # noqa: PLC0415

    u8, f32, i64 = (types.Array(t, 1, "C") for t in (types.uint8, types.float32, types.int64))
    return {"put_block": (_put_block, (u8, u8, types.int64, types.int64, types.int64)),
            "ring": (ring_numba.py_func, (f32, f32, types.int64, i64, types.int64, types.int64))}


_TRITON_SIGS = {
    "put_block": (put_block_triton, {"dst": "*u8", "src": "*u8", "nbytes": "i64", "slice_bytes": "i64", "pe": "i32"},
                  {}, 8),
    "ring": (ring_triton, {"dst": "*fp32", "src": "*fp32", "nelems": "i32", "signal": "*i64", "chunk": "i32",
                           "base": "i32", "BLOCK": "constexpr"}, {"BLOCK": 1024}, 16),
}


def ptx_without_gpu(name: str, cc: tuple = (9, 0), triton_bitcode: str | None = None) -> dict:
    """{"numba": PTX, "triton": PTX} of kernel `name` ("put_block" or "ring") for compute
    capability `cc`, compiled here without a GPU (Numba: NVVM + nvJitLink with the LTO-IR;
    Triton: triton.compile with the bitcode, or `triton_bitcode`), as the runs below launch them
    (256 / 512 threads)."""
    from triton.backends.compiler import GPUTarget  # noqa: PLC0415
    from triton.compiler import ASTSource  # noqa: PLC0415

    pyfunc, sig = _numba_sigs()[name]
    fn, signature, constexprs, num_warps = _TRITON_SIGS[name]
    compiled = triton.compile(ASTSource(fn=fn, signature=signature, constexprs=constexprs),
                              target=GPUTarget("cuda", cc[0] * 10 + cc[1], 32),
                              options={"extern_libs": tuple({**rt.extern_libs(), **(
                                  {"libshmem_device": triton_bitcode} if triton_bitcode else {})}.items()),
                                  "num_warps": num_warps})
    return {"numba": nshm.compile_ptx(pyfunc, sig, cc=cc), "triton": compiled.asm["ptx"]}


# --------------------------------------------------------------------------------- the runs


def put_runs(me, npes, stream, rec, sizes, configs):
    peer = 1 if npes > 1 else 0
    top = max(sizes)
    src = rtorch.create_symmetric_tensor((top,), torch.uint8)
    dst = rtorch.create_symmetric_tensor((top,), torch.uint8)
    src.copy_(torch.arange(top, device=src.device) % 251)  # the same bytes on every PE
    nsrc, ndst = cuda.as_cuda_array(src), cuda.as_cuda_array(dst)
    nstream = cuda.external_stream(stream.cuda_stream)
    rows = []
    for nbytes in sizes:
        for ctas, threads in configs:
            slice_ = -(-(-(-nbytes // ctas)) // 16) * 16
            grid = -(-nbytes // slice_)
            reps = max(1, min(200, (64 * MiB) // nbytes))
            active = me == 0

            def numba_call():
                if active:
                    kernel = put_block_numba_1024 if threads > 512 else put_block_numba
                    kernel[grid, threads, nstream](ndst, nsrc, nbytes, slice_, peer)

            def triton_call():
                if active:
                    put_block_triton[(grid,)](dst, src, nbytes, slice_, peer, num_warps=threads // 32)

            tn, tt = timed(numba_call, reps), timed(triton_call, reps)
            t_n, t_t = tn["gpu_s"], tt["gpu_s"]
            row = {"bytes": nbytes, "ctas": grid, "threads": threads, "numba_GBps": nbytes / t_n / 1e9,
                   "triton_GBps": nbytes / t_t / 1e9, "numba_over_triton": t_t / t_n,
                   "numba_launch_us": tn["host_s"] * 1e6, "triton_launch_us": tt["host_s"] * 1e6,
                   "queued_ahead": min(tn["ahead"], tt["ahead"])}
            rows.append(row)
            if me == 0:
                print(f"put_block {nbytes // KiB:>8} KiB {grid:>4} CTAs x {threads:>4}: numba {row['numba_GBps']:8.1f} "
                      f"GB/s  triton {row['triton_GBps']:8.1f} GB/s  ratio {row['numba_over_triton']:.3f}  launch (host) "
                      f"numba {row['numba_launch_us']:.1f} us triton {row['triton_launch_us']:.1f} us", flush=True)
    torch.cuda.synchronize()
    rshmem.barrier_all()
    if me == peer:  # the last run put all `top` bytes into the receiver's dst
        rec["put_block_correct"] = bool(torch.equal(dst, src))
        print(f"put_block result on PE {me}: {'correct' if rec['put_block_correct'] else 'WRONG'}", flush=True)
    rec["put_block"] = rows
    rec["ptx"]["put_block"] = {
        "numba": ptx_summary(next(iter(put_block_numba.inspect_lto_ptx().values()))),
        "triton": ptx_summary(_triton_ptx(put_block_triton)),
    }
    rshmem.barrier_all()
    rtorch.free_tensor(dst)
    rtorch.free_tensor(src)


def ring_runs(me, npes, stream, rec, sizes, ctas, chunks, threads):
    rows = []
    nstream = cuda.external_stream(stream.cuda_stream)
    for n in sizes:
        src = rtorch.create_symmetric_tensor((n,), torch.float32)
        dst = rtorch.create_symmetric_tensor((n,), torch.float32)
        sig = rtorch.create_symmetric_tensor((ctas,), torch.int64)
        src.fill_(me + 1)
        nsrc, ndst, nsig = cuda.as_cuda_array(src), cuda.as_cuda_array(dst), cuda.as_cuda_array(sig)
        chunk = n // ctas // chunks
        per_call = chunks if me in (0, npes - 1) else 2 * chunks  # signals this PE receives per call
        calls = {"numba": 0, "triton": 0}
        # Each front end keeps its own signal count; the words are zeroed between the two.

        def numba_call():
            base = calls["numba"] * per_call
            calls["numba"] += 1
            rtorch.barrier_all_on_stream(stream)
            ring_numba[ctas, threads, nstream](ndst, nsrc, n, nsig, chunk, base)

        def triton_call():
            base = calls["triton"] * per_call
            calls["triton"] += 1
            rtorch.barrier_all_on_stream(stream)
            ring_triton[(ctas,)](dst, src, n, sig, chunk, base, BLOCK=1024, num_warps=threads // 32)

        reps = 10
        tn = timed(numba_call, reps)
        t_n = tn["gpu_s"]
        ok_n = bool((dst == npes * (npes + 1) / 2).all())
        torch.cuda.synchronize()
        rshmem.barrier_all()
        sig.zero_()
        torch.cuda.synchronize()
        rshmem.barrier_all()
        tt = timed(triton_call, reps)
        t_t = tt["gpu_s"]
        ok_t = bool((dst == npes * (npes + 1) / 2).all())
        row = {"elems": n, "ctas": ctas, "chunks": chunks, "threads": threads, "numba_ms": t_n * 1e3,
               "triton_ms": t_t * 1e3, "numba_over_triton": t_t / t_n, "numba_correct": ok_n, "triton_correct": ok_t,
               "numba_launch_us": tn["host_s"] * 1e6, "triton_launch_us": tt["host_s"] * 1e6,
               "queued_ahead": min(tn["ahead"], tt["ahead"])}
        rows.append(row)
        if me == 0:
            print(f"ring {n * 4 // KiB:>8} KiB {ctas} CTAs: numba {row['numba_ms']:.3f} ms ({'ok' if ok_n else 'WRONG'})"
                  f"  triton {row['triton_ms']:.3f} ms ({'ok' if ok_t else 'WRONG'})  ratio {row['numba_over_triton']:.3f}"
                  f"  launch+barrier (host) numba {row['numba_launch_us']:.1f} us triton {row['triton_launch_us']:.1f} us",
                  flush=True)
        rshmem.barrier_all()
        for t in (sig, dst, src):
            rtorch.free_tensor(t)
    rec["ring"] = rows
    rec["ptx"]["ring"] = {
        "numba": ptx_summary(next(iter(ring_numba.inspect_lto_ptx().values()))),
        "triton": ptx_summary(_triton_ptx(ring_triton)),
    }


def _triton_ptx(kernel) -> str:
    """The PTX of the (single) compiled specialization of a Triton kernel."""
    for cache in kernel.device_caches.values():
        for compiled in cache[0].values():
            return compiled.asm["ptx"]
    raise RuntimeError(f"{kernel.fn.__name__} was not compiled")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, default=Path("bench-out/numba_vs_triton.json"))
    p.add_argument("--quick", action="store_true", help="fewer sizes and configs")
    p.add_argument("--ptx", action="store_true", help="only compile both kernels for sm_90 and summarize their PTX "
                   "(no GPU needed)")
    args = p.parse_args()
    if args.ptx:
        for name in ("put_block", "ring"):
            both = {fe: ptx_summary(text) for fe, text in ptx_without_gpu(name).items()}
            print(f"PTX {name}: numba {both['numba']}\n{' ' * (5 + len(name))}triton {both['triton']}", flush=True)
        return
    if "WORLD_SIZE" in os.environ and torch.cuda.device_count() < int(os.environ.get("LOCAL_WORLD_SIZE", "1")):
        os.environ.setdefault("RSHMEM_ALLOW_SHARED_GPU", "1")
    torch.cuda.set_device(rtorch.device())
    rshmem.init(backend="cuda")
    cuda.select_device(torch.cuda.current_device())
    me, npes = rshmem.my_pe(), rshmem.n_pes()
    shared = rtorch.gpu_shared()
    stream = torch.cuda.current_stream()
    rec = {"pes": npes, "gpu": torch.cuda.get_device_name(), "gpu_shared": shared, "ptx": {},
           "note": "one PE: puts into its own heap, ring degenerate" if npes == 1 else ""}
    if me == 0 and shared:
        print("note: PEs share one GPU: the times below mean nothing for speed", flush=True)
    sizes = [64 * KiB, MiB, 16 * MiB, 256 * MiB] if not args.quick else [MiB, 64 * MiB]
    configs = [(8, 256), (8, 1024), (32, 256), (132, 1024)] if not args.quick else [(8, 1024), (32, 256)]
    put_runs(me, npes, stream, rec, sizes, configs)
    ring_runs(me, npes, stream, rec, [1 << 18, 1 << 22] if not args.quick else [1 << 20], ctas=16, chunks=4,
              threads=512)
    if me == 0:
        for name, both in rec["ptx"].items():
            print(f"PTX {name}: numba {both['numba']}\n{' ' * (5 + len(name))}triton {both['triton']}")
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(rec, indent=1))
        print(f"wrote {args.out}")
    rshmem.barrier_all()
    rshmem.finalize()


if __name__ == "__main__":
    main()
