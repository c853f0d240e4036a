// Copy loops of the device library: how a group of threads moves bytes between global buffers.
//
// Kept free of the rest of the library (no state, no clang builtins; geometry and sync come from
// the caller, special registers from inline PTX) so that benchmarks/microbench/put_copy.cu can
// include it under nvcc and time exactly the code the library runs.
//
// Why the loops look like this: a store to a peer over NVLink is posted, so a copy's speed is
// set by how many bytes of LOCAL loads each SM keeps in flight (bandwidth x latency: ~400 GB/s x
// ~1 us ~ 400 KB over all CTAs). Three ways to keep more in flight, chosen with
// RSHMEM_COPY_STRATEGY (compile time; see rma_device.h for which calls use which):
//   1  registers: RSHMEM_COPY_UNROLL vectors (16 in the Triton bitcode, 4 here by default: see
//      below) loaded per thread before any is stored,
//      with ld.global/st.global and L1::no_allocate when both buffers are global.
//      Measured (put_copy, 2 x H200 NV18, 256 MiB, 8 CTAs of 128 threads = Triton's num_warps=4):
//      unroll 8: 209 GB/s, unroll 16: 308 GB/s (a first loop of 4 plain 16-byte struct copies,
//      which clang staged in local memory: 122 GB/s); with 256 threads 343 / 349;
//      with 512 threads all ~355. Unroll 16 costs ~64 registers while a put runs.
//   2  bulk (block scope only, else 1): one thread streams the body through shared memory with
//      Hopper bulk copies (cp.async.bulk global->shared tracked by mbarriers, then
//      cp.async.bulk shared->global in bulk groups), RSHMEM_BULK_STAGES x RSHMEM_BULK_CHUNK bytes
//      of static shared memory; the other threads copy the unaligned head and tail.
//      The static shared memory is added to every kernel that calls a block-scope put; a Triton
//      kernel whose own (dynamic) shared memory is <= 48 KiB but whose total exceeds 48 KiB fails
//      to launch, since Triton raises the launch limit only above 48 KiB of its own.
#ifndef RSHMEM_COPY_DEVICE_H
#define RSHMEM_COPY_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#ifndef RSHMEMI_DEV
#define RSHMEMI_DEV static __device__ __attribute__((always_inline)) inline
#endif

#ifndef RSHMEM_COPY_STRATEGY
#define RSHMEM_COPY_STRATEGY 1
#endif
#if RSHMEM_COPY_STRATEGY != 1 && RSHMEM_COPY_STRATEGY != 2
#error "RSHMEM_COPY_STRATEGY is 1 (registers) or 2 (Hopper bulk copies)"
#endif
// 4 by default, for the CUDA C++ headers and the Numba LTO-IR: the copy loop is inlined into the
// caller's kernel, and such a kernel carries no launch bound for ptxas to fit, so the loop itself
// must leave a 1024-thread block within 64 registers per thread (a block-scope put with 16 used
// 128, with 8 still 72, with 4 48: ptxas -v, sm_90). triton-lib/build.py builds the Triton
// bitcode with 16, which keeps more bytes in flight for small CTAs (strategy 1 above): Triton
// emits .maxntid from num_warps, so ptxas fits the registers to the launch size there.
#ifndef RSHMEM_COPY_UNROLL
#define RSHMEM_COPY_UNROLL 4
#endif
#ifndef RSHMEM_BULK_STAGES
#define RSHMEM_BULK_STAGES 4
#endif
#ifndef RSHMEM_BULK_CHUNK
#define RSHMEM_BULK_CHUNK 8192
#endif
// Below this many bytes a block-scope copy uses registers: the bulk pipeline's one thread
// waits a full load latency before its first store.
#ifndef RSHMEM_BULK_MIN_BYTES
#define RSHMEM_BULK_MIN_BYTES 65536
#endif

// Bulk copies are sm_90 instructions; the library's bitcode is built for sm_80 so that every
// supported GPU can run it (triton-lib/build.py).
#if RSHMEM_COPY_STRATEGY == 2 && defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "RSHMEM_COPY_STRATEGY=2 (Hopper bulk copies) needs sm_90; the library is built for sm_80"
#endif

#if RSHMEM_BULK_CHUNK % 16 != 0 || RSHMEM_BULK_STAGES < 2
#error "RSHMEM_BULK_CHUNK must be a multiple of 16 and RSHMEM_BULK_STAGES at least 2"
#endif

