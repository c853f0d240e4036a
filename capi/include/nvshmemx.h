/* NVSHMEM source compatibility, the device-only forms: thread, warp and block RMA, signals,
   atomics, waits, barriers and collectives of CUDA kernels, mapped to rshmem's device API
   (rshmem/api.h). Included by nvshmem.h in CUDA code; a program that includes only nvshmemx.h
   gets nvshmem.h too, as with NVSHMEM. */
#ifndef RSHMEM_NVSHMEMX_H
#define RSHMEM_NVSHMEMX_H

#include <assert.h>

#include "nvshmem.h"

/* NVSHMEM's nvshmemx.h brings the driver API's cuda.h (CUmodule, cuMemCreate, ...): here too,
   wherever it is found. */
#if defined(__CUDACC__)
#include <cuda.h>
#elif defined(__has_include)
#if __has_include(<cuda.h>)
#include <cuda.h>
#endif
#endif

/* A CUDA 12 library (cuLibraryLoad*): its module gets the device state, as nvshmemx_cumodule_init
   does for a module. */
#if defined(CUDA_VERSION) && CUDA_VERSION >= 12000
static inline int nvshmemx_culibrary_init(CUlibrary library) {
  CUmodule module;
  if (cuLibraryGetModule(&module, library) != CUDA_SUCCESS) return NVSHMEMX_ERROR_INTERNAL;
  return nvshmemx_cumodule_init(module);
}
static inline int nvshmemx_culibrary_finalize(CUlibrary library) {
  CUmodule module;
  if (cuLibraryGetModule(&module, library) != CUDA_SUCCESS) return NVSHMEMX_ERROR_INTERNAL;
  return nvshmemx_cumodule_finalize(module);
}
#endif

/* ---- a buffer the program allocated, made symmetric (host) */
/* The buffer is one cuMemCreate allocation of this PE's GPU (requestedHandleTypes with
   CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) that the program mapped with cuMemMap: buf_ptr its
   first byte, size its size. rshmem maps the same memory into its heap, at the same offset on
   every PE, and returns that address; nothing is copied. Collective. NULL with a message when
   it cannot (another kind of memory, other sizes on other PEs, the host backend, PEs on other
   hosts); flags are NVSHMEM's reserved word and ignored (docs/c.md). */
static inline void *nvshmemx_buffer_register_symmetric(void *buf_ptr, size_t size, int flags) {
  void *p = NULL;
  (void)flags;
  if (rshmem_host_buffer_register_symmetric(buf_ptr, size, &p) != RSHMEM_SUCCESS)
    fprintf(stderr, "nvshmemx_buffer_register_symmetric (rshmem): %s\n", rshmem_host_last_error());
  return p;
}
static inline int nvshmemx_buffer_unregister_symmetric(void *mmap_ptr, size_t size) {
  if (rshmem_host_buffer_unregister_symmetric(mmap_ptr, size) != RSHMEM_SUCCESS) {
    fprintf(stderr, "nvshmemx_buffer_unregister_symmetric (rshmem): %s\n", rshmem_host_last_error());
    return NVSHMEMX_ERROR_INVALID_VALUE;
  }
  return NVSHMEMX_SUCCESS;
}

#if defined(__CUDACC__)

/* ---- byte RMA by a warp or a block (NVSHMEM's nbi forms complete on return here: the copies
   are loads and stores) */
#define nvshmemx_putmem_warp rshmemx_putmem_warp
#define nvshmemx_putmem_block rshmemx_putmem_block
#define nvshmemx_getmem_warp rshmemx_getmem_warp
#define nvshmemx_getmem_block rshmemx_getmem_block
#define nvshmemx_putmem_nbi_warp rshmemx_putmem_nbi_warp
#define nvshmemx_putmem_nbi_block rshmemx_putmem_nbi_block
#define nvshmemx_getmem_nbi_warp rshmemx_getmem_nbi_warp
#define nvshmemx_getmem_nbi_block rshmemx_getmem_nbi_block
#define nvshmemx_putmem_signal_warp rshmemx_putmem_signal_warp
#define nvshmemx_putmem_signal_block rshmemx_putmem_signal_block
#define nvshmemx_putmem_signal_nbi_warp rshmemx_putmem_signal_nbi_warp
#define nvshmemx_putmem_signal_nbi_block rshmemx_putmem_signal_nbi_block

