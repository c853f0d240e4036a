// rshmem's runtime kernels: what the host runtime launches on a caller's stream for the
// `*_on_stream` operations that need a GPU thread (barriers, small fcollects, reductions), and
// the one-thread kernels of the cuda backend (host-issued atomics, the on-stream SIGNAL_ADD).
// This file is the one source of every kernel the runtime launches.
//
// Built by runtime/build.rs with clang-19 into PTX, and by ptxas into a cubin per GPU
// architecture, which the runtime embeds, loads into its context at init (cuModuleLoadData) and
// publishes the device state into, like any module that links the device library. The kernels
// reuse the device library's headers, so a barrier on a stream, a barrier in a Triton kernel and
// a barrier from the host runtime all use the same never-reset words (barrier_device.h) and
// interoperate.
//
// Launch configurations (runtime/src/backend/cuda/stream_kernels.rs must match):
//   rshmemi_rt_barrier: 1 block of 32 threads (one warp; lane 0 runs the barrier).
//   rshmemi_rt_fcollect: 1 block of RSHMEMI_RT_FCOLLECT_THREADS threads.
//   rshmemi_rt_fcollect_staged: any number of blocks (the same on every PE and in every call) of
//                               RSHMEMI_RT_FCOLLECT_THREADS threads.
//   rshmemi_rt_reduce:  1 block of RSHMEMI_RT_REDUCE_THREADS threads (reductions and reduce-scatters).
//   rshmemi_rt_signal_wait: 1 thread.
//   rshmemi_amo32, rshmemi_amo64, rshmemi_signal_add: 1 thread
//                       (runtime/src/backend/cuda/kernels.rs).
//
// build.rs compiles this file four times: with -DRSHMEMI_RT_BARRIER (the barrier, a few
// hundred lines of PTX), with -DRSHMEMI_RT_FCOLLECT (the small-fcollect kernels, whose copy loops
// make thousands of lines), with -DRSHMEMI_RT_REDUCE (72 operator/dtype pairs) and with
// -DRSHMEMI_RT_OPS (the backend's one-thread kernels). All four are
// loaded at init, never on first use (runtime/src/backend/cuda/stream_kernels.rs says why); from cubins that
// costs milliseconds, while the driver's compiler took about 0.03 s, 0.4 s and 1.7 s of ptxas
// time for the three PTX modules.
#include "rshmem/api.h"
#include "rshmem/dtypes.h"

#include "collective_device.h"

// The module's own copy of the state (see libshmem_device.cu).
__device__ __attribute__((used)) rshmemi_device_state_t rshmemi_device_state_d;

#define RSHMEMI_RT_REDUCE_THREADS 512
#define RSHMEMI_RT_FCOLLECT_THREADS 512
// What CUDA's __launch_bounds__ expands to (the CUDA headers are not used here).
#define RSHMEMI_LAUNCH_BOUNDS(N) __attribute__((launch_bounds(N)))

#ifdef RSHMEMI_RT_BARRIER
// Barrier (with quiet) over `team`: every earlier operation of the stream and of this PE's
// kernels is visible to the team before any member's stream continues.
extern "C" __global__ void RSHMEMI_LAUNCH_BOUNDS(32) rshmemi_rt_barrier(int32_t team) {
  rshmemi_team_barrier(team, true, RSHMEMI_WARP);
}

// The barrier above that also agrees on a collective's arguments (barrier_device.h): the first
// step of the on-stream collectives that move data with the copy engine, and what a PE that
// refused its own arguments queues so that its peers fail instead of waiting for it.
extern "C" __global__ void RSHMEMI_LAUNCH_BOUNDS(32)
    rshmemi_rt_agree(int32_t team, uint64_t* slots, uint64_t desc, uint64_t seq) {
  const rshmemi_agree_t a = {slots, desc, seq};
  rshmemi_team_barrier_agreed(team, true, RSHMEMI_WARP, &a);
}