struct __attribute__((aligned(16))) rshmemi_v16 {
  uint64_t lo, hi;
};

// ---- one 16-byte access, with a cache hint ----
// Loads: GENERIC uses generic addressing (any state space); the others need global addresses.
// Every kind is inline PTX: as a C++ struct copy, clang splits a 16-byte access in two 8-byte
// ones and stages loaded values through local memory (the first implementation did).
// NC reads through the non-coherent path: only for data no one writes during the kernel.
enum rshmemi_ld_kind { RSHMEMI_LD_GENERIC = 0, RSHMEMI_LD_GLOBAL = 1, RSHMEMI_LD_NOALLOC = 2, RSHMEMI_LD_NC = 3 };
// Stores: CS marks the line evict-first (streaming).
enum rshmemi_st_kind { RSHMEMI_ST_GENERIC = 0, RSHMEMI_ST_GLOBAL = 1, RSHMEMI_ST_CS = 2 };

// The asm is volatile so it stays where it is written: after the group's leading barrier and
// in the order loads-then-stores chosen below.
template <int LD>
RSHMEMI_DEV rshmemi_v16 rshmemi_ld16(const rshmemi_v16* p) {
  rshmemi_v16 v;
  if constexpr (LD == RSHMEMI_LD_GENERIC) {
    asm volatile("ld.v2.u64 {%0, %1}, [%2];" : "=l"(v.lo), "=l"(v.hi) : "l"(p));
  } else if constexpr (LD == RSHMEMI_LD_GLOBAL) {
    asm volatile("ld.global.v2.u64 {%0, %1}, [%2];" : "=l"(v.lo), "=l"(v.hi) : "l"(p));
  } else if constexpr (LD == RSHMEMI_LD_NOALLOC) {
    asm volatile("ld.global.L1::no_allocate.v2.u64 {%0, %1}, [%2];" : "=l"(v.lo), "=l"(v.hi) : "l"(p));
  } else {
    asm volatile("ld.global.nc.L1::no_allocate.v2.u64 {%0, %1}, [%2];" : "=l"(v.lo), "=l"(v.hi) : "l"(p));
  }
  return v;
}

