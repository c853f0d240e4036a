/* rshmem for CUDA C++ programs (nvcc, or clang in CUDA mode): the device API of rshmem/api.h
   (thread, warp and block forms; signals; atomics; waits; barriers; collectives; teams) compiled
   into the program from the device library's sources, and the host helpers that give the
   program's module its device state and launch collective kernels.

   Build (docs/c.md; PREFIX is where scripts/install_c.sh put rshmem):
     nvcc -std=c++17 -arch=sm_90 $(pkg-config --cflags rshmem) prog.cu $(pkg-config --libs rshmem)

   Two ways to receive the device state:
   - runtime API (modules loaded implicitly): each .cu file that includes this header has its own
     copy of the state (a static __device__ variable, so several files link without clashes);
     rshmemx_cuda_init() after rshmem_host_init (or rshmemx_cuda_init_attr, which does both)
     writes it with cudaMemcpyToSymbol. Call rshmemx_cuda_init_state() in every other .cu file
     whose kernels use rshmem. Whole-program compilation (nvcc's default; not -rdc=true).
   - driver API (a CUmodule the program loads from a cubin / PTX it built with nvcc -cubin): define
     RSHMEM_CUMODULE before including, so the state is the global `rshmemi_device_state_d` the
     runtime looks up, and after loading call rshmem_host_device_init_module(module, &done). */
#ifndef RSHMEM_CUDA_H
#define RSHMEM_CUDA_H

#include <cuda_runtime.h>

#include "rshmem.h"
#include "rshmem/device_state.h"

#if defined(__CUDACC__)
#if !defined(__clang__)
/* nvcc: the sources use clang's builtins; the prelude maps them (as for NVRTC). The 16-bit float
   names become macros first, so the host compiler never sees its own _Float16 / __bf16 types
   redefined. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define _Float16 __half
#define __bf16 __nv_bfloat16
#include "rshmem/device/prelude.h"
#endif

/* A kernel compiled here carries no launch bound: the collectives' copy keeps one vector per thread
   in flight (rshmem/device/rma_device.h), as in NVRTC's build (prelude.h, for nvcc too). */
#ifndef RSHMEM_COLL_COPY_UNROLL
#define RSHMEM_COLL_COPY_UNROLL 1
#endif
/* ...and the RMA copy loop keeps 2 vectors of 16 bytes per thread in flight (copy_device.h: 4 in
   NVRTC's build for Numba, 16 in Triton's, where ptxas fits registers to the launch size). With 4,
   a kernel calling a g, a _warp put and a _block put, as NVIDIA's moe_shuffle example does, needed
   70-78 registers per thread (nvcc 13, sm_90) and could not launch 1024 threads; with 2, 52-60
   (capi/tests/nvshmem_shuffle_1024.cu is checked in CI). */
#ifndef RSHMEM_COPY_UNROLL
#define RSHMEM_COPY_UNROLL 2
#endif
#define RSHMEMI_DEVICE_STATE_DECLARED 1
#if defined(RSHMEM_CUMODULE)
extern "C" __device__ rshmemi_device_state_t rshmemi_device_state_d;
#else
static __device__ rshmemi_device_state_t rshmemi_device_state_d;
#endif
#if !defined(__clang__)
/* nvcc reads `(void)state;` after an asm output as no use (#550); the library's code is fine. */
#pragma nv_diag_suppress 550
#endif
#include "rshmem/device/libshmem_device.cuh"
#if !defined(__clang__)
#pragma nv_diag_default 550
#endif
#endif /* __CUDACC__ */

/* Writes this PE's device state into this .cu file's module and makes this PE's GPU the current
   device. RSHMEM_ERROR_DRIVER when a CUDA runtime call fails (cudaGetLastError says which). */
static inline rshmem_status_t rshmemx_cuda_init_state(void) {
  int device = -1;
  rshmem_status_t s = rshmem_host_device_ordinal(&device);
  if (s != RSHMEM_SUCCESS) return s;
  if (device < 0) return RSHMEM_SUCCESS; /* the host backend: no GPU, nothing to write */
  rshmemi_device_state_t state;
  s = rshmem_host_device_state(&state, sizeof state);
  if (s != RSHMEM_SUCCESS) return s;
  if (cudaSetDevice(device) != cudaSuccess) return RSHMEM_ERROR_DRIVER;
#if defined(__CUDACC__) && !defined(RSHMEM_CUMODULE)
  if (cudaMemcpyToSymbol(rshmemi_device_state_d, &state, sizeof state) != cudaSuccess) return RSHMEM_ERROR_DRIVER;
#endif
  return RSHMEM_SUCCESS;
}

/* rshmem_host_init(attr), then rshmemx_cuda_init_state(): the one call a runtime-API program makes. */
static inline rshmem_status_t rshmemx_cuda_init_attr(const rshmem_init_attr_t *attr) {
  rshmem_status_t s = rshmem_host_init(attr);
  return s != RSHMEM_SUCCESS ? s : rshmemx_cuda_init_state();
}

/* The largest grid rshmemx_collective_launch accepts for `func` with this block size, as NVSHMEM
   computes it: the blocks per SM the occupancy calculator allows times the SMs. 0 when not one
   block of this size fits (too many registers or too much shared memory per block), -1 when a
   CUDA call fails (cudaGetLastError says which). */
static inline int rshmemx_collective_launch_query_gridsize(const void *func, dim3 block, size_t shared_mem) {
  int device = 0, sms = 0, per_sm = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, func, (int)(block.x * block.y * block.z), shared_mem) !=
          cudaSuccess)
    return -1;
  return per_sm * sms;
}

/* Launches `func` so that all its blocks run at once (cudaLaunchCooperativeKernel), as a kernel
   that calls rshmem's barriers or collectives from several blocks needs (nvshmemx_collective_launch).
   A grid of 0 x 0 x 0 is the largest that fits (as NVSHMEM). RSHMEM_ERROR_INVALID_ARGUMENT when
   the grid cannot be co-resident on this GPU, or not one block of this size fits. */
static inline rshmem_status_t rshmemx_collective_launch(const void *func, dim3 grid, dim3 block, void **args,
                                                        size_t shared_mem, cudaStream_t stream) {
  int most = rshmemx_collective_launch_query_gridsize(func, block, shared_mem);
  if (most < 0) return RSHMEM_ERROR_DRIVER;
  if (grid.x == 0 && grid.y == 0 && grid.z == 0) grid = dim3((unsigned)most, 1, 1);
  long long blocks = (long long)grid.x * grid.y * grid.z;
  if (most == 0 || blocks == 0 || blocks > most) return RSHMEM_ERROR_INVALID_ARGUMENT;
  return cudaLaunchCooperativeKernel(func, grid, block, args, shared_mem, stream) == cudaSuccess ? RSHMEM_SUCCESS
                                                                                                 : RSHMEM_ERROR_DRIVER;
}

#endif /* RSHMEM_CUDA_H */
