// Device-initiated peer copy GPU0 -> GPU1: which copy loop keeps NVLink busy with few CTAs?
//
// One process, two GPUs, peer access enabled. Each CTA copies its 16-byte-aligned slice of the
// buffer from GPU0 memory to GPU1 memory (as a block-scope put does), with one of several loops,
// all taken from the device library's triton-lib/src/copy_device.h so the numbers are the
// library's own:
//   u8 / u16      8 / 16 loads in flight per thread, plain (generic) loads and stores
//   u8na / u16na  the same with ld.global.L1::no_allocate + st.global (the library's strategy 1)
//   u8nc / u16nc  ld.global.nc.L1::no_allocate (read-only path) + st.global
//   u16cs         ld.global.L1::no_allocate + st.global.cs
//   bulkSxC       Hopper bulk copies (the library's strategy 2): thread 0 streams the slice through
//                 S shared-memory stages of C KiB (cp.async.bulk global->shared on mbarriers, then
//                 shared->peer global in bulk groups); the other threads do heads and tails
//   hyb50         thread 0 bulk-copies (4 x 8 KiB) the first half of the slice while the other
//                 warps copy the second half with u8na
// Timing: CUDA events around each launch, median over >= 20 runs after 2 warm-ups (fewer, with
// the count printed, only where 20 runs would take over 0.2 s: the slow 1-2 CTA cases).
// Every loop is first checked on an unaligned copy (head and tail bytes, guard bytes after it).
//
// Build and run (GPU machine, nvcc 13):
//   nvcc -O3 -std=c++17 -arch=sm_90a -o /tmp/put_copy benchmarks/kernels/microbench/put_copy.cu && /tmp/put_copy
// Options: --sizes 256,16,1 (MiB)  --ctas 1,2,4,...  --threads 128,256,512  --only name,name
//          --bidir (GPU1 -> GPU0 at the same time, as in an all-gather; GB/s per direction)
//          --reps N
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../../../triton-lib/src/copy_device.h"

#define CK(call)                                                                              \
  do {                                                                                        \
    cudaError_t e_ = (call);                                                                  \
    if (e_ != cudaSuccess) {                                                                  \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      exit(1);                                                                                \
    }                                                                                         \
  } while (0)

// ---- the loops ----
enum Kind {
  K_U8, K_U16, K_U8NA, K_U16NA, K_U8NC, K_U16NC, K_U16CS, K_BULK, K_HYB
};

template <int K>
__device__ __forceinline__ void reg_copy(char* d, const char* s, size_t n, uint32_t lane, uint32_t nlanes) {
  if constexpr (K == K_U8) rshmemi_copy_unrolled<8, RSHMEMI_LD_GENERIC, RSHMEMI_ST_GENERIC>(d, s, n, lane, nlanes);
  else if constexpr (K == K_U16) rshmemi_copy_unrolled<16, RSHMEMI_LD_GENERIC, RSHMEMI_ST_GENERIC>(d, s, n, lane, nlanes);
  else if constexpr (K == K_U8NA) rshmemi_copy_unrolled<8, RSHMEMI_LD_NOALLOC, RSHMEMI_ST_GLOBAL>(d, s, n, lane, nlanes);
  else if constexpr (K == K_U16NA) rshmemi_copy_unrolled<16, RSHMEMI_LD_NOALLOC, RSHMEMI_ST_GLOBAL>(d, s, n, lane, nlanes);
  else if constexpr (K == K_U8NC) rshmemi_copy_unrolled<8, RSHMEMI_LD_NC, RSHMEMI_ST_GLOBAL>(d, s, n, lane, nlanes);
  else if constexpr (K == K_U16NC) rshmemi_copy_unrolled<16, RSHMEMI_LD_NC, RSHMEMI_ST_GLOBAL>(d, s, n, lane, nlanes);
  else rshmemi_copy_unrolled<16, RSHMEMI_LD_NOALLOC, RSHMEMI_ST_CS>(d, s, n, lane, nlanes);
}

// This CTA's slice [beg, end) of n bytes: equal 16-byte multiples, the last CTA gets the rest.
__device__ __forceinline__ void my_slice(size_t n, size_t* beg, size_t* end) {
  const size_t per = ((n / gridDim.x) + 15) & ~(size_t)15;
  size_t b = per * blockIdx.x, e = b + per;
  if (blockIdx.x == gridDim.x - 1) e = n;
  *beg = b < n ? b : n;
  *end = e < n ? e : n;
}

