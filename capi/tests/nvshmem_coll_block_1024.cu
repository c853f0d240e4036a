// Blocks of 1024 threads calling NVSHMEM's block-scope collectives (reductions of every operation
// over a sample of types, reduce-scatter, broadcast, fcollect, alltoall, the barriers), through the
// compatibility headers. No kernel but the reduce-scatter's has __launch_bounds__, so nvcc gives
// ptxas no register limit and a launch succeeds only if the library's code leaves each kernel
// within 64 registers per thread (65536 per SM / 1024). CI compiles it with nvcc --resource-usage (no GPU) and checks every
// kernel named coll_* (examples/compile_cuda.sh); on a GPU it runs as 2 or more PEs (they may
// share the GPU) under torchrun --no-python (capi/tests/gpu_c.sh).
//
// Each kernel runs once as one 1024-thread block per PE, over more elements than the block has
// threads (so every thread combines several) and the team's workspace may hold in one round.
// Every PE checks its result against values it computes on the host. Prints "PE i: 1024-thread
// block collectives correct (K kernels, at most R registers per thread)" and exits 0, or names
// the first wrong value (or the kernel that did not launch) and exits 1.
#include <stdio.h>

#include "nvshmem.h"
#include "nvshmemx.h"

#include "cuda_ok.h"

constexpr int THREADS = 1024;
// Elements per PE: several per thread, and a tail that is not a multiple of the block.
constexpr size_t N = 5 * THREADS + 77;

// ---- the kernels: one collective each ----
#define REDUCE_KERNEL(NAME, T, OP)                                            \
  __global__ void coll_##NAME##_##OP(T *dest, const T *source, size_t n) {    \
    nvshmemx_##NAME##_##OP##_reduce_block(NVSHMEM_TEAM_WORLD, dest, source, n); \
  }
REDUCE_KERNEL(float, float, sum)
REDUCE_KERNEL(double, double, prod)
REDUCE_KERNEL(int, int, min)
REDUCE_KERNEL(longlong, long long, max)
REDUCE_KERNEL(uint, unsigned int, and)
REDUCE_KERNEL(int64, int64_t, or)
REDUCE_KERNEL(uchar, unsigned char, xor)
REDUCE_KERNEL(half, __half, sum)
REDUCE_KERNEL(bfloat16, __nv_bfloat16, max)

// The one kernel with a launch bound: under nvcc a block-scope reduce-scatter still needs 66 to 70
// registers per thread without it (docs/device-footprint.md), so it would not launch at 1024.
__global__ void __launch_bounds__(THREADS) coll_float_sum_reducescatter(float *dest, const float *source, size_t n) {
  nvshmemx_float_sum_reducescatter_block(NVSHMEM_TEAM_WORLD, dest, source, n);
}
__global__ void coll_int_broadcast(int *dest, const int *source, size_t n, int root) {
  nvshmemx_int_broadcast_block(NVSHMEM_TEAM_WORLD, dest, source, n, root);
}
__global__ void coll_broadcastmem(void *dest, const void *source, size_t nbytes, int root) {
  nvshmemx_broadcastmem_block(NVSHMEM_TEAM_WORLD, dest, source, nbytes, root);
}
__global__ void coll_int64_fcollect(int64_t *dest, const int64_t *source, size_t n) {
  nvshmemx_int64_fcollect_block(NVSHMEM_TEAM_WORLD, dest, source, n);
}
__global__ void coll_float_alltoall(float *dest, const float *source, size_t n) {
  nvshmemx_float_alltoall_block(NVSHMEM_TEAM_WORLD, dest, source, n);
}
// The barriers: every thread of every PE adds to a counter on the next PE before the barrier and
// reads its own after it, so a barrier that lets a thread through early reads too little.
__global__ void coll_barrier_all(int *count, int *seen, int right) {
  nvshmem_int_atomic_add(count, 1, right);
  nvshmemx_barrier_all_block();
  seen[threadIdx.x] = nvshmem_int_atomic_fetch(count, nvshmem_my_pe());
}
__global__ void coll_barrier_world(int *count, int *seen, int right) {
  nvshmem_int_atomic_add(count, 1, right);
  nvshmemx_barrier_block(NVSHMEM_TEAM_WORLD);
  seen[threadIdx.x] = nvshmem_int_atomic_fetch(count, nvshmem_my_pe());
}
// sync orders no memory (NVSHMEM's sync_all): only that every PE arrived is checked, with a
// fence before it for the counter.
__global__ void coll_sync_all(int *count, int *seen, int right) {
  nvshmem_int_atomic_add(count, 1, right);
  nvshmem_quiet();
  nvshmemx_sync_all_block();
  seen[threadIdx.x] = nvshmem_int_atomic_fetch(count, nvshmem_my_pe());
}
__global__ void coll_team_sync(int *count, int *seen, int right) {
  nvshmem_int_atomic_add(count, 1, right);
  nvshmem_quiet();
  nvshmemx_team_sync_block(NVSHMEM_TEAM_WORLD);
  seen[threadIdx.x] = nvshmem_int_atomic_fetch(count, nvshmem_my_pe());
}

