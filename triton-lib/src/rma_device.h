// Address translation and data movement by load/store.
//
// A symmetric address `p` of this PE lies in this PE's heap slot; the same object on PE `pe`
// is at the same offset in `pe`'s slot, which this process has mapped too:
//   remote = heap_base + pe_slot[pe] * heap_stride + (p - (heap_base + pe_slot[my_pe] * heap_stride)).
// Copies are plain (weak) loads and stores, 16 bytes per access when the source and
// destination are congruent modulo 16 (else 8, 4, 1), spread over the threads of the calling
// group. They complete before the call returns; ordering toward other PEs comes from
// fence/quiet/signal/barrier.
#ifndef RSHMEM_RMA_DEVICE_H
#define RSHMEM_RMA_DEVICE_H

#include "poll_device.h"

// The address of symmetric `p` on `pe`, or null when `pe` is not reachable by load/store or
// `p` is not inside this PE's heap slot.
RSHMEMI_DEV void* rshmemi_remote_ptr(const void* p, int pe) {
  const rshmemi_device_state_t* s = rshmemi_state();
  if (pe < 0 || pe >= s->n_pes || pe >= RSHMEM_MAX_PES || s->my_slot < 0) return 0;
  const int slot = s->pe_slot[pe];
  if (slot < 0) return 0;
  const uint64_t mine = s->heap_base + (uint64_t)s->my_slot * s->heap_stride;
  const uint64_t off = (uint64_t)(uintptr_t)p - mine;  // wraps to a huge value below the slot
  if (off >= s->heap_bound) return 0;
  return (void*)(uintptr_t)(s->heap_base + (uint64_t)slot * s->heap_stride + off);
}

// rshmemi_remote_ptr, stopping the kernel (ERROR_FLAG_BAD_ADDRESS) when it is null.
RSHMEMI_DEV void* rshmemi_remote_or_fail(const void* p, int pe) {
  void* r = rshmemi_remote_ptr(p, pe);
  if (r == 0) rshmemi_fail(RSHMEM_ERROR_FLAG_BAD_ADDRESS, p, (uint64_t)(int64_t)pe, 0, 0);
  return r;
}

struct __attribute__((aligned(16))) rshmemi_v16 {
  uint64_t lo, hi;
};

// Copies `count` elements of V, element i by thread (i mod nlanes) of the group. Four loads
// are issued before their stores so each thread keeps several requests in flight.
template <typename V>
RSHMEMI_DEV void rshmemi_copy_elems(V* d, const V* s, size_t count, uint32_t lane, uint32_t nlanes) {
  size_t i = lane;
  const size_t step = nlanes;
  for (; i + 3 * step < count; i += 4 * step) {
    const V a = s[i], b = s[i + step], c = s[i + 2 * step], e = s[i + 3 * step];
    d[i] = a;
    d[i + step] = b;
    d[i + 2 * step] = c;
    d[i + 3 * step] = e;
  }
  for (; i < count; i += step) d[i] = s[i];
}

// Copies n bytes with the widest access the relative alignment allows. Called by every thread
// of a group of `nlanes` threads (1 = thread scope), each with its own `lane`.
RSHMEMI_DEV void rshmemi_copy(void* dst, const void* src, size_t n, uint32_t lane, uint32_t nlanes) {
  char* d = (char*)dst;
  const char* s = (const char*)src;
  const uintptr_t diff = (uintptr_t)d ^ (uintptr_t)s;
  const size_t w = (diff & 15) == 0 ? 16 : (diff & 7) == 0 ? 8 : (diff & 3) == 0 ? 4 : 1;
  size_t head = (w - ((uintptr_t)d & (w - 1))) & (w - 1);
  if (head > n) head = n;
  rshmemi_copy_elems((uint8_t*)d, (const uint8_t*)s, head, lane, nlanes);
  const size_t nv = (n - head) / w;
  char* dv = d + head;
  const char* sv = s + head;
  switch (w) {
    case 16: rshmemi_copy_elems((rshmemi_v16*)dv, (const rshmemi_v16*)sv, nv, lane, nlanes); break;
    case 8: rshmemi_copy_elems((uint64_t*)dv, (const uint64_t*)sv, nv, lane, nlanes); break;
    case 4: rshmemi_copy_elems((uint32_t*)dv, (const uint32_t*)sv, nv, lane, nlanes); break;
    default: rshmemi_copy_elems((uint8_t*)dv, (const uint8_t*)sv, nv, lane, nlanes); break;
  }
  const size_t done = head + nv * w;
  rshmemi_copy_elems((uint8_t*)(d + done), (const uint8_t*)(s + done), n - done, lane, nlanes);
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
  if (n != 0) rshmemi_copy(rshmemi_remote_or_fail(dest, pe), source, n, rshmemi_lane(scope), rshmemi_nlanes(scope));
  rshmemi_group_sync(scope);
}

RSHMEMI_DEV void rshmemi_getmem(void* dest, const void* source, size_t n, int pe, int scope) {
  rshmemi_group_sync(scope);
  if (n != 0) rshmemi_copy(dest, rshmemi_remote_or_fail(source, pe), n, rshmemi_lane(scope), rshmemi_nlanes(scope));
  rshmemi_group_sync(scope);
}

#endif  // RSHMEM_RMA_DEVICE_H
