// Error records and bounded waits.
//
// A wait spins on an acquire load at system scope. When the runtime set
// `debug_wait_timeout_ns` (RSHMEM_DEBUG_WAIT_TIMEOUT_MS), a wait that spins longer writes an
// rshmemi_error_record_t into the host-mapped `error_buf` (PE, address, comparison, expected and
// last seen value) and stops the kernel with `trap`, so the host reports it instead of hanging.
#ifndef RSHMEM_POLL_DEVICE_H
#define RSHMEM_POLL_DEVICE_H

#include "atomic_device.h"

// Writes one error record (first failing thread only) and traps. Never returns. Out of line
// (RSHMEMI_COLD): every caller's check is a compare and a call.
//
// A thread that lost the race for the record waits (boundedly) until the winner has completed
// it before trapping: a trap stops every thread of the kernel, so a loser that trapped at once
// (many threads failing together, e.g. every thread of a block calling a thread-scope put to a
// bad address) could stop the winner mid-record, and the host would find no error to report.
//
// `missing`: for a team barrier's wait, the members (bits of their team index) that had not
// entered it (rshmemi_barrier_missing); 0 otherwise.
RSHMEMI_COLD __attribute__((noreturn)) void rshmemi_fail_missing(uint32_t kind, const void* addr, uint64_t cmp, uint64_t expected,
                                                                 uint64_t seen, uint64_t missing) {
  const rshmemi_device_state_t* s = rshmemi_state();
  if (s->error_buf != 0) {
    rshmemi_error_record_t* r = (rshmemi_error_record_t*)s->error_buf;
    if (rshmemi_relaxed_atom_cas_b32(&r->flag, 0, RSHMEM_ERROR_FLAG_WRITING) == 0) {
      rshmemi_relaxed_st_sys_u32((uint32_t*)&r->pe, (uint32_t)s->my_pe);
      rshmemi_relaxed_st_sys_u64(&r->addr, (uint64_t)(uintptr_t)addr);
      rshmemi_relaxed_st_sys_u64(&r->cmp, cmp);
      rshmemi_relaxed_st_sys_u64(&r->expected, expected);
      rshmemi_relaxed_st_sys_u64(&r->seen, seen);
      rshmemi_relaxed_st_sys_u64(&r->missing, missing);
      // The kind goes last with release: a host that sees it sees the whole record.
      rshmemi_st_release_sys_u32(&r->flag, kind);
    } else {
      // About a million polls of host memory: far longer than five stores take, and short
      // enough that a winner that never finishes (it cannot) would not hang the kernel.
      for (uint32_t i = 0; i < (1u << 20) && rshmemi_ld_acquire_sys_u32(&r->flag) == RSHMEM_ERROR_FLAG_WRITING; ++i) {
      }
    }
  }
  rshmemi_trap();
}

RSHMEMI_COLD __attribute__((noreturn)) void rshmemi_fail(uint32_t kind, const void* addr, uint64_t cmp, uint64_t expected, uint64_t seen) {
  rshmemi_fail_missing(kind, addr, cmp, expected, seen, 0);
}

// `value <cmp> target` for a CMP_* constant; an unknown constant stops the kernel.
template <typename T>
RSHMEMI_DEV bool rshmemi_compare(T value, int cmp, T target) {
  switch (cmp) {
    case RSHMEM_CMP_EQ: return value == target;
    case RSHMEM_CMP_NE: return value != target;
    case RSHMEM_CMP_GT: return value > target;
    case RSHMEM_CMP_LE: return value <= target;
    case RSHMEM_CMP_LT: return value < target;
    case RSHMEM_CMP_GE: return value >= target;
    default: rshmemi_fail(RSHMEM_ERROR_FLAG_BAD_ARGUMENT, 0, (uint64_t)(int64_t)cmp, 0, 0); return true;
  }
}

// One acquire load of a 32- or 64-bit integer word.
template <typename T>
RSHMEMI_DEV T rshmemi_load_acquire(const T* p) {
  typedef typename rshmemi_bits<T>::type B;
  return (T)rshmemi_ld_acquire_sys((const B*)p);
}

// Whether the timeout clock is due for a look on poll number `i` (1, 2, ...): every 64th poll,
// so a debug run does not pay a %globaltimer read per poll either (the proxy's waits and the
// runtime's staged collectives, which the proxy's or the runtime's own failure ends otherwise).
RSHMEMI_DEV bool rshmemi_timer_due(uint32_t i) { return (i & 63u) == 0; }

// How much later than the first of its GPU's sharers this PE's waits stop (stop_delay_ms, 0 on
// a GPU of its own): kernels of processes sharing a GPU that trap at the same moment can leave
// one running for good.
RSHMEMI_DEV uint64_t rshmemi_stop_delay_ns() {
  return (uint64_t)(uint32_t)rshmemi_state_i32((const int32_t*)&rshmemi_state()->stop_delay_ms) * 1000000ull;
}

