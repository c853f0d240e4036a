// The exported device API: every rshmem_* / rshmemx_* function of triton-lib/api.toml.
//
// Each function is a thin C-linkage wrapper over the *_device.h templates. rshmem/api.h (generated
// from the table) is included first, so a definition whose signature differs from the table does
// not compile. Functions SHMEM declares void return 0: Triton's extern calls need a result.
#include "rshmem/api.h"

#include "collective_device.h"

// The state every module that links this library carries; the runtime writes it after loading
// the module (cuModuleGetGlobal). `used` + llvm.compiler.used keep it in the bitcode even though
// nothing in this file takes its address (device.h declares it).
#ifndef RSHMEMI_DEVICE_STATE_DECLARED
__device__ __attribute__((used)) rshmemi_device_state_t rshmemi_device_state_d;
#endif

// ---------------------------------------------------------------- query and pointers
RSHMEM_EXPORT int32_t rshmem_my_pe(void) { return rshmemi_state()->my_pe; }
RSHMEM_EXPORT int32_t rshmem_n_pes(void) { return rshmemi_state()->n_pes; }
RSHMEM_EXPORT int32_t rshmem_team_my_pe(int32_t team) { return rshmemi_team_my_pe(team); }
RSHMEM_EXPORT int32_t rshmem_team_n_pes(int32_t team) { return rshmemi_team_n_pes(team); }
RSHMEM_EXPORT int32_t rshmem_team_translate_pe(int32_t src_team, int32_t pe, int32_t dest_team) {
  return rshmemi_team_translate_pe(src_team, pe, dest_team);
}
RSHMEM_EXPORT void* rshmem_ptr(const void* ptr, int32_t pe) { return rshmemi_peer_ptr(ptr, pe); }

// ---------------------------------------------------------------- typed RMA
RSHMEM_EXPORT int32_t rshmem_int_p(int32_t* dest, int32_t value, int32_t pe) {
  rshmemi_p<int32_t>(dest, value, pe);
  return 0;
}

// The dtype lists (RSHMEMI_FOR_ALL_DTYPES, _INT_, _AMO_) are generated from api/dtypes.toml.
#include "rshmem/dtypes.h"

#define RSHMEMI_TYPED_RMA(N, T)                                                                              \
  RSHMEM_EXPORT int32_t rshmem_##N##_p(T* dest, T value, int32_t pe) {                                       \
    rshmemi_p<T>(dest, value, pe);                                                                           \
    return 0;                                                                                                \
  }                                                                                                          \
  RSHMEM_EXPORT T rshmem_##N##_g(const T* source, int32_t pe) { return rshmemi_g<T>(source, pe); }           \
  RSHMEM_EXPORT int32_t rshmem_##N##_put(T* dest, const T* source, uint64_t nelems, int32_t pe) {            \
    rshmemi_putmem(dest, source, nelems * sizeof(T), pe, RSHMEMI_THREAD);                                    \
    return 0;                                                                                                \
  }                                                                                                          \
  RSHMEM_EXPORT int32_t rshmemx_##N##_put_warp(T* dest, const T* source, uint64_t nelems, int32_t pe) {      \
    rshmemi_putmem(dest, source, nelems * sizeof(T), pe, RSHMEMI_WARP);                                      \
    return 0;                                                                                                \
  }                                                                                                          \
  RSHMEM_EXPORT int32_t rshmemx_##N##_put_block(T* dest, const T* source, uint64_t nelems, int32_t pe) {     \
    rshmemi_putmem(dest, source, nelems * sizeof(T), pe, RSHMEMI_BLOCK);                                     \
    return 0;                                                                                                \
  }                                                                                                          \
  RSHMEM_EXPORT int32_t rshmem_##N##_get(T* dest, const T* source, uint64_t nelems, int32_t pe) {            \
    rshmemi_getmem(dest, source, nelems * sizeof(T), pe, RSHMEMI_THREAD);                                    \
    return 0;                                                                                                \
  }                                                                                                          \
  RSHMEM_EXPORT int32_t rshmemx_##N##_get_warp(T* dest, const T* source, uint64_t nelems, int32_t pe) {      \
    rshmemi_getmem(dest, source, nelems * sizeof(T), pe, RSHMEMI_WARP);                                      \
    return 0;                                                                                                \
  }                                                                                                          \
  RSHMEM_EXPORT int32_t rshmemx_##N##_get_block(T* dest, const T* source, uint64_t nelems, int32_t pe) {     \
    rshmemi_getmem(dest, source, nelems * sizeof(T), pe, RSHMEMI_BLOCK);                                     \
    return 0;                                                                                                \
  }
