// NVSHMEM's half / bfloat16 collectives and its byte collectives (nvshmem_broadcastmem, ...) through
// the compatibility headers, unchanged NVSHMEM code: CI compiles it with nvcc (no GPU); on a GPU it
// runs as 2 PEs (they may share the GPU) under torchrun --no-python (capi/tests/gpu_c.sh). A kernel
// (collective launch, one block) reduces half and bfloat16 arrays by a thread, a warp and the block,
// runs each byte collective by a thread, a warp and the block, and puts a half to the next PE; then
// the host queues half / bfloat16 reductions and the byte collectives on a stream, and calls the
// blocking host forms, a half g and a bfloat16 p. Every result is checked against what the PEs'
// inputs must give; prints "PE i: N half, bfloat16 and byte collective checks correct" and exits 0,
// or names each wrong value and exits 1.
#include <stdio.h>

#include "nvshmem.h"
#include "nvshmemx.h"

#include "cuda_ok.h"

constexpr int N = 4;      // elements of each half / bfloat16 reduction; PE p gives p + 1 + i at i
constexpr int BYTES = 5;  // bytes per PE of each byte collective (no multiple of a wider type)
constexpr int SLOT = 64;  // room for one byte collective's result: BYTES * PEs, up to 12 PEs
// The byte collectives' results: operation (broadcast, fcollect, alltoall) x who calls it.
enum { BCAST, FCOLLECT, ALLTOALL };
enum { THREAD, WARP, BLOCK, STREAM, HOST, CALLERS };
__host__ __device__ constexpr int slot(int op, int caller) { return (caller * 3 + op) * SLOT; }

struct Bufs {
  half *h, *hsum, *hmin, *hstream, *hhost, *hbox;
  __nv_bfloat16 *b, *bmax, *bsum, *bstream, *bbox;
  uint8_t *src, *dst;
};

__global__ void exercise(Bufs m) {
  const int me = nvshmem_my_pe(), n = nvshmem_n_pes(), t = threadIdx.x;
  if (t < N) {
    m.h[t] = __int2half_rn(me + 1 + t);
    m.b[t] = __int2bfloat16_rn(me + 1 + t);
  }
  for (int k = t; k < BYTES * n; k += blockDim.x) m.src[k] = (uint8_t)(37 * me + k);
  nvshmemx_barrier_all_block();  // every PE's inputs are written before any collective reads them
  if (t == 0) {
    nvshmem_half_sum_reduce(NVSHMEM_TEAM_WORLD, m.hsum, m.h, N);
    nvshmem_broadcastmem(NVSHMEM_TEAM_WORLD, m.dst + slot(BCAST, THREAD), m.src, BYTES, n - 1);
    nvshmem_fcollectmem(NVSHMEM_TEAM_WORLD, m.dst + slot(FCOLLECT, THREAD), m.src, BYTES);
    nvshmem_alltoallmem(NVSHMEM_TEAM_WORLD, m.dst + slot(ALLTOALL, THREAD), m.src, BYTES);
    nvshmem_half_p(m.hbox, __int2half_rn(100 + me), (me + 1) % n);
  }
  __syncthreads();
  if (t < 32) {
    nvshmemx_bfloat16_max_reduce_warp(NVSHMEM_TEAM_WORLD, m.bmax, m.b, N);
    nvshmemx_broadcastmem_warp(NVSHMEM_TEAM_WORLD, m.dst + slot(BCAST, WARP), m.src, BYTES, n - 1);
    nvshmemx_fcollectmem_warp(NVSHMEM_TEAM_WORLD, m.dst + slot(FCOLLECT, WARP), m.src, BYTES);
    nvshmemx_alltoallmem_warp(NVSHMEM_TEAM_WORLD, m.dst + slot(ALLTOALL, WARP), m.src, BYTES);
  }
  __syncthreads();
  nvshmemx_half_min_reduce_block(NVSHMEM_TEAM_WORLD, m.hmin, m.h, N);
  nvshmemx_bfloat16_sum_reduce_block(NVSHMEM_TEAM_WORLD, m.bsum, m.b, N);
  nvshmemx_broadcastmem_block(NVSHMEM_TEAM_WORLD, m.dst + slot(BCAST, BLOCK), m.src, BYTES, n - 1);
  nvshmemx_fcollectmem_block(NVSHMEM_TEAM_WORLD, m.dst + slot(FCOLLECT, BLOCK), m.src, BYTES);
  nvshmemx_alltoallmem_block(NVSHMEM_TEAM_WORLD, m.dst + slot(ALLTOALL, BLOCK), m.src, BYTES);
  nvshmemx_barrier_all_block();  // the half put above has landed
}

