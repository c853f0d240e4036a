// Force-included first when NVRTC compiles the device library (triton-lib/ltoir.py) into LTO-IR
// for Numba kernels. The sources are written for clang (device.h), which gives CUDA C++ a few
// builtins NVRTC spells differently; this file maps exactly those, so the same sources build
// with both compilers and the memory ordering (all inline PTX) is the same text in both.
//
// The `__nvvm_*` names are macros, not functions: NVVM reserves that prefix for its intrinsics
// and stops with "unable to lookup intrinsic" on a function of that name.
#ifndef RSHMEM_NVRTC_PRELUDE_H
#define RSHMEM_NVRTC_PRELUDE_H

#include <cuda_bf16.h>
#include <cuda_fp16.h>

// clang's native 16-bit float types; collective_device.h converts them through float, which the
// CUDA types also do. api.h (outside clang) types fp16/bf16 as __half / __nv_bfloat16 too, so the
// conversions in collective_device.h pick the same specializations.
typedef __half _Float16;
typedef __nv_bfloat16 __bf16;

// The device state is read through the non-coherent path, as clang's __nvvm_ldg_* do. Not with
// __ldg: the CUDA headers write it as `asm volatile`, which NVVM may neither merge nor hoist, so a
// Numba kernel re-read every state field at each use (put_block: 18 state loads where Triton's
// has 10, the ring all-reduce 83 against 29). The state does not change while a kernel runs, so
// a plain asm (no side effects, no memory clobber), which NVVM merges like clang's intrinsic, is
// as correct.
static __device__ __forceinline__ int rshmemi_nvrtc_ldg_i(const int* p) {
  int v;
  asm("ld.global.nc.s32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}
static __device__ __forceinline__ unsigned long long rshmemi_nvrtc_ldg_ull(const unsigned long long* p) {
  unsigned long long v;
  asm("ld.global.nc.u64 %0, [%1];" : "=l"(v) : "l"(p));
  return v;
}
#define __nvvm_ldg_i(p) rshmemi_nvrtc_ldg_i(p)
#define __nvvm_ldg_ull(p) rshmemi_nvrtc_ldg_ull(p)
#define __nvvm_read_ptx_sreg_tid_x() threadIdx.x
#define __nvvm_read_ptx_sreg_tid_y() threadIdx.y
#define __nvvm_read_ptx_sreg_tid_z() threadIdx.z
#define __nvvm_read_ptx_sreg_ntid_x() blockDim.x
#define __nvvm_read_ptx_sreg_ntid_y() blockDim.y
#define __nvvm_read_ptx_sreg_ntid_z() blockDim.z
#define __nvvm_read_ptx_sreg_laneid() rshmemi_nvrtc_laneid()
#define __nvvm_bar_warp_sync(mask) __syncwarp(mask)
#define __builtin_trap() __trap()

// The rare paths out of line (device.h says why), in the spelling NVVM knows: __noinline__ is
// what it honours through nvJitLink's link-time optimization and nvcc's whole-program inlining.
#define RSHMEMI_COLD static __device__ __noinline__ __attribute__((unused))

// The collectives' copy keeps one vector per thread in flight (rma_device.h says why): kernels
// compiled by NVRTC's LTO-IR or nvcc carry no launch bound for ptxas to fit their registers to.
#ifndef RSHMEM_COLL_COPY_UNROLL
#define RSHMEM_COLL_COPY_UNROLL 1
#endif

static __device__ __forceinline__ unsigned rshmemi_nvrtc_laneid() {
  unsigned lane;
  asm("mov.u32 %0, %%laneid;" : "=r"(lane));
  return lane;
}

#endif  // RSHMEM_NVRTC_PRELUDE_H
