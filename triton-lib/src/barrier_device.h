// Team barriers with never-reset counters and per-PE instance tickets.
//
// For team t, three 64-bit words at barrier_ws + 24*t on every member: `arrive` (offset 0),
// `ticket` (8) and `done` (16); the last two are touched by their own PE only. An instance
// takes e = ++ticket, waits until done >= e - 1, adds 1 with release semantics to every member's
// `arrive`, waits with acquire until its own `arrive >= e * size`, then sets done = e. Nothing
// is reset, so back-to-back barriers need no extra phase, and the host runtime's barriers
// (runtime/src/runtime/sync.rs), the on-stream barrier kernel (runtime_kernels.cu) and barriers
// in Triton kernels all use the same words the same way.
//
// The rule (docs/memory-model.md, "Barriers"): a PE's instances of one team run one after
// another, in the order they take their tickets; the k-th instance of every member matches the
// k-th of every other. Counting arrivals alone would let two instances of one PE that are in
// flight at once (two CTAs calling barrier_all_block, a stream barrier still spinning when the
// host calls barrier_all) satisfy each other: the first one's `e * size` is reached by its own
// PE's two arrivals before any peer arrived. The ticket wait makes a second instance arrive only
// after the first has seen its peers. Which instance is k-th follows execution order: every
// member must run equally many, and code that mixes kinds (host, stream, kernel) on one team
// must order them the same way on every PE (the runtime orders its host barriers after the
// barrier kernels it queued on streams; kernels of the caller are the caller's to order).
//
// Latency: the arrivals go out in parallel, member i's from thread i of the group (thread scope:
// one loop), each after ONE fence per issuing thread rather than one release per add. A release
// add is MEMBAR.ALL.SYS + RED in SASS, and a second MEMBAR waits until the previous add to a
// peer has been acknowledged over NVLink, so a serial loop of release adds from one thread
// costs a round trip per member. The ticket is one local atomic and the `done` check one local
// load, both while the other threads translate their targets.
#ifndef RSHMEM_BARRIER_DEVICE_H
#define RSHMEM_BARRIER_DEVICE_H

#include "signal_device.h"
#include "team_device.h"

// The team descriptor; TEAM_WORLD from the state with invariant loads (device.h).
RSHMEMI_DEV bool rshmemi_barrier_team(int team, rshmemi_team_desc_t* t) {
  if (team != RSHMEM_TEAM_WORLD) return rshmemi_team_get(team, t);
  const rshmemi_device_state_t* s = rshmemi_state();
  t->start = 0;
  t->stride = 1;
  t->size = rshmemi_state_i32(&s->n_pes);
  t->my_index = rshmemi_state_i32(&s->my_pe);
  return t->size > 0;
}

// The world PE that the i-th add goes to: members in order starting after ourselves, so the
// members do not all hit member 0 first.
RSHMEMI_DEV int rshmemi_barrier_target(const rshmemi_team_desc_t* t, uint32_t i) {
  return rshmemi_team_member(t, (int)(((uint32_t)t->my_index + 1 + i) % (uint32_t)t->size));
}

// Any scope (thread: the calling thread does all of it). `quiet`: barrier (complete all earlier
// operations: fence.sc.sys) rather than sync (fence.acq_rel.sys).
//
// Ordering: the leading group sync makes every thread's earlier operations precede, in causality
// order, the fence of each thread that then adds to an `arrive` word (bar.sync synchronizes the
// group's threads; causality order is transitive). A fence followed by a strong write (the
// relaxed red.sys) is a release pattern, so every member that acquires its `arrive` after our
// add sees all of it; the adds to one `arrive` word are atomics, so an acquire that reads a later
// add's result still synchronizes with ours (observation order runs through atomics). The first
// thread's acquire wait, then the trailing group sync, give every thread of the group what the
// other members released.
//
// Tickets: the first thread's acquire of `done >= e - 1` orders this instance's fence and adds
// after the previous instance's last acquire of `arrive` (the one that met its target), so no
// add of this instance can be what the previous one counted. `done = e` is a strong relaxed
// store: the acquire load that met `arrive >= e * size` already orders it after that read.
// Adds 1 to `pe`'s arrival word: by a system-scope reduction at `mapped` when it is mapped here,
// else through the proxy (a PE on another host), else the kernel stops (BAD_ADDRESS).
RSHMEMI_DEV void rshmemi_barrier_arrive(uint64_t* mapped, uint64_t* arrive, int pe) {
  if (mapped != 0) {
    rshmemi_relaxed_red_add_sys_u64(mapped, 1);
  } else {
    rshmemi_proxy_amo(rshmemi_proxy_or_fail(arrive, pe), arrive, RSHMEM_AMO_ADD, 8, 1, 0, false, pe);
  }
}

