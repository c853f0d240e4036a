// Data movement by load/store (addresses translated by peer_device.h).
//
// Copies are weak loads and stores, 16 bytes per access when the source and destination are
// congruent modulo 16 (else 8, 4, 1), spread over the threads of the calling group (copy loops:
// copy_device.h), or for block-scope puts with RSHMEM_COPY_STRATEGY=2 bulk copies issued by one
// thread. They complete before the call returns; ordering toward other PEs comes from
// fence/quiet/signal/barrier.
#ifndef RSHMEM_RMA_DEVICE_H
#define RSHMEM_RMA_DEVICE_H

#include "copy_device.h"
#include "peer_device.h"
#include "proxy_device.h"

#if RSHMEM_COPY_STRATEGY == 2
// The bulk path's staging buffers: static shared memory of every kernel that calls a
// block-scope copy (see copy_device.h for the launch-limit caveat).
static __shared__ __attribute__((aligned(128))) char rshmemi_bulk_buf[RSHMEM_BULK_STAGES * RSHMEM_BULK_CHUNK];
static __shared__ uint64_t rshmemi_bulk_bars[RSHMEM_BULK_STAGES];
#endif

// Copies n bytes with the widest access the relative alignment allows, spread over a group of
// `nlanes` threads (1 = thread scope), each calling with its own `lane`; every thread of the
// group calls it with the same arguments. The loop is chosen at compile time by
// RSHMEM_COPY_STRATEGY (copy_device.h). With strategy 2, a group that is the whole block (block
// scope, or warp scope in a one-warp block) copies large congruent global buffers with bulk
// copies: each thread fences its earlier global stores toward the async proxy, the block
// synchronizes, and thread 0 streams the body while the others copy head and tail. On return
// this thread's part is done; the caller's trailing group sync completes the whole copy.
RSHMEMI_DEV void rshmemi_copy(void* dst, const void* src, size_t n, uint32_t lane, uint32_t nlanes) {
#if RSHMEM_COPY_STRATEGY == 2
  if (nlanes > 1 && nlanes == rshmemi_nthreads() && n >= (size_t)RSHMEM_BULK_MIN_BYTES) {
    rshmemi_fence_proxy_async_global();
    rshmemi_syncthreads();
    rshmemi_copy_bulk_block<RSHMEM_BULK_STAGES, RSHMEM_BULK_CHUNK, RSHMEM_COPY_UNROLL>(
        dst, src, n, lane, nlanes, rshmemi_bulk_buf, rshmemi_bulk_bars);
    return;
  }
#endif
  rshmemi_copy_unrolled_scaled<RSHMEM_COPY_UNROLL>(dst, src, n, lane, nlanes);
}

// The collectives' copy: a short loop (RSHMEM_COLL_COPY_UNROLL vectors in flight per thread, one
// loop for every group size). A collective copies once per member inside its loop over members,
// with barriers around; with the general loop (RSHMEM_COPY_UNROLL, scaled) inlined there, LLVM
// and ptxas kept every unrolled loop's round offsets live across the member loop, and a
// block-scope broadcast needed 100 to 255 registers per thread (ptxas -v, sm_90), more than a
// 1024-thread block may have. 2 by default (the Triton bitcode, whose kernels carry .reqntid, and
// the runtime's kernels, which carry launch bounds); 1 in the CUDA C++ headers and the Numba
// LTO-IR (nvrtc/prelude.h, capi/include/rshmem_cuda.h), whose kernels carry no launch bound: with
// 2, a 1024-thread block-scope reduction needed 72-74 registers per thread (nvcc, sm_90), with 1
// at most 64 (docs/device-footprint.md), and 1024 threads x 16 bytes still keep 16 KiB in flight
// per block.
#ifndef RSHMEM_COLL_COPY_UNROLL
#define RSHMEM_COLL_COPY_UNROLL 2
#endif
RSHMEMI_DEV void rshmemi_coll_copy(void* dst, const void* src, size_t n, uint32_t lane, uint32_t nlanes) {
#if RSHMEM_COPY_STRATEGY == 1
  rshmemi_copy_unrolled<RSHMEM_COLL_COPY_UNROLL>(dst, src, n, lane, nlanes);
#else
  rshmemi_copy(dst, src, n, lane, nlanes);
#endif
}

// ---- calling groups: thread, warp, block ----
enum rshmemi_scope { RSHMEMI_THREAD = 0, RSHMEMI_WARP = 1, RSHMEMI_BLOCK = 2 };

RSHMEMI_DEV uint32_t rshmemi_lane(int scope) {
  return scope == RSHMEMI_BLOCK ? rshmemi_tid() : scope == RSHMEMI_WARP ? rshmemi_laneid() : 0;
}
RSHMEMI_DEV uint32_t rshmemi_nlanes(int scope) {
  return scope == RSHMEMI_BLOCK ? rshmemi_nthreads() : scope == RSHMEMI_WARP ? 32 : 1;
}
// Every thread of the group reaches this point before any continues (no-op for a thread).
RSHMEMI_DEV void rshmemi_group_sync(int scope) {
  if (scope == RSHMEMI_BLOCK) rshmemi_syncthreads();
  else if (scope == RSHMEMI_WARP) rshmemi_syncwarp();
}