template <int ST>
RSHMEMI_DEV void rshmemi_st16(rshmemi_v16* p, rshmemi_v16 v) {
  if constexpr (ST == RSHMEMI_ST_GENERIC) {
    asm volatile("st.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(v.lo), "l"(v.hi) : "memory");
  } else if constexpr (ST == RSHMEMI_ST_GLOBAL) {
    asm volatile("st.global.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(v.lo), "l"(v.hi) : "memory");
  } else {
    asm volatile("st.global.cs.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(v.lo), "l"(v.hi) : "memory");
  }
}

RSHMEMI_DEV bool rshmemi_is_global(const void* p) {
  uint32_t r;
  asm("{ .reg .pred g; isspacep.global g, %1; selp.u32 %0, 1, 0, g; }" : "=r"(r) : "l"(p));
  return r != 0;
}

// ---- element loops: element i by thread (i mod nlanes) of the group ----

// The byte offsets of the U accesses of a round from its first (k * stride), computed once before
// the loop. The empty asm hides each value from the optimizer: without it NVVM (the compiler of
// Numba's LTO-IR) rebuilds the U addresses of every round as a chain a, a + stride, a + 2 stride,
// ... of dependent 64-bit adds, so a warp issues its loads one add latency apart, where clang's
// LLVM (Triton's bitcode) keeps them independent. With it both compile each address as one add
// to the round's base.
template <int U>
RSHMEMI_DEV void rshmemi_round_offsets(size_t (&off)[U], size_t stride) {
#pragma unroll
  for (int k = 0; k < U; ++k) {
    size_t o = (size_t)k * stride;
    asm("" : "+l"(o));
    off[k] = o;
  }
}

// U loads per thread before any store; the last, partial round is predicated, not a serial
// tail, so a short copy costs one load latency too.
template <int U, typename V>
RSHMEMI_DEV void rshmemi_copy_elems_unrolled(V* d, const V* s, size_t count, uint32_t lane, uint32_t nlanes) {
  size_t i = lane;
  const size_t step = nlanes;
  size_t off[U];
  rshmemi_round_offsets<U>(off, step * sizeof(V));
  for (; i + (U - 1) * step < count; i += U * step) {
    const char* si = (const char*)(s + i);
    char* di = (char*)(d + i);
    V v[U];
#pragma unroll
    for (int k = 0; k < U; ++k) v[k] = *(const V*)(si + off[k]);
#pragma unroll
    for (int k = 0; k < U; ++k) *(V*)(di + off[k]) = v[k];
  }
  if (i < count) {
    V v[U];
#pragma unroll
    for (int k = 0; k < U; ++k)
      if (i + k * step < count) v[k] = s[i + k * step];
#pragma unroll
    for (int k = 0; k < U; ++k)
      if (i + k * step < count) d[i + k * step] = v[k];
  }
}

// The same for 16-byte vectors with explicit state space and cache hints.
template <int U, int LD, int ST>
RSHMEMI_DEV void rshmemi_copy_v16_unrolled(rshmemi_v16* d, const rshmemi_v16* s, size_t count, uint32_t lane,
                                           uint32_t nlanes) {
  size_t i = lane;
  const size_t step = nlanes;
  size_t off[U];
  rshmemi_round_offsets<U>(off, step * sizeof(rshmemi_v16));
  for (; i + (U - 1) * step < count; i += U * step) {
    const char* si = (const char*)(s + i);
    char* di = (char*)(d + i);
    rshmemi_v16 v[U];
#pragma unroll
    for (int k = 0; k < U; ++k) v[k] = rshmemi_ld16<LD>((const rshmemi_v16*)(si + off[k]));
#pragma unroll
    for (int k = 0; k < U; ++k) rshmemi_st16<ST>((rshmemi_v16*)(di + off[k]), v[k]);
  }
  if (i < count) {
    rshmemi_v16 v[U];
#pragma unroll
    for (int k = 0; k < U; ++k)
      if (i + k * step < count) v[k] = rshmemi_ld16<LD>(s + i + k * step);
#pragma unroll
    for (int k = 0; k < U; ++k)
      if (i + k * step < count) rshmemi_st16<ST>(d + i + k * step, v[k]);
  }
}

// ---- whole copies: n bytes, any alignment, called by every thread of a group ----

// Strategy 1: U vectors of the widest access the relative alignment allows in flight per thread; global addresses use ld.global with
// L1::no_allocate (the data is read once) and st.global. The head and tail (< w bytes each)
// are spread over the lanes, one byte each.
template <int U, int LD = RSHMEMI_LD_NOALLOC, int ST = RSHMEMI_ST_GLOBAL>
RSHMEMI_DEV void rshmemi_copy_unrolled(void* dst, const void* src, size_t n, uint32_t lane, uint32_t nlanes) {
  char* d = (char*)dst;
  const char* s = (const char*)src;
  const uintptr_t diff = (uintptr_t)d ^ (uintptr_t)s;
  const size_t w = (diff & 15) == 0 ? 16 : (diff & 7) == 0 ? 8 : (diff & 3) == 0 ? 4 : 1;
  size_t head = (w - ((uintptr_t)d & (w - 1))) & (w - 1);
  if (head > n) head = n;
  const size_t nv = (n - head) / w;
  const size_t done = head + nv * w;
  // Head and tail first, by the lanes that come last in the vector loop's partial round.
  for (size_t j = lane; j < head + (n - done); j += nlanes) {
    const size_t b = j < head ? j : done + (j - head);
    d[b] = s[b];
  }
  char* dv = d + head;
  const char* sv = s + head;
  switch (w) {
    case 16:
      if (rshmemi_is_global(dv) && rshmemi_is_global(sv))
        rshmemi_copy_v16_unrolled<U, LD, ST>((rshmemi_v16*)dv, (const rshmemi_v16*)sv, nv, lane, nlanes);
      else
        rshmemi_copy_v16_unrolled<U, RSHMEMI_LD_GENERIC, RSHMEMI_ST_GENERIC>((rshmemi_v16*)dv, (const rshmemi_v16*)sv,
                                                                             nv, lane, nlanes);
      break;
    case 8: rshmemi_copy_elems_unrolled<U>((uint64_t*)dv, (const uint64_t*)sv, nv, lane, nlanes); break;
    case 4: rshmemi_copy_elems_unrolled<U>((uint32_t*)dv, (const uint32_t*)sv, nv, lane, nlanes); break;
    default: rshmemi_copy_elems_unrolled<U>((uint8_t*)dv, (const uint8_t*)sv, nv, lane, nlanes); break;
  }
}

// Strategy 1 for a group of any size: U vectors per thread up to 256 threads, fewer above, so
// that a CTA keeps about as many bytes in flight (nlanes x U x 16) at every size. A CTA of 1024
// threads has 64 registers per thread at most: with U = 16 the loop spilled to local memory
// (ptxas: 4.3 KB of spill stores) and an 8-CTA put ran at a third of the 256-thread speed.
// The branch is on a runtime value; ptxas spills only inside the branches that need it.
template <int U>
RSHMEMI_DEV void rshmemi_copy_unrolled_scaled(void* dst, const void* src, size_t n, uint32_t lane,
                                              uint32_t nlanes) {
  constexpr int U2 = U / 2 > 0 ? U / 2 : 1;
  constexpr int U4 = U / 4 > 0 ? U / 4 : 1;
  // At 4 or fewer one loop serves every size (1024 threads x 4 x 16 bytes in flight is plenty),
  // and the kernel carries one copy loop instead of three.
  if constexpr (U <= 4) {
    rshmemi_copy_unrolled<U>(dst, src, n, lane, nlanes);
    return;
  }
  if (nlanes > 512)
    rshmemi_copy_unrolled<U4>(dst, src, n, lane, nlanes);
  else if (nlanes > 256)
    rshmemi_copy_unrolled<U2>(dst, src, n, lane, nlanes);
  else
    rshmemi_copy_unrolled<U>(dst, src, n, lane, nlanes);
}

// ---- bulk copies (sm_90): one thread, shared-memory stages, mbarriers ----

RSHMEMI_DEV uint32_t rshmemi_smem_addr(const void* p) {
  uint64_t a;
  asm("cvta.to.shared.u64 %0, %1;" : "=l"(a) : "l"(p));
  return (uint32_t)a;
}
RSHMEMI_DEV uint64_t rshmemi_global_addr(const void* p) {
  uint64_t a;
  asm("cvta.to.global.u64 %0, %1;" : "=l"(a) : "l"(p));
  return a;
}

// Orders this thread's earlier generic-proxy accesses to global memory before later
// async-proxy ones (bulk copies) and the reverse. Every thread whose stores a bulk copy reads
// must run it before the barrier that precedes the copy.
RSHMEMI_DEV void rshmemi_fence_proxy_async_global() { asm volatile("fence.proxy.async.global;" ::: "memory"); }

RSHMEMI_DEV void rshmemi_mbar_init(uint32_t bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar) : "memory");
}
RSHMEMI_DEV void rshmemi_mbar_inval(uint32_t bar) {
  asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
}
// Arrives (the one expected arrival) and expects `bytes` of transactions in this phase.
RSHMEMI_DEV void rshmemi_mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  uint64_t state;
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 %0, [%1], %2;" : "=l"(state) : "r"(bar), "r"(bytes) : "memory");
  (void)state;
}
RSHMEMI_DEV void rshmemi_mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  do {
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  } while (done == 0);
}
// global -> this CTA's shared memory, completing `bytes` transactions on `bar`.
RSHMEMI_DEV void rshmemi_bulk_load(uint32_t smem, uint64_t gsrc, uint32_t bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               ::"r"(smem), "l"(gsrc), "r"(bytes), "r"(bar) : "memory");
}
// shared -> global (a peer's memory included), in the current bulk group.
RSHMEMI_DEV void rshmemi_bulk_store(uint64_t gdst, uint32_t smem, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(gdst), "r"(smem), "r"(bytes) : "memory");
}
RSHMEMI_DEV void rshmemi_bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
// Waits until at most N bulk groups still read their shared source.
template <int N>
RSHMEMI_DEV void rshmemi_bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory"); }
// Waits until every bulk group of this thread is complete (its writes done).
RSHMEMI_DEV void rshmemi_bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }

