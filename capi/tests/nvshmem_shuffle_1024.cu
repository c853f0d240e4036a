// A token shuffle in the shape of NVSHMEM's MoE example, written here: one kernel of 1024-thread
// blocks that reads a count from a peer (nvshmem_int64_g), puts one row per warp
// (nvshmemx_float_put_nbi_warp) and a chunk per block (nvshmemx_float_put_nbi_block), launched
// through nvshmemx_collective_launch. With no __launch_bounds__, nvcc gives ptxas no register
// limit, so the launch needs the library's inlined code to leave the kernel within 64 registers
// per thread: with 4 vectors per thread in the copy loop it took 70-78 (NVIDIA's moe_shuffle
// could not launch), with the CUDA C++ default of 2 (rshmem_cuda.h) it fits.
// CI compiles it and checks the registers (examples/compile_cuda.sh); on a GPU it runs as 2 PEs
// (capi/tests/gpu_c.sh). Each PE checks what its left neighbour put; prints "PE i: 1024-thread
// shuffle correct (R registers per thread)" and exits 0, or names the first wrong value and exits 1.
#include <stdio.h>

#include "nvshmem.h"
#include "nvshmemx.h"

#include "cuda_ok.h"

constexpr int THREADS = 1024;
constexpr int WARPS = THREADS / 32;
constexpr int BLOCKS = 4;
constexpr int HIDDEN = 1000;  // floats per row: not a multiple of the copy's vectors

__global__ void shuffle(float *recv_rows, float *recv_chunks, const float *send, const int64_t *counts,
                        int64_t *seen) {
  const int right = (nvshmem_my_pe() + 1) % nvshmem_n_pes();
  const int b = blockIdx.x, w = threadIdx.x / 32;
  if (threadIdx.x == 0) seen[b] = nvshmem_int64_g(counts + b, right);
  const size_t row = (size_t)b * WARPS + w;
  nvshmemx_float_put_nbi_warp(recv_rows + row * HIDDEN, send + row * HIDDEN, HIDDEN, right);
  const size_t chunk = (size_t)b * WARPS * HIDDEN;
  nvshmemx_float_put_nbi_block(recv_chunks + chunk, send + chunk, (size_t)WARPS * HIDDEN, right);
  nvshmem_quiet();
}

static float value(int pe, size_t i) { return (float)(pe * 1000003 + (int)i % 999983); }

int main() {
  nvshmem_init();
  const int me = nvshmem_my_pe(), n = nvshmem_n_pes(), left = (me + n - 1) % n, right = (me + 1) % n;
  cudaFuncAttributes attr;
  CUDA_OK(cudaFuncGetAttributes(&attr, shuffle));
  const size_t elems = (size_t)BLOCKS * WARPS * HIDDEN;
  float *send = (float *)nvshmem_malloc(elems * sizeof(float));
  float *rows = (float *)nvshmem_malloc(elems * sizeof(float));
  float *chunks = (float *)nvshmem_malloc(elems * sizeof(float));
  int64_t *counts = (int64_t *)nvshmem_malloc(BLOCKS * sizeof(int64_t));
  int64_t *seen = nullptr;
  CUDA_OK(cudaMalloc(&seen, BLOCKS * sizeof(int64_t)));
  float *host = (float *)malloc(elems * sizeof(float));
  int64_t host_counts[BLOCKS];
  for (size_t i = 0; i < elems; ++i) host[i] = value(me, i);
  for (int b = 0; b < BLOCKS; ++b) host_counts[b] = 100 * me + b;
  CUDA_OK(cudaMemcpy(send, host, elems * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(counts, host_counts, sizeof(host_counts), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(rows, 0, elems * sizeof(float)));
  CUDA_OK(cudaMemset(chunks, 0, elems * sizeof(float)));
  CUDA_OK(cudaDeviceSynchronize());
  nvshmem_barrier_all();  // every PE's buffers are set before any get or put reaches them
  void *args[] = {&rows, &chunks, &send, &counts, &seen};
  const int launched = nvshmemx_collective_launch((const void *)shuffle, dim3(BLOCKS), dim3(THREADS), args, 0, 0);
  if (launched != NVSHMEMX_SUCCESS) {
    fprintf(stderr, "PE %d: WRONG: %d blocks of %d threads did not launch (status %d, %d registers per thread)\n",
            me, BLOCKS, THREADS, launched, attr.numRegs);
    return 1;
  }
  CUDA_OK(cudaDeviceSynchronize());
  nvshmem_barrier_all();  // every put has landed
  int wrong = 0;
  CUDA_OK(cudaMemcpy(host_counts, seen, sizeof(host_counts), cudaMemcpyDeviceToHost));
  for (int b = 0; b < BLOCKS && !wrong; ++b) {
    if (host_counts[b] != 100 * right + b) {
      fprintf(stderr, "PE %d: WRONG: block %d read count %lld from PE %d, expected %d\n", me, b,
              (long long)host_counts[b], right, 100 * right + b);
      wrong = 1;
    }
  }
  float *got[] = {rows, chunks};
  const char *what[] = {"warp put", "block put"};
  for (int k = 0; k < 2 && !wrong; ++k) {
    CUDA_OK(cudaMemcpy(host, got[k], elems * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < elems && !wrong; ++i) {
      if (host[i] != value(left, i)) {
        fprintf(stderr, "PE %d: WRONG: %s: element %zu = %g, expected %g (from PE %d)\n", me, what[k], i, host[i],
                value(left, i), left);
        wrong = 1;
      }
    }
  }
  if (!wrong) printf("PE %d: %d-thread shuffle correct (%d registers per thread)\n", me, THREADS, attr.numRegs);
  free(host);
  CUDA_OK(cudaFree(seen));
  nvshmem_free(counts);
  nvshmem_free(chunks);
  nvshmem_free(rows);
  nvshmem_free(send);
  nvshmem_finalize();
  return wrong;
}
