// On-stream sum: a kernel adds up this PE's 512 inputs, a sum reduction over every PE is queued on
// the same stream after it (it waits for the kernel, the next kernel waits for it), and a second
// kernel corrects the inputs when the global sum passes a threshold and sums again. No host
// synchronization between the three steps.
#include "common.cuh"

constexpr int N = 512, THRESHOLD = 42, CORRECTION = 7;

__global__ void accumulate(const int *input, int *partial) {
  if (threadIdx.x == 0) *partial = 0;
  __syncthreads();
  atomicAdd(partial, input[threadIdx.x]);
}

__global__ void correct_and_accumulate(int *input, int *partial, const int *total) {
  if (*total > THRESHOLD) input[threadIdx.x] -= CORRECTION;
  __syncthreads();
  if (threadIdx.x == 0) *partial = 0;
  __syncthreads();
  atomicAdd(partial, input[threadIdx.x]);
}

int main() {
  RSHMEM_OK(rshmemx_cuda_init_attr(nullptr));
  Pes p = pes();
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreate(&stream));
  int *input = symmetric<int>(N), *partial = symmetric<int>(1), *total = symmetric<int>(1);
  int host[N];
  for (int i = 0; i < N; i++) host[i] = (p.me + i) % 3;  // some 0s, 1s and 2s
  CUDA_OK(cudaMemcpyAsync(input, host, sizeof host, cudaMemcpyHostToDevice, stream));
  accumulate<<<1, N, 0, stream>>>(input, partial);
  RSHMEM_OK(rshmem_host_reduce_on_stream(RSHMEM_TEAM_WORLD, RSHMEM_REDUCE_SUM, total, partial, 1, RSHMEM_DTYPE_INT32,
                                         stream));
  correct_and_accumulate<<<1, N, 0, stream>>>(input, partial, total);
  int got_total = 0, got_partial = 0;
  CUDA_OK(cudaMemcpyAsync(&got_total, total, sizeof(int), cudaMemcpyDeviceToHost, stream));
  CUDA_OK(cudaMemcpyAsync(&got_partial, partial, sizeof(int), cudaMemcpyDeviceToHost, stream));
  CUDA_OK(cudaStreamSynchronize(stream));
  // The same arithmetic on the host.
  long want_total = 0, mine = 0;
  for (int pe = 0; pe < p.n; pe++)
    for (int i = 0; i < N; i++) want_total += (pe + i) % 3;
  for (int i = 0; i < N; i++) mine += (p.me + i) % 3 - (want_total > THRESHOLD ? CORRECTION : 0);
  bool ok = got_total == want_total && got_partial == mine;
  std::printf("[%d of %d] sum over PEs %d, corrected local sum %d (%s)\n", p.me, p.n, got_total, got_partial,
              ok ? "correct" : "WRONG");
  RSHMEM_OK(rshmem_host_free(input));
  RSHMEM_OK(rshmem_host_free(partial));
  RSHMEM_OK(rshmem_host_free(total));
  CUDA_OK(cudaStreamDestroy(stream));
  RSHMEM_OK(rshmem_host_finalize());
  return ok ? 0 : 1;
}
