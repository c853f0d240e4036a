// NVSHMEM's names in a CUDA program, nothing of rshmem's own: the grid is sized by
// nvshmemx_collective_launch_query_gridsize (the occupancy calculator's blocks per SM times the SMs,
// as NVSHMEM computes it) and launched by nvshmemx_collective_launch, then again with a grid of 0
// (the largest that fits); each block's first thread puts its rows of this PE's column into column
// `me` of the next PE's row-major matrix with nvshmem_int_iput (a strided put from a kernel), and
// the host reads the column back with nvshmem_int_iget. NVSHMEMX_SUCCESS and assert come from the
// headers, as with NVSHMEM's. Prints "correct" per PE, or the first wrong value and exits 1.
//   torchrun --nproc-per-node 2 --no-python build/strided_launch
#include <nvshmem.h>
#include <nvshmemx.h>

#include <cstdio>
#include <cstdlib>

#define ROWS 1000
#define CHUNK 8

__global__ void scatter_column(int *matrix, const int *column, int width) {
  const int me = nvshmem_my_pe(), peer = (me + 1) % nvshmem_n_pes();
  if (threadIdx.x != 0) return;
  for (int r0 = blockIdx.x * CHUNK; r0 < ROWS; r0 += gridDim.x * CHUNK) {
    const int n = ROWS - r0 < CHUNK ? ROWS - r0 : CHUNK;
    nvshmem_int_iput(matrix + (size_t)r0 * width + me, column + r0, width, 1, n, peer);
  }
  nvshmem_quiet();
}

static int check(int me, int prev, int width, int *matrix, const char *how) {
  int got[ROWS];
  nvshmem_int_iget(got, matrix + prev, 1, width, ROWS, me);
  for (int r = 0; r < ROWS; r++) {
    if (got[r] != 1000 * prev + r) {
      std::fprintf(stderr, "PE %d (%s): row %d of column %d is %d, expected %d: WRONG\n", me, how, r, prev, got[r],
                   1000 * prev + r);
      return 1;
    }
  }
  return 0;
}

int main() {
  int provided = -1;
  nvshmem_init_thread(NVSHMEM_THREAD_SERIALIZED, &provided);
  const int me = nvshmem_my_pe(), npes = nvshmem_n_pes(), width = npes, prev = (me + npes - 1) % npes;
  int *matrix = (int *)nvshmem_calloc((size_t)ROWS * width, sizeof(int));
  int *column = (int *)nvshmem_malloc(ROWS * sizeof(int));
  int host[ROWS];
  for (int r = 0; r < ROWS; r++) host[r] = 1000 * me + r;
  cudaMemcpy(column, host, sizeof host, cudaMemcpyHostToDevice);
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  void *args[] = {&matrix, &column, (void *)&width};

  int grid = -1;
  int status = nvshmemx_collective_launch_query_gridsize((const void *)scatter_column, dim3(128), args, 0, &grid);
  assert(status == NVSHMEMX_SUCCESS);
  if (grid < 1) {
    std::fprintf(stderr, "PE %d: not one block of 128 threads fits: WRONG\n", me);
    return 1;
  }
  const int blocks = grid < ROWS / CHUNK ? grid : ROWS / CHUNK;
  nvshmem_barrier_all();
  status = nvshmemx_collective_launch((const void *)scatter_column, dim3(blocks), dim3(128), args, 0, stream);
  assert(status == NVSHMEMX_SUCCESS);
  cudaStreamSynchronize(stream);
  nvshmem_barrier_all();
  int errors = check(me, prev, width, matrix, "sized grid");

  cudaMemset(matrix, 0, (size_t)ROWS * width * sizeof(int));
  nvshmem_barrier_all();
  status = nvshmemx_collective_launch((const void *)scatter_column, dim3(0, 0, 0), dim3(128), args, 0, stream);
  assert(status == NVSHMEMX_SUCCESS);
  cudaStreamSynchronize(stream);
  nvshmem_barrier_all();
  errors += check(me, prev, width, matrix, "grid 0");

  std::printf("PE %d: %d blocks of 128 threads fit; strided column %s\n", me, grid, errors ? "WRONG" : "correct");
  nvshmem_free(matrix);
  nvshmem_free(column);
  cudaStreamDestroy(stream);
  nvshmem_finalize();
  return errors ? 1 : 0;
}