static int checks = 0, wrong = 0;
static void expect(bool ok, int me, const char *what, int i, double got, double want) {
  checks++;
  if (!ok) {
    wrong++;
    fprintf(stderr, "PE %d: WRONG %s [%d]: %g, expected %g\n", me, what, i, got, want);
  }
}

template <typename T, typename F>
static void expect_array(const T *dev, F to_float, int me, const char *what, double (*want)(int i)) {
  T host[N];
  CUDA_OK(cudaMemcpy(host, dev, sizeof host, cudaMemcpyDeviceToHost));
  for (int i = 0; i < N; i++) expect(to_float(host[i]) == want(i), me, what, i, to_float(host[i]), want(i));
}

static int n_pes_ = 0;
static double sum_of(int i) { return n_pes_ * (n_pes_ + 1) / 2 + n_pes_ * i; }
static double max_of(int i) { return n_pes_ + i; }
static double min_of(int i) { return 1 + i; }
static float from_half(half v) { return __half2float(v); }
static float from_bf16(__nv_bfloat16 v) { return __bfloat162float(v); }

int main() {
  nvshmem_init();
  const int me = nvshmem_my_pe(), n = nvshmem_n_pes(), prev = (me + n - 1) % n;
  n_pes_ = n;
  if (BYTES * n > SLOT) {
    fprintf(stderr, "PE %d: WRONG setup: %d PEs need more than %d bytes per result\n", me, n, SLOT);
    return 1;
  }
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreate(&stream));
  Bufs m;
  half **halves[] = {&m.h, &m.hsum, &m.hmin, &m.hstream, &m.hhost, &m.hbox};
  for (half **p : halves) *p = (half *)nvshmem_calloc(N, sizeof(half));
  __nv_bfloat16 **bfs[] = {&m.b, &m.bmax, &m.bsum, &m.bstream, &m.bbox};
  for (__nv_bfloat16 **p : bfs) *p = (__nv_bfloat16 *)nvshmem_calloc(N, sizeof(__nv_bfloat16));
  m.src = (uint8_t *)nvshmem_calloc(SLOT, 1);
  m.dst = (uint8_t *)nvshmem_calloc(slot(0, CALLERS), 1);

  void *args[] = {&m};
  const int launched = nvshmemx_collective_launch((const void *)exercise, 1, 64, args, 0, stream);
  expect(launched == NVSHMEM_SUCCESS, me, "nvshmemx_collective_launch", 0, launched, NVSHMEM_SUCCESS);
  nvshmemx_half_sum_reduce_on_stream(NVSHMEM_TEAM_WORLD, m.hstream, m.h, N, stream);
  nvshmemx_bfloat16_min_reduce_on_stream(NVSHMEM_TEAM_WORLD, m.bstream, m.b, N, stream);
  nvshmemx_broadcastmem_on_stream(NVSHMEM_TEAM_WORLD, m.dst + slot(BCAST, STREAM), m.src, BYTES, n - 1, stream);
  nvshmemx_fcollectmem_on_stream(NVSHMEM_TEAM_WORLD, m.dst + slot(FCOLLECT, STREAM), m.src, BYTES, stream);
  nvshmemx_alltoallmem_on_stream(NVSHMEM_TEAM_WORLD, m.dst + slot(ALLTOALL, STREAM), m.src, BYTES, stream);
  CUDA_OK(cudaStreamSynchronize(stream));
  // The blocking host forms.
  nvshmem_half_max_reduce(NVSHMEM_TEAM_WORLD, m.hhost, m.h, N);
  nvshmem_broadcastmem(NVSHMEM_TEAM_WORLD, m.dst + slot(BCAST, HOST), m.src, BYTES, n - 1);
  nvshmem_fcollectmem(NVSHMEM_TEAM_WORLD, m.dst + slot(FCOLLECT, HOST), m.src, BYTES);
  nvshmem_alltoallmem(NVSHMEM_TEAM_WORLD, m.dst + slot(ALLTOALL, HOST), m.src, BYTES);
  nvshmem_bfloat16_p(m.bbox, __float2bfloat16(200.0f + me), (me + 1) % n);
  nvshmem_barrier_all();

  expect_array(m.hsum, from_half, me, "half sum by a thread", sum_of);
  expect_array(m.bmax, from_bf16, me, "bfloat16 max by a warp", max_of);
  expect_array(m.hmin, from_half, me, "half min by the block", min_of);
  expect_array(m.bsum, from_bf16, me, "bfloat16 sum by the block", sum_of);
  expect_array(m.hstream, from_half, me, "half sum on a stream", sum_of);
  expect_array(m.bstream, from_bf16, me, "bfloat16 min on a stream", min_of);
  expect_array(m.hhost, from_half, me, "half max from the host", max_of);
  const float box = __half2float(nvshmem_half_g(m.hbox, me));
  expect(box == 100 + prev, me, "half p in a kernel, g from the host", 0, box, 100 + prev);
  __nv_bfloat16 bbox;
  CUDA_OK(cudaMemcpy(&bbox, m.bbox, sizeof bbox, cudaMemcpyDeviceToHost));
  expect(__bfloat162float(bbox) == 200 + prev, me, "bfloat16 p from the host", 0, __bfloat162float(bbox), 200 + prev);

  uint8_t got[slot(0, CALLERS)];
  CUDA_OK(cudaMemcpy(got, m.dst, sizeof got, cudaMemcpyDeviceToHost));
  const char *callers[CALLERS] = {"a thread", "a warp", "the block", "a stream", "the host"};
  char what[64];
  for (int c = 0; c < CALLERS; c++) {
    snprintf(what, sizeof what, "broadcastmem by %s", callers[c]);
    for (int k = 0; k < BYTES; k++) {
      const uint8_t want = (uint8_t)(37 * (n - 1) + k);
      expect(got[slot(BCAST, c) + k] == want, me, what, k, got[slot(BCAST, c) + k], want);
    }
    snprintf(what, sizeof what, "fcollectmem by %s", callers[c]);
    for (int k = 0; k < BYTES * n; k++) {
      const uint8_t want = (uint8_t)(37 * (k / BYTES) + k % BYTES);
      expect(got[slot(FCOLLECT, c) + k] == want, me, what, k, got[slot(FCOLLECT, c) + k], want);
    }
    snprintf(what, sizeof what, "alltoallmem by %s", callers[c]);
    for (int k = 0; k < BYTES * n; k++) {
      const uint8_t want = (uint8_t)(37 * (k / BYTES) + me * BYTES + k % BYTES);
      expect(got[slot(ALLTOALL, c) + k] == want, me, what, k, got[slot(ALLTOALL, c) + k], want);
    }
  }
  if (wrong == 0) printf("PE %d: %d half, bfloat16 and byte collective checks correct\n", me, checks);
  else printf("PE %d: %d of %d half, bfloat16 and byte collective checks WRONG\n", me, wrong, checks);

  for (half **p : halves) nvshmem_free(*p);
  for (__nv_bfloat16 **p : bfs) nvshmem_free(*p);
  nvshmem_free(m.src);
  nvshmem_free(m.dst);
  CUDA_OK(cudaStreamDestroy(stream));
  nvshmem_finalize();
  return wrong == 0 ? 0 : 1;
}