RSHMEMI_FOR_ALL_DTYPES(RSHMEMI_TYPED_RMA)

// ---------------------------------------------------------------- byte RMA
#define RSHMEMI_BYTE_RMA(NAME, FN, SCOPE)                                                  \
  RSHMEM_EXPORT int32_t NAME(void* dest, const void* source, uint64_t nbytes, int32_t pe) { \
    FN(dest, source, nbytes, pe, SCOPE);                                                   \
    return 0;                                                                              \
  }
RSHMEMI_BYTE_RMA(rshmem_putmem, rshmemi_putmem, RSHMEMI_THREAD)
RSHMEMI_BYTE_RMA(rshmem_putmem_nbi, rshmemi_putmem, RSHMEMI_THREAD)
RSHMEMI_BYTE_RMA(rshmemx_putmem_warp, rshmemi_putmem, RSHMEMI_WARP)
RSHMEMI_BYTE_RMA(rshmemx_putmem_nbi_warp, rshmemi_putmem, RSHMEMI_WARP)
RSHMEMI_BYTE_RMA(rshmemx_putmem_block, rshmemi_putmem, RSHMEMI_BLOCK)
RSHMEMI_BYTE_RMA(rshmemx_putmem_nbi_block, rshmemi_putmem, RSHMEMI_BLOCK)
RSHMEMI_BYTE_RMA(rshmem_getmem, rshmemi_getmem, RSHMEMI_THREAD)
RSHMEMI_BYTE_RMA(rshmem_getmem_nbi, rshmemi_getmem, RSHMEMI_THREAD)
RSHMEMI_BYTE_RMA(rshmemx_getmem_warp, rshmemi_getmem, RSHMEMI_WARP)
RSHMEMI_BYTE_RMA(rshmemx_getmem_nbi_warp, rshmemi_getmem, RSHMEMI_WARP)
RSHMEMI_BYTE_RMA(rshmemx_getmem_block, rshmemi_getmem, RSHMEMI_BLOCK)
RSHMEMI_BYTE_RMA(rshmemx_getmem_nbi_block, rshmemi_getmem, RSHMEMI_BLOCK)

// ---------------------------------------------------------------- signals
#define RSHMEMI_PUT_SIGNAL(NAME, SCOPE)                                                                \
  RSHMEM_EXPORT int32_t NAME(void* dest, const void* source, uint64_t nbytes, uint64_t* sig_addr,     \
                             uint64_t signal, int32_t sig_op, int32_t pe) {                           \
    rshmemi_putmem_signal(dest, source, nbytes, sig_addr, signal, sig_op, pe, SCOPE);                 \
    return 0;                                                                                         \
  }
RSHMEMI_PUT_SIGNAL(rshmem_putmem_signal, RSHMEMI_THREAD)
RSHMEMI_PUT_SIGNAL(rshmem_putmem_signal_nbi, RSHMEMI_THREAD)
RSHMEMI_PUT_SIGNAL(rshmemx_putmem_signal_warp, RSHMEMI_WARP)
RSHMEMI_PUT_SIGNAL(rshmemx_putmem_signal_nbi_warp, RSHMEMI_WARP)
RSHMEMI_PUT_SIGNAL(rshmemx_putmem_signal_block, RSHMEMI_BLOCK)
RSHMEMI_PUT_SIGNAL(rshmemx_putmem_signal_nbi_block, RSHMEMI_BLOCK)