// Collective argument agreement riding on a barrier (the runtime's on-stream collectives;
// runtime/src/runtime/agree.rs packs and explains the words). `slots` is this PE's array of the
// team's agreement slots, two words {desc, seq} per member index, in symmetric memory. Before its
// fence, each arriving thread stores this PE's {desc, seq} into slot `my_index` of the member it
// arrives at: the stores precede the fence, so the member that acquires our arrival reads them
// from its own memory, and the agreement adds no round trip to the barrier. After the barrier,
// each member compares every slot with its own words and stops the kernel with
// ERROR_FLAG_MISMATCH on the first that differs (every member sees the same slots, so all of
// them stop); a member whose own desc carries the refused bit only arrives (its host reports
// its own error). A slot is rewritten only in the member's next agreed barrier of the team,
// which starts after a later barrier that every reader leaves after reading: the caller makes
// one (the collective's last barrier).
struct rshmemi_agree_t {
  uint64_t* slots;
  uint64_t desc;
  uint64_t seq;
};

// rshmemi_agree_t::desc bit that marks a member that refused its own arguments.
#define RSHMEMI_AGREE_REFUSED (1ull << 62)

// The threads of the group check the slots filled by an agreed barrier (see above).
RSHMEMI_DEV void rshmemi_agree_check(int team, const rshmemi_team_desc_t* t, const rshmemi_agree_t* a, int scope) {
  if ((a->desc & RSHMEMI_AGREE_REFUSED) != 0) return;
  const uint32_t nlanes = rshmemi_nlanes(scope);
  for (uint32_t i = rshmemi_lane(scope); i < (uint32_t)t->size; i += nlanes) {
    const uint64_t desc = rshmemi_relaxed_ld_sys_u64(a->slots + 2 * i);
    const uint64_t seq = rshmemi_relaxed_ld_sys_u64(a->slots + 2 * i + 1);
    if (desc != a->desc || seq != a->seq) {
      // addr: both call numbers (this PE's high, the member's low); cmp: the team (high) and
      // the member (low).
      rshmemi_fail(RSHMEM_ERROR_FLAG_MISMATCH, (const void*)(uintptr_t)((a->seq << 32) | (seq & 0xffffffffull)),
                   ((uint64_t)(uint32_t)team << 32) | (uint32_t)rshmemi_team_member(t, (int)i), a->desc, desc);
    }
  }
}

// Whether a barrier that stops names the members that had not entered it (1), or only counts
// them (0). Naming reads every member's ticket word in the failure path, which costs a
// 1024-thread kernel without launch bounds a few registers per thread (nvcc: block reductions
// 64 -> 66-70, no 1024-thread launch), so it is on where the launch is bounded: the Triton
// bitcode (triton-lib/build.py) and the runtime's own kernels (runtime/build.rs); CUDA C++ and
// Numba kernels keep the count.
#ifndef RSHMEM_BARRIER_NAMES_MISSING
#define RSHMEM_BARRIER_NAMES_MISSING 0
#endif

#if RSHMEM_BARRIER_NAMES_MISSING
// Stops a kernel whose wait for barrier instance `e` of `team` ended with `kind` (a debug
// timeout, a departed peer), with a record that also names the members that had not entered
// it: those whose ticket word, which counts the instances each member entered, is behind `e`
// (bits of their team index, the first 64). Out of line and given the team's id rather than its
// description, so that the barrier keeps no more values live across the wait than before.
RSHMEMI_COLD __attribute__((noreturn)) void rshmemi_barrier_fail(uint32_t kind, const uint64_t* arrive, uint64_t target,
                                                                 uint64_t seen, int team, uint64_t e) {
  rshmemi_team_desc_t t;
  uint64_t missing = 0;
  if (rshmemi_barrier_team(team, &t)) {
    for (int i = 0; i < t.size && i < 64; ++i) {
      const uint64_t* p = (const uint64_t*)rshmemi_peer_ptr(arrive + 1, rshmemi_team_member(&t, i));
      if (p != 0 && rshmemi_relaxed_ld_sys_u64(p) < e) missing |= 1ull << i;
    }
  }
  rshmemi_fail_missing(kind, arrive, (uint64_t)RSHMEM_CMP_GE, target, seen, missing);
}

// The last wait of barrier instance `e` of `team`: until `*arrive` counts every member's
// arrival. As rshmemi_wait_until, but a record it writes names the members that had not entered.
RSHMEMI_COLD void rshmemi_barrier_wait(const uint64_t* arrive, uint64_t target, int team, uint64_t e) {
  rshmemi_watch_t w = rshmemi_watch_begin();
  for (uint32_t i = 1;; ++i) {
    const uint64_t v = rshmemi_load_acquire(arrive);
    if (v >= target) return;
    uint64_t left = 0;
    const uint32_t kind = rshmemi_watch_verdict(&w, i, &left);
    if (kind != 0) rshmemi_barrier_fail(kind, arrive, target, kind == RSHMEM_ERROR_FLAG_PEER_LEFT ? left : v, team, e);
  }
}
#endif