// On-stream signal wait (signal_wait_until_on_stream): work queued after it waits until
// `*addr <cmp> value`. One thread polls with acquire loads and watches the debug timeout and the
// runtime's word for departed peers (poll_device.h), so a stream that waits for a peer that left
// stops with a record naming the call, where a stream memory operation (cuStreamWaitValue64)
// would wait forever; and every comparison works, where the driver has only ==, >= and a mask.
// In this module, not the one-thread kernels' (RSHMEMI_RT_OPS): the wait reads the published
// device state, which that module, loaded before the state exists, never receives.
extern "C" __global__ void RSHMEMI_LAUNCH_BOUNDS(1) rshmemi_rt_signal_wait(const uint64_t* addr, int32_t cmp, uint64_t value) {
  rshmemi_watch_t w = rshmemi_watch_begin();
  for (uint32_t i = 1;; ++i) {
    const uint64_t v = rshmemi_load_acquire(addr);
    if (rshmemi_compare(v, cmp, value)) return;
    rshmemi_watch(&w, i, addr, cmp | (int)RSHMEM_WAIT_ON_STREAM, value, v);
  }
}
#endif  // RSHMEMI_RT_BARRIER

#ifdef RSHMEMI_RT_FCOLLECT
// One copy loop, out of line: inlined at each of its call sites it multiplies the PTX the
// driver compiles at load time.
static __device__ __attribute__((noinline)) void rshmemi_rt_copy(void* dst, const void* src, size_t n) {
  rshmemi_copy(dst, src, n, rshmemi_tid(), rshmemi_nthreads());
}
// fcollect of small blocks as ONE launch: team barrier, this block stores `source` into every
// member's `dest` over NVLink, team barrier (collective_device.h). The copy-engine form (barrier
// kernel, one copy per member, barrier kernel) costs a launch or a copy command per step, which
// is most of a small all-gather's time. One block only: each block's barrier would be an
// instance of its own (barrier_device.h), so the first barrier of one block could complete
// while another block of a peer had not yet reached the collective (and that peer's `dest`
// were not yet free to overwrite).
// Its first barrier agrees on the arguments (barrier_device.h; `slots`, `desc`, `seq`).
extern "C" __global__ void RSHMEMI_LAUNCH_BOUNDS(RSHMEMI_RT_FCOLLECT_THREADS)
    rshmemi_rt_fcollect(int32_t team, void* dest, const void* source, uint64_t nbytes, uint64_t* slots,
                        uint64_t desc, uint64_t seq) {
  const rshmemi_agree_t a = {slots, desc, seq};
  rshmemi_fcollectmem_agreed(team, dest, source, (size_t)nbytes, RSHMEMI_BLOCK, &a);
}

