// Thread, warp and block put shifts: every PE fills `n` floats with its number and puts them into
// the next PE's receive buffer, once per scope: each thread one element (rshmem_fp32_p), each warp
// its 32 (rshmemx_fp32_put_warp), each block its part (rshmemx_fp32_put_block). Usage:
//   put_shift [elements, default 8192]
#include <cstdlib>

#include "common.cuh"

enum Scope { THREAD, WARP, BLOCK };

__global__ void fill_and_shift(float *send, float *recv, int n, int scope) {
  int me = rshmem_my_pe(), peer = (me + 1) % rshmem_n_pes();
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) send[i] = (float)me;
  __syncthreads();  // a block's elements are written before the warp / block put reads them
  if (scope == THREAD) {
    if (i < n) rshmem_fp32_p(recv + i, send[i], peer);
  } else if (scope == WARP) {
    int first = i - (int)(threadIdx.x % 32);  // every lane of a warp passes the same arguments
    int count = first < n ? min(32, n - first) : 0;
    if (count > 0) rshmemx_fp32_put_warp(recv + first, send + first, count, peer);
  } else {
    int first = blockIdx.x * blockDim.x;
    rshmemx_fp32_put_block(recv + first, send + first, min((int)blockDim.x, n - first), peer);
  }
}

int main(int argc, char **argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 8192;
  if (n <= 0) {
    std::fprintf(stderr, "usage: put_shift [elements > 0]\n");
    return 2;
  }
  RSHMEM_OK(rshmemx_cuda_init_attr(nullptr));
  Pes p = pes();
  float *send = symmetric<float>(n), *recv = symmetric<float>(n);
  const int threads = 256, blocks = (n + threads - 1) / threads;
  const char *names[] = {"thread", "warp", "block"};
  int bad = 0;
  float *host = static_cast<float *>(std::malloc(sizeof(float) * n));
  for (int scope = THREAD; scope <= BLOCK; scope++) {
    CUDA_OK(cudaMemset(recv, 0xff, sizeof(float) * n));
    RSHMEM_OK(rshmem_host_barrier_all());
    fill_and_shift<<<blocks, threads>>>(send, recv, n, scope);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaDeviceSynchronize());
    RSHMEM_OK(rshmem_host_barrier_all());
    CUDA_OK(cudaMemcpy(host, recv, sizeof(float) * n, cudaMemcpyDeviceToHost));
    int wrong = 0;
    for (int i = 0; i < n; i++) wrong += host[i] != (float)((p.me + p.n - 1) % p.n);
    std::printf("PE %d: %s put shift of %d floats: %s\n", p.me, names[scope], n, wrong ? "WRONG" : "correct");
    bad += wrong;
  }
  std::free(host);
  RSHMEM_OK(rshmem_host_free(send));
  RSHMEM_OK(rshmem_host_free(recv));
  RSHMEM_OK(rshmem_host_finalize());
  return bad ? 1 : 0;
}
