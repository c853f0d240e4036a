// Signals: 64-bit words updated remotely with release semantics at system scope.
//
// Ordering argument used below (PTX ISA, "Memory Consistency Model"): a bar.sync / bar.warp.sync
// that every thread of the group reaches synchronizes its threads, and base causality order is
// transitive through program order and synchronizes-with. So after the group sync, a release
// operation (st.release / red.release: a release pattern by itself) by ONE thread of the group
// is ordered after the stores every thread of the group made before the sync; an observer whose
// acquire reads the signal sees them all. No separate fence.acq_rel.sys is needed before the
// release: in SASS each of the two is a MEMBAR.ALL.SYS, and the second one only added latency.
#ifndef RSHMEM_SIGNAL_DEVICE_H
#define RSHMEM_SIGNAL_DEVICE_H

#include "peer_device.h"
#include "rma_device.h"

// Applies `op` (SIGNAL_SET / SIGNAL_ADD) to the signal word at `remote` (already translated).
// Release: this thread's earlier memory operations (and, by cumulativity, those it has
// synchronized with) are visible to whoever observes the signal with acquire.
RSHMEMI_DEV void rshmemi_signal_remote(uint64_t* remote, uint64_t value, int op) {
  if (op == RSHMEM_SIGNAL_ADD) {
    rshmemi_red_add_release_sys_u64(remote, value);
  } else if (op == RSHMEM_SIGNAL_SET) {
    rshmemi_st_release_sys_u64(remote, value);
  } else {
    rshmemi_fail(RSHMEM_ERROR_FLAG_BAD_ARGUMENT, remote, (uint64_t)(int64_t)op, 0, 0);
  }
}

// signal_op: thread scope. A PE on another host: an atomic set or add through the proxy, which
// runs after this thread's earlier proxied operations to that PE have landed.
RSHMEMI_COLD void rshmemi_signal_op_proxied(uint64_t* sig_addr, uint64_t value, int op, int pe) {
  if (op != RSHMEM_SIGNAL_ADD && op != RSHMEM_SIGNAL_SET) {
    rshmemi_fail(RSHMEM_ERROR_FLAG_BAD_ARGUMENT, sig_addr, (uint64_t)(int64_t)op, 0, 0);
  }
  rshmemi_proxy_amo(rshmemi_proxy_or_fail(sig_addr, pe), sig_addr, op == RSHMEM_SIGNAL_ADD ? RSHMEM_AMO_ADD : RSHMEM_AMO_SET,
                    8, value, 0, false, pe);
}
RSHMEMI_DEV void rshmemi_signal_op(uint64_t* sig_addr, uint64_t value, int op, int pe) {
  uint64_t* remote = (uint64_t*)rshmemi_user_ptr(sig_addr, 8, pe, RSHMEM_CHECK_OP_SIGNAL);
  if (remote != 0) rshmemi_signal_remote(remote, value, op);
  else rshmemi_signal_op_proxied(sig_addr, value, op, pe);
}

// Puts up to this many bytes by one thread with direct stores, and the signal from that same
// thread, instead of the group's general copy loop: one group sync fewer, no copy loops.
#define RSHMEMI_SMALL_PUT_BYTES 16

struct __attribute__((aligned(16))) rshmemi_small16 {
  uint64_t lo, hi;
};

// Copies n <= 16 bytes with the widest access that the alignment of both ends and n allow,
// as straight-line code (fixed trip counts, unrolled; no loop back-edge on the latency path).
RSHMEMI_DEV void rshmemi_copy_small(void* dst, const void* src, size_t n) {
  const uintptr_t a = (uintptr_t)dst | (uintptr_t)src | (uintptr_t)n;
  if ((a & 15) == 0) {
    if (n == 16) *(rshmemi_small16*)dst = *(const rshmemi_small16*)src;
  } else if ((a & 7) == 0) {
#pragma unroll
    for (size_t i = 0; i < 2; ++i) if (i < n / 8) ((uint64_t*)dst)[i] = ((const uint64_t*)src)[i];
  } else if ((a & 3) == 0) {
#pragma unroll
    for (size_t i = 0; i < 4; ++i) if (i < n / 4) ((uint32_t*)dst)[i] = ((const uint32_t*)src)[i];
  } else {
#pragma unroll
    for (size_t i = 0; i < RSHMEMI_SMALL_PUT_BYTES; ++i) if (i < n) ((uint8_t*)dst)[i] = ((const uint8_t*)src)[i];
  }
}

