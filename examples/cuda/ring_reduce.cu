// Ring reduction in one kernel launched collectively: for n-1 rounds each PE puts its running
// value into the next PE's word and a device-wide barrier_all separates the rounds, so every PE
// ends with the sum of all PE numbers. A kernel that waits on other PEs' kernels must have all its
// blocks resident: rshmemx_collective_launch checks that and launches cooperatively.
#include "common.cuh"

__global__ void reduce_ring(int *target, int *result) {
  int me = rshmem_my_pe(), n = rshmem_n_pes(), peer = (me + 1) % n;
  int value = me;
  for (int round = 1; round < n; round++) {
    rshmem_int_p(target, value, peer);
    rshmem_barrier_all();  // the put above is complete and the neighbour's has arrived
    value = *(volatile int *)target + me;
    rshmem_barrier_all();  // nobody overwrites `target` before this PE has read it
  }
  *result = value;
}

int main() {
  RSHMEM_OK(rshmemx_cuda_init_attr(nullptr));
  Pes p = pes();
  int *target = symmetric<int>(1), *result = symmetric<int>(1);
  void *args[] = {&target, &result};
  RSHMEM_OK(rshmemx_collective_launch((const void *)reduce_ring, dim3(1), dim3(1), args, 0, 0));
  CUDA_OK(cudaDeviceSynchronize());
  int got = -1;
  CUDA_OK(cudaMemcpy(&got, result, sizeof got, cudaMemcpyDeviceToHost));
  int want = p.n * (p.n - 1) / 2;
  std::printf("[%d of %d] ring reduction: %d (%s)\n", p.me, p.n, got, got == want ? "correct" : "WRONG");
  RSHMEM_OK(rshmem_host_free(target));
  RSHMEM_OK(rshmem_host_free(result));
  RSHMEM_OK(rshmem_host_finalize());
  return got == want ? 0 : 1;
}
