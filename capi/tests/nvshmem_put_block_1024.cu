// A block of 1024 threads calling nvshmemx_putmem_block, through the compatibility headers: the
// kernel has no __launch_bounds__, so nvcc gives ptxas no register limit and the launch succeeds
// only if the library's code leaves the kernel within 64 registers per thread (65536 per SM / 1024).
// CI compiles it with nvcc (no GPU); on a GPU it runs as 2 PEs (they may share the GPU) under
// torchrun --no-python (capi/tests/gpu_c.sh).
//
// Each PE fills `src` with values that name the PE and the index, and one 1024-thread block puts
// it into `dst` of the next PE; a barrier later, every PE checks that `dst` holds its left
// neighbour's values. The sizes cover the copy's 16-byte vectors, an unaligned tail, and a
// transfer that is not a multiple of the block's stride. Prints "PE i: 1024-thread putmem_block
// correct (N bytes, R registers per thread)" and exits 0, or names the first wrong value and
// exits 1.
#include <stdio.h>

#include "nvshmem.h"
#include "nvshmemx.h"

#include "cuda_ok.h"

constexpr int THREADS = 1024;

__global__ void put_next(uint8_t *dst, const uint8_t *src, size_t nbytes) {
  const int right = (nvshmem_my_pe() + 1) % nvshmem_n_pes();
  nvshmemx_putmem_block(dst, src, nbytes, right);
}

static uint8_t value(int pe, size_t i) { return (uint8_t)(31 * pe + 7 * i + (i >> 8)); }

int main() {
  nvshmem_init();
  const int me = nvshmem_my_pe(), n = nvshmem_n_pes(), left = (me + n - 1) % n;
  cudaFuncAttributes attr;
  CUDA_OK(cudaFuncGetAttributes(&attr, put_next));
  const size_t sizes[] = {16, 1000, 1 << 20, (1 << 20) + 13};
  const size_t most = (1 << 20) + 13;
  uint8_t *src = (uint8_t *)nvshmem_malloc(most), *dst = (uint8_t *)nvshmem_malloc(most);
  uint8_t *host = (uint8_t *)malloc(most);
  int wrong = 0;
  for (size_t nbytes : sizes) {
    for (size_t i = 0; i < nbytes; ++i) host[i] = value(me, i);
    CUDA_OK(cudaMemcpy(src, host, nbytes, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(dst, 0, most));
    CUDA_OK(cudaDeviceSynchronize());
    nvshmem_barrier_all();  // every PE's dst is cleared before any put lands in it
    put_next<<<1, THREADS>>>(dst, src, nbytes);
    const cudaError_t launched = cudaGetLastError();
    if (launched != cudaSuccess) {
      fprintf(stderr, "PE %d: WRONG: a %d-thread block calling nvshmemx_putmem_block did not launch: %s "
              "(%d registers per thread)\n", me, THREADS, cudaGetErrorString(launched), attr.numRegs);
      return 1;
    }
    CUDA_OK(cudaDeviceSynchronize());
    nvshmem_barrier_all();  // every put has landed
    CUDA_OK(cudaMemcpy(host, dst, nbytes, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < nbytes && !wrong; ++i) {
      if (host[i] != value(left, i)) {
        fprintf(stderr, "PE %d: WRONG: %zu-byte put: dst[%zu] = %u, expected %u (from PE %d)\n", me, nbytes, i,
                host[i], value(left, i), left);
        wrong = 1;
      }
    }
  }
  if (!wrong) {
    printf("PE %d: %d-thread putmem_block correct (%zu bytes at most, %d registers per thread)\n", me, THREADS, most,
           attr.numRegs);
  }
  free(host);
  nvshmem_free(src);
  nvshmem_free(dst);
  nvshmem_finalize();
  return wrong;
}
