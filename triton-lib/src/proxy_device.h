// Operations towards PEs this GPU cannot reach by load/store (PEs on other hosts): posted as
// descriptors into this PE's proxy ring, page-locked host memory that a CPU thread empties
// through the network transport (runtime/src/transport/proxy.rs has the protocol). Every
// operation here is out of line (RSHMEMI_COLD): a caller's load/store path only calls it.
//
// A poster takes ticket t with an atomic add on a word of GPU memory (DeviceState::proxy_head),
// waits until slot t % RSHMEM_PROXY_SLOTS is free (tail > t - RSHMEM_PROXY_SLOTS), writes the
// fields with strong relaxed stores and publishes them with a release store of seq = t + 1 at system
// scope: the proxy's acquire of seq sees the fields and, by cumulativity, every store this
// thread made or synchronized with before (the data of a put). The proxy runs tickets in order;
// tail = t + 1 says ticket t is done (the source of a put reusable, the data of a get here).
//
// Every wait on the ring is bounded: when the proxy has failed (a dead peer) the kernel stops
// with ERROR_FLAG_PROXY and the host reports the proxy's error; with RSHMEM_DEBUG_WAIT_TIMEOUT_MS
// a wait past the timeout stops it with ERROR_FLAG_WAIT_TIMEOUT.
#ifndef RSHMEM_PROXY_DEVICE_H
#define RSHMEM_PROXY_DEVICE_H

#include "peer_device.h"

static_assert((RSHMEM_PROXY_SLOTS & (RSHMEM_PROXY_SLOTS - 1)) == 0, "RSHMEM_PROXY_SLOTS must be a power of two");
static_assert(sizeof(rshmemi_proxy_desc_t) == 64 && sizeof(rshmemi_proxy_ring_t) == 64, "ring layout");

// This PE's ring, or null when every PE is reachable by load/store.
RSHMEMI_DEV rshmemi_proxy_ring_t* rshmemi_proxy_ring() {
  return (rshmemi_proxy_ring_t*)(uintptr_t)rshmemi_state_u64(&rshmemi_state()->proxy_ring);
}

// The ring when `p` (a symmetric address of this PE) is to be reached on `pe` through the proxy:
// `pe` is a PE of the job without a mapped heap slot here, and `p` lies in this PE's slot. Null
// otherwise (the caller then fails as for any unreachable address). Called only after the
// load/store translation failed, so the common path pays nothing for it.
RSHMEMI_COLD rshmemi_proxy_ring_t* rshmemi_proxy_for(const void* p, int pe) {
  rshmemi_proxy_ring_t* r = rshmemi_proxy_ring();
  const rshmemi_device_state_t* s = rshmemi_state();
  const int32_t n_pes = rshmemi_state_i32(&s->n_pes);
  if (r == 0 || pe < 0 || pe >= n_pes || pe >= RSHMEM_MAX_PES) return 0;
  const rshmemi_peer_map m = rshmemi_peer(pe);
  const uint64_t off = (uint64_t)(uintptr_t)p - m.mine;
  const bool remote = rshmemi_state_i32(&s->pe_slot[pe]) < 0;
  return (remote && off < m.bound) ? r : 0;
}