RSHMEM_EXPORT int32_t rshmemx_signal_op(uint64_t* sig_addr, uint64_t signal, int32_t sig_op, int32_t pe) {
  rshmemi_signal_op(sig_addr, signal, sig_op, pe);
  return 0;
}
RSHMEM_EXPORT uint64_t rshmem_signal_wait_until(uint64_t* sig_addr, int32_t cmp, uint64_t cmp_value) {
  return rshmemi_wait_until<uint64_t>(sig_addr, cmp, cmp_value);
}
RSHMEM_EXPORT uint64_t rshmem_signal_fetch(uint64_t* sig_addr) { return rshmemi_ld_acquire_sys_u64(sig_addr); }

// ---------------------------------------------------------------- ordering
// With PEs on other hosts, both also complete what this PE posted to the proxy (a fence cannot
// order the proxy's puts to one PE more cheaply: UCX does not keep puts in order).
RSHMEM_EXPORT int32_t rshmem_fence(void) {
  rshmemi_fence_acq_rel_sys();
  rshmemi_proxy_quiet();
  return 0;
}
RSHMEM_EXPORT int32_t rshmem_quiet(void) {
  rshmemi_fence_sc_sys();
  rshmemi_proxy_quiet();
  return 0;
}

// ---------------------------------------------------------------- barriers
#define RSHMEMI_BARRIER_ALL(NAME, QUIET, SCOPE)                  \
  RSHMEM_EXPORT int32_t NAME(void) {                             \
    rshmemi_team_barrier_entry(RSHMEM_TEAM_WORLD, QUIET, SCOPE); \
    return 0;                                                    \
  }
RSHMEMI_BARRIER_ALL(rshmem_barrier_all, true, RSHMEMI_THREAD)
RSHMEMI_BARRIER_ALL(rshmemx_barrier_all_warp, true, RSHMEMI_WARP)
RSHMEMI_BARRIER_ALL(rshmemx_barrier_all_block, true, RSHMEMI_BLOCK)
RSHMEMI_BARRIER_ALL(rshmem_sync_all, false, RSHMEMI_THREAD)
RSHMEMI_BARRIER_ALL(rshmemx_sync_all_warp, false, RSHMEMI_WARP)
RSHMEMI_BARRIER_ALL(rshmemx_sync_all_block, false, RSHMEMI_BLOCK)

#define RSHMEMI_BARRIER_TEAM(NAME, QUIET, SCOPE)    \
  RSHMEM_EXPORT int32_t NAME(int32_t team) {        \
    rshmemi_team_barrier_entry(team, QUIET, SCOPE); \
    return 0;                                       \
  }
RSHMEMI_BARRIER_TEAM(rshmem_barrier, true, RSHMEMI_THREAD)
RSHMEMI_BARRIER_TEAM(rshmemx_barrier_warp, true, RSHMEMI_WARP)
RSHMEMI_BARRIER_TEAM(rshmemx_barrier_block, true, RSHMEMI_BLOCK)
RSHMEMI_BARRIER_TEAM(rshmem_team_sync, false, RSHMEMI_THREAD)
RSHMEMI_BARRIER_TEAM(rshmemx_team_sync_warp, false, RSHMEMI_WARP)
RSHMEMI_BARRIER_TEAM(rshmemx_team_sync_block, false, RSHMEMI_BLOCK)

// ---------------------------------------------------------------- atomics (relaxed, system scope)
// A word on a PE on another host goes through the proxy (rshmemi_proxy_or_fail stops the kernel
// when `pe` is not reached that way either); operands go as their bits, zero-extended.
template <typename B>
RSHMEMI_DEV B rshmemi_amo_proxied(void* ptr, int pe, uint32_t op, B value, B value2, bool fetch) {
  return (B)rshmemi_proxy_amo(rshmemi_proxy_or_fail(ptr, pe), ptr, op, sizeof(B), (uint64_t)value, (uint64_t)value2, fetch, pe);
}