// One thread copies n bytes (16-byte aligned global addresses, n a multiple of 16) through
// STAGES buffers of CHUNK bytes at `buf` (shared, 16-byte aligned) tracked by the mbarriers at
// `bars` (shared, STAGES of them). Up to STAGES-1 loads and the stores are in flight at once.
// On return every byte is written (visible to this thread) and buf/bars are free again.
template <int STAGES, int CHUNK>
RSHMEMI_DEV void rshmemi_bulk_copy_thread(void* dst, const void* src, size_t n, void* buf, uint64_t* bars) {
  const uint64_t gd = rshmemi_global_addr(dst), gs = rshmemi_global_addr(src);
  const uint32_t sbuf = rshmemi_smem_addr(buf), sbar = rshmemi_smem_addr(bars);
  const size_t nchunks = (n + CHUNK - 1) / CHUNK;
  for (int k = 0; k < STAGES; ++k) rshmemi_mbar_init(sbar + 8 * k);
  // The async proxy (the bulk copy unit) must see the initialized barriers.
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  const size_t first = nchunks < (size_t)STAGES ? nchunks : (size_t)STAGES;
  for (size_t k = 0; k < first; ++k) {
    const uint32_t bytes = (uint32_t)(n - k * CHUNK < (size_t)CHUNK ? n - k * CHUNK : CHUNK);
    rshmemi_mbar_arrive_expect_tx(sbar + 8 * (uint32_t)k, bytes);
    rshmemi_bulk_load(sbuf + (uint32_t)k * CHUNK, gs + k * CHUNK, bytes, sbar + 8 * (uint32_t)k);
  }
  for (size_t k = 0; k < nchunks; ++k) {
    const uint32_t st = (uint32_t)(k % STAGES);
    const uint32_t bytes = (uint32_t)(n - k * CHUNK < (size_t)CHUNK ? n - k * CHUNK : CHUNK);
    rshmemi_mbar_wait(sbar + 8 * st, (uint32_t)(k / STAGES) & 1);
    rshmemi_bulk_store(gd + k * CHUNK, sbuf + st * CHUNK, bytes);
    rshmemi_bulk_commit();
    // Refill the stage the previous store read (that store may still be writing remotely).
    if (k >= 1 && k - 1 + STAGES < nchunks) {
      const size_t j = k - 1 + STAGES;
      const uint32_t sj = (uint32_t)(j % STAGES);
      const uint32_t bj = (uint32_t)(n - j * CHUNK < (size_t)CHUNK ? n - j * CHUNK : CHUNK);
      rshmemi_bulk_wait_read<1>();
      rshmemi_mbar_arrive_expect_tx(sbar + 8 * sj, bj);
      rshmemi_bulk_load(sbuf + sj * CHUNK, gs + j * CHUNK, bj, sbar + 8 * sj);
    }
  }
  rshmemi_bulk_wait_all();
  // The bulk writes before this thread's later generic accesses (the signal, the fences).
  rshmemi_fence_proxy_async_global();
  for (int k = 0; k < STAGES; ++k) rshmemi_mbar_inval(sbar + 8 * k);
}

