// Compile check of the NVSHMEM compatibility headers (CI builds it with nvcc, no GPU): a program
// written against NVSHMEM's names, host and device, including MPI init, must build against
// rshmem's nvshmem.h unchanged. Run on a GPU it checks a shift, a block put, a signal, an atomic, an
// fcollect and an on-stream reduction on every PE.
#include <mpi.h>
#include <stdio.h>

#include "nvshmem.h"
#include "nvshmemx.h"

__global__ void exercise(int *box, float *send, float *recv, uint64_t *sig, long *counter, int *gathered,
                         long *pSync) {
  int me = nvshmem_my_pe(), n = nvshmem_n_pes(), next = (me + 1) % n;
  if (threadIdx.x == 0) {
    nvshmem_int_p(box, me, next);
    nvshmem_long_atomic_add(counter, 1, 0);
    nvshmem_long_atomic_fetch_or(counter, 0, 0);
  }
  send[threadIdx.x] = (float)me;
  __syncthreads();
  nvshmemx_float_put_signal_block(recv, send, blockDim.x, sig, 1, NVSHMEM_SIGNAL_ADD, next);
  if (threadIdx.x == 0) nvshmem_signal_wait_until(sig, NVSHMEM_CMP_GE, 1);
  nvshmemx_barrier_all_block();
  nvshmemx_collect32_block(gathered, box, 1, 0, 0, n, pSync);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm comm = MPI_COMM_WORLD;
  nvshmemx_init_attr_t attr;
  attr.mpi_comm = &comm;
  nvshmemx_init_attr(NVSHMEMX_INIT_WITH_MPI_COMM, &attr);
  int me = nvshmem_my_pe(), n = nvshmem_n_pes(), node_pe = nvshmem_team_my_pe(NVSHMEMX_TEAM_NODE);
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  int *box = (int *)nvshmem_calloc(1, sizeof(int));
  float *send = (float *)nvshmem_malloc(128 * sizeof(float)), *recv = (float *)nvshmem_malloc(128 * sizeof(float));
  uint64_t *sig = (uint64_t *)nvshmem_calloc(1, sizeof(uint64_t));
  long *counter = (long *)nvshmem_calloc(1, sizeof(long));
  int *gathered = (int *)nvshmem_malloc(n * sizeof(int));
  long *pSync = (long *)nvshmem_malloc(NVSHMEM_COLLECT_SYNC_SIZE * sizeof(long));
  int *total = (int *)nvshmem_malloc(sizeof(int)), *pWrk = (int *)nvshmem_malloc(NVSHMEM_REDUCE_MIN_WRKDATA_SIZE * sizeof(int));
  void *args[] = {&box, &send, &recv, &sig, &counter, &gathered, &pSync};
  int launched = nvshmemx_collective_launch((const void *)exercise, 1, 128, args, 0, stream);
  nvshmemx_barrier_all_on_stream(stream);
  nvshmemx_int_sum_to_all_on_stream(total, box, 1, 0, 0, n, pWrk, pSync, stream);
  cudaStreamSynchronize(stream);
  int got_total = -1, got_box = -1;
  long got_counter = -1;
  cudaMemcpy(&got_total, total, sizeof(int), cudaMemcpyDeviceToHost);
  cudaMemcpy(&got_box, box, sizeof(int), cudaMemcpyDeviceToHost);
  got_counter = nvshmem_long_g(counter, 0);
  int ok = launched == NVSHMEM_SUCCESS && got_box == (me + n - 1) % n && got_total == n * (n - 1) / 2 &&
           got_counter == n;
  printf("PE %d (node PE %d): nvshmem compat %s\n", me, node_pe, ok ? "correct" : "WRONG");
  nvshmem_free(box);
  nvshmem_free(send);
  nvshmem_free(recv);
  nvshmem_free(sig);
  nvshmem_free(counter);
  nvshmem_free(gathered);
  nvshmem_free(pSync);
  nvshmem_free(total);
  nvshmem_free(pWrk);
  nvshmem_finalize();
  MPI_Finalize();
  return ok ? 0 : 1;
}