RSHMEMI_DEV void rshmemi_team_barrier_agreed(int team, bool quiet, int scope, const rshmemi_agree_t* agree) {
  const rshmemi_device_state_t* s = rshmemi_state();
  rshmemi_team_desc_t t;
  const bool ok = rshmemi_barrier_team(team, &t);
  const uint64_t ws = rshmemi_state_u64(&s->barrier_ws);
  if (!ok || t.my_index < 0 || ws == 0) {
    rshmemi_fail(RSHMEM_ERROR_FLAG_BAD_ARGUMENT, (const void*)(uintptr_t)ws, (uint64_t)(int64_t)team, 0, 0);
  }
  uint64_t* arrive = (uint64_t*)(uintptr_t)(ws + RSHMEM_BARRIER_WS_BYTES_PER_TEAM * (uint64_t)team);
  uint64_t* ticket = arrive + 1;
  uint64_t* done = arrive + 2;
  const uint32_t lane = rshmemi_lane(scope);
  const uint32_t nlanes = rshmemi_nlanes(scope);
  const uint32_t size = (uint32_t)t.size;
  uint64_t e = 0;
  if (lane == 0) {
    e = rshmemi_relaxed_atom_add_u64(ticket, 1) + 1;
    rshmemi_wait_until<uint64_t>(done, RSHMEM_CMP_GE, e - 1);
  }
  // This thread's first target is translated before the sync, so its state loads overlap it.
  uint64_t* first = 0;
  if (lane < size) {
    first = (uint64_t*)rshmemi_peer_ptr(arrive, rshmemi_barrier_target(&t, lane));
  }
  // Members on other hosts: what this PE posted to the proxy completes first (barrier), and the
  // arrival is an atomic add the proxy runs after it.
  if (quiet && lane == 0) rshmemi_proxy_quiet();
  rshmemi_group_sync(scope);
  if (lane < size) {
    if (agree != 0) {
      for (uint32_t i = lane; i < size; i += nlanes) {
        uint64_t* slot = (uint64_t*)rshmemi_peer_ptr(agree->slots + 2 * t.my_index, rshmemi_barrier_target(&t, i));
        // Unmapped (a member on another host): no slot written, so that member reports a
        // mismatch; the runtime refuses such teams before it queues an agreed barrier.
        if (slot != 0) {
          rshmemi_relaxed_st_sys_u64(slot, agree->desc);
          rshmemi_relaxed_st_sys_u64(slot + 1, agree->seq);
        }
      }
    }
    if (quiet) rshmemi_fence_sc_sys();
    else rshmemi_fence_acq_rel_sys();
    rshmemi_barrier_arrive(first, arrive, rshmemi_barrier_target(&t, lane));
    for (uint32_t i = lane + nlanes; i < size; i += nlanes) {
      const int pe = rshmemi_barrier_target(&t, i);
      rshmemi_barrier_arrive((uint64_t*)rshmemi_peer_ptr(arrive, pe), arrive, pe);
    }
  }
  if (lane == 0) {
#if RSHMEM_BARRIER_NAMES_MISSING
    if (rshmemi_load_acquire(arrive) < e * (uint64_t)size) rshmemi_barrier_wait(arrive, e * (uint64_t)size, team, e);
#else
    rshmemi_wait_until<uint64_t>(arrive, RSHMEM_CMP_GE, e * (uint64_t)size);
#endif
    rshmemi_relaxed_st_sys_u64(done, e);
  }
  rshmemi_group_sync(scope);
  if (agree != 0) rshmemi_agree_check(team, &t, agree, scope);
}

RSHMEMI_DEV void rshmemi_team_barrier(int team, bool quiet, int scope) { rshmemi_team_barrier_agreed(team, quiet, scope, 0); }

// The exported barriers. NVSHMEM programs call the warp barriers from fewer than 32 lanes:
// Triton-distributed's own test guards them with `thread_idx / 32 == 0`, a true division that
// lane 0 alone passes, and NVSHMEM lets such a call through. Here the lanes that called elect one
// to run the barrier and then meet on their own mask; a whole warp keeps the parallel arrivals.
// Only at the API's entry, where the caller's lanes arrive together: inside the library a warp
// may be split between two points of a function, and the collectives' barriers keep the full
// warp's sync.
RSHMEMI_DEV void rshmemi_team_barrier_entry(int team, bool quiet, int scope) {
  if (scope == RSHMEMI_WARP) {
    const uint32_t called = rshmemi_activemask();
    if (called != 0xffffffffu) {
      if ((1u << rshmemi_laneid()) == (called & (0u - called))) {  // the lowest lane that called
        rshmemi_team_barrier_agreed(team, quiet, RSHMEMI_THREAD, 0);
      }
      __nvvm_bar_warp_sync(called);
      return;
    }
  }
  rshmemi_team_barrier_agreed(team, quiet, scope, 0);
}

#endif  // RSHMEM_BARRIER_DEVICE_H