// ---- host side ----
static int me, npes, wrong, kernels, most_regs;

// Registers of `kernel`; launches it as one 1024-thread block and reports a refused launch.
template <typename K, typename... A>
static bool launch(const char *name, K kernel, A... args) {
  cudaFuncAttributes attr;
  CUDA_OK(cudaFuncGetAttributes(&attr, kernel));
  if (attr.numRegs > most_regs) most_regs = attr.numRegs;
  ++kernels;
  nvshmem_barrier_all();  // every PE's buffers are set before any PE's collective touches them
  kernel<<<1, THREADS>>>(args...);
  const cudaError_t launched = cudaGetLastError();
  if (launched != cudaSuccess) {
    fprintf(stderr, "PE %d: WRONG: %s did not launch at %d threads: %s (%d registers per thread)\n", me, name,
            THREADS, cudaGetErrorString(launched), attr.numRegs);
    wrong = 1;
    return false;
  }
  CUDA_OK(cudaDeviceSynchronize());
  nvshmem_barrier_all();
  return true;
}

template <typename T>
static double as_double(T v) {
  return (double)v;
}
template <>
double as_double<__half>(__half v) {
  return (double)__half2float(v);
}
template <>
double as_double<__nv_bfloat16>(__nv_bfloat16 v) {
  return (double)__bfloat162float(v);
}

// Small integers, exact in every type checked (the half sum of 8 PEs stays below 2048).
static long long value(int pe, size_t i) { return (long long)((pe * 5 + i * 3) % 29) + 1; }

static void check(const char *name, size_t i, double got, double expected) {
  if (!wrong && got != expected) {
    fprintf(stderr, "PE %d: WRONG: %s: dest[%zu] = %g, expected %g\n", me, name, i, got, expected);
    wrong = 1;
  }
}

enum Op { SUM, PROD, MIN, MAX, AND, OR, XOR };