template <int K>
__global__ void reg_kernel(char* dst, const char* src, size_t n) {
  size_t b, e;
  my_slice(n, &b, &e);
  reg_copy<K>(dst + b, src + b, e - b, threadIdx.x, blockDim.x);
}

extern __shared__ __align__(128) char g_dsmem[];

// As the library's rshmemi_copy with strategy 2 (rma_device.h), staging in dynamic shared memory.
template <int STAGES, int CHUNK>
__global__ void bulk_kernel(char* dst, const char* src, size_t n) {
  __shared__ uint64_t bars[STAGES];
  size_t b, e;
  my_slice(n, &b, &e);
  rshmemi_fence_proxy_async_global();
  __syncthreads();
  rshmemi_copy_bulk_block<STAGES, CHUNK, 8>(dst + b, src + b, e - b, threadIdx.x, blockDim.x, g_dsmem, bars);
  __syncthreads();
}

// Thread 0 bulk-copies the first half of the slice (16-byte aligned: slices are), warps 1.. copy
// the second half with u8na.
__global__ void hybrid_kernel(char* dst, const char* src, size_t n) {
  __shared__ uint64_t bars[4];
  size_t b, e;
  my_slice(n, &b, &e);
  const size_t len = e - b;
  const size_t first = (len / 2) & ~(size_t)15;
  rshmemi_fence_proxy_async_global();
  __syncthreads();
  if (blockDim.x <= 32 || ((uintptr_t)(dst + b) & 15) != 0 || ((uintptr_t)(src + b) & 15) != 0) {
    rshmemi_copy_unrolled<8>(dst + b, src + b, len, threadIdx.x, blockDim.x);
  } else if (threadIdx.x == 0) {
    if (first) rshmemi_bulk_copy_thread<4, 8192>(dst + b, src + b, first, g_dsmem, bars);
  } else if (threadIdx.x >= 32) {
    rshmemi_copy_unrolled<8>(dst + b + first, src + b + first, len - first, threadIdx.x - 32, blockDim.x - 32);
  }
  __syncthreads();
}

struct Strategy {
  const char* name;
  void (*kernel)(char*, const char*, size_t);
  int smem;           // dynamic shared memory bytes
  bool any_threads;   // result depends on the thread count
};

static std::vector<Strategy> all_strategies() {
  return {
      {"u8", reg_kernel<K_U8>, 0, true},
      {"u16", reg_kernel<K_U16>, 0, true},
      {"u8na", reg_kernel<K_U8NA>, 0, true},
      {"u16na", reg_kernel<K_U16NA>, 0, true},
      {"u8nc", reg_kernel<K_U8NC>, 0, true},
      {"u16nc", reg_kernel<K_U16NC>, 0, true},
      {"u16cs", reg_kernel<K_U16CS>, 0, true},
      {"bulk2x16k", bulk_kernel<2, 16384>, 2 * 16384, false},
      {"bulk4x8k", bulk_kernel<4, 8192>, 4 * 8192, false},
      {"bulk8x4k", bulk_kernel<8, 4096>, 8 * 4096, false},
      {"bulk5x8k", bulk_kernel<5, 8192>, 5 * 8192, false},
      {"bulk4x16k", bulk_kernel<4, 16384>, 4 * 16384, false},
      {"bulk8x16k", bulk_kernel<8, 16384>, 8 * 16384, false},
      {"hyb50", hybrid_kernel, 4 * 8192, true},
  };
}

// ---- data pattern and check ----
__device__ __forceinline__ uint8_t pattern(size_t i) {
  return (uint8_t)(((i * 2654435761u) >> 13) ^ (i >> 7) ^ i);
}
__global__ void fill_kernel(uint8_t* p, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = pattern(i);
}
// dst[i] must be pattern(i + shift) for i in [lo, hi) and `guard` elsewhere in [0, total).
__global__ void check_kernel(const uint8_t* p, size_t total, size_t lo, size_t hi, size_t shift, uint8_t guard,
                             unsigned long long* bad) {
  unsigned long long mine = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
    const uint8_t want = (i >= lo && i < hi) ? pattern(i + shift) : guard;
    mine += p[i] != want;
  }
  if (mine) atomicAdd(bad, mine);
}

// ---- driver ----
static std::vector<long> parse_list(const char* s) {
  std::vector<long> v;
  for (const char* p = s; *p;) {
    v.push_back(strtol(p, (char**)&p, 10));
    if (*p == ',') ++p;
  }
  return v;
}

struct Dir {
  int dev;
  cudaStream_t stream;
  char* src;  // on dev
  char* dst;  // on the peer
};