// The proxy's ring for symmetric `p` on `pe`, or a stopped kernel (ERROR_FLAG_BAD_ADDRESS, as
// rshmemi_peer_or_fail) when `pe` is not reached through the proxy either.
RSHMEMI_COLD rshmemi_proxy_ring_t* rshmemi_proxy_or_fail(const void* p, int pe) {
  rshmemi_proxy_ring_t* r = rshmemi_proxy_for(p, pe);
  if (r == 0) rshmemi_fail_unreachable(p, pe);
  return r;
}

// put: the group's data written before the call is copied (leading sync), and on return the
// whole transfer is done so `source` may be reused by any thread (trailing sync). A PE on
// another host: the group's first thread posts one descriptor for the whole transfer and waits
// until the proxy has run it.
RSHMEMI_DEV void rshmemi_putmem(void* dest, const void* source, size_t n, int pe, int scope) {
  rshmemi_group_sync(scope);
  if (n != 0) {
    void* remote = rshmemi_user_ptr(dest, n, pe, RSHMEM_CHECK_OP_PUT);
    if (remote != 0) {
      rshmemi_copy(remote, source, n, rshmemi_lane(scope), rshmemi_nlanes(scope));
    } else if (rshmemi_lane(scope) == 0) {
      rshmemi_proxy_putmem(rshmemi_proxy_or_fail(dest, pe), dest, source, n, pe);
    }
  }
  rshmemi_group_sync(scope);
}

RSHMEMI_DEV void rshmemi_getmem(void* dest, const void* source, size_t n, int pe, int scope) {
  rshmemi_group_sync(scope);
  if (n != 0) {
    const void* remote = rshmemi_user_ptr(source, n, pe, RSHMEM_CHECK_OP_GET);
    if (remote != 0) {
      rshmemi_copy(dest, remote, n, rshmemi_lane(scope), rshmemi_nlanes(scope));
    } else if (rshmemi_lane(scope) == 0) {
      rshmemi_proxy_getmem(rshmemi_proxy_or_fail(source, pe), dest, source, n, pe);
    }
  }
  rshmemi_group_sync(scope);
}

// p / g: one element at symmetric `dest` / `source` on `pe`, by ONE strong system-scope access
// (atomic_device.h), never a plain C++ store or load: so `fence(); p(flag, 1, pe)` is a release
// pattern that an acquiring reader of `flag` synchronizes with, and a loop polling `g` reads
// memory on every iteration (a weak load may be hoisted out of the loop, which then spins on a
// register forever). Thread scope; unordered with other operations except through
// fence/quiet/barrier, as every put. A PE on another host: p posts the value to the proxy and
// returns; g waits for the proxy's get.
// An element of 1, 2, 4 or 8 bytes as the low bytes of a u64 (the proxy's inline data), and back.
template <typename T>
RSHMEMI_DEV uint64_t rshmemi_bits_of(T v) {
  if constexpr (sizeof(T) == 1) return __builtin_bit_cast(uint8_t, v);
  else if constexpr (sizeof(T) == 2) return __builtin_bit_cast(uint16_t, v);
  else if constexpr (sizeof(T) == 4) return __builtin_bit_cast(uint32_t, v);
  else return __builtin_bit_cast(uint64_t, v);
}
template <typename T>
RSHMEMI_DEV T rshmemi_from_bits(uint64_t b) {
  if constexpr (sizeof(T) == 1) return __builtin_bit_cast(T, (uint8_t)b);
  else if constexpr (sizeof(T) == 2) return __builtin_bit_cast(T, (uint16_t)b);
  else if constexpr (sizeof(T) == 4) return __builtin_bit_cast(T, (uint32_t)b);
  else return __builtin_bit_cast(T, b);
}

template <typename T>
RSHMEMI_DEV void rshmemi_p(T* dest, T value, int pe) {
  T* remote = (T*)rshmemi_user_ptr(dest, sizeof(T), pe, RSHMEM_CHECK_OP_P);
  if (remote != 0) {
    rshmemi_relaxed_st_sys_elem<T>(remote, value);
    return;
  }
  rshmemi_proxy_p(rshmemi_proxy_or_fail(dest, pe), dest, rshmemi_bits_of<T>(value), sizeof(T), pe);
}
template <typename T>
RSHMEMI_DEV T rshmemi_g(const T* source, int pe) {
  const T* remote = (const T*)rshmemi_user_ptr(source, sizeof(T), pe, RSHMEM_CHECK_OP_G);
  if (remote != 0) return rshmemi_relaxed_ld_sys_elem<T>(remote);
  return rshmemi_from_bits<T>(rshmemi_proxy_g(rshmemi_proxy_or_fail(source, pe), source, sizeof(T), pe));
}

#endif  // RSHMEM_RMA_DEVICE_H