// fcollect over TEAM_WORLD of up to `slot_bytes` per PE, without barriers: every block pushes its
// slice of `source` into a staging slot on every peer, flags the slice there, waits for every
// peer's flag for the same slice, and copies the staged slices into `dest` locally. A barrier
// round trip before the pushes is what this saves: a peer's `dest` may still be read by that
// peer's earlier work, but its staging slot may not.
//
// Workspace (the runtime's, zeroed at init; `b` = block, `nb` = blocks, `np` = PEs):
//   epochs[b]                 calls block b has run on this PE (only block b touches it);
//   flags[src * nb + b]       the epoch of the last slice b that PE src staged here;
//   staging[(parity * np + src) * slot_bytes + ...]   slices staged here by PE src.
//   descs[((parity * np + src) * nb + b) * 2 + {0, 1}]   PE src's {desc, seq} of that call.
// Every PE runs every call with all `nb` blocks, so epochs[b] is the same call count on every PE
// and for every block, and call e uses parity e % 2. Why a slot is free when call e writes it:
// the writing block waited, in call e - 1, for the reader's block-b flag of call e - 1, which
// the reader raises inside its kernel of call e - 1; that kernel started after the reader's
// kernel of call e - 2, the last one to read parity e % 2, had finished (stream order).
//
// Argument agreement (runtime/src/runtime/agree.rs) rides on the flags: each flagging thread
// stores this PE's {desc, seq} into its block's desc slot on the peer before the release that
// raises the flag, and after the wait reads the peer's words beside its own flag; a difference
// stops the kernel (ERROR_FLAG_MISMATCH) before any staged data reaches `dest`. With the
// refused bit in `desc` (this PE refused its own arguments; `nbytes` is 0), the kernel only
// flags, so that the peers stop instead of waiting.
//
// A peer that queued this call as a collective that starts with an agreed barrier (its count
// too large to stage, or another collective) never raises our flag; its barrier stores its words
// into our TEAM_WORLD agreement slots (`agree`, barrier_device.h) before it arrives. So block
// 0's waits also watch the peer's slot: when it holds this call's number, the block completes
// the peer's barrier instance from our side (our words into its slot, then one arrival), so
// that the peer compares, finds our call and stops too; then it stops this kernel.
static __device__ __attribute__((noinline)) void rshmemi_rt_staged_wait(const uint64_t* flag, uint64_t e, int pe,
                                                                        uint64_t* agree, uint64_t desc, uint64_t seq) {
  const rshmemi_device_state_t* s = rshmemi_state();
  const int me = rshmemi_state_i32(&s->my_pe);
  rshmemi_watch_t w = rshmemi_watch_begin();
  for (uint32_t i = 1;; ++i) {
    const uint64_t v = rshmemi_ld_acquire_sys_u64(flag);
    if (v >= e) return;
    if (rshmemi_relaxed_ld_sys_u64(agree + 2 * pe + 1) == seq) {
      uint64_t* theirs = (uint64_t*)rshmemi_peer_or_fail(agree + 2 * me, pe);
      rshmemi_relaxed_st_sys_u64(theirs, desc);
      rshmemi_relaxed_st_sys_u64(theirs + 1, seq);
      rshmemi_fence_sc_sys();
      rshmemi_relaxed_red_add_sys_u64(rshmemi_peer_or_fail((void*)(uintptr_t)rshmemi_state_u64(&s->barrier_ws), pe), 1);
      rshmemi_fail(RSHMEM_ERROR_FLAG_MISMATCH, (const void*)(uintptr_t)((seq << 32) | (seq & 0xffffffffull)),
                   (uint64_t)pe, desc, rshmemi_relaxed_ld_sys_u64(agree + 2 * pe));
    }
    rshmemi_watch(&w, i, flag, RSHMEM_CMP_GE, e, v);
  }
}

