// Compile check of the NVSHMEM compatibility headers (CI builds it with nvcc, no GPU): a program
// written against NVSHMEM's names, host and device, including MPI init, must build against
// rshmem's nvshmem.h unchanged. Run on a GPU it checks a shift, a block put, a signal, an atomic, an
// fcollect, reductions in a kernel by a thread, a warp and the block (bitwise ones too), a block
// reduce-scatter, a warp alltoall, on-stream reductions and a reduce-scatter on a stream, and a blocking
// host reduction and reduce-scatter on every PE.
#include <mpi.h>
#include <stdio.h>

#include "nvshmem.h"
#include "nvshmemx.h"

__global__ void exercise(int *box, float *send, float *recv, uint64_t *sig, long *counter, int *gathered,
                         long *pSync, int *red, float *fout) {
  int me = nvshmem_my_pe(), n = nvshmem_n_pes(), next = nvshmem_team_translate_pe(NVSHMEM_TEAM_WORLD, (me + 1) % n,
                                                                                      NVSHMEM_TEAM_WORLD);
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
  nvshmemx_int_xor_reduce_block(NVSHMEM_TEAM_WORLD, red, box, 1);
  nvshmemx_float_sum_reducescatter_block(NVSHMEM_TEAM_WORLD, fout, send, 2);
  if (threadIdx.x < 32) {
    nvshmemx_float_max_reduce_warp(NVSHMEM_TEAM_WORLD, fout + 2, send, 1);
    nvshmemx_int_alltoall_warp(NVSHMEM_TEAM_WORLD, red + 2, gathered, 1);
  }
  if (threadIdx.x == 0) nvshmem_int_and_reduce(NVSHMEM_TEAM_WORLD, red + 1, box, 1);
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
  int *red = (int *)nvshmem_malloc((n + 2) * sizeof(int)), *any = (int *)nvshmem_malloc(sizeof(int));
  int *top = (int *)nvshmem_malloc(sizeof(int));
  float *fout = (float *)nvshmem_malloc(3 * sizeof(float));
  /* reduce-scatter source: element p (PE p's block of one) of PE me is 10 * me + p */
  int *spread = (int *)nvshmem_malloc(n * sizeof(int)), *part = (int *)nvshmem_malloc(2 * sizeof(int));
  int host_spread[64] = {0};
  for (int p = 0; p < n && p < 64; p++) host_spread[p] = 10 * me + p;
  cudaMemcpy(spread, host_spread, (n < 64 ? n : 64) * sizeof(int), cudaMemcpyHostToDevice);
  void *args[] = {&box, &send, &recv, &sig, &counter, &gathered, &pSync, &red, &fout};
  int launched = nvshmemx_collective_launch((const void *)exercise, 1, 128, args, 0, stream);
  nvshmemx_barrier_all_on_stream(stream);
  nvshmemx_team_sync_on_stream(NVSHMEM_TEAM_WORLD, stream);
  nvshmemx_int_sum_to_all_on_stream(total, box, 1, 0, 0, n, pWrk, pSync, stream);
  nvshmemx_int_or_reduce_on_stream(NVSHMEM_TEAM_WORLD, any, box, 1, stream);
  nvshmemx_int_sum_reducescatter_on_stream(NVSHMEM_TEAM_WORLD, part, spread, 1, stream);
  cudaStreamSynchronize(stream);
  nvshmem_int_max_reduce(NVSHMEM_TEAM_WORLD, top, box, 1); /* blocking, from the host */
  nvshmem_int_min_reducescatter(NVSHMEM_TEAM_WORLD, part + 1, spread, 1);
  int got_total = -1, got_box = -1;
  long got_counter = -1;
  cudaMemcpy(&got_total, total, sizeof(int), cudaMemcpyDeviceToHost);
  cudaMemcpy(&got_box, box, sizeof(int), cudaMemcpyDeviceToHost);
  int got_red[2 + 64] = {0}, got_any = -1, got_top = -1, want_xor = 0, want_and = ~0, want_or = 0;
  float got_f[3] = {0, 0, 0};
  cudaMemcpy(got_red, red, (n + 2) * sizeof(int), cudaMemcpyDeviceToHost);
  cudaMemcpy(&got_any, any, sizeof(int), cudaMemcpyDeviceToHost);
  cudaMemcpy(&got_top, top, sizeof(int), cudaMemcpyDeviceToHost);
  cudaMemcpy(got_f, fout, sizeof got_f, cudaMemcpyDeviceToHost);
  int got_part[2] = {-1, -1};
  cudaMemcpy(got_part, part, sizeof got_part, cudaMemcpyDeviceToHost);
  for (int p = 0; p < n; p++) {
    want_xor ^= p;
    want_and &= p;
    want_or |= p;
  }
  int coll_ok = n <= 64 && got_red[0] == want_xor && got_red[1] == want_and && got_any == want_or && got_top == n - 1 &&
                got_f[0] == n * (n - 1) / 2 && got_f[1] == got_f[0] && got_f[2] == n - 1 &&
                got_part[0] == n * (n - 1) / 2 * 10 + n * me && got_part[1] == me;
  for (int p = 0; p < n && p < 64; p++) coll_ok = coll_ok && got_red[2 + p] == (me + n - 1) % n;
  got_counter = nvshmem_long_g(counter, 0);
  int ok = launched == NVSHMEM_SUCCESS && got_box == (me + n - 1) % n && got_total == n * (n - 1) / 2 &&
           got_counter == n && coll_ok;
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
  nvshmem_free(red);
  nvshmem_free(any);
  nvshmem_free(top);
  nvshmem_free(fout);
  nvshmem_free(spread);
  nvshmem_free(part);
  nvshmem_finalize();
  MPI_Finalize();
  return ok ? 0 : 1;
}
