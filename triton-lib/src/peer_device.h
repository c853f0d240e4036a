// Address translation for the latency-critical paths: signals, barriers, single-element RMA and
// atomics.
//
// Same result as rshmemi_remote_ptr (rma_device.h): the address of symmetric `p` on `pe`, or null
// when `pe` is out of range or unreachable by load/store or `p` is outside this PE's heap slot.
// The difference is the shape of the code: rshmemi_remote_ptr tests each condition before the
// next load, so the loads form a chain of dependent round trips; after a wait (whose acquire
// loads invalidate L1) each link is an L2 access. Here every state load is issued up front,
// unconditionally (the table index is masked into range; RSHMEM_MAX_PES is a power of two), with
// invariant loads (device.h), and the conditions are combined afterwards.
#ifndef RSHMEM_PEER_DEVICE_H
#define RSHMEM_PEER_DEVICE_H

#include "poll_device.h"

static_assert((RSHMEM_MAX_PES & (RSHMEM_MAX_PES - 1)) == 0, "RSHMEM_MAX_PES must be a power of two");

// The byte offset to add to a local symmetric address to reach `pe`'s copy, and whether `pe` is
// reachable at all; `p` is in this PE's slot iff `*off_out < bound` (see rshmemi_peer_ptr).
struct rshmemi_peer_map {
  uint64_t mine;   // start of this PE's slot
  uint64_t bound;  // bytes of each slot that may be addressed
  uint64_t theirs; // start of `pe`'s slot
  bool ok;         // `pe` in range, both slots mapped
};

RSHMEMI_DEV rshmemi_peer_map rshmemi_peer(int pe) {
  const rshmemi_device_state_t* s = rshmemi_state();
  const int32_t n_pes = rshmemi_state_i32(&s->n_pes);
  const int32_t my_slot = rshmemi_state_i32(&s->my_slot);
  const int32_t slot = rshmemi_state_i32(&s->pe_slot[(uint32_t)pe & (RSHMEM_MAX_PES - 1)]);
  const uint64_t base = rshmemi_state_u64(&s->heap_base);
  const uint64_t stride = rshmemi_state_u64(&s->heap_stride);
  rshmemi_peer_map m;
  m.mine = base + (uint64_t)my_slot * stride;
  m.theirs = base + (uint64_t)slot * stride;
  m.bound = rshmemi_state_u64(&s->heap_bound);
  m.ok = pe >= 0 && pe < n_pes && pe < RSHMEM_MAX_PES && my_slot >= 0 && slot >= 0;
  return m;
}

// `p` translated through `m`, or null (as rshmemi_remote_ptr).
RSHMEMI_DEV void* rshmemi_peer_apply(const rshmemi_peer_map& m, const void* p) {
  const uint64_t off = (uint64_t)(uintptr_t)p - m.mine;  // wraps to a huge value below the slot
  const uint64_t r = m.theirs + off;
  return (m.ok && off < m.bound && r != 0) ? (void*)(uintptr_t)r : 0;
}

RSHMEMI_DEV void* rshmemi_peer_ptr(const void* p, int pe) { return rshmemi_peer_apply(rshmemi_peer(pe), p); }

// rshmemi_peer_ptr, stopping the kernel (ERROR_FLAG_BAD_ADDRESS, same record as
// rshmemi_remote_or_fail) when it is null.
RSHMEMI_DEV void* rshmemi_peer_or_fail(const void* p, int pe) {
  void* r = rshmemi_peer_ptr(p, pe);
  if (r == 0) rshmemi_fail(RSHMEM_ERROR_FLAG_BAD_ADDRESS, p, (uint64_t)(int64_t)pe, 0, 0);
  return r;
}

#endif  // RSHMEM_PEER_DEVICE_H