extern "C" __global__ void RSHMEMI_LAUNCH_BOUNDS(RSHMEMI_RT_FCOLLECT_THREADS)
    rshmemi_rt_fcollect_staged(uint64_t* epochs, uint64_t* flags, char* staging, uint64_t slot_bytes, char* dest,
                               const char* source, uint64_t nbytes, uint64_t* descs, uint64_t desc, uint64_t seq,
                               uint64_t* agree) {
  const rshmemi_device_state_t* s = rshmemi_state();
  const int me = rshmemi_state_i32(&s->my_pe);
  const int np = rshmemi_state_i32(&s->n_pes);
  const uint32_t b = __nvvm_read_ptx_sreg_ctaid_x(), nb = __nvvm_read_ptx_sreg_nctaid_x();
  const uint32_t tid = rshmemi_tid();
  if (nbytes > slot_bytes) rshmemi_fail(RSHMEM_ERROR_FLAG_BAD_ARGUMENT, dest, nbytes, 0, 0);
  // This block's slice: 16-byte multiples, so the vector copies stay aligned when the ends are.
  const uint64_t chunk = ((nbytes + nb - 1) / nb + 15) & ~(uint64_t)15;
  const uint64_t lo = (uint64_t)b * chunk < nbytes ? (uint64_t)b * chunk : nbytes;
  const uint64_t len = (nbytes - lo < chunk ? nbytes - lo : chunk);

  __shared__ uint64_t epoch_s;
  if (tid == 0) {
    epoch_s = epochs[b] + 1;
    epochs[b] = epoch_s;
  }
  rshmemi_syncthreads();
  const uint64_t e = epoch_s;
  char* slot = staging + (uint64_t)((e & 1) * np + me) * slot_bytes + lo;
  for (int i = 1; i < np; ++i) {
    const int pe = (me + i) % np;
    rshmemi_rt_copy(rshmemi_peer_or_fail(slot, pe), source + lo, len);
  }
  // After the block sync, one release per peer covers every thread's stores (signal_device.h).
  rshmemi_syncthreads();
  const bool flagger = tid < (uint32_t)np && (int)tid != me;
  uint64_t* const my_desc = descs + (((e & 1) * np + me) * nb + b) * 2;
  if (flagger) {
    uint64_t* d = (uint64_t*)rshmemi_peer_or_fail(my_desc, (int)tid);
    rshmemi_relaxed_st_sys_u64(d, desc);
    rshmemi_relaxed_st_sys_u64(d + 1, seq);
    rshmemi_st_release_sys_u64((uint64_t*)rshmemi_peer_or_fail(flags + (uint64_t)me * nb + b, (int)tid), e);
  }
  if ((desc & RSHMEMI_AGREE_REFUSED) != 0) return;
  // Our own block while the flags travel: after the releases, so their fences do not wait for
  // these stores too.
  rshmemi_rt_copy(dest + (uint64_t)me * nbytes + lo, source + lo, len);
  if (flagger) {
    if (b == 0) rshmemi_rt_staged_wait(flags + (uint64_t)tid * nb + b, e, (int)tid, agree, desc, seq);
    else rshmemi_wait_until<uint64_t>(flags + (uint64_t)tid * nb + b, RSHMEM_CMP_GE, e);
    const uint64_t* theirs = descs + (((e & 1) * np + tid) * nb + b) * 2;
    const uint64_t their_desc = rshmemi_relaxed_ld_sys_u64(theirs), their_seq = rshmemi_relaxed_ld_sys_u64(theirs + 1);
    if (their_desc != desc || their_seq != seq) {
      rshmemi_fail(RSHMEM_ERROR_FLAG_MISMATCH, (const void*)(uintptr_t)((seq << 32) | (their_seq & 0xffffffffull)),
                   (uint64_t)tid, desc, their_desc);
    }
  }
  rshmemi_syncthreads();
  for (int src = 0; src < np; ++src) {
    if (src == me) continue;
    rshmemi_rt_copy(dest + (uint64_t)src * nbytes + lo, staging + (uint64_t)((e & 1) * np + src) * slot_bytes + lo,
                    len);
  }
}
#endif  // RSHMEMI_RT_FCOLLECT

#ifdef RSHMEMI_RT_REDUCE

// Element type codes passed by the host (`DType::kernel_code`): the `code` column of
// api/dtypes.toml, as RSHMEMI_FOR_*_DTYPE_CODES of the generated rshmem/dtypes.h.
// Operator codes follow `enum rshmemi_op` (collective_device.h):
//   0 sum   1 prod   2 min   3 max   4 and   5 or   6 xor
//
// The reduction is the device library's algorithm (collective_device.h, rshmemi_reduce): stage
// a chunk of `source` in this PE's part of coll_ws for the team (rshmemi_team_ws), barrier,
// combine every member's staged chunk in team
// order (so every PE computes the same floating-point result), barrier. The copy and the barrier
// are kept out of line here, once each: inlined into all 72 (op, dtype) pairs they made the PTX
// megabytes long, and the driver compiles the PTX when the module is loaded.

// Reports a bad argument (ERROR_FLAG_BAD_ARGUMENT) and stops the kernel; out of line, once.
static __device__ __attribute__((noinline)) void rshmemi_rt_fail_arg(const void* addr, uint64_t value) {
  rshmemi_fail(RSHMEM_ERROR_FLAG_BAD_ARGUMENT, addr, value, 0, 0);
}

static __device__ __attribute__((noinline)) void rshmemi_rt_stage(void* ws, const void* src, size_t n) {
  rshmemi_copy(ws, src, n, rshmemi_tid(), rshmemi_nthreads());
}

static __device__ __attribute__((noinline)) void rshmemi_rt_team_barrier(int32_t team) {
  rshmemi_team_barrier(team, true, RSHMEMI_BLOCK);
}

// The first barrier of a reduction, which also agrees on its arguments (barrier_device.h).
static __device__ __attribute__((noinline)) void rshmemi_rt_agreed_barrier(int32_t team, const rshmemi_agree_t* a) {
  rshmemi_team_barrier_agreed(team, true, RSHMEMI_BLOCK, a);
}