// The debug timeout (0 = none) plus this PE's stop delay, read once per wait with invariant
// loads (device.h).
RSHMEMI_DEV uint64_t rshmemi_wait_timeout() {
  const uint64_t t = rshmemi_state_u64(&rshmemi_state()->debug_wait_timeout_ns);
  return t == 0 ? 0 : t + rshmemi_stop_delay_ns();
}

// What a long wait watches between polls, every RSHMEMI_WATCH_EVERY polls (a %globaltimer read
// and one load of host memory, so a wait pays neither per poll): the debug timeout
// (RSHMEM_DEBUG_WAIT_TIMEOUT_MS, 0 = none) and the runtime's word that says a peer left the job
// (DeviceState::peer_left). A wait still unsatisfied RSHMEM_PEER_LEFT_GRACE_NS (plus the stop
// delay) after it saw a departure stops the kernel with a record naming the wait (ERROR_FLAG_PEER_LEFT) instead of
// waiting for a PE that is gone.
#define RSHMEMI_WATCH_EVERY 256u

struct rshmemi_watch_t {
  uint64_t start;      // when the wait began (a debug timeout's origin)
  uint64_t timeout;    // RSHMEM_DEBUG_WAIT_TIMEOUT_MS in ns, 0 = none
  uint64_t left_seen;  // when this wait first saw a departure, 0 = not yet
};

RSHMEMI_DEV rshmemi_watch_t rshmemi_watch_begin() {
  rshmemi_watch_t w;
  w.timeout = rshmemi_wait_timeout();
  w.start = rshmemi_globaltimer();
  w.left_seen = 0;
  return w;
}

// What poll number `i` (1, 2, ...) of a wait found: 0 (keep waiting), or the ERROR_FLAG_* to stop
// with; for a departure `*left` gets the peer_left word.
RSHMEMI_DEV uint32_t rshmemi_watch_verdict(rshmemi_watch_t* w, uint32_t i, uint64_t* left) {
  if ((i & (RSHMEMI_WATCH_EVERY - 1u)) != 0) return 0;
  const uint64_t now = rshmemi_globaltimer();
  if (w->timeout != 0 && now - w->start > w->timeout) return RSHMEM_ERROR_FLAG_WAIT_TIMEOUT;
  const uint64_t word = rshmemi_state_u64(&rshmemi_state()->peer_left);
  if (word == 0) return 0;
  *left = rshmemi_relaxed_ld_sys_u64((const uint64_t*)(uintptr_t)word);
  if (*left == 0) return 0;
  if (w->left_seen == 0) {
    w->left_seen = now;
  } else if (now - w->left_seen > RSHMEM_PEER_LEFT_GRACE_NS + rshmemi_stop_delay_ns()) {
    return RSHMEM_ERROR_FLAG_PEER_LEFT;
  }
  return 0;
}

// Poll number `i` (1, 2, ...) of a wait at `p` for `<cmp> target` that last read `v`: stops the
// kernel with a record when the watch says so.
RSHMEMI_DEV void rshmemi_watch(rshmemi_watch_t* w, uint32_t i, const void* p, int cmp, uint64_t target, uint64_t v) {
  uint64_t left = 0;
  const uint32_t kind = rshmemi_watch_verdict(w, i, &left);
  if (kind != 0) rshmemi_fail(kind, p, (uint64_t)(int64_t)cmp, target, kind == RSHMEM_ERROR_FLAG_PEER_LEFT ? left : v);
}

// The waiting part of rshmemi_wait_until, out of line: a wait that the first load did not
// satisfy.
template <typename T>
RSHMEMI_COLD T rshmemi_wait_until_slow(const T* p, int cmp, T target) {
  rshmemi_watch_t w = rshmemi_watch_begin();
  for (uint32_t i = 1;; ++i) {
    const T v = rshmemi_load_acquire(p);
    if (rshmemi_compare(v, cmp, target)) return v;
    rshmemi_watch(&w, i, p, cmp, (uint64_t)target, (uint64_t)v);
  }
}

// Spins until `*p <cmp> target`; returns the value that satisfied it. Acquire: memory written
// before the release that produced this value is visible after return. Thread scope.
//
// Every poll is an acquire load and the returned value is the one that acquire load read, so
// the synchronization is with the writer of the returned value (polling relaxed and re-reading
// with acquire could return a value that no acquire read saw). Inline there is one load and
// compare; a wait that must spin does so in a function of its own (rshmemi_wait_until_slow),
// which watches the debug timeout and departed peers.
template <typename T>
RSHMEMI_DEV T rshmemi_wait_until(const T* p, int cmp, T target) {
  const T v = rshmemi_load_acquire(p);
  if (rshmemi_compare(v, cmp, target)) return v;
  return rshmemi_wait_until_slow<T>(p, cmp, target);
}

// Whether `status` (may be null) excludes entry i.
RSHMEMI_DEV bool rshmemi_excluded(const int32_t* status, size_t i) { return status != 0 && status[i] != 0; }

