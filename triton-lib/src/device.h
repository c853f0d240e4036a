// Base macros and the device state for the rshmem device library.
//
// Built by clang-19 as CUDA without the CUDA headers (--cuda-device-only -nocudainc
// -nocudalib), so the few CUDA keywords and special registers used here are defined below from
// clang's own attributes and NVVM builtins. Every other *_device.h includes this file first.
#ifndef RSHMEM_DEVICE_H
#define RSHMEM_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "rshmem/device_state.h"

#ifndef __device__
#define __device__ __attribute__((device))
#endif
#ifndef __global__
#define __global__ __attribute__((global))
#endif
#ifndef __shared__
#define __shared__ __attribute__((shared))
#endif

// Internal helpers: inlined into every caller, so the ordering each one documents is the caller's.
#define RSHMEMI_DEV static __device__ __attribute__((always_inline)) inline
// Rare paths (the proxy ring for PEs on other hosts, debug-wait timeouts, error records, traps):
// kept out of line and called, so a caller's common path stays a few instructions and its
// registers are not sized for code it almost never runs. `noinline` survives Triton's pipeline
// (its inliner runs on the linked module and honours the attribute): the kernel's PTX keeps a
// `call` (tools/device_footprint.py checks it in CI), and ptxas kept them as CALL in the SASS we
// read. `cold` lets LLVM lay the call out of the hot block; `unused`: a file need not call every
// one (the runtime's kernels do not). The NVRTC / nvcc prelude (nvrtc/prelude.h) spells it
// __noinline__. What is out of line costs the common path nothing but a branch; it does not
// lower the kernel's register count below what the callee needs.
#ifndef RSHMEMI_COLD
#define RSHMEMI_COLD static __device__ __attribute__((noinline, cold, unused))
#endif
// Exported functions: C linkage, kept out of line in the bitcode for the linker; Triton inlines
// them after linking.
#define RSHMEM_EXPORT extern "C" __device__

// The one state global. Written by the runtime after the module is loaded; read only here. A
// CUDA C++ program that compiles the library as source (rshmem_cuda.h) declares it itself first.
#ifndef RSHMEMI_DEVICE_STATE_DECLARED
extern "C" __device__ rshmemi_device_state_t rshmemi_device_state_d;
#endif

RSHMEMI_DEV const rshmemi_device_state_t* rshmemi_state() { return &rshmemi_device_state_d; }

// Loads of state fields on latency-critical paths (signals, waits, barriers, single-element RMA).
// The state does not change while a kernel runs (the runtime writes it between launches), so
// these are `ld.global.nc` loads that LLVM marks invariant: unlike a plain `s->field`, they are
// not reloaded after every inline-asm "memory" clobber (each acquire / release / fence is one),
// they may be hoisted out of a kernel's loop and merged with each other, and none of them waits
// on a branch over another. Reading a field that the runtime may change during a kernel (none
// today) would need a plain load instead.
RSHMEMI_DEV int32_t rshmemi_state_i32(const int32_t* field) { return __nvvm_ldg_i(field); }
RSHMEMI_DEV uint64_t rshmemi_state_u64(const uint64_t* field) {
  return (uint64_t)__nvvm_ldg_ull((const unsigned long long*)field);
}

// Thread geometry (x is the only axis Triton uses; all three are offered for CUDA C++ users).
RSHMEMI_DEV uint32_t rshmemi_tid() {
  return __nvvm_read_ptx_sreg_tid_x() +
         __nvvm_read_ptx_sreg_ntid_x() *
             (__nvvm_read_ptx_sreg_tid_y() + __nvvm_read_ptx_sreg_ntid_y() * __nvvm_read_ptx_sreg_tid_z());
}
RSHMEMI_DEV uint32_t rshmemi_nthreads() {
  return __nvvm_read_ptx_sreg_ntid_x() * __nvvm_read_ptx_sreg_ntid_y() * __nvvm_read_ptx_sreg_ntid_z();
}
RSHMEMI_DEV uint32_t rshmemi_laneid() { return __nvvm_read_ptx_sreg_laneid(); }

// Block and warp barriers. All threads of the block (warp) must reach them.
RSHMEMI_DEV void rshmemi_syncthreads() { __syncthreads(); }
RSHMEMI_DEV void rshmemi_syncwarp() { __nvvm_bar_warp_sync(0xffffffffu); }
// The lanes of this warp that execute this call together.
RSHMEMI_DEV uint32_t rshmemi_activemask() {
  uint32_t m;
  asm volatile("activemask.b32 %0;" : "=r"(m));
  return m;
}

// Never returns, and says so to every compiler: NVVM (nvcc, NVRTC) does not know that its
// __trap() ends the thread. Without `noreturn` on it and on the failure paths that end in it
// (rshmemi_fail, rshmemi_fail_unreachable), a failing check's caller kept its values live across
// the call; ptxas allocates a whole program's registers at once (nvcc without -rdc, nvJitLink),
// giving an out-of-line callee registers apart from every value live across any call to it, so
// those values and the callee's own added up: a 1024-thread kernel calling a block-scope barrier
// needed 64 registers per thread, a broadcast 70, a reduction 92 (nvcc, sm_90); with it 54, 60
// and 80.
RSHMEMI_DEV __attribute__((noreturn)) void rshmemi_trap() {
  __builtin_trap();
  __builtin_unreachable();
}

RSHMEMI_DEV uint64_t rshmemi_globaltimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

#endif  // RSHMEM_DEVICE_H