// The team of a reduction, after checking (once, out of line) that this PE is a member and
// reaches every member's copy of `ws` by load/store; stops the kernel otherwise.
static __device__ __attribute__((noinline)) rshmemi_team_desc_t rshmemi_rt_reduce_team(int32_t team, const void* ws) {
  const rshmemi_team_desc_t t = rshmemi_team_or_fail(team);
  for (int i = 0; i < t.size; ++i) rshmemi_peer_or_fail(ws, rshmemi_team_member(&t, i));
  return t;
}

// Combines element e of every member's staged chunk (each reachable: rshmemi_rt_reduce_team).
template <int OP, typename T>
RSHMEMI_DEV T rshmemi_rt_combine(const rshmemi_team_desc_t* t, const T* ws, size_t e) {
  typedef rshmemi_conv<T> C;
  typedef typename C::acc A;
  A acc = C::widen(((const T*)rshmemi_peer_ptr(ws, rshmemi_team_member(t, 0)))[e]);
  _Pragma("unroll 1") for (int i = 1; i < t->size; ++i) {
    const T* peer = (const T*)rshmemi_peer_ptr(ws, rshmemi_team_member(t, i));
    acc = rshmemi_combine<OP, A>::f(acc, C::widen(peer[e]));
  }
  return C::narrow(acc);
}

// The first round agrees on the arguments; it runs also for nelems == 0, so that a member
// that passed 0 meets the others' agreement instead of leaving them waiting.
// With `scatter` (a reduce-scatter: `source` holds one block of nelems per member) each round
// stages the same element range of every block, block j at ws + j * m, and this PE combines
// block my_index of every member's workspace, as rshmemi_reduce does in kernels. A runtime flag,
// not a template parameter, so that the 72 (op, dtype) bodies are not compiled twice.
template <int OP, typename T>
RSHMEMI_DEV void rshmemi_rt_reduce_impl(int32_t team, T* dest, const T* source, size_t nelems, bool scatter,
                                        const rshmemi_agree_t* agree) {
  const rshmemi_device_state_t* s = rshmemi_state();
  T* ws = (T*)rshmemi_team_ws(team);
  if (ws == 0) rshmemi_rt_fail_arg(dest, s->coll_ws_size);
  const rshmemi_team_desc_t t = rshmemi_rt_reduce_team(team, ws);
  const size_t blocks = scatter ? (size_t)t.size : 1;
  const size_t mine = scatter ? (size_t)t.my_index : 0;
  const size_t chunk = (size_t)(s->coll_ws_size / sizeof(T)) / blocks;
  if (chunk == 0) rshmemi_rt_fail_arg(dest, s->coll_ws_size);
  const uint32_t lane = rshmemi_tid(), nlanes = rshmemi_nthreads();
  for (size_t off = 0; off == 0 || off < nelems; off += chunk) {
    const size_t m = nelems - off < chunk ? nelems - off : chunk;
    rshmemi_syncthreads();
    _Pragma("unroll 1") for (size_t j = 0; j < blocks; ++j) rshmemi_rt_stage(ws + j * m, source + j * nelems + off, m * sizeof(T));
    // Every member's chunk is staged (and, the first time, every member agreed).
    if (off == 0) rshmemi_rt_agreed_barrier(team, agree);
    else rshmemi_rt_team_barrier(team);
    const T* at = ws + mine * m;
    _Pragma("unroll 1") for (size_t e = lane; e < m; e += nlanes) dest[off + e] = rshmemi_rt_combine<OP, T>(&t, at, e);
    rshmemi_rt_team_barrier(team);  // nobody restages before everyone has read
  }
}

template <int OP>
RSHMEMI_DEV void rshmemi_rt_reduce_typed(int32_t team, int32_t dtype, void* dest, const void* source, uint64_t n,
                                         bool scatter, const rshmemi_agree_t* a) {
#define RSHMEMI_RT_CASE(CODE, T)                                                             \
  case CODE:                                                                                 \
    rshmemi_rt_reduce_impl<OP, T>(team, (T*)dest, (const T*)source, (size_t)n, scatter, a);  \
    return;
  switch (dtype) {
    RSHMEMI_FOR_INT_DTYPE_CODES(RSHMEMI_RT_CASE)
    default: break;
  }
  if constexpr (OP < RSHMEMI_AND) {
    switch (dtype) {
      RSHMEMI_FOR_FLOAT_DTYPE_CODES(RSHMEMI_RT_CASE)
      default: break;
    }
  }
#undef RSHMEMI_RT_CASE
  // The host validates the pair first; reaching this is a runtime bug, reported, not ignored.
  rshmemi_rt_fail_arg(dest, (uint64_t)(int64_t)dtype);
}

