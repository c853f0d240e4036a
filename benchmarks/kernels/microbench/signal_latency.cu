// Where the time of an 8-byte put-with-signal ping-pong goes (GPU0 <-> GPU1 over NVLink).
//
// One process, two GPUs, peer access enabled; one warp per GPU, thread 0 does the work. GPU0
// puts 8 bytes of data and a signal into GPU1's memory, GPU1 waits for the signal, checks the
// data and answers the same way; the value is the half round trip (time / rounds / 2, read with
// %globaltimer on GPU0, after an untimed first round that absorbs the launch skew). Variants of
// the sender and the waiter, with the device library's instructions (triton-lib/src/atomic_device.h):
//   release     data st + st.release.sys signal; wait with ld.acquire.sys     (rshmem's putmem_signal)
//   fence       data st + fence.acq_rel.sys + st.relaxed.sys signal; ld.acquire.sys wait
//   fence_sc    data st + fence.sc.sys + st.relaxed.sys signal; ld.acquire.sys wait
//   relaxed_wait  release sender; wait polls ld.relaxed.sys, then fence.acq_rel.sys once
//   flag_only   no data: st.relaxed.sys of the signal only (as int_p + wait_until)
//   gpu_scope   data st + st.release.gpu signal: NOT a correct release for a peer GPU (the
//               scope does not include it); measured only to show what the .sys scope costs
//   unordered   data st + st.relaxed.sys signal, no fence: NOT ordered; the lower bound
// Each run checks the data that arrived with every signal and reports the rounds where it was
// stale (expected 0 for the correct variants; the incorrect ones may or may not show it).
//
// Build and run (GPU machine, nvcc 13):
//   nvcc -O3 -std=c++17 -arch=sm_90 -o /tmp/signal_latency benchmarks/kernels/microbench/signal_latency.cu && /tmp/signal_latency
// Options: --rounds N (default 20000)  --reps N (launches per variant, median; default 7)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