// put + signal to a PE on another host: one descriptor carries data and signal (the proxy sends
// them as one message where it can), posted by the group's first thread once the group's data
// is written. Out of line; every thread of the group calls it.
RSHMEMI_COLD void rshmemi_putmem_signal_proxied(void* dest, const void* source, size_t n, uint64_t* sig_addr,
                                                uint64_t signal, int sig_op, int pe, int scope) {
  rshmemi_proxy_ring_t* r = rshmemi_proxy_for(sig_addr, pe);
  if (r == 0) rshmemi_fail_unreachable(sig_addr, pe);
  if (n != 0 && rshmemi_proxy_for(dest, pe) == 0) rshmemi_fail_unreachable(dest, pe);
  if (sig_op != RSHMEM_SIGNAL_ADD && sig_op != RSHMEM_SIGNAL_SET) {
    rshmemi_fail(RSHMEM_ERROR_FLAG_BAD_ARGUMENT, sig_addr, (uint64_t)(int64_t)sig_op, 0, 0);
  }
  rshmemi_group_sync(scope);
  if (rshmemi_lane(scope) == 0) rshmemi_proxy_putmem_signal(r, dest, source, n, sig_addr, signal, sig_op, pe);
  rshmemi_group_sync(scope);
}

// put + signal. On return the whole operation is done (data and signal issued, `source`
// reusable by any thread of the group).
//
// Leading group sync: data that other threads of the group wrote to `source` before the call is
// what gets copied. Small puts (n <= RSHMEMI_SMALL_PUT_BYTES): the group's first thread copies
// and then signals; its release orders its own earlier stores by program order. Larger puts:
// every thread copies its share, the group syncs, and the first thread's release covers every
// thread's stores (see the top of this file). Trailing sync: no thread returns (and reuses
// `source`) before the copy is done.
RSHMEMI_DEV void rshmemi_putmem_signal(void* dest, const void* source, size_t n, uint64_t* sig_addr,
                                       uint64_t signal, int sig_op, int pe, int scope) {
  // The state loads and both translations happen before the sync, overlapping it.
  rshmemi_check_user(sig_addr, 8, pe, RSHMEM_CHECK_OP_SIGNAL);
  if (n != 0) rshmemi_check_user(dest, n, pe, RSHMEM_CHECK_OP_PUT_SIGNAL);
  const rshmemi_peer_map m = rshmemi_peer(pe);
  uint64_t* remote_sig = (uint64_t*)rshmemi_peer_apply(m, sig_addr);
  if (remote_sig == 0) {
    rshmemi_putmem_signal_proxied(dest, source, n, sig_addr, signal, sig_op, pe, scope);
    return;
  }
  void* remote_dest = 0;
  if (n != 0) {
    remote_dest = rshmemi_peer_apply(m, dest);
    if (remote_dest == 0) rshmemi_fail_unreachable(dest, pe);
  }
  const uint32_t lane = rshmemi_lane(scope);
  rshmemi_group_sync(scope);
  if (n <= RSHMEMI_SMALL_PUT_BYTES) {
    if (lane == 0) {
      rshmemi_copy_small(remote_dest, source, n);
      rshmemi_signal_remote(remote_sig, signal, sig_op);
    }
  } else {
    rshmemi_copy(remote_dest, source, n, lane, rshmemi_nlanes(scope));
    rshmemi_group_sync(scope);
    if (lane == 0) rshmemi_signal_remote(remote_sig, signal, sig_op);
  }
  rshmemi_group_sync(scope);
}

#endif  // RSHMEM_SIGNAL_DEVICE_H
