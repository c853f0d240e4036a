/* nvshmemx_buffer_register_symmetric in NVSHMEM's style, as 2 or more PEs (sharing one GPU where
   there is one): every PE makes a buffer of its own with the driver's virtual memory API
   (cuMemCreate with a POSIX file descriptor handle, cuMemAddressReserve, cuMemMap), registers
   it, and then
   - puts into the next PE's registered buffer from a kernel (nvshmem_float_p, nvshmemx_putmem_block),
     and reads what the previous PE put through its OWN address of the buffer (the same memory);
   - sums the registered buffers of all PEs on a stream (nvshmemx_float_sum_reduce_on_stream);
   - checks what is refused: unregistering with another size, registering cudaMalloc memory;
   - unregisters it, registers it again (the same symmetric address, its bytes kept), allocates
     with nvshmem_malloc after, and unregisters before nvshmem_finalize.
   Prints "PE i: N checks of registered buffers correct" and exits 0, or names the first wrong
   value and exits 1.  Built by capi/tests/gpu_c.sh (run) and examples/compile_cuda.sh (compile). */
#include <nvshmem.h>
#include <nvshmemx.h>

#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "cuda_ok.h"

#define CU(call)                                                                 \
  do {                                                                           \
    CUresult r_ = (call);                                                        \
    if (r_ != CUDA_SUCCESS) {                                                    \
      const char *s_ = "?";                                                      \
      cuGetErrorString(r_, &s_);                                                 \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, s_);         \
      exit(1);                                                                   \
    }                                                                            \
  } while (0)
/* The program's own buffer: `size` bytes of device `dev`, exportable to the PEs of this host. */
static void *user_buffer(int dev, size_t size) {
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  CUmemGenericAllocationHandle handle;
  CU(cuMemCreate(&handle, size, &prop, 0));
  CUdeviceptr at;
  CU(cuMemAddressReserve(&at, size, 0, 0, 0));
  CU(cuMemMap(at, size, 0, handle, 0));
  CU(cuMemRelease(handle)); /* the mapping keeps the memory */
  CUmemAccessDesc access = {};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CU(cuMemSetAccess(at, size, &access, 1));
  return (void *)at;
}

static size_t granularity(int dev) {
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  size_t g = 0;
  CU(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  return g;
}

/* Thread i puts element i into the next PE's registered buffer, then block b puts its part of
   `src` (symmetric, from nvshmem_malloc) after them. */
__global__ void put_next(float *reg, const float *src, int n) {
  int me = nvshmem_my_pe(), next = (me + 1) % nvshmem_n_pes();
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) nvshmem_float_p(reg + i, (float)(me * 100000 + i), next);
  int first = blockIdx.x * blockDim.x;
  int count = min((int)blockDim.x, n - first);
  if (count > 0) nvshmemx_putmem_block(reg + n + first, src + first, count * sizeof(float), next);
}

__global__ void fill(float *x, int n, float base) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = base + (float)i;
}