// Stores into the ring: strong (relaxed, system scope) for the fields, release for `seq`. They
// are spelled with .u32/.u64 rather than the .b32/.b64 of the signal and p stores, so that in
// PTX a ring store is told apart from a store into symmetric memory.
RSHMEMI_DEV void rshmemi_ring_st_u64(uint64_t* p, uint64_t v) {
  asm volatile("st.relaxed.sys.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
RSHMEMI_DEV void rshmemi_ring_st_u32(void* p, uint32_t v) {
  asm volatile("st.relaxed.sys.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
RSHMEMI_DEV void rshmemi_ring_publish(uint64_t* p, uint64_t v) {
  asm volatile("st.release.sys.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

RSHMEMI_DEV rshmemi_proxy_desc_t* rshmemi_proxy_slot(rshmemi_proxy_ring_t* r, uint64_t t) {
  return (rshmemi_proxy_desc_t*)(r + 1) + (t & (uint64_t)(RSHMEM_PROXY_SLOTS - 1));
}

// Spins until `*word` satisfies `ready` (>= target, or == target when `exact`), stopping the
// kernel when the proxy failed or the debug timeout passed.
RSHMEMI_COLD void rshmemi_proxy_wait(rshmemi_proxy_ring_t* r, const uint64_t* word, uint64_t target, bool exact) {
  const uint64_t timeout = rshmemi_wait_timeout();
  const uint64_t start = timeout != 0 ? rshmemi_globaltimer() : 0;
  for (uint32_t i = 1;; ++i) {
    const uint64_t v = rshmemi_ld_acquire_sys_u64(word);
    if (exact ? v == target : v >= target) return;
    const uint64_t failed = rshmemi_relaxed_ld_sys_u64(&r->failed);
    if (failed != 0) rshmemi_fail(RSHMEM_ERROR_FLAG_PROXY, word, failed, target, v);
    if (timeout != 0 && rshmemi_timer_due(i) && rshmemi_globaltimer() - start > timeout) {
      rshmemi_fail(RSHMEM_ERROR_FLAG_WAIT_TIMEOUT, word, (uint64_t)RSHMEM_CMP_GE, target, v);
    }
  }
}

// Posts one descriptor (thread scope; `d.seq` is ignored); returns its ticket.
RSHMEMI_COLD uint64_t rshmemi_proxy_post(rshmemi_proxy_ring_t* r, const rshmemi_proxy_desc_t& d) {
  uint64_t* head = (uint64_t*)(uintptr_t)rshmemi_state_u64(&rshmemi_state()->proxy_head);
  const uint64_t t = rshmemi_relaxed_atom_add_u64(head, 1);
  if (t >= RSHMEM_PROXY_SLOTS) rshmemi_proxy_wait(r, &r->tail, t - RSHMEM_PROXY_SLOTS + 1, false);
  rshmemi_proxy_desc_t* slot = rshmemi_proxy_slot(r, t);
  rshmemi_ring_st_u64(&slot->dest, d.dest);
  rshmemi_ring_st_u64(&slot->source, d.source);
  rshmemi_ring_st_u64(&slot->nbytes, d.nbytes);
  rshmemi_ring_st_u64(&slot->sig_addr, d.sig_addr);
  rshmemi_ring_st_u64(&slot->value, d.value);
  rshmemi_ring_st_u64(&slot->value2, d.value2);
  // kind, sub, width, flags: one little-endian word.
  rshmemi_ring_st_u32(&slot->kind, (uint32_t)d.kind | ((uint32_t)d.sub << 8) | ((uint32_t)d.width << 16) | ((uint32_t)d.flags << 24));
  rshmemi_ring_st_u32(&slot->pe, (uint32_t)d.pe);
  rshmemi_ring_publish(&slot->seq, t + 1);
  return t;
}

// Waits until the proxy has run ticket t.
RSHMEMI_COLD void rshmemi_proxy_done(rshmemi_proxy_ring_t* r, uint64_t t) { rshmemi_proxy_wait(r, &r->tail, t + 1, false); }

// Waits for the result of fetching ticket t, takes it and frees the slot.
RSHMEMI_COLD uint64_t rshmemi_proxy_result(rshmemi_proxy_ring_t* r, uint64_t t) {
  rshmemi_proxy_desc_t* slot = rshmemi_proxy_slot(r, t);
  rshmemi_proxy_wait(r, &slot->seq, RSHMEM_PROXY_SEQ_RESULT, true);
  const uint64_t v = rshmemi_relaxed_ld_sys_u64(&slot->value);
  rshmemi_ring_st_u64(&slot->seq, 0);
  return v;
}

RSHMEMI_DEV rshmemi_proxy_desc_t rshmemi_proxy_desc(uint8_t kind, int pe) {
  rshmemi_proxy_desc_t d = {};
  d.kind = kind;
  d.pe = pe;
  return d;
}

// put / get of n bytes; on return the proxy has run them (source reusable, data arrived).
RSHMEMI_COLD void rshmemi_proxy_putmem(rshmemi_proxy_ring_t* r, void* dest, const void* source, size_t n, int pe) {
  rshmemi_proxy_desc_t d = rshmemi_proxy_desc(RSHMEM_PROXY_PUT, pe);
  d.dest = (uint64_t)(uintptr_t)dest;
  d.source = (uint64_t)(uintptr_t)source;
  d.nbytes = n;
  rshmemi_proxy_done(r, rshmemi_proxy_post(r, d));
}
RSHMEMI_COLD void rshmemi_proxy_getmem(rshmemi_proxy_ring_t* r, void* dest, const void* source, size_t n, int pe) {
  rshmemi_proxy_desc_t d = rshmemi_proxy_desc(RSHMEM_PROXY_GET, pe);
  d.dest = (uint64_t)(uintptr_t)dest;
  d.source = (uint64_t)(uintptr_t)source;
  d.nbytes = n;
  rshmemi_proxy_done(r, rshmemi_proxy_post(r, d));
}

// p: the value travels in the descriptor; nothing to wait for.
RSHMEMI_COLD void rshmemi_proxy_p(rshmemi_proxy_ring_t* r, void* dest, uint64_t bits, size_t n, int pe) {
  rshmemi_proxy_desc_t d = rshmemi_proxy_desc(RSHMEM_PROXY_PUT_INLINE, pe);
  d.dest = (uint64_t)(uintptr_t)dest;
  d.value = bits;
  d.nbytes = n;
  rshmemi_proxy_post(r, d);
}

// g: the proxy gets n <= 8 bytes into the slot and hands them back.
RSHMEMI_COLD uint64_t rshmemi_proxy_g(rshmemi_proxy_ring_t* r, const void* source, size_t n, int pe) {
  rshmemi_proxy_desc_t d = rshmemi_proxy_desc(RSHMEM_PROXY_GET, pe);
  d.source = (uint64_t)(uintptr_t)source;
  d.nbytes = n;
  d.flags = RSHMEM_PROXY_FLAG_FETCH;
  return rshmemi_proxy_result(r, rshmemi_proxy_post(r, d));
}

// An atomic (`op`: RSHMEM_AMO_*) on the `width`-byte word `dest` of `pe`. Fetching: waits for
// and returns the old value; otherwise returns 0 at once.
RSHMEMI_COLD uint64_t rshmemi_proxy_amo(rshmemi_proxy_ring_t* r, void* dest, uint32_t op, uint32_t width, uint64_t value,
                                       uint64_t value2, bool fetch, int pe) {
  rshmemi_proxy_desc_t d = rshmemi_proxy_desc(RSHMEM_PROXY_AMO, pe);
  d.dest = (uint64_t)(uintptr_t)dest;
  d.sub = (uint8_t)op;
  d.width = (uint8_t)width;
  d.value = value;
  d.value2 = value2;
  d.flags = fetch ? RSHMEM_PROXY_FLAG_FETCH : 0;
  const uint64_t t = rshmemi_proxy_post(r, d);
  return fetch ? rshmemi_proxy_result(r, t) : 0;
}

// put + signal (`sig_op`: SIGNAL_SET / SIGNAL_ADD, checked by the caller); waits until the
// proxy has run it (the source reusable); the target sees the data once it sees the signal.
RSHMEMI_COLD void rshmemi_proxy_putmem_signal(rshmemi_proxy_ring_t* r, void* dest, const void* source, size_t n,
                                             uint64_t* sig_addr, uint64_t signal, int sig_op, int pe) {
  rshmemi_proxy_desc_t d = rshmemi_proxy_desc(RSHMEM_PROXY_PUT_SIGNAL, pe);
  d.dest = (uint64_t)(uintptr_t)dest;
  d.source = (uint64_t)(uintptr_t)source;
  d.nbytes = n;
  d.sig_addr = (uint64_t)(uintptr_t)sig_addr;
  d.value = signal;
  d.sub = (uint8_t)sig_op;
  rshmemi_proxy_done(r, rshmemi_proxy_post(r, d));
}

// quiet (and fence, which it implies) for the proxy's operations: when anything was posted
// since the last quiet the proxy ran, posts a PROXY_QUIET and waits until every operation
// before it is complete at its target. Thread scope. Inline: the test for a ring (none when
// every PE is reachable by load/store); the rest out of line.
RSHMEMI_COLD void rshmemi_proxy_quiet_ring(rshmemi_proxy_ring_t* r) {
  const uint64_t* head = (const uint64_t*)(uintptr_t)rshmemi_state_u64(&rshmemi_state()->proxy_head);
  if (rshmemi_relaxed_ld_sys_u64(head) == rshmemi_ld_acquire_sys_u64(&r->quieted)) return;
  const uint64_t t = rshmemi_proxy_post(r, rshmemi_proxy_desc(RSHMEM_PROXY_QUIET, (int)rshmemi_state()->my_pe));
  rshmemi_proxy_wait(r, &r->quieted, t + 1, false);
}
RSHMEMI_DEV void rshmemi_proxy_quiet() {
  rshmemi_proxy_ring_t* r = rshmemi_proxy_ring();
  if (r != 0) rshmemi_proxy_quiet_ring(r);
}

#endif  // RSHMEM_PROXY_DEVICE_H