#define RSHMEMI_AMO(N, T)                                                                                       \
  RSHMEM_EXPORT T rshmem_##N##_atomic_fetch(T* ptr, int32_t pe) {                                               \
    typedef rshmemi_bits<T>::type B;                                                                            \
    const B* p = (const B*)rshmemi_user_ptr(ptr, sizeof(T), pe, RSHMEM_CHECK_OP_AMO);                                                           \
    if (p == 0) return (T)rshmemi_amo_proxied<B>(ptr, pe, RSHMEM_AMO_FETCH, 0, 0, true);                      \
    return (T)rshmemi_relaxed_ld_sys(p);                                                                        \
  }                                                                                                             \
  RSHMEM_EXPORT int32_t rshmem_##N##_atomic_set(T* ptr, T value, int32_t pe) {                                  \
    typedef rshmemi_bits<T>::type B;                                                                            \
    B* p = (B*)rshmemi_user_ptr(ptr, sizeof(T), pe, RSHMEM_CHECK_OP_AMO);                                                                       \
    if (p == 0) rshmemi_amo_proxied<B>(ptr, pe, RSHMEM_AMO_SET, (B)value, 0, false);                          \
    else rshmemi_relaxed_st_sys(p, (B)value);                                                                   \
    return 0;                                                                                                   \
  }                                                                                                             \
  RSHMEM_EXPORT T rshmem_##N##_atomic_swap(T* ptr, T value, int32_t pe) {                                       \
    typedef rshmemi_bits<T>::type B;                                                                            \
    B* p = (B*)rshmemi_user_ptr(ptr, sizeof(T), pe, RSHMEM_CHECK_OP_AMO);                                                                       \
    if (p == 0) return (T)rshmemi_amo_proxied<B>(ptr, pe, RSHMEM_AMO_SWAP, (B)value, 0, true);                \
    return (T)rshmemi_relaxed_atom_exch(p, (B)value);                                                           \
  }                                                                                                             \
  RSHMEM_EXPORT T rshmem_##N##_atomic_compare_swap(T* ptr, T cond, T value, int32_t pe) {                       \
    typedef rshmemi_bits<T>::type B;                                                                            \
    B* p = (B*)rshmemi_user_ptr(ptr, sizeof(T), pe, RSHMEM_CHECK_OP_AMO);                                                                       \
    if (p == 0) return (T)rshmemi_amo_proxied<B>(ptr, pe, RSHMEM_AMO_COMPARE_SWAP, (B)cond, (B)value, true);  \
    return (T)rshmemi_relaxed_atom_cas(p, (B)cond, (B)value);                                                   \
  }                                                                                                             \
  RSHMEM_EXPORT T rshmem_##N##_atomic_fetch_add(T* ptr, T value, int32_t pe) {                                  \
    typedef rshmemi_bits<T>::type B;                                                                            \
    B* p = (B*)rshmemi_user_ptr(ptr, sizeof(T), pe, RSHMEM_CHECK_OP_AMO);                                                                       \
    if (p == 0) return (T)rshmemi_amo_proxied<B>(ptr, pe, RSHMEM_AMO_ADD, (B)value, 0, true);                 \
    return (T)rshmemi_relaxed_atom_add(p, (B)value);                                                            \
  }                                                                                                             \
  RSHMEM_EXPORT int32_t rshmem_##N##_atomic_add(T* ptr, T value, int32_t pe) {                                  \
    typedef rshmemi_bits<T>::type B;                                                                            \
    B* p = (B*)rshmemi_user_ptr(ptr, sizeof(T), pe, RSHMEM_CHECK_OP_AMO);                                                                       \
    if (p == 0) rshmemi_amo_proxied<B>(ptr, pe, RSHMEM_AMO_ADD, (B)value, 0, false);                          \
    else rshmemi_relaxed_atom_add(p, (B)value);                                                                 \
    return 0;                                                                                                   \
  }                                                                                                             \
  RSHMEM_EXPORT T rshmem_##N##_atomic_fetch_inc(T* ptr, int32_t pe) { return rshmem_##N##_atomic_fetch_add(ptr, (T)1, pe); } \
  RSHMEM_EXPORT int32_t rshmem_##N##_atomic_inc(T* ptr, int32_t pe) { return rshmem_##N##_atomic_add(ptr, (T)1, pe); } \
  RSHMEMI_AMO_BITWISE(N, T, and, RSHMEM_AMO_AND)                                                                \
  RSHMEMI_AMO_BITWISE(N, T, or, RSHMEM_AMO_OR)                                                                  \
  RSHMEMI_AMO_BITWISE(N, T, xor, RSHMEM_AMO_XOR)

