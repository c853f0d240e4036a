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
#if RSHMEM_COPY_STRATEGY == 0
  rshmemi_copy_legacy(dst, src, n, lane, nlanes);
#else
#if RSHMEM_COPY_STRATEGY == 2
  if (nlanes > 1 && nlanes == rshmemi_nthreads() && n >= (size_t)RSHMEM_BULK_MIN_BYTES) {
    rshmemi_fence_proxy_async_global();
    rshmemi_syncthreads();
    rshmemi_copy_bulk_block<RSHMEM_BULK_STAGES, RSHMEM_BULK_CHUNK, RSHMEM_COPY_UNROLL>(
        dst, src, n, lane, nlanes, rshmemi_bulk_buf, rshmemi_bulk_bars);
    return;
  }
#endif
  rshmemi_copy_unrolled<RSHMEM_COPY_UNROLL>(dst, src, n, lane, nlanes);
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

// put: the group's data written before the call is copied (leading sync), and on return the
// whole transfer is done so `source` may be reused by any thread (trailing sync).
RSHMEMI_DEV void rshmemi_putmem(void* dest, const void* source, size_t n, int pe, int scope) {
  rshmemi_group_sync(scope);
  if (n != 0) rshmemi_copy(rshmemi_peer_or_fail(dest, pe), source, n, rshmemi_lane(scope), rshmemi_nlanes(scope));
  rshmemi_group_sync(scope);
}

RSHMEMI_DEV void rshmemi_getmem(void* dest, const void* source, size_t n, int pe, int scope) {
  rshmemi_group_sync(scope);
  if (n != 0) rshmemi_copy(dest, rshmemi_peer_or_fail(source, pe), n, rshmemi_lane(scope), rshmemi_nlanes(scope));
  rshmemi_group_sync(scope);
}

// p / g: one element at symmetric `dest` / `source` on `pe`, by ONE strong system-scope access
// (atomic_device.h), never a plain C++ store or load: so `fence(); p(flag, 1, pe)` is a release
// pattern that an acquiring reader of `flag` synchronizes with, and a loop polling `g` reads
// memory on every iteration (a weak load may be hoisted out of the loop, which then spins on a
// register forever). Thread scope; unordered with other operations except through
// fence/quiet/barrier, as every put.
template <typename T>
RSHMEMI_DEV void rshmemi_p(T* dest, T value, int pe) {
  rshmemi_relaxed_st_sys_elem<T>((T*)rshmemi_peer_or_fail(dest, pe), value);
}
template <typename T>
RSHMEMI_DEV T rshmemi_g(const T* source, int pe) {
  return rshmemi_relaxed_ld_sys_elem<T>((const T*)rshmemi_peer_or_fail(source, pe));
}

#endif  // RSHMEM_RMA_DEVICE_H