// Block scope, strategy 2: thread `lane` 0 moves the 16-byte-aligned body with bulk copies
// through `buf`/`bars`, the other threads copy the head and tail. Falls back to the register
// loop when the buffers are not both global, not congruent modulo 16, or short. Every thread
// of the block calls it; the caller's barriers bracket it, and every thread has run
// rshmemi_fence_proxy_async_global() before the leading one.
template <int STAGES, int CHUNK, int U>
RSHMEMI_DEV void rshmemi_copy_bulk_block(void* dst, const void* src, size_t n, uint32_t lane, uint32_t nlanes,
                                         void* buf, uint64_t* bars) {
  char* d = (char*)dst;
  const char* s = (const char*)src;
  if (n < (size_t)RSHMEM_BULK_MIN_BYTES || (((uintptr_t)d ^ (uintptr_t)s) & 15) != 0 || !rshmemi_is_global(d) ||
      !rshmemi_is_global(s)) {
    rshmemi_copy_unrolled_scaled<U>(dst, src, n, lane, nlanes);
    return;
  }
  const size_t head = (16 - ((uintptr_t)d & 15)) & 15;  // n >= RSHMEM_BULK_MIN_BYTES > 15
  const size_t body = (n - head) & ~(size_t)15;
  const size_t tail = n - head - body;
  if (lane == 0) {
    rshmemi_bulk_copy_thread<STAGES, CHUNK>(d + head, s + head, body, buf, bars);
  }
  // Head and tail bytes: by lanes 1.. (or lane 0 alone in a one-thread block).
  const uint32_t helpers = nlanes > 1 ? nlanes - 1 : 1;
  const uint32_t me = nlanes > 1 ? lane - 1 : 0;
  if (nlanes == 1 || lane != 0) {
    for (size_t j = me; j < head + tail; j += helpers) {
      const size_t b = j < head ? j : head + body + (j - head);
      d[b] = s[b];
    }
  }
}

#endif  // RSHMEM_COPY_DEVICE_H