/* ---- typed RMA by a warp or a block, signals with typed puts */
#define RSHMEMI_COMPAT_GROUP_RMA(NAME, T, R)                                                                  \
  RSHMEMI_COMPAT_D void nvshmemx_##NAME##_put_warp(T *d, const T *s, size_t n, int pe) {                       \
    rshmemx_putmem_warp(d, s, n * sizeof(T), pe);                                                             \
  }                                                                                                           \
  RSHMEMI_COMPAT_D void nvshmemx_##NAME##_put_block(T *d, const T *s, size_t n, int pe) {                      \
    rshmemx_putmem_block(d, s, n * sizeof(T), pe);                                                            \
  }                                                                                                           \
  RSHMEMI_COMPAT_D void nvshmemx_##NAME##_put_nbi_warp(T *d, const T *s, size_t n, int pe) {                   \
    rshmemx_putmem_nbi_warp(d, s, n * sizeof(T), pe);                                                         \
  }                                                                                                           \
  RSHMEMI_COMPAT_D void nvshmemx_##NAME##_put_nbi_block(T *d, const T *s, size_t n, int pe) {                  \
    rshmemx_putmem_nbi_block(d, s, n * sizeof(T), pe);                                                        \
  }                                                                                                           \
  RSHMEMI_COMPAT_D void nvshmemx_##NAME##_get_warp(T *d, const T *s, size_t n, int pe) {                       \
    rshmemx_getmem_warp(d, s, n * sizeof(T), pe);                                                             \
  }                                                                                                           \
  RSHMEMI_COMPAT_D void nvshmemx_##NAME##_get_block(T *d, const T *s, size_t n, int pe) {                      \
    rshmemx_getmem_block(d, s, n * sizeof(T), pe);                                                            \
  }                                                                                                           \
  RSHMEMI_COMPAT_D void nvshmem_##NAME##_put_signal(T *d, const T *s, size_t n, uint64_t *sig, uint64_t v,    \
                                                    int op, int pe) {                                         \
    rshmem_putmem_signal(d, s, n * sizeof(T), sig, v, op, pe);                                                \
  }                                                                                                           \
  RSHMEMI_COMPAT_D void nvshmem_##NAME##_put_signal_nbi(T *d, const T *s, size_t n, uint64_t *sig,            \
                                                        uint64_t v, int op, int pe) {                         \
    rshmem_putmem_signal_nbi(d, s, n * sizeof(T), sig, v, op, pe);                                            \
  }                                                                                                           \
  RSHMEMI_COMPAT_D void nvshmemx_##NAME##_put_signal_block(T *d, const T *s, size_t n, uint64_t *sig,         \
                                                           uint64_t v, int op, int pe) {                      \
    rshmemx_putmem_signal_block(d, s, n * sizeof(T), sig, v, op, pe);                                         \
  }                                                                                                           \
  RSHMEMI_COMPAT_D void nvshmemx_##NAME##_put_signal_nbi_block(T *d, const T *s, size_t n, uint64_t *sig,     \
                                                               uint64_t v, int op, int pe) {                  \
    rshmemx_putmem_signal_nbi_block(d, s, n * sizeof(T), sig, v, op, pe);                                     \
  }
RSHMEMI_COMPAT_TYPES(RSHMEMI_COMPAT_GROUP_RMA)

/* ---- barriers by a warp or a block */
#define nvshmemx_barrier_all_warp rshmemx_barrier_all_warp
#define nvshmemx_barrier_all_block rshmemx_barrier_all_block
#define nvshmemx_sync_all_warp rshmemx_sync_all_warp
#define nvshmemx_sync_all_block rshmemx_sync_all_block
#define nvshmemx_barrier_warp rshmemx_barrier_warp
#define nvshmemx_barrier_block rshmemx_barrier_block
#define nvshmemx_team_sync_warp rshmemx_team_sync_warp
#define nvshmemx_team_sync_block rshmemx_team_sync_block