static void launch(const Strategy& s, const Dir& d, int ctas, int threads, size_t n, size_t src_off, size_t dst_off) {
  CK(cudaSetDevice(d.dev));
  char* dst = d.dst + dst_off;
  const char* src = d.src + src_off;
  void* args[] = {&dst, &src, &n};
  CK(cudaLaunchKernel((const void*)s.kernel, dim3(ctas), dim3(threads), args, s.smem, d.stream));
}

int main(int argc, char** argv) {
  std::vector<long> sizes_mib = {256, 16, 1}, ctas = {1, 2, 4, 8, 16, 32, 64, 132}, threads = {128, 256, 512};
  std::vector<std::string> only;
  bool bidir = false;
  int reps = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : "";
    if (a == "--sizes") sizes_mib = parse_list(v), ++i;
    else if (a == "--ctas") ctas = parse_list(v), ++i;
    else if (a == "--threads") threads = parse_list(v), ++i;
    else if (a == "--reps") reps = atoi(v), ++i;
    else if (a == "--bidir") bidir = true;
    else if (a == "--only") {
      for (const char* p = v; *p;) {
        const char* c = strchr(p, ',');
        only.emplace_back(p, c ? c - p : strlen(p));
        p = c ? c + 1 : p + strlen(p);
      }
      ++i;
    } else {
      fprintf(stderr, "usage: %s [--sizes MiB,..] [--ctas n,..] [--threads n,..] [--only name,..] [--bidir] [--reps N]\n",
              argv[0]);
      return 2;
    }
  }
  int ndev = 0;
  CK(cudaGetDeviceCount(&ndev));
  if (ndev < 2) {
    fprintf(stderr, "need 2 GPUs, found %d\n", ndev);
    return 1;
  }
  int can01 = 0, can10 = 0;
  CK(cudaDeviceCanAccessPeer(&can01, 0, 1));
  CK(cudaDeviceCanAccessPeer(&can10, 1, 0));
  if (!can01 || !can10) {
    fprintf(stderr, "GPU0 and GPU1 cannot access each other's memory\n");
    return 1;
  }
  std::vector<Strategy> strategies;
  for (const Strategy& s : all_strategies())
    if (only.empty() || std::find(only.begin(), only.end(), s.name) != only.end()) strategies.push_back(s);

  const size_t max_n = (size_t)*std::max_element(sizes_mib.begin(), sizes_mib.end()) << 20;
  const size_t alloc = max_n + 4096;
  Dir dirs[2];
  for (int dev = 0; dev < 2; ++dev) {
    CK(cudaSetDevice(dev));
    CK(cudaDeviceEnablePeerAccess(1 - dev, 0));
    CK(cudaStreamCreateWithFlags(&dirs[dev].stream, cudaStreamNonBlocking));
    dirs[dev].dev = dev;
    CK(cudaMalloc(&dirs[dev].src, alloc));
    {
      uint8_t* p = (uint8_t*)dirs[dev].src;
      size_t len = alloc;
      void* args[] = {&p, &len};
      CK(cudaLaunchKernel((const void*)fill_kernel, dim3(264), dim3(512), args, 0, dirs[dev].stream));
    }
    for (const Strategy& s : strategies)
      if (s.smem > 48 * 1024) CK(cudaFuncSetAttribute(s.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, s.smem));
  }
  for (int dev = 0; dev < 2; ++dev) {
    CK(cudaSetDevice(dev));
    CK(cudaMalloc(&dirs[1 - dev].dst, alloc));  // GPU0's copies land in GPU1's memory and back
    CK(cudaDeviceSynchronize());
  }
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  printf("# put_copy: %s x2, %d SMs, GPU0 -> GPU1%s\n", prop.name, prop.multiProcessorCount,
         bidir ? " and GPU1 -> GPU0 at once (GB/s per direction)" : "");

  // Correctness, once per loop: congruent-unaligned copies (head and tail bytes) and, for the
  // register loops, a non-congruent one; bytes around the destination range must be untouched.
  unsigned long long* bad;
  CK(cudaSetDevice(1));
  CK(cudaMallocManaged(&bad, sizeof(*bad)));
  bool all_ok = true;
  struct Case { size_t n, src_off, dst_off; int ctas, threads; };
  const size_t vn = std::min(max_n, (size_t)64 << 20);
  const Case cases[] = {{vn - 29, 3, 3, 8, 128}, {vn / 3 + 7, 5, 21, 5, 256}, {1000003, 1, 9, 3, 128}, {77, 0, 0, 2, 128}};
  for (const Strategy& s : strategies) {
    unsigned long long total_bad = 0;
    for (const Case& c : cases) {
      CK(cudaSetDevice(1));
      CK(cudaMemset(dirs[0].dst, 0xA5, vn + 64));
      CK(cudaDeviceSynchronize());
      launch(s, dirs[0], c.ctas, c.threads, c.n, c.src_off, c.dst_off);
      CK(cudaSetDevice(0));
      CK(cudaStreamSynchronize(dirs[0].stream));
      CK(cudaSetDevice(1));
      *bad = 0;
      {
        const uint8_t* p = (const uint8_t*)dirs[0].dst;
        size_t total = vn + 64, lo = c.dst_off, hi = c.dst_off + c.n, shift = c.src_off - c.dst_off;
        uint8_t guard = 0xA5;
        void* args[] = {&p, &total, &lo, &hi, &shift, &guard, &bad};
        CK(cudaLaunchKernel((const void*)check_kernel, dim3(264), dim3(512), args, 0, 0));
      }
      CK(cudaDeviceSynchronize());
      if (*bad) printf("# CHECK FAILED %s n=%zu src+%zu dst+%zu: %llu bytes wrong\n", s.name, c.n, c.src_off, c.dst_off, *bad);
      total_bad += *bad;
    }
    all_ok = all_ok && total_bad == 0;
    printf("# check %-10s %s\n", s.name, total_bad == 0 ? "ok" : "FAILED");
  }
  fflush(stdout);

  const auto t_start = std::chrono::steady_clock::now();
  printf("%-10s %9s %5s %7s %8s %5s\n", "strategy", "size_MiB", "ctas", "threads", "GB/s", "runs");
  const int ndirs = bidir ? 2 : 1;
  std::vector<cudaEvent_t> ev[2];
  for (int d = 0; d < ndirs; ++d) {
    CK(cudaSetDevice(d));
    ev[d].resize(2 * (reps + 2));
    for (auto& e : ev[d]) CK(cudaEventCreate(&e));
  }
  for (long mib : sizes_mib) {
    const size_t n = (size_t)mib << 20;
    for (const Strategy& s : strategies) {
      for (long nt : threads) {
        if (!s.any_threads && nt != threads.front()) continue;
        for (long nc : ctas) {
          // Warm-up twice; the second one's time decides how many runs fit in 0.2 s.
          float warm_ms = 0;
          for (int w = 0; w < 2; ++w) {
            for (int d = 0; d < ndirs; ++d) {
              CK(cudaSetDevice(d));
              CK(cudaEventRecord(ev[d][0], dirs[d].stream));
              launch(s, dirs[d], (int)nc, (int)nt, n, 0, 0);
              CK(cudaEventRecord(ev[d][1], dirs[d].stream));
            }
            for (int d = 0; d < ndirs; ++d) {
              CK(cudaSetDevice(d));
              CK(cudaEventSynchronize(ev[d][1]));
              float ms;
              CK(cudaEventElapsedTime(&ms, ev[d][0], ev[d][1]));
              warm_ms = d == 0 ? ms : std::max(warm_ms, ms);
            }
          }
          int runs = reps;
          if (warm_ms * reps > 200.f) runs = std::max(5, (int)(200.f / warm_ms));
          for (int r = 0; r < runs; ++r)
            for (int d = 0; d < ndirs; ++d) {
              CK(cudaSetDevice(d));
              CK(cudaEventRecord(ev[d][2 * r], dirs[d].stream));
              launch(s, dirs[d], (int)nc, (int)nt, n, 0, 0);
              CK(cudaEventRecord(ev[d][2 * r + 1], dirs[d].stream));
            }
          std::vector<float> t(runs, 0.f);
          for (int d = 0; d < ndirs; ++d) {
            CK(cudaSetDevice(d));
            CK(cudaEventSynchronize(ev[d][2 * runs - 1]));
            for (int r = 0; r < runs; ++r) {
              float ms;
              CK(cudaEventElapsedTime(&ms, ev[d][2 * r], ev[d][2 * r + 1]));
              t[r] = std::max(t[r], ms);
            }
          }
          std::sort(t.begin(), t.end());
          const float med = runs % 2 ? t[runs / 2] : 0.5f * (t[runs / 2 - 1] + t[runs / 2]);
          printf("%-10s %9ld %5ld %7ld %8.1f %5d\n", s.name, mib, nc, nt, (double)n / (med * 1e-3) / 1e9, runs);
          fflush(stdout);
        }
      }
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  printf("# timed part took %.1f s; checks %s\n", secs, all_ok ? "all ok" : "FAILED (see above)");
  return all_ok ? 0 : 1;
}
