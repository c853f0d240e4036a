// A CUDA C++ block-scope put's copy loop with small and large blocks: rshmem's nvshmemx_putmem_block
// (its RMA copy loop keeping RSHMEM_COPY_UNROLL 16-byte vectors per thread in flight: 2, the
// default since the 1024-thread register fix, or 4, as before) beside NVSHMEM's own, from the
// same source file, and the copy engine (cudaMemcpyAsync) as the ceiling.
//
// One process, one GPU, one PE: each CTA puts its slice of a symmetric buffer into another
// symmetric buffer of its own PE. That is the copy loop alone (the same loop a put to a peer of
// this host runs; the link is not in it), which is what the unroll changes.
//
// Build (GPU machine, nvcc 13), the same file three times:
//   rshmem:  nvcc -O3 -std=c++17 -arch=sm_90 -I<rshmem>/include -DRSHMEM_COPY_UNROLL=2 put_block_cxx.cu \
//              -L<rshmem>/lib -lrshmem -o put_rshmem_u2        (and =4: put_rshmem_u4)
//   NVSHMEM: nvcc -O3 -std=c++17 -arch=sm_90 -rdc=true -I<nvshmem>/include put_block_cxx.cu \
//              -L<nvshmem>/lib -lnvshmem_device -Xlinker -l:libnvshmem_host.so.3 -lcuda -o put_nvshmem
//            (<nvshmem>: torch's nvidia-nvshmem-cu13 wheel, site-packages/nvidia/nvshmem; run with
//            its lib/ on LD_LIBRARY_PATH for the unique-id bootstrap plugin)
// Run: ./put_X [--json FILE] [--sizes 1,16,256 (MiB)] [--ctas 8,32,132] [--threads 128,256,512,1024]
// Prints one line per (size, CTAs, threads): the median time of >= 20 calls after 3 warm-ups
// (CUDA events around each call) and GB/s copied; every configuration is first checked to copy
// exactly. Initialised by unique id (works as one process without a launcher, in both libraries).
#include <nvshmem.h>
#include <nvshmemx.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../../../capi/tests/cuda_ok.h"

#ifdef RSHMEM_COPY_UNROLL
#define NAME_LEN 32
static const char *library() {
  static char name[NAME_LEN];
  std::snprintf(name, NAME_LEN, "rshmem-u%d", RSHMEM_COPY_UNROLL);
  return name;
}
#else
static const char *library() { return "nvshmem"; }
#endif

__global__ void put_slices(char *dst, const char *src, size_t slice, size_t total) {
  size_t off = blockIdx.x * slice;
  if (off >= total) return;
  nvshmemx_putmem_block(dst + off, src + off, slice < total - off ? slice : total - off, nvshmem_my_pe());
}

__global__ void fill(unsigned *x, size_t n, unsigned salt) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    x[i] = (unsigned)(i * 2654435761u) ^ salt;
}

__global__ void count_diff(const unsigned *a, const unsigned *b, size_t n, unsigned long long *bad) {
  unsigned long long mine = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    mine += a[i] != b[i];
  if (mine) atomicAdd(bad, mine);
}

static std::vector<long> list(const char *s) {
  std::vector<long> out;
  for (const char *p = s; *p;) {
    out.push_back(std::strtol(p, const_cast<char **>(&p), 10));
    if (*p == ',') p++;
  }
  return out;
}

