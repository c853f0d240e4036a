// simple_shift: one GPU thread of each PE writes the PE's number into the next PE's symmetric int
// (rshmem_int_p); a barrier on the stream, then each PE checks it holds its left neighbour's number.
#include "common.cuh"

__global__ void shift(int *dest) {
  int me = rshmem_my_pe(), n = rshmem_n_pes();
  rshmem_int_p(dest, me, (me + 1) % n);
}

int main() {
  RSHMEM_OK(rshmemx_cuda_init_attr(nullptr));
  Pes p = pes();
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreate(&stream));
  int *dest = symmetric<int>(1);
  shift<<<1, 1, 0, stream>>>(dest);
  RSHMEM_OK(rshmem_host_barrier_all_on_stream(stream));
  int got = -1;
  CUDA_OK(cudaMemcpyAsync(&got, dest, sizeof got, cudaMemcpyDeviceToHost, stream));
  CUDA_OK(cudaStreamSynchronize(stream));
  int want = (p.me + p.n - 1) % p.n;
  std::printf("%d: received message %d (%s)\n", p.me, got, got == want ? "correct" : "WRONG");
  RSHMEM_OK(rshmem_host_free(dest));
  CUDA_OK(cudaStreamDestroy(stream));
  RSHMEM_OK(rshmem_host_finalize());
  return got == want ? 0 : 1;
}