#define RSHMEMI_AMO_BITWISE(N, T, OP, CODE)                                                                     \
  RSHMEM_EXPORT T rshmem_##N##_atomic_fetch_##OP(T* ptr, T value, int32_t pe) {                                 \
    typedef rshmemi_bits<T>::type B;                                                                            \
    B* p = (B*)rshmemi_user_ptr(ptr, sizeof(T), pe, RSHMEM_CHECK_OP_AMO);                                                                       \
    if (p == 0) return (T)rshmemi_amo_proxied<B>(ptr, pe, CODE, (B)value, 0, true);                           \
    return (T)rshmemi_relaxed_atom_##OP(p, (B)value);                                                           \
  }                                                                                                             \
  RSHMEM_EXPORT int32_t rshmem_##N##_atomic_##OP(T* ptr, T value, int32_t pe) {                                 \
    typedef rshmemi_bits<T>::type B;                                                                            \
    B* p = (B*)rshmemi_user_ptr(ptr, sizeof(T), pe, RSHMEM_CHECK_OP_AMO);                                                                       \
    if (p == 0) rshmemi_amo_proxied<B>(ptr, pe, CODE, (B)value, 0, false);                                    \
    else rshmemi_relaxed_atom_##OP(p, (B)value);                                                                \
    return 0;                                                                                                   \
  }
RSHMEMI_FOR_AMO_DTYPES(RSHMEMI_AMO)

// ---------------------------------------------------------------- point-to-point sync (local)
#define RSHMEMI_P2P(N, T)                                                                                         \
  RSHMEM_EXPORT T rshmem_##N##_wait_until(T* ptr, int32_t cmp, T value) { return rshmemi_wait_until<T>(ptr, cmp, value); } \
  RSHMEM_EXPORT int32_t rshmem_##N##_test(T* ptr, int32_t cmp, T value) {                                         \
    return rshmemi_compare(rshmemi_load_acquire(ptr), cmp, value) ? 1 : 0;                                        \
  }                                                                                                               \
  RSHMEM_EXPORT int32_t rshmem_##N##_test_all(T* ptrs, uint64_t nelems, const int32_t* status, int32_t cmp, T value) { \
    return rshmemi_test_all<T>(ptrs, nelems, status, cmp, value);                                                 \
  }                                                                                                               \
  RSHMEM_EXPORT int64_t rshmem_##N##_test_any(T* ptrs, uint64_t nelems, const int32_t* status, int32_t cmp, T value) { \
    return rshmemi_test_any<T>(ptrs, nelems, status, cmp, value);                                                 \
  }                                                                                                               \
  RSHMEM_EXPORT int64_t rshmem_##N##_test_some(T* ptrs, uint64_t nelems, const int32_t* status, int32_t cmp, T value) { \
    return rshmemi_test_some<T>(ptrs, nelems, status, cmp, value);                                                \
  }                                                                                                               \
  RSHMEM_EXPORT int32_t rshmem_##N##_wait_until_all(T* ptrs, uint64_t nelems, const int32_t* status, int32_t cmp, T value) { \
    rshmemi_wait_vector<T, RSHMEMI_KIND_ALL>(ptrs, nelems, status, cmp, value, 0, 0);                             \
    return 0;                                                                                                     \
  }                                                                                                               \
  RSHMEM_EXPORT int64_t rshmem_##N##_wait_until_any(T* ptrs, uint64_t nelems, const int32_t* status, int32_t cmp, T value) { \
    size_t included = 0;                                                                                          \
    for (size_t i = 0; i < nelems; ++i) included += rshmemi_excluded(status, i) ? 0 : 1;                          \
    if (included == 0) return -1;                                                                                 \
    /* One rotation step per call (not per poll): every poll scans from the same start. */                       \
    const size_t start = rshmemi_any_start(nelems);                                                               \
    return rshmemi_wait_vector<T, RSHMEMI_KIND_ANY>(ptrs, nelems, status, cmp, value, start, -1);                 \
  }                                                                                                               \
  RSHMEM_EXPORT int64_t rshmem_##N##_wait_until_some(T* ptrs, uint64_t nelems, const int32_t* status, int32_t cmp, T value) { \
    size_t included = 0;                                                                                          \
    for (size_t i = 0; i < nelems; ++i) included += rshmemi_excluded(status, i) ? 0 : 1;                          \
    if (included == 0) return 0;                                                                                  \
    return rshmemi_wait_vector<T, RSHMEMI_KIND_SOME>(ptrs, nelems, status, cmp, value, 0, 0);                     \
  }
