// Signals: 64-bit words updated remotely with release semantics at system scope.
#ifndef RSHMEM_SIGNAL_DEVICE_H
#define RSHMEM_SIGNAL_DEVICE_H

#include "rma_device.h"

// Applies `op` (SIGNAL_SET / SIGNAL_ADD) to the signal word at `remote` (already translated).
// Release: this thread's earlier memory operations are visible to whoever observes the signal.
RSHMEMI_DEV void rshmemi_signal_remote(uint64_t* remote, uint64_t value, int op) {
  if (op == RSHMEM_SIGNAL_ADD) {
    rshmemi_red_add_release_sys_u64(remote, value);
  } else if (op == RSHMEM_SIGNAL_SET) {
    rshmemi_st_release_sys_u64(remote, value);
  } else {
    rshmemi_fail(RSHMEM_ERROR_FLAG_BAD_ARGUMENT, remote, (uint64_t)(int64_t)op, 0, 0);
  }
}

// signal_op: thread scope.
RSHMEMI_DEV void rshmemi_signal_op(uint64_t* sig_addr, uint64_t value, int op, int pe) {
  rshmemi_signal_remote((uint64_t*)rshmemi_remote_or_fail(sig_addr, pe), value, op);
}

// put + signal: every thread of the group copies its share; after the group has synchronized,
// its first thread issues fence.acq_rel.sys (ordering the group's stores, which the barrier
// made its own by cumulativity) and then the release signal. On return the whole operation is
// done.
RSHMEMI_DEV void rshmemi_putmem_signal(void* dest, const void* source, size_t n, uint64_t* sig_addr,
                                       uint64_t signal, int sig_op, int pe, int scope) {
  uint64_t* remote_sig = (uint64_t*)rshmemi_remote_or_fail(sig_addr, pe);
  rshmemi_group_sync(scope);
  if (n != 0) rshmemi_copy(rshmemi_remote_or_fail(dest, pe), source, n, rshmemi_lane(scope), rshmemi_nlanes(scope));
  rshmemi_group_sync(scope);
  if (rshmemi_lane(scope) == 0) {
    if (scope != RSHMEMI_THREAD) rshmemi_fence_acq_rel_sys();
    rshmemi_signal_remote(remote_sig, signal, sig_op);
  }
  rshmemi_group_sync(scope);
}

#endif  // RSHMEM_SIGNAL_DEVICE_H