template <typename T, typename K>
static void reduce(const char *name, K kernel, Op op, bool scatter) {
  const size_t total = scatter ? N * (size_t)npes : N;
  T *src = (T *)nvshmem_malloc(total * sizeof(T)), *dst = (T *)nvshmem_malloc(N * sizeof(T));
  T *host = (T *)malloc(total * sizeof(T));
  // Products stay exact: PROD uses values of 1 and 2 only.
  for (size_t i = 0; i < total; ++i) host[i] = (T)(op == PROD ? 1 + value(me, i) % 2 : value(me, i));
  CUDA_OK(cudaMemcpy(src, host, total * sizeof(T), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(dst, 0, N * sizeof(T)));
  CUDA_OK(cudaDeviceSynchronize());
  if (launch(name, kernel, dst, (const T *)src, N)) {
    CUDA_OK(cudaMemcpy(host, dst, N * sizeof(T), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < N; ++i) {
      const size_t at = scatter ? (size_t)me * N + i : i;
      long long acc = 0;
      for (int pe = 0; pe < npes; ++pe) {
        const long long v = op == PROD ? 1 + value(pe, at) % 2 : value(pe, at);
        if (pe == 0) acc = v;
        else if (op == SUM) acc += v;
        else if (op == PROD) acc *= v;
        else if (op == MIN) acc = v < acc ? v : acc;
        else if (op == MAX) acc = v > acc ? v : acc;
        else if (op == AND) acc &= v;
        else if (op == OR) acc |= v;
        else acc ^= v;
      }
      check(name, i, as_double(host[i]), (double)acc);
    }
  }
  free(host);
  nvshmem_free(src);
  nvshmem_free(dst);
}

// broadcast / fcollect / alltoall of int-valued elements: `expect(i)` is dest[i] on this PE.
template <typename T, typename K, typename E, typename... A>
static void move(const char *name, K kernel, size_t src_elems, size_t dst_elems, E expect, A... extra) {
  T *src = (T *)nvshmem_malloc(src_elems * sizeof(T)), *dst = (T *)nvshmem_malloc(dst_elems * sizeof(T));
  T *host = (T *)malloc((src_elems > dst_elems ? src_elems : dst_elems) * sizeof(T));
  for (size_t i = 0; i < src_elems; ++i) host[i] = (T)(me * 100000 + (long long)i);
  CUDA_OK(cudaMemcpy(src, host, src_elems * sizeof(T), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(dst, 0, dst_elems * sizeof(T)));
  CUDA_OK(cudaDeviceSynchronize());
  if (launch(name, kernel, dst, (const T *)src, N, extra...)) {
    CUDA_OK(cudaMemcpy(host, dst, dst_elems * sizeof(T), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < dst_elems; ++i) check(name, i, (double)host[i], (double)expect(i));
  }
  free(host);
  nvshmem_free(src);
  nvshmem_free(dst);
}

template <typename K>
static void barrier(const char *name, K kernel) {
  int *count = (int *)nvshmem_malloc(sizeof(int));
  int *seen = (int *)nvshmem_malloc(THREADS * sizeof(int));
  CUDA_OK(cudaMemset(count, 0, sizeof(int)));
  CUDA_OK(cudaDeviceSynchronize());
  if (launch(name, kernel, count, seen, (me + 1) % npes)) {
    int host[THREADS];
    CUDA_OK(cudaMemcpy(host, seen, sizeof host, cudaMemcpyDeviceToHost));
    for (int t = 0; t < THREADS; ++t) {
      // The left neighbour's 1024 adds all precede the barrier; later ones cannot exist.
      check(name, (size_t)t, host[t], THREADS);
    }
  }
  nvshmem_free(count);
  nvshmem_free(seen);
}

int main() {
  nvshmem_init();
  me = nvshmem_my_pe();
  npes = nvshmem_n_pes();
  reduce<float>("float_sum_reduce_block", coll_float_sum, SUM, false);
  reduce<double>("double_prod_reduce_block", coll_double_prod, PROD, false);
  reduce<int>("int_min_reduce_block", coll_int_min, MIN, false);
  reduce<long long>("longlong_max_reduce_block", coll_longlong_max, MAX, false);
  reduce<unsigned int>("uint_and_reduce_block", coll_uint_and, AND, false);
  reduce<int64_t>("int64_or_reduce_block", coll_int64_or, OR, false);
  reduce<unsigned char>("uchar_xor_reduce_block", coll_uchar_xor, XOR, false);
  reduce<__half>("half_sum_reduce_block", coll_half_sum, SUM, false);
  reduce<__nv_bfloat16>("bfloat16_max_reduce_block", coll_bfloat16_max, MAX, false);
  reduce<float>("float_sum_reducescatter_block", coll_float_sum_reducescatter, SUM, true);
  const int root = npes - 1;
  move<int>("int_broadcast_block", coll_int_broadcast, N, N, [&](size_t i) { return root * 100000 + (long long)i; },
            root);
  move<char>("broadcastmem_block", coll_broadcastmem, N, N,
             [&](size_t i) { return (long long)(char)(root * 100000 + (long long)i); }, root);
  move<int64_t>("int64_fcollect_block", coll_int64_fcollect, N, N * npes,
                [&](size_t i) { return (long long)(i / N) * 100000 + (long long)(i % N); });
  move<float>("float_alltoall_block", coll_float_alltoall, N * npes, N * npes,
              [&](size_t i) { return (long long)(i / N) * 100000 + (long long)(me * N + i % N); });
  barrier("barrier_all_block", coll_barrier_all);
  barrier("barrier_block", coll_barrier_world);
  barrier("sync_all_block", coll_sync_all);
  barrier("team_sync_block", coll_team_sync);
  if (!wrong) {
    printf("PE %d: %d-thread block collectives correct (%d kernels, at most %d registers per thread)\n", me, THREADS,
           kernels, most_regs);
  }
  nvshmem_finalize();
  return wrong;
}