// dest[i] = op over the team's source[i] (scatter 0), or over the team's
// source[my_index * nelems + i] (scatter 1, a reduce-scatter), staged through coll_ws (dest may
// equal source, or a whole block of it); the first barrier agrees on the arguments (`slots`,
// `desc`, `seq`: barrier_device.h).
extern "C" __global__ void RSHMEMI_LAUNCH_BOUNDS(RSHMEMI_RT_REDUCE_THREADS)
    rshmemi_rt_reduce(int32_t team, int32_t op, int32_t dtype, int32_t scatter, void* dest, const void* source,
                      uint64_t nelems, uint64_t* slots, uint64_t desc, uint64_t seq) {
  const rshmemi_agree_t agree = {slots, desc, seq};
  const rshmemi_agree_t* a = &agree;
  const bool sc = scatter != 0;
  switch (op) {
    case RSHMEMI_SUM: rshmemi_rt_reduce_typed<RSHMEMI_SUM>(team, dtype, dest, source, nelems, sc, a); return;
    case RSHMEMI_PROD: rshmemi_rt_reduce_typed<RSHMEMI_PROD>(team, dtype, dest, source, nelems, sc, a); return;
    case RSHMEMI_MIN: rshmemi_rt_reduce_typed<RSHMEMI_MIN>(team, dtype, dest, source, nelems, sc, a); return;
    case RSHMEMI_MAX: rshmemi_rt_reduce_typed<RSHMEMI_MAX>(team, dtype, dest, source, nelems, sc, a); return;
    case RSHMEMI_AND: rshmemi_rt_reduce_typed<RSHMEMI_AND>(team, dtype, dest, source, nelems, sc, a); return;
    case RSHMEMI_OR: rshmemi_rt_reduce_typed<RSHMEMI_OR>(team, dtype, dest, source, nelems, sc, a); return;
    case RSHMEMI_XOR: rshmemi_rt_reduce_typed<RSHMEMI_XOR>(team, dtype, dest, source, nelems, sc, a); return;
    default: rshmemi_rt_fail_arg(dest, (uint64_t)(int64_t)op);
  }
}
#endif  // RSHMEMI_RT_REDUCE

#ifdef RSHMEMI_RT_OPS
// Host-issued atomics on symmetric memory and the on-stream SIGNAL_ADD, one thread each.
//
// Memory ordering follows the PTX memory model's mapping of C++ atomics (PTX ISA "Memory
// Consistency Model"): a sequentially consistent read-modify-write is `fence.sc.sys` then an
// `atom.acq_rel.sys`, an acquire load is `ld.acquire.sys`. `.sys` scope makes each operation
// coherent with the host and every peer GPU, which host-issued SHMEM atomics need. The operation
// codes are RSHMEM_AMO_* of device_state.h, generated from runtime/src/device_state.rs, which
// the launch code (runtime/src/backend/cuda/kernels.rs) uses too.

// atom.acq_rel.sys.<OP> for 32-bit (register constraint "r") and 64-bit ("l") words.
#define RSHMEMI_RT_ATOM(NAME, OP32, OP64)                                                      \
  static __device__ __attribute__((always_inline)) inline uint32_t NAME(uint32_t* p, uint32_t v) { \
    uint32_t old;                                                                              \
    asm volatile("atom.acq_rel.sys." OP32 " %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory"); \
    return old;                                                                                \
  }                                                                                            \
  static __device__ __attribute__((always_inline)) inline uint64_t NAME(uint64_t* p, uint64_t v) { \
    uint64_t old;                                                                              \
    asm volatile("atom.acq_rel.sys." OP64 " %0, [%1], %2;" : "=l"(old) : "l"(p), "l"(v) : "memory"); \
    return old;                                                                                \
  }