int main(void) {
  nvshmem_init();
  const int me = nvshmem_my_pe(), npes = nvshmem_n_pes();
  const int prev = (me + npes - 1) % npes;
  int ndev = 0;
  CUDA_OK(cudaGetDeviceCount(&ndev));
  const int dev = nvshmem_team_my_pe(NVSHMEMX_TEAM_NODE) % ndev;
  CUDA_OK(cudaSetDevice(dev));
  const size_t size = 2 * granularity(dev);
  const int n = 4096;

  float *buffer = (float *)user_buffer(dev, size);
  float *reg = (float *)nvshmemx_buffer_register_symmetric(buffer, size, 0);
  CHECK(reg != NULL, "registering %zu bytes failed", size);
  CHECK(reg != buffer, "the symmetric address is the heap's, not the program's");
  for (int pe = 0; pe < npes; pe++) CHECK(nvshmem_ptr(reg, pe) != NULL, "nvshmem_ptr(reg, %d)", pe);

  /* Kernel puts into the next PE's buffer, read back through this PE's own address. */
  float *src = (float *)nvshmem_malloc(n * sizeof(float));
  fill<<<(n + 255) / 256, 256>>>(src, n, (float)(me * 1000));
  CUDA_OK(cudaMemset(buffer, 0, 2 * n * sizeof(float)));
  CUDA_OK(cudaDeviceSynchronize());
  nvshmem_barrier_all();
  put_next<<<(n + 511) / 512, 512>>>(reg, src, n);
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaDeviceSynchronize());
  nvshmem_barrier_all();
  float *host = (float *)malloc(2 * n * sizeof(float));
  CUDA_OK(cudaMemcpy(host, buffer, 2 * n * sizeof(float), cudaMemcpyDeviceToHost));
  int wrong = 0;
  for (int i = 0; i < n; i++) {
    wrong += host[i] != (float)(prev * 100000 + i);
    wrong += host[n + i] != (float)(prev * 1000 + i);
  }
  CHECK(wrong == 0, "%d wrong values from PE %d's puts (first: %g)", wrong, prev, host[0]);

  /* NVIDIA's user-buffer example's use: a reduction on a stream over registered memory. */
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  fill<<<(n + 255) / 256, 256, 0, stream>>>(reg, n, (float)me);
  nvshmemx_barrier_on_stream(NVSHMEM_TEAM_WORLD, stream);
  nvshmemx_float_sum_reduce_on_stream(NVSHMEM_TEAM_WORLD, reg + n, reg, n, stream);
  CUDA_OK(cudaStreamSynchronize(stream));
  CUDA_OK(cudaMemcpy(host, reg + n, n * sizeof(float), cudaMemcpyDeviceToHost));
  const float pes_sum = (float)(npes * (npes - 1) / 2);
  for (int i = 0; i < n; i++) wrong += host[i] != pes_sum + (float)npes * i;
  CHECK(wrong == 0, "%d wrong sums (first: %g, expected %g)", wrong, host[0], pes_sum);
  nvshmem_barrier_all();

  /* What is refused, alike on every PE. */
  CHECK(nvshmemx_buffer_unregister_symmetric(reg, size / 2) == NVSHMEMX_ERROR_INVALID_VALUE, "unregister with half the size");
  void *plain = NULL;
  CUDA_OK(cudaMalloc(&plain, size));
  CHECK(nvshmemx_buffer_register_symmetric(plain, size, 0) == NULL, "cudaMalloc memory refused");
  CUDA_OK(cudaFree(plain));

  /* Unregistered, registered again: the same symmetric address, the program's bytes kept. */
  CHECK(nvshmemx_buffer_unregister_symmetric(reg, size) == NVSHMEMX_SUCCESS, "unregister");
  CHECK(nvshmemx_buffer_unregister_symmetric(reg, size) == NVSHMEMX_ERROR_INVALID_VALUE, "unregister twice");
  float *again = (float *)nvshmemx_buffer_register_symmetric(buffer, size, 0);
  CHECK(again == reg, "registered again at %p, first at %p", (void *)again, (void *)reg);
  CUDA_OK(cudaMemcpy(host, again + n, n * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(host[1] == pes_sum + (float)npes, "the buffer's bytes after registering again: %g", host[1]);
  float *more = (float *)nvshmem_malloc(size);
  CHECK(more != NULL && (more + size / sizeof(float) <= again || more >= again + size / sizeof(float)),
        "nvshmem_malloc after a registration overlaps it");
  nvshmem_free(more);
  nvshmem_free(src);
  CHECK(nvshmemx_buffer_unregister_symmetric(again, size) == NVSHMEMX_SUCCESS, "unregister at the end");
  nvshmem_barrier_all();
  printf("PE %d: %d checks of registered buffers correct\n", me, checks);
  free(host);
  CUDA_OK(cudaStreamDestroy(stream));
  nvshmem_finalize();
  CU(cuMemUnmap((CUdeviceptr)buffer, size));
  CU(cuMemAddressFree((CUdeviceptr)buffer, size));
  return 0;
}