RSHMEMI_FOR_AMO_DTYPES(RSHMEMI_P2P)

// ---------------------------------------------------------------- collectives
#define RSHMEMI_COLL(N, T)                                                                                      \
  RSHMEM_EXPORT int32_t rshmem_##N##_broadcast(int32_t team, T* dest, const T* source, uint64_t nelems, int32_t pe_root) { \
    rshmemi_broadcastmem(team, dest, source, nelems * sizeof(T), pe_root, RSHMEMI_THREAD);                      \
    return 0;                                                                                                   \
  }                                                                                                             \
  RSHMEM_EXPORT int32_t rshmemx_##N##_broadcast_warp(int32_t team, T* dest, const T* source, uint64_t nelems, int32_t pe_root) { \
    rshmemi_broadcastmem(team, dest, source, nelems * sizeof(T), pe_root, RSHMEMI_WARP);                        \
    return 0;                                                                                                   \
  }                                                                                                             \
  RSHMEM_EXPORT int32_t rshmemx_##N##_broadcast_block(int32_t team, T* dest, const T* source, uint64_t nelems, int32_t pe_root) { \
    rshmemi_broadcastmem(team, dest, source, nelems * sizeof(T), pe_root, RSHMEMI_BLOCK);                       \
    return 0;                                                                                                   \
  }                                                                                                             \
  RSHMEM_EXPORT int32_t rshmem_##N##_fcollect(int32_t team, T* dest, const T* source, uint64_t nelems) {        \
    rshmemi_fcollectmem(team, dest, source, nelems * sizeof(T), RSHMEMI_THREAD);                                \
    return 0;                                                                                                   \
  }                                                                                                             \
  RSHMEM_EXPORT int32_t rshmemx_##N##_fcollect_warp(int32_t team, T* dest, const T* source, uint64_t nelems) {  \
    rshmemi_fcollectmem(team, dest, source, nelems * sizeof(T), RSHMEMI_WARP);                                  \
    return 0;                                                                                                   \
  }                                                                                                             \
  RSHMEM_EXPORT int32_t rshmemx_##N##_fcollect_block(int32_t team, T* dest, const T* source, uint64_t nelems) { \
    rshmemi_fcollectmem(team, dest, source, nelems * sizeof(T), RSHMEMI_BLOCK);                                 \
    return 0;                                                                                                   \
  }                                                                                                             \
  RSHMEM_EXPORT int32_t rshmem_##N##_alltoall(int32_t team, T* dest, const T* source, uint64_t nelems) {        \
    rshmemi_alltoallmem(team, dest, source, nelems * sizeof(T), RSHMEMI_THREAD);                                \
    return 0;                                                                                                   \
  }                                                                                                             \
  RSHMEM_EXPORT int32_t rshmemx_##N##_alltoall_warp(int32_t team, T* dest, const T* source, uint64_t nelems) {  \
    rshmemi_alltoallmem(team, dest, source, nelems * sizeof(T), RSHMEMI_WARP);                                  \
    return 0;                                                                                                   \
  }                                                                                                             \
  RSHMEM_EXPORT int32_t rshmemx_##N##_alltoall_block(int32_t team, T* dest, const T* source, uint64_t nelems) { \
    rshmemi_alltoallmem(team, dest, source, nelems * sizeof(T), RSHMEMI_BLOCK);                                 \
    return 0;                                                                                                   \
  }