/* ---- waits and atomics on the 32- and 64-bit integer types rshmem's device API has */
/* RSHMEMI_COMPAT_SYNC_TYPES(X): generated into rshmem.h from api/dtypes.toml (its atomic rows). */
#define RSHMEMI_COMPAT_SYNC(NAME, T, R)                                                                  \
  RSHMEMI_COMPAT_D void nvshmem_##NAME##_wait_until(T *ivar, int cmp, T value) {                         \
    rshmem_##R##_wait_until((R##_t *)ivar, cmp, (R##_t)value);                                           \
  }                                                                                                      \
  RSHMEMI_COMPAT_D int nvshmem_##NAME##_test(T *ivar, int cmp, T value) {                                \
    return rshmem_##R##_test((R##_t *)ivar, cmp, (R##_t)value);                                          \
  }                                                                                                      \
  RSHMEMI_COMPAT_D T nvshmem_##NAME##_atomic_fetch(const T *src, int pe) {                               \
    return (T)rshmem_##R##_atomic_fetch((R##_t *)src, pe);                                               \
  }                                                                                                      \
  RSHMEMI_COMPAT_D void nvshmem_##NAME##_atomic_set(T *dest, T value, int pe) {                          \
    rshmem_##R##_atomic_set((R##_t *)dest, (R##_t)value, pe);                                            \
  }                                                                                                      \
  RSHMEMI_COMPAT_D T nvshmem_##NAME##_atomic_swap(T *dest, T value, int pe) {                            \
    return (T)rshmem_##R##_atomic_swap((R##_t *)dest, (R##_t)value, pe);                                 \
  }                                                                                                      \
  RSHMEMI_COMPAT_D T nvshmem_##NAME##_atomic_compare_swap(T *dest, T cond, T value, int pe) {            \
    return (T)rshmem_##R##_atomic_compare_swap((R##_t *)dest, (R##_t)cond, (R##_t)value, pe);            \
  }                                                                                                      \
  RSHMEMI_COMPAT_D void nvshmem_##NAME##_atomic_add(T *dest, T value, int pe) {                          \
    rshmem_##R##_atomic_add((R##_t *)dest, (R##_t)value, pe);                                            \
  }                                                                                                      \
  RSHMEMI_COMPAT_D T nvshmem_##NAME##_atomic_fetch_add(T *dest, T value, int pe) {                       \
    return (T)rshmem_##R##_atomic_fetch_add((R##_t *)dest, (R##_t)value, pe);                            \
  }                                                                                                      \
  RSHMEMI_COMPAT_D void nvshmem_##NAME##_atomic_inc(T *dest, int pe) { rshmem_##R##_atomic_inc((R##_t *)dest, pe); } \
  RSHMEMI_COMPAT_BITWISE(NAME, T, R, and)                                                                \
  RSHMEMI_COMPAT_BITWISE(NAME, T, R, or)                                                                 \
  RSHMEMI_COMPAT_BITWISE(NAME, T, R, xor)                                                                \
  RSHMEMI_COMPAT_D T nvshmem_##NAME##_atomic_fetch_inc(T *dest, int pe) {                                \
    return (T)rshmem_##R##_atomic_fetch_inc((R##_t *)dest, pe);                                          \
  }
#define RSHMEMI_COMPAT_BITWISE(NAME, T, R, OP)                                                           \
  RSHMEMI_COMPAT_D void nvshmem_##NAME##_atomic_##OP(T *dest, T value, int pe) {                         \
    rshmem_##R##_atomic_##OP((R##_t *)dest, (R##_t)value, pe);                                           \
  }                                                                                                      \
  RSHMEMI_COMPAT_D T nvshmem_##NAME##_atomic_fetch_##OP(T *dest, T value, int pe) {                      \
    return (T)rshmem_##R##_atomic_fetch_##OP((R##_t *)dest, (R##_t)value, pe);                           \
  }
RSHMEMI_COMPAT_SYNC_TYPES(RSHMEMI_COMPAT_SYNC)

/* ---- collectives in kernels by a warp or a block, and the reduce-scatters (NVSHMEM 2's team
   forms, generated from the device table, typed and byte (nvshmemx_fcollectmem_warp, ...) ones;
   the thread-scope ones are nvshmem.h's host-and-device functions) */
RSHMEMI_COMPAT_DEVICE_COLLECTIVES

/* ---- NVSHMEM 1.0's active-set collect in kernels: only the set of every PE is mapped (the
   kernel stops with a trap otherwise; the next host call reports it) */
RSHMEMI_COMPAT_D int32_t rshmemi_compat_world_set(int start, int log_stride, int size) {
  if (start != 0 || log_stride != 0 || size != rshmem_n_pes()) __trap();
  return NVSHMEM_TEAM_WORLD;
}
RSHMEMI_COMPAT_D void nvshmem_collect32(void *d, const void *s, size_t n, int start, int log_stride, int size,
                                        long *pSync) {
  (void)pSync;
  rshmem_int32_fcollect(rshmemi_compat_world_set(start, log_stride, size), (int32_t *)d, (const int32_t *)s, n);
}
RSHMEMI_COMPAT_D void nvshmemx_collect32_block(void *d, const void *s, size_t n, int start, int log_stride, int size,
                                               long *pSync) {
  (void)pSync;
  rshmemx_int32_fcollect_block(rshmemi_compat_world_set(start, log_stride, size), (int32_t *)d, (const int32_t *)s, n);
}
RSHMEMI_COMPAT_D void nvshmem_collect64(void *d, const void *s, size_t n, int start, int log_stride, int size,
                                        long *pSync) {
  (void)pSync;
  rshmem_int64_fcollect(rshmemi_compat_world_set(start, log_stride, size), (int64_t *)d, (const int64_t *)s, n);
}
RSHMEMI_COMPAT_D void nvshmemx_collect64_block(void *d, const void *s, size_t n, int start, int log_stride, int size,
                                               long *pSync) {
  (void)pSync;
  rshmemx_int64_fcollect_block(rshmemi_compat_world_set(start, log_stride, size), (int64_t *)d, (const int64_t *)s, n);
}

#endif /* __CUDACC__ */
#endif /* RSHMEM_NVSHMEMX_H */
