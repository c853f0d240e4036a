// Team barriers with never-reset counters.
//
// For team t, two 64-bit words at barrier_ws + 16*t on every member: `arrive` (offset 0) and
// `epoch` (offset 8). A barrier does e = ++epoch (own PE only), adds 1 with release semantics to
// every member's `arrive`, then waits with acquire until its own `arrive >= e * size`. Nothing is
// reset, so back-to-back barriers need no extra phase, and the host runtime's barriers use the
// same words. Several CTAs of one PE may enter the same team barrier concurrently: each takes its
// own epoch and the counts add up, as long as every PE enters it equally often.
#ifndef RSHMEM_BARRIER_DEVICE_H
#define RSHMEM_BARRIER_DEVICE_H

#include "signal_device.h"
#include "team_device.h"

// Thread scope. `quiet`: barrier (complete all earlier operations) rather than sync.
RSHMEMI_DEV void rshmemi_team_barrier_thread(int team, bool quiet) {
  const rshmemi_device_state_t* s = rshmemi_state();
  rshmemi_team_desc_t t;
  if (!rshmemi_team_get(team, &t) || t.my_index < 0 || s->barrier_ws == 0) {
    rshmemi_fail(RSHMEM_ERROR_FLAG_BAD_ARGUMENT, (const void*)(uintptr_t)s->barrier_ws, (uint64_t)(int64_t)team, 0, 0);
  }
  if (quiet) rshmemi_fence_sc_sys();
  else rshmemi_fence_acq_rel_sys();
  uint64_t* arrive = (uint64_t*)(uintptr_t)(s->barrier_ws + RSHMEM_BARRIER_WS_BYTES_PER_TEAM * (uint64_t)team);
  uint64_t* epoch = arrive + 1;
  const uint64_t e = rshmemi_relaxed_atom_add_u64(epoch, 1) + 1;
  for (int i = 0; i < t.size; ++i) {
    // Start after ourselves so the members do not all hit member 0 first.
    const int pe = rshmemi_team_member(&t, (t.my_index + 1 + i) % t.size);
    rshmemi_red_add_release_sys_u64(rshmemi_remote_or_fail(arrive, pe), 1);
  }
  rshmemi_wait_until<uint64_t>(arrive, RSHMEM_CMP_GE, e * (uint64_t)t.size);
}

// Any scope: the group synchronizes, its first thread runs the barrier, the group synchronizes
// again, so every thread's earlier operations are covered and every thread sees the others'.
RSHMEMI_DEV void rshmemi_team_barrier(int team, bool quiet, int scope) {
  rshmemi_group_sync(scope);
  if (rshmemi_lane(scope) == 0) rshmemi_team_barrier_thread(team, quiet);
  rshmemi_group_sync(scope);
}

#endif  // RSHMEM_BARRIER_DEVICE_H