// test_all: 1 if every included entry satisfies the condition (also when none is included).
template <typename T>
RSHMEMI_DEV int32_t rshmemi_test_all(const T* ivars, size_t n, const int32_t* status, int cmp, T target) {
  for (size_t i = 0; i < n; ++i) {
    if (!rshmemi_excluded(status, i) && !rshmemi_compare(rshmemi_load_acquire(ivars + i), cmp, target)) return 0;
  }
  return 1;
}

// Where test_any / wait_until_any start scanning: a per-module counter that every call advances
// (as NVSHMEM does), so that an entry that stays ready does not hide the others from a caller
// that loops over test_any and handles one index at a time (the OpenSHMEM spec's example would
// otherwise spin on the lowest ready index forever). Relaxed, GPU scope: only the rotation
// depends on it, and it never leaves this GPU. A CUDA C++ program that compiles the library as
// source (rshmem_cuda.h) has one counter per .cu file (static), which rotates just as well.
static __device__ unsigned long long rshmemi_any_start_d;

RSHMEMI_DEV size_t rshmemi_any_start(size_t n) {
  unsigned long long t;
  asm volatile("atom.relaxed.gpu.global.add.u64 %0, [%1], 1;" : "=l"(t) : "l"(&rshmemi_any_start_d) : "memory");
  return (size_t)(t % n);
}

// test_any: index of an included entry that satisfies the condition, or -1. The scan starts at
// `start` (< n) and wraps around.
template <typename T>
RSHMEMI_DEV int64_t rshmemi_test_any_from(const T* ivars, size_t n, const int32_t* status, int cmp, T target, size_t start) {
  size_t i = start;
  for (size_t k = 0; k < n; ++k) {
    if (!rshmemi_excluded(status, i) && rshmemi_compare(rshmemi_load_acquire(ivars + i), cmp, target)) return (int64_t)i;
    i = i + 1 == n ? 0 : i + 1;
  }
  return -1;
}

template <typename T>
RSHMEMI_DEV int64_t rshmemi_test_any(const T* ivars, size_t n, const int32_t* status, int cmp, T target) {
  if (n == 0) return -1;
  return rshmemi_test_any_from<T>(ivars, n, status, cmp, target, rshmemi_any_start(n));
}

// test_some: how many included entries satisfy the condition (a count, which no scan order
// changes).
template <typename T>
RSHMEMI_DEV int64_t rshmemi_test_some(const T* ivars, size_t n, const int32_t* status, int cmp, T target) {
  int64_t count = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!rshmemi_excluded(status, i) && rshmemi_compare(rshmemi_load_acquire(ivars + i), cmp, target)) ++count;
  }
  return count;
}

// The vector tests by kind, for the vector waits: KIND_ALL answers 1 or 0 (none: 0), KIND_ANY an
// index scanned from `start` or -1, KIND_SOME a count (none: 0).
enum { RSHMEMI_KIND_ALL = 0, RSHMEMI_KIND_ANY = 1, RSHMEMI_KIND_SOME = 2 };
template <typename T, int KIND>
RSHMEMI_DEV int64_t rshmemi_vector_test(const T* ivars, size_t n, const int32_t* status, int cmp, T target, size_t start) {
  if constexpr (KIND == RSHMEMI_KIND_ALL) return rshmemi_test_all<T>(ivars, n, status, cmp, target);
  else if constexpr (KIND == RSHMEMI_KIND_ANY) return rshmemi_test_any_from<T>(ivars, n, status, cmp, target, start);
  else return rshmemi_test_some<T>(ivars, n, status, cmp, target);
}

// The waiting part of rshmemi_wait_vector, out of line (as rshmemi_wait_until_slow). Scalars
// only: a lambda passed by value to an out-of-line function crashed NVPTX's instruction
// selection in Triton's LLVM.
template <typename T, int KIND>
RSHMEMI_COLD int64_t rshmemi_wait_vector_slow(const T* ivars, size_t n, const int32_t* status, int cmp, T target,
                                              size_t start, int64_t none) {
  rshmemi_watch_t w = rshmemi_watch_begin();
  for (uint32_t i = 1;; ++i) {
    const int64_t r = rshmemi_vector_test<T, KIND>(ivars, n, status, cmp, target, start);
    if (r != none) return r;
    if ((i & (RSHMEMI_WATCH_EVERY - 1u)) == 0) {
      rshmemi_watch(&w, i, ivars, cmp, (uint64_t)target, (uint64_t)rshmemi_load_acquire(ivars));
    }
  }
}

// The vector waits poll the vector test until it reports progress (a result other than `none`),
// watched as rshmemi_wait_until's (the record names the first array element).
template <typename T, int KIND>
RSHMEMI_DEV int64_t rshmemi_wait_vector(const T* ivars, size_t n, const int32_t* status, int cmp, T target, size_t start,
                                        int64_t none) {
  const int64_t r = rshmemi_vector_test<T, KIND>(ivars, n, status, cmp, target, start);
  if (r != none) return r;
  return rshmemi_wait_vector_slow<T, KIND>(ivars, n, status, cmp, target, start, none);
}

#endif  // RSHMEM_POLL_DEVICE_H
