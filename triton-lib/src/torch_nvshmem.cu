// NVSHMEM's device names as torch's Triton NVSHMEM extension calls them
// (torch.distributed._symmetric_memory._nvshmem_triton, torch 2.9-2.11), over rshmem's library.
//
// triton-lib/build.py links this with libshmem_device.bc into libnvshmem_device.bc, which
// rshmem.torch_symm_mem hands to torch's `requires_nvshmem` kernels when the SymmetricMemory
// backend is RSHMEM. Nothing else links it: rshmem's own bindings call rshmem_* names, and CUDA C++
// gets NVSHMEM's names from capi/include/nvshmem.h with NVSHMEM's C types.
//
// The signatures are torch's declarations, not NVSHMEM's C ones: every pointer is an int64,
// every function returns an int32 (LLVM links a call to a definition by name, so the types must
// be torch's exactly). torch passes NVSHMEM's raw constants: the signal operations as NVSHMEM
// numbers them, the comparisons (the same numbers as rshmem's) and team 0 for the world.
//
// Triton runs a kernel's scalar code in every thread of the program, so every thread of the CTA
// makes each call. The block-scope names are block calls already; the barriers and reductions,
// thread-scope in NVSHMEM, are rshmem's block forms here (one arrival, one reduction per
// program); puts, waits, fences and signals act once per thread, as NVSHMEM's do.
#include "rshmem/api.h"
#include "rshmem/dtypes.h"

// (-nocudainc: CUDA's __device__ macro is not defined here; api.h spells it the same way.)
#define RSHMEMI_TORCH extern "C" __attribute__((device))

// NVSHMEM's numbers for its signal operations (nvshmem's NVSHMEM_SIGNAL_SET / _ADD), which torch
// passes as literals; rshmem's own numbers pass through, so a bad one still stops the kernel
// with rshmem's error record.
#define RSHMEMI_NVSHMEM_SIGNAL_SET 0
#define RSHMEMI_NVSHMEM_SIGNAL_ADD 5

static __attribute__((device, always_inline)) inline int32_t rshmemi_torch_sig_op(int32_t op) {
  return op == RSHMEMI_NVSHMEM_SIGNAL_SET ? RSHMEM_SIGNAL_SET : op == RSHMEMI_NVSHMEM_SIGNAL_ADD ? RSHMEM_SIGNAL_ADD : op;
}

#define P(x) ((void*)(uintptr_t)(x))
#define CP(x) ((const void*)(uintptr_t)(x))

RSHMEMI_TORCH int32_t nvshmemx_putmem_block(int64_t dest, int64_t source, int64_t nbytes, int32_t pe) {
  return rshmemx_putmem_block(P(dest), CP(source), (uint64_t)nbytes, pe);
}
RSHMEMI_TORCH int32_t nvshmemx_getmem_block(int64_t dest, int64_t source, int64_t nbytes, int32_t pe) {
  return rshmemx_getmem_block(P(dest), CP(source), (uint64_t)nbytes, pe);
}
RSHMEMI_TORCH int32_t nvshmemx_getmem_nbi_block(int64_t dest, int64_t source, int64_t nbytes, int32_t pe) {
  return rshmemx_getmem_nbi_block(P(dest), CP(source), (uint64_t)nbytes, pe);
}
RSHMEMI_TORCH int32_t nvshmemx_putmem_signal_block(int64_t dest, int64_t source, int64_t nbytes, int64_t sig_addr,
                                                   uint64_t signal, int32_t sig_op, int32_t pe) {
  return rshmemx_putmem_signal_block(P(dest), CP(source), (uint64_t)nbytes, (uint64_t*)P(sig_addr), signal,
                                     rshmemi_torch_sig_op(sig_op), pe);
}
RSHMEMI_TORCH int32_t nvshmemx_signal_op(int64_t sig_addr, int64_t signal, int32_t sig_op, int32_t pe) {
  return rshmemx_signal_op((uint64_t*)P(sig_addr), (uint64_t)signal, rshmemi_torch_sig_op(sig_op), pe);
}
RSHMEMI_TORCH int32_t nvshmem_signal_wait_until(int64_t sig_addr, int32_t cmp, uint64_t cmp_value) {
  return (int32_t)rshmem_signal_wait_until((uint64_t*)P(sig_addr), cmp, cmp_value);
}
RSHMEMI_TORCH int32_t nvshmem_int_wait_until(int64_t ivar, int32_t cmp, int32_t cmp_value) {
  return rshmem_int32_wait_until((int32_t*)P(ivar), cmp, cmp_value);
}
RSHMEMI_TORCH int32_t nvshmem_fence(void) { return rshmem_fence(); }
RSHMEMI_TORCH int32_t nvshmem_quiet(void) { return rshmem_quiet(); }
RSHMEMI_TORCH int32_t nvshmem_my_pe(void) { return rshmem_my_pe(); }
RSHMEMI_TORCH int32_t nvshmem_n_pes(void) { return rshmem_n_pes(); }
RSHMEMI_TORCH int32_t nvshmem_barrier_all(void) { return rshmemx_barrier_all_block(); }
RSHMEMI_TORCH int32_t nvshmem_sync_all(void) { return rshmemx_sync_all_block(); }
RSHMEMI_TORCH int32_t nvshmemx_alltoallmem_block(int32_t team, int64_t dest, int64_t source, int64_t nbytes) {
  return rshmemx_alltoallmem_block(team, P(dest), CP(source), (uint64_t)nbytes);
}
RSHMEMI_TORCH int32_t nvshmemx_broadcastmem_block(int32_t team, int64_t dest, int64_t source, int64_t nbytes,
                                                  int32_t pe_root) {
  return rshmemx_broadcastmem_block(team, P(dest), CP(source), (uint64_t)nbytes, pe_root);
}

// nvshmem_<type>_<op>_reduce(team, dest, source, nreduce) for every NVSHMEM type name
// (api/dtypes.toml) and the four operations torch's `reduce` takes.
#define RSHMEMI_TORCH_REDUCE(NV, R, OP)                                                                    \
  RSHMEMI_TORCH int32_t nvshmem_##NV##_##OP##_reduce(int32_t team, int64_t dest, int64_t source, int64_t n) { \
    return rshmemx_##R##_##OP##_reduce_block(team, (rshmemi_torch_##R##_t*)P(dest),                      \
                                             (const rshmemi_torch_##R##_t*)CP(source), (uint64_t)n);     \
  }
// Each dtype's C type by its name: the reductions take typed pointers.
#define RSHMEMI_TORCH_TYPE(R, T) typedef T rshmemi_torch_##R##_t;
RSHMEMI_FOR_ALL_DTYPES(RSHMEMI_TORCH_TYPE)
#define RSHMEMI_TORCH_REDUCE_ALL(NV, R) \
  RSHMEMI_TORCH_REDUCE(NV, R, sum)      \
  RSHMEMI_TORCH_REDUCE(NV, R, prod)     \
  RSHMEMI_TORCH_REDUCE(NV, R, min)      \
  RSHMEMI_TORCH_REDUCE(NV, R, max)
RSHMEMI_FOR_NVSHMEM_TYPE_NAMES(RSHMEMI_TORCH_REDUCE_ALL)
