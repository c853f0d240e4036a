// Address translation: the address of symmetric `p` on `pe`, or null when `pe` is out of range or
// unreachable by load/store or `p` is outside this PE's heap slot. A symmetric address of this PE
// lies in this PE's heap slot; the same object on `pe` is at the same offset in `pe`'s slot,
// which this process has mapped too:
//   remote = heap_base + pe_slot[pe] * heap_stride + (p - (heap_base + pe_slot[my_pe] * heap_stride)).
// Testing each condition before the next load would chain dependent round trips (after a wait,
// whose acquire loads invalidate L1, each link is an L2 access). Here every state load is issued up front,
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

// `p` translated through `m`, or null .
RSHMEMI_DEV void* rshmemi_peer_apply(const rshmemi_peer_map& m, const void* p) {
  const uint64_t off = (uint64_t)(uintptr_t)p - m.mine;  // wraps to a huge value below the slot
  const uint64_t r = m.theirs + off;
  return (m.ok && off < m.bound && r != 0) ? (void*)(uintptr_t)r : 0;
}

RSHMEMI_DEV void* rshmemi_peer_ptr(const void* p, int pe) { return rshmemi_peer_apply(rshmemi_peer(pe), p); }

// Stops the kernel with ERROR_FLAG_BAD_ADDRESS for symmetric `p` on `pe`, recording what the
// translation saw (device_state.h, BAD_ADDRESS_*): the heap bound, whether `pe`'s slot entry
// says it is on another host, whether this PE has a proxy ring, and the offset of `p` from the
// start of this PE's slot. The host's message then says which condition failed, from the values
// this kernel read rather than from the host's own copy of the state. Out of line (device.h).
RSHMEMI_COLD __attribute__((noreturn)) void rshmemi_fail_unreachable(const void* p, int pe) {
  const rshmemi_device_state_t* s = rshmemi_state();
  const rshmemi_peer_map m = rshmemi_peer(pe);
  const int32_t slot = rshmemi_state_i32(&s->pe_slot[(uint32_t)pe & (RSHMEM_MAX_PES - 1)]);
  uint64_t seen = RSHMEM_BAD_ADDRESS_SEEN | (m.bound & RSHMEM_BAD_ADDRESS_BOUND_MASK);
  if (rshmemi_state_u64(&s->proxy_ring) != 0) seen |= RSHMEM_BAD_ADDRESS_RING;
  if (slot < 0) seen |= RSHMEM_BAD_ADDRESS_REMOTE;
  rshmemi_fail(RSHMEM_ERROR_FLAG_BAD_ADDRESS, p, (uint64_t)(int64_t)pe, seen, (uint64_t)(uintptr_t)p - m.mine);
}

// rshmemi_peer_ptr, stopping the kernel (ERROR_FLAG_BAD_ADDRESS, same record as
// the other translators) when it is null.
RSHMEMI_DEV void* rshmemi_peer_or_fail(const void* p, int pe) {
  void* r = rshmemi_peer_ptr(p, pe);
  if (r == 0) rshmemi_fail_unreachable(p, pe);
  return r;
}

// Check mode (RSHMEM_CHECK=1 at build time: triton-lib/build.py builds it as
// libshmem_device.check.bc, which rshmem.triton links when the environment has RSHMEM_CHECK=1):
// a put, get, signal or atomic whose symmetric range [p, p + n) is not program memory stops the
// kernel with ERROR_FLAG_UNSAFE_ADDRESS naming the address, the target PE, the operation
// (CHECK_OP_*) and the size, instead of writing over the runtime's own words (the barrier
// counters and workspaces below `user_base`) or reading past the heap bound. Program memory is
// [user_base, heap_bound) of this PE's slot; freed allocations inside it are not seen (the
// state does not change after init). In the default build this is nothing at all: the fast
// path's code is the same as without the call.
#ifndef RSHMEM_CHECK
#define RSHMEM_CHECK 0
#endif

RSHMEMI_DEV void rshmemi_check_user(const void* p, size_t n, int pe, uint32_t op) {
#if RSHMEM_CHECK
  const rshmemi_device_state_t* s = rshmemi_state();
  const uint64_t mine = rshmemi_state_u64(&s->heap_base) +
                        (uint64_t)rshmemi_state_i32(&s->my_slot) * rshmemi_state_u64(&s->heap_stride);
  const uint64_t lo = rshmemi_state_u64(&s->user_base), hi = rshmemi_state_u64(&s->heap_bound);
  const uint64_t off = (uint64_t)(uintptr_t)p - mine;  // wraps to a huge value below the slot
  if (off < lo || off >= hi || (uint64_t)n > hi - off) {
    rshmemi_fail(RSHMEM_ERROR_FLAG_UNSAFE_ADDRESS, p, (uint64_t)(int64_t)pe, op, (uint64_t)n);
  }
#else
  (void)p, (void)n, (void)pe, (void)op;
#endif
}

// rshmemi_peer_ptr of a program's address `p` for an operation `op` on `n` bytes: checked first
// in check mode (rshmemi_check_user).
RSHMEMI_DEV void* rshmemi_user_ptr(const void* p, size_t n, int pe, uint32_t op) {
  rshmemi_check_user(p, n, pe, op);
  return rshmemi_peer_ptr(p, pe);
}

#endif  // RSHMEM_PEER_DEVICE_H