// The device library's primitives (triton-lib/src/atomic_device.h), spelled out: its headers use
// clang's NVVM builtins, which nvcc does not have.
__device__ __forceinline__ uint64_t ld_acquire_sys(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.b64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ uint64_t ld_relaxed_sys(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.relaxed.sys.b64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_release_sys(uint64_t* p, uint64_t v) {
  asm volatile("st.release.sys.b64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void st_relaxed_sys(uint64_t* p, uint64_t v) {
  asm volatile("st.relaxed.sys.b64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void fence_acq_rel_sys() { asm volatile("fence.acq_rel.sys;" ::: "memory"); }
__device__ __forceinline__ void fence_sc_sys() { asm volatile("fence.sc.sys;" ::: "memory"); }

#define CK(call)                                                                              \
  do {                                                                                        \
    cudaError_t e_ = (call);                                                                  \
    if (e_ != cudaSuccess) {                                                                  \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      exit(1);                                                                                \
    }                                                                                         \
  } while (0)

enum Variant { V_RELEASE, V_FENCE, V_FENCE_SC, V_RELAXED_WAIT, V_FLAG_ONLY, V_GPU_SCOPE, V_UNORDERED, V_COUNT };
static const char* kNames[V_COUNT] = {"release", "fence", "fence_sc", "relaxed_wait", "flag_only", "gpu_scope",
                                      "unordered"};
static const bool kCorrect[V_COUNT] = {true, true, true, true, true, false, false};

__device__ __forceinline__ void st_release_gpu(uint64_t* p, uint64_t v) {
  asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

template <int V>
__device__ __forceinline__ void send(uint64_t* data, uint64_t* sig, uint64_t v) {
  if constexpr (V != V_FLAG_ONLY) *(volatile uint64_t*)data = v;
  if constexpr (V == V_RELEASE || V == V_RELAXED_WAIT) {
    st_release_sys(sig, v);
  } else if constexpr (V == V_FENCE) {
    fence_acq_rel_sys();
    st_relaxed_sys(sig, v);
  } else if constexpr (V == V_FENCE_SC) {
    fence_sc_sys();
    st_relaxed_sys(sig, v);
  } else if constexpr (V == V_GPU_SCOPE) {
    st_release_gpu(sig, v);
  } else {
    st_relaxed_sys(sig, v);
  }
}

template <int V>
__device__ __forceinline__ void wait_for(const uint64_t* sig, uint64_t v) {
  if constexpr (V == V_RELAXED_WAIT) {
    while (ld_relaxed_sys(sig) < v) {
    }
    fence_acq_rel_sys();
  } else {
    while (ld_acquire_sys(sig) < v) {
    }
  }
}

// `mine_*` live on this GPU (the peer writes them); `peer_*` on the other GPU.
template <int V>
__global__ void pingpong(int first, uint64_t* mine_data, uint64_t* mine_sig, uint64_t* peer_data, uint64_t* peer_sig,
                         long rounds, unsigned long long* ns, unsigned long long* stale) {
  if (threadIdx.x != 0) return;
  unsigned long long t0 = 0, bad = 0;
  for (long r = 0; r <= rounds; ++r) {
    if (r == 1) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    const uint64_t v = 2 * (uint64_t)r + 1;
    if (first) {
      send<V>(peer_data, peer_sig, v);
      wait_for<V>(mine_sig, v);
    } else {
      wait_for<V>(mine_sig, v);
      send<V>(peer_data, peer_sig, v);
    }
    if constexpr (V != V_FLAG_ONLY) bad += *(volatile uint64_t*)mine_data != v;
  }
  unsigned long long t1;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
  *ns = t1 - t0;
  *stale = bad;
}

template <int V>
static void launch(int dev, cudaStream_t s, int first, uint64_t* words[2], long rounds, unsigned long long* out) {
  CK(cudaSetDevice(dev));
  uint64_t* mine = words[dev];
  uint64_t* peer = words[1 - dev];
  // data at word 0, signal at word 16 (another 128-byte line)
  pingpong<V><<<1, 32, 0, s>>>(first, mine, mine + 16, peer, peer + 16, rounds, out, out + 1);
  CK(cudaGetLastError());
}

typedef void (*Launcher)(int, cudaStream_t, int, uint64_t**, long, unsigned long long*);
static const Launcher kLaunch[V_COUNT] = {launch<V_RELEASE>,   launch<V_FENCE>,     launch<V_FENCE_SC>,
                                          launch<V_RELAXED_WAIT>, launch<V_FLAG_ONLY>, launch<V_GPU_SCOPE>,
                                          launch<V_UNORDERED>};

int main(int argc, char** argv) {
  long rounds = 20000;
  int reps = 7;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : "";
    if (a == "--rounds") rounds = atol(v), ++i;
    else if (a == "--reps") reps = atoi(v), ++i;
    else {
      fprintf(stderr, "usage: %s [--rounds N] [--reps N]\n", argv[0]);
      return 2;
    }
  }
  int ndev = 0, can = 0;
  CK(cudaGetDeviceCount(&ndev));
  if (ndev < 2) {
    fprintf(stderr, "need 2 GPUs, found %d\n", ndev);
    return 1;
  }
  CK(cudaDeviceCanAccessPeer(&can, 0, 1));
  if (!can) {
    fprintf(stderr, "GPU0 cannot access GPU1's memory\n");
    return 1;
  }
  uint64_t* words[2];
  unsigned long long* out[2];
  cudaStream_t streams[2];
  for (int dev = 0; dev < 2; ++dev) {
    CK(cudaSetDevice(dev));
    CK(cudaDeviceEnablePeerAccess(1 - dev, 0));
    CK(cudaStreamCreateWithFlags(&streams[dev], cudaStreamNonBlocking));
    CK(cudaMalloc((void**)&words[dev], 4096));
    CK(cudaMallocHost((void**)&out[dev], 2 * sizeof(unsigned long long)));
  }
  printf("%-14s %12s %12s %12s %8s\n", "variant", "half-rt us", "min us", "max us", "stale");
  for (int v = 0; v < V_COUNT; ++v) {
    std::vector<double> us;
    unsigned long long stale = 0;
    for (int rep = 0; rep < reps; ++rep) {
      for (int dev = 0; dev < 2; ++dev) {
        CK(cudaSetDevice(dev));
        CK(cudaMemset(words[dev], 0, 4096));
        CK(cudaDeviceSynchronize());
      }
      kLaunch[v](1, streams[1], 0, words, rounds, out[1]);
      kLaunch[v](0, streams[0], 1, words, rounds, out[0]);
      for (int dev = 0; dev < 2; ++dev) {
        CK(cudaSetDevice(dev));
        CK(cudaStreamSynchronize(streams[dev]));
      }
      us.push_back(out[0][0] / 1e3 / rounds / 2);
      stale += out[0][1] + out[1][1];
    }
    std::sort(us.begin(), us.end());
    printf("%-14s %12.3f %12.3f %12.3f %8llu%s\n", kNames[v], us[us.size() / 2], us.front(), us.back(), stale,
           kCorrect[v] ? "" : "   (not a correct release: reference only)");
  }
  return 0;
}
