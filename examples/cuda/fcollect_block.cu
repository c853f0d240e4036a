// fcollect by a thread group: each PE adds two vectors of 512 ints and the whole block gathers
// every PE's partial sums into one array (rshmemx_int32_fcollect_block), so all threads use the
// result; pass "thread" to have thread 0 do it alone (rshmem_int32_fcollect). Launched
// collectively: the fcollect waits on the other PEs.
#include <cstring>

#include "common.cuh"

constexpr int N = 512;

// __launch_bounds__: the fcollect inlined here needs more registers than 512 threads of one
// block may have unless nvcc is told the block size (without it the launch cannot fit an SM).
__global__ void __launch_bounds__(N) vector_sum(const int *x, const int *y, int *partial, int *gathered, int by_block) {
  int i = threadIdx.x;
  partial[i] = x[i] + y[i];
  __syncthreads();
  if (by_block) {
    rshmemx_int32_fcollect_block(RSHMEM_TEAM_WORLD, gathered, partial, blockDim.x);
  } else if (i == 0) {
    rshmem_int32_fcollect(RSHMEM_TEAM_WORLD, gathered, partial, blockDim.x);
  }
}

int main(int argc, char **argv) {
  int by_block = !(argc > 1 && std::strcmp(argv[1], "thread") == 0);
  RSHMEM_OK(rshmemx_cuda_init_attr(nullptr));
  Pes p = pes();
  int *x = symmetric<int>(N), *y = symmetric<int>(N), *partial = symmetric<int>(N);
  int *gathered = symmetric<int>((size_t)N * p.n);
  int hx[N], hy[N];
  for (int i = 0; i < N; i++) {
    hx[i] = i;
    hy[i] = 1000 * p.me;
  }
  CUDA_OK(cudaMemcpy(x, hx, sizeof hx, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(y, hy, sizeof hy, cudaMemcpyHostToDevice));
  RSHMEM_OK(rshmem_host_barrier_all());
  void *args[] = {&x, &y, &partial, &gathered, &by_block};
  RSHMEM_OK(rshmemx_collective_launch((const void *)vector_sum, dim3(1), dim3(N), args, 0, 0));
  CUDA_OK(cudaDeviceSynchronize());
  int *host = new int[(size_t)N * p.n];
  CUDA_OK(cudaMemcpy(host, gathered, sizeof(int) * N * p.n, cudaMemcpyDeviceToHost));
  int wrong = 0;
  for (int pe = 0; pe < p.n; pe++)
    for (int i = 0; i < N; i++) wrong += host[pe * N + i] != i + 1000 * pe;
  std::printf("[%d of %d] fcollect by %s: %s\n", p.me, p.n, by_block ? "a block" : "one thread",
              wrong ? "WRONG" : "correct");
  delete[] host;
  for (int *a : {x, y, partial, gathered}) RSHMEM_OK(rshmem_host_free(a));
  RSHMEM_OK(rshmem_host_finalize());
  return wrong ? 1 : 0;
}