RSHMEMI_RT_ATOM(rshmemi_rt_atom_exch, "exch.b32", "exch.b64")
RSHMEMI_RT_ATOM(rshmemi_rt_atom_add, "add.u32", "add.u64")
RSHMEMI_RT_ATOM(rshmemi_rt_atom_and, "and.b32", "and.b64")
RSHMEMI_RT_ATOM(rshmemi_rt_atom_or, "or.b32", "or.b64")
RSHMEMI_RT_ATOM(rshmemi_rt_atom_xor, "xor.b32", "xor.b64")
#undef RSHMEMI_RT_ATOM

static __device__ __attribute__((always_inline)) inline uint32_t rshmemi_rt_atom_cas(uint32_t* p, uint32_t c, uint32_t v) {
  uint32_t old;
  asm volatile("atom.acq_rel.sys.cas.b32 %0, [%1], %2, %3;" : "=r"(old) : "l"(p), "r"(c), "r"(v) : "memory");
  return old;
}
static __device__ __attribute__((always_inline)) inline uint64_t rshmemi_rt_atom_cas(uint64_t* p, uint64_t c, uint64_t v) {
  uint64_t old;
  asm volatile("atom.acq_rel.sys.cas.b64 %0, [%1], %2, %3;" : "=l"(old) : "l"(p), "l"(c), "l"(v) : "memory");
  return old;
}

// The old value of the word at `addr` after operation `op` with operands `a` (the operand, or the
// expected value of compare-swap) and `b` (compare-swap's new value). An unknown code does
// nothing and reports 0: the launch code never sends one.
template <typename T>
RSHMEMI_DEV T rshmemi_rt_amo(T* addr, uint32_t op, T a, T b) {
  if (op == RSHMEM_AMO_LOAD_ACQUIRE) return rshmemi_ld_acquire_sys(addr);
  rshmemi_fence_sc_sys();
  switch (op) {
    case RSHMEM_AMO_FETCH: return rshmemi_ld_acquire_sys(addr);
    case RSHMEM_AMO_SET:
    case RSHMEM_AMO_SWAP: return rshmemi_rt_atom_exch(addr, a);
    case RSHMEM_AMO_COMPARE_SWAP: return rshmemi_rt_atom_cas(addr, a, b);
    case RSHMEM_AMO_ADD: return rshmemi_rt_atom_add(addr, a);
    case RSHMEM_AMO_AND: return rshmemi_rt_atom_and(addr, a);
    case RSHMEM_AMO_OR: return rshmemi_rt_atom_or(addr, a);
    case RSHMEM_AMO_XOR: return rshmemi_rt_atom_xor(addr, a);
    default: return 0;
  }
}

// *out = the old value of the 64-bit word at addr (see rshmemi_rt_amo).
extern "C" __global__ void RSHMEMI_LAUNCH_BOUNDS(1)
    rshmemi_amo64(void* addr, uint32_t op, uint64_t a, uint64_t b, uint64_t* out) {
  *out = rshmemi_rt_amo<uint64_t>((uint64_t*)addr, op, a, b);
}

// As rshmemi_amo64 on a 32-bit word: a and b are truncated to 32 bits, *out receives the old
// value zero-extended to 64 bits.
extern "C" __global__ void RSHMEMI_LAUNCH_BOUNDS(1)
    rshmemi_amo32(void* addr, uint32_t op, uint64_t a, uint64_t b, uint64_t* out) {
  *out = rshmemi_rt_amo<uint32_t>((uint32_t*)addr, op, (uint32_t)a, (uint32_t)b);
}

// On-stream SIGNAL_ADD. The fence makes every write that stream order put before this kernel
// (puts by the copy engine or by kernels) visible at system scope before the add, so a peer that
// sees the new signal value also sees the data.
extern "C" __global__ void RSHMEMI_LAUNCH_BOUNDS(1) rshmemi_signal_add(uint64_t* addr, uint64_t value) {
  rshmemi_fence_sc_sys();
  rshmemi_red_add_release_sys_u64(addr, value);
}
#endif  // RSHMEMI_RT_OPS