static float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main(int argc, char **argv) {
  std::vector<long> sizes = {1, 16, 256}, ctas = {8, 32, 132}, threads = {128, 256, 512, 1024};
  const char *json = nullptr;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--sizes")) sizes = list(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--ctas")) ctas = list(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--threads")) threads = list(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--json")) json = argv[i + 1];
  }
  CUDA_OK(cudaSetDevice(0));
  nvshmemx_uniqueid_t id = NVSHMEMX_UNIQUEID_INITIALIZER;
  nvshmemx_get_uniqueid(&id);
  nvshmemx_init_attr_t attr = NVSHMEMX_INIT_ATTR_INITIALIZER;
  nvshmemx_set_attr_uniqueid_args(0, 1, &id, &attr);
  if (nvshmemx_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID, &attr) != 0) {
    std::fprintf(stderr, "init by unique id failed\n");
    return 1;
  }
  const size_t most = (size_t)*std::max_element(sizes.begin(), sizes.end()) << 20;
  char *src = (char *)nvshmem_malloc(most), *dst = (char *)nvshmem_malloc(most);
  unsigned long long *bad;
  CUDA_OK(cudaMalloc(&bad, sizeof *bad));
  cudaEvent_t t0, t1;
  CUDA_OK(cudaEventCreate(&t0));
  CUDA_OK(cudaEventCreate(&t1));
  FILE *out = json ? std::fopen(json, "w") : nullptr;
  if (out) std::fprintf(out, "[\n");
  bool first = true;
  auto record = [&](const char *what, size_t bytes, long nctas, long nthreads, float ms) {
    double gbs = bytes / (ms * 1e-3) / 1e9;
    std::printf("%-12s %8zu MiB %5ld CTAs x %4ld threads: %9.1f us %8.1f GB/s\n", what, bytes >> 20, nctas, nthreads,
                ms * 1e3, gbs);
    if (out)
      std::fprintf(out, "%s  {\"library\": \"%s\", \"mib\": %zu, \"ctas\": %ld, \"threads\": %ld, \"us\": %.2f, \"gbs\": %.1f}",
                   first ? "" : ",\n", what, bytes >> 20, nctas, nthreads, ms * 1e3, gbs);
    first = false;
  };
  for (long mib : sizes) {
    const size_t bytes = (size_t)mib << 20, words = bytes / 4;
    fill<<<264, 256>>>((unsigned *)src, words, (unsigned)mib);
    std::vector<float> ce;
    for (int r = 0; r < 23; r++) {
      CUDA_OK(cudaEventRecord(t0));
      CUDA_OK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice));
      CUDA_OK(cudaEventRecord(t1));
      CUDA_OK(cudaEventSynchronize(t1));
      float ms;
      CUDA_OK(cudaEventElapsedTime(&ms, t0, t1));
      if (r >= 3) ce.push_back(ms);
    }
    record("copy-engine", bytes, 0, 0, median(ce));
    for (long nctas : ctas) {
      const size_t slice = (bytes / nctas + 15) / 16 * 16;
      for (long nthreads : threads) {
        CUDA_OK(cudaMemset(dst, 0, bytes));
        CUDA_OK(cudaMemset(bad, 0, sizeof *bad));
        put_slices<<<nctas, nthreads>>>(dst, src, slice, bytes);
        CUDA_OK(cudaGetLastError());
        count_diff<<<264, 256>>>((const unsigned *)dst, (const unsigned *)src, words, bad);
        unsigned long long wrong = 0;
        CUDA_OK(cudaMemcpy(&wrong, bad, sizeof wrong, cudaMemcpyDeviceToHost));
        if (wrong) {
          std::fprintf(stderr, "%s: %zu bytes by %ld x %ld: %llu words wrong\n", library(), bytes, nctas, nthreads, wrong);
          return 1;
        }
        std::vector<float> times;
        for (int r = 0; r < 23; r++) {
          CUDA_OK(cudaEventRecord(t0));
          put_slices<<<nctas, nthreads>>>(dst, src, slice, bytes);
          CUDA_OK(cudaEventRecord(t1));
          CUDA_OK(cudaEventSynchronize(t1));
          float ms;
          CUDA_OK(cudaEventElapsedTime(&ms, t0, t1));
          if (r >= 3) times.push_back(ms);
        }
        record(library(), bytes, nctas, nthreads, median(times));
      }
    }
  }
  if (out) {
    std::fprintf(out, "\n]\n");
    std::fclose(out);
  }
  nvshmem_free(src);
  nvshmem_free(dst);
  nvshmem_finalize();
  return 0;
}