RSHMEMI_FOR_ALL_DTYPES(RSHMEMI_COLL)

RSHMEM_EXPORT int32_t rshmemx_broadcastmem_block(int32_t team, void* dest, const void* source, uint64_t nbytes, int32_t pe_root) {
  rshmemi_broadcastmem(team, dest, source, nbytes, pe_root, RSHMEMI_BLOCK);
  return 0;
}
RSHMEM_EXPORT int32_t rshmemx_alltoallmem_block(int32_t team, void* dest, const void* source, uint64_t nbytes) {
  rshmemi_alltoallmem(team, dest, source, nbytes, RSHMEMI_BLOCK);
  return 0;
}

// ---------------------------------------------------------------- reductions
#define RSHMEMI_REDUCE_SCOPES(OPNAME, KIND, OP, SCATTER, N, T)                                                    \
  RSHMEM_EXPORT int32_t rshmem_##N##_##OPNAME##_##KIND(int32_t team, T* dest, const T* source, uint64_t nelems) {    \
    rshmemi_reduce<OP, SCATTER, T>(team, dest, source, nelems, RSHMEMI_THREAD);                                      \
    return 0;                                                                                                        \
  }                                                                                                                  \
  RSHMEM_EXPORT int32_t rshmemx_##N##_##OPNAME##_##KIND##_warp(int32_t team, T* dest, const T* source, uint64_t nelems) { \
    rshmemi_reduce<OP, SCATTER, T>(team, dest, source, nelems, RSHMEMI_WARP);                                        \
    return 0;                                                                                                        \
  }                                                                                                                  \
  RSHMEM_EXPORT int32_t rshmemx_##N##_##OPNAME##_##KIND##_block(int32_t team, T* dest, const T* source, uint64_t nelems) { \
    rshmemi_reduce<OP, SCATTER, T>(team, dest, source, nelems, RSHMEMI_BLOCK);                                       \
    return 0;                                                                                                        \
  }
#define RSHMEMI_REDUCE(OPNAME, OP, N, T)               \
  RSHMEMI_REDUCE_SCOPES(OPNAME, reduce, OP, false, N, T) \
  RSHMEMI_REDUCE_SCOPES(OPNAME, reducescatter, OP, true, N, T)
#define RSHMEMI_REDUCE_SUM(N, T) RSHMEMI_REDUCE(sum, RSHMEMI_SUM, N, T)
#define RSHMEMI_REDUCE_PROD(N, T) RSHMEMI_REDUCE(prod, RSHMEMI_PROD, N, T)
#define RSHMEMI_REDUCE_MIN(N, T) RSHMEMI_REDUCE(min, RSHMEMI_MIN, N, T)
#define RSHMEMI_REDUCE_MAX(N, T) RSHMEMI_REDUCE(max, RSHMEMI_MAX, N, T)
#define RSHMEMI_REDUCE_AND(N, T) RSHMEMI_REDUCE(and, RSHMEMI_AND, N, T)
#define RSHMEMI_REDUCE_OR(N, T) RSHMEMI_REDUCE(or, RSHMEMI_OR, N, T)
#define RSHMEMI_REDUCE_XOR(N, T) RSHMEMI_REDUCE(xor, RSHMEMI_XOR, N, T)
RSHMEMI_FOR_ALL_DTYPES(RSHMEMI_REDUCE_SUM)
RSHMEMI_FOR_ALL_DTYPES(RSHMEMI_REDUCE_PROD)
RSHMEMI_FOR_ALL_DTYPES(RSHMEMI_REDUCE_MIN)
RSHMEMI_FOR_ALL_DTYPES(RSHMEMI_REDUCE_MAX)
RSHMEMI_FOR_INT_DTYPES(RSHMEMI_REDUCE_AND)
RSHMEMI_FOR_INT_DTYPES(RSHMEMI_REDUCE_OR)
RSHMEMI_FOR_INT_DTYPES(RSHMEMI_REDUCE_XOR)
